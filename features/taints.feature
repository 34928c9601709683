Feature: Taints
  "How does Cluster Autoscaler treat nodes with status/startup/ignore taints?"

  Background:
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 5

  Scenario: A taint the pods don't tolerate keeps its node group out of scale-up
    Given the nodes of "pool" have the taint "startup.example/init=true:NoSchedule"
    And a deployment "web" of 2 pods requesting 1 CPU
    When 3 minutes pass
    Then the node group "pool" has 0 nodes
    And the pods of "web" get a "NotTriggerScaleUp" event

  # Before 1.36 a starting node stands in for the pending pods whoever added it.
  @ca<1.36
  Scenario: Startup taints: the node is counted unready, and expected to become ready
    "Cluster Autoscaler treats nodes tainted with startup taints as unready, but taken into account during
    scale up logic, assuming they will become ready shortly."
    Given the nodes of "pool" have the taint "startup.example/init=true:NoSchedule"
    And the node group "pool" starts with 1 node
    And the autoscaler runs with "--startup-taint=startup.example/init"
    And a deployment "web" of 2 pods requesting 1 CPU
    Then the status ConfigMap shows "health.nodeCounts.registered.notStarted" = "1" for node group "pool" within 1 minute
    And the node group "pool" keeps 1 node for 5 minutes

  # Since 1.36 a starting node stands in for the pending pods only while the scale-up that added
  # it waits for it (clusterstate.go, GetUpcomingNodes): the node here comes from a scale-up.
  @ca>=1.36
  Scenario: Startup taints: a new node is counted unready, and expected to become ready
    "Cluster Autoscaler treats nodes tainted with startup taints as unready, but taken into account during
    scale up logic, assuming they will become ready shortly."
    Given the nodes of "pool" have the taint "startup.example/init=true:NoSchedule"
    And the autoscaler runs with "--startup-taint=startup.example/init"
    When a deployment "web" of 2 pods requesting 1 CPU is created
    Then the status ConfigMap shows "health.nodeCounts.registered.notStarted" = "1" for node group "pool" within 2 minutes
    And the node group "pool" keeps 1 node for 5 minutes

  # Before 1.36 a starting node stands in for the pending pods whoever added it.
  @ca<1.36
  Scenario: Taints with the startup-taint prefix are startup taints without a flag
    "all taints with the prefix startup-taint.cluster-autoscaler.kubernetes.io/"
    Given the nodes of "pool" have the taint "startup-taint.cluster-autoscaler.kubernetes.io/driver=installing:NoSchedule"
    And the node group "pool" starts with 1 node
    And a deployment "web" of 2 pods requesting 1 CPU
    Then the status ConfigMap shows "health.nodeCounts.registered.notStarted" = "1" for node group "pool" within 1 minute
    And the node group "pool" keeps 1 node for 5 minutes

  # Since 1.36 a starting node stands in for the pending pods only while the scale-up that added
  # it waits for it (clusterstate.go, GetUpcomingNodes): the node here comes from a scale-up.
  @ca>=1.36
  Scenario: Taints with the startup-taint prefix are startup taints without a flag, on a new node
    "all taints with the prefix startup-taint.cluster-autoscaler.kubernetes.io/"
    Given the nodes of "pool" have the taint "startup-taint.cluster-autoscaler.kubernetes.io/driver=installing:NoSchedule"
    When a deployment "web" of 2 pods requesting 1 CPU is created
    Then the status ConfigMap shows "health.nodeCounts.registered.notStarted" = "1" for node group "pool" within 2 minutes
    And the node group "pool" keeps 1 node for 5 minutes

  Scenario: Status taints: the node counts as ready but is filtered out of scale-up
    "Cluster Autoscaler internally treats nodes tainted with status taints as ready, but filtered out during
    scale up logic."
    # Each new node carries the taint too, so the pods never run and every loop adds a node: on the 10 s
    # timer (frequent loops are on by default since CA 1.35) the first scale-up shows before the next.
    Given the nodes of "pool" have the taint "status.example/maintenance=true:NoSchedule"
    And the node group "pool" starts with 1 node
    And the autoscaler runs with "--status-taint=status.example/maintenance --frequent-loops-enabled=false"
    Then the status ConfigMap shows "health.nodeCounts.registered.ready" = "1" for node group "pool" within 1 minute
    And the status ConfigMap shows "health.nodeCounts.registered.notStarted" = "0" for node group "pool"
    When a deployment "web" of 2 pods requesting 1 CPU is created
    Then the node group "pool" reaches 2 nodes within 5 minutes

  # Before 1.36 a starting node stands in for the pending pods whoever added it.
  @ca<1.36
  Scenario: Ignore taints are treated as startup taints
    "Ignore taints are now deprecated and treated as startup taints."
    Given the nodes of "pool" have the taint "ignore.example/setup=true:NoSchedule"
    And the node group "pool" starts with 1 node
    And the autoscaler runs with "--ignore-taint=ignore.example/setup"
    And a deployment "web" of 2 pods requesting 1 CPU
    Then the status ConfigMap shows "health.nodeCounts.registered.notStarted" = "1" for node group "pool" within 1 minute
    And the node group "pool" keeps 1 node for 5 minutes

  # Since 1.36 a starting node stands in for the pending pods only while the scale-up that added
  # it waits for it (clusterstate.go, GetUpcomingNodes): the node here comes from a scale-up.
  @ca>=1.36
  Scenario: Ignore taints are treated as startup taints, on a new node
    "Ignore taints are now deprecated and treated as startup taints."
    Given the nodes of "pool" have the taint "ignore.example/setup=true:NoSchedule"
    And the autoscaler runs with "--ignore-taint=ignore.example/setup"
    When a deployment "web" of 2 pods requesting 1 CPU is created
    Then the status ConfigMap shows "health.nodeCounts.registered.notStarted" = "1" for node group "pool" within 2 minutes
    And the node group "pool" keeps 1 node for 5 minutes

  @binary
  Scenario: Unneeded nodes get the DeletionCandidateOfClusterAutoscaler taint
    Given the node group "pool" starts with 2 nodes
    Then a node of "pool" gets the taint "DeletionCandidateOfClusterAutoscaler" within 2 minutes

  @binary
  Scenario: Nodes being removed get the ToBeDeletedByClusterAutoscaler taint
    "Cluster Autoscaler does this by evicting them and tainting the node, so they aren't scheduled there again."
    Given the node group "pool" starts with 2 nodes
    Then a node of "pool" gets the taint "ToBeDeletedByClusterAutoscaler" within 15 minutes

  Scenario: Leftover ToBeDeleted taints are removed when the autoscaler restarts
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "--scale-down-enabled=false"
    When the nodes of "pool" get the taint "ToBeDeletedByClusterAutoscaler=1700000000:NoSchedule"
    And the autoscaler restarts
    Then no node of "pool" has the taint "ToBeDeletedByClusterAutoscaler" within 1 minute

  @ca>=1.36
  Scenario Outline: --startup-taint-prefix makes every taint under the prefix a startup taint
    "startup-taint-prefix: Specifies a taint key prefix. Any taint whose key starts with this prefix will be
    treated as a startup taint (in addition to the built-in prefixes)." A node carrying a startup taint has not
    started: it counts as notStarted, not ready, and its node group's template loses the taint.
    Given the nodes of "pool" have the taint "example.com/booting=x:NoSchedule"
    And the node group "pool" starts with 1 node
    And the autoscaler runs with "<flags>"
    When 1 minute passes
    Then the autoscaler's metrics show "cluster_autoscaler_nodes_count{state="<state>"} 1"
    And the autoscaler's metrics show "cluster_autoscaler_node_taints_count{type="<type>"} 1"

    Examples:
      | flags                               | state      | type          |
      | --startup-taint-prefix=example.com/ | notStarted | startup-taint |
      | --scan-interval=10s                 | ready      | other         |
