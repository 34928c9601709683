//! Kubernetes API conventions that several crates of this workspace need,
//! written once (upstream's `k8s.io/apimachinery` packages of the same
//! names):
//!
//! - [`labels`]: label selectors in their three forms (the query string
//!   `app=web,tier in (a,b)`, a `metav1.LabelSelector` as JSON, and the typed
//!   `k8s_openapi` struct), and the operators node selector terms share. The
//!   API server filters lists and watches with it, kwok selects the nodes it
//!   manages, the scheduler and the autoscaler match PDBs, spreads and
//!   affinities.
//! - [`fields`]: field selectors (`spec.nodeName=n1,status.phase!=Failed`).
//! - [`validation`]: label keys and values, DNS labels and subdomains.
//! - [`rand`]: the five-character suffixes of generated names.
//! - [`json`]: JSON Pointer lookups without `Value::pointer`'s copies.
//!
//! It depends on nothing but `k8s-openapi` and `serde_json`, so that the
//! production autoscaler can use it as well as the test harness.

pub mod fields;
pub mod json;
pub mod labels;
pub mod rand;
pub mod validation;
