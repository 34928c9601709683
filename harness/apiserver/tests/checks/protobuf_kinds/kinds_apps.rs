//! Rows of the workload and policy groups.

use k8s_pb::api as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::json;

use super::support::{
    Row, delete_options, int_or_string_int, int_or_string_str, meta_ns, pod_template,
    pod_template_json, row, s, selector,
};

pub fn workload_rows() -> Vec<Row> {
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

pub fn policy_rows() -> Vec<Row> {
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
