Feature: Unready nodes, failed scale-ups and backoff
  "From 0.5 CA (K8S 1.6) continues to work even if some nodes are unavailable. ... it's 45% or 3 nodes.
  This is configurable by --max-total-unready-percentage and --ok-total-unready-count flags. Once there
  are more unready nodes in the cluster, CA stops all operations until the situation improves."

  Background:
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And the node group "pool" starts with 1 node

  # Before 1.35 a node that never became ready counted as starting for a fixed 15 real minutes
  # (no --max-node-startup-time), which the time scale of binary mode cannot shorten.
  @ca>=1.35
  Rule: Unready nodes beyond the tolerated count or share halt scale-up

  # "broken" nodes never become ready. Nodes unready since they were created count as starting
  # (notStarted) for --max-node-startup-time (15 minutes), then as unready. While they are
  # starting they are also upcoming nodes: pending pods are expected to fit on them.
  Background:
    Given a node group "broken" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And the node group "broken" starts with 2 nodes
    And new nodes of "broken" never become ready

  Scenario: Too many unready nodes halt scale-up and mark the cluster Unhealthy
    Given the autoscaler runs with "--ok-total-unready-count=0 --scale-down-enabled=false"
    When 16 minutes pass
    Then the status ConfigMap shows "clusterWide.health.nodeCounts.registered.unready.total" = "2" within 1 minute
    And the status ConfigMap shows "clusterWide.health.status" = "Unhealthy"
    When a deployment "web" of 8 pods requesting 1 CPU on node group "pool" is created
    Then the node group "pool" keeps 1 node for 5 minutes

  Scenario: Unready nodes within --ok-total-unready-count are tolerated
    Given the autoscaler runs with "--scale-down-enabled=false"
    When 16 minutes pass
    Then the status ConfigMap shows "clusterWide.health.nodeCounts.registered.unready.total" = "2" within 1 minute
    And the status ConfigMap shows "clusterWide.health.status" = "Healthy"
    # 900m, not 1 CPU: a binary counts CA's 1-minute template stabilization in real seconds, so after
    # 16 scenario minutes its template is still the provider's, with a kube-proxy pod (100m) that
    # leaves room for three 1-CPU pods only (then 1->3, not 1->2). Four 900m pods fit either template.
    When a deployment "web" of 8 pods requesting 900m CPU on node group "pool" is created
    Then the node group "pool" reaches 2 nodes within 5 minutes

  Scenario: --max-total-unready-percentage raises the tolerated share
    Given the autoscaler runs with "--ok-total-unready-count=0 --max-total-unready-percentage=80 --scale-down-enabled=false"
    When 16 minutes pass
    Then the status ConfigMap shows "clusterWide.health.nodeCounts.registered.unready.total" = "2" within 1 minute
    And the status ConfigMap shows "clusterWide.health.status" = "Healthy"

  Rule: A failed scale-up backs its node group off and other groups take over

  @binary
  @extension
  # Faults are injected through the kwok provider's templates.
  @kwok-only
  Scenario: Nodes that never register are given up after --max-node-provision-time
    "max-node-provision-time: Maximum time CA waits for node to be provisioned"
    Given a node group "flaky" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And new nodes of "flaky" never register
    And the autoscaler runs with "--expander=priority --max-node-provision-time=5m"
    And the priority expander gives priority 100 to "^flaky$"
    And the priority expander gives priority 10 to "^pool$"
    When a deployment "web" of 4 pods requesting 3 CPU is created
    Then the status ConfigMap shows "scaleUp.backoffInfo.errorCode" = "timeout" for node group "flaky" within 8 minutes
    And all 4 pods of "web" are running within 15 minutes
    And the node group "flaky" has 0 nodes

  # Before 1.35 the never-ready nodes count as starting, so as upcoming, for a fixed 15 real
  # minutes after the scale-up times out: the pending pods are expected to fit on them.
  @ca>=1.35
  Scenario: New nodes that never become ready time out the scale-up
    "max-node-provision-time: Maximum time CA waits for node to be provisioned"
    Given a node group "flaky" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And new nodes of "flaky" never become ready
    And the autoscaler runs with "--expander=priority --max-node-provision-time=5m"
    And the priority expander gives priority 100 to "^flaky$"
    And the priority expander gives priority 10 to "^pool$"
    When a deployment "web" of 4 pods requesting 3 CPU is created
    Then the status ConfigMap shows "scaleUp.backoffInfo.errorCode" = "timeout" for node group "flaky" within 10 minutes
    And all 4 pods of "web" are running within 15 minutes

  # Since 1.36 the nodes of a backed-off group, or of one whose scale-up request is gone, are not
  # upcoming (clusterstate.go, GetUpcomingNodes), and a timed-out scale-up's target is lowered
  # again; here the group's nodes registered, so the provider refuses and says so. Before, the
  # never-ready nodes stood in for the pods' capacity until they counted as unready (15 minutes).
  @ca>=1.36
  Scenario: The nodes of a timed-out scale-up do not hide pending pods from other groups
    Given a node group "flaky" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And new nodes of "flaky" never become ready
    And the autoscaler runs with "--expander=priority --max-node-provision-time=5m"
    And the priority expander gives priority 100 to "^flaky$"
    And the priority expander gives priority 10 to "^pool$"
    When a deployment "web" of 4 pods requesting 3 CPU is created
    Then the status ConfigMap shows "scaleUp.backoffInfo.errorCode" = "timeout" for node group "flaky" within 10 minutes
    And the status ConfigMap gets a "FailedToRevertScaleUp" event containing "Failed to decrease target size for group flaky after scale-up timeout"
    And all 4 pods of "web" are running within 2 minutes
    When a deployment "more" of 2 pods requesting 3 CPU is created
    Then all 2 pods of "more" are running within 2 minutes

  @binary
  @extension
  # Faults are injected through the kwok provider's templates.
  @kwok-only
  Scenario: A quota error backs the group off; other groups take over
    "From version 0.6.2, Cluster Autoscaler backs off from scaling up a node group after failure."
    Given a node group "quota" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And scale-ups of "quota" fail with a quota error
    And the autoscaler runs with "--expander=priority"
    And the priority expander gives priority 100 to "^quota$"
    And the priority expander gives priority 10 to "^pool$"
    When a deployment "web" of 4 pods requesting 3 CPU is created
    Then all 4 pods of "web" are running within 15 minutes
    And the node group "quota" has 0 nodes
    And the status ConfigMap shows "scaleUp.backoffInfo.errorCode" = "QUOTA_EXCEEDED" for node group "quota" within 2 minutes
    And the status ConfigMap gets a "ScaleUpFailed" event containing "due to OutOfResource.QUOTA_EXCEEDED"

  @extension
  # Faults are injected through the kwok provider's templates.
  @kwok-only
  Scenario: After the backoff the group is tried again and recovers
    "Cluster Autoscaler will periodically try to increase the cluster and, once failed, move back to the
    previous size until the quota arrives"
    The first backoff lasts --initial-node-group-backoff-duration (5 minutes): the quota that arrives
    meanwhile is used only after it.
    Given a node group "quota" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And scale-ups of "quota" fail with a quota error
    And a deployment "web" of 2 pods requesting 1 CPU on node group "quota"
    Then the status ConfigMap shows "scaleUp.backoffInfo.errorCode" = "QUOTA_EXCEEDED" for node group "quota" within 4 minutes
    When the faults of "quota" are cleared
    Then the node group "quota" keeps 0 nodes for 3 minutes
    And all 2 pods of "web" are running within 15 minutes
    And the node group "quota" has 1 node
