//! The structured-parameters allocator (k8s.io/dynamic-resource-allocation
//! `structured`): finds devices on one node for a pod's unallocated claims.
//!
//! The devices a node can reach are those of slices local to it
//! (`nodeName`), of slices for all nodes, and of slices whose
//! `nodeSelector` matches it; a pool counts only in its newest generation,
//! and a pool missing some of that generation's slices is incomplete
//! (its devices are not offered, and an `All` request over it fails).
//! A request takes devices of its class that pass the class's selectors
//! and its own, not allocated to another claim nor taken by an earlier
//! request of this pod: `ExactCount` takes `count` of them (1 by
//! default), `All` every matching device (failing when one is in use or
//! none matches); `firstAvailable` tries its alternatives in order.
//! `matchAttribute` constraints hold across the requests they name. The
//! search backtracks over devices and alternatives, as upstream's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use kubecel::device::{Device as CelDevice, Selector};

use super::api::{
    AllocationResult, Device, DeviceAllocationResult, DeviceAttribute, DeviceClass, DeviceId,
    DeviceRequestAllocationResult, DeviceSelector, ExactDeviceRequest, ResourceClaim,
    ResourceSlice,
};
use super::refusal::AllocationError;
use crate::labels::node_matches_selector;

/// A selector compiled, or why it does not compile.
pub type Compiled = Arc<Result<Selector, String>>;

/// Compiled selectors, by expression: a selector is compiled once per
/// process (claims and classes repeat the same few).
static COMPILED: LazyLock<Mutex<HashMap<String, Compiled>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// `expression` compiled (or its compile error), from the cache.
pub fn compiled(expression: &str) -> Compiled {
    let mut cache = match COMPILED.lock() {
        Ok(c) => c,
        Err(poisoned) => poisoned.into_inner(),
    };
    if cache.len() > 4096 {
        cache.clear();
    }
    cache
        .entry(expression.to_string())
        .or_insert_with(|| Arc::new(Selector::compile(expression)))
        .clone()
}

/// A device a node can reach.
#[derive(Debug, Clone)]
struct Candidate<'a> {
    id: DeviceId,
    device: &'a Device,
    /// The slice is local to the node.
    node_local: bool,
    /// The slice's node selector, if it has one.
    selector: Option<&'a NodeSelector>,
    /// Its pool is missing slices.
    incomplete: bool,
}

/// The devices of `slices` that `node` can reach, in slice order.
fn candidates<'a>(node: &Node, slices: &[&'a ResourceSlice]) -> Vec<Candidate<'a>> {
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    // (driver, pool) → (newest generation, slices seen of it, slices expected).
    let mut pools: BTreeMap<(&str, &str), (i64, i64, i64)> = BTreeMap::new();
    for s in slices {
        let p = &s.spec.pool;
        let e = pools
            .entry((s.spec.driver.as_str(), p.name.as_str()))
            .or_insert((p.generation, 0, p.resource_slice_count));
        if p.generation > e.0 {
            *e = (p.generation, 0, p.resource_slice_count);
        }
        if p.generation == e.0 {
            e.1 += 1;
        }
    }
    let mut out = Vec::new();
    for s in slices {
        let spec = &s.spec;
        let Some(&(generation, seen, expected)) =
            pools.get(&(spec.driver.as_str(), spec.pool.name.as_str()))
        else {
            continue;
        };
        if spec.pool.generation != generation {
            continue;
        }
        let node_local = spec.node_name.as_deref() == Some(node_name);
        let reachable = node_local
            || spec.all_nodes == Some(true)
            || spec
                .node_selector
                .as_ref()
                .is_some_and(|sel| node_matches_selector(node, sel));
        if !reachable {
            continue;
        }
        for d in &spec.devices {
            out.push(Candidate {
                id: DeviceId {
                    driver: spec.driver.clone(),
                    pool: spec.pool.name.clone(),
                    device: d.name.clone(),
                },
                device: d,
                node_local,
                selector: spec.node_selector.as_ref(),
                incomplete: seen < expected.max(1),
            });
        }
    }
    out
}

/// One request to satisfy: a claim's request and its alternatives.
struct Slot<'a> {
    claim: usize,
    name: &'a str,
    /// (`request` or `request/subrequest` name, the request) in order of preference.
    alternatives: Vec<(String, ExactDeviceRequest)>,
}

/// The allocator's inputs besides the node.
pub struct Allocator<'a> {
    /// DeviceClasses by name.
    pub classes: &'a HashMap<String, Arc<DeviceClass>>,
    /// Devices allocated to claims (other than those being allocated).
    pub allocated: &'a HashSet<DeviceId>,
}

/// The search's state.
struct Search<'a, 'c> {
    claims: &'c [&'c ResourceClaim],
    slots: Vec<Slot<'c>>,
    candidates: Vec<Candidate<'a>>,
    /// Per slot and alternative: the candidates that match, or the error.
    matching: Vec<Vec<Result<Vec<usize>, AllocationError>>>,
    taken: HashSet<usize>,
    /// Per slot: (alternative name, candidates taken).
    chosen: Vec<(String, Vec<usize>)>,
    allocated: &'c HashSet<DeviceId>,
    /// The first error met (reported when nothing fits).
    error: Option<AllocationError>,
}

