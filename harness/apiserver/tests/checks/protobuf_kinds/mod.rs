//! Protobuf request bodies, kind by kind: for every (group, version, kind)
//! that kube-apiserver 1.30–1.35 accepts from a client writing a built-in
//! kind, the body is encoded here as client-go encodes it (the `k8s\0`
//! envelope around a `runtime.Unknown`, the object's message in `raw`) with
//! the independent k8s-pb/prost bindings, and must decode to the JSON object
//! the same client would have sent.

use apiserver::protobuf;

mod kinds_apps;
mod kinds_cluster;
mod kinds_core;
mod support;

use kinds_apps::{policy_rows, workload_rows};
use kinds_cluster::{cluster_rows, delete_options_rows, extension_rows};
use kinds_core::core_rows;
use support::{Row, envelope};

#[test]
fn every_built_in_kind_a_client_writes_decodes_from_protobuf() {
    let rows: Vec<Row> = [
        core_rows(),
        workload_rows(),
        policy_rows(),
        cluster_rows(),
        extension_rows(),
        delete_options_rows(),
    ]
    .into_iter()
    .flatten()
    .collect();
    assert!(rows.len() >= 70, "{} rows", rows.len());
    let mut failures = Vec::new();
    for r in &rows {
        match protobuf::decode(&r.body) {
            Ok(got) if got == r.want => {}
            Ok(got) => failures.push(format!(
                "{} {}:\n  got  {got}\n  want {}",
                r.api_version, r.kind, r.want
            )),
            Err(e) => failures.push(format!("{} {}: {}", r.api_version, r.kind, e.message)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

#[test]
fn a_kind_without_protobuf_is_unsupported_media_type() {
    let body = envelope("cluster.x-k8s.io/v1beta1", "MachineDeployment", b"");
    let e = protobuf::decode(&body).unwrap_err();
    assert_eq!(e.code, 415);
    assert!(
        e.message
            .contains("not supported for cluster.x-k8s.io/v1beta1, Kind=MachineDeployment"),
        "{}",
        e.message
    );
}
