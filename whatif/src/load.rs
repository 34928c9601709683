//! Creating a [`Plan`]'s objects in the embedded cluster, in order: each
//! dependent's ownerReferences (and a Job's pods' uid labels) are pointed
//! at its owner's new uid. Objects go through the API as a client would,
//! except nodes and bound pods, which are written with their status in one
//! write by the API server itself, as a restore of a snapshot writes them
//! (the API's create and admission, without the HTTP round trips).

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use apimachinery::json::Lookup;
use apiserver::server::WriteOptions;
use apiserver::{ApiError, Server};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kwok::template::{Context, Template};
use serde_json::Value;

use crate::kinds::Kind;
use crate::plan::{JOB_UID_LABELS, Plan};

/// Why an object could not be created.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The API server refused it.
    #[error("creating {object}: {source}")]
    Create {
        /// `Kind namespace/name`.
        object: String,
        /// The API's answer.
        source: kube::Error,
    },
    /// The API server refused it with its status ([`Server::restore`]).
    #[error("creating {object}: {message}")]
    Restore {
        /// `Kind namespace/name`.
        object: String,
        /// The API server's answer: code, reason and message.
        message: String,
    },
    /// Its status could not be written.
    #[error("writing the status of {object}: {source}")]
    Status {
        /// `Kind namespace/name`.
        object: String,
        /// The API's answer.
        source: kube::Error,
    },
    /// A bound pod's running status could not be made.
    #[error("making the running status of {object}: {reason}")]
    Running {
        /// `Kind namespace/name`.
        object: String,
        /// Why.
        reason: String,
    },
    /// The autoscaler's CRDs could not be installed.
    #[error("installing the autoscaler's CRDs: {0}")]
    Crds(String),
    /// It is not an object the client can send.
    #[error("{object}: {source}")]
    Encode {
        /// `Kind namespace/name`.
        object: String,
        /// Why.
        source: serde_json::Error,
    },
}

/// What was created.
#[derive(Debug, Default, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Loaded {
    /// Objects created, by kind.
    pub created: BTreeMap<String, usize>,
    /// Objects the cluster already had (its own namespaces and
    /// PriorityClasses).
    pub already_present: usize,
    /// The input's uids and the created objects' (for objects created
    /// later that name them as owners).
    #[serde(skip)]
    pub uids: HashMap<String, String>,
}

