Feature: Node group sizes
  "CA ... respects ... minimum and maximum size of node groups."

  Scenario: Empty nodes go, but never below the group's min size
    Given a node group "floor" of nodes with 4 CPU and 16Gi memory, min 1 and max 5
    And the node group "floor" starts with 3 nodes
    When 30 minutes pass
    Then the node group "floor" has 1 node

  Scenario: --enforce-node-group-min-size is off by default: a group at min stays there
    Given a node group "idle" of nodes with 4 CPU and 16Gi memory, min 2 and max 5
    Then the node group "idle" keeps 2 nodes for 20 minutes
