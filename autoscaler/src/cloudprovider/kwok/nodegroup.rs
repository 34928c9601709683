//! One kwok node group (upstream's `kwok_nodegroups.go`): creating an
//! instance creates a fake Node, deleting one deletes it; the target size
//! lives here.

use predicates::dynamicresources::api::ResourceSlice;
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, PostParams};

use super::faults::Fault;
use super::state::{GroupState, Shared};
use super::templates::{KWOK_NODE_ANNOTATION, annotation};
use crate::cloudprovider::{
    CloudError, Instance, InstanceState, NodeGroup, TemplateNodeInfo, kube_proxy_pod, lock,
};

/// Node creations in flight at once during a scale-up.
pub const CREATE_CONCURRENCY: usize = 32;

/// A handle on one kwok node group.
#[derive(Clone)]
pub struct KwokNodeGroup {
    pub(super) shared: Arc<Shared>,
    pub(super) id: String,
}

impl std::fmt::Debug for KwokNodeGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KwokNodeGroup({})", self.id)
    }
}

impl KwokNodeGroup {
    /// Registered nodes of this group (from the autoscaler's node cache).
    pub(super) fn registered(&self) -> Vec<Arc<Node>> {
        let nodes = (self.shared.nodes)();
        lock(&self.shared.members).of(&self.id, nodes)
    }

    /// The injected fault: the in-process handle's, else the template's.
    pub(super) fn fault(&self) -> Option<Fault> {
        self.shared
            .faults
            .get(&self.id)
            .or_else(|| self.with_state(|g| g.fault.clone()).ok().flatten())
    }

    pub(super) fn with_state<R>(
        &self,
        f: impl FnOnce(&mut GroupState) -> R,
    ) -> Result<R, CloudError> {
        let mut groups = lock(&self.shared.groups);
        let g = groups.get_mut(&self.id).ok_or_else(|| CloudError::Failed {
            kind: crate::cloudprovider::ErrorType::NodeGroupDoesNotExist,
            message: format!("kwok node group {} does not exist", self.id),
            info: None,
        })?;
        Ok(f(g))
    }

    /// Creates `count` fake nodes from the template (or phantom instances
    /// when the group is set never to register), [`CREATE_CONCURRENCY`]
    /// requests at a time (a scale-up of hundreds of nodes is one
    /// `IncreaseSize` for a real cloud; here it is as many Node creations).
    /// Returns how many instances the group now has more (the nodes
    /// created, the phantoms), and the first failure, after the requests in
    /// flight finish: the nodes made before a failure exist, and count.
    pub(super) async fn create_nodes(&self, count: usize) -> (usize, Result<(), CloudError>) {
        let template = match self.with_state(|g| g.template.clone()) {
            Ok(t) => t,
            Err(e) => return (0, Err(e)),
        };
        let fault = self.fault();
        let api: Api<Node> = Api::all(self.shared.client.clone());
        let mut nodes = Vec::new();
        for _ in 0..count {
            let name = format!("{}-{}", self.id, apimachinery::rand::suffix(5));
            match &fault {
                Some(Fault::NeverRegister) => {
                    if let Err(e) = self.with_state(|g| g.phantom.insert(name.clone())) {
                        return (0, Err(e));
                    }
                    continue;
                }
                Some(Fault::CreationFails(info)) => {
                    if let Err(e) = self.with_state(|g| g.failed.insert(name.clone(), info.clone()))
                    {
                        return (0, Err(e));
                    }
                    continue;
                }
                _ => {}
            }
            nodes.push(name);
        }
        let results: Vec<Result<(), CloudError>> = futures::stream::iter(nodes)
            .map(|mut name| {
                let api = api.clone();
                let template = &template;
                async move {
                    // Five random characters collide about once in a
                    // 5,000-node group: a taken name is drawn again.
                    let mut attempts = 1;
                    loop {
                        let node = node_named(template, &name);
                        match api.create(&PostParams::default(), &node).await {
                            Ok(_) => return Ok(()),
                            Err(kube::Error::Api(e))
                                if e.code == 409 && attempts < NAME_ATTEMPTS =>
                            {
                                attempts += 1;
                                name = format!("{}-{}", self.id, apimachinery::rand::suffix(5));
                            }
                            Err(e) => {
                                return Err(CloudError::api(format!(
                                    "kwok node group {}: creating node {name}: {e}",
                                    self.id
                                )));
                            }
                        }
                    }
                }
            })
            .buffer_unordered(CREATE_CONCURRENCY)
            .collect()
            .await;
        let refused = results.iter().filter(|r| r.is_err()).count();
        (count - refused, results.into_iter().collect())
    }
}

