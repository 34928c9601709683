//! kwok's default "fast" stage set (docs/reference/kwok-rules.md §2.7): node-initialize,
//! node-heartbeat-with-lease, pod-ready, pod-complete and pod-delete, with
//! upstream's selectors, weights and delays. Their status templates are the
//! built-in functions of [`crate::template`].

/// The fast stage set, as kwok Stage YAML.
pub const FAST_STAGES: &str = r#"
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  weight: 0
  next:
    statusTemplate: '{{ KwokNodeStatus }}'
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat-with-lease
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: .status.phase
      operator: In
      values: [Running]
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: In
      values: ["True"]
  weight: 0
  delay:
    durationMilliseconds: 600000
    jitterDurationMilliseconds: 610000
  next:
    statusTemplate: '{{ KwokNodeStatus }}'
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Pending]
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  weight: 0
  next:
    statusTemplate: '{{ KwokPodReady }}'
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Running]
    - key: .metadata.ownerReferences.[].kind
      operator: In
      values: [Job]
  weight: 0
  next:
    statusTemplate: '{{ KwokPodComplete }}'
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: Exists
  weight: 0
  next:
    delete: true
"#;

/// The `stages.kwok.x-k8s.io` CustomResourceDefinition (cluster-scoped,
/// `v1alpha1`, status subresource), as upstream's `kwok.yaml` installs it;
/// the schema keeps every field (the controller validates stages itself).
pub const STAGE_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: stages.kwok.x-k8s.io
spec:
  group: kwok.x-k8s.io
  names:
    kind: Stage
    listKind: StageList
    plural: stages
    singular: stage
  scope: Cluster
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;
