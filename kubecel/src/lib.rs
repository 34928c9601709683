//! Kubernetes' CEL environments on the cel-rust interpreter, shared by the
//! testbed's API server (CRD validation rules, DRA selectors) and by the
//! DRA allocator that the testbed's scheduler and the autoscaler's
//! simulator run.
//!
//! - [`library`]: the environment of k8s.io/apiserver's `pkg/cel/library`
//!   (lists, regex, sets, quantity, semver) plus cel-go's strings
//!   extension, and [`compile`], which renders parse errors as cel-go does.
//! - [`quantity`] and [`semver`]: the values behind `quantity(...)` and
//!   `semver(...)`.
//! - [`device`]: k8s.io/dynamic-resource-allocation's `cel` package: a
//!   device selector (`device.driver`, `device.attributes[domain].name`,
//!   `device.capacity[domain].name`) compiled once and run per device.

pub mod device;
pub mod library;
pub mod quantity;
pub mod semver;

pub use library::{ENV, compile, is_no_such_overload, render, runtime_error};
