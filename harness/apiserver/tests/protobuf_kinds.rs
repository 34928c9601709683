//! Protobuf request bodies, kind by kind: for every (group, version, kind)
//! that kube-apiserver 1.30–1.35 accepts from a client writing a built-in
//! kind, the body is encoded here as client-go encodes it (the `k8s\0`
//! envelope around a `runtime.Unknown`, the object's message in `raw`) with
//! the independent k8s-pb/prost bindings, and must decode to the JSON object
//! the same client would have sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use apiserver::protobuf;
use k8s_pb::api as pb;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Value, json};

/// One row of the table.
struct Row {
    api_version: &'static str,
    kind: &'static str,
    body: Vec<u8>,
    want: Value,
}

fn row(api_version: &'static str, kind: &'static str, msg: impl Message, want: Value) -> Row {
    Row {
        api_version,
        kind,
        body: envelope(api_version, kind, &msg.encode_to_vec()),
        want,
    }
}

/// The body client-go's protobuf serializer writes for an object.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw.to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

fn s(v: &str) -> Option<String> {
    Some(v.into())
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn meta(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        ..Default::default()
    })
}

fn meta_ns(name: &str, labels: &[(&str, &str)]) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        namespace: s("default"),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    })
}

fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), quantity(v)))
        .collect()
}

fn int_or_string_int(v: i32) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(0),
        int_val: Some(v),
        str_val: None,
    })
}

fn int_or_string_str(v: &str) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(1),
        int_val: None,
        str_val: s(v),
    })
}

fn selector(key: &str, value: &str) -> Option<meta::LabelSelector> {
    Some(meta::LabelSelector {
        match_labels: [(key.to_string(), value.to_string())].into(),
        match_expressions: vec![],
    })
}

fn time(seconds: i64) -> Option<meta::Time> {
    Some(meta::Time {
        seconds: Some(seconds),
        nanos: Some(0),
    })
}

fn micro_time(seconds: i64, nanos: i32) -> Option<meta::MicroTime> {
    Some(meta::MicroTime {
        seconds: Some(seconds),
        nanos: Some(nanos),
    })
}

fn delete_options() -> meta::DeleteOptions {
    meta::DeleteOptions {
        grace_period_seconds: Some(30),
        preconditions: Some(meta::Preconditions {
            uid: s("0b5c6b8e-1111-4b4b-9a9a-000000000001"),
            resource_version: None,
        }),
        propagation_policy: s("Background"),
        dry_run: strings(&["All"]),
        ..Default::default()
    }
}

fn delete_options_json(api_version: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": "DeleteOptions",
        "gracePeriodSeconds": 30,
        "preconditions": {"uid": "0b5c6b8e-1111-4b4b-9a9a-000000000001"},
        "propagationPolicy": "Background",
        "dryRun": ["All"],
    })
}

fn container(name: &str, cpu: &str) -> pb::core::v1::Container {
    pb::core::v1::Container {
        name: s(name),
        image: s("registry.k8s.io/pause:3.9"),
        resources: Some(pb::core::v1::ResourceRequirements {
            requests: quantities(&[("cpu", cpu)]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container_json(name: &str, cpu: &str) -> Value {
    json!({"name": name, "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": cpu}}})
}

fn pod_template(app: &str) -> Option<pb::core::v1::PodTemplateSpec> {
    Some(pb::core::v1::PodTemplateSpec {
        metadata: Some(meta::ObjectMeta {
            labels: [("app".to_string(), app.to_string())].into(),
            ..Default::default()
        }),
        spec: Some(pb::core::v1::PodSpec {
            containers: vec![container("c", "100m")],
            ..Default::default()
        }),
    })
}

fn pod_template_json(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [container_json("c", "100m")]}})
}

fn object_reference(kind: &str, name: &str) -> Option<pb::core::v1::ObjectReference> {
    Some(pb::core::v1::ObjectReference {
        kind: s(kind),
        namespace: s("default"),
        name: s(name),
        api_version: s("v1"),
        ..Default::default()
    })
}

