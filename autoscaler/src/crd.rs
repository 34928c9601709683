//! What the custom resources CA reads and writes share
//! (ProvisioningRequests, CapacityBuffers, CapacityQuotas): their
//! k8s-openapi type impls ([`crd_kind!`](crate::crd_kind)) and the write of
//! a status ([`replace_status`]): a PUT of the `status` subresource in JSON
//! (CRDs speak no protobuf), under CA's field manager.

use kube::Api;
use kube::api::PostParams;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Implements `k8s_openapi::Resource` and `Metadata` for a custom resource
/// struct with a `metadata: ObjectMeta` field:
/// `crd_kind!(Type, "group", "version", "Kind", "plural", Namespace|Cluster)`.
#[macro_export]
macro_rules! crd_kind {
    ($ty:ty, $group:literal, $version:literal, $kind:literal, $plural:literal, $scope:ident) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $crate::crd_kind!(@scope $scope);
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
    (@scope Namespace) => {
        k8s_openapi::NamespaceResourceScope
    };
    (@scope Cluster) => {
        k8s_openapi::ClusterResourceScope
    };
}

/// The server's message of an API error, or the error.
pub fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Why a status could not be written (rendered as the serializer's text
/// or the server's message).
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The object does not go through JSON.
    #[error("{source}")]
    Encode {
        /// The object's kind.
        kind: &'static str,
        /// The object's name.
        name: String,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// The server refused the write.
    #[error("{}", api_message(.source))]
    Api {
        /// The object's kind.
        kind: &'static str,
        /// The object's name.
        name: String,
        /// The server's error.
        source: kube::Error,
    },
}

/// Writes `obj`'s status through `api` (its `apiVersion` and `kind` set
/// from its type); the object the server returns.
pub async fn replace_status<K>(api: &Api<K>, obj: &K) -> Result<K, StatusError>
where
    K: kube::Resource<DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + std::fmt::Debug
        + Serialize
        + DeserializeOwned,
{
    let kind = <K as k8s_openapi::Resource>::KIND;
    let name = kube::Resource::meta(obj).name.clone().unwrap_or_default();
    let encode = |source| StatusError::Encode {
        kind,
        name: name.clone(),
        source,
    };
    let mut body = serde_json::to_value(obj).map_err(encode)?;
    body["apiVersion"] = <K as k8s_openapi::Resource>::API_VERSION.into();
    body["kind"] = kind.into();
    let body: K = serde_json::from_value(body).map_err(encode)?;
    let pp = PostParams {
        dry_run: false,
        field_manager: Some("cluster-autoscaler".into()),
    };
    api.replace_status(&name, &pp, &body)
        .await
        .map_err(|source| StatusError::Api {
            kind,
            name: name.clone(),
            source,
        })
}
