//! Who a request over TLS is, and what it may do.
//!
//! - **Authentication**: the endpoint's own token is the administrator
//!   (group `system:masters`, allowed everything). A ServiceAccount token is
//!   issued by the TokenRequest subresource (`POST
//!   .../serviceaccounts/<name>/token`, which `kubectl create token` uses)
//!   and names `system:serviceaccount:<namespace>:<name>` with the groups
//!   `system:serviceaccounts`, `system:serviceaccounts:<namespace>` and
//!   `system:authenticated`, for as long as the ServiceAccount exists and the
//!   token has not expired. Anything else is 401.
//! - **Authorization** is Kubernetes RBAC
//!   (`rbac.authorization.k8s.io/v1`): a ClusterRoleBinding grants its
//!   ClusterRole's rules everywhere, a RoleBinding grants its Role's or
//!   ClusterRole's rules in its namespace; a rule matches on verb, API
//!   group, resource (`pods`, `pods/eviction`, `*`, `*/scale`) and, when it
//!   lists any, the object's name. Discovery (`/api`, `/apis`, `/version`,
//!   OpenAPI) is open to every authenticated user, as kube-apiserver's
//!   default `system:discovery` binding makes it. A denial is kube-apiserver's
//!   403 text, naming the user, verb, resource, group and namespace.
//!
//! In-memory clients ([`crate::ApiServer::client`]) are not authenticated:
//! they are the testbed's own components.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::server::Server;

/// Token lifetime when the TokenRequest gives none (kube-apiserver: 1 hour).
const DEFAULT_TOKEN_SECONDS: i64 = 3600;
/// The shortest lifetime kube-apiserver accepts.
const MIN_TOKEN_SECONDS: i64 = 600;

