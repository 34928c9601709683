//! A live cluster's state, read through a client: every kind the what-if
//! knows, listed across namespaces, and nothing else. Only `list` is
//! called, never a write; of ConfigMaps only the two the autoscaler reads
//! (the priority expander's and the kwok provider's templates) are asked
//! for, by name, so no other ConfigMap data leaves the cluster. Kinds the
//! cluster does not serve or the client may not list are left out and
//! said so (nodes and pods excepted: without them there is nothing to
//! run).

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};

use crate::kinds::Kind;
use crate::plan::PRIORITY_EXPANDER_CONFIG_MAP;

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A kind the what-if cannot run without could not be listed.
    #[error("listing {kind}s: {source}")]
    List {
        /// The kind.
        kind: Kind,
        /// The API's answer.
        source: kube::Error,
    },
    /// The kubeconfig could not be used.
    #[error("{0}")]
    Kubeconfig(String),
}

/// The cluster's state as one `List`, as `kubectl get -A -o json` writes
/// it, and the kinds that could not be listed with why.
pub async fn read(client: &Client) -> Result<(Value, BTreeMap<String, String>), LiveError> {
    let mut items = Vec::new();
    let mut unreadable = BTreeMap::new();
    for kind in Kind::ALL {
        let resource = kind.resource(None);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let selectors: Vec<Option<String>> = if kind == Kind::ConfigMap {
            [
                PRIORITY_EXPANDER_CONFIG_MAP.1,
                harness::kwok_provider::TEMPLATES_CONFIG_MAP,
            ]
            .iter()
            .map(|name| Some(format!("metadata.name={name}")))
            .collect()
        } else {
            vec![None]
        };
        for selector in selectors {
            let params = match &selector {
                Some(s) => ListParams::default().fields(s),
                None => ListParams::default(),
            };
            match api.list(&params).await {
                Ok(list) => {
                    for o in list.items {
                        let mut v = serde_json::to_value(&o).unwrap_or(Value::Null);
                        v["apiVersion"] = json!(resource.api_version);
                        v["kind"] = json!(resource.kind);
                        items.push(v);
                    }
                }
                Err(source) if matches!(kind, Kind::Node | Kind::Pod) => {
                    return Err(LiveError::List { kind, source });
                }
                Err(e) => {
                    unreadable.insert(kind.name().to_string(), e.to_string());
                }
            }
        }
    }
    Ok((
        json!({"apiVersion": "v1", "kind": "List", "items": items}),
        unreadable,
    ))
}

/// A client from the kubeconfig at `path` (its current context).
pub async fn client(path: &std::path::Path) -> Result<Client, LiveError> {
    let bad = |e: &dyn std::fmt::Display| LiveError::Kubeconfig(format!("{}: {e}", path.display()));
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| bad(&e))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| bad(&e))?;
    Client::try_from(config).map_err(|e| bad(&e))
}
