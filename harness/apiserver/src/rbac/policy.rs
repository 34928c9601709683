//! The authorizer, as kube-apiserver chains it for a cluster with RBAC: a
//! member of `system:masters` is allowed everything, then RBAC decides from
//! the stored ClusterRoleBindings (everywhere) and the RoleBindings of the
//! request's namespace, plus kube-apiserver's bootstrap policy
//! ([`bootstrap`]), which the testbed does not store but honours. RBAC only
//! allows: what no rule allows is refused with no opinion (`allowed: false`,
//! never `denied`). [`rules_for`] lists the rules a user holds in a
//! namespace, as SelfSubjectRulesReview reports them.

use std::sync::OnceLock;

use apimachinery::json::Lookup;
use serde_json::{Value, json};

use super::attributes::{Access, rule_allows_access};
use super::user::{AUTHENTICATED, MASTERS, UNAUTHENTICATED, UserInfo, service_account_user};
use crate::error::ApiResult;
use crate::server::Server;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// An authorization decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Allowed.
    pub allowed: bool,
    /// Why, in the authorizer's words (`RBAC: allowed by ...`); for a
    /// refusal, the errors met resolving roles, if any.
    pub reason: String,
}

/// The rules a user holds in a namespace, split as SelfSubjectRulesReview
/// lists them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    /// The rules with resources (`verbs`, `apiGroups`, `resources`,
    /// `resourceNames`).
    pub resource: Vec<Value>,
    /// The rules with non-resource URLs (`verbs`, `nonResourceURLs`).
    pub non_resource: Vec<Value>,
    /// Errors met resolving the bindings' roles, aggregated as Go's
    /// `utilerrors.NewAggregate` writes them (`""` when none).
    pub evaluation_error: String,
}

