//! Who makes a request: the administrator, a ServiceAccount token's
//! account, or someone impersonated; and the user information
//! (`user.Info`: name, uid, groups, extra) the authorizer reads.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// The group whose members may do anything (`system:masters`).
pub const MASTERS: &str = "system:masters";
/// The group of every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of unauthenticated requests.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The anonymous user's name.
pub const ANONYMOUS: &str = "system:anonymous";
/// The prefix of every ServiceAccount's user name.
const SA_PREFIX: &str = "system:serviceaccount:";

/// A user as the authorizer sees it (k8s.io/apiserver's `user.Info`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name (`system:serviceaccount:kube-system:ca`).
    pub name: String,
    /// UID, if known.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// Whether the user is in `system:masters`, which may do anything.
    pub fn is_privileged(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// The user as `authentication.k8s.io/v1` `UserInfo` writes it (empty
    /// fields left out).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("username".into(), json!(self.name));
        if !self.uid.is_empty() {
            out.insert("uid".into(), json!(self.uid));
        }
        if !self.groups.is_empty() {
            out.insert("groups".into(), json!(self.groups));
        }
        if !self.extra.is_empty() {
            out.insert("extra".into(), json!(self.extra));
        }
        Value::Object(out)
    }
}

/// The authenticated user of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    /// The endpoint's own token: group `system:masters`, allowed everything.
    Admin,
    /// A ServiceAccount's token.
    ServiceAccount {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The ServiceAccount's UID.
        uid: String,
    },
    /// Someone a request impersonates (`Impersonate-User` and friends).
    Impersonated(UserInfo),
}

impl User {
    /// The user name as kube-apiserver reports it.
    pub fn name(&self) -> String {
        match self {
            User::Admin => "testbed-admin".into(),
            User::ServiceAccount {
                namespace, name, ..
            } => service_account_user(namespace, name),
            User::Impersonated(info) => info.name.clone(),
        }
    }

    /// The user's name, uid, groups and extra.
    pub fn info(&self) -> UserInfo {
        match self {
            User::Admin => UserInfo {
                name: self.name(),
                groups: vec![MASTERS.into(), AUTHENTICATED.into()],
                ..UserInfo::default()
            },
            User::ServiceAccount { namespace, uid, .. } => {
                let mut groups = service_account_groups(namespace);
                groups.push(AUTHENTICATED.into());
                UserInfo {
                    name: self.name(),
                    uid: uid.clone(),
                    groups,
                    extra: BTreeMap::new(),
                }
            }
            User::Impersonated(info) => info.clone(),
        }
    }
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("{SA_PREFIX}{namespace}:{name}")
}

/// The groups of every ServiceAccount of `namespace` (without
/// `system:authenticated`).
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}

/// The namespace and name of a ServiceAccount user name, when `user` is one
/// (a DNS label and a DNS subdomain after `system:serviceaccount:`).
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SA_PREFIX)?;
    let (namespace, name) = rest.split_once(':')?;
    let valid = !name.contains(':')
        && apimachinery::validation::is_dns_label(namespace)
        && apimachinery::validation::is_dns_subdomain(name);
    valid.then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_user_names_split_as_upstream_splits_them() {
        assert_eq!(
            split_service_account("system:serviceaccount:kube-system:ca"),
            Some(("kube-system", "ca"))
        );
        assert_eq!(split_service_account("system:serviceaccount:a:b:c"), None);
        assert_eq!(split_service_account("system:serviceaccount:Bad:ca"), None);
        assert_eq!(split_service_account("alice"), None);
    }

    #[test]
    fn a_service_account_token_user_has_the_service_account_groups() {
        let sa = User::ServiceAccount {
            namespace: "kube-system".into(),
            name: "ca".into(),
            uid: "u".into(),
        };
        let info = sa.info();
        assert_eq!(info.name, "system:serviceaccount:kube-system:ca");
        assert_eq!(
            info.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
                "system:authenticated"
            ]
        );
        assert!(!info.is_privileged());
        assert!(User::Admin.info().is_privileged());
    }
}
