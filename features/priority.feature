Feature: Priority cutoff
  "Pods with priority lower than this cutoff (-10 by default) are expendable. They can be
  killed without any consideration during scale down and they don't cause scale-up."

  Background:
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And a priority class "expendable" with value -100
    And a priority class "cutoff" with value -10

  Scenario: Expendable pending pods do not trigger a scale-up
    Given a deployment "low" of 3 pods requesting 1 CPU with priority class "expendable"
    Then the node group "pool" keeps 0 nodes for 10 minutes

  Scenario: Priority -10 itself is not expendable
    Given a deployment "edge" of 3 pods requesting 1 CPU with priority class "cutoff"
    Then all 3 pods of "edge" are running within 5 minutes
    And the node group "pool" has 1 node

  Scenario: --expendable-pods-priority-cutoff moves the line
    Given the autoscaler runs with "--expendable-pods-priority-cutoff=-200"
    And a deployment "low" of 3 pods requesting 1 CPU with priority class "expendable"
    Then all 3 pods of "low" are running within 5 minutes
