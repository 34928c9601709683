//! `kwok`: the fake-kubelet controller of the testbed, runnable against any
//! Kubernetes API server (the embedded one, or a real one through a
//! kubeconfig).
//!
//! It follows kwok's design (`docs/reference/kwok-rules.md`): the controller
//! ([`controller`]: the event loop, with its config, jobs, leases, IP
//! pool and the state it shares with its tasks in files of their own) holds no hard-coded lifecycle; every status change is a
//! Stage ([`stage`], `kwok.x-k8s.io/v1alpha1`) chosen by selector and weight,
//! delayed (with jitter) and performed as steps (event, finalizers, status
//! patch, delete). The default fast stage set ([`defaults`]) makes managed
//! nodes Ready and bound pods Running, completes Job pods and finishes
//! graceful deletion. Custom stages (YAML files) override them by weight:
//! nodes that never become Ready, take minutes to, or fail later. Stage
//! selectors use a jq subset ([`jq`]) (node selection by annotation uses
//! the label selector grammar of the `apimachinery` crate); status templates a documented subset of Go
//! templates ([`template`]). Leases in `kube-node-lease` are renewed for
//! managed nodes (and gate them: a node whose lease another controller
//! holds is left alone), pod IPs come from a per-CIDR pool. Stages can also
//! be read live from Stage objects in the cluster ([`stage_crd`]).
//!
//! The `kwok` binary (`src/main.rs`) runs the controller against any API
//! server with upstream's flags and config file format.

pub mod controller;
pub mod defaults;
pub mod jq;
pub mod stage;
pub mod template;

pub use controller::dra::{DRA_DEVICES_ANNOTATION, DRA_PUBLISH_DELAY_ANNOTATION};
pub use controller::{Config, Controller, NODE_ANNOTATION, NodeSelection};
pub use stage::{Compiled, StageError, parse_stages};

/// The default fast stage set, compiled.
pub fn default_stages() -> Vec<Compiled> {
    // The built-in YAML is covered by a test; a failure here is a bug.
    parse_stages(defaults::FAST_STAGES, "built-in fast stages").unwrap_or_default()
}

/// The Stage CustomResourceDefinition as a JSON object, ready to create.
pub fn stage_crd() -> serde_json::Value {
    // The built-in YAML is covered by a test; a failure here is a bug.
    serde_saphyr::from_str(defaults::STAGE_CRD).unwrap_or_default()
}

/// Stages from a custom YAML file, added to the defaults (a custom stage
/// with a positive weight beats an overlapping default stage).
pub fn load_stage_file(path: &std::path::Path) -> Result<Vec<Compiled>, StageError> {
    let text = std::fs::read_to_string(path).map_err(|e| StageError::Yaml {
        file: path.display().to_string(),
        message: e.to_string(),
    })?;
    parse_stages(&text, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stage_crd_parses() {
        let crd = super::stage_crd();
        assert_eq!(crd["metadata"]["name"], "stages.kwok.x-k8s.io");
        assert_eq!(crd["spec"]["scope"], "Cluster");
    }

    #[test]
    fn the_fast_stage_set_parses() {
        let stages = super::parse_stages(super::defaults::FAST_STAGES, "fast").unwrap();
        let names: Vec<&str> = stages.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "node-initialize",
                "node-heartbeat-with-lease",
                "pod-ready",
                "pod-complete",
                "pod-delete"
            ]
        );
    }
}
