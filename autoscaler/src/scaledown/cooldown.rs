//! Scale-down cooldown (docs/reference/ca-rules.md §3.1): no scale-down for
//! `--scale-down-delay-after-add` after a scale-up,
//! `--scale-down-delay-after-delete` after a deletion started and
//! `--scale-down-delay-after-failure` after a failure; nor while every
//! pending pod is too new. With `--scale-down-delay-type-local` the delays
//! apply per node group and only the too-new-pods wait is global.

use std::collections::HashMap;
use std::time::SystemTime;

use crate::config::Flags;

/// When a group last changed, for the per-group delays.
#[derive(Debug, Clone, Copy, Default)]
struct GroupActivity {
    scale_up: Option<SystemTime>,
    deletion: Option<SystemTime>,
    delete_failure: Option<SystemTime>,
}

/// What the delays count from, cluster-wide and per group.
#[derive(Debug, Default)]
pub struct Cooldown {
    last_scale_up: Option<SystemTime>,
    last_scale_down_failure: Option<SystemTime>,
    last_deletion: Option<SystemTime>,
    groups: HashMap<String, GroupActivity>,
    pods_too_new: bool,
    scaled_up_now: bool,
}

impl Cooldown {
    /// This loop's scale-up: whether it found every pending pod too new,
    /// and the groups it increased.
    pub fn record_scale_up(&mut self, pods_too_new: bool, groups: &[String], now: SystemTime) {
        self.pods_too_new = pods_too_new;
        self.scaled_up_now = !groups.is_empty();
        if groups.is_empty() {
            return;
        }
        self.last_scale_up = Some(now);
        for g in groups {
            self.groups.entry(g.clone()).or_default().scale_up = Some(now);
        }
    }

    /// A check-capacity ProvisioningRequest found room: a scale-up for the
    /// cluster-wide cooldown, in no group.
    pub fn record_capacity_found(&mut self, now: SystemTime) {
        self.last_scale_up = Some(now);
    }

    /// Deletions started in these groups.
    pub fn deletions_started(&mut self, groups: &[String], now: SystemTime) {
        self.last_deletion = Some(now);
        for g in groups {
            self.groups.entry(g.clone()).or_default().deletion = Some(now);
        }
    }

    /// Starting deletions failed.
    pub fn deletions_failed_to_start(&mut self, now: SystemTime) {
        self.last_scale_down_failure = Some(now);
    }

    /// A group's cloud deletion failed.
    pub fn cloud_deletion_failed(&mut self, group: &str, now: SystemTime) {
        self.groups
            .entry(group.to_string())
            .or_default()
            .delete_failure = Some(now);
    }

    /// Whether scale-down waits this loop.
    pub fn in_cooldown(&self, f: &Flags, now: SystemTime) -> bool {
        if self.pods_too_new {
            return true;
        }
        if f.scale_down_delay_type_local {
            return false;
        }
        self.scaled_up_now
            || self
                .last_scale_up
                .is_some_and(|t| t + f.scale_down_delay_after_add > now)
            || self
                .last_scale_down_failure
                .is_some_and(|t| t + f.scale_down_delay_after_failure > now)
            || self
                .last_deletion
                .is_some_and(|t| t + f.scale_down_delay_after_delete > now)
    }

    /// With `--scale-down-delay-type-local`: whether a group's own
    /// scale-up, deletion or failed cloud deletion is within its delay.
    pub fn group_in_delay(&self, f: &Flags, group: &str, now: SystemTime) -> bool {
        if !f.scale_down_delay_type_local {
            return false;
        }
        let Some(a) = self.groups.get(group) else {
            return false;
        };
        a.scale_up
            .is_some_and(|t| t + f.scale_down_delay_after_add > now)
            || a.deletion
                .is_some_and(|t| t + f.scale_down_delay_after_delete > now)
            || a.delete_failure
                .is_some_and(|t| t + f.scale_down_delay_after_failure > now)
    }
}
