Feature: PodDisruptionBudgets in scale-down
  "Before starting to terminate a node, CA makes sure that PodDisruptionBudgets for pods scheduled
  there allow for removing at least one replica. Then it deletes all pods from a node through the pod
  eviction API, retrying, if needed, for up to 2 min."

  # The pods start on node "a"; a filler pod then brings up node "b", where they can move.
  Background:
    Given a node group "a" of nodes with 4 CPU and 16Gi memory, min 0 and max 5
    And the node group "a" starts with 1 node
    And a node group "b" of nodes with 4 CPU and 16Gi memory, min 0 and max 5

  @binary
  Scenario: A PDB that allows one disruption at a time: the pods are evicted one by one
    Given a deployment "web" of 3 pods requesting 100m CPU
    And a pod disruption budget for "web" with maxUnavailable 1
    Then all 3 pods of "web" are running within 1 minute
    When a deployment "filler" of 1 pod requesting 100m CPU on node group "b" is created
    Then the node group "b" reaches 1 node within 4 minutes
    And the node group "a" reaches 0 nodes within 25 minutes
    And all 3 pods of "web" are running within 2 minutes

  Scenario: A PDB that allows no disruption keeps the node
    "If one of the evictions fails, the node is saved and it is not terminated"
    Given a deployment "web" of 1 pod requesting 100m CPU
    And a pod disruption budget for "web" with minAvailable 1
    Then all 1 pods of "web" are running within 1 minute
    When a deployment "filler" of 1 pod requesting 100m CPU on node group "b" is created
    Then the node group "b" reaches 1 node within 4 minutes
    And the autoscaler keeps the node of "a" because of "NotEnoughPdb"
    And the node group "a" keeps 1 node for 20 minutes

  Scenario: kube-system pods with a PDB are moved
    "Users can manually add PDBs for the kube-system pods that can be safely rescheduled elsewhere"
    Given a deployment "dns" of 1 pod requesting 100m CPU in namespace "kube-system"
    And a pod disruption budget for "dns" with maxUnavailable 1 in namespace "kube-system"
    Then all 1 pods of "dns" are running within 1 minute
    When a deployment "filler" of 1 pod requesting 100m CPU on node group "b" is created
    Then the node group "b" reaches 1 node within 4 minutes
    And the node group "a" reaches 0 nodes within 25 minutes
    And all 1 pods of "dns" are running within 2 minutes
