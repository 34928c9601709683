Feature: A team's own scenario (the example of docs/suite/writing-scenarios.md)
  # CA 1.29's kwok provider does not lower the target size when it deletes nodes; CA then
  # treats the missing nodes as unregistered and the provider exits on them (fixed in 1.30).
  @ca>=1.30
  Scenario: A burst of 20 one-CPU jobs fits in 7 nodes and the pool shrinks afterwards
    Given a node group "batch" of nodes with 4 CPU and 16Gi memory, min 0 and max 8
    And a deployment "burst" of 20 pods requesting 1 CPU
    Then all 20 pods of "burst" are running within 5 minutes
    And the node group "batch" has 7 nodes
    When the deployment "burst" is scaled to 0 pods
    Then the node group "batch" reaches 0 nodes within 15 minutes
