Feature: Cluster API node groups and scale from zero
  Cluster API's proposal "Opt-in Autoscaling from Zero": "the autoscaler will first look for the
  capacity annotations on the MachineSet or MachineDeployment ... If they are not present, it will then
  look for the status.capacity field on the infrastructure machine template." Each node group is a
  MachineDeployment sized by its cluster-api-autoscaler-node-group-min-size and -max-size annotations;
  the autoscaler scales it through its scale subresource.

  Background:
    Given node groups are Cluster API MachineDeployments

  @binary
  Scenario: A MachineDeployment scales from zero with the capacity in its annotations
    Given a node group "md" of nodes with 4 CPU and 16Gi memory, min 0 and max 5
    And the MachineDeployment "md" gives its capacity in its annotations
    And a deployment "web" of 6 pods requesting 900m CPU
    Then all 6 pods of "web" are running within 5 minutes
    And the node group "md" has 2 nodes
    And the MachineDeployment "md" has 2 replicas
    And the pods of "web" get a "TriggeredScaleUp" event saying "pod triggered scale-up: [{md 0->2 (max: 5)}]"

  @binary
  Scenario: A MachineDeployment scales from zero with the capacity in its template's status
    Given a node group "md" of nodes with 4 CPU and 16Gi memory, min 0 and max 5
    And the MachineDeployment "md" gives its capacity in its infrastructure template's status
    And a deployment "web" of 6 pods requesting 900m CPU
    Then all 6 pods of "web" are running within 5 minutes
    And the node group "md" has 2 nodes
    And the MachineDeployment "md" has 2 replicas

  Scenario: The annotations win over the template's status
    # The template's status says 8 CPU, the annotation 2: a pod of 4 CPU fits no new node.
    Given a node group "md" of nodes with 8 CPU and 32Gi memory, min 0 and max 5
    And the MachineDeployment "md" gives its capacity in its annotations and in its infrastructure template's status
    And the MachineDeployment "md" is annotated "capacity.cluster-autoscaler.kubernetes.io/cpu=2"
    And a deployment "big" of 1 pod requesting 4 CPU
    When 5 minutes pass
    Then the node group "md" has 0 nodes
    And the pods of "big" get a "NotTriggerScaleUp" event saying "pod didn't trigger scale-up: 1 Insufficient cpu"
    When a deployment "small" of 1 pod requesting 1500m CPU is created
    Then all 1 pod of "small" is running within 5 minutes
    And the node group "md" has 1 node

  @binary
  Scenario: GPUs from the annotations bring up the GPU group only
    Given a node group "gpu" of nodes with 8 CPU and 32Gi memory, min 0 and max 3
    And the nodes of "gpu" have 1 "nvidia.com/gpu"
    And a node group "plain" of nodes with 8 CPU and 32Gi memory, min 0 and max 3
    And a deployment "train" of 2 pods requesting 1 CPU and 1 "nvidia.com/gpu"
    # Pods requesting GPUs wait 30 s for more before a scale-up (scale_up.feature): 30 real
    # seconds in binary mode, 30 scenario minutes at the default time scale.
    Then all 2 pods of "train" are running within 40 minutes
    And the node group "gpu" has 2 nodes
    And the node group "plain" has 0 nodes

  Scenario: Taints from the annotations keep pods that do not tolerate them off the group
    Given a node group "dedicated" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And the nodes of "dedicated" have the taint "dedicated=ml:NoSchedule"
    And a deployment "web" of 1 pod requesting 1 CPU
    When 5 minutes pass
    Then the node group "dedicated" has 0 nodes
    When a deployment "ml" of 1 pod requesting 1 CPU tolerating "dedicated=ml:NoSchedule" is created
    Then all 1 pod of "ml" is running within 5 minutes
    And the node group "dedicated" has 1 node

  @extension
  Scenario: A MachineDeployment at zero without any capacity is not scaled from zero, and says why
    Given a node group "blind" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And the MachineDeployment "blind" gives its capacity nowhere
    And a deployment "web" of 1 pod requesting 1 CPU
    Then the node group "blind" keeps 0 nodes for 5 minutes
    And the MachineDeployment "blind" gets a "ScaleFromZeroUnavailable" event containing "status.capacity"

  @extension
  Scenario: A malformed size annotation is reported, and the other groups keep working
    Given a node group "bad" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And the MachineDeployment "bad" is annotated "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size=lots"
    And a node group "good" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And a deployment "stuck" of 1 pod requesting 1 CPU on node group "bad"
    And a deployment "web" of 1 pod requesting 1 CPU on node group "good"
    Then all 1 pod of "web" is running within 5 minutes
    And the node group "bad" keeps 0 nodes for 5 minutes
    And the MachineDeployment "bad" gets a "InvalidNodeGroupAnnotation" event containing "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"

  @binary
  Scenario: Scale-down removes a Machine through the delete-machine annotation and lowers the replicas
    Given a node group "md" of nodes with 4 CPU and 16Gi memory, min 1 and max 5
    And the node group "md" starts with 3 nodes
    When 30 minutes pass
    Then the node group "md" has 1 node
    And the MachineDeployment "md" has 1 replica

  Scenario: A Machine whose Node is gone holds its group below the minimum, --enforce-node-group-min-size or not
    "enforce-node-group-min-size: Should CA scale up the node group to the configured min size if needed."
    The Machine outlives its deleted Node: an instance that never registers again, counted in the
    MachineDeployment's replicas. --enforce-node-group-min-size compares those replicas (the target size) with
    the min size, and a long-unregistered instance of a group at its min size is not removed ("Node group
    MachineDeployment/default/pool min size reached, skipping removal of 1 unregistered nodes",
    core/static_autoscaler.go in every release). Pending pods raise the target, and the instance then goes.
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 2 and max 5
    And the autoscaler runs with "--enforce-node-group-min-size=true --max-node-provision-time=5m"
    When 1 node of "pool" is deleted
    Then the node group "pool" keeps 1 node for 15 minutes
    And the MachineDeployment "pool" has 2 replicas
    When a deployment "web" of 5 pods requesting 1 CPU is created
    Then all 5 pods of "web" are running within 20 minutes
    And the node group "pool" has 2 nodes