fn core_rows() -> Vec<Row> {
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

fn workload_rows() -> Vec<Row> {
    use pb::apps::v1 as apps;
    use pb::autoscaling::{v1 as as1, v2 as as2};
    use pb::batch::v1 as batch;
    vec![
        row(
            "apps/v1",
            "Deployment",
            apps::Deployment {
                metadata: meta_ns("web", &[]),
                spec: Some(apps::DeploymentSpec {
                    replicas: Some(3),
                    selector: selector("app", "web"),
                    template: pod_template("web"),
                    strategy: Some(apps::DeploymentStrategy {
                        r#type: s("RollingUpdate"),
                        rolling_update: Some(apps::RollingUpdateDeployment {
                            max_unavailable: int_or_string_str("25%"),
                            max_surge: int_or_string_int(1),
                        }),
                    }),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": pod_template_json("web"),
                         "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}}}}),
        ),
        row(
            "apps/v1",
            "ReplicaSet",
            apps::ReplicaSet {
                metadata: meta_ns("web-5d4f", &[]),
                spec: Some(apps::ReplicaSetSpec {
                    replicas: Some(2),
                    selector: selector("app", "web"),
                    template: pod_template("web"),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-5d4f", "namespace": "default"},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": pod_template_json("web")}}),
        ),
        row(
            "apps/v1",
            "StatefulSet",
            apps::StatefulSet {
                metadata: meta_ns("db", &[]),
                spec: Some(apps::StatefulSetSpec {
                    replicas: Some(1),
                    selector: selector("app", "db"),
                    template: pod_template("db"),
                    service_name: s("db"),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "db"}}, "template": pod_template_json("db"),
                         "serviceName": "db"}}),
        ),
        row(
            "apps/v1",
            "DaemonSet",
            apps::DaemonSet {
                metadata: meta_ns("logs", &[]),
                spec: Some(apps::DaemonSetSpec {
                    selector: selector("app", "logs"),
                    template: pod_template("logs"),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "logs", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "logs"}}, "template": pod_template_json("logs")}}),
        ),
        row(
            "apps/v1",
            "ControllerRevision",
            apps::ControllerRevision {
                metadata: meta_ns("logs-1", &[]),
                data: Some(k8s_pb::apimachinery::pkg::runtime::RawExtension {
                    raw: Some(br#"{"spec":{"template":{}}}"#.to_vec()),
                }),
                revision: Some(1),
            },
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "logs-1", "namespace": "default"},
                "data": {"spec": {"template": {}}}, "revision": 1}),
        ),
        row(
            "autoscaling/v1",
            "Scale",
            as1::Scale {
                metadata: meta_ns("web", &[]),
                spec: Some(as1::ScaleSpec { replicas: Some(0) }),
                status: None,
            },
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": 0}}),
        ),
        row(
            "autoscaling/v1",
            "HorizontalPodAutoscaler",
            as1::HorizontalPodAutoscaler {
                metadata: meta_ns("web", &[]),
                spec: Some(as1::HorizontalPodAutoscalerSpec {
                    scale_target_ref: Some(as1::CrossVersionObjectReference {
                        kind: s("Deployment"),
                        name: s("web"),
                        api_version: s("apps/v1"),
                    }),
                    min_replicas: Some(1),
                    max_replicas: Some(5),
                    target_cpu_utilization_percentage: Some(80),
                }),
                status: None,
            },
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                         "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 80}}),
        ),
        row(
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
            as2::HorizontalPodAutoscaler {
                metadata: meta_ns("web", &[]),
                spec: Some(as2::HorizontalPodAutoscalerSpec {
                    max_replicas: Some(5),
                    metrics: vec![as2::MetricSpec {
                        r#type: s("Resource"),
                        resource: Some(as2::ResourceMetricSource {
                            name: s("cpu"),
                            target: Some(as2::MetricTarget {
                                r#type: s("Utilization"),
                                average_utilization: Some(70),
                                ..Default::default()
                            }),
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"maxReplicas": 5, "metrics": [{"type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]}}),
        ),
        row(
            "batch/v1",
            "Job",
            batch::Job {
                metadata: meta_ns("once", &[]),
                spec: Some(batch::JobSpec {
                    completions: Some(1),
                    backoff_limit: Some(0),
                    template: pod_template("once"),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": "default"},
                "spec": {"completions": 1, "backoffLimit": 0, "template": pod_template_json("once")}}),
        ),
        row(
            "batch/v1",
            "CronJob",
            batch::CronJob {
                metadata: meta_ns("nightly", &[]),
                spec: Some(batch::CronJobSpec {
                    schedule: s("0 3 * * *"),
                    suspend: Some(false),
                    job_template: Some(batch::JobTemplateSpec {
                        metadata: None,
                        spec: Some(batch::JobSpec {
                            template: pod_template("nightly"),
                            ..Default::default()
                        }),
                    }),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": "default"},
                "spec": {"schedule": "0 3 * * *", "suspend": false,
                         "jobTemplate": {"spec": {"template": pod_template_json("nightly")}}}}),
        ),
    ]
}

fn policy_rows() -> Vec<Row> {
    use pb::policy::{v1 as p1, v1beta1 as p1b1};
    vec![
        row(
            "policy/v1",
            "Eviction",
            p1::Eviction {
                metadata: meta_ns("web-0", &[]),
                delete_options: Some(delete_options()),
            },
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0", "namespace": "default"},
                "deleteOptions": {"gracePeriodSeconds": 30,
                    "preconditions": {"uid": "0b5c6b8e-1111-4b4b-9a9a-000000000001"},
                    "propagationPolicy": "Background", "dryRun": ["All"]}}),
        ),
        // What every upstream Cluster Autoscaler from 1.30 to 1.36 sends.
        row(
            "policy/v1beta1",
            "Eviction",
            p1b1::Eviction {
                metadata: meta_ns("web-0", &[]),
                delete_options: Some(meta::DeleteOptions {
                    grace_period_seconds: Some(30),
                    ..Default::default()
                }),
            },
            json!({"apiVersion": "policy/v1beta1", "kind": "Eviction",
                "metadata": {"name": "web-0", "namespace": "default"},
                "deleteOptions": {"gracePeriodSeconds": 30}}),
        ),
        row(
            "policy/v1",
            "PodDisruptionBudget",
            p1::PodDisruptionBudget {
                metadata: meta_ns("web", &[]),
                spec: Some(p1::PodDisruptionBudgetSpec {
                    min_available: int_or_string_str("50%"),
                    selector: selector("app", "web"),
                    unhealthy_pod_eviction_policy: s("AlwaysAllow"),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}},
                         "unhealthyPodEvictionPolicy": "AlwaysAllow"}}),
        ),
        row(
            "policy/v1beta1",
            "PodDisruptionBudget",
            p1b1::PodDisruptionBudget {
                metadata: meta_ns("web", &[]),
                spec: Some(p1b1::PodDisruptionBudgetSpec {
                    max_unavailable: int_or_string_int(1),
                    selector: selector("app", "web"),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
        ),
    ]
}

fn cluster_rows() -> Vec<Row> {
    vec![
        row(
            "coordination.k8s.io/v1",
            "Lease",
            pb::coordination::v1::Lease {
                metadata: meta_ns("cluster-autoscaler", &[]),
                spec: Some(pb::coordination::v1::LeaseSpec {
                    holder_identity: s("ca-0"),
                    lease_duration_seconds: Some(15),
                    acquire_time: micro_time(1_700_000_000, 0),
                    renew_time: micro_time(1_700_000_000, 123_456_789),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            },
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "cluster-autoscaler", "namespace": "default"},
                "spec": {"holderIdentity": "ca-0", "leaseDurationSeconds": 15,
                         "acquireTime": "2023-11-14T22:13:20.000000Z",
                         "renewTime": "2023-11-14T22:13:20.123456Z", "leaseTransitions": 0}}),
        ),
        row(
            "events.k8s.io/v1",
            "Event",
            pb::events::v1::Event {
                metadata: meta_ns("web-0.18", &[]),
                event_time: micro_time(1_700_000_000, 5_000),
                reporting_controller: s("cluster-autoscaler"),
                reporting_instance: s("cluster-autoscaler-ca-0"),
                action: s("ScaleUp"),
                reason: s("TriggeredScaleUp"),
                regarding: object_reference("Pod", "web-0"),
                note: s("pod triggered scale-up"),
                r#type: s("Normal"),
                ..Default::default()
            },
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "web-0.18", "namespace": "default"},
                "eventTime": "2023-11-14T22:13:20.000005Z",
                "reportingController": "cluster-autoscaler", "reportingInstance": "cluster-autoscaler-ca-0",
                "action": "ScaleUp", "reason": "TriggeredScaleUp",
                "regarding": {"kind": "Pod", "namespace": "default", "name": "web-0", "apiVersion": "v1"},
                "note": "pod triggered scale-up", "type": "Normal"}),
        ),
        row(
            "scheduling.k8s.io/v1",
            "PriorityClass",
            pb::scheduling::v1::PriorityClass {
                metadata: meta("overprovisioning"),
                value: Some(-10),
                global_default: Some(false),
                preemption_policy: s("Never"),
                description: s("placeholder pods"),
            },
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "overprovisioning"}, "value": -10, "globalDefault": false,
                "preemptionPolicy": "Never", "description": "placeholder pods"}),
        ),
        row(
            "storage.k8s.io/v1",
            "StorageClass",
            pb::storage::v1::StorageClass {
                metadata: meta("standard"),
                provisioner: s("rancher.io/local-path"),
                volume_binding_mode: s("WaitForFirstConsumer"),
                allow_volume_expansion: Some(true),
                ..Default::default()
            },
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "standard"},
                "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer",
                "allowVolumeExpansion": true}),
        ),
        row(
            "storage.k8s.io/v1",
            "CSINode",
            pb::storage::v1::CSINode {
                metadata: meta("pool-a-1"),
                spec: Some(pb::storage::v1::CSINodeSpec {
                    drivers: vec![pb::storage::v1::CSINodeDriver {
                        name: s("ebs.csi.aws.com"),
                        node_id: s("i-0123"),
                        allocatable: Some(pb::storage::v1::VolumeNodeResources { count: Some(25) }),
                        ..Default::default()
                    }],
                }),
            },
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "pool-a-1"},
                "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-0123", "allocatable": {"count": 25}}]}}),
        ),
        row(
            "storage.k8s.io/v1",
            "VolumeAttachment",
            pb::storage::v1::VolumeAttachment {
                metadata: meta("va-1"),
                spec: Some(pb::storage::v1::VolumeAttachmentSpec {
                    attacher: s("ebs.csi.aws.com"),
                    source: Some(pb::storage::v1::VolumeAttachmentSource {
                        persistent_volume_name: s("pv-1"),
                        ..Default::default()
                    }),
                    node_name: s("pool-a-1"),
                }),
                status: None,
            },
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va-1"},
                "spec": {"attacher": "ebs.csi.aws.com", "source": {"persistentVolumeName": "pv-1"}, "nodeName": "pool-a-1"}}),
        ),
        row(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            pb::discovery::v1::EndpointSlice {
                metadata: meta_ns("web-abc", &[("kubernetes.io/service-name", "web")]),
                address_type: s("IPv4"),
                endpoints: vec![pb::discovery::v1::Endpoint {
                    addresses: strings(&["10.0.0.7"]),
                    conditions: Some(pb::discovery::v1::EndpointConditions {
                        ready: Some(true),
                        ..Default::default()
                    }),
                    node_name: s("pool-a-1"),
                    ..Default::default()
                }],
                ports: vec![],
            },
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "web-abc", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.7"], "conditions": {"ready": true}, "nodeName": "pool-a-1"}]}),
        ),
        row(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            pb::networking::v1::NetworkPolicy {
                metadata: meta_ns("deny", &[]),
                spec: Some(pb::networking::v1::NetworkPolicySpec {
                    pod_selector: Some(meta::LabelSelector::default()),
                    policy_types: strings(&["Ingress"]),
                    ..Default::default()
                }),
            },
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": "deny", "namespace": "default"},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}),
        ),
        row(
            "networking.k8s.io/v1",
            "Ingress",
            pb::networking::v1::Ingress {
                metadata: meta_ns("web", &[]),
                spec: Some(pb::networking::v1::IngressSpec {
                    rules: vec![pb::networking::v1::IngressRule {
                        host: s("web.example.com"),
                        ingress_rule_value: Some(pb::networking::v1::IngressRuleValue {
                            http: Some(pb::networking::v1::HttpIngressRuleValue {
                                paths: vec![pb::networking::v1::HttpIngressPath {
                                    path: s("/"),
                                    path_type: s("Prefix"),
                                    backend: Some(pb::networking::v1::IngressBackend {
                                        service: Some(pb::networking::v1::IngressServiceBackend {
                                            name: s("web"),
                                            port: Some(pb::networking::v1::ServiceBackendPort {
                                                number: Some(80),
                                                name: None,
                                            }),
                                        }),
                                        resource: None,
                                    }),
                                }],
                            }),
                        }),
                    }],
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web", "namespace": "default"},
                "spec": {"rules": [{"host": "web.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
        ),
        row(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            pb::rbac::v1::ClusterRole {
                metadata: meta("cluster-autoscaler"),
                rules: vec![pb::rbac::v1::PolicyRule {
                    verbs: strings(&["create"]),
                    api_groups: strings(&[""]),
                    resources: strings(&["pods/eviction"]),
                    ..Default::default()
                }],
                aggregation_rule: None,
            },
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "cluster-autoscaler"},
                "rules": [{"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"]}]}),
        ),
        row(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            pb::rbac::v1::RoleBinding {
                metadata: meta_ns("cluster-autoscaler", &[]),
                subjects: vec![pb::rbac::v1::Subject {
                    kind: s("ServiceAccount"),
                    name: s("cluster-autoscaler"),
                    namespace: s("kube-system"),
                    ..Default::default()
                }],
                role_ref: Some(pb::rbac::v1::RoleRef {
                    api_group: s("rbac.authorization.k8s.io"),
                    kind: s("Role"),
                    name: s("cluster-autoscaler"),
                }),
            },
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "cluster-autoscaler", "namespace": "default"},
                "subjects": [{"kind": "ServiceAccount", "name": "cluster-autoscaler", "namespace": "kube-system"}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cluster-autoscaler"}}),
        ),
        row(
            "certificates.k8s.io/v1",
            "CertificateSigningRequest",
            pb::certificates::v1::CertificateSigningRequest {
                metadata: meta("node-csr"),
                spec: Some(pb::certificates::v1::CertificateSigningRequestSpec {
                    request: Some(b"CSR".to_vec()),
                    signer_name: s("kubernetes.io/kubelet-serving"),
                    usages: strings(&["server auth"]),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                "metadata": {"name": "node-csr"},
                "spec": {"request": "Q1NS", "signerName": "kubernetes.io/kubelet-serving", "usages": ["server auth"]}}),
        ),
        row(
            "node.k8s.io/v1",
            "RuntimeClass",
            pb::node::v1::RuntimeClass {
                metadata: meta("gvisor"),
                handler: s("runsc"),
                ..Default::default()
            },
            json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"},
                "handler": "runsc"}),
        ),
    ]
}

