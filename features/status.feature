Feature: Status, events, metrics and health
  "Cluster Autoscaler provides metrics and livenessProbe endpoints. ... Whenever Cluster Autoscaler adds
  or removes nodes it will create events describing this action."

  Background:
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 10

  @binary
  Scenario: The status ConfigMap exists, follows CA's schema and is rewritten every loop
    Given the node group "pool" starts with 1 node
    When 30 seconds pass
    Then the status ConfigMap follows CA's status schema
    And the status ConfigMap shows "autoscalerStatus" = "Running"
    And the status ConfigMap shows "clusterWide.health.status" = "Healthy"
    And the status ConfigMap shows "health.minSize" = "0" for node group "pool"
    And the status ConfigMap shows "health.maxSize" = "10" for node group "pool"
    And the status ConfigMap is rewritten every loop

  Scenario: A scale-up shows in the status, on the pods and on the status ConfigMap
    "ScaledUpGroup - CA increased the size of node group, gives both old and new group size. ...
    TriggeredScaleUp - CA decided to scale up cluster to make place for this pod."
    Given a deployment "web" of 5 pods requesting 1 CPU
    Then all 5 pods of "web" are running within 5 minutes
    And the status ConfigMap gets a "ScaledUpGroup" event saying "Scale-up: setting group pool size to 2 instead of 0 (max: 10)"
    And the pods of "web" get a "TriggeredScaleUp" event saying "pod triggered scale-up: [{pool 0->2 (max: 10)}]"
    And the status ConfigMap shows "health.cloudProviderTarget" = "2" for node group "pool" within 1 minute
    And the status ConfigMap shows "health.nodeCounts.registered.ready" = "2" for node group "pool" within 1 minute

  Scenario: A scale-down shows as events on the node and the status ConfigMap
    "ScaleDown - CA is scaling down the node. ... ScaleDownEmpty - CA removed a node with no pods running on it"
    Given the node group "pool" starts with 1 node
    Then the node group "pool" reaches 0 nodes within 15 minutes
    And a node of "pool" gets a "ScaleDown" event saying "marked the node as toBeDeleted/unschedulable"
    And the status ConfigMap gets a "ScaleDownEmpty" event

  Scenario: A pod that no group fits gets NotTriggerScaleUp and the scale-up status says NoActivity
    "NotTriggerScaleUp - CA couldn't find node group that can be scaled up to make this pod schedulable."
    Given a deployment "huge" of 1 pod requesting 16 CPU
    When 2 minutes pass
    Then the pods of "huge" get a "NotTriggerScaleUp" event saying "pod didn't trigger scale-up: 1 Insufficient cpu"
    And the status ConfigMap shows "clusterWide.scaleUp.status" = "NoActivity"

  @binary
  Scenario: Metrics are served in CA's names
    "Cluster Autoscaler provides metrics"
    Given a deployment "web" of 5 pods requesting 1 CPU
    Then all 5 pods of "web" are running within 10 minutes
    And the autoscaler's metrics show "cluster_autoscaler_cluster_safe_to_autoscale 1"
    And the autoscaler's metrics show "cluster_autoscaler_nodes_count{state="ready"} 2"
    And the autoscaler's metrics show "cluster_autoscaler_scaled_up_nodes_total"
    And the autoscaler's metrics show "cluster_autoscaler_last_activity{activity="main"}"

  @binary
  Scenario: The health check answers OK while the loop runs
    "livenessProbe endpoints"
    When 1 minute passes
    Then the autoscaler's health check answers 200

  Scenario: With --debugging-snapshot-enabled /snapshotz answers with what the next loop saw
    "debugging-snapshot-enabled: Whether the debugging snapshot of cluster autoscaler feature is enabled." The
    request waits for the next loop; its JSON lists the loop's nodes with their pods and each group's template.
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "--debugging-snapshot-enabled"
    When a debugging snapshot is requested
    Then the debugging snapshot answers 200 within 1 minute, listing 2 nodes and a template for "pool"

  Scenario: Without --debugging-snapshot-enabled there is no /snapshotz
    When a debugging snapshot is requested
    Then the debugging snapshot answers 404 within 1 minute

  @ca>=1.36
  Scenario Outline: --max-startup-time bounds the wait for the first successful loop in the health check
    "max-startup-time: Maximum time until first recorded successful autoscaler run before automatic restart." Every
    loop fails here (with --enable-csi-node-aware-scheduling a node without a CSINode fails the loop's snapshot): the
    health check fails once the startup time is over, not at --max-failing-time.
    Given the node group "pool" starts with 1 node
    And the autoscaler runs with "--enable-csi-node-aware-scheduling --max-inactivity=2m --max-failing-time=2m --max-startup-time=<startup>"
    When 5 minutes pass
    Then the autoscaler's health check answers <code>

    Examples:
      | startup | code |
      | 4m      | 500  |
      | 10m     | 200  |
