Feature: Pods that block scale-down
  "What types of pods can prevent CA from removing a node? ... Pods that have the following
  annotation set: cluster-autoscaler.kubernetes.io/safe-to-evict: "false""

  Scenario: A pod annotated safe-to-evict "false" keeps its node
    Given a node group "a" of nodes with 4 CPU and 16Gi memory, min 0 and max 5
    And the node group "a" starts with 1 node
    And a node group "b" of nodes with 4 CPU and 16Gi memory, min 0 and max 5
    And the node group "b" starts with 1 node
    And a deployment "pinned" of 1 pod requesting 100m CPU annotated "cluster-autoscaler.kubernetes.io/safe-to-evict=false"
    When 20 minutes pass
    Then the autoscaler keeps the node of "a" because of "NotSafeToEvictAnnotation"
