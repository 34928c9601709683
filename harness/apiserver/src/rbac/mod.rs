//! Who a request over TLS is, and what it may do.
//!
//! - **Authentication** ([`authenticate`]): the endpoint's own token is the
//!   administrator (group `system:masters`, allowed everything). A
//!   ServiceAccount token is issued by the TokenRequest subresource and
//!   names `system:serviceaccount:<namespace>:<name>` with the groups
//!   `system:serviceaccounts`, `system:serviceaccounts:<namespace>` and
//!   `system:authenticated`, for as long as the ServiceAccount exists and
//!   the token has not expired. Anything else is 401.
//! - **Impersonation** ([`impersonate`]): `Impersonate-User`, `-Group`,
//!   `-Uid` and `-Extra-*` headers make the request run as someone else
//!   once the requester may `impersonate` them (the administrator may).
//! - **Authorization** ([`authorize`], [`decide`]) is Kubernetes RBAC
//!   (`rbac.authorization.k8s.io/v1`) behind the privileged group: a
//!   ClusterRoleBinding grants its ClusterRole's rules everywhere, a
//!   RoleBinding grants its Role's or ClusterRole's rules in its namespace;
//!   a rule matches on verb, API group, resource (`pods`, `pods/eviction`,
//!   `*`, `*/scale`) and, when it lists any, the object's name.
//!   kube-apiserver's bootstrap policy is honoured without being stored
//!   (the self reviews and discovery for every authenticated user).
//!   Discovery (`/api`, `/apis`, `/version`, OpenAPI) is open to every
//!   authenticated user. A denial is kube-apiserver's 403 text, naming the
//!   user, verb, resource, group and namespace.
//! - **Access reviews** ([`review`]): `authorization.k8s.io/v1`
//!   SelfSubjectAccessReview, SubjectAccessReview,
//!   LocalSubjectAccessReview and SelfSubjectRulesReview, and
//!   `authentication.k8s.io/v1` SelfSubjectReview, answered from the same
//!   authorizer.
//!
//! In-memory clients ([`crate::ApiServer::client`]) are not authenticated:
//! they are the testbed's own components.

mod attributes;
mod impersonate;
mod policy;
pub mod review;
mod tokens;
mod user;

pub use attributes::{Access, Attributes, rule_allows, rule_allows_access};
pub use impersonate::impersonate;
pub use policy::{Decision, Rules, bootstrap, decide, rules_for};
pub use tokens::{Tokens, authenticate, request_token};
pub use user::{User, UserInfo, service_account_user, split_service_account};

use crate::error::ApiResult;
use crate::server::Server;

/// Allows the request or returns kube-apiserver's 403 (with RBAC's reason
/// when it gave one).
pub fn authorize(server: &Server, user: &User, attrs: &Attributes) -> ApiResult<()> {
    let info = user.info();
    let decision = decide(server, &info, &Access::from(attrs))?;
    if decision.allowed {
        Ok(())
    } else {
        Err(attrs.denied_because(&info.name, &decision.reason))
    }
}
