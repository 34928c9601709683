//! Rows of the core group (`v1`).

use k8s_pb::api as pb;
use serde_json::json;

use super::support::{
    Row, container, container_json, int_or_string_int, int_or_string_str, meta, meta_ns,
    object_reference, pod_template, pod_template_json, quantities, row, s, strings, time,
};

pub fn core_rows() -> Vec<Row> {
    use pb::core::v1 as c;
    vec![
        row(
            "v1",
            "Pod",
            c::Pod {
                metadata: meta_ns("web-0", &[("app", "web")]),
                spec: Some(c::PodSpec {
                    containers: vec![container("web", "250m")],
                    node_selector: [("topology.kubernetes.io/zone".to_string(), "a".to_string())]
                        .into(),
                    tolerations: vec![c::Toleration {
                        key: s("dedicated"),
                        operator: s("Exists"),
                        effect: s("NoSchedule"),
                        toleration_seconds: Some(300),
                        ..Default::default()
                    }],
                    priority_class_name: s("high"),
                    termination_grace_period_seconds: Some(0),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"}},
                "spec": {"containers": [container_json("web", "250m")],
                         "nodeSelector": {"topology.kubernetes.io/zone": "a"},
                         "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 300}],
                         "priorityClassName": "high", "terminationGracePeriodSeconds": 0}}),
        ),
        row(
            "v1",
            "Node",
            c::Node {
                metadata: meta("pool-a-1"),
                spec: Some(c::NodeSpec {
                    provider_id: s("kwok://pool-a-1"),
                    unschedulable: Some(true),
                    taints: vec![c::Taint {
                        key: s("ToBeDeletedByClusterAutoscaler"),
                        value: s("1700000000"),
                        effect: s("NoSchedule"),
                        time_added: None,
                    }],
                    ..Default::default()
                }),
                status: Some(c::NodeStatus {
                    capacity: quantities(&[("cpu", "4"), ("memory", "16Gi"), ("pods", "110")]),
                    ..Default::default()
                }),
            },
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "pool-a-1"},
                "spec": {"providerID": "kwok://pool-a-1", "unschedulable": true,
                         "taints": [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000", "effect": "NoSchedule"}]},
                "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}),
        ),
        row(
            "v1",
            "Namespace",
            c::Namespace {
                metadata: meta("team-a"),
                ..Default::default()
            },
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
        ),
        row(
            "v1",
            "ConfigMap",
            c::ConfigMap {
                metadata: meta_ns("cluster-autoscaler-status", &[]),
                data: [("status".to_string(), "time: now".to_string())].into(),
                ..Default::default()
            },
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cluster-autoscaler-status", "namespace": "default"},
                "data": {"status": "time: now"}}),
        ),
        row(
            "v1",
            "Secret",
            c::Secret {
                metadata: meta_ns("token", &[]),
                data: [("token".to_string(), b"s3cret".to_vec())].into(),
                r#type: s("Opaque"),
                ..Default::default()
            },
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "token", "namespace": "default"},
                "data": {"token": "czNjcmV0"}, "type": "Opaque"}),
        ),
        row(
            "v1",
            "Service",
            c::Service {
                metadata: meta_ns("web", &[]),
                spec: Some(c::ServiceSpec {
                    ports: vec![
                        c::ServicePort {
                            name: s("http"),
                            port: Some(80),
                            target_port: int_or_string_int(8080),
                            ..Default::default()
                        },
                        c::ServicePort {
                            name: s("metrics"),
                            port: Some(9090),
                            target_port: int_or_string_str("metrics"),
                            ..Default::default()
                        },
                    ],
                    selector: [("app".to_string(), "web".to_string())].into(),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
                "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080},
                                   {"name": "metrics", "port": 9090, "targetPort": "metrics"}],
                         "selector": {"app": "web"}}}),
        ),
        row(
            "v1",
            "Endpoints",
            c::Endpoints {
                metadata: meta_ns("web", &[]),
                subsets: vec![c::EndpointSubset {
                    addresses: vec![c::EndpointAddress {
                        ip: s("10.0.0.7"),
                        node_name: s("pool-a-1"),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
            },
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web", "namespace": "default"},
                "subsets": [{"addresses": [{"ip": "10.0.0.7", "nodeName": "pool-a-1"}]}]}),
        ),
        row(
            "v1",
            "Event",
            c::Event {
                metadata: meta_ns("web-0.17", &[]),
                involved_object: object_reference("Pod", "web-0"),
                reason: s("TriggeredScaleUp"),
                message: s("pod triggered scale-up: [{pool 0->1 (max: 10)}]"),
                source: Some(c::EventSource {
                    component: s("cluster-autoscaler"),
                    host: None,
                }),
                first_timestamp: time(1_700_000_000),
                last_timestamp: time(1_700_000_060),
                count: Some(2),
                r#type: s("Normal"),
                ..Default::default()
            },
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-0.17", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-0", "apiVersion": "v1"},
                "reason": "TriggeredScaleUp", "message": "pod triggered scale-up: [{pool 0->1 (max: 10)}]",
                "source": {"component": "cluster-autoscaler"},
                "firstTimestamp": "2023-11-14T22:13:20Z", "lastTimestamp": "2023-11-14T22:14:20Z",
                "count": 2, "type": "Normal"}),
        ),
        row(
            "v1",
            "PersistentVolume",
            c::PersistentVolume {
                metadata: meta("pv-1"),
                spec: Some(c::PersistentVolumeSpec {
                    capacity: quantities(&[("storage", "10Gi")]),
                    persistent_volume_source: Some(c::PersistentVolumeSource {
                        host_path: Some(c::HostPathVolumeSource {
                            path: s("/data"),
                            r#type: None,
                        }),
                        ..Default::default()
                    }),
                    access_modes: strings(&["ReadWriteOnce"]),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
                "spec": {"capacity": {"storage": "10Gi"}, "hostPath": {"path": "/data"},
                         "accessModes": ["ReadWriteOnce"]}}),
        ),
        row(
            "v1",
            "PersistentVolumeClaim",
            c::PersistentVolumeClaim {
                metadata: meta_ns("data", &[]),
                spec: Some(c::PersistentVolumeClaimSpec {
                    access_modes: strings(&["ReadWriteOnce"]),
                    resources: Some(c::VolumeResourceRequirements {
                        requests: quantities(&[("storage", "1Gi")]),
                        ..Default::default()
                    }),
                    storage_class_name: s("standard"),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                         "storageClassName": "standard"}}),
        ),
        row(
            "v1",
            "ServiceAccount",
            c::ServiceAccount {
                metadata: meta_ns("cluster-autoscaler", &[]),
                automount_service_account_token: Some(false),
                ..Default::default()
            },
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "cluster-autoscaler", "namespace": "default"},
                "automountServiceAccountToken": false}),
        ),
        row(
            "v1",
            "ReplicationController",
            c::ReplicationController {
                metadata: meta_ns("rc", &[]),
                spec: Some(c::ReplicationControllerSpec {
                    replicas: Some(0),
                    selector: [("app".to_string(), "rc".to_string())].into(),
                    template: pod_template("rc"),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc", "namespace": "default"},
                "spec": {"replicas": 0, "selector": {"app": "rc"}, "template": pod_template_json("rc")}}),
        ),
        row(
            "v1",
            "ResourceQuota",
            c::ResourceQuota {
                metadata: meta_ns("quota", &[]),
                spec: Some(c::ResourceQuotaSpec {
                    hard: quantities(&[("pods", "10"), ("requests.cpu", "2500m")]),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "quota", "namespace": "default"},
                "spec": {"hard": {"pods": "10", "requests.cpu": "2500m"}}}),
        ),
        row(
            "v1",
            "LimitRange",
            c::LimitRange {
                metadata: meta_ns("limits", &[]),
                spec: Some(c::LimitRangeSpec {
                    limits: vec![c::LimitRangeItem {
                        r#type: s("Container"),
                        default_request: quantities(&[("cpu", "100m")]),
                        ..Default::default()
                    }],
                }),
            },
            json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": "default"},
                "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]}}),
        ),
        row(
            "v1",
            "PodTemplate",
            c::PodTemplate {
                metadata: meta_ns("tpl", &[]),
                template: pod_template("tpl"),
            },
            json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "tpl", "namespace": "default"},
                "template": pod_template_json("tpl")}),
        ),
        row(
            "v1",
            "Binding",
            c::Binding {
                metadata: meta_ns("web-0", &[]),
                target: Some(c::ObjectReference {
                    kind: s("Node"),
                    name: s("pool-a-1"),
                    ..Default::default()
                }),
            },
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web-0", "namespace": "default"},
                "target": {"kind": "Node", "name": "pool-a-1"}}),
        ),
    ]
}
