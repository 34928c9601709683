Feature: Balancing similar node groups
  "CA 0.6 introduced --balance-similar-node-groups flag to support this use case. If you set the flag to
  true, CA will automatically identify node groups with the same instance type and the same set of labels
  (except for automatically added zone label) and try to keep the sizes of those node groups balanced."

  # Every kwok group's nodes carry their group's name as a label, which the balancing must ignore.
  Background:
    Given node groups "zone-a", "zone-b" and "zone-c" of nodes with 4 CPU and 16Gi memory, min 0 and max 10
    And the nodes of "zone-a" are in zone "eu-1a"
    And the nodes of "zone-b" are in zone "eu-1b"
    And the nodes of "zone-c" are in zone "eu-1c"

  @binary
  Scenario: With --balance-similar-node-groups the new nodes are spread over the zones
    Given the autoscaler runs with "--balance-similar-node-groups=true --balancing-ignore-label=kwok-nodegroup"
    And a deployment "web" of 9 pods requesting 1 CPU
    Then all 9 pods of "web" are running within 5 minutes
    And each of the node groups "zone-a", "zone-b" and "zone-c" has 1 node

  Scenario: The sizes differ by at most one when the count does not divide
    "If the number of nodes is not divisible by the number of balanced node groups, some groups will get 1
    more node than others."
    Given the autoscaler runs with "--balance-similar-node-groups=true --balancing-ignore-label=kwok-nodegroup"
    And a deployment "web" of 12 pods requesting 1 CPU
    Then all 12 pods of "web" are running within 5 minutes
    And the node groups "zone-a", "zone-b" and "zone-c" have 4 nodes in total
    And one of the node groups "zone-a", "zone-b" and "zone-c" has 2 nodes and the others 1

  Scenario: Without the flag one group takes all the new nodes
    Given a deployment "web" of 9 pods requesting 1 CPU
    Then all 9 pods of "web" are running within 5 minutes
    And one of the node groups "zone-a", "zone-b" and "zone-c" has 3 nodes and the others 0

  Scenario: A group with a custom label is not balanced with the others
    "You can opt-out a node group from being automatically balanced with other node groups using the same
    instance type by giving it any custom label."
    Given the nodes of "zone-c" are labeled "team=payments"
    And the autoscaler runs with "--balance-similar-node-groups=true --balancing-ignore-label=kwok-nodegroup --expander=priority"
    And the priority expander gives priority 10 to "^zone-[ab]$"
    And a deployment "web" of 6 pods requesting 1 CPU
    Then all 6 pods of "web" are running within 5 minutes
    And each of the node groups "zone-a" and "zone-b" has 1 node
    And the node group "zone-c" has 0 nodes

  # Faults are injected through the kwok provider's templates.
  @extension @kwok-only
  Scenario: By default a group the cloud refuses stops the increases planned after it for that loop
    Upstream's executor increases the planned groups one after the other and returns at the first error
    (executeScaleUpsSync): the similar groups after it wait for the next loop, which plans without the
    backed-off group.
    Given the cloud provider refuses to scale up "zone-a"
    And the autoscaler runs with "--balance-similar-node-groups=true --balancing-ignore-label=kwok-nodegroup --expander=priority"
    And the priority expander gives priority 10 to "^zone-a$"
    When a deployment "web" of 6 pods requesting 3 CPU is created
    Then all 6 pods of "web" are running within 10 minutes
    And each of the node groups "zone-b" and "zone-c" has 3 nodes
    And the status ConfigMap gets a "FailedToScaleUpGroup" event containing "Scale-up failed for group zone-a"
    And the status ConfigMap gets a "ScaledUpGroup" event saying "Scale-up: group zone-b size set to 3 instead of 0 (max: 10)"

  @extension @kwok-only
  Scenario: With --parallel-scale-up a group the cloud refuses does not hold back its similar groups
    "parallel-scale-up: Whether to allow parallel node groups scale up. Experimental: may not work on some
    cloud providers, enable at your own risk."
    Every planned group is increased at once; each failure backs its group off.
    Given the cloud provider refuses to scale up "zone-a"
    And the autoscaler runs with "--balance-similar-node-groups=true --balancing-ignore-label=kwok-nodegroup --expander=priority --parallel-scale-up"
    And the priority expander gives priority 10 to "^zone-a$"
    When a deployment "web" of 6 pods requesting 3 CPU is created
    Then all 6 pods of "web" are running within 10 minutes
    And each of the node groups "zone-b" and "zone-c" has 3 nodes
    And the status ConfigMap gets a "FailedToScaleUpGroup" event containing "Scale-up failed for group zone-a"
    And the status ConfigMap gets a "ScaledUpGroup" event saying "Scale-up: group zone-b size set to 2 instead of 0 (max: 10)"
