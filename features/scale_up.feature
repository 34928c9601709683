Feature: Scale-up
  "Cluster Autoscaler increases the size of the cluster when there are pods that failed to
  schedule on any of the current nodes due to insufficient resources."

  Background:
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 10

  Scenario: Pending pods get exactly the nodes they need
    # 3.9 CPU are left on a new node (kube-proxy takes 100m): 4 pods of 900m per node.
    Given a deployment "web" of 10 pods requesting 900m CPU
    Then all 10 pods of "web" are running within 5 minutes
    And the node group "pool" has 3 nodes

  Scenario: A pod too large for every node group does not trigger a scale-up
    "What if a pod cannot be scheduled on a new node? ... CA will not add a node"
    Given a deployment "huge" of 1 pod requesting 8 CPU
    When 5 minutes pass
    Then the node group "pool" has 0 nodes
    And the pods of "huge" get a "NotTriggerScaleUp" event saying "pod didn't trigger scale-up: 1 Insufficient cpu"

  Scenario: A node group never grows above its max size
    Given a node group "small" of nodes with 4 CPU and 16Gi memory, min 0 and max 2
    And a deployment "pinned" of 12 pods requesting 900m CPU on node group "small"
    When 5 minutes pass
    Then the node group "small" has 2 nodes
    And the pods of "pinned" get a "NotTriggerScaleUp" event saying "pod didn't trigger scale-up: 1 max node group size reached, 1 node(s) didn't match Pod's node affinity/selector"

  Scenario: A nodeSelector picks the matching node group only
    "How does scale-up work? ... CA ... checks which node groups ... could fit the pod"
    Given a node group "other" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And a deployment "pinned" of 2 pods requesting 1 CPU on node group "other"
    Then all 2 pods of "pinned" are running within 5 minutes
    And the node group "other" has 1 node
    And the node group "pool" has 0 nodes