/// The authenticated user of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    /// The endpoint's own token: everything is allowed.
    Admin,
    /// A ServiceAccount's token.
    ServiceAccount {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl User {
    /// The user name as kube-apiserver reports it.
    pub fn name(&self) -> String {
        match self {
            User::Admin => "testbed-admin".into(),
            User::ServiceAccount { namespace, name } => {
                format!("system:serviceaccount:{namespace}:{name}")
            }
        }
    }

    fn groups(&self) -> Vec<String> {
        match self {
            User::Admin => vec!["system:masters".into(), "system:authenticated".into()],
            User::ServiceAccount { namespace, .. } => vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }
}

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

/// What a resource request asks to do, as RBAC sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`.
    pub verb: &'static str,
    /// API group (`""` for core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource (`status`, `scale`, `eviction`, `token`...), if any.
    pub subresource: Option<String>,
    /// Namespace (`""` for cluster scope).
    pub namespace: String,
    /// Object name (`""` for a collection without a `metadata.name` field selector).
    pub name: String,
}

impl Attributes {
    fn resource_path(&self) -> String {
        match &self.subresource {
            Some(s) => format!("{}/{s}", self.resource),
            None => self.resource.clone(),
        }
    }

    /// kube-apiserver's 403 for this request by `user`.
    pub fn denied(&self, user: &User) -> ApiError {
        let scope = if self.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {:?}", self.namespace)
        };
        let qualified = if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        };
        let subject = if self.name.is_empty() {
            qualified
        } else {
            format!("{qualified} {:?}", self.name)
        };
        ApiError::denied(
            &self.group,
            &self.resource,
            &self.name,
            format!(
                "{subject} is forbidden: User {:?} cannot {} resource {:?} in API group {:?} {scope}",
                user.name(),
                self.verb,
                self.resource_path(),
                self.group
            ),
        )
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
        Ok(o) if o.value().pointer("/metadata/uid").and_then(Value::as_str) == Some(&t.uid) => {
            Ok(User::ServiceAccount {
                namespace: t.namespace,
                name: t.name,
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
    let seconds = match body.pointer("/spec/expirationSeconds") {
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
                .pointer("/metadata/uid")
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
            "audiences": body.pointer("/spec/audiences").cloned().unwrap_or(json!(["https://kubernetes.default.svc.cluster.local"])),
            "expirationSeconds": seconds,
        },
        "status": {
            "token": token,
            "expirationTimestamp": simclock::format_rfc3339(expires),
        }
    });
    if let Some(b) = body.pointer("/spec/boundObjectRef") {
        out["spec"]["boundObjectRef"] = b.clone();
    }
    Ok(out)
}

/// Allows the request or returns kube-apiserver's 403.
pub fn authorize(server: &Server, user: &User, attrs: &Attributes) -> ApiResult<()> {
    if *user == User::Admin || allowed(server, user, attrs)? {
        Ok(())
    } else {
        Err(attrs.denied(user))
    }
}

fn allowed(server: &Server, user: &User, attrs: &Attributes) -> ApiResult<bool> {
    let groups = user.groups();
    let bound = |binding: &Value| {
        binding
            .get("subjects")
            .and_then(Value::as_array)
            .is_some_and(|subjects| {
                subjects
                    .iter()
                    .any(|s| subject_matches(s, user, &groups, binding))
            })
    };
    let list = |resource: &str, ns: Option<&str>| -> ApiResult<Vec<Value>> {
        let def = server.def("rbac.authorization.k8s.io", resource)?;
        Ok(server
            .list(&def, ns, &Default::default())?
            .items
            .iter()
            .map(|o| o.value())
            .collect())
    };
    for binding in list("clusterrolebindings", None)? {
        if bound(&binding)
            && role_kind(&binding) == Some("ClusterRole")
            && rules_allow(server, &binding, "", attrs)?
        {
            return Ok(true);
        }
    }
    if attrs.namespace.is_empty() {
        return Ok(false);
    }
    for binding in list("rolebindings", Some(&attrs.namespace))? {
        if bound(&binding) && rules_allow(server, &binding, &attrs.namespace, attrs)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The kind of role a binding refers to (`Role` or `ClusterRole`).
fn role_kind(binding: &Value) -> Option<&str> {
    let r = binding.get("roleRef")?;
    if r.get("apiGroup").and_then(Value::as_str) != Some("rbac.authorization.k8s.io") {
        return None;
    }
    r.get("kind").and_then(Value::as_str)
}

/// Whether the role a binding refers to has a rule allowing `attrs`. A
/// RoleBinding's Role is read in the binding's namespace `ns`.
fn rules_allow(server: &Server, binding: &Value, ns: &str, attrs: &Attributes) -> ApiResult<bool> {
    let Some(kind) = role_kind(binding) else {
        return Ok(false);
    };
    let name = binding
        .pointer("/roleRef/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let (resource, role_ns) = match kind {
        "ClusterRole" => ("clusterroles", ""),
        "Role" if !ns.is_empty() => ("roles", ns),
        _ => return Ok(false),
    };
    let def = server.def("rbac.authorization.k8s.io", resource)?;
    let Ok(role) = server.get(&def, role_ns, name) else {
        // A binding to a missing role grants nothing, as in RBAC.
        return Ok(false);
    };
    Ok(role
        .value()
        .get("rules")
        .and_then(Value::as_array)
        .is_some_and(|rules| rules.iter().any(|r| rule_allows(r, attrs))))
}

fn subject_matches(subject: &Value, user: &User, groups: &[String], binding: &Value) -> bool {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "ServiceAccount" => {
            let User::ServiceAccount { namespace, name } = user else {
                return false;
            };
            // A ServiceAccount subject's namespace defaults to the binding's.
            let ns = match field("namespace") {
                "" => binding
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                ns => ns,
            };
            field("name") == name && ns == namespace
        }
        "User" => field("name") == user.name(),
        "Group" => groups.iter().any(|g| g == field("name")),
        _ => false,
    }
}

/// Whether one PolicyRule allows `attrs`.
pub fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    let strings = |k: &str| -> Vec<&str> {
        rule.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let verbs = strings("verbs");
    let groups = strings("apiGroups");
    let resources = strings("resources");
    let names = strings("resourceNames");
    let path = attrs.resource_path();
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == path
            || match (r.strip_prefix("*/"), &attrs.subresource) {
                (Some(sub), Some(s)) => sub == s,
                _ => false,
            }
    });
    verbs.iter().any(|v| *v == "*" || *v == attrs.verb)
        && groups.iter().any(|g| *g == "*" || *g == attrs.group)
        && resource_ok
        && (names.is_empty() || (!attrs.name.is_empty() && names.contains(&attrs.name.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(verb: &'static str, group: &str, resource: &str, sub: Option<&str>) -> Attributes {
        Attributes {
            verb,
            group: group.into(),
            resource: resource.into(),
            subresource: sub.map(Into::into),
            namespace: "kube-system".into(),
            name: "x".into(),
        }
    }

    #[test]
    fn rules_match_verb_group_resource_subresource_and_name() {
        let rule = json!({"apiGroups": [""], "resources": ["pods/eviction", "nodes"], "verbs": ["create", "get"]});
        assert!(rule_allows(
            &rule,
            &attrs("create", "", "pods", Some("eviction"))
        ));
        assert!(!rule_allows(&rule, &attrs("create", "", "pods", None)));
        assert!(!rule_allows(&rule, &attrs("delete", "", "nodes", None)));
        assert!(!rule_allows(&rule, &attrs("get", "apps", "nodes", None)));
        let star = json!({"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["*"]});
        assert!(rule_allows(
            &star,
            &attrs("update", "apps", "deployments", Some("scale"))
        ));
        assert!(!rule_allows(
            &star,
            &attrs("update", "apps", "deployments", None)
        ));
        let named = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["x"]});
        assert!(rule_allows(&named, &attrs("get", "", "configmaps", None)));
        let mut other = attrs("get", "", "configmaps", None);
        other.name = "y".into();
        assert!(!rule_allows(&named, &other));
        other.name = String::new();
        assert!(!rule_allows(&named, &other), "a list is not of one name");
    }

    #[test]
    fn denial_reads_as_kube_apiserver_writes_it() {
        let user = User::ServiceAccount {
            namespace: "kube-system".into(),
            name: "ca".into(),
        };
        let mut a = attrs("list", "", "nodes", None);
        a.namespace = String::new();
        a.name = String::new();
        assert_eq!(
            a.denied(&user).status()["message"],
            "nodes is forbidden: User \"system:serviceaccount:kube-system:ca\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        );
        let e = attrs("create", "", "pods", Some("eviction")).denied(&user);
        assert_eq!(
            e.status()["message"],
            "pods \"x\" is forbidden: User \"system:serviceaccount:kube-system:ca\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"kube-system\""
        );
        assert_eq!(e.status()["code"], 403);
    }
}
