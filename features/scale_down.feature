Feature: Scale-down
  "Cluster Autoscaler decreases the size of the cluster when some nodes are consistently
  unneeded for a significant amount of time."

  Background:
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And the node group "pool" starts with 2 nodes
    And a deployment "web" of 1 pod requesting 500m CPU

  Scenario: A node unneeded for 9 minutes and 59 seconds stays; after 10 minutes it goes
    "What are the parameters to CA? scale-down-unneeded-time: How long a node should be
    unneeded before it is eligible for scale down. Default: 10 minutes"
    When the autoscaler finds a node of "pool" unneeded
    And 9 minutes and 59 seconds pass
    Then the node group "pool" has 2 nodes
    When 30 seconds pass
    Then the node group "pool" has 1 node
    And all 1 pods of "web" are running within 1 minute

  Scenario: --scale-down-unneeded-time changes the wait
    Given the autoscaler runs with "--scale-down-unneeded-time=3m"
    When the autoscaler finds a node of "pool" unneeded
    And 2 minutes and 50 seconds pass
    Then the node group "pool" has 2 nodes
    When 40 seconds pass
    Then the node group "pool" has 1 node

  Scenario: --scale-down-enabled=false keeps every node
    Given the autoscaler runs with "--scale-down-enabled=false"
    Then the node group "pool" keeps 2 nodes for 20 minutes