/// kube-apiserver's bootstrap ClusterRoles and ClusterRoleBindings that
/// decide what the testbed's users may do without any stored policy:
/// `cluster-admin` for `system:masters`; `system:basic-user` (the self
/// reviews), `system:discovery` and `system:public-info-viewer` for every
/// authenticated user. A stored object of the same name replaces one.
pub fn bootstrap() -> &'static (Vec<Value>, Vec<Value>) {
    static POLICY: OnceLock<(Vec<Value>, Vec<Value>)> = OnceLock::new();
    POLICY.get_or_init(|| {
        let role = |name: &str, rules: Value| json!({"metadata": {"name": name}, "rules": rules});
        let binding = |name: &str, groups: &[&str]| {
            let subjects: Vec<Value> = groups
                .iter()
                .map(|g| json!({"apiGroup": RBAC_GROUP, "kind": "Group", "name": g}))
                .collect();
            json!({
                "metadata": {"name": name},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
                "subjects": subjects,
            })
        };
        let roles = vec![
            role(
                "cluster-admin",
                json!([
                    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                    {"nonResourceURLs": ["*"], "verbs": ["*"]},
                ]),
            ),
            role(
                "system:basic-user",
                json!([
                    {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                    {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
                ]),
            ),
            role(
                "system:discovery",
                json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            ),
            role(
                "system:public-info-viewer",
                json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            ),
        ];
        let bindings = vec![
            binding("cluster-admin", &[MASTERS]),
            binding("system:basic-user", &[AUTHENTICATED]),
            binding("system:discovery", &[AUTHENTICATED]),
            binding("system:public-info-viewer", &[AUTHENTICATED, UNAUTHENTICATED]),
        ];
        (roles, bindings)
    })
}

fn name_of(v: &Value) -> &str {
    v.lookup("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.lookup(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The stored objects of an RBAC resource (in `ns`, or all).
fn stored(server: &Server, resource: &str, ns: Option<&str>) -> ApiResult<Vec<Value>> {
    let def = server.def(RBAC_GROUP, resource)?;
    Ok(server
        .list(&def, ns, &Default::default())?
        .items
        .iter()
        .map(|o| o.value())
        .collect())
}

/// The ClusterRoleBindings in force: the stored ones and the bootstrap ones
/// no stored one replaces, by name.
fn cluster_role_bindings(server: &Server) -> ApiResult<Vec<Value>> {
    let mut all = stored(server, "clusterrolebindings", None)?;
    for b in &bootstrap().1 {
        if !all.iter().any(|s| name_of(s) == name_of(b)) {
            all.push(b.clone());
        }
    }
    all.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    Ok(all)
}

/// The rules of the role a binding in `ns` (`""` for a ClusterRoleBinding)
/// refers to, or the error RBAC's rule resolver reports.
fn role_rules(server: &Server, binding: &Value, ns: &str) -> ApiResult<Result<Vec<Value>, String>> {
    let name = str_at(binding, "/roleRef/name");
    let role = match str_at(binding, "/roleRef/kind") {
        "ClusterRole" => {
            let def = server.def(RBAC_GROUP, "clusterroles")?;
            match server.get(&def, "", name) {
                Ok(o) => Some(o.value()),
                Err(_) => bootstrap().0.iter().find(|r| name_of(r) == name).cloned(),
            }
            .ok_or_else(|| format!("clusterrole.{RBAC_GROUP} {name:?} not found"))
        }
        "Role" => {
            let def = server.def(RBAC_GROUP, "roles")?;
            server
                .get(&def, ns, name)
                .map(|o| o.value())
                .map_err(|_| format!("role.{RBAC_GROUP} {name:?} not found"))
        }
        other => Err(format!("unsupported role reference kind: {other:?}")),
    };
    Ok(role.map(|r| {
        r.get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }))
}

/// Whether a binding's subject is `user`. A ServiceAccount subject's
/// namespace defaults to the binding's (`ns`); with neither, it is no one.
fn applies(subject: &Value, user: &UserInfo, ns: &str) -> bool {
    let name = str_at(subject, "/name");
    match str_at(subject, "/kind") {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let sa_ns = match str_at(subject, "/namespace") {
                "" => ns,
                n => n,
            };
            !sa_ns.is_empty() && user.name == service_account_user(sa_ns, name)
        }
        _ => false,
    }
}

/// `ServiceAccount "name/ns"`, `User "alice"`, `Group "g"`.
fn describe_subject(subject: &Value, ns: &str) -> String {
    let kind = str_at(subject, "/kind");
    let name = str_at(subject, "/name");
    if kind == "ServiceAccount" {
        let sa_ns = match str_at(subject, "/namespace") {
            "" => ns,
            n => n,
        };
        return format!("{kind} {:?}", format!("{name}/{sa_ns}"));
    }
    format!("{kind} {name:?}")
}

/// Calls `visit(source, rule)` for every rule `user` holds in `namespace`
/// (ClusterRoleBindings first, then the namespace's RoleBindings) until it
/// returns false; returns the errors met resolving roles.
fn visit_rules(
    server: &Server,
    user: &UserInfo,
    namespace: &str,
    mut visit: impl FnMut(&str, &Value) -> bool,
) -> ApiResult<Vec<String>> {
    let mut errors = Vec::new();
    let mut bindings: Vec<(Value, String)> = cluster_role_bindings(server)?
        .into_iter()
        .map(|b| (b, String::new()))
        .collect();
    if !namespace.is_empty() {
        for b in stored(server, "rolebindings", Some(namespace))? {
            bindings.push((b, namespace.to_string()));
        }
    }
    for (binding, ns) in &bindings {
        let subjects = binding
            .get("subjects")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let Some(subject) = subjects.iter().find(|s| applies(s, user, ns)) else {
            continue;
        };
        let rules = match role_rules(server, binding, ns)? {
            Ok(rules) => rules,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let source = if ns.is_empty() {
            format!("ClusterRoleBinding {:?}", name_of(binding))
        } else {
            format!("RoleBinding {:?}", format!("{}/{ns}", name_of(binding)))
        };
        let source = format!(
            "{source} of {} {:?} to {}",
            str_at(binding, "/roleRef/kind"),
            str_at(binding, "/roleRef/name"),
            describe_subject(subject, ns)
        );
        for rule in &rules {
            if !visit(&source, rule) {
                return Ok(errors);
            }
        }
    }
    Ok(errors)
}

/// Go's `utilerrors.NewAggregate(errs).Error()`: one message as it is,
/// several (deduplicated) in brackets.
fn aggregate(errors: &[String]) -> String {
    let mut unique: Vec<&str> = Vec::new();
    for e in errors {
        if !unique.contains(&e.as_str()) {
            unique.push(e);
        }
    }
    match unique.as_slice() {
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Whether `user` may do `access`, and why.
pub fn decide(server: &Server, user: &UserInfo, access: &Access) -> ApiResult<Decision> {
    if user.is_privileged() {
        // k8s.io/apiserver's privileged-group authorizer: allowed, no reason.
        return Ok(Decision {
            allowed: true,
            reason: String::new(),
        });
    }
    let mut allowed_by = None;
    let errors = visit_rules(server, user, access.namespace(), |source, rule| {
        if rule_allows_access(rule, access) {
            allowed_by = Some(format!("RBAC: allowed by {source}"));
            return false;
        }
        true
    })?;
    Ok(match allowed_by {
        Some(reason) => Decision {
            allowed: true,
            reason,
        },
        None if errors.is_empty() => Decision {
            allowed: false,
            reason: String::new(),
        },
        None => Decision {
            allowed: false,
            reason: format!("RBAC: {}", aggregate(&errors)),
        },
    })
}

/// The rules `user` holds in `namespace`.
pub fn rules_for(server: &Server, user: &UserInfo, namespace: &str) -> ApiResult<Rules> {
    let mut rules = Rules::default();
    let errors = visit_rules(server, user, namespace, |_, rule| {
        let list = |k: &str| {
            rule.get(k)
                .and_then(Value::as_array)
                .filter(|a| !a.is_empty())
                .cloned()
        };
        let verbs = list("verbs").unwrap_or_default();
        if let Some(resources) = list("resources") {
            let mut r = json!({"verbs": verbs, "resources": resources});
            for k in ["apiGroups", "resourceNames"] {
                if let Some(v) = list(k) {
                    r[k] = json!(v);
                }
            }
            rules.resource.push(r);
        }
        if let Some(urls) = list("nonResourceURLs") {
            rules
                .non_resource
                .push(json!({"verbs": verbs, "nonResourceURLs": urls}));
        }
        true
    })?;
    if !errors.is_empty() {
        rules.evaluation_error = aggregate(&errors);
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_aggregate_as_go_writes_them() {
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
    }

    #[test]
    fn subjects_are_described_as_rbac_describes_them() {
        let sa = json!({"kind": "ServiceAccount", "name": "ca"});
        assert_eq!(
            describe_subject(&sa, "kube-system"),
            "ServiceAccount \"ca/kube-system\""
        );
        let g = json!({"kind": "Group", "name": "system:masters"});
        assert_eq!(describe_subject(&g, ""), "Group \"system:masters\"");
    }

    #[test]
    fn a_service_account_subject_needs_a_namespace() {
        let user = UserInfo {
            name: "system:serviceaccount:kube-system:ca".into(),
            ..UserInfo::default()
        };
        let bare = json!({"kind": "ServiceAccount", "name": "ca"});
        assert!(
            !applies(&bare, &user, ""),
            "a ClusterRoleBinding gives none"
        );
        assert!(applies(&bare, &user, "kube-system"));
        assert!(!applies(&bare, &user, "default"));
    }
}
