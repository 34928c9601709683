//! `--node-group-auto-discovery=clusterapi:namespace=…,clusterName=…,<label>=…`
//! (upstream's `clusterapi_autodiscovery.go`): specs are ORed; within one,
//! the namespace, the cluster name and every label must match. No spec
//! means every scalable resource is a candidate.

use apimachinery::labels::{Labels, Operator, Requirement};

use crate::cloudprovider::CloudError;

/// One `clusterapi:` spec.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AutoDiscovery {
    /// `namespace=`: only objects in it.
    pub namespace: Option<String>,
    /// `clusterName=`: only objects of this cluster.
    pub cluster_name: Option<String>,
    /// Any other `key=value`: the object's own labels.
    pub labels: Vec<Requirement>,
}

impl AutoDiscovery {
    /// Parses one flag value; an error is upstream's configuration error.
    pub fn parse(spec: &str) -> Result<Self, CloudError> {
        let parts: Vec<&str> = spec.split(':').collect();
        let [discoverer, pairs] = parts.as_slice() else {
            return Err(CloudError::configuration(format!(
                "spec \"{spec}\" should be discoverer:key=value,key=value"
            )));
        };
        if *discoverer != "clusterapi" {
            return Err(CloudError::configuration(format!(
                "unsupported discoverer specified: {discoverer}"
            )));
        }
        let mut out = Self::default();
        for pair in pairs.split(',').filter(|p| !p.is_empty()) {
            let kv: Vec<&str> = pair.split('=').collect();
            let [key, value] = kv.as_slice() else {
                return Err(CloudError::configuration(format!(
                    "invalid key=value pair [{}]",
                    kv.join(" ")
                )));
            };
            match *key {
                "clusterName" => out.cluster_name = Some(value.to_string()),
                "namespace" => out.namespace = Some(value.to_string()),
                _ => {
                    if let Err(e) = apimachinery::validation::validate_key(key)
                        .and_then(|_| apimachinery::validation::validate_value(value))
                    {
                        return Err(CloudError::configuration(format!(
                            "failed to create label selector; {e}"
                        )));
                    }
                    out.labels
                        .push(Requirement::new(key, Operator::In, [value.to_string()]));
                }
            }
        }
        Ok(out)
    }

    /// Whether an object in `namespace`, of cluster `cluster`, with these
    /// labels is a candidate.
    pub fn allows(&self, namespace: &str, cluster: &str, labels: &Labels) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == namespace)
            && self.cluster_name.as_deref().is_none_or(|c| c == cluster)
            && self.labels.iter().all(|r| r.matches(labels))
    }
}

/// Whether any spec allows the object (all do when there is none).
pub fn allowed(specs: &[AutoDiscovery], namespace: &str, cluster: &str, labels: &Labels) -> bool {
    specs.is_empty() || specs.iter().any(|s| s.allows(namespace, cluster, labels))
}