fn extension_rows() -> Vec<Row> {
    use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    use k8s_pb::kube_aggregator::pkg::apis::apiregistration::v1 as reg;
    use pb::admissionregistration::v1 as adm;
    vec![
        row(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            adm::ValidatingWebhookConfiguration {
                metadata: meta("check"),
                webhooks: vec![adm::ValidatingWebhook {
                    name: s("check.example.com"),
                    rules: vec![adm::RuleWithOperations {
                        operations: strings(&["CREATE"]),
                        rule: Some(adm::Rule {
                            api_groups: strings(&[""]),
                            api_versions: strings(&["v1"]),
                            resources: strings(&["pods"]),
                            scope: None,
                        }),
                    }],
                    side_effects: s("None"),
                    admission_review_versions: strings(&["v1"]),
                    ..Default::default()
                }],
            },
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "check"},
                "webhooks": [{"name": "check.example.com",
                    "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                    "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}),
        ),
        row(
            "flowcontrol.apiserver.k8s.io/v1",
            "FlowSchema",
            pb::flowcontrol::v1::FlowSchema {
                metadata: meta("autoscaler"),
                spec: Some(pb::flowcontrol::v1::FlowSchemaSpec {
                    priority_level_configuration: Some(
                        pb::flowcontrol::v1::PriorityLevelConfigurationReference {
                            name: s("workload-high"),
                        },
                    ),
                    matching_precedence: Some(1000),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
                "metadata": {"name": "autoscaler"},
                "spec": {"priorityLevelConfiguration": {"name": "workload-high"}, "matchingPrecedence": 1000}}),
        ),
        row(
            "authentication.k8s.io/v1",
            "TokenReview",
            pb::authentication::v1::TokenReview {
                metadata: None,
                spec: Some(pb::authentication::v1::TokenReviewSpec {
                    token: s("abc"),
                    audiences: strings(&["api"]),
                }),
                status: None,
            },
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": "abc", "audiences": ["api"]}}),
        ),
        row(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            pb::authorization::v1::SelfSubjectAccessReview {
                metadata: None,
                spec: Some(pb::authorization::v1::SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(pb::authorization::v1::ResourceAttributes {
                        verb: s("create"),
                        resource: s("pods"),
                        subresource: s("eviction"),
                        ..Default::default()
                    }),
                    non_resource_attributes: None,
                }),
                status: None,
            },
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"verb": "create", "resource": "pods", "subresource": "eviction"}}}),
        ),
        row(
            "resource.k8s.io/v1",
            "DeviceClass",
            pb::resource::v1::DeviceClass {
                metadata: meta("gpu"),
                spec: Some(pb::resource::v1::DeviceClassSpec {
                    selectors: vec![pb::resource::v1::DeviceSelector {
                        cel: Some(pb::resource::v1::CelDeviceSelector {
                            expression: s("device.driver == \"gpu.example.com\""),
                        }),
                    }],
                    ..Default::default()
                }),
            },
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
        ),
        row(
            "resource.k8s.io/v1beta1",
            "DeviceClass",
            pb::resource::v1beta1::DeviceClass {
                metadata: meta("gpu"),
                spec: Some(pb::resource::v1beta1::DeviceClassSpec {
                    selectors: vec![pb::resource::v1beta1::DeviceSelector {
                        cel: Some(pb::resource::v1beta1::CelDeviceSelector {
                            expression: s("true"),
                        }),
                    }],
                    ..Default::default()
                }),
            },
            json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": "true"}}]}}),
        ),
        row(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            ext::CustomResourceDefinition {
                metadata: meta("widgets.example.com"),
                spec: Some(ext::CustomResourceDefinitionSpec {
                    group: s("example.com"),
                    names: Some(ext::CustomResourceDefinitionNames {
                        plural: s("widgets"),
                        kind: s("Widget"),
                        ..Default::default()
                    }),
                    scope: s("Namespaced"),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced"}}),
        ),
        row(
            "apiregistration.k8s.io/v1",
            "APIService",
            reg::APIService {
                metadata: meta("v1beta1.metrics.k8s.io"),
                spec: Some(reg::APIServiceSpec {
                    group: s("metrics.k8s.io"),
                    version: s("v1beta1"),
                    group_priority_minimum: Some(100),
                    version_priority: Some(100),
                    insecure_skip_tls_verify: Some(true),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": "v1beta1.metrics.k8s.io"},
                "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
                         "versionPriority": 100, "insecureSkipTLSVerify": true}}),
        ),
    ]
}

/// client-go sends `DeleteOptions` with the group and version of the
/// resource being deleted; its message is always meta/v1's.
fn delete_options_rows() -> Vec<Row> {
    [
        "v1",
        "apps/v1",
        "batch/v1",
        "autoscaling/v1",
        "autoscaling/v2",
        "policy/v1",
        "policy/v1beta1",
        "coordination.k8s.io/v1",
        "events.k8s.io/v1",
        "scheduling.k8s.io/v1",
        "storage.k8s.io/v1",
        "discovery.k8s.io/v1",
        "networking.k8s.io/v1",
        "rbac.authorization.k8s.io/v1",
        "certificates.k8s.io/v1",
        "node.k8s.io/v1",
        "admissionregistration.k8s.io/v1",
        "flowcontrol.apiserver.k8s.io/v1",
        "resource.k8s.io/v1",
        "apiextensions.k8s.io/v1",
        "apiregistration.k8s.io/v1",
        "meta.k8s.io/v1",
        // Custom resources have no protobuf form, but their DeleteOptions do.
        "cluster.x-k8s.io/v1beta1",
    ]
    .into_iter()
    .map(|gv| {
        row(
            gv,
            "DeleteOptions",
            delete_options(),
            delete_options_json(gv),
        )
    })
    .collect()
}

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
