//! Impersonation (`kubectl --as`, `--as-group`, `--as-uid`): the
//! `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and
//! `Impersonate-Extra-<key>` headers, as k8s.io/apiserver's
//! `WithImpersonation` filter reads them. Each thing impersonated is
//! authorized first (verb `impersonate` on `users`, `serviceaccounts`,
//! `groups`, `authentication.k8s.io` `uids` and `userextras/<key>`), then the
//! request runs as the impersonated user.

use axum::http::HeaderMap;

use super::attributes::{Access, Attributes};
use super::policy::decide;
use super::user::{
    ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED, User, UserInfo, service_account_groups,
    service_account_user, split_service_account,
};
use crate::error::{ApiError, ApiResult};
use crate::server::Server;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";

/// One thing a request asks to impersonate.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wanted {
    ServiceAccount { namespace: String, name: String },
    User(String),
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Wanted {
    /// The access the requester needs to impersonate it.
    fn attributes(&self) -> Attributes {
        let (group, resource, subresource, namespace, name) = match self {
            Wanted::ServiceAccount { namespace, name } => {
                ("", "serviceaccounts", None, namespace.as_str(), name)
            }
            Wanted::User(name) => ("", "users", None, "", name),
            Wanted::Group(name) => ("", "groups", None, "", name),
            Wanted::Extra { key, value } => (
                AUTHENTICATION_GROUP,
                "userextras",
                Some(key.clone()),
                "",
                value,
            ),
            Wanted::Uid(uid) => (AUTHENTICATION_GROUP, "uids", None, "", uid),
        };
        Attributes {
            verb: "impersonate",
            group: group.into(),
            resource: resource.into(),
            subresource,
            namespace: namespace.into(),
            name: name.clone(),
        }
    }

    /// Go's `%v` of the `ObjectReference` the filter builds for it.
    fn go_reference(&self) -> String {
        let v1 = format!("{AUTHENTICATION_GROUP}/v1");
        let fields: [&str; 7] = match self {
            Wanted::ServiceAccount { namespace, name } => {
                ["ServiceAccount", namespace, name, "", "", "", ""]
            }
            Wanted::User(name) => ["User", "", name, "", "", "", ""],
            Wanted::Group(name) => ["Group", "", name, "", "", "", ""],
            Wanted::Extra { key, value } => ["UserExtra", "", value, "", &v1, "", key],
            Wanted::Uid(uid) => ["UID", "", uid, "", &v1, "", ""],
        };
        format!("{{{}}}", fields.join(" "))
    }
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = String> + 'a {
    headers
        .get_all(name)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// Go's `url.PathUnescape`, keeping the key as it is when it is not valid
/// percent-encoding.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = key
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(b) = hex else {
                return key.to_string();
            };
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

/// What the headers ask to impersonate, in the filter's order: the user,
/// the groups, the extras, the uid.
fn wanted(headers: &HeaderMap) -> Vec<Wanted> {
    let mut out = Vec::new();
    if let Some(user) = header_values(headers, USER)
        .next()
        .filter(|u| !u.is_empty())
    {
        out.push(match split_service_account(&user) {
            Some((namespace, name)) => Wanted::ServiceAccount {
                namespace: namespace.into(),
                name: name.into(),
            },
            None => Wanted::User(user),
        });
    }
    out.extend(header_values(headers, GROUP).map(Wanted::Group));
    let mut keys: Vec<&str> = headers
        .keys()
        .filter_map(|k| k.as_str().strip_prefix(EXTRA_PREFIX))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        let values = header_values(headers, &format!("{EXTRA_PREFIX}{key}")).collect::<Vec<_>>();
        out.extend(values.into_iter().map(|value| Wanted::Extra {
            key: unescape(key),
            value,
        }));
    }
    if let Some(uid) = header_values(headers, UID).next().filter(|u| !u.is_empty()) {
        out.push(Wanted::Uid(uid));
    }
    out
}

/// The user a request runs as: `requester`, or whom its impersonation
/// headers name once `requester` may impersonate each of them (403 with
/// kube-apiserver's message otherwise; 500 for groups, extras or a uid
/// without a user, as kube-apiserver answers). `uri` is the request's, for
/// that 500's message.
pub fn impersonate(
    server: &Server,
    requester: User,
    headers: &HeaderMap,
    uri: &str,
) -> ApiResult<User> {
    let wanted = wanted(headers);
    if wanted.is_empty() {
        return Ok(requester);
    }
    let has_user = matches!(
        wanted.first(),
        Some(Wanted::User(_) | Wanted::ServiceAccount { .. })
    );
    if !has_user {
        let refs: Vec<String> = wanted.iter().map(Wanted::go_reference).collect();
        return Err(ApiError::internal(format!(
            "Internal Server Error: {uri:?}: requested [{}] without impersonating a user",
            refs.join(" ")
        )));
    }
    let acting = requester.info();
    let groups_specified = wanted.iter().any(|w| matches!(w, Wanted::Group(_)));
    let mut info = UserInfo::default();
    for w in &wanted {
        let attrs = w.attributes();
        let decision = decide(server, &acting, &Access::from(&attrs))?;
        if !decision.allowed {
            return Err(attrs.denied_because(&acting.name, &decision.reason));
        }
        match w {
            Wanted::ServiceAccount { namespace, name } => {
                info.name = service_account_user(namespace, name);
                if !groups_specified {
                    info.groups = service_account_groups(namespace);
                }
            }
            Wanted::User(name) => info.name = name.clone(),
            Wanted::Group(g) => info.groups.push(g.clone()),
            Wanted::Extra { key, value } => {
                info.extra
                    .entry(key.clone())
                    .or_default()
                    .push(value.clone());
            }
            Wanted::Uid(uid) => info.uid = uid.clone(),
        }
    }
    // A user is authenticated unless the groups say otherwise; the
    // anonymous user is unauthenticated.
    let has = |g: &str| info.groups.iter().any(|x| x == g);
    if info.name != ANONYMOUS {
        if !has(AUTHENTICATED) && !has(UNAUTHENTICATED) {
            info.groups.push(AUTHENTICATED.into());
        }
    } else if !has(UNAUTHENTICATED) {
        info.groups.push(UNAUTHENTICATED.into());
    }
    Ok(User::Impersonated(info))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn headers_name_the_user_groups_extras_and_uid_in_the_filters_order() {
        let h = headers(&[
            ("Impersonate-Uid", "u-1"),
            ("Impersonate-Group", "g1"),
            ("Impersonate-Extra-example.org%2Fscope", "read"),
            ("Impersonate-User", "system:serviceaccount:kube-system:ca"),
            ("Impersonate-Group", "g2"),
        ]);
        assert_eq!(
            wanted(&h),
            vec![
                Wanted::ServiceAccount {
                    namespace: "kube-system".into(),
                    name: "ca".into()
                },
                Wanted::Group("g1".into()),
                Wanted::Group("g2".into()),
                Wanted::Extra {
                    key: "example.org/scope".into(),
                    value: "read".into()
                },
                Wanted::Uid("u-1".into()),
            ]
        );
        assert_eq!(unescape("bad%zzkey"), "bad%zzkey");
    }

    #[test]
    fn a_group_without_a_user_reads_as_the_filters_error() {
        assert_eq!(Wanted::Group("g".into()).go_reference(), "{Group  g    }");
    }
}