/// How many names a new node may be given before its creation fails.
const NAME_ATTEMPTS: usize = 5;

/// The group's template as the node `name`.
fn node_named(template: &Node, name: &str) -> Node {
    let mut node = template.clone();
    node.metadata.name = Some(name.to_string());
    node.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("kubernetes.io/hostname".into(), name.to_string());
    node.spec.get_or_insert_with(Default::default).provider_id = Some(format!("kwok:{name}"));
    node
}

impl NodeGroup for KwokNodeGroup {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn min_size(&self) -> usize {
        self.with_state(|g| g.min).unwrap_or(0)
    }

    fn max_size(&self) -> usize {
        self.with_state(|g| g.max).unwrap_or(0)
    }

    fn target_size(&self) -> Result<usize, CloudError> {
        self.with_state(|g| g.target)
    }

    fn increase_size(&self, delta: usize) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            if delta == 0 {
                return Err(CloudError::provider("size increase must be positive"));
            }
            let (target, max) = self.with_state(|g| (g.target, g.max))?;
            if target + delta > max {
                return Err(CloudError::provider(format!(
                    "size increase too large, desired: {} max: {max}",
                    target + delta
                )));
            }
            if let Some(Fault::IncreaseSizeFails(info)) = self.fault() {
                return Err(CloudError::Failed {
                    kind: crate::cloudprovider::ErrorType::CloudProvider,
                    message: format!("kwok node group {}: {}", self.id, info.message),
                    info: Some(info),
                });
            }
            // The nodes made before a failed creation exist: they count
            // towards the target, or nothing would ever delete them.
            let (accepted, created) = self.create_nodes(delta).await;
            self.with_state(|g| g.target += accepted)?;
            created
        })
    }

    /// All or nothing: an increase whose instances would fail to be created
    /// (a `creation-error` fault) is refused whole, as a cloud's atomic
    /// request for instances is, rather than made and left to fail; kwok
    /// nodes otherwise come all at once. (Upstream's kwok provider does not
    /// implement it.)
    fn atomic_increase_size(&self, delta: usize) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            if let Some(Fault::CreationFails(info)) = self.fault() {
                return Err(CloudError::Failed {
                    kind: crate::cloudprovider::ErrorType::CloudProvider,
                    message: format!(
                        "kwok node group {}: atomic increase of {delta}: {}",
                        self.id, info.message
                    ),
                    info: Some(info),
                });
            }
            self.increase_size(delta).await
        })
    }

    fn delete_nodes(&self, nodes: Vec<Node>) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            let (target, min) = self.with_state(|g| (g.target, g.min))?;
            if target <= min {
                return Err(CloudError::provider(
                    "min size reached, nodes will not be deleted",
                ));
            }
            if target < min + nodes.len() {
                return Err(CloudError::provider(
                    "can't delete nodes because nodegroup size would go below min size",
                ));
            }
            let api: Api<Node> = Api::all(self.shared.client.clone());
            for node in &nodes {
                let name = node.metadata.name.clone().unwrap_or_default();
                // Instances that never registered are handed over as fake
                // nodes named after the instance.
                let phantom = name.strip_prefix("kwok:").unwrap_or(&name).to_string();
                if self.with_state(|g| {
                    g.phantom.remove(&phantom) || g.failed.remove(&phantom).is_some()
                })? {
                    self.with_state(|g| g.target = g.target.saturating_sub(1))?;
                    continue;
                }
                if annotation(node, KWOK_NODE_ANNOTATION) != Some("fake") {
                    return Err(CloudError::provider(format!(
                        "can't delete node '{name}' because it is not managed by kwok"
                    )));
                }
                if let Some(Fault::DeleteFails(message)) = self.fault() {
                    return Err(CloudError::provider(format!(
                        "kwok node group {}: deleting node {name}: {message}",
                        self.id
                    )));
                }
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => {
                        return Err(CloudError::api(format!(
                            "kwok node group {}: deleting node {name}: {e}",
                            self.id
                        )));
                    }
                }
                self.with_state(|g| g.target = g.target.saturating_sub(1))?;
            }
            Ok(())
        })
    }

    fn decrease_target_size(&self, delta: i64) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            if delta >= 0 {
                return Err(CloudError::provider("size decrease must be negative"));
            }
            let existing = self.registered().len();
            let target = self.target_size()?;
            let decrease = usize::try_from(delta.unsigned_abs()).unwrap_or(usize::MAX);
            if target < existing + decrease {
                return Err(CloudError::provider(format!(
                    "attempt to delete existing nodes, targetSize: {target} delta: {delta} existingNodes: {existing}"
                )));
            }
            self.with_state(|g| {
                g.target -= decrease;
                // Phantom instances beyond the target are given up.
                while g.phantom.len() > g.target.saturating_sub(existing) {
                    g.phantom.pop_last();
                }
            })
        })
    }

    fn nodes(&self) -> Result<Vec<Instance>, CloudError> {
        self.instances_besides(&|_| false)
    }

    fn instances_besides(
        &self,
        registered: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<Instance>, CloudError> {
        let mut out: Vec<Instance> = self
            .registered()
            .iter()
            .filter_map(|n| {
                let id = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
                let id = id.unwrap_or_default();
                (!registered(id)).then(|| Instance {
                    id: id.to_string(),
                    state: Some(InstanceState::Running),
                    error: None,
                })
            })
            .collect();
        let (phantom, failed) = self.with_state(|g| (g.phantom.clone(), g.failed.clone()))?;
        out.extend(phantom.into_iter().map(|name| Instance {
            id: format!("kwok:{name}"),
            state: Some(InstanceState::Running),
            error: None,
        }));
        out.extend(failed.into_iter().map(|(name, error)| Instance {
            id: format!("kwok:{name}"),
            state: Some(InstanceState::Creating),
            error: Some(error),
        }));
        Ok(out)
    }

    fn template_node_info(&self) -> Result<TemplateNodeInfo, CloudError> {
        let node = self.with_state(|g| g.template.clone())?;
        Ok(TemplateNodeInfo {
            pods: vec![kube_proxy_pod(&self.id)],
            slices: template_slices(&node),
            node,
            csi: None,
        })
    }
}

/// The devices a template node declares for kwok's fake DRA driver
/// (`kwok.x-k8s.io/dra-devices`): the slices its nodes will publish. An
/// extension of upstream's kwok provider, whose templates have no slices;
/// a malformed annotation gives none (kwok logs it on the nodes).
fn template_slices(node: &k8s_openapi::api::core::v1::Node) -> Vec<ResourceSlice> {
    let Some(annotation) = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(kwok::DRA_DEVICES_ANNOTATION))
    else {
        return Vec::new();
    };
    let name = node.metadata.name.as_deref().unwrap_or("");
    let Ok(groups) = kwok::controller::dra::parse(annotation) else {
        return Vec::new();
    };
    kwok::controller::dra::slices(name, "", &groups, 1)
        .into_iter()
        .filter_map(|s| serde_json::from_value(s).ok())
        .collect()
}
