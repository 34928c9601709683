Feature: CapacityQuotas
  "CapacityQuota limits the total resources of the nodes that match its selector." (upstream's
  CapacityQuota API, autoscaling.x-k8s.io, cluster-scoped: v1alpha1 in CA 1.36; v1beta1 stored
  and v1alpha1 still served from 1.37.) The quota controller checks each quota (the condition
  "Valid" in 1.36, "cluster-autoscaler.kubernetes.io/valid" from 1.37) and reports what the
  matching nodes use; scale-up adds no node that would take a valid quota past its limits, and
  says which quota stopped it.

  # Nodes have 4 CPU and 16Gi; an "app" pod asks for 3 CPU, so a node holds one.
  Background:
    Given the CapacityBuffer and CapacityQuota CRDs are installed
    And the autoscaler runs with "--capacity-quotas-enabled"
    And a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And the nodes of "pool" are labeled "tier=batch"

  @binary @ca>=1.36
  Scenario: A quota on nodes caps scale-up, and the pods left out say which quota
    Given the node group "pool" starts with 1 node
    And the following objects:
      """
      apiVersion: autoscaling.x-k8s.io/v1alpha1
      kind: CapacityQuota
      metadata:
        name: batch-nodes
      spec:
        selector:
          matchLabels:
            tier: batch
        limits:
          resources:
            nodes: 3
      """
    When a deployment "app" of 6 pods requesting 3 CPU is created
    Then the node group "pool" reaches 3 nodes within 5 minutes
    And the node group "pool" keeps 3 nodes for 3 minutes
    And the pods of "app" get a "NotTriggerScaleUp" event containing "exceeded quota: \"CapacityQuota/batch-nodes\", resources: nodes"
    And within 2 minutes the CapacityQuota "batch-nodes" reports "nodes=3" used

  @ca>=1.36 @ca<1.37
  Scenario: A valid quota says so in the condition Valid
    Given the node group "pool" starts with 1 node
    And the following objects:
      """
      apiVersion: autoscaling.x-k8s.io/v1alpha1
      kind: CapacityQuota
      metadata:
        name: batch-nodes
      spec:
        limits:
          resources:
            nodes: 3
      """
    Then within 3 minutes the CapacityQuota "batch-nodes" has the condition "Valid=True" with reason "ValidationSucceeded" and message "CapacityQuota is valid"
    And within 1 minute the CapacityQuota "batch-nodes" has the condition "Reconciled=True" with reason "ReconciliationSucceeded" and message "CapacityQuota successfully reconciled"

  @binary @ca>=1.37
  Scenario: A v1beta1 quota is valid under 1.37's condition, and a changed limit is read again
    CA 1.37 stores CapacityQuotas as v1beta1, names its condition
    "cluster-autoscaler.kubernetes.io/valid" and records the generation of the spec it read
    ("ObservedGeneration is the last generation observed by the controller.").
    Given the node group "pool" starts with 1 node
    And the following objects:
      """
      apiVersion: autoscaling.x-k8s.io/v1beta1
      kind: CapacityQuota
      metadata:
        name: batch-nodes
      spec:
        selector:
          matchLabels:
            tier: batch
        limits:
          resources:
            nodes: 2
      """
    Then within 3 minutes the CapacityQuota "batch-nodes" has the condition "cluster-autoscaler.kubernetes.io/valid=True" with reason "ValidationSucceeded" and message "CapacityQuota is valid"
    And within 1 minute the CapacityQuota "batch-nodes" has the condition "Reconciled=True" with reason "ReconciliationSucceeded" and message "CapacityQuota successfully reconciled"
    And within 1 minute the CapacityQuota "batch-nodes" has observed generation 1
    When a deployment "app" of 4 pods requesting 3 CPU is created
    Then the node group "pool" reaches 2 nodes within 5 minutes
    And the node group "pool" keeps 2 nodes for 2 minutes
    When the CapacityQuota "batch-nodes" is changed to limit "nodes=3"
    Then within 3 minutes the CapacityQuota "batch-nodes" has observed generation 2
    And the node group "pool" reaches 3 nodes within 5 minutes
    And within 2 minutes the CapacityQuota "batch-nodes" reports "nodes=3" used

  @ca>=1.36
  Scenario: A quota on CPU caps scale-up in cores
    Given the node group "pool" starts with 1 node
    And the following objects:
      """
      apiVersion: autoscaling.x-k8s.io/v1alpha1
      kind: CapacityQuota
      metadata:
        name: batch-cpu
      spec:
        limits:
          resources:
            cpu: 12
      """
    When a deployment "app" of 6 pods requesting 3 CPU is created
    Then the node group "pool" reaches 3 nodes within 5 minutes
    And the node group "pool" keeps 3 nodes for 3 minutes
    And the pods of "app" get a "NotTriggerScaleUp" event containing "exceeded quota: \"CapacityQuota/batch-cpu\", resources: cpu"
    And within 2 minutes the CapacityQuota "batch-cpu" reports "cpu=12" used

  @ca>=1.36
  Scenario: Of two overlapping quotas the tighter one holds
    Given the node group "pool" starts with 1 node
    And the following objects:
      """
      apiVersion: autoscaling.x-k8s.io/v1alpha1
      kind: CapacityQuota
      metadata:
        name: cluster-nodes
      spec:
        limits:
          resources:
            nodes: 5
      ---
      apiVersion: autoscaling.x-k8s.io/v1alpha1
      kind: CapacityQuota
      metadata:
        name: batch-memory
      spec:
        selector:
          matchLabels:
            tier: batch
        limits:
          resources:
            memory: 32Gi
      """
    When a deployment "app" of 6 pods requesting 3 CPU is created
    Then the node group "pool" reaches 2 nodes within 5 minutes
    And the node group "pool" keeps 2 nodes for 3 minutes
    And the pods of "app" get a "NotTriggerScaleUp" event containing "exceeded quota: \"CapacityQuota/batch-memory\", resources: memory"
    And within 2 minutes the CapacityQuota "batch-memory" reports "memory=32Gi" used

  @ca>=1.36 @ca<1.37
  Scenario: A quota with a bad selector is not valid, limits nothing, and the loop goes on
    Given the node group "pool" starts with 1 node
    And the following objects:
      """
      apiVersion: autoscaling.x-k8s.io/v1alpha1
      kind: CapacityQuota
      metadata:
        name: broken
      spec:
        selector:
          matchExpressions:
          - key: tier
            operator: Bad
            values: [batch]
        limits:
          resources:
            nodes: 1
      """
    Then within 3 minutes the CapacityQuota "broken" has the condition "Valid=False" with reason "ValidationFailed"
    And within 1 minute the CapacityQuota "broken" has the condition "Reconciled=False" with reason "ReconciliationFailed" and message "Validation failed"
    When a deployment "app" of 3 pods requesting 3 CPU is created
    Then the node group "pool" reaches 3 nodes within 5 minutes

  @ca>=1.37
  Scenario: A v1beta1 quota with a bad selector is not valid under 1.37's condition, and limits nothing
    Given the node group "pool" starts with 1 node
    And the following objects:
      """
      apiVersion: autoscaling.x-k8s.io/v1beta1
      kind: CapacityQuota
      metadata:
        name: broken
      spec:
        selector:
          matchExpressions:
          - key: tier
            operator: Bad
            values: [batch]
        limits:
          resources:
            nodes: 1
      """
    Then within 3 minutes the CapacityQuota "broken" has the condition "cluster-autoscaler.kubernetes.io/valid=False" with reason "ValidationFailed"
    And within 1 minute the CapacityQuota "broken" has the condition "Reconciled=False" with reason "ReconciliationFailed" and message "Validation failed"
    And within 1 minute the CapacityQuota "broken" has observed generation 1
    When a deployment "app" of 3 pods requesting 3 CPU is created
    Then the node group "pool" reaches 3 nodes within 5 minutes

  @ca>=1.36
  Scenario: A quota in milli-units is refused
    "All resource quantities must be non-negative integers." (the CRD's rule; "1000m" is not
    supported.)
    When creating the following object is refused with "All resource quantities must be non-negative integers."
      """
      apiVersion: autoscaling.x-k8s.io/v1alpha1
      kind: CapacityQuota
      metadata:
        name: milli
      spec:
        limits:
          resources:
            cpu: 1500m
      """
