Feature: Pod priority and expendable pods
  "Pods with priority lower than this cutoff: don't trigger scale-ups - no new node is added in order
  to run them, don't prevent scale-downs - nodes running such pods can be terminated."

  Background:
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And a priority class "expendable" with value -100
    And a priority class "cutoff" with value -10
    And a priority class "important" with value 1000

  @binary
  Scenario: Expendable pending pods do not trigger a scale-up
    Given a deployment "low" of 3 pods requesting 1 CPU with priority class "expendable"
    Then the node group "pool" keeps 0 nodes for 10 minutes

  Scenario: Priority -10 itself is not expendable
    "Nothing changes for pods with priority greater or equal to cutoff, and pods without priority."
    Given a deployment "edge" of 3 pods requesting 1 CPU with priority class "cutoff"
    Then all 3 pods of "edge" are running within 5 minutes
    And the node group "pool" has 1 node

  Scenario: --expendable-pods-priority-cutoff moves the line
    "It can be changed using --expendable-pods-priority-cutoff flag, but we discourage it."
    Given the autoscaler runs with "--expendable-pods-priority-cutoff=-200"
    And a deployment "low" of 3 pods requesting 1 CPU with priority class "expendable"
    Then all 3 pods of "low" are running within 5 minutes

  Scenario: Expendable pods do not keep their node
    "don't prevent scale-downs - nodes running such pods can be terminated."
    Given the node group "pool" starts with 1 node
    And a deployment "low" of 1 pod requesting 2 CPU with priority class "expendable"
    Then all 1 pods of "low" are running within 1 minute
    And the node group "pool" reaches 0 nodes within 15 minutes

  Scenario: Non-expendable pods keep their node
    Given the node group "pool" starts with 1 node
    And a deployment "high" of 1 pod requesting 2 CPU with priority class "important"
    Then the node group "pool" keeps 1 node for 15 minutes

  Scenario: A pod waiting for the preemption of a lower-priority pod does not trigger a scale-up
    "Cluster Autoscaler also doesn't trigger scale-up if an unschedulable pod is already waiting for a lower
    priority pod preemption."
    The victim takes 2 minutes to terminate; meanwhile the preemptor is pending, nominated to its node.
    Given the node group "pool" starts with 1 node
    And a bare pod "low" requesting 3 CPU taking 2 minutes to terminate
    Then all 1 pods of "low" are running within 1 minute
    When a deployment "high" of 1 pod requesting 3 CPU with priority class "important" is created
    Then 1 pods of "high" stay pending for 1 minute
    And the node group "pool" keeps 1 node for 2 minutes
    And all 1 pods of "high" are running within 1 minute
    And the node group "pool" has 1 node

  @binary
  Scenario: Overprovisioning: pause pods make room for real pods, then trigger a scale-up themselves
    "If there is not enough resources then pause pods are preempted and new pods take their place. Next
    pause pods become unschedulable and force CA to scale up the cluster."
    Given a priority class "overprovisioning" with value -10
    And the node group "pool" starts with 1 node
    And a deployment "pause" of 1 pod requesting 3 CPU with priority class "overprovisioning"
    Then all 1 pods of "pause" are running within 1 minute
    When a deployment "real" of 1 pod requesting 3 CPU is created
    Then all 1 pods of "real" are running within 6 minutes
    And all 1 pods of "pause" are running within 5 minutes
    And the node group "pool" has 2 nodes
