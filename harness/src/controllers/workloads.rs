//! The reconcilers. See the module docs in `mod.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures::{FutureExt, StreamExt, stream::BoxStream};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use simclock::Clock;

/// Which owner a change concerns.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    ReplicaSet(String),
    Deployment(String),
    DaemonSet(String),
    StatefulSet(String),
    Job(String),
}

enum Change {
    Pod(Event<Pod>),
    Node(Event<Node>),
    ReplicaSet(Event<ReplicaSet>),
    Deployment(Event<Deployment>),
    DaemonSet(Event<DaemonSet>),
    StatefulSet(Event<StatefulSet>),
    Job(Event<Job>),
}

fn key<K: Resource>(o: &K) -> String {
    format!(
        "{}/{}",
        o.meta().namespace.as_deref().unwrap_or(""),
        o.meta().name.as_deref().unwrap_or("")
    )
}

fn is_active(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && !matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pods one controller owns, and how many are active and ready.
#[derive(Default)]
struct Owned {
    keys: BTreeSet<String>,
    active: usize,
    ready: usize,
}

impl Owned {
    /// Adds (`sign` 1) or takes away (-1) `p` from the counts.
    fn count(&mut self, p: &Pod, sign: isize) {
        if is_active(p) {
            self.active = self.active.saturating_add_signed(sign);
            if is_ready(p) {
                self.ready = self.ready.saturating_add_signed(sign);
            }
        }
    }
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn controller_of(p: &Pod) -> Option<&OwnerReference> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// The controller task.
pub struct Controllers {
    client: Client,
    clock: Clock,
    pods: BTreeMap<String, Pod>,
    /// What each controller owns, by its uid: kept as pods change, so
    /// that a controller's sync does not scan every pod.
    owned_by: HashMap<String, Owned>,
    nodes: BTreeMap<String, Node>,
    replicasets: BTreeMap<String, ReplicaSet>,
    deployments: BTreeMap<String, Deployment>,
    daemonsets: BTreeMap<String, DaemonSet>,
    statefulsets: BTreeMap<String, StatefulSet>,
    jobs: BTreeMap<String, Job>,
    dirty: BTreeSet<Owner>,
    nodes_synced: bool,
    /// Pod GC's work: pods seen bound to a node not in the cache, and
    /// whether a node went away (then every pod is checked).
    orphan_candidates: BTreeSet<String>,
    orphan_scan_all: bool,
}

impl Controllers {
    /// Controllers talking to the API server through `client`.
    pub fn new(client: Client, clock: Clock) -> Self {
        Self {
            client,
            clock,
            pods: BTreeMap::new(),
            owned_by: HashMap::new(),
            nodes: BTreeMap::new(),
            replicasets: BTreeMap::new(),
            deployments: BTreeMap::new(),
            daemonsets: BTreeMap::new(),
            statefulsets: BTreeMap::new(),
            jobs: BTreeMap::new(),
            dirty: BTreeSet::new(),
            nodes_synced: false,
            orphan_candidates: BTreeSet::new(),
            orphan_scan_all: false,
        }
    }

    /// Runs until the watches end.
    pub async fn run(mut self) {
        fn watch<K, F>(client: &Client, f: F) -> BoxStream<'static, Change>
        where
            K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
                + Clone
                + std::fmt::Debug
                + serde::de::DeserializeOwned
                + Send
                + 'static,
            F: Fn(Event<K>) -> Change + Send + Sync + Copy + 'static,
        {
            watcher::watcher(Api::<K>::all(client.clone()), watcher::Config::default())
                .default_backoff()
                .filter_map(move |e| async move { e.ok().map(f) })
                .boxed()
        }
        let c = &self.client;
        let nodes = watcher::watcher(Api::<Node>::all(c.clone()), watcher::Config::default())
            .default_backoff()
            .filter_map(|e| async move { e.ok().map(Change::Node) })
            .boxed();
        let mut changes = futures::stream::select_all([
            nodes,
            watch(c, Change::Pod),
            watch(c, Change::ReplicaSet),
            watch(c, Change::Deployment),
            watch(c, Change::DaemonSet),
            watch(c, Change::StatefulSet),
            watch(c, Change::Job),
        ]);
        while let Some(change) = changes.next().await {
            self.apply(change);
            while let Some(Some(c)) = changes.next().now_or_never() {
                self.apply(c);
            }
            self.reconcile_dirty().await;
        }
    }

    fn apply(&mut self, change: Change) {
        macro_rules! cache {
            ($map:ident, $ev:expr, $owner:path) => {
                match $ev {
                    Event::Apply(o) | Event::InitApply(o) => {
                        let k = key(&o);
                        self.dirty.insert($owner(k.clone()));
                        self.$map.insert(k, o);
                    }
                    Event::Delete(o) => {
                        let k = key(&o);
                        self.$map.remove(&k);
                    }
                    _ => {}
                }
            };
        }
        match change {
            Change::Pod(ev) => match ev {
                Event::Apply(p) | Event::InitApply(p) => {
                    self.mark_owner(&p);
                    if self.bound_to_missing_node(&p) {
                        self.orphan_candidates.insert(key(&p));
                    }
                    self.insert_pod(p);
                }
                Event::Delete(p) => {
                    self.mark_owner(&p);
                    self.remove_pod(&key(&p));
                }
                _ => {}
            },
            Change::Node(ev) => {
                match ev {
                    Event::Apply(n) | Event::InitApply(n) => {
                        self.nodes.insert(n.name_any(), n);
                    }
                    Event::Delete(n) => {
                        self.nodes.remove(&n.name_any());
                        self.orphan_scan_all = true;
                    }
                    Event::InitDone => {
                        self.nodes_synced = true;
                        self.orphan_scan_all = true;
                    }
                    Event::Init => {}
                }
                let all: Vec<String> = self.daemonsets.keys().cloned().collect();
                self.dirty.extend(all.into_iter().map(Owner::DaemonSet));
            }
            Change::ReplicaSet(ev) => {
                if let Event::Apply(rs) | Event::Delete(rs) = &ev {
                    self.mark_owner_of_owner(
                        rs.metadata.owner_references.as_ref(),
                        rs.metadata.namespace.as_deref(),
                    );
                }
                cache!(replicasets, ev, Owner::ReplicaSet)
            }
            Change::Deployment(ev) => cache!(deployments, ev, Owner::Deployment),
            Change::DaemonSet(ev) => cache!(daemonsets, ev, Owner::DaemonSet),
            Change::StatefulSet(ev) => cache!(statefulsets, ev, Owner::StatefulSet),
            Change::Job(ev) => cache!(jobs, ev, Owner::Job),
        }
    }

    fn insert_pod(&mut self, p: Pod) {
        let k = key(&p);
        self.remove_pod(&k);
        if let Some(o) = controller_of(&p) {
            let owned = self.owned_by.entry(o.uid.clone()).or_default();
            owned.keys.insert(k.clone());
            owned.count(&p, 1);
        }
        self.pods.insert(k, p);
    }

    /// Takes `k` out of the cache and the index; returns the pod it was.
    fn remove_pod(&mut self, k: &str) -> Option<Pod> {
        let old = self.pods.remove(k)?;
        if let Some(o) = controller_of(&old)
            && let Some(owned) = self.owned_by.get_mut(&o.uid)
        {
            owned.keys.remove(k);
            owned.count(&old, -1);
            if owned.keys.is_empty() {
                self.owned_by.remove(&o.uid);
            }
        }
        Some(old)
    }

    /// (active, ready) pods of the controller with `uid`.
    fn owned_counts(&self, uid: &str) -> (usize, usize) {
        self.owned_by
            .get(uid)
            .map_or((0, 0), |o| (o.active, o.ready))
    }

    fn mark_owner(&mut self, p: &Pod) {
        self.mark_owner_of_owner(
            p.metadata.owner_references.as_ref(),
            p.metadata.namespace.as_deref(),
        );
    }

    fn mark_owner_of_owner(&mut self, refs: Option<&Vec<OwnerReference>>, ns: Option<&str>) {
        let Some(o) = refs
            .into_iter()
            .flatten()
            .find(|o| o.controller == Some(true))
        else {
            return;
        };
        let k = format!("{}/{}", ns.unwrap_or(""), o.name);
        self.dirty.insert(match o.kind.as_str() {
            "ReplicaSet" => Owner::ReplicaSet(k),
            "Deployment" => Owner::Deployment(k),
            "DaemonSet" => Owner::DaemonSet(k),
            "StatefulSet" => Owner::StatefulSet(k),
            "Job" => Owner::Job(k),
            _ => return,
        });
    }

    async fn reconcile_dirty(&mut self) {
        if self.nodes_synced {
            self.collect_orphan_pods().await;
        }
        while let Some(owner) = self.dirty.pop_first() {
            match owner {
                Owner::ReplicaSet(k) => self.reconcile_replicaset(&k).await,
                Owner::Deployment(k) => self.reconcile_deployment(&k).await,
                Owner::DaemonSet(k) => self.reconcile_daemonset(&k).await,
                Owner::StatefulSet(k) => self.reconcile_statefulset(&k).await,
                Owner::Job(k) => self.reconcile_job(&k).await,
            }
        }
    }

    /// Whether `p` is bound to a node the cache does not have.
    fn bound_to_missing_node(&self, p: &Pod) -> bool {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty() && !self.nodes.contains_key(n))
            && p.metadata.deletion_timestamp.is_none()
    }

    /// Pod GC: pods bound to a node that no longer exists are deleted.
    /// Only the pods that may be orphans are checked: all of them after a
    /// node went away, else those seen bound to an unknown node (a scan of
    /// every pod on every change is quadratic at 30,000 pods).
    async fn collect_orphan_pods(&mut self) {
        let candidates = std::mem::take(&mut self.orphan_candidates);
        let orphans: Vec<String> = if std::mem::take(&mut self.orphan_scan_all) {
            self.pods
                .iter()
                .filter(|(_, p)| self.bound_to_missing_node(p))
                .map(|(k, _)| k.clone())
                .collect()
        } else {
            candidates
                .into_iter()
                .filter(|k| {
                    self.pods
                        .get(k)
                        .is_some_and(|p| self.bound_to_missing_node(p))
                })
                .collect()
        };
        for k in orphans {
            self.delete_pod(&k, Some(0)).await;
        }
    }

    /// The pods a controller owns (by controller ownerReference uid).
    fn owned(&self, ns: &str, uid: &str) -> Vec<&Pod> {
        self.owned_by
            .get(uid)
            .into_iter()
            .flat_map(|o| &o.keys)
            .filter_map(|k| self.pods.get(k))
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns))
            .collect()
    }

    async fn create_pod(&mut self, ns: &str, template: &PodTemplateSpec, meta: ObjectMeta) -> bool {
        let mut tmeta = template.metadata.clone().unwrap_or_default();
        tmeta.name = meta.name;
        tmeta.generate_name = meta.generate_name;
        tmeta.namespace = Some(ns.to_string());
        tmeta.owner_references = meta.owner_references;
        if let Some(extra) = meta.labels {
            tmeta.labels.get_or_insert_with(BTreeMap::new).extend(extra);
        }
        let pod = Pod {
            metadata: tmeta,
            spec: template.spec.clone(),
            status: None,
        };
        match Api::<Pod>::namespaced(self.client.clone(), ns)
            .create(&PostParams::default(), &pod)
            .await
        {
            Ok(created) => {
                // Cached at once (the watch confirms later), so that the
                // next sync does not create it again.
                self.insert_pod(created);
                true
            }
            Err(e) => {
                tracing::debug!("creating a pod in {ns}: {e}");
                false
            }
        }
    }

    async fn delete_pod(&mut self, k: &str, grace: Option<u32>) {
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let mut dp = DeleteParams::default();
        if let Some(g) = grace {
            dp = dp.grace_period(g);
        }
        match Api::<Pod>::namespaced(self.client.clone(), ns)
            .delete(name, &dp)
            .await
        {
            Ok(_) => {
                if let Some(mut p) = self.remove_pod(k) {
                    p.metadata.deletion_timestamp =
                        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            self.clock.timestamp(),
                        ));
                    self.insert_pod(p);
                }
            }
            Err(e) => tracing::debug!("deleting pod {k}: {e}"),
        }
    }

    async fn patch_status<K>(&self, obj: &K, status: serde_json::Value)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned,
    {
        let api: Api<K> = Api::namespaced(
            self.client.clone(),
            obj.meta().namespace.as_deref().unwrap_or("default"),
        );
        if let Err(e) = api
            .patch_status(
                obj.meta().name.as_deref().unwrap_or(""),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
        {
            tracing::debug!("updating the status of {}: {e}", key(obj));
        }
    }

    async fn reconcile_replicaset(&mut self, k: &str) {
        let Some(rs) = self.replicasets.get(k).cloned() else {
            return;
        };
        if rs.metadata.deletion_timestamp.is_some() {
            return;
        }
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let spec = rs.spec.clone().unwrap_or_default();
        let want = spec.replicas.unwrap_or(1);
        let have = i32::try_from(self.owned_counts(&uid).0).unwrap_or(i32::MAX);
        if have < want {
            let owner = owner_ref(&rs);
            for _ in have..want {
                let meta = ObjectMeta {
                    generate_name: Some(format!("{}-", rs.name_any())),
                    owner_references: Some(vec![owner.clone()]),
                    ..ObjectMeta::default()
                };
                self.create_pod(&ns, &spec.template.clone().unwrap_or_default(), meta)
                    .await;
            }
        } else if have > want {
            let mut active: Vec<&Pod> = self
                .owned(&ns, &uid)
                .into_iter()
                .filter(|p| is_active(p))
                .collect();
            // Delete the least useful first: unscheduled, pending, not ready, newest.
            active.sort_by_key(|p| {
                let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
                (
                    bound,
                    phase(p) == "Running",
                    is_ready(p),
                    std::cmp::Reverse(p.metadata.creation_timestamp.clone().map(|t| t.0)),
                )
            });
            let doomed: Vec<String> = active
                .iter()
                .take(usize::try_from(have - want).unwrap_or(0))
                .map(|p| key(*p))
                .collect();
            for k in doomed {
                self.delete_pod(&k, None).await;
            }
        }
        let (active, ready) = self.owned_counts(&uid);
        let status = json!({
            "replicas": active, "fullyLabeledReplicas": active,
            "readyReplicas": ready, "availableReplicas": ready,
            "observedGeneration": rs.metadata.generation,
        });
        let current = rs.status.as_ref().map(|s| {
            (
                s.replicas,
                s.ready_replicas.unwrap_or(0),
                s.observed_generation,
            )
        });
        if current != Some((active as i32, ready as i32, rs.metadata.generation)) {
            self.patch_status(&rs, status).await;
        }
    }

    async fn reconcile_deployment(&mut self, k: &str) {
        let Some(d) = self.deployments.get(k).cloned() else {
            return;
        };
        if d.metadata.deletion_timestamp.is_some() {
            return;
        }
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let spec = d.spec.clone().unwrap_or_default();
        let want = spec.replicas.unwrap_or(1);
        let hash = template_hash(&spec.template);
        let owned: Vec<ReplicaSet> = self
            .replicasets
            .values()
            .filter(|rs| {
                rs.metadata.namespace.as_deref() == Some(&ns)
                    && rs
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == uid)
            })
            .cloned()
            .collect();
        let current = owned
            .iter()
            .find(|rs| rs.labels().get("pod-template-hash") == Some(&hash));
        let rs_api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
        match current {
            None => {
                let mut template = spec.template.clone();
                let mut meta = template.metadata.clone().unwrap_or_default();
                meta.labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert("pod-template-hash".into(), hash.clone());
                template.metadata = Some(meta);
                let mut selector: LabelSelector = spec.selector.clone();
                selector
                    .match_labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert("pod-template-hash".into(), hash.clone());
                let rs = json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": format!("{}-{hash}", d.name_any()), "namespace": ns,
                        "labels": template.metadata.as_ref().and_then(|m| m.labels.clone()),
                        "annotations": {"deployment.kubernetes.io/revision": (owned.len() + 1).to_string()},
                        "ownerReferences": [owner_ref(&d)]},
                    "spec": {"replicas": want, "selector": selector, "template": template},
                });
                match serde_json::from_value::<ReplicaSet>(rs) {
                    Ok(rs) => match rs_api.create(&PostParams::default(), &rs).await {
                        Ok(created) => {
                            self.replicasets.insert(key(&created), created);
                        }
                        Err(e) => tracing::debug!("creating the ReplicaSet of deployment {k}: {e}"),
                    },
                    Err(e) => tracing::debug!("building the ReplicaSet of deployment {k}: {e}"),
                }
            }
            Some(rs) if rs.spec.as_ref().and_then(|s| s.replicas) != Some(want) => {
                let patch = Patch::Merge(json!({"spec": {"replicas": want}}));
                if let Err(e) = rs_api
                    .patch(&rs.name_any(), &PatchParams::default(), &patch)
                    .await
                {
                    tracing::debug!("scaling ReplicaSet {}: {e}", key(rs));
                }
            }
            Some(_) => {}
        }
        // Older templates are scaled down (no rolling update).
        for old in owned
            .iter()
            .filter(|rs| rs.labels().get("pod-template-hash") != Some(&hash))
        {
            if old.spec.as_ref().and_then(|s| s.replicas) != Some(0) {
                let patch = Patch::Merge(json!({"spec": {"replicas": 0}}));
                if let Err(e) = rs_api
                    .patch(&old.name_any(), &PatchParams::default(), &patch)
                    .await
                {
                    tracing::debug!("scaling down ReplicaSet {}: {e}", key(old));
                }
            }
        }
        let sum = |f: fn(&ReplicaSet) -> i32| owned.iter().map(f).sum::<i32>();
        let replicas = sum(|rs| rs.status.as_ref().map_or(0, |s| s.replicas));
        let ready = sum(|rs| {
            rs.status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0)
        });
        let updated = owned
            .iter()
            .filter(|rs| rs.labels().get("pod-template-hash") == Some(&hash))
            .map(|rs| rs.status.as_ref().map_or(0, |s| s.replicas))
            .sum::<i32>();
        let available = if ready >= want { "True" } else { "False" };
        let st = d.status.clone().unwrap_or_default();
        let same = st.replicas == Some(replicas)
            && st.ready_replicas.unwrap_or(0) == ready
            && st.updated_replicas == Some(updated)
            && st.observed_generation == d.metadata.generation;
        if !same {
            let now = self.clock.rfc3339();
            self.patch_status(&d, json!({
                "replicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
                "updatedReplicas": updated, "unavailableReplicas": (want - ready).max(0),
                "observedGeneration": d.metadata.generation,
                "conditions": [{"type": "Available", "status": available,
                    "reason": if available == "True" { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
                    "message": if available == "True" { "Deployment has minimum availability." } else { "Deployment does not have minimum availability." },
                    "lastUpdateTime": now, "lastTransitionTime": now}],
            })).await;
        }
    }

    async fn reconcile_daemonset(&mut self, k: &str) {
        let Some(ds) = self.daemonsets.get(k).cloned() else {
            return;
        };
        if ds.metadata.deletion_timestamp.is_some() || !self.nodes_synced {
            return;
        }
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let spec = ds.spec.clone().unwrap_or_default();
        let mut template = spec.template.clone();
        add_daemonset_tolerations(&mut template);
        let mut by_node: HashMap<String, Vec<Pod>> = HashMap::new();
        for p in self.owned(&ns, &uid) {
            if is_active(p) {
                by_node
                    .entry(daemon_pod_node(p).unwrap_or_default())
                    .or_default()
                    .push(p.clone());
            }
        }
        let mut desired = 0;
        let nodes: Vec<Node> = self.nodes.values().cloned().collect();
        for node in &nodes {
            let name = node.name_any();
            let placement = daemon_placement(&template, node);
            let existing = by_node.remove(&name).unwrap_or_default();
            if placement == DaemonPlacement::Run {
                desired += 1;
            }
            if placement != DaemonPlacement::No {
                if existing.is_empty() && placement == DaemonPlacement::Run {
                    let mut t = template.clone();
                    pin_to_node(&mut t, &name);
                    let meta = ObjectMeta {
                        generate_name: Some(format!("{}-", ds.name_any())),
                        owner_references: Some(vec![owner_ref(&ds)]),
                        ..ObjectMeta::default()
                    };
                    self.create_pod(&ns, &t, meta).await;
                }
                for extra in existing.iter().skip(1) {
                    self.delete_pod(&key(extra), None).await;
                }
            } else {
                for p in &existing {
                    self.delete_pod(&key(p), None).await;
                }
            }
        }
        // Pods for nodes that are gone are left to pod GC.
        let owned: Vec<&Pod> = self
            .owned(&ns, &uid)
            .into_iter()
            .filter(|p| is_active(p))
            .collect();
        let scheduled = owned
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .count();
        let ready = owned.iter().filter(|p| is_ready(p)).count();
        let st = ds.status.clone().unwrap_or_default();
        if (
            st.desired_number_scheduled,
            st.current_number_scheduled,
            st.number_ready,
            st.observed_generation,
        ) != (
            desired,
            scheduled as i32,
            ready as i32,
            ds.metadata.generation,
        ) {
            self.patch_status(&ds, json!({
                "desiredNumberScheduled": desired, "currentNumberScheduled": scheduled,
                "numberReady": ready, "numberAvailable": ready, "updatedNumberScheduled": owned.len(),
                "numberMisscheduled": 0, "observedGeneration": ds.metadata.generation,
            })).await;
        }
    }

    async fn reconcile_statefulset(&mut self, k: &str) {
        let Some(sts) = self.statefulsets.get(k).cloned() else {
            return;
        };
        if sts.metadata.deletion_timestamp.is_some() {
            return;
        }
        let ns = sts.metadata.namespace.clone().unwrap_or_default();
        let name = sts.name_any();
        let spec = sts.spec.clone().unwrap_or_default();
        let want = spec.replicas.unwrap_or(1);
        let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");
        for ordinal in 0..want {
            let pod_name = format!("{name}-{ordinal}");
            let pod_key = format!("{ns}/{pod_name}");
            match self.pods.get(&pod_key) {
                Some(p) if is_active(p) => {
                    if !parallel && (phase(p) != "Running" || !is_ready(p)) {
                        break;
                    }
                }
                Some(p) if p.metadata.deletion_timestamp.is_none() => {
                    // A terminal pod is replaced.
                    self.delete_pod(&pod_key, Some(0)).await;
                    break;
                }
                Some(_) => break, // Still terminating: wait for it to go.
                None => {
                    let mut labels = BTreeMap::new();
                    labels.insert(
                        "statefulset.kubernetes.io/pod-name".to_string(),
                        pod_name.clone(),
                    );
                    labels.insert(
                        "apps.kubernetes.io/pod-index".to_string(),
                        ordinal.to_string(),
                    );
                    let mut t = spec.template.clone();
                    if let Some(s) = t.spec.as_mut() {
                        s.hostname = Some(pod_name.clone());
                        s.subdomain = Some(spec.service_name.clone().unwrap_or_default())
                            .filter(|s| !s.is_empty());
                    }
                    let meta = ObjectMeta {
                        name: Some(pod_name),
                        labels: Some(labels),
                        owner_references: Some(vec![owner_ref(&sts)]),
                        ..ObjectMeta::default()
                    };
                    self.create_pod(&ns, &t, meta).await;
                    if !parallel {
                        break;
                    }
                }
            }
        }
        // Scale down: highest ordinals first.
        let uid = sts.metadata.uid.clone().unwrap_or_default();
        let mut surplus: Vec<(i32, String)> = self
            .owned(&ns, &uid)
            .into_iter()
            .filter(|p| is_active(p))
            .filter_map(|p| {
                let n = p.name_any();
                let ord: i32 = n.rsplit_once('-')?.1.parse().ok()?;
                (ord >= want).then(|| (ord, key(p)))
            })
            .collect();
        surplus.sort_by_key(|s| std::cmp::Reverse(s.0));
        if let Some((_, k)) = surplus.first() {
            self.delete_pod(k, None).await;
        }
        let owned: Vec<&Pod> = self
            .owned(&ns, &uid)
            .into_iter()
            .filter(|p| is_active(p))
            .collect();
        let ready = owned.iter().filter(|p| is_ready(p)).count() as i32;
        let st = sts.status.clone().unwrap_or_default();
        if (
            st.replicas,
            st.ready_replicas.unwrap_or(0),
            st.observed_generation,
        ) != (owned.len() as i32, ready, sts.metadata.generation)
        {
            self.patch_status(
                &sts,
                json!({
                    "replicas": owned.len(), "readyReplicas": ready, "currentReplicas": owned.len(),
                    "updatedReplicas": owned.len(), "availableReplicas": ready,
                    "observedGeneration": sts.metadata.generation,
                }),
            )
            .await;
        }
    }

    async fn reconcile_job(&mut self, k: &str) {
        let Some(job) = self.jobs.get(k).cloned() else {
            return;
        };
        if job.metadata.deletion_timestamp.is_some() {
            return;
        }
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let spec = job.spec.clone().unwrap_or_default();
        let status = job.status.clone().unwrap_or_default();
        let done = status
            .conditions
            .iter()
            .flatten()
            .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True");
        let owned = self.owned(&ns, &uid);
        let succeeded = owned.iter().filter(|p| phase(p) == "Succeeded").count() as i32;
        let failed = owned.iter().filter(|p| phase(p) == "Failed").count() as i32;
        let active = owned.iter().filter(|p| is_active(p)).count() as i32;
        let ready = owned.iter().filter(|p| is_active(p) && is_ready(p)).count() as i32;
        let parallelism = spec.parallelism.unwrap_or(1);
        let completions = spec.completions;
        let complete = match completions {
            Some(c) => succeeded >= c,
            None => succeeded >= 1 && active == 0,
        };
        if !done && !complete {
            let remaining = completions.map_or(parallelism, |c| c - succeeded);
            let want_active = parallelism.min(remaining);
            let owner = owner_ref(&job);
            for _ in active..want_active {
                let meta = ObjectMeta {
                    generate_name: Some(format!("{}-", job.name_any())),
                    owner_references: Some(vec![owner.clone()]),
                    ..ObjectMeta::default()
                };
                self.create_pod(&ns, &spec.template, meta).await;
            }
        }
        let now = self.clock.rfc3339();
        let mut patch = json!({"active": if complete { 0 } else { active }, "succeeded": succeeded, "failed": failed, "ready": ready});
        if status.start_time.is_none() {
            patch["startTime"] = json!(now);
        }
        if complete && !done {
            patch["completionTime"] = json!(now);
            patch["conditions"] = json!([
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now},
            ]);
        }
        let same = status.succeeded.unwrap_or(0) == succeeded
            && status.failed.unwrap_or(0) == failed
            && status.active.unwrap_or(0) == patch["active"].as_i64().unwrap_or(0) as i32
            && status.ready.unwrap_or(0) == ready
            && status.start_time.is_some()
            && (!complete || done);
        if !same {
            self.patch_status(&job, patch).await;
        }
    }
}