impl<'a> Allocator<'a> {
    /// Allocations for `claims` (none allocated yet) on `node`, one per
    /// claim in order; `Ok(None)` when the node's devices cannot satisfy
    /// them; an error when a request cannot be evaluated (a missing
    /// class, a selector that fails).
    pub fn allocate(
        &self,
        claims: &[&ResourceClaim],
        node: &Node,
        slices: &[&ResourceSlice],
    ) -> Result<Option<Vec<AllocationResult>>, AllocationError> {
        let mut slots = Vec::new();
        for (ci, claim) in claims.iter().enumerate() {
            for r in &claim.spec.devices.requests {
                let alternatives = match (&r.exactly, r.first_available.is_empty()) {
                    (Some(e), _) => vec![(r.name.clone(), e.clone())],
                    (None, false) => r
                        .first_available
                        .iter()
                        .map(|s| (format!("{}/{}", r.name, s.name), s.request.clone()))
                        .collect(),
                    (None, true) => continue,
                };
                slots.push(Slot {
                    claim: ci,
                    name: &r.name,
                    alternatives,
                });
            }
        }
        let candidates = candidates(node, slices);
        let mut search = Search {
            claims,
            matching: Vec::new(),
            candidates,
            taken: HashSet::new(),
            chosen: Vec::new(),
            allocated: self.allocated,
            error: None,
            slots: Vec::new(),
        };
        search.matching = slots
            .iter()
            .map(|slot| {
                slot.alternatives
                    .iter()
                    .map(|(_, req)| {
                        self.matching(claims[slot.claim], slot.name, req, &search.candidates)
                    })
                    .collect()
            })
            .collect();
        search.slots = slots;
        if search.solve(0) {
            return Ok(Some(search.results(node)));
        }
        match search.error {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// The candidates that pass the class's and the request's selectors.
    fn matching(
        &self,
        claim: &ResourceClaim,
        request: &str,
        req: &ExactDeviceRequest,
        candidates: &[Candidate<'_>],
    ) -> Result<Vec<usize>, AllocationError> {
        let class = self.classes.get(&req.device_class_name).ok_or_else(|| {
            AllocationError::ClassNotFound {
                claim: claim.key(),
                request: request.to_string(),
                class: req.device_class_name.clone(),
            }
        })?;
        let selectors = |list: &[DeviceSelector]| -> Vec<Compiled> {
            list.iter()
                .filter_map(|s| s.cel.as_ref())
                .map(|c| compiled(&c.expression))
                .collect()
        };
        let class_selectors = selectors(&class.spec.selectors);
        let request_selectors = selectors(&req.selectors);
        let mut out = Vec::new();
        for (i, c) in candidates.iter().enumerate() {
            let device = cel_device(&c.id.driver, c.device);
            let mut ok = true;
            for (owner, list) in [(None, &class_selectors), (Some(()), &request_selectors)] {
                for (n, sel) in list.iter().enumerate() {
                    let matched = match sel.as_ref() {
                        Ok(s) => s.matches(&device),
                        Err(e) => Err(e.clone()),
                    };
                    match matched {
                        Ok(true) => {}
                        Ok(false) => ok = false,
                        Err(message) => {
                            return Err(AllocationError::Cel {
                                owner: match owner {
                                    None => format!("class {}", class.metadata.name),
                                    Some(()) => format!("claim {}", claim.key()),
                                },
                                request: request.to_string(),
                                selector: n,
                                message,
                            });
                        }
                    }
                    if !ok {
                        break;
                    }
                }
                if !ok {
                    break;
                }
            }
            if ok {
                out.push(i);
            }
        }
        Ok(out)
    }
}

/// A device as its selectors see it.
fn cel_device<'d>(driver: &'d str, device: &'d Device) -> CelDevice<'d> {
    CelDevice {
        driver,
        attributes: device
            .attributes
            .iter()
            .filter_map(|(k, v)| v.as_cel().map(|a| (k.as_str(), a)))
            .collect(),
        capacity: device
            .capacity
            .iter()
            .map(|(k, v)| (k.as_str(), v.value.as_str()))
            .collect(),
    }
}

impl Search<'_, '_> {
    fn free(&self, i: usize) -> bool {
        !self.taken.contains(&i) && !self.allocated.contains(&self.candidates[i].id)
    }

    /// Satisfies slots `slot..` given the choices so far.
    fn solve(&mut self, slot: usize) -> bool {
        if slot == self.slots.len() {
            return true;
        }
        for alt in 0..self.slots[slot].alternatives.len() {
            let matching = match &self.matching[slot][alt] {
                Ok(m) => m.clone(),
                Err(e) => {
                    self.error.get_or_insert_with(|| e.clone());
                    continue;
                }
            };
            let (name, req) = self.slots[slot].alternatives[alt].clone();
            let all = req.allocation_mode.as_deref() == Some("All");
            if all {
                let usable = !matching.is_empty()
                    && matching
                        .iter()
                        .all(|&i| self.free(i) && !self.candidates[i].incomplete);
                if usable && self.try_take(slot, &name, matching.clone()) {
                    return true;
                }
                continue;
            }
            let count = usize::try_from(req.count.unwrap_or(1).max(1)).unwrap_or(1);
            let free: Vec<usize> = matching
                .into_iter()
                .filter(|&i| self.free(i) && !self.candidates[i].incomplete)
                .collect();
            if self.combine(slot, &name, &free, 0, count, &mut Vec::new()) {
                return true;
            }
        }
        false
    }

    /// Picks `count` more of `free[from..]` for the slot, then the rest.
    fn combine(
        &mut self,
        slot: usize,
        name: &str,
        free: &[usize],
        from: usize,
        count: usize,
        picked: &mut Vec<usize>,
    ) -> bool {
        if picked.len() == count {
            return self.try_take(slot, name, picked.clone());
        }
        if free.len() - from < count - picked.len() {
            return false;
        }
        for k in from..free.len() {
            picked.push(free[k]);
            if self.constraints_hold(slot, picked)
                && self.combine(slot, name, free, k + 1, count, picked)
            {
                return true;
            }
            picked.pop();
        }
        false
    }

    /// Takes `devices` for the slot and solves the next ones; undone on
    /// failure.
    fn try_take(&mut self, slot: usize, name: &str, devices: Vec<usize>) -> bool {
        if !self.constraints_hold(slot, &devices) {
            return false;
        }
        self.taken.extend(devices.iter().copied());
        self.chosen.push((name.to_string(), devices.clone()));
        if self.solve(slot + 1) {
            return true;
        }
        self.chosen.pop();
        for d in devices {
            self.taken.remove(&d);
        }
        false
    }

    /// Whether the claim's `matchAttribute` constraints hold for the
    /// devices chosen for its requests so far plus `devices` for `slot`.
    fn constraints_hold(&self, slot: usize, devices: &[usize]) -> bool {
        let claim_index = self.slots[slot].claim;
        let claim = self.claims[claim_index];
        for c in &claim.spec.devices.constraints {
            let Some(attribute) = &c.match_attribute else {
                continue;
            };
            let covers =
                |request: &str| c.requests.is_empty() || c.requests.iter().any(|r| r == request);
            let mut devs: Vec<usize> = Vec::new();
            for (s, (_, chosen)) in self.chosen.iter().enumerate() {
                if self.slots[s].claim == claim_index && covers(self.slots[s].name) {
                    devs.extend(chosen);
                }
            }
            if covers(self.slots[slot].name) {
                devs.extend(devices);
            }
            let mut value: Option<&DeviceAttribute> = None;
            for d in devs {
                let c = &self.candidates[d];
                let Some(v) = attribute_of(&c.id.driver, c.device, attribute) else {
                    return false;
                };
                match value {
                    Some(first) if first != v => return false,
                    _ => value = Some(v),
                }
            }
        }
        true
    }

    /// One allocation per claim.
    fn results(&self, node: &Node) -> Vec<AllocationResult> {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let mut out: Vec<AllocationResult> = vec![AllocationResult::default(); self.claims.len()];
        let mut local = vec![false; self.claims.len()];
        for (slot, (name, devices)) in self.slots.iter().zip(&self.chosen) {
            let result = &mut out[slot.claim];
            for &d in devices {
                let c = &self.candidates[d];
                result.devices.results.push(DeviceRequestAllocationResult {
                    request: name.clone(),
                    driver: c.id.driver.clone(),
                    pool: c.id.pool.clone(),
                    device: c.id.device.clone(),
                });
                local[slot.claim] |= c.node_local;
                if result.node_selector.is_none()
                    && let Some(sel) = c.selector
                {
                    result.node_selector = Some(sel.clone());
                }
            }
        }
        for (result, local) in out.iter_mut().zip(local) {
            if local {
                result.node_selector = Some(node_name_selector(&node_name));
            }
        }
        out.iter_mut().for_each(|r| {
            r.devices = DeviceAllocationResult {
                results: std::mem::take(&mut r.devices.results),
            }
        });
        out
    }
}

/// A device's attribute by its qualified name (an unqualified one is under
/// the driver's domain).
fn attribute_of<'d>(driver: &str, device: &'d Device, name: &str) -> Option<&'d DeviceAttribute> {
    if let Some(v) = device.attributes.get(name) {
        return Some(v);
    }
    let (domain, id) = name.split_once('/')?;
    if domain == driver {
        return device.attributes.get(id);
    }
    None
}

/// The node selector of an allocation of node-local devices: this node, by
/// name.
pub fn node_name_selector(node: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.to_string()]),
            }]),
            match_expressions: None,
        }],
    }
}
