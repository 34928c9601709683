Feature: Node group sizes
  "Cluster Autoscaler will not scale the cluster beyond these limits, but some other external factors
  could make this happen."

  # CA 1.29's kwok provider does not lower the target size when it deletes nodes, so CA
  # removes every empty node, min size or not (fixed in 1.30).
  @ca>=1.30
  Scenario: Empty nodes go, but never below the group's min size
    Given a node group "floor" of nodes with 4 CPU and 16Gi memory, min 1 and max 5
    And the node group "floor" starts with 3 nodes
    When 30 minutes pass
    Then the node group "floor" has 1 node

  Scenario: A group at its min size stays there without pods
    Given a node group "idle" of nodes with 4 CPU and 16Gi memory, min 2 and max 5
    Then the node group "idle" keeps 2 nodes for 20 minutes

  Scenario: Scale-up stops at the max size and says so
    Given a node group "capped" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And a deployment "web" of 20 pods requesting 1 CPU
    When 5 minutes pass
    Then the node group "capped" has 3 nodes
    And the pods of "web" get a "NotTriggerScaleUp" event saying "pod didn't trigger scale-up: 1 max node group size reached"

  # An EC2 instance's kubelet registers its deleted Node again: the group does not drop below its min.
  @not-aws
  Scenario: Below the minimum, the group is scaled up only for pending pods
    "If your cluster is below the minimum number of nodes configured for CA, it will be scaled up only in
    presence of unschedulable pods."
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 2 and max 5
    When 1 node of "pool" is deleted
    Then the node group "pool" keeps 1 node for 10 minutes
    When a deployment "web" of 5 pods requesting 1 CPU is created
    # Before 1.36 the deleted node counts as upcoming until --max-node-provision-time (15 minutes).
    Then all 5 pods of "web" are running within 20 minutes
    And the node group "pool" has 2 nodes

  # Since 1.36 a group's upcoming nodes count only while a scale-up request waits for them
  # (clusterstate.go, GetUpcomingNodes): the node the target still promises is not coming, so it
  # does not stand in for the pending pods' capacity.
  @ca>=1.36
  @not-aws
  Scenario: A node deleted behind the autoscaler's back does not hide pending pods
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 2 and max 5
    When 1 node of "pool" is deleted
    Then the node group "pool" keeps 1 node for 2 minutes
    When a deployment "web" of 5 pods requesting 1 CPU is created
    Then all 5 pods of "web" are running within 3 minutes

  @binary
  # A Machine outlives its deleted Node (as in Cluster API), so the group keeps its instance and
  # the min size holds: the scenario needs a provider whose instances are its Nodes.
  @kwok-only
  Scenario: --enforce-node-group-min-size brings a group back to its minimum
    "Starting with CA 1.26.0, a new flag --enforce-node-group-min-size was introduced to enforce the node
    group minimum size. For node groups with fewer nodes than the configuration, CA will scale them up to
    the minimum number of nodes."
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 2 and max 5
    And the autoscaler runs with "--enforce-node-group-min-size=true --max-node-provision-time=5m"
    # The group's target still counts the deleted node until the autoscaler fixes the size
    # (after --max-node-provision-time); then the minimum is enforced.
    When 1 node of "pool" is deleted
    Then the node group "pool" reaches 2 nodes within 10 minutes

  Scenario: Above the maximum, only unneeded nodes are removed
    "if your cluster is above the maximum number of nodes configured for CA, it will be scaled down only if
    it has unneeded nodes."
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 5
    And the node group "pool" starts with 2 nodes
    And a deployment "web" of 2 pods requesting 2100m CPU
    Then the node group "pool" keeps 2 nodes for 15 minutes