fn owner_ref<K: Resource<DynamicType = ()>>(o: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: o.meta().name.clone().unwrap_or_default(),
        uid: o.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A short stable hash of a pod template (the `pod-template-hash` label).
fn template_hash(t: &PodTemplateSpec) -> String {
    let text = serde_json::to_string(t).unwrap_or_default();
    // FNV-1a, printed in the alphabet Kubernetes uses for safe names.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut out = String::new();
    for _ in 0..10 {
        out.push(char::from(ALPHABET[(h % 27) as usize]));
        h /= 27;
    }
    out
}

/// The tolerations the DaemonSet controller adds to its pods.
fn add_daemonset_tolerations(t: &mut PodTemplateSpec) {
    let Some(spec) = t.spec.as_mut() else { return };
    let tols = spec.tolerations.get_or_insert_with(Vec::new);
    let mut add = |key: &str, effect: &str| {
        if !tols
            .iter()
            .any(|t| t.key.as_deref() == Some(key) && t.effect.as_deref() == Some(effect))
        {
            tols.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.into()),
                ..Toleration::default()
            });
        }
    };
    add("node.kubernetes.io/not-ready", "NoExecute");
    add("node.kubernetes.io/unreachable", "NoExecute");
    add("node.kubernetes.io/disk-pressure", "NoSchedule");
    add("node.kubernetes.io/memory-pressure", "NoSchedule");
    add("node.kubernetes.io/pid-pressure", "NoSchedule");
    add("node.kubernetes.io/unschedulable", "NoSchedule");
    if spec.host_network == Some(true) {
        add("node.kubernetes.io/network-unavailable", "NoSchedule");
    }
}

