//! ServiceAccount tokens: issued by the TokenRequest subresource (`POST
//! .../serviceaccounts/<name>/token`, which `kubectl create token` uses) and
//! authenticated for as long as the ServiceAccount exists and the token has
//! not expired; the endpoint's own token is the administrator.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use apimachinery::json::Lookup;
use serde_json::{Value, json};

use super::user::User;
use crate::error::{ApiError, ApiResult};
use crate::server::Server;

/// Token lifetime when the TokenRequest gives none (kube-apiserver: 1 hour).
const DEFAULT_TOKEN_SECONDS: i64 = 3600;
/// The shortest lifetime kube-apiserver accepts.
const MIN_TOKEN_SECONDS: i64 = 600;

/// A ServiceAccount token that was issued.
#[derive(Debug, Clone)]
struct Issued {
    namespace: String,
    name: String,
    uid: String,
    expires: SystemTime,
}

/// ServiceAccount tokens issued by TokenRequest.
#[derive(Debug, Default)]
pub struct Tokens {
    issued: Mutex<HashMap<String, Issued>>,
}

impl Tokens {
    fn issued(&self) -> std::sync::MutexGuard<'_, HashMap<String, Issued>> {
        self.issued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Who carries `token`: the administrator for `admin`, else the
/// ServiceAccount it was issued to (401 when unknown, expired, or its
/// ServiceAccount is gone or was recreated).
pub fn authenticate(server: &Server, admin: &str, token: &str) -> ApiResult<User> {
    if token == admin {
        return Ok(User::Admin);
    }
    let issued = server.tokens.issued().get(token).cloned();
    let Some(t) = issued else {
        return Err(ApiError::unauthorized());
    };
    if server.clock.now() >= t.expires {
        return Err(ApiError::unauthorized());
    }
    let sa = server.def("", "serviceaccounts")?;
    match server.get(&sa, &t.namespace, &t.name) {
        Ok(o) if o.value().lookup("/metadata/uid").and_then(Value::as_str) == Some(&t.uid) => {
            Ok(User::ServiceAccount {
                namespace: t.namespace,
                name: t.name,
                uid: t.uid,
            })
        }
        _ => Err(ApiError::unauthorized()),
    }
}

/// Answers a TokenRequest for ServiceAccount `ns/name`: a new token, valid
/// for `spec.expirationSeconds` (at least 10 minutes; 1 hour by default).
pub fn request_token(server: &Server, ns: &str, name: &str, body: &Value) -> ApiResult<Value> {
    let sa_def = server.def("", "serviceaccounts")?;
    let sa = server.get(&sa_def, ns, name)?.value();
    let seconds = match body.lookup("/spec/expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_TOKEN_SECONDS,
        Some(v) => v.as_i64().filter(|s| *s >= MIN_TOKEN_SECONDS).ok_or_else(|| {
            ApiError::bad_request(format!(
                "TokenRequest for serviceaccount {ns}/{name}: spec.expirationSeconds {v} must be an integer of at least {MIN_TOKEN_SECONDS}"
            ))
        })?,
    };
    let expires = server.clock.now() + Duration::from_secs(seconds.unsigned_abs());
    let token = format!(
        "sa-{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    server.tokens.issued().insert(
        token.clone(),
        Issued {
            namespace: ns.into(),
            name: name.into(),
            uid: sa
                .lookup("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            expires,
        },
    );
    let mut out = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
        "spec": {
            "audiences": body.lookup("/spec/audiences").cloned().unwrap_or(json!(["https://kubernetes.default.svc.cluster.local"])),
            "expirationSeconds": seconds,
        },
        "status": {
            "token": token,
            "expirationTimestamp": simclock::format_rfc3339(expires),
        }
    });
    if let Some(b) = body.lookup("/spec/boundObjectRef") {
        out["spec"]["boundObjectRef"] = b.clone();
    }
    Ok(out)
}
