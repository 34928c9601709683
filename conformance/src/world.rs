//! The scenario state: the declared node groups and workloads, then the
//! running cluster and autoscaler.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use autoscaler::cloudprovider::kwok::Faults;
use autoscaler::core::Decisions;
use harness::cluster::Cluster;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde_json::{Value, json};

/// A node group declared by a scenario.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    /// Group name (the `kwok-nodegroup` label value).
    pub name: String,
    /// CPU per node.
    pub cpu: String,
    /// Memory per node.
    pub memory: String,
    /// Min size.
    pub min: usize,
    /// Max size.
    pub max: usize,
    /// Nodes at start.
    pub initial: usize,
}

impl GroupSpec {
    fn template(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": {"kwok-nodegroup": self.name},
                "annotations": {
                    "cluster-autoscaler.kwok.nodegroup/min-count": self.min.to_string(),
                    "cluster-autoscaler.kwok.nodegroup/max-count": self.max.to_string(),
                    "cluster-autoscaler.kwok.nodegroup/desired-count": self.initial.max(self.min).to_string(),
                }},
            "status": {"capacity": {"cpu": self.cpu, "memory": self.memory, "pods": "110"},
                       "allocatable": {"cpu": self.cpu, "memory": self.memory, "pods": "110"}}})
    }
}

/// The running cluster and autoscaler of a scenario.
pub struct Running {
    /// The cluster.
    pub cluster: Cluster,
    /// The kwok provider's fault injection.
    pub faults: Arc<Faults>,
    /// The autoscaler's published decision record.
    pub decisions: Arc<Mutex<Decisions>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The cucumber world.
#[derive(Default, cucumber::World)]
pub struct CaWorld {
    /// Declared node groups.
    pub groups: Vec<GroupSpec>,
    /// Extra autoscaler flags.
    pub flags: Vec<String>,
    /// Objects to create before the autoscaler starts.
    pub objects: Vec<Value>,
    /// The cluster, once started.
    pub running: Option<Running>,
}

impl fmt::Debug for CaWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaWorld")
            .field("groups", &self.groups)
            .field("flags", &self.flags)
            .field("started", &self.running.is_some())
            .finish()
    }
}

/// Why a step failed (printed by cucumber).
pub type StepResult = Result<(), String>;

impl CaWorld {
    /// Starts the cluster and the autoscaler, once.
    pub async fn running(&mut self) -> Result<&Running, String> {
        if self.running.is_none() {
            self.running = Some(self.start().await?);
        }
        self.running
            .as_ref()
            .ok_or_else(|| "the cluster did not start".to_string())
    }

    async fn start(&self) -> Result<Running, String> {
        let templates: Vec<Value> = self.groups.iter().map(GroupSpec::template).collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": templates});
        let cluster = Cluster::builder()
            .object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-config", "namespace": "kube-system"},
                "data": {"config": "readNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: kwok-nodegroup\nnodes:\n  skipTaint: true\nconfigmap:\n  name: kwok-provider-templates\n"}}))
            .object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-templates", "namespace": "kube-system"},
                "data": {"templates": list.to_string()}}))
            .start()
            .await
            .map_err(|e| format!("starting the cluster: {e}"))?;
        let built =
            autoscaler::inprocess::kwok(cluster.client(), cluster.clock().clone(), &self.flags)
                .await?;
        // Initial nodes Ready before the workloads, as in a running cluster.
        let initial: usize = self.groups.iter().map(|g| g.initial.max(g.min)).sum();
        cluster
            .wait_nodes_ready(initial, Duration::from_secs(120))
            .await
            .map_err(|e| e.to_string())?;
        for o in &self.objects {
            cluster.create(o.clone()).await.map_err(|e| e.to_string())?;
        }
        let faults = built.faults;
        let decisions = built.autoscaler.decisions.clone();
        let task = tokio::spawn(built.autoscaler.run());
        Ok(Running {
            cluster,
            faults,
            decisions,
            task,
        })
    }

    /// Creates an object now if the cluster runs, else before it starts.
    pub async fn create(&mut self, obj: Value) -> StepResult {
        match &self.running {
            Some(r) => r.cluster.create(obj).await.map_err(|e| e.to_string()),
            None => {
                self.objects.push(obj);
                Ok(())
            }
        }
    }

    /// The nodes of a group.
    pub async fn group_nodes(&mut self, group: &str) -> Result<Vec<Node>, String> {
        let r = self.running().await?;
        let nodes = Api::<Node>::all(r.cluster.client())
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(nodes
            .items
            .into_iter()
            .filter(|n| {
                n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kwok-nodegroup"))
                    .map(String::as_str)
                    == Some(group)
            })
            .collect())
    }
}