/// Pins a daemon pod to its node with required node affinity on
/// `metadata.name`, as the DaemonSet controller does.
fn pin_to_node(t: &mut PodTemplateSpec, node: &str) {
    let Some(spec) = t.spec.as_mut() else { return };
    let affinity = spec.affinity.get_or_insert_with(Default::default);
    let na = affinity.node_affinity.get_or_insert_with(Default::default);
    na.required_during_scheduling_ignored_during_execution = Some(
        serde_json::from_value(json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}))
        .unwrap_or_default(),
    );
}

/// The node a daemon pod is for (bound node, or its pinned name).
fn daemon_pod_node(p: &Pod) -> Option<String> {
    if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
        return Some(n);
    }
    let terms = p
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?;
    terms
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name")
        .and_then(|f| f.values.as_ref()?.first().cloned())
}

/// Where a daemon pod belongs, as the DaemonSet controller's
/// `NodeShouldRunDaemonPod` decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DaemonPlacement {
    /// Node selector/affinity match and every NoSchedule/NoExecute taint is
    /// tolerated: a pod is created if missing.
    Run,
    /// A NoSchedule taint (such as `ToBeDeletedByClusterAutoscaler`) is not
    /// tolerated: no new pod, but a running one stays.
    KeepRunning,
    /// No match, or a NoExecute taint is not tolerated: the pod goes.
    No,
}

fn daemon_placement(t: &PodTemplateSpec, node: &Node) -> DaemonPlacement {
    let pod = Pod {
        metadata: t.metadata.clone().unwrap_or_default(),
        spec: t.spec.clone(),
        status: None,
    };
    let info = predicates::NodeInfo::new(std::sync::Arc::new(node.clone()));
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let tols = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    if !predicates::filters::node_affinity_matches(&pod, &info) {
        return DaemonPlacement::No;
    }
    if predicates::filters::untolerated_taint(taints, tols).is_none() {
        return DaemonPlacement::Run;
    }
    let evicting = taints
        .iter()
        .any(|t| t.effect == "NoExecute" && !predicates::labels::tolerated_by(tols, t));
    if evicting {
        DaemonPlacement::No
    } else {
        DaemonPlacement::KeepRunning
    }
}
