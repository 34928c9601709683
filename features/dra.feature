@ca>=1.35
Feature: Dynamic resource allocation
  "Cluster Autoscaler supports DRA ... pods that request devices via ResourceClaims can trigger scale-up,
  and nodes with devices allocated to running pods are considered for scale-down" (docs/dra_support.md).
  Since 1.35 --enable-dynamic-resource-allocation is locked on: the simulation allocates the pods'
  ResourceClaims from the devices of the nodes' ResourceSlices, and a template node has the slices of the
  node it was made from. The devices here are published by kwok's fake DRA driver; no upstream release
  that builds here (1.29 to 1.31) has DRA on.

  Background:
    Given a node group "cpu" of nodes with 8 CPU and 32Gi memory, min 0 and max 5
    And a node group "gpu" of nodes with 4 CPU and 16Gi memory, min 0 and max 5
    And the nodes of "gpu" have 2 devices of the driver "gpu.example.com" of model "a100"
    And a device class "gpu" for the driver "gpu.example.com"

  Scenario: Pods asking for a GPU through a claim template scale up the group whose nodes have the device
    The node of "gpu" takes two of the four pods; the other two fit a new node of "gpu" only: the template
    made from the group's node has its two devices. The bigger "cpu" nodes have none. The scale-up is
    counted with the template's drivers, those upstream does not name being "custom.driver".
    Given the node group "gpu" starts with 1 node
    And the autoscaler runs with "--scale-down-enabled=false"
    When the nodes of "gpu" have been ready long enough to be its template
    And a deployment "train" of 4 pods requesting 1 CPU with a claim for 1 "gpu" device is created
    Then all 4 pods of "train" are running within 10 minutes
    And the node group "gpu" has 2 nodes
    And the node group "cpu" has 0 nodes
    And the claims of the pods of "train" are allocated on nodes of "gpu"
    And the pods of "train" get a "TriggeredScaleUp" event saying "pod triggered scale-up: [{gpu 1->2 (max: 5)}]"
    And the autoscaler's metrics show "cluster_autoscaler_scaled_up_nodes_total{dra_drivers="custom.driver"} 1"

  @binary @extension @kwok-only
  Scenario: The kwok provider's template declares its devices, and the group scales from zero
    The kwok provider's templates ConfigMap carries the devices annotation its nodes will publish; upstream's
    kwok provider builds templates without slices and cannot scale a DRA group from zero.
    Then the kwok template of "gpu" declares 2 devices of the driver "gpu.example.com"
    When a deployment "train" of 3 pods requesting 1 CPU with a claim for 1 "gpu" device is created
    Then all 3 pods of "train" are running within 10 minutes
    And the node group "gpu" has 2 nodes
    And the claims of the pods of "train" are allocated on nodes of "gpu"

  Scenario: Each group with devices is weighed on its own devices, and the best fit wins
    The simulation allocates the pods' claims on each group's template copies and takes the allocations back
    before the next group: "snug" (2 CPU, two devices) wastes less than "gpu" (4 CPU, two devices) and the
    least-waste expander picks it.
    Given a node group "snug" of nodes with 2 CPU and 4Gi memory, min 0 and max 5
    And the nodes of "snug" have 2 devices of the driver "gpu.example.com" of model "a100"
    And the node group "gpu" starts with 1 node
    And the node group "snug" starts with 1 node
    And the autoscaler runs with "--scale-down-enabled=false"
    When the nodes of "snug" have been ready long enough to be its template
    And a deployment "train" of 8 pods requesting 900m CPU with a claim for 1 "gpu" device is created
    Then all 8 pods of "train" are running within 10 minutes
    And the node group "snug" has 3 nodes
    And the node group "gpu" has 1 node
    And the pods of "train" get a "TriggeredScaleUp" event saying "pod triggered scale-up: [{snug 1->3 (max: 5)}]"

  Scenario: Pods that share one claim go together to the node that has its device
    A claim shared by three pods is allocated once: the three pods need one node with a free device, and all
    land on it.
    Given the node group "gpu" starts with 1 node
    And a claim "shared" for 1 "gpu" device
    And the autoscaler runs with "--scale-down-enabled=false"
    When the nodes of "gpu" have been ready long enough to be its template
    And a deployment "hog" of 2 pods requesting 100m CPU with a claim for 1 "gpu" device is created
    Then all 2 pods of "hog" are running within 5 minutes
    When a deployment "pair" of 3 pods requesting 1 CPU sharing the claim "shared" is created
    Then all 3 pods of "pair" are running within 10 minutes
    And the node group "gpu" has 2 nodes
    And the claims of the pods of "pair" are allocated on nodes of "gpu"

  Scenario: A pod whose claim no node can meet triggers no scale-up, and says why
    Each node of "gpu" has two devices; four fit no node, existing or new.
    Given the node group "gpu" starts with 1 node
    And the autoscaler runs with "--scale-down-enabled=false"
    When the nodes of "gpu" have been ready long enough to be its template
    And a deployment "big" of 1 pod requesting 1 CPU with a claim for 4 "gpu" devices is created
    Then 1 pod of "big" stays pending for 5 minutes
    And the node group "gpu" has 1 node
    And the node group "cpu" has 0 nodes
    And the pods of "big" get a "NotTriggerScaleUp" event saying "pod didn't trigger scale-up: 2 cannot allocate all claims"

  @binary
  Scenario: An idle device node goes, a node whose devices are in use stays
    "nodes with devices allocated to running pods are considered for scale-down" by their devices: a node
    with ResourceSlices is as utilized as its busiest pool, whatever its CPU.
    Given the node group "gpu" starts with 2 nodes
    And the autoscaler runs with "--scale-down-unneeded-time=2m --scale-down-delay-after-add=0s"
    And a deployment "train" of 1 pod requesting 100m CPU with a claim for 2 "gpu" devices
    Then all 1 pod of "train" is running within 5 minutes
    And the node group "gpu" reaches 1 node within 15 minutes
    And the node group "gpu" keeps 1 node for 10 minutes
    And the claims of the pods of "train" are allocated on nodes of "gpu"
    And the autoscaler keeps a node of "gpu" because of "NotUnderutilized"

  Scenario: A claim naming a device class that does not exist triggers no scale-up
    Given the node group "gpu" starts with 1 node
    When a deployment "lost" of 1 pod requesting 1 CPU with a claim for 1 "tpu" device is created
    Then 1 pod of "lost" stays pending for 5 minutes
    And the node group "gpu" has 1 node
    And the node group "cpu" has 0 nodes
    And the pods of "lost" get a "NotTriggerScaleUp" event containing "request devices: device class tpu does not exist"

  Scenario: A selector that fails on the devices is the scheduler's error, and triggers no scale-up
    A selector reading an attribute the devices do not have fails when it runs ("no such key"). kube-scheduler
    gives the attempt up with an error: the pod's condition says SchedulerError, not Unschedulable, and the
    autoscaler, which helps Unschedulable pods only, leaves it alone.
    Given the node group "gpu" starts with 1 node
    And a claim template "odd" for 1 "gpu" device selecting device.attributes["gpu.example.com"].vendor == "acme"
    And the autoscaler runs with "--scale-down-enabled=false"
    When the nodes of "gpu" have been ready long enough to be its template
    And a deployment "odd" of 1 pod requesting 1 CPU with the claim template "odd" is created
    Then 1 pod of "odd" stays pending for 5 minutes
    And the node group "gpu" has 1 node
    And the pods of "odd" get a "FailedScheduling" event containing "running "DynamicResources" filter plugin: claim default/odd-"
    And the pods of "odd" get a "FailedScheduling" event containing "selector #0: CEL runtime error: no such key: vendor"
    And the pods of "odd" get no "NotTriggerScaleUp" event

  @binary
  Scenario: A claim template whose selector does not compile is refused, and its pods wait without a scale-up
    kube-apiserver compiles a new selector and refuses one that does not compile. A pod asking for a claim
    from the missing template gets a FailedResourceClaimCreation warning; kube-scheduler does not try it
    (PreEnqueue: its claim does not exist), so it is never marked unschedulable and the autoscaler leaves it.
    Given the node group "gpu" starts with 1 node
    Then the API server refuses a claim template "bad" for 1 "gpu" device, saying "compilation failed: ERROR: <input>:1:", selecting device.driver ==
    When a deployment "bad" of 1 pod requesting 1 CPU with the claim template "bad" is created
    Then 1 pod of "bad" stays pending for 5 minutes
    And the pods of "bad" get a "FailedResourceClaimCreation" event containing "resourceclaimtemplate.resource.k8s.io \"bad\" not found"
    And the pods of "bad" get no "NotTriggerScaleUp" event
    And the node group "gpu" has 1 node
    And the node group "cpu" has 0 nodes

  @binary
  Scenario: A MachineDeployment with a DRA driver annotation scales from zero
    "capacity.cluster-autoscaler.kubernetes.io/dra-driver" with "gpu-count" gives the scale-from-zero
    template one slice of that many devices. (1.36.1 counts no slice in its pool, so its devices are never
    allocatable: fixed upstream after it, kubernetes/autoscaler#10200.)
    Given node groups are Cluster API MachineDeployments
    And the MachineDeployment "gpu" gives its capacity in its annotations
    When a deployment "train" of 3 pods requesting 1 CPU with a claim for 1 "gpu" device is created
    Then all 3 pods of "train" are running within 10 minutes
    And the node group "gpu" has 2 nodes
    And the MachineDeployment "gpu" has 2 replicas
    And the claims of the pods of "train" are allocated on nodes of "gpu"

  @binary
  Scenario: A new node is not started until its driver publishes the template's devices, and its pods wait for it
    The DRA readiness rule: a Ready node whose drivers have published fewer complete pools than its group's
    template is unready (resource-not-ready). While the group's startup time lasts it is an upcoming node,
    so the pods waiting for its devices trigger no second scale-up.
    Given node groups are Cluster API MachineDeployments
    And the MachineDeployment "gpu" gives its capacity in its annotations
    And the DRA driver of the nodes of "gpu" publishes their devices 4 minutes after they start
    When a deployment "train" of 2 pods requesting 1 CPU with a claim for 1 "gpu" device is created
    Then the node group "gpu" reaches 1 node within 2 minutes
    And the autoscaler's metrics show "cluster_autoscaler_nodes_count{state="notStarted"} 1"
    And the node group "gpu" keeps 1 node for 2 minutes
    And all 2 pods of "train" are running within 5 minutes
    And the node group "gpu" has 1 node
    And the claims of the pods of "train" are allocated on nodes of "gpu"

  Scenario: A node whose devices differ from its group's template is counted as a mismatch
    Each loop compares the devices of the ready nodes with their group's template, made from one of its
    nodes: a node that publishes one of the template's two devices, or the template made from it, is a
    "mismatch" of the driver.
    Given the node group "gpu" starts with 2 nodes
    And the autoscaler runs with "--scale-down-enabled=false"
    When the nodes of "gpu" have been ready long enough to be its template
    And a node of "gpu" publishes 1 of its devices instead
    Then the autoscaler's metrics show "cluster_autoscaler_dra_node_template_resources_mismatch{driver="gpu.example.com",mismatch_type="mismatch"} 1"
    And the autoscaler's metrics show "cluster_autoscaler_dra_node_template_resources_mismatch{driver="gpu.example.com",mismatch_type="missing"} 0"