/// Creates `plan`'s objects through `client`, upstream's CRDs
/// (CapacityBuffers, CapacityQuotas, ProvisioningRequests) first, as a
/// cluster running the autoscaler serves them.
///
/// A pod bound to a node is loaded running there, its status what kwok's
/// `pod-ready` stage writes, as of `now` (the cluster's start): the
/// cluster starts as the input's was, not replaying each pod's start.
pub async fn load(
    client: Client,
    server: &Server,
    plan: &Plan,
    now: SystemTime,
) -> Result<Loaded, LoadError> {
    install_crds(&client).await?;
    let nodes: HashMap<&str, &Value> = plan
        .objects
        .iter()
        .filter(|p| p.kind == Kind::Node)
        .filter_map(|p| Some((p.value.lookup("/metadata/name")?.as_str()?, &p.value)))
        .collect();
    let mut loaded = Loaded::default();
    for p in &plan.objects {
        let mut value = p.value.clone();
        point_at_new_owners(&mut value, &loaded.uids);
        if p.kind == Kind::Pod {
            relabel_job_pods(&mut value, &loaded.uids);
        }
        let object = describe(p.kind, &value);
        if let (Kind::Pod | Kind::Node, Some(seed)) = (p.kind, &p.status) {
            let uid = restore(server, p.kind, value, seed, &nodes, now, &object)?;
            *loaded.created.entry(p.kind.name().into()).or_default() += 1;
            if let (Some(old), Some(new)) = (&p.old_uid, uid) {
                loaded.uids.insert(old.clone(), new);
            }
            continue;
        }
        let api_version = value.get("apiVersion").and_then(Value::as_str);
        let resource = p.kind.resource(api_version);
        let namespace = value
            .lookup("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string();
        let api: Api<DynamicObject> = if p.kind.namespaced() {
            Api::namespaced_with(client.clone(), &namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let dynamic: DynamicObject =
            serde_json::from_value(value).map_err(|source| LoadError::Encode {
                object: object.clone(),
                source,
            })?;
        let created = match api.create(&PostParams::default(), &dynamic).await {
            Ok(created) => {
                *loaded.created.entry(p.kind.name().into()).or_default() += 1;
                created
            }
            Err(kube::Error::Api(status))
                if status.code == 409
                    && matches!(p.kind, Kind::Namespace | Kind::PriorityClass) =>
            {
                loaded.already_present += 1;
                let name = dynamic.metadata.name.clone().unwrap_or_default();
                api.get(&name).await.map_err(|source| LoadError::Create {
                    object: object.clone(),
                    source,
                })?
            }
            Err(source) => return Err(LoadError::Create { object, source }),
        };
        // A custom resource's status (nodes and bound pods were restored
        // with theirs above).
        if let Some(status) = &p.status {
            let name = created.metadata.name.clone().unwrap_or_default();
            let patch = serde_json::json!({ "status": status });
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| LoadError::Status {
                    object: object.clone(),
                    source,
                })?;
        }
        if let (Some(old), Some(new)) = (&p.old_uid, created.metadata.uid) {
            loaded.uids.insert(old.clone(), new);
        }
    }
    Ok(loaded)
}

/// The status kwok's `pod-ready` stage gives `pod` on its node, with the
/// pod IP `seed` holds, if any.
fn running_status(
    pod: &Value,
    seed: &Value,
    nodes: &HashMap<&str, &Value>,
    now: SystemTime,
) -> Result<Value, String> {
    let node = pod
        .lookup("/spec/nodeName")
        .and_then(Value::as_str)
        .and_then(|n| nodes.get(n).copied());
    let ctx = Context {
        now,
        start: SystemTime::UNIX_EPOCH,
        node_ip: "",
        node_name: "",
        node_port: 0,
        node,
        pod_ip: seed
            .get("podIP")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    Template::PodReady.render(pod, &ctx)
}

/// Writes a node, or a pod bound to its node, with its status in one
/// write, as a snapshot restore does ([`Server::restore`]): a pod gets
/// the status kwok's `pod-ready` stage gives it (it reads only the pod's
/// spec, the same in the input as in the created pod). Returns the new uid.
fn restore(
    server: &Server,
    kind: Kind,
    value: Value,
    seed: &Value,
    nodes: &HashMap<&str, &Value>,
    now: SystemTime,
    object: &str,
) -> Result<Option<String>, LoadError> {
    let refused = |e: ApiError| LoadError::Restore {
        object: object.to_string(),
        message: format!("{} {}: {}", e.code, e.reason, e.message),
    };
    let status = match kind {
        Kind::Pod => {
            running_status(&value, seed, nodes, now).map_err(|reason| LoadError::Running {
                object: object.to_string(),
                reason,
            })?
        }
        _ => seed.clone(),
    };
    let def = server.def(kind.group(), kind.plural()).map_err(refused)?;
    let namespace = kind.namespaced().then(|| {
        value
            .lookup("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string()
    });
    let stored = server
        .restore(
            &def,
            namespace.as_deref(),
            value,
            &status,
            &WriteOptions::default(),
        )
        .map_err(refused)?;
    let stored: Stored = serde_json::from_slice(&stored).map_err(|source| LoadError::Encode {
        object: object.to_string(),
        source,
    })?;
    Ok(stored.metadata.uid)
}

/// The part of a stored object the loader reads back: its new uid.
#[derive(serde::Deserialize)]
struct Stored {
    metadata: StoredMeta,
}

#[derive(serde::Deserialize)]
struct StoredMeta {
    uid: Option<String>,
}

async fn install_crds(client: &Client) -> Result<(), LoadError> {
    let resource = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    for crd in harness::crds::all().map_err(LoadError::Crds)? {
        let crd: DynamicObject =
            serde_json::from_value(crd).map_err(|e| LoadError::Crds(e.to_string()))?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &crd)
            .await
            .map_err(|e| LoadError::Crds(format!("{name}: {e}")))?;
    }
    Ok(())
}

/// Points ownerReferences at the owners' new uids; a reference to an
/// owner that was not created goes.
pub fn point_at_new_owners(value: &mut Value, uids: &HashMap<String, String>) {
    let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
        refs.retain_mut(|r| {
            let new = r
                .get("uid")
                .and_then(Value::as_str)
                .and_then(|u| uids.get(u));
            match new {
                Some(new) => {
                    r["uid"] = Value::from(new.as_str());
                    true
                }
                None => false,
            }
        });
        if refs.is_empty() {
            meta.remove("ownerReferences");
        }
    }
}

/// A Job's pods carry its uid in labels its selector matches: the new one.
fn relabel_job_pods(value: &mut Value, uids: &HashMap<String, String>) {
    let Some(labels) = value
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for key in JOB_UID_LABELS {
        if let Some(new) = labels
            .get(*key)
            .and_then(Value::as_str)
            .and_then(|old| uids.get(old))
            .cloned()
        {
            labels.insert((*key).into(), Value::from(new));
        }
    }
}

fn describe(kind: Kind, value: &Value) -> String {
    let name = value
        .lookup("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match value.lookup("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) if kind.namespaced() => format!("{kind} {ns}/{name}"),
        _ => format!("{kind} {name}"),
    }
}
