//! What a request asks to do, as the authorizer sees it: a resource request
//! ([`Attributes`], from a REST path) or any access question ([`Access`],
//! from an access review or an impersonation check); how one PolicyRule
//! matches it; and kube-apiserver's 403 when it is refused.

use serde_json::Value;

use super::user::User;
use crate::error::ApiError;

/// What a resource request asks to do, as RBAC sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, `impersonate`.
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
        self.denied_because(&user.name(), "")
    }

    /// kube-apiserver's 403 for this request by the user named `user`,
    /// with the authorizer's `reason` after the message when it gave one
    /// (k8s.io/apiserver's `responsewriters.ForbiddenStatusError`).
    pub fn denied_because(&self, user: &str, reason: &str) -> ApiError {
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
        let mut message = format!(
            "{subject} is forbidden: User {user:?} cannot {} resource {:?} in API group {:?} {scope}",
            self.verb,
            self.resource_path(),
            self.group
        );
        if !reason.is_empty() {
            message = format!("{message}: {reason}");
        }
        ApiError::denied(&self.group, &self.resource, &self.name, message)
    }
}

/// One access question: may a user do `verb` to a resource, or to a
/// non-resource URL?
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// A resource request.
    Resource {
        /// Verb (any string: RBAC compares it as it is).
        verb: String,
        /// API group (`""` for core).
        group: String,
        /// Resource (plural).
        resource: String,
        /// Subresource (`""` for none).
        subresource: String,
        /// Namespace (`""` for cluster scope).
        namespace: String,
        /// Object name (`""` for none).
        name: String,
    },
    /// A request for a path that is not a resource (`/healthz`, `/api`).
    NonResource {
        /// Verb (`get`, `post`, ...).
        verb: String,
        /// The URL path.
        path: String,
    },
}

impl Access {
    /// The namespace the question is in (`""` for the cluster scope and
    /// for non-resource URLs): RoleBindings of this namespace apply.
    pub fn namespace(&self) -> &str {
        match self {
            Access::Resource { namespace, .. } => namespace,
            Access::NonResource { .. } => "",
        }
    }
}

impl From<&Attributes> for Access {
    fn from(a: &Attributes) -> Self {
        Access::Resource {
            verb: a.verb.into(),
            group: a.group.clone(),
            resource: a.resource.clone(),
            subresource: a.subresource.clone().unwrap_or_default(),
            namespace: a.namespace.clone(),
            name: a.name.clone(),
        }
    }
}

fn strings<'a>(rule: &'a Value, key: &str) -> Vec<&'a str> {
    rule.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether one PolicyRule allows a resource request (`attrs`).
pub fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    rule_allows_access(rule, &Access::from(attrs))
}

/// Whether one PolicyRule allows `access`, as RBAC's `RuleAllows` decides:
/// verb, API group, resource (`pods`, `pods/eviction`, `*`, `*/scale`) and,
/// when the rule lists any, the name; or verb and non-resource URL (`/api`,
/// `/apis/*`, `*`).
pub fn rule_allows_access(rule: &Value, access: &Access) -> bool {
    let verbs = strings(rule, "verbs");
    let verb_ok = |verb: &str| verbs.iter().any(|v| *v == "*" || *v == verb);
    match access {
        Access::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let path = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let resource_ok = strings(rule, "resources").iter().any(|r| {
                *r == "*"
                    || *r == path
                    || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
            });
            let names = strings(rule, "resourceNames");
            verb_ok(verb)
                && strings(rule, "apiGroups")
                    .iter()
                    .any(|g| *g == "*" || g == group)
                && resource_ok
                && (names.is_empty() || names.contains(&name.as_str()))
        }
        Access::NonResource { verb, path } => {
            verb_ok(verb)
                && strings(rule, "nonResourceURLs").iter().any(|u| {
                    *u == "*"
                        || u == path
                        || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn non_resource_rules_match_paths_and_prefixes() {
        // rbac/v1's NonResourceURLMatches.
        let rule = json!({"nonResourceURLs": ["/apis/*", "/healthz"], "verbs": ["get"]});
        let get = |path: &str| Access::NonResource {
            verb: "get".into(),
            path: path.into(),
        };
        assert!(rule_allows_access(&rule, &get("/healthz")));
        assert!(rule_allows_access(&rule, &get("/apis/apps/v1")));
        assert!(!rule_allows_access(&rule, &get("/api/v1")));
        let post = Access::NonResource {
            verb: "post".into(),
            path: "/healthz".into(),
        };
        assert!(!rule_allows_access(&rule, &post));
        assert!(
            !rule_allows(&rule, &attrs("get", "", "pods", None)),
            "a URL rule is no resource rule"
        );
    }

    #[test]
    fn denial_reads_as_kube_apiserver_writes_it() {
        let user = User::ServiceAccount {
            namespace: "kube-system".into(),
            name: "ca".into(),
            uid: String::new(),
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
        let why = a.denied_because(
            "bob",
            "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found",
        );
        assert!(
            why.message
                .ends_with("at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found"),
            "{}",
            why.message
        );
    }
}
