Feature: Fault storms at scale
  The safety promises of faults.feature under a storm of API faults at scale: during a scale-up of
  a hundred nodes' worth of pods and the scale-down after it, a fifth of the autoscaler's writes
  fail (500 and 429), every request is held for 10 seconds, and every watch is cut every 30
  seconds, for two minutes each time. The invariants are watched over the whole run: the group
  within its min and max, no node removed under a pod that blocks it, no taint left behind, every
  replica back. The scale-up asks for no more nodes than the pods need (one for slack), and the
  pods run, and the nodes go, within a stated time after the storm.

  The other storms: the leading replica killed mid-scale-up and its successor mid-scale-down;
  one group of three failing every scale-up (quota) while thousands of pods wait, then
  recovering; half the nodes going NotReady at once, then back; the autoscaler restarted after
  it has marked a hundred nodes unneeded.

  The storms run at 100 nodes × 30 pods. At 1,000 nodes the API storm had not ended after
  12 minutes of a debug build, too long for the suite's run.

  Background:
    Given the safety invariants are observed throughout

  Scenario Outline: API errors, cut watches and a stall during a scale-up of <pods> pods and the scale-down after it
    Given a node group "pool" of nodes with 30 CPU and 256Gi memory, min 1 and max <max>
    And the node group "pool" starts with 1 node
    And the autoscaler runs with "--kube-client-qps=1000 --kube-client-burst=2000 --scale-down-unneeded-time=2m --scale-down-delay-after-add=2m --max-scale-down-parallelism=100 --max-empty-bulk-delete=100"
    When the API server answers 10% of writes with 500
    And the API server answers 10% of writes with 429
    And a deployment "backlog" of <pods> pods requesting 990m CPU is created
    And the API server holds every request for 10 seconds
    And the API server cuts every watch every 30 seconds for 2 minutes
    And the API server injects no more faults
    Then all <pods> pods of "backlog" are running within 10 minutes
    And the node group "pool" never had more than <most> nodes
    When the API server answers 10% of writes with 500
    And the API server answers 10% of writes with 429
    And the deployment "backlog" is scaled to 0 pods
    And the API server holds every request for 10 seconds
    And the API server cuts every watch every 30 seconds for 2 minutes
    And the API server injects no more faults
    Then the node group "pool" reaches 1 node within 15 minutes
    And the API server injected at least 20 faults
    And no safety invariant was violated

    Examples:
      | pods | most | max |
      | 3000 | 101  | 200 |

  Scenario: Three replicas: the leader killed mid-scale-up of 3000 pods, its successor mid-scale-down
    Given a node group "pool" of nodes with 30 CPU and 256Gi memory, min 1 and max 200
    And the node group "pool" starts with 1 node
    And the autoscaler runs with "--kube-client-qps=1000 --kube-client-burst=2000 --scale-down-unneeded-time=2m --scale-down-delay-after-add=2m --max-scale-down-parallelism=100 --max-empty-bulk-delete=100"
    And the autoscaler runs as 3 replicas with leader election
    When a deployment "backlog" of 3000 pods requesting 990m CPU is created
    And 5 seconds pass
    And the leading replica is killed
    Then all 3000 pods of "backlog" are running within 10 minutes
    And the node group "pool" never had more than 101 nodes
    When the deployment "backlog" is scaled to 0 pods
    Then a node of "pool" gets the taint "ToBeDeletedByClusterAutoscaler" within 10 minutes
    When the leading replica is killed
    Then the node group "pool" reaches 1 node within 15 minutes
    And 3 replicas acted, one at a time
    And no safety invariant was violated

  # Quota errors are injected through the kwok provider's templates.
  @extension @kwok-only
  Scenario: One group of three fails every scale-up while 3000 pods wait: it is backed off, the others take them, and it is used again once it recovers
    Given node groups "first", "second", "third" of nodes with 30 CPU and 256Gi memory, min 0 and max 60
    And scale-ups of "first" fail with a quota error
    And the autoscaler runs with "--kube-client-qps=1000 --kube-client-burst=2000 --expander=priority --scale-down-unneeded-time=2m --scale-down-delay-after-add=2m --max-scale-down-parallelism=100 --max-empty-bulk-delete=100"
    And the priority expander gives priority 100 to "^first$"
    And the priority expander gives priority 50 to "^second$"
    And the priority expander gives priority 10 to "^third$"
    When a deployment "backlog" of 3000 pods requesting 990m CPU is created
    Then all 3000 pods of "backlog" are running within 15 minutes
    And the node group "first" has 0 nodes
    And the node group "second" has 60 nodes
    And the node group "third" never had more than 41 nodes
    And the status ConfigMap shows "scaleUp.backoffInfo.errorCode" = "QUOTA_EXCEEDED" for node group "first"
    When the faults of "first" are cleared
    And the deployment "backlog" is scaled to 0 pods
    Then the node group "second" reaches 0 nodes within 15 minutes
    And the node group "third" reaches 0 nodes within 5 minutes
    When 5 minutes pass
    And a deployment "later" of 900 pods requesting 990m CPU is created
    Then all 900 pods of "later" are running within 10 minutes
    And the node group "first" has 30 nodes
    And the node group "second" has 0 nodes
    And no safety invariant was violated

  Scenario: Half of 100 nodes go NotReady at once: nothing is added or removed until they are back
    "What happens when nodes become unready? ... CA stops all operations until the situation improves"
    With 50 of 100 nodes NotReady the cluster is past --max-total-unready-percentage (45): the
    autoscaler leaves it alone, though every node is unneeded. Back Ready, they go. (A node
    NotReady in its first 15 minutes counts as not started yet, not as unready: the nodes have
    run for that long first.)
    Given a node group "pool" of nodes with 30 CPU and 256Gi memory, min 1 and max 200
    And the node group "pool" starts with 1 node
    And the autoscaler runs with "--kube-client-qps=1000 --kube-client-burst=2000 --scale-down-unneeded-time=2m --scale-down-delay-after-add=2m --scale-down-unready-time=2m --max-scale-down-parallelism=100 --max-empty-bulk-delete=100"
    When a deployment "backlog" of 3000 pods requesting 990m CPU is created
    Then all 3000 pods of "backlog" are running within 10 minutes
    When 15 minutes pass
    And 50 nodes of "pool" become NotReady
    And the deployment "backlog" is scaled to 0 pods
    Then the node group "pool" keeps 100 nodes for 10 minutes
    When the NotReady nodes of "pool" become Ready again
    Then the node group "pool" reaches 1 node within 10 minutes
    And the node group "pool" never had more than 101 nodes
    And no safety invariant was violated

  @ca>=1.34
  Scenario: Restarted after it marked 100 nodes unneeded, the autoscaler takes their timers from the soft taints
    "node-deletion-candidate-ttl: Maximum time a node can be marked as removable before the marking becomes stale."
    The nodes are unneeded from the moment the pods go; restarted 8 minutes later, the autoscaler
    removes them when their 10 minutes are up, not 10 minutes after its start.
    Given a node group "pool" of nodes with 30 CPU and 256Gi memory, min 1 and max 200
    And the node group "pool" starts with 1 node
    And the autoscaler runs with "--kube-client-qps=1000 --kube-client-burst=2000 --scale-down-unneeded-time=10m --scale-down-delay-after-add=2m --node-deletion-candidate-ttl=30m --max-scale-down-parallelism=100 --max-empty-bulk-delete=100"
    When a deployment "backlog" of 3000 pods requesting 990m CPU is created
    Then all 3000 pods of "backlog" are running within 10 minutes
    When the deployment "backlog" is scaled to 0 pods
    And 8 minutes pass
    And the autoscaler restarts
    Then the node group "pool" reaches 1 node within 5 minutes
    And no safety invariant was violated
