//! The annotation and label keys of Cluster API objects, under the
//! configured API group (`CAPI_GROUP`).

/// The annotation and label keys, under the configured group.
#[derive(Debug, Clone)]
pub struct Keys {
    /// The API group (`CAPI_GROUP`).
    pub group: String,
}

impl Keys {
    /// `<group>/cluster-api-autoscaler-node-group-min-size`.
    pub fn min_size(&self) -> String {
        format!("{}/cluster-api-autoscaler-node-group-min-size", self.group)
    }
    /// `<group>/cluster-api-autoscaler-node-group-max-size`.
    pub fn max_size(&self) -> String {
        format!("{}/cluster-api-autoscaler-node-group-max-size", self.group)
    }
    /// `<group>/delete-machine`.
    pub fn delete_machine(&self) -> String {
        format!("{}/delete-machine", self.group)
    }
    /// `<group>/machine` (on Nodes).
    pub fn machine(&self) -> String {
        format!("{}/machine", self.group)
    }
    /// `<group>/cluster-namespace` (on Nodes).
    pub fn cluster_namespace(&self) -> String {
        format!("{}/cluster-namespace", self.group)
    }
    /// `<group>/cluster-name` (label).
    pub fn cluster_name(&self) -> String {
        format!("{}/cluster-name", self.group)
    }
    /// `<group>/autoscaling-options-` (per-group options).
    pub fn options_prefix(&self) -> String {
        format!("{}/autoscaling-options-", self.group)
    }
}
