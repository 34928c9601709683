Feature: Bad input
  A malformed object (an annotation, a ConfigMap, a kwok Stage) never stops the loop and never
  causes a scale action on anything else: the autoscaler says what is wrong and goes on. Each
  scenario also watches the safety invariants over the whole run (see faults.feature).

  Background:
    Given the safety invariants are observed throughout

  Scenario: A malformed priority expander ConfigMap: the loop goes on and the scale-up uses all options
    "If the config map is invalid ... the priority expander ... falls back to the options it was given"
    Given a node group "small" of nodes with 2 CPU and 8Gi memory, min 0 and max 3
    And a node group "large" of nodes with 8 CPU and 32Gi memory, min 0 and max 3
    And the autoscaler runs with "--expander=priority"
    And the following objects:
      """
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: cluster-autoscaler-priority-expander
        namespace: kube-system
      data:
        priorities: "10: [unclosed"
      """
    And a deployment "web" of 1 pod requesting 1 CPU
    Then all 1 pods of "web" are running within 5 minutes
    And the node groups "small" and "large" have 1 node in total
    And no safety invariant was violated

  Scenario: A malformed pod-scale-up-delay annotation: the flag's delay applies and the pod is helped
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And a deployment "web" of 2 pods requesting 1 CPU annotated "cluster-autoscaler.kubernetes.io/pod-scale-up-delay=whenever"
    Then all 2 pods of "web" are running within 5 minutes
    And the node group "pool" has 1 node
    And no safety invariant was violated

  Scenario: A safe-to-evict annotation that is neither "true" nor "false" does not make a bare pod evictable
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 1 and max 3
    And the node group "pool" starts with 1 node
    And a node group "solo" of nodes with 4 CPU and 16Gi memory, min 0 and max 2
    And the node group "solo" starts with 1 node
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And a deployment "big" of 1 pod requesting 3500m CPU on node group "pool"
    Then all 1 pods of "big" are running within 1 minute
    When a bare pod "lonely" requesting 1 CPU annotated "cluster-autoscaler.kubernetes.io/safe-to-evict=perhaps" is created
    And 1 minute passes
    And the deployment "big" is scaled to 0 pods
    And 20 minutes pass
    Then no safety invariant was violated
    And the node group "solo" has 1 node

  Scenario: A malformed kwok Stage in the cluster: the testbed ignores it and the autoscaler goes on
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And the following objects:
      """
      apiVersion: kwok.x-k8s.io/v1alpha1
      kind: Stage
      metadata:
        name: broken
      spec:
        resourceRef:
          apiGroup: v1
          kind: Pod
        selector:
          matchExpressions:
          - key: .metadata.labels.[[[
            operator: In
            values: ["x"]
        next:
          statusTemplate: "{{ .Unclosed"
      """
    And a deployment "web" of 6 pods requesting 1 CPU
    Then all 6 pods of "web" are running within 5 minutes
    And the node group "pool" has 2 nodes
    And no safety invariant was violated

  # Upstream's kwok provider reads its templates once, at start, and exits on such an annotation
  # (klog.Fatalf); ours re-reads them every loop, leaves the group out, logs why once, and goes on
  # with the others.
  @kwok-only @extension
  Scenario: A node group template with a malformed size annotation: that group is left out, the others scale
    Given a node group "good" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And a node group "bad" of nodes with 8 CPU and 32Gi memory, min 0 and max 3
    And the template of "bad" is annotated "cluster-autoscaler.kwok.nodegroup/max-count=lots"
    And a deployment "big" of 1 pod requesting 6 CPU
    And a deployment "web" of 2 pods requesting 1 CPU
    Then all 2 pods of "web" are running within 5 minutes
    And 1 pod of "big" stays pending for 5 minutes
    And the node group "good" has 1 node
    And the node group "bad" has 0 nodes
    When the template of "bad" is annotated "cluster-autoscaler.kwok.nodegroup/max-count=3"
    Then all 1 pods of "big" are running within 5 minutes
    And the node group "bad" has 1 node
    And no safety invariant was violated

