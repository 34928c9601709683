Feature: Scale-down
  "Cluster Autoscaler decreases the size of the cluster when some nodes are consistently
  unneeded for a significant amount of time."

  Background:
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 10

  @binary
  Scenario: A node unneeded for 9 minutes and 59 seconds stays; after 10 minutes it goes
    "If a node is unneeded for more than 10 minutes, it will be terminated."
    Given the node group "pool" starts with 2 nodes
    And a deployment "web" of 1 pod requesting 500m CPU
    When the autoscaler finds a node of "pool" unneeded
    And 9 minutes and 59 seconds pass
    Then the node group "pool" has 2 nodes
    When 30 seconds pass
    Then the node group "pool" has 1 node
    And all 1 pods of "web" are running within 1 minute

  Scenario: --scale-down-unneeded-time changes the wait
    "scale-down-unneeded-time: How long a node should be unneeded before it is eligible for scale down"
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=3m"
    When the autoscaler finds a node of "pool" unneeded
    And 2 minutes and 50 seconds pass
    Then the node group "pool" has 2 nodes
    When 40 seconds pass
    Then the node group "pool" has 0 nodes

  Scenario: --scale-down-enabled=false keeps every node
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "--scale-down-enabled=false"
    Then the node group "pool" keeps 2 nodes for 20 minutes

  Scenario: A node above 50% utilization is not unneeded
    "The sum of cpu requests and sum of memory requests of all pods running on this node ... are smaller
    than 50% of the node's allocatable."
    Given the node group "pool" starts with 1 node
    And a deployment "big" of 1 pod requesting 2100m CPU
    Then the autoscaler keeps a node of "pool" because of "NotUnderutilized"

  Scenario: --scale-down-utilization-threshold moves the 50% line
    "Utilization threshold can be configured using --scale-down-utilization-threshold flag."
    Given the node group "pool" starts with 1 node
    And the autoscaler runs with "--scale-down-utilization-threshold=0.7"
    And a deployment "big" of 1 pod requesting 2100m CPU
    Then the autoscaler keeps a node of "pool" because of "NoPlaceToMovePods"

  Scenario: A GPU node is judged by its GPUs alone: busy CPUs do not keep a node whose GPU is idle
    "scale-down-gpu-utilization-threshold: ... Utilization calculation only cares about gpu resource for
    accelerator node. cpu and memory utilization will be ignored."
    The pod starts on the GPU node, the only node; then a filler pod (pinned to "pool") brings up a
    node of "pool". The GPU node's CPU is 75% requested, but its GPU is idle: it is unneeded, and its
    pod moves to the "pool" node, which the filler pod keeps (after --scale-down-delay-after-add: the
    filler pod made a scale-up).
    Given a node group "gpu" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And the nodes of "gpu" have 1 "nvidia.com/gpu"
    And the node group "gpu" starts with 1 node
    And a deployment "batch" of 1 pod requesting 3 CPU
    Then all 1 pods of "batch" are running within 1 minute
    When a filler pod brings up a node of "pool"
    Then the node group "gpu" reaches 0 nodes within 20 minutes
    And the node group "pool" has 1 node
    And all 1 pods of "batch" are running within 1 minute

  @binary
  Scenario: Pods of a removed node are moved elsewhere and run again
    "All pods running on the node ... can be moved to other nodes. ... Cluster Autoscaler does this by
    evicting them and tainting the node, so they aren't scheduled there again."
    Given the node group "pool" starts with 2 nodes
    And a deployment "web" of 2 pods requesting 500m CPU
    Then all 2 pods of "web" are running within 1 minute
    And the node group "pool" reaches 1 node within 15 minutes
    And all 2 pods of "web" are running within 1 minute
    And a node of "pool" gets a "ScaleDown" event saying "marked the node as toBeDeleted/unschedulable"

  @binary
  Scenario: Empty nodes are removed in bulk
    "Empty nodes, on the other hand, can be terminated in bulk, up to 10 nodes at a time"
    Given the node group "pool" starts with 4 nodes
    When the autoscaler finds a node of "pool" unneeded
    And 9 minutes and 50 seconds pass
    Then the node group "pool" has 4 nodes
    When 40 seconds pass
    Then the node group "pool" has 0 nodes
    And the status ConfigMap gets a "ScaleDownEmpty" event

  Scenario: --max-scale-down-parallelism steps scale-down, as kube-aws-autoscaler's --scale-down-step-fixed
    "max-scale-down-parallelism: Maximum number of nodes (both empty and needing drain) that can
    be deleted in parallel." kube-aws-autoscaler's "--scale-down-step-fixed: Scale down step in
    terms of node count" is this flag, with --scale-down-delay-after-delete as the time between
    steps.
    Given the autoscaler runs with "--max-scale-down-parallelism=2 --scale-down-delay-after-delete=5m"
    And the node group "pool" starts with 4 nodes
    When the autoscaler finds a node of "pool" unneeded
    And 10 minutes and 30 seconds pass
    Then the node group "pool" has 2 nodes
    When 6 minutes pass
    Then the node group "pool" has 0 nodes

  Scenario: Non-empty nodes are removed one at a time
    "Cluster Autoscaler terminates one non-empty node at a time to reduce the risk of creating new
    unschedulable pods."
    Given the node group "pool" starts with 4 nodes
    And a deployment "small" of 4 pods requesting 300m CPU
    Then all 4 pods of "small" are running within 1 minute
    And the node group "pool" shrinks one node at a time to 1 node within 40 minutes
    And all 4 pods of "small" are running within 1 minute

  Scenario: --scale-down-delay-after-add waits after a scale-up
    "scale-down-delay-after-add: How long after scale up that scale down evaluation resumes"
    Given the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-delay-after-add=8m"
    When a deployment "burst" of 4 pods requesting 2 CPU is created
    Then all 4 pods of "burst" are running within 5 minutes
    When the deployment "burst" is scaled to 0 pods
    And 4 minutes pass
    Then the node group "pool" has 4 nodes
    And the node group "pool" reaches 0 nodes within 8 minutes

  @binary
  Scenario: A scale-up stuck in progress holds scale-down back for --scale-down-delay-after-add only
    The new "flaky" node never becomes ready, so its scale-up stays in progress until
    --max-node-provision-time (15 minutes). Scale-down waits the delay after the scale-up, then goes
    on: it does not wait for the scale-up to end.
    Given a node group "flaky" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And new nodes of "flaky" never become ready
    And the node group "pool" starts with 1 node
    And the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-delay-after-add=3m"
    When a deployment "web" of 1 pod requesting 3 CPU on node group "flaky" is created
    Then the status ConfigMap shows "scaleUp.status" = "InProgress" for node group "flaky" within 1 minute
    When 2 minutes pass
    Then the node group "pool" has 1 node
    And the node group "pool" reaches 0 nodes within 4 minutes
    And the status ConfigMap shows "scaleUp.status" = "InProgress" for node group "flaky"

  Scenario: --scale-down-delay-after-delete spaces deletions
    "scale-down-delay-after-delete: How long after node deletion that scale down evaluation resumes"
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-delay-after-delete=10m"
    And a deployment "small" of 3 pods requesting 300m CPU
    # The delay counts from the start of the first deletion; the node goes when its drain
    # ends, which with upstream's real-time drain polling can take minutes of scenario time.
    Then the node group "pool" reaches 2 nodes within 5 minutes
    When 4 minutes pass
    Then the node group "pool" has 2 nodes
    And the node group "pool" reaches 1 node within 10 minutes

  @binary
  @extension
  # Faults are injected through the kwok provider's templates.
  @kwok-only
  Scenario: --scale-down-delay-after-failure holds a group's scale-down back after a failed deletion
    "scale-down-delay-after-failure: How long after scale down failure that scale down evaluation resumes"
    With --scale-down-delay-type-local the delays are kept per node group, and a failed deletion by the
    cloud provider starts this one.
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-delay-type-local=true --scale-down-delay-after-failure=8m"
    And the cloud provider refuses to delete nodes of "pool"
    When 2 minutes pass
    Then a node of "pool" gets a "ScaleDownFailed" event
    When the faults of "pool" are cleared
    Then the node group "pool" keeps 2 nodes for 5 minutes
    And the node group "pool" reaches 0 nodes within 5 minutes

  Scenario: The scale-down-disabled annotation keeps a node
    "node will be excluded from scale-down if it has the annotation preventing scale-down:
    cluster-autoscaler.kubernetes.io/scale-down-disabled: true"
    Given the node group "pool" starts with 2 nodes
    And the nodes of "pool" are annotated "cluster-autoscaler.kubernetes.io/scale-down-disabled=true"
    Then the node group "pool" keeps 2 nodes for 15 minutes
    And the autoscaler keeps a node of "pool" because of "ScaleDownDisabledAnnotation"

  Scenario: The FAQ's A, B, C, X, Y example: C goes right after A, B does not
    "Nodes A, B, C, X, Y. A, B, C are below utilization threshold. In simulation, pods from A fit on X,
    pods from B fit on X, and pods from C fit on Y. ... C can be terminated immediately after A, but B may not."
    # X and Y have 1.3 CPU left. The pods of A and B (1.2 CPU each, one per node) may run on A, B
    # or X, the pod of C on C or Y. Once A's pod has moved to X, B's pod has nowhere to go.
    Given a node group "x" of nodes with 4 CPU and 16Gi memory, min 1 and max 1
    And a node group "y" of nodes with 4 CPU and 16Gi memory, min 1 and max 1
    And a node group "ab" of nodes with 4 CPU and 16Gi memory, min 0 and max 2
    And the node group "ab" starts with 2 nodes
    And a node group "c" of nodes with 4 CPU and 16Gi memory, min 0 and max 1
    And the node group "c" starts with 1 node
    And the nodes of "x" are labeled "tier=ab"
    And the nodes of "ab" are labeled "tier=ab"
    And the nodes of "y" are labeled "tier=c"
    And the nodes of "c" are labeled "tier=c"
    And a deployment "x-load" of 1 pod requesting 2600m CPU on node group "x"
    And a deployment "y-load" of 1 pod requesting 2600m CPU on node group "y"
    And a deployment "ab-pods" of 2 pods requesting 1200m CPU on nodes labeled "tier=ab" with pod anti-affinity
    And a deployment "c-pod" of 1 pod requesting 1200m CPU on nodes labeled "tier=c"
    Then all 2 pods of "ab-pods" are running within 1 minute
    When 30 minutes pass
    Then the node group "c" has 0 nodes
    And the node group "ab" has 1 node
    And the autoscaler keeps a node of "ab" because of "NoPlaceToMovePods"

  Scenario: Without a batcher interval each node is deleted as soon as it is tainted
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --node-delete-delay-after-taint=0s"
    Then a node of "pool" gets the taint "ToBeDeletedByClusterAutoscaler" within 15 minutes
    And the node group "pool" reaches 0 nodes within 1 minute

  Scenario: With --node-deletion-batcher-interval a group's nodes are deleted together, one interval after the first
    "node-deletion-batcher-interval: How long CA ScaleDown gather nodes to delete them in batch."
    The nodes of one group that reach the deletion step are gathered and deleted with one DeleteNodes call
    made one interval after the first of them; until then they stay, tainted.
    Given the node group "pool" starts with 3 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --node-delete-delay-after-taint=0s --node-deletion-batcher-interval=3m"
    Then a node of "pool" gets the taint "ToBeDeletedByClusterAutoscaler" within 15 minutes
    And the node group "pool" keeps 3 nodes for 2 minutes
    And the node group "pool" reaches 0 nodes within 2 minutes

  @ca>=1.35
  Scenario: With --node-removal-latency-tracking-enabled the time a node waited past its unneeded time is measured
    "node_removal_latency_seconds: Latency from when an unneeded node is eligible for scale down until it is
    removed (deleted=true) or it became needed again (deleted=false)."
    Given the node group "pool" starts with 1 node
    And the autoscaler runs with "--scale-down-unneeded-time=1m --node-removal-latency-tracking-enabled"
    Then the node group "pool" reaches 0 nodes within 15 minutes
    And the autoscaler's metrics show "cluster_autoscaler_node_removal_latency_seconds_count{deleted="true"} 1"

  @ca>=1.37
  Scenario: The removal latency names what delayed a node: here its group's min size, until it was needed again
    "The 'delay_reason' label indicates the technical bottleneck that delayed the scale-down ('none' if not
    delayed)." Of two unneeded nodes of a group of min 1, one goes at once; the other waits on the min size
    until a pod needs it.
    Given a node group "small" of nodes with 4 CPU and 16Gi memory, min 1 and max 3
    And the node group "small" starts with 2 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --node-removal-latency-tracking-enabled"
    Then the node group "small" reaches 1 node within 15 minutes
    And the autoscaler's metrics show "cluster_autoscaler_node_removal_latency_seconds_count{deleted="true",delay_reason="none"} 1"
    When 3 minutes pass
    And a deployment "web" of 1 pod requesting 3 CPU on node group "small" is created
    Then all 1 pods of "web" are running within 3 minutes
    And the autoscaler's metrics show "cluster_autoscaler_node_removal_latency_seconds_count{deleted="false",delay_reason="NodeGroupMinSizeReached"} 1"
    And the node group "small" has 1 node

  @ca>=1.36
  Scenario: A node running a safe-to-evict "on-completion" pod waits, untainted, until the pod completes
    'cluster-autoscaler.kubernetes.io/safe-to-evict: "on-completion"' (CA 1.36): the pod is not evicted.
    Its node counts as unneeded but is not deleted, tainted or cordoned while the pod runs ("Node ... has
    active on-completion pods, delaying scale down"); once the pod has completed the node goes.
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m"
    And a bare pod "batch" requesting 100m CPU annotated "cluster-autoscaler.kubernetes.io/safe-to-evict=on-completion"
    Then the node group "pool" reaches 1 node within 15 minutes
    And the node group "pool" keeps 1 node for 10 minutes
    And no node of "pool" has the taint "ToBeDeletedByClusterAutoscaler"
    And a node of "pool" gets no "ScaleDownFailed" event
    When the pod "batch" completes
    Then the node group "pool" reaches 0 nodes within 5 minutes

  @ca>=1.35
  Scenario: With --max-node-skip-eval-time-tracker-enabled the time a skipped candidate waited for evaluation is measured
    "max_node_skip_eval_duration_seconds: Maximum evaluation time of a node being skipped during ScaleDown."
    A spent --scale-down-simulation-timeout skips every candidate's removal simulation: the longest time since
    one was evaluated grows loop after loop, and the node is never found unneeded.
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --scale-down-simulation-timeout=1ns --max-node-skip-eval-time-tracker-enabled"
    Then the autoscaler's metric "cluster_autoscaler_max_node_skip_eval_duration_seconds" reaches 120 seconds within 5 minutes
    And the node group "pool" has 2 nodes

  Scenario: With --dynamic-node-delete-delay-after-taint-enabled the wait after the taint is measured
    "dynamic-node-delete-delay-after-taint-enabled: Enables dynamic adjustment of NodeDeleteDelayAfterTaint
    based of the latency between CA and api-server." Twice the time the taint took to show in the autoscaler's
    watch (milliseconds here) replaces the 5 minutes of --node-delete-delay-after-taint.
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --node-delete-delay-after-taint=5m --dynamic-node-delete-delay-after-taint-enabled"
    Then the node group "pool" reaches 0 nodes within 3 minutes

  Scenario: Without --dynamic-node-delete-delay-after-taint-enabled a tainted node waits --node-delete-delay-after-taint
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=1m --node-delete-delay-after-taint=5m"
    Then a node of "pool" gets the taint "ToBeDeletedByClusterAutoscaler" within 3 minutes
    And the node group "pool" keeps 2 nodes for 4 minutes
    And the node group "pool" reaches 0 nodes within 3 minutes

  @ca>=1.34
  Scenario: With --node-deletion-candidate-ttl a restarted autoscaler takes a node's unneeded time from its soft taint
    "node-deletion-candidate-ttl: Maximum time a node can be marked as removable before the marking becomes stale.
    This sets the TTL of Cluster-Autoscaler's state if the Cluste-Autoscaler deployment becomes inactive." The
    autoscaler marks an unneeded node with the DeletionCandidateOfClusterAutoscaler soft taint, valued the time it
    became unneeded; restarted 9 minutes later, it deletes the node a minute after, not 10.
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "--node-deletion-candidate-ttl=30m"
    When 9 minutes pass
    And the autoscaler restarts
    Then the node group "pool" reaches 0 nodes within 2 minutes

  @ca>=1.34
  Scenario Outline: Without --node-deletion-candidate-ttl, or past it, a restarted autoscaler counts a node's unneeded time afresh
    Given the node group "pool" starts with 2 nodes
    And the autoscaler runs with "<flags>"
    When 9 minutes pass
    And the autoscaler restarts
    Then the node group "pool" keeps 2 nodes for 8 minutes
    And the node group "pool" reaches 0 nodes within 3 minutes

    Examples:
      | flags                           |
      | --scan-interval=10s             |
      | --node-deletion-candidate-ttl=5m |
