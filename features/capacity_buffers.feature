Feature: CapacityBuffers
  "Capacity buffers allow users to keep spare capacity in the cluster, ready for workloads to be
  scheduled quickly." (upstream's CapacityBuffer API, autoscaling.x-k8s.io, CA 1.34 and later.)
  The buffer controller translates each buffer into its status: the PodTemplate its fake pods are
  made from, how many, and "ReadyForProvisioning"; pod injection puts the fake pods into the
  autoscaler's simulation, so scale-up makes room for them and scale-down keeps it. They are never
  created in the cluster.

  # Nodes have 4 CPU; a "unit" of the buffer asks for 3, so a node holds one.
  Background:
    Given the CapacityBuffer and CapacityQuota CRDs are installed
    And the autoscaler runs with "--capacity-buffer-controller-enabled --capacity-buffer-pod-injection-enabled"
    And a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And a pod template "unit" of pods requesting 3 CPU

  Rule: A buffer is translated into a status the fake pods are made from

    @binary @ca>=1.36
    Scenario: A buffer of fixed replicas gets nodes for its fake pods, and keeps them
      "replicas: the number of buffer units (pods) to be provisioned."
      Given the node group "pool" starts with 1 node
      And a CapacityBuffer "spare" of 2 pods of "unit"
      Then within 3 minutes the CapacityBuffer "spare" has the condition "ReadyForProvisioning=True" with reason "AttributesSetSuccessfully" and message "ready"
      And within 1 minute the CapacityBuffer "spare" has the condition "Provisioning=True" with reason "FakePodsInjected"
      And within 1 minute the CapacityBuffer "spare" has the condition "LimitedByQuotas=False" with reason "ResourceQuotasAllocated"
      And within 1 minute the CapacityBuffer "spare" has 2 replicas
      And the node group "pool" reaches 2 nodes within 5 minutes
      And no pod of the CapacityBuffer "spare" exists
      # The room is kept past --scale-down-unneeded-time (10 minutes): the fake pods need it.
      And the node group "pool" keeps 2 nodes for 15 minutes

    @ca>=1.36
    Scenario: The fake pods' scale-up is told once, on the buffer
      Given the node group "pool" starts with 1 node
      And a CapacityBuffer "spare" of 3 pods of "unit"
      Then the node group "pool" reaches 3 nodes within 5 minutes
      And the CapacityBuffer "spare" gets a "TriggeredScaleUp" event containing "capacity buffer 2 fake pods triggered scale-up: [{pool 1->3 (max: 10)}]"

    @ca>=1.36 @ca<1.37
    Scenario: A percentage of a Deployment follows the Deployment as it scales, rounded down
      "percentage: the buffer size as a percentage of the referenced scalable object's replicas."
      CA 1.36's code takes the least of the inputs and rounds down (its API docs say otherwise).
      Given the node group "pool" starts with 4 nodes
      And a deployment "web" of 4 pods requesting 1 CPU
      And the following objects:
        """
        apiVersion: autoscaling.x-k8s.io/v1beta1
        kind: CapacityBuffer
        metadata:
          name: web-headroom
        spec:
          scalableRef:
            apiGroup: apps
            kind: Deployment
            name: web
          percentage: 50
        """
      Then within 3 minutes the CapacityBuffer "web-headroom" has the condition "ReadyForProvisioning=True" with reason "AttributesSetSuccessfully"
      And within 1 minute the CapacityBuffer "web-headroom" has 2 replicas
      When the deployment "web" is scaled to 9 pods
      Then within 3 minutes the CapacityBuffer "web-headroom" has 4 replicas

    @binary @ca>=1.37
    Scenario: With replicas and a percentage the larger wins, the percentage rounded up
      "The desired number is determined by taking the maximum of `replicas` and the computed
      replicas from `percentage`". CA 1.37's code does so and rounds the percentage up: 50% of 4
      pods is 2, fewer than 3 replicas; 50% of 9 is 5 (4.5 up).
      Given the node group "pool" starts with 4 nodes
      And a deployment "web" of 4 pods requesting 1 CPU
      And the following objects:
        """
        apiVersion: autoscaling.x-k8s.io/v1beta1
        kind: CapacityBuffer
        metadata:
          name: web-headroom
        spec:
          scalableRef:
            apiGroup: apps
            kind: Deployment
            name: web
          replicas: 3
          percentage: 50
        """
      Then within 3 minutes the CapacityBuffer "web-headroom" has 3 replicas
      When the deployment "web" is scaled to 9 pods
      Then within 3 minutes the CapacityBuffer "web-headroom" has 5 replicas

    @ca>=1.36
    Scenario: Limits make the buffer as many pods as fit in them
      "limits: the buffer is sized so that its pods together fit in these resources."
      Given the node group "pool" starts with 1 node
      And the following objects:
        """
        apiVersion: autoscaling.x-k8s.io/v1beta1
        kind: CapacityBuffer
        metadata:
          name: sized
        spec:
          podTemplateRef:
            name: unit
          limits:
            cpu: "7"
        """
      Then within 3 minutes the CapacityBuffer "sized" has 2 replicas
      And the node group "pool" reaches 2 nodes within 5 minutes

  Rule: kube-aws-autoscaler's buffers are CapacityBuffers (the autoscaler README maps its flags)

    @ca>=1.36
    Scenario: Spare nodes are a buffer of node-sized pods
      kube-aws-autoscaler: "--buffer-spare-nodes: Number of extra "spare" nodes to provision per
      ASG/AZ". Here: a buffer of as many pods as spare nodes, each pod too big to share a node.
      Given the node group "pool" starts with 1 node
      And a deployment "app" of 1 pod requesting 3 CPU
      And a pod template "node-sized" of pods requesting 3500m CPU
      And a CapacityBuffer "spare-nodes" of 2 pods of "node-sized"
      Then the node group "pool" reaches 3 nodes within 5 minutes
      And the node group "pool" keeps 3 nodes for 12 minutes

    @ca>=1.36
    Scenario: A fixed CPU and memory buffer is a buffer sized by limits
      kube-aws-autoscaler: "--buffer-cpu-fixed: Extra CPU requests to add to calculation" and
      "--buffer-memory-fixed". Here: small units, as many as fit in the limits (the least of the
      two): 6 CPU hold 12 units of 500m, 4Gi hold 4 of 1Gi.
      Given the node group "pool" starts with 1 node
      And the following objects:
        """
        apiVersion: v1
        kind: PodTemplate
        metadata:
          name: small
        template:
          spec:
            containers:
            - name: c
              image: pause
              resources:
                requests:
                  cpu: 500m
                  memory: 1Gi
        ---
        apiVersion: autoscaling.x-k8s.io/v1beta1
        kind: CapacityBuffer
        metadata:
          name: fixed
        spec:
          podTemplateRef:
            name: small
          limits:
            cpu: "6"
            memory: 4Gi
        """
      Then within 3 minutes the CapacityBuffer "fixed" has 4 replicas
      And the node group "pool" keeps 1 node for 3 minutes

  Rule: Buffers and real pods share the room

    @ca>=1.36
    Scenario: Real pods take the buffer's room, and the buffer gets new room
      The scheduler does not know of fake pods: real pods go where the buffer kept room, and the
      autoscaler then makes room for the fake pods again (the FAQ's overprovisioning).
      Given the node group "pool" starts with 2 nodes
      And a CapacityBuffer "spare" of 2 pods of "unit"
      Then within 3 minutes the CapacityBuffer "spare" has the condition "Provisioning=True" with reason "FakePodsInjected"
      And the node group "pool" keeps 2 nodes for 2 minutes
      When a deployment "app" of 2 pods requesting 3 CPU is created
      Then all 2 pods of "app" are running within 2 minutes
      And the node group "pool" reaches 4 nodes within 5 minutes

    @ca>=1.36
    Scenario: A deleted buffer's nodes go
      Given the node group "pool" starts with 1 node
      And a deployment "app" of 1 pod requesting 3 CPU
      And a CapacityBuffer "spare" of 2 pods of "unit"
      Then the node group "pool" reaches 3 nodes within 5 minutes
      When the CapacityBuffer "spare" is deleted
      Then the node group "pool" reaches 1 node within 20 minutes

    @ca>=1.36
    Scenario: A namespace ResourceQuota cuts the buffer to what it leaves room for
      "LimitedByQuotas": the buffer's pods count against the namespace's quotas as real pods would.
      Given the node group "pool" starts with 1 node
      When a ResourceQuota "team" allows "requests.cpu=10" with "requests.cpu=4" used
      And a CapacityBuffer "spare" of 4 pods of "unit" is created
      Then within 3 minutes the CapacityBuffer "spare" has the condition "LimitedByQuotas=True" with reason "ResourceQuotasAllocated" and message "Buffer replicas limited from 4 to 2 due to quotas: team"
      And within 1 minute the CapacityBuffer "spare" has 2 replicas
      And the node group "pool" reaches 2 nodes within 5 minutes
      And the node group "pool" keeps 2 nodes for 3 minutes

  Rule: Bad input gets a condition saying why, and nothing else

    @ca>=1.36
    Scenario: A buffer naming a missing PodTemplate is not ready, and nothing scales
      Given the node group "pool" starts with 1 node
      And a CapacityBuffer "lost" of 2 pods of "missing"
      Then within 3 minutes the CapacityBuffer "lost" has the condition "ReadyForProvisioning=False" with reason "error" and message "Buffer not ready for provisioning: capacity buffer client can't get pod template: podtemplates \"missing\" not found"
      And the node group "pool" keeps 1 node for 3 minutes

    @ca>=1.36
    Scenario: A buffer naming both a PodTemplate and a scalable object is refused
      "You must define either PodTemplateRef or ScalableRef, but not both" (the CRD's rule).
      When creating the following object is refused with "You must define either PodTemplateRef or ScalableRef, but not both"
        """
        apiVersion: autoscaling.x-k8s.io/v1beta1
        kind: CapacityBuffer
        metadata:
          name: both
          namespace: default
        spec:
          podTemplateRef:
            name: unit
          scalableRef:
            apiGroup: apps
            kind: Deployment
            name: web
          replicas: 1
        """

    @ca>=1.36
    Scenario: A buffer whose limits name no resource its pods request is not ready
      Given the node group "pool" starts with 1 node
      And the following objects:
        """
        apiVersion: autoscaling.x-k8s.io/v1beta1
        kind: CapacityBuffer
        metadata:
          name: gpu-less
        spec:
          podTemplateRef:
            name: unit
          limits:
            nvidia.com/gpu: "2"
        """
      Then within 3 minutes the CapacityBuffer "gpu-less" has the condition "ReadyForProvisioning=False" with reason "error" and message "Buffer not ready for provisioning: couldn't get number of replicas for buffer: resources in configured limits not found in the pod template"
      And the node group "pool" keeps 1 node for 3 minutes
