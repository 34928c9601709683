//! Rows of the cluster-level, extension groups and DeleteOptions.

use k8s_pb::api as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::json;

use super::support::{
    Row, delete_options, delete_options_json, meta, meta_ns, micro_time, object_reference, row, s,
    strings,
};

pub fn cluster_rows() -> Vec<Row> {
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

pub fn extension_rows() -> Vec<Row> {
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
pub fn delete_options_rows() -> Vec<Row> {
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
