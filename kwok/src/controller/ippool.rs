//! Pod IPs handed out from `--cidr`, reused once released.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;

/// A pool of pod IPs per CIDR string (docs/reference/kwok-rules.md §1.6).
#[derive(Debug, Default)]
pub(super) struct IpPool {
    pub(super) next: HashMap<String, u32>,
    pub(super) free: HashMap<String, BTreeSet<u32>>,
}

impl IpPool {
    pub(super) fn base(cidr: &str) -> u32 {
        cidr.split('/')
            .next()
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
            .map_or(0x0a00_0000, u32::from)
    }

    pub(super) fn allocate(&mut self, cidr: &str) -> String {
        if let Some(ip) = self.free.get_mut(cidr).and_then(|f| f.pop_first()) {
            return Ipv4Addr::from(ip).to_string();
        }
        let k = self.next.entry(cidr.to_string()).or_insert(0);
        *k += 1;
        Ipv4Addr::from(Self::base(cidr).wrapping_add(*k)).to_string()
    }

    pub(super) fn release(&mut self, cidr: &str, ip: &str) {
        if let Ok(ip) = ip.parse::<Ipv4Addr>() {
            let ip = u32::from(ip);
            let base = Self::base(cidr);
            if ip > base && ip - base <= self.next.get(cidr).copied().unwrap_or(0) {
                self.free.entry(cidr.to_string()).or_default().insert(ip);
            }
        }
    }
}
