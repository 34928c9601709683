Feature: Faults, restarts and bad weather
  The safety promises hold whatever the API server does: "Cluster Autoscaler ... never removes a node
  whose pods cannot be moved", respects PodDisruptionBudgets, stays within each node group's min and
  max, and cleans up its taints. Every scenario watches these invariants over the whole run, not only
  at its end: a group outside [min, max]; a node the autoscaler deleted under a pod that blocks
  removal; an eviction past a PDB; a ToBeDeletedByClusterAutoscaler taint left on a node that stays;
  a replicated pod not back and ready.

  The API faults hit only the autoscaler under test (never the testbed's scheduler, controllers or
  kwok), with kube-apiserver's answers: 500 InternalError, 429 TooManyRequests with Retry-After, 409
  Conflict, 504 after a hold, 410 Gone on a watch, a watch that sends nothing, watches cut.

  Background:
    Given the safety invariants are observed throughout
    And a node group "pool" of nodes with 4 CPU and 16Gi memory, min 1 and max 6
    And the node group "pool" starts with 1 node

  # API errors during scale-up. The kwok provider creates the group's nodes and deletes them
  # itself (@kwok-only: with Cluster API the testbed's controllers do).

  @kwok-only
  Scenario: Half the node creations fail with 500: the scale-up still completes, once
    Given the API server answers 50% of "create" requests on "nodes" with 500
    When a deployment "web" of 16 pods requesting 1 CPU is created
    Then all 16 pods of "web" are running within 30 minutes
    And the node group "pool" never had more than 4 nodes
    And the API server injected at least 2 faults
    And no safety invariant was violated

  @kwok-only
  Scenario: Node creations throttled with 429 and Retry-After: the scale-up waits and completes
    Given the API server answers the next 4 "create" requests on "nodes" with 429
    When a deployment "web" of 8 pods requesting 1 CPU is created
    Then all 8 pods of "web" are running within 10 minutes
    And the node group "pool" never had more than 3 nodes
    And the API server injected at least 4 faults
    And no safety invariant was violated

  @kwok-only
  Scenario: Node creations that time out after 30 seconds: the group backs off, no duplicate scale-up
    Given the API server times out the next 2 "create" requests on "nodes" after 30 seconds
    When a deployment "web" of 8 pods requesting 1 CPU is created
    Then all 8 pods of "web" are running within 20 minutes
    And the node group "pool" never had more than 3 nodes
    And the API server injected at least 2 faults
    And no safety invariant was violated

  Scenario: A slow API server (300 ms on every request) still scales up and down
    Given the API server adds 300 ms to every request
    And the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-delay-after-add=1m"
    When a deployment "web" of 8 pods requesting 1 CPU is created
    Then all 8 pods of "web" are running within 10 minutes
    When the deployment "web" is scaled to 1 pod
    Then the node group "pool" reaches 1 node within 15 minutes
    And the API server injected at least 10 faults
    And no safety invariant was violated

  Scenario: The relist after a 410 fails three times: the autoscaler lists again and scales up
    Given the API server answers the next 1 watch on "pods" with 410 Gone
    And the API server answers the next 3 "list" requests on "pods" with 500
    # client-go backs a failing relist off for 0.8 s, 1.6 s, 3.2 s... of real time (about 25 s
    # for three failures), half an hour of scenario time against a binary at the time scale of 60.
    When 30 minutes pass
    And the API server cuts every watch on "pods"
    And a deployment "web" of 8 pods requesting 1 CPU is created
    Then all 8 pods of "web" are running within 10 minutes
    And the API server injected at least 5 faults
    And no safety invariant was violated

  Scenario: Status ConfigMap writes fail: the autoscaler keeps scaling
    Given the API server answers 100% of "update" requests on "configmaps" with 500
    And the API server answers 100% of "create" requests on "configmaps" with 500
    When a deployment "web" of 8 pods requesting 1 CPU is created
    Then all 8 pods of "web" are running within 10 minutes
    And the node group "pool" never had more than 3 nodes
    And no safety invariant was violated

  # Watches dropped, answered 410 Gone or stalled: the autoscaler relists.

  Scenario: Every watch is cut mid-run: the autoscaler watches again and scales up
    When 1 minute passes
    And the API server cuts every watch
    And a deployment "web" of 8 pods requesting 1 CPU is created
    Then all 8 pods of "web" are running within 10 minutes
    And the API server injected at least 1 fault
    And no safety invariant was violated

  Scenario: Pod watches answered 410 Gone: the autoscaler lists again and scales up
    Given the API server answers the next 3 watches on "pods" with 410 Gone
    When 1 minute passes
    And the API server cuts every watch on "pods"
    And a deployment "web" of 8 pods requesting 1 CPU is created
    Then all 8 pods of "web" are running within 10 minutes
    And the API server injected at least 2 faults
    And no safety invariant was violated

  Scenario: A watch resumed after its window has moved on is gone: the autoscaler lists again and scales up
    "410 Gone" as kube-apiserver's watch cache answers a resourceVersion it no longer keeps; here the
    window is 5 changes per resource, and the pod watch comes back 30 seconds late, after more changes.
    Given the API server keeps the last 5 changes of each resource for watches
    And a deployment "web" of 2 pods requesting 1 CPU
    Then all 2 pods of "web" are running within 10 minutes
    When the API server delays the next 1 watch on "pods" by 30 seconds
    And the API server cuts every watch on "pods"
    And the deployment "web" is scaled to 8 pods
    Then all 8 pods of "web" are running within 10 minutes
    And the API server answered at least 1 watch of the autoscaler with 410 Gone
    And no safety invariant was violated

  Scenario: A stalled node watch: no node is deleted from a stale view
    The node watch sends nothing for 5 minutes while the nodes empty, then ends as a watch ends at
    its timeout. A stall that lasted until the client's own timeout would be fair in-process only:
    client-go's reflectors set 5 to 10 minutes of real time, which at a binary's time scale of 60 are
    5 to 10 scenario hours.
    Given the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-delay-after-add=1m"
    And a deployment "web" of 8 pods requesting 1 CPU
    Then all 8 pods of "web" are running within 10 minutes
    When the API server stalls the next 1 watch on "nodes" for 5 minutes
    And the API server cuts every watch on "nodes"
    And the deployment "web" is scaled to 1 pod
    Then the node group "pool" reaches 1 node within 20 minutes
    And the API server injected at least 2 faults
    And no safety invariant was violated

  # API errors during scale-down: taint, eviction, node deletion.

  Scenario: Tainting fails with 500: the node is removed on a later try and no taint is left
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And the API server answers the next 3 "update" requests on "nodes" with 500
    Then the node group "pool" reaches 1 node within 20 minutes
    And the API server injected at least 3 faults
    And no safety invariant was violated

  Scenario: Tainting meets 409 conflicts: the node is removed on a later try and no taint is left
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And the API server answers the next 4 "update" requests on "nodes" with 409
    Then the node group "pool" reaches 1 node within 20 minutes
    And the API server injected at least 4 faults
    And no safety invariant was violated

  @binary
  Scenario: Evictions throttled with 429: the drain retries, the pods run again elsewhere
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And a deployment "web" of 3 pods requesting 500m CPU
    And the API server answers the next 5 "create" requests on "pods/eviction" with 429
    Then the node group "pool" reaches 1 node within 25 minutes
    And all 3 pods of "web" are running within 2 minutes
    And no safety invariant was violated

  Scenario: Half the evictions fail with 500: nodes go only when emptied, pods come back
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And a deployment "web" of 3 pods requesting 500m CPU
    And the API server answers 50% of "create" requests on "pods/eviction" with 500
    Then the node group "pool" reaches 1 node within 30 minutes
    And all 3 pods of "web" are running within 2 minutes
    And no safety invariant was violated

  Scenario: Evictions fail under a PDB: the budget is never exceeded
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And a deployment "web" of 3 pods requesting 500m CPU
    And a pod disruption budget for "web" with minAvailable 2
    And the API server answers 30% of "create" requests on "pods/eviction" with 500
    Then the node group "pool" reaches 1 node within 30 minutes
    And all 3 pods of "web" are running within 2 minutes
    And no safety invariant was violated

  @kwok-only
  Scenario: Node deletions fail with 500: the node is retried or untainted, never left tainted
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-delay-after-failure=1m"
    And the API server answers the next 2 "delete" requests on "nodes" with 500
    Then the node group "pool" reaches 1 node within 25 minutes
    And the API server injected at least 2 faults
    And no safety invariant was violated

  @kwok-only
  Scenario: Every node deletion fails for a while: the autoscaler cleans its taints off the nodes that stay
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-delay-after-failure=1m"
    And the API server answers 100% of "delete" requests on "nodes" with 500
    When 6 minutes pass
    Then the node group "pool" has 3 nodes
    When the API server injects no more faults
    Then the node group "pool" reaches 1 node within 20 minutes
    And no safety invariant was violated

  @extension @kwok-only
  Scenario: The cloud refuses to delete nodes: they are untainted and stay, then go once it accepts
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-delay-after-failure=1m"
    And the cloud provider refuses to delete nodes of "pool"
    When 6 minutes pass
    Then the node group "pool" has 3 nodes
    When the faults of "pool" are cleared
    Then the node group "pool" reaches 1 node within 20 minutes
    And no safety invariant was violated

  Scenario: A pod that blocks removal keeps its node through API errors
    Given a node group "solo" of nodes with 4 CPU and 16Gi memory, min 0 and max 2
    And the node group "solo" starts with 1 node
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And a deployment "big" of 1 pod requesting 3500m CPU on node group "pool"
    Then all 1 pods of "big" are running within 1 minute
    When a bare pod "lonely" requesting 1 CPU is created
    And 1 minute passes
    And the deployment "big" is scaled to 0 pods
    And the API server answers 30% of "any" requests on "any" with 500
    And 20 minutes pass
    Then no safety invariant was violated
    And the node group "solo" has 1 node
    And the API server injected at least 10 faults

  # The autoscaler killed and restarted; nodes vanishing; bursts.

  @binary
  Scenario: The autoscaler restarts mid-drain: the drain finishes or its taint is cleaned up
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And a deployment "web" of 3 pods requesting 500m CPU
    And a pod disruption budget for "web" with maxUnavailable 1
    Then a node of "pool" gets the taint "ToBeDeletedByClusterAutoscaler" within 10 minutes
    When the autoscaler restarts
    Then the node group "pool" reaches 1 node within 25 minutes
    And all 3 pods of "web" are running within 2 minutes
    And no safety invariant was violated

  Scenario: The autoscaler restarts twice during a scale-up: no duplicate scale-up
    When a deployment "web" of 8 pods requesting 1 CPU is created
    And 5 seconds pass
    And the autoscaler restarts
    And 5 seconds pass
    And the autoscaler restarts
    Then all 8 pods of "web" are running within 10 minutes
    And the node group "pool" never had more than 3 nodes
    And no safety invariant was violated

  # Replicas with leader election: only the Lease's holder acts; killed, another takes over.

  @binary
  Scenario: Two replicas, the leader killed mid-scale-up: the other takes over, no duplicate scale-up
    # Loops on the 10 s timer (frequent loops are on by default since CA 1.35), so that the kill falls
    # between the first scale-up and the next.
    Given the autoscaler runs with "--frequent-loops-enabled=false"
    And the autoscaler runs as 2 replicas with leader election
    When a deployment "web" of 8 pods requesting 1 CPU is created
    And 5 seconds pass
    And the leading replica is killed
    Then all 8 pods of "web" are running within 10 minutes
    And the node group "pool" never had more than 3 nodes
    And 2 replicas acted, one at a time
    And no safety invariant was violated

  @binary
  Scenario: Two replicas, the leader killed mid-drain: its drain dies with it, the new leader finishes
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And the autoscaler runs as 2 replicas with leader election
    And a deployment "web" of 3 pods requesting 500m CPU taking 2 minutes to terminate
    And a pod disruption budget for "web" with maxUnavailable 1
    Then a node of "pool" gets the taint "ToBeDeletedByClusterAutoscaler" within 10 minutes
    When the leading replica is killed
    Then the node group "pool" reaches 1 node within 25 minutes
    And all 3 pods of "web" are running within 2 minutes
    And 2 replicas acted, one at a time
    And no safety invariant was violated

  Scenario: Three replicas, two leaders killed in turn: each new leader acts alone
    Given the autoscaler runs as 3 replicas with leader election
    When a deployment "web" of 4 pods requesting 1 CPU is created
    Then all 4 pods of "web" are running within 10 minutes
    When the leading replica is killed
    And a deployment "more" of 4 pods requesting 1 CPU is created
    Then all 4 pods of "more" are running within 10 minutes
    When the leading replica is killed
    And the deployment "more" is scaled to 0 pods
    And the deployment "web" is scaled to 0 pods
    Then the node group "pool" reaches 1 node within 30 minutes
    And 3 replicas acted, one at a time
    And no safety invariant was violated

  Scenario: Nodes vanish during a scale-down: the rest goes on safely
    Given the node group "pool" starts with 4 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And a deployment "web" of 4 pods requesting 500m CPU
    Then a node of "pool" gets the taint "ToBeDeletedByClusterAutoscaler" within 10 minutes
    When 1 node of "pool" is deleted
    Then the node group "pool" reaches 1 node within 25 minutes
    And all 4 pods of "web" are running within 5 minutes
    And no safety invariant was violated

  Scenario: A burst of pods during a scale-down: the new pods get nodes, nothing is lost
    Given the node group "pool" starts with 4 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And a deployment "web" of 2 pods requesting 500m CPU
    Then a node of "pool" gets the taint "ToBeDeletedByClusterAutoscaler" within 10 minutes
    When a deployment "burst" of 12 pods requesting 1 CPU is created
    Then all 12 pods of "burst" are running within 10 minutes
    And all 2 pods of "web" are running within 2 minutes
    And no safety invariant was violated

  # Clocks that disagree: the autoscaler's machine's clock off the cluster's. Its own timers
  # (unneeded time, delays, backoff) still take as long as configured; only the timestamps the
  # cluster wrote (pod and node creation) look older or newer to it.

  Scenario: The autoscaler's clock an hour ahead of the cluster's: nodes still wait their unneeded time
    Given the autoscaler's clock is 1 hour ahead of the cluster's
    And the node group "pool" starts with 3 nodes
    Then the node group "pool" keeps 3 nodes for 9 minutes
    And the node group "pool" reaches 1 node within 5 minutes
    When a deployment "web" of 8 pods requesting 1 CPU is created
    Then all 8 pods of "web" are running within 5 minutes
    And no safety invariant was violated

  Scenario: The autoscaler's clock 2 minutes behind the cluster's: new pods wait out the difference, then get nodes
    Given the autoscaler's clock is 2 minutes behind the cluster's
    And the node group "pool" starts with 3 nodes
    Then the node group "pool" keeps 3 nodes for 9 minutes
    And the node group "pool" reaches 1 node within 5 minutes
    When a deployment "web" of 8 pods requesting 1 CPU is created
    And 10 seconds pass
    Then 4 pods of "web" stay pending for 1 minute
    And all 8 pods of "web" are running within 6 minutes
    And the node group "pool" never had more than 3 nodes
    And no safety invariant was violated

  Scenario: API errors everywhere for a while, then calm: the cluster settles
    Given the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-delay-after-add=1m"
    And the API server answers 10% of "any" requests on "any" with 500
    When a deployment "web" of 8 pods requesting 1 CPU is created
    Then all 8 pods of "web" are running within 30 minutes
    When the deployment "web" is scaled to 1 pod
    And 5 minutes pass
    And the API server injects no more faults
    Then the node group "pool" reaches 1 node within 20 minutes
    And the API server injected at least 10 faults
    And no safety invariant was violated
