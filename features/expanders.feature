Feature: Expanders
  "Expanders provide different strategies for selecting the node group to which new nodes will be added."

  # "small": 2 CPU nodes (1.9 CPU free); "large": 8 CPU nodes (7.9 CPU free).
  Background:
    Given a node group "small" of nodes with 2 CPU and 8Gi memory, min 0 and max 10
    And a node group "large" of nodes with 8 CPU and 32Gi memory, min 0 and max 10

  # The default expander was random before 1.33.
  @ca>=1.33
  Scenario: least-waste (the default) picks the group with the least idle CPU after scale-up
    "least-waste - this is the default expander, selects the node group that will have the least idle CPU
    (if tied, unused memory) after scale-up."
    # wastedCPU = (2 - 1.1) / 2 = 0.45 on small, (8 - 1.1) / 8 = 0.86 on large; memory wastes
    # (8Gi - 0.1Gi) / 8Gi and (32Gi - 0.1Gi) / 32Gi keep the order: small wins.
    Given a deployment "web" of 1 pod requesting 1 CPU
    Then the node group "small" reaches 1 node within 5 minutes
    And the node group "large" has 0 nodes

  @binary
  Scenario: least-waste adds CPU and memory waste (the CCE wastedScore)
    "wastedScore = wastedCPU + wastedMemory"
    # 1 pod of 1 CPU and 7Gi: small wastes (2-1.1)/2 + (8-7.1)/8 = 0.56,
    # large wastes (8-1.1)/8 + (32-7.1)/32 = 1.64; small wins although both fit.
    Given the autoscaler runs with "--expander=least-waste"
    And a deployment "mem" of 1 pod requesting 1 CPU and 7Gi memory
    Then the node group "small" reaches 1 node within 5 minutes
    And the node group "large" has 0 nodes

  Scenario: most-pods picks the group that can schedule the most pods
    "most-pods - selects the node group that would be able to schedule the most pods when scaling up."
    # Only "tiny" (one node of 2 CPU) and "big" (one node of 8 CPU) carry the label. tiny fits 1 pod,
    # big fits all 4; least-waste would pick tiny (wastes 20% against big's 24%).
    Given a node group "tiny" of nodes with 2 CPU and 8Gi memory, min 0 and max 1
    And a node group "big" of nodes with 8 CPU and 32Gi memory, min 0 and max 1
    And the nodes of "tiny" are labeled "class=capped"
    And the nodes of "big" are labeled "class=capped"
    And the autoscaler runs with "--expander=most-pods"
    And a deployment "web" of 4 pods requesting 1500m CPU on nodes labeled "class=capped"
    Then all 4 pods of "web" are running within 5 minutes
    And the node group "big" has 1 node
    And the node group "tiny" has 0 nodes

  Scenario: least-nodes picks the group that needs the fewest nodes
    "least-nodes - selects the node group that will use the least number of nodes after scale-up."
    # 2 pods of 1.8 CPU: 2 small nodes (least waste) or 1 large node (least nodes).
    Given the autoscaler runs with "--expander=least-nodes"
    And a deployment "web" of 2 pods requesting 1800m CPU
    Then all 2 pods of "web" are running within 5 minutes
    And the node group "large" has 1 node
    And the node group "small" has 0 nodes

  Scenario: The same pods under least-waste take the small nodes
    Given the autoscaler runs with "--expander=least-waste"
    And a deployment "web" of 2 pods requesting 1800m CPU
    Then all 2 pods of "web" are running within 5 minutes
    And the node group "small" has 2 nodes
    And the node group "large" has 0 nodes

  Scenario: random picks one of the groups that fit
    "random - should be used when you don't have a particular need for the node groups to scale differently."
    Given the autoscaler runs with "--expander=random"
    And a deployment "web" of 1 pod requesting 1 CPU
    Then all 1 pods of "web" are running within 5 minutes
    And one of the node groups "small" and "large" has 1 node and the other 0

  @binary
  Scenario: priority picks the group with the highest priority, by regex
    "priority - selects the node group that has the highest priority assigned by the user."
    Given the autoscaler runs with "--expander=priority"
    And the priority expander gives priority 10 to "^sm.*"
    And the priority expander gives priority 50 to "^lar.e$"
    And a deployment "web" of 1 pod requesting 1 CPU
    Then the node group "large" reaches 1 node within 5 minutes
    And the node group "small" has 0 nodes

  Scenario: priority,least-waste breaks a priority tie by waste
    "This will cause the least-waste expander to be used as a fallback in the event that the priority
    expander selects multiple node groups."
    Given the autoscaler runs with "--expander=priority,least-waste"
    And the priority expander gives priority 50 to ".*"
    And a deployment "web" of 1 pod requesting 1 CPU
    Then the node group "small" reaches 1 node within 5 minutes
    And the node group "large" has 0 nodes
