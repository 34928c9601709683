//! `Server::restore`: an object created with its status in one write, as
//! a loader of a cluster's snapshot needs, through the create's admission.

use apiserver::ApiServer;
use apiserver::server::WriteOptions;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;
use simclock::Clock;

fn pod(name: &str, containers: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": containers},
    })
}

#[tokio::test]
async fn a_restored_pod_keeps_its_status_over_what_admission_sets() {
    let api = ApiServer::start(Clock::new()).unwrap();
    let server = api.server();
    let def = server.def("", "pods").unwrap();
    let containers = json!([{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]);
    let status = json!({"phase": "Running", "podIP": "10.0.0.7", "initContainerStatuses": null});
    server
        .restore(
            &def,
            Some("default"),
            pod("web", containers),
            &status,
            &WriteOptions::default(),
        )
        .unwrap();
    let read = Api::<Pod>::namespaced(api.client(), "default")
        .get("web")
        .await
        .unwrap();
    let s = read.status.unwrap();
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(s.pod_ip.as_deref(), Some("10.0.0.7"));
    // Admission's part stays: the QoS class, a uid, the default tolerations.
    assert_eq!(s.qos_class.as_deref(), Some("Burstable"));
    assert!(read.metadata.uid.is_some());
    assert!(
        read.spec
            .unwrap()
            .tolerations
            .is_some_and(|t| !t.is_empty())
    );
}

#[tokio::test]
async fn a_restore_is_refused_where_a_create_is() {
    let api = ApiServer::start(Clock::new()).unwrap();
    let server = api.server();
    let def = server.def("", "pods").unwrap();
    let status = json!({"phase": "Running"});
    let e = server
        .restore(
            &def,
            Some("default"),
            pod("empty", json!([])),
            &status,
            &WriteOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.code, 422, "{}", e.message);
    let e = server
        .restore(
            &def,
            Some("other"),
            pod("elsewhere", json!([{"name": "c", "image": "i"}])),
            &status,
            &WriteOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.code, 400, "{}", e.message);
}
