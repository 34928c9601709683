Feature: Pods that block scale-down
  "What types of pods can prevent CA from removing a node?"

  # The pod under test starts on node "a", the only node; then a filler pod brings up node "b",
  # where the pod could move.
  Background:
    Given a node group "a" of nodes with 4 CPU and 16Gi memory, min 0 and max 5
    And the node group "a" starts with 1 node
    And a node group "b" of nodes with 4 CPU and 16Gi memory, min 0 and max 5

  Scenario: A pod annotated safe-to-evict "false" keeps its node
    "Pods that have the following annotation set: cluster-autoscaler.kubernetes.io/safe-to-evict: "false""
    Given a deployment "pinned" of 1 pod requesting 100m CPU annotated "cluster-autoscaler.kubernetes.io/safe-to-evict=false"
    When 1 minute passes
    And a filler pod brings up a node of "b"
    And 15 minutes pass
    Then the autoscaler keeps the node of "a" because of "NotSafeToEvictAnnotation"
    And the node group "a" has 1 node

  @binary
  Scenario: A replicated pod is moved and its node removed
    Given a deployment "web" of 1 pod requesting 100m CPU
    When 1 minute passes
    And a filler pod brings up a node of "b"
    Then the node group "a" reaches 0 nodes within 15 minutes
    And all 1 pods of "web" are running within 1 minute

  Scenario: A pod not backed by a controller keeps its node
    "Pods that are not backed by a controller object (so not created by deployment, replica set, job,
    stateful set etc)."
    Given a bare pod "lonely" requesting 100m CPU
    When 1 minute passes
    And a filler pod brings up a node of "b"
    And 15 minutes pass
    Then the autoscaler keeps the node of "a" because of "NotReplicated"
    And the node group "a" keeps 1 node for 15 minutes

  Scenario: A bare pod annotated safe-to-evict "true" does not keep its node
    "Pods that are not backed by a controller object ... (unless the pod has the
    cluster-autoscaler.kubernetes.io/safe-to-evict: "true" annotation)"
    Given a bare pod "lonely" requesting 100m CPU annotated "cluster-autoscaler.kubernetes.io/safe-to-evict=true"
    When 1 minute passes
    And a filler pod brings up a node of "b"
    Then the node group "a" reaches 0 nodes within 15 minutes

  Scenario: A kube-system pod without a PDB keeps its node
    "Kube-system pods that: are not run on the node by default, ... don't have a pod disruption budget
    set or their PDB is too restrictive"
    Given a deployment "dns" of 1 pod requesting 100m CPU in namespace "kube-system"
    When 1 minute passes
    And a filler pod brings up a node of "b"
    And 15 minutes pass
    Then the autoscaler keeps the node of "a" because of "UnmovableKubeSystemPod"
    And the node group "a" keeps 1 node for 15 minutes

  Scenario: A pod with local storage keeps its node
    "Pods with local storage."
    Given a deployment "cache" of 1 pod requesting 100m CPU with an emptyDir volume "scratch"
    When 1 minute passes
    And a filler pod brings up a node of "b"
    And 15 minutes pass
    Then the autoscaler keeps the node of "a" because of "LocalStorageRequested"
    And the node group "a" keeps 1 node for 15 minutes

  Scenario: safe-to-evict-local-volumes listing every local volume lets the node go
    "unless the pod has the following annotation ... cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes
    ... and all of the pod's local volumes are listed in the annotation value."
    Given a deployment "cache" of 1 pod requesting 100m CPU with an emptyDir volume "scratch" with an emptyDir volume "tmp" annotated "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes=scratch,tmp"
    When 1 minute passes
    And a filler pod brings up a node of "b"
    Then the node group "a" reaches 0 nodes within 15 minutes
    And all 1 pods of "cache" are running within 1 minute

  Scenario: safe-to-evict-local-volumes listing only some local volumes keeps the node
    Given a deployment "cache" of 1 pod requesting 100m CPU with an emptyDir volume "scratch" with an emptyDir volume "tmp" annotated "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes=scratch"
    When 1 minute passes
    And a filler pod brings up a node of "b"
    And 15 minutes pass
    Then the autoscaler keeps the node of "a" because of "LocalStorageRequested"
    And the node group "a" keeps 1 node for 15 minutes

  Scenario: A pod with no other node to go to keeps its node
    "Pods that cannot be moved elsewhere due to scheduling constraints. ... No other node with enough
    resources has the labels required by a pod's node selector"
    Given a deployment "stuck" of 1 pod requesting 100m CPU on node group "a"
    When 1 minute passes
    And a filler pod brings up a node of "b"
    And 15 minutes pass
    Then the autoscaler keeps the node of "a" because of "NoPlaceToMovePods"
    And the node group "a" keeps 1 node for 15 minutes

  Scenario: A pod whose host port is taken everywhere else keeps its node
    "No other node has available ports to satisfy a pod's hostPort configuration."
    Given a deployment "agent" of 2 pods requesting 100m CPU with host port 9100
    Then all 2 pods of "agent" are running within 5 minutes
    And the autoscaler keeps the node of "a" because of "NoPlaceToMovePods"

  Scenario: DaemonSet pods do not keep a node
    "All pods running on the node (except these that run on all nodes by default, like manifest-run pods
    or pods created by daemonsets) can be moved to other nodes."
    Given a daemonset "logs" requesting 100m CPU
    When 1 minute passes
    And a filler pod brings up a node of "b"
    Then the node group "a" reaches 0 nodes within 15 minutes

  @binary
  Scenario: DaemonSet pods of an occupied node are evicted by default
    "by default DaemonSet pods eviction will happen only on occupied nodes."
    Given a daemonset "logs" requesting 100m CPU
    And a deployment "web" of 1 pod requesting 100m CPU
    When 1 minute passes
    And a filler pod brings up a node of "b"
    Then the node group "a" reaches 0 nodes within 15 minutes
    And the pods of "logs" get a "ScaleDown" event saying "deleting pod for node scale down"

  Scenario: enable-ds-eviction "false" keeps DaemonSet pods from being evicted
    "It is also possible to disable DaemonSet pods eviction expicitly:
    cluster-autoscaler.kubernetes.io/enable-ds-eviction: "false""
    Given a daemonset "logs" requesting 100m CPU annotated "cluster-autoscaler.kubernetes.io/enable-ds-eviction=false"
    And a deployment "web" of 1 pod requesting 100m CPU
    When 1 minute passes
    And a filler pod brings up a node of "b"
    Then the node group "a" reaches 0 nodes within 15 minutes
    And the pods of "logs" get no "ScaleDown" event

  Scenario: --daemonset-eviction-for-empty-nodes evicts DaemonSet pods of empty nodes
    "--daemonset-eviction-for-empty-nodes and --daemonset-eviction-for-occupied-nodes flags"
    Given the autoscaler runs with "--daemonset-eviction-for-empty-nodes=true"
    And a daemonset "logs" requesting 100m CPU
    When 1 minute passes
    And a filler pod brings up a node of "b"
    Then the node group "a" reaches 0 nodes within 15 minutes
    And the pods of "logs" get a "ScaleDown" event saying "deleting pod for node scale down"
