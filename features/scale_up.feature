Feature: Scale-up
  "Cluster Autoscaler increases the size of the cluster when there are pods that failed to
  schedule on any of the current nodes due to insufficient resources."

  Background:
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 10

  @binary
  Scenario: Pending pods get exactly the nodes they need
    # 3.9 CPU are left on a new node (kube-proxy takes 100m): 4 pods of 900m per node.
    Given a deployment "web" of 10 pods requesting 900m CPU
    Then all 10 pods of "web" are running within 5 minutes
    And the node group "pool" has 3 nodes
    And the pods of "web" get a "TriggeredScaleUp" event saying "pod triggered scale-up: [{pool 0->3 (max: 10)}]"

  @binary
  Scenario: A pod too large for every node group does not trigger a scale-up
    "Cluster Autoscaler ... checks if any of the unschedulable pods would fit on a new node."
    Given a deployment "huge" of 1 pod requesting 8 CPU
    When 5 minutes pass
    Then the node group "pool" has 0 nodes
    And the pods of "huge" get a "NotTriggerScaleUp" event saying "pod didn't trigger scale-up: 1 Insufficient cpu"

  @binary
  Scenario: Pods in a namespace of their own get nodes too
    # The suite creates a namespace that a step names.
    Given a deployment "team" of 5 pods requesting 1 CPU in namespace "fresh-ns"
    Then all 5 pods of "team" are running within 5 minutes
    And the node group "pool" has 2 nodes
    And the pods of "team" get a "TriggeredScaleUp" event saying "pod triggered scale-up: [{pool 0->2 (max: 10)}]"

  Scenario: A node group never grows above its max size
    Given a node group "small" of nodes with 4 CPU and 16Gi memory, min 0 and max 2
    And a deployment "pinned" of 12 pods requesting 900m CPU on node group "small"
    When 5 minutes pass
    Then the node group "small" has 2 nodes
    And the pods of "pinned" get a "NotTriggerScaleUp" event saying "pod didn't trigger scale-up: 1 max node group size reached, 1 node(s) didn't match Pod's node affinity/selector"

  Scenario: A nodeSelector picks the matching node group only
    "Does CA respect node affinity when selecting node groups to scale up?"
    Given a node group "other" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And a deployment "pinned" of 2 pods requesting 1 CPU on node group "other"
    Then all 2 pods of "pinned" are running within 5 minutes
    And the node group "other" has 1 node
    And the node group "pool" has 0 nodes

  Scenario: Required node affinity picks the matching node group only
    Given a node group "other" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And a deployment "pinned" of 5 pods requesting 1 CPU requiring node group "other"
    Then all 5 pods of "pinned" are running within 5 minutes
    And the node group "other" has 2 nodes
    And the node group "pool" has 0 nodes

  Scenario: Pods asking for the same host port get a node each
    "Cluster Autoscaler creates template nodes for each of the node groups and checks if any of the
    unschedulable pods would fit on a new node."
    Given a deployment "agent" of 3 pods requesting 100m CPU with host port 8080
    Then all 3 pods of "agent" are running within 5 minutes
    And the node group "pool" has 3 nodes

  Scenario: Pods with anti-affinity to each other get a node each
    Given a deployment "spread" of 4 pods requesting 100m CPU with pod anti-affinity
    Then all 4 pods of "spread" are running within 5 minutes
    And the node group "pool" has 4 nodes

  Scenario: --max-nodes-total caps the cluster
    "max-nodes-total: Maximum number of nodes in all node groups. Cluster autoscaler will not grow
    the cluster beyond this number."
    Given the autoscaler runs with "--max-nodes-total=2"
    And a deployment "web" of 20 pods requesting 1 CPU
    When 5 minutes pass
    Then the node group "pool" has 2 nodes
    And 12 pods of "web" stay pending for 5 minutes

  Scenario: --cores-total caps the cluster's CPU
    "cores-total: Minimum and maximum number of cores in cluster, in the format <min>:<max>."
    Given the autoscaler runs with "--cores-total=0:12"
    And a deployment "web" of 20 pods requesting 1 CPU
    When 5 minutes pass
    Then the node group "pool" has 3 nodes

  Scenario: --memory-total caps the cluster's memory
    "memory-total: Minimum and maximum number of gigabytes of memory in cluster, in the format <min>:<max>."
    Given the autoscaler runs with "--memory-total=0:32"
    And a deployment "web" of 20 pods requesting 1 CPU
    When 5 minutes pass
    Then the node group "pool" has 2 nodes

  Scenario: --new-pod-scale-up-delay holds young pods back
    "new-pod-scale-up-delay: Pods less than this old will not be considered for scale-up."
    Given the autoscaler runs with "--new-pod-scale-up-delay=3m"
    When a deployment "web" of 2 pods requesting 1 CPU is created
    And 2 minutes pass
    Then the node group "pool" has 0 nodes
    And the node group "pool" reaches 1 node within 2 minutes

  Scenario: The pod-scale-up-delay annotation holds a pod back
    "This setting can be overridden per pod through cluster-autoscaler.kubernetes.io/pod-scale-up-delay
    annotation."
    When a deployment "web" of 2 pods requesting 1 CPU with a pod-scale-up-delay of 3 minutes is created
    And 2 minutes pass
    Then the node group "pool" has 0 nodes
    And the node group "pool" reaches 1 node within 2 minutes

  Scenario: Pods requesting GPUs wait 30 seconds for more before a scale-up
    # Upstream's unschedulablePodWithGpuTimeBuffer (core/static_autoscaler.go): "nodes with GPU are very
    # expensive and we're ready to sacrifice a bit more latency to wait for more pods and make a more
    # informed scale-up decision". The wait runs from the oldest pending GPU pod's creation. It is not a
    # flag, so in binary mode it stays 30 real seconds: 30 scenario minutes at the default time scale.
    Given a node group "gpu" of nodes with 8 CPU and 32Gi memory, min 0 and max 3
    And the nodes of "gpu" have 1 "nvidia.com/gpu"
    When a deployment "train" of 2 pods requesting 1 CPU and 1 "nvidia.com/gpu" is created
    And 25 seconds pass
    Then the node group "gpu" has 0 nodes
    And the node group "gpu" reaches 2 nodes within 20 minutes

  @ca>=1.35
  Scenario: Pods requesting another vendor's GPU wait the same 30 seconds
    # CA 1.35 made its GPU rules vendor-neutral (utils/gpu's GPUVendorResourceNames): a pod requesting
    # amd.com/gpu, gpu.intel.com/xe, habana.ai/gaudi or microsoft.com/directx is a GPU pod too.
    Given a node group "gpu" of nodes with 8 CPU and 32Gi memory, min 0 and max 3
    And the nodes of "gpu" have 1 "amd.com/gpu"
    When a deployment "train" of 2 pods requesting 1 CPU and 1 "amd.com/gpu" is created
    And 25 seconds pass
    Then the node group "gpu" has 0 nodes
    And the node group "gpu" reaches 2 nodes within 20 minutes

  @extension @not-aws
  Scenario: With frequent loops, a burst of new pods gets its nodes without upstream's 2-second wait
    # Upstream skips scale-up while every pending pod is under 2 s old ("Unschedulable pods are very new,
    # waiting one iteration for more"). Ours, with --frequent-loops-enabled, starts a loop for each new
    # unschedulable pod, so it does not wait (README: the timings that differ from upstream).
    Given the autoscaler runs with frequent loops, without upstream's wait for very new pods
    When a deployment "web" of 10 pods requesting 900m CPU is created
    Then all 10 pods of "web" are running within 5 minutes
    And every pod of "web" got a new node within 1 second of being marked unschedulable

  Scenario: Pods of a bypassed scheduler that won't fit trigger a scale-up
    "bypassed-scheduler-names: Names of schedulers to bypass. If set to non-empty value, CA will not wait
    for pods to reach a certain age before triggering a scale-up."
    Given the node group "pool" starts with 1 node
    And the autoscaler runs with "--bypassed-scheduler-names=non-existing-bypassed-scheduler"
    And a deployment "unprocessed" of 4 pods requesting 2800m CPU with scheduler "non-existing-bypassed-scheduler"
    # One pod fits on the existing node; the others need a node each.
    Then the node group "pool" reaches 4 nodes within 5 minutes

  Scenario: A pod of a bypassed scheduler that would fit does not trigger a scale-up
    Given the node group "pool" starts with 1 node
    And the autoscaler runs with "--bypassed-scheduler-names=non-existing-bypassed-scheduler"
    And a deployment "unprocessed" of 1 pod requesting 2 CPU with scheduler "non-existing-bypassed-scheduler"
    Then the node group "pool" keeps 1 node for 5 minutes

  Scenario: Pods of a scheduler that is not bypassed are left alone
    Given the node group "pool" starts with 1 node
    And a deployment "other" of 4 pods requesting 2800m CPU with scheduler "some-other-scheduler"
    Then the node group "pool" keeps 1 node for 5 minutes

  @ca>=1.36
  Scenario: With --salvo-scale-up one loop scales up every group the pending pods need
    "salvo-scale-up: Whether to allow multiple scale-ups in a single CA loop."
    After each scale-up the pods it helped are placed on its new nodes in the loop's snapshot and the next
    scale-up plans for the pods left. A 5-minute scan interval, without frequent loops, makes each loop count:
    the next loop comes 5 minutes after the one that scaled both.
    Given a node group "other" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And the autoscaler runs with "--salvo-scale-up --frequent-loops-enabled=false --scan-interval=5m"
    When a deployment "web" of 3 pods requesting 3 CPU on node group "pool" is created
    And a deployment "api" of 3 pods requesting 3 CPU on node group "other" is created
    Then the node group "pool" reaches 3 nodes within 6 minutes
    And the node group "other" reaches 3 nodes within 1 minute

  @ca>=1.36
  Scenario: Without --salvo-scale-up, or with its budget spent, a loop scales up one group
    "salvo-scale-up-budget: Maximum time CA spends on subsequent scale ups in a single CA loop."
    The budget is checked after each scale-up: a budget of 0s leaves one scale-up per loop, as without salvo.
    Given a node group "other" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And the autoscaler runs with "--salvo-scale-up --salvo-scale-up-budget=0s --frequent-loops-enabled=false --scan-interval=5m"
    When a deployment "web" of 3 pods requesting 3 CPU on node group "pool" is created
    And a deployment "api" of 3 pods requesting 3 CPU on node group "other" is created
    And 6 minutes pass
    Then one of the node groups "pool" and "other" has 3 nodes and the others 0

  @ca>=1.36
  Scenario: With --scaleup-simulation-for-skipped-node-groups-enabled a skipped group the pod could never use says why
    "scaleup-simulation-for-skipped-node-groups-enabled: Whether to enable the scale up simulation for skipped
    node groups." Without it a group at its max size counts as "max node group size reached" for every pod.
    Given a node group "small" of nodes with 4 CPU and 16Gi memory, min 0 and max 1
    And the node group "small" starts with 1 node
    And the autoscaler runs with "--scaleup-simulation-for-skipped-node-groups-enabled"
    And a deployment "elsewhere" of 1 pod requesting 1 CPU on nodes labeled "team=none"
    When 2 minutes pass
    Then the pods of "elsewhere" get a "NotTriggerScaleUp" event saying "pod didn't trigger scale-up: 2 node(s) didn't match Pod's node affinity/selector"

  @ca>=1.37
  Scenario: The skipped groups' simulation is timed as a function of the loop
    CA 1.37 times the simulation for skipped node groups under the function label
    "scaleUp:skippedNodeGroupsSimulation" of cluster_autoscaler_function_duration_seconds.
    Given a node group "small" of nodes with 4 CPU and 16Gi memory, min 0 and max 1
    And the node group "small" starts with 1 node
    And the autoscaler runs with "--scaleup-simulation-for-skipped-node-groups-enabled"
    And a deployment "elsewhere" of 1 pod requesting 1 CPU on nodes labeled "team=none"
    When 2 minutes pass
    Then the autoscaler's metrics show "cluster_autoscaler_function_duration_seconds_count{function="scaleUp:skippedNodeGroupsSimulation"}"

  @ca>=1.31
  Scenario: With --enable-proactive-scaleup the replicas a quota holds back get their nodes with the pods that exist
    "enable-proactive-scaleup: Whether to enable/disable proactive scale-ups." A ResourceQuota of 2 pods lets
    the ReplicaSet create 2 of its 10 pods: the autoscaler adds fake copies of the newest pod for the 8
    missing, so the scale-up makes room for all 10.
    Given a resource quota "two-pods" allowing 2 pods
    And the autoscaler runs with "--enable-proactive-scaleup"
    When a deployment "web" of 10 pods requesting 3 CPU on node group "pool" is created
    Then the node group "pool" reaches 10 nodes within 3 minutes

  @ca>=1.32
  Scenario: Proactive scale-up's fake pods get no events, and --pod-injection-limit caps how many join a loop
    "pod-injection-limit: Limits total number of pods while injecting fake pods." 2 real and 8 fake pods
    against a limit of 5: 5 fake pods are left out of the first scale-up, which the real pods' event names;
    the fake pods left out join the next loops. (1.31 replaced the eventing processor: no events at all.)
    Given a resource quota "two-pods" allowing 2 pods
    And the autoscaler runs with "--enable-proactive-scaleup --pod-injection-limit=5"
    When a deployment "web" of 10 pods requesting 3 CPU on node group "pool" is created
    Then the node group "pool" reaches 10 nodes within 5 minutes
    And the pods of "web" get a "TriggeredScaleUp" event saying "pod triggered scale-up: [{pool 0->5 (max: 10)}]"

  Scenario: Without --enable-proactive-scaleup only the pods that exist get nodes
    Given a resource quota "two-pods" allowing 2 pods
    When a deployment "web" of 10 pods requesting 3 CPU on node group "pool" is created
    Then the node group "pool" reaches 2 nodes within 3 minutes
    And the node group "pool" keeps 2 nodes for 5 minutes

  @ca>=1.36
  Scenario Outline: --fastpath-binpacking-enabled packs last the pod group it saves the most simulations on
    "fastpath-binpacking-enabled: Whether to use fastpath binpacking algorithm to optimize scale-ups." Fast path
    fully simulates one node for that group and counts the others, so the estimate can differ: 4 pods of 2.9
    CPU and 4 of 1 CPU on 4-CPU nodes (3.9 CPU free: kube-proxy takes 100m) fill 4 nodes packed largest
    first; packed small first, as fast path orders them, 5.
    Given the autoscaler runs with "<flags>"
    When a deployment "big" of 4 pods requesting 2900m CPU on node group "pool" is created
    And a deployment "small" of 4 pods requesting 1 CPU on node group "pool" is created
    Then the node group "pool" reaches <nodes> nodes within 3 minutes
    And the pods of "big" get a "TriggeredScaleUp" event saying "pod triggered scale-up: [{pool 0-><nodes> (max: 10)}]"

    Examples:
      | flags                          | nodes |
      | --fastpath-binpacking-enabled  | 5     |
      | --scan-interval=10s            | 4     |

  Scenario: With --scheduler-config-file the simulation runs the profile's filter plugins only
    "scheduler-config-file: scheduler-config allows changing configuration of in-tree scheduler plugins acting on
    PreFilter and Filter extension points." A profile without NodeResourcesFit makes the autoscaler believe a pod
    too large for the free room of the existing node fits there: no scale-up, while the scheduler leaves it pending.
    Given the node group "pool" starts with 1 node
    And a deployment "filler" of 1 pod requesting 3 CPU
    And the autoscaler runs with the scheduler configuration:
      """
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: KubeSchedulerConfiguration
      profiles:
      - schedulerName: default-scheduler
        plugins:
          filter:
            disabled:
            - name: NodeResourcesFit
      """
    Then all 1 pods of "filler" are running within 2 minutes
    When a deployment "web" of 1 pod requesting 2 CPU is created
    Then 1 pod of "web" stays pending for 5 minutes
    And the node group "pool" has 1 node

  Scenario: A node's CSI volume limit keeps pods with volumes off it, in the scheduler and in the simulation
    A node whose CSI driver attaches at most 2 volumes takes 2 of the pods that each claim a volume; the
    autoscaler's simulation counts the volumes on real nodes too (upstream's NodeVolumeLimits reads the live
    CSINodes whatever the flags), so the other 2 pods get a new node.
    Given the node group "pool" starts with 1 node
    And every node runs the CSI driver "ebs.csi.aws.com" attaching at most 2 volumes
    And a storage class "ebs" provisioned by "ebs.csi.aws.com"
    When 4 pods "db" requesting 100m CPU, each with a volume of class "ebs", are created
    Then all 4 pods of "db" are running within 5 minutes
    And the node group "pool" has 2 nodes

  @ca>=1.36
  Scenario Outline: --enable-csi-node-aware-scheduling gives template nodes the CSI volume limits of the group's nodes
    "enable-csi-node-aware-scheduling: Whether logic for handling CSINode objects is enabled." With it, a template
    node built from a node of the group (ready for over a minute, else the provider's template is used) keeps that
    node's CSINode: 4 pending pods with a volume each need 2 nodes that attach 2 volumes each. Without it template nodes have no volume limit, one new node looks enough, and the
    pods the scheduler then leaves pending wait for the next scale-up.
    Given the node group "pool" starts with 1 node
    And every node runs the CSI driver "ebs.csi.aws.com" attaching at most 2 volumes
    And a storage class "ebs" provisioned by "ebs.csi.aws.com"
    And the autoscaler runs with "--scale-down-enabled=false <flags>"
    When the nodes of "pool" have been ready long enough to be its template
    And 6 pods "db" requesting 100m CPU, each with a volume of class "ebs", are created
    Then all 6 pods of "db" are running within 10 minutes
    And the pods of "db" get a "TriggeredScaleUp" event saying "pod triggered scale-up: [{pool 1-><nodes> (max: 10)}]"

    Examples:
      | flags                               | nodes |
      | --enable-csi-node-aware-scheduling  | 3     |
      | --scan-interval=10s                 | 2     |

  @ca>=1.36
  Scenario: With --enable-csi-node-aware-scheduling a node without a CSINode fails every loop
    Upstream builds the loop's snapshot with every node's CSINode and fails the loop ("failed to initialize
    ClusterSnapshot: couldn't obtain csi node") when one is missing, as for a kwok node no kubelet registered.
    Given the node group "pool" starts with 1 node
    And the autoscaler runs with "--enable-csi-node-aware-scheduling"
    When a deployment "web" of 6 pods requesting 1 CPU is created
    Then the node group "pool" keeps 1 node for 5 minutes
    And the autoscaler's metrics show "cluster_autoscaler_errors_total{type="internalError"}"

  @ca>=1.37
  Scenario: Past --pending-pods-batching-timeout the pods not reached wait, and the status ConfigMap says so
    "--enable-graceful-degradation: When enabled, scheduling simulations during filter out pod list processor
    will be stopped after a timeout ... and CA will proceed with a sub set of pods." A zero timeout reaches no pod.
    Given the autoscaler runs with "--enable-graceful-degradation --pending-pods-batching-timeout=0s"
    When a deployment "web" of 5 pods requesting 1 CPU is created
    Then the node group "pool" keeps 0 nodes for 3 minutes
    And the status ConfigMap gets a "GracefulDegradationStarted" event saying "Autoscaler is unable to handle the large amount of unschedulable pods. Consider reducing the rate of adding new pods, so autoscaler could auto recover."
    And the autoscaler's metrics show "cluster_autoscaler_skipped_pods_count{requestor="filter-out-pod-list-processor"} 5"
    When the deployment "web" is scaled to 0 pods
    And 1 minute passes
    Then the status ConfigMap gets a "GracefulDegradationStopped" event saying "Autoscaler exited from GracefulDegradationMode and works normally."
    And the autoscaler's metrics show "cluster_autoscaler_skipped_pods_count{requestor="filter-out-pod-list-processor"} 0"

  @ca>=1.37
  Scenario: With graceful degradation on and time to reach every pod, pending pods get their nodes
    Given the autoscaler runs with "--enable-graceful-degradation"
    When a deployment "web" of 5 pods requesting 1 CPU is created
    Then all 5 pods of "web" are running within 5 minutes
    And the autoscaler's metrics show "cluster_autoscaler_skipped_pods_count{requestor="filter-out-pod-list-processor"} 0"

  @ca>=1.37
  Scenario: While degraded, scale-down still runs every fourth loop
    "When GracefulDegradationMode is active, autoscaler does scale down only on every 4th ... loop."
    Given the node group "pool" starts with 1 node
    And the autoscaler runs with "--enable-graceful-degradation --pending-pods-batching-timeout=0s --scale-down-unneeded-time=1m"
    When a deployment "huge" of 1 pod requesting 16 CPU is created
    Then the node group "pool" reaches 0 nodes within 10 minutes
    And the status ConfigMap gets a "GracefulDegradationStarted" event
