//! The kwok cloud provider against the embedded API server: ConfigMaps in
//! upstream's format, node creation and deletion, refresh, faults.

use std::time::Duration;

use autoscaler::cloudprovider::CloudProvider;
use autoscaler::cloudprovider::kwok::{Fault, KwokProvider, Settings, quota_exceeded};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use serde_json::json;

const CONFIG: &str = r#"
apiVersion: v1alpha1
readNodesFrom: configmap
nodegroups:
  fromNodeLabelKey: "kwok-nodegroup"
configmap:
  name: kwok-provider-templates
"#;

fn template(name: &str, group: &str, annotations: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kwok-nodegroup": group}, "annotations": annotations},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}})
}

async fn config_maps(client: &Client, templates: &[serde_json::Value]) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": templates});
    for (name, key, value) in [
        ("kwok-provider-config", "config", CONFIG.to_string()),
        (
            "kwok-provider-templates",
            "templates",
            serde_json::to_string(&list).unwrap(),
        ),
    ] {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "kube-system"}, "data": {key: value}});
        api.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(cm))
            .await
            .unwrap();
    }
}

async fn node_store(client: &Client) -> reflector::Store<Node> {
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(Api::<Node>::all(client.clone()), watcher::Config::default()),
    )
    .applied_objects()
    .for_each(|_| async {});
    tokio::spawn(stream);
    reader.wait_until_ready().await.unwrap();
    reader
}

async fn settle(store: &reflector::Store<Node>, count: usize) {
    for _ in 0..200 {
        if store.state().len() == count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("store has {} nodes, want {count}", store.state().len());
}

fn lister(store: &reflector::Store<Node>) -> autoscaler::cloudprovider::NodeLister {
    let store = store.clone();
    std::sync::Arc::new(move || store.state())
}

fn settings() -> Settings {
    Settings {
        namespace: "kube-system".into(),
        config_map: "kwok-provider-config".into(),
    }
}

#[tokio::test]
async fn groups_scale_up_and_down_through_node_objects() {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let client = api.client();
    config_maps(
        &client,
        &[
            template("small", "small", json!({"cluster-autoscaler.kwok.nodegroup/min-count": "1", "cluster-autoscaler.kwok.nodegroup/max-count": "3"})),
            template("large", "large", json!({"cluster-autoscaler.kwok.nodegroup/desired-count": "2"})),
        ],
    )
    .await;
    let store = node_store(&client).await;
    let provider = KwokProvider::new(client.clone(), lister(&store), settings())
        .await
        .unwrap();
    // desired-count (default min) nodes are created at start.
    settle(&store, 3).await;
    let groups = provider.node_groups();
    let ids: Vec<String> = groups.iter().map(|g| g.id()).collect();
    assert_eq!(ids, ["large", "small"], "stable names, no timestamps");
    let small = groups.iter().find(|g| g.id() == "small").unwrap().clone();
    assert_eq!(
        (
            small.min_size(),
            small.max_size(),
            small.target_size().unwrap()
        ),
        (1, 3, 1)
    );
    assert_eq!(groups[0].max_size(), 200, "default max-count");

    small.increase_size(2).await.unwrap();
    settle(&store, 5).await;
    assert_eq!(small.target_size().unwrap(), 3);
    let err = small.increase_size(1).await.unwrap_err().to_string();
    assert_eq!(err, "size increase too large, desired: 4 max: 3");
    let nodes = store.state();
    let new = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref().unwrap().starts_with("small-"))
        .unwrap();
    let name = new.metadata.name.clone().unwrap();
    assert_eq!(
        new.spec.as_ref().unwrap().provider_id.as_deref(),
        Some(format!("kwok:{name}").as_str())
    );
    assert_eq!(
        new.metadata.annotations.as_ref().unwrap()["kwok.x-k8s.io/node"],
        "fake"
    );
    assert_eq!(
        new.metadata.labels.as_ref().unwrap()["kubernetes.io/hostname"],
        name
    );
    assert_eq!(
        provider.node_group_for_node(new).unwrap().unwrap().id(),
        "small"
    );
    assert_eq!(small.nodes().unwrap().len(), 3);

    // DeleteNodes lowers the target (upstream 1.29 did not).
    small.delete_nodes(vec![(**new).clone()]).await.unwrap();
    settle(&store, 4).await;
    assert_eq!(small.target_size().unwrap(), 2);
    // A node that kwok does not manage is refused.
    let real: Node = serde_json::from_value(json!({"metadata": {"name": "real"}})).unwrap();
    let err = small
        .delete_nodes(vec![real])
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "can't delete node 'real' because it is not managed by kwok"
    );
    // Min size is enforced.
    let members: Vec<Node> = store
        .state()
        .iter()
        .filter(|n| n.metadata.name.as_deref().unwrap().starts_with("small-"))
        .map(|n| (**n).clone())
        .collect();
    let err = small.delete_nodes(members).await.unwrap_err().to_string();
    assert_eq!(
        err,
        "can't delete nodes because nodegroup size would go below min size"
    );
    // DecreaseTargetSize never removes registered nodes.
    let err = small
        .decrease_target_size(-1)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("attempt to delete existing nodes"), "{err}");
}

#[tokio::test]
async fn refresh_rereads_the_config_maps_and_faults_are_injected() {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let client = api.client();
    config_maps(&client, &[template("a", "a", json!({}))]).await;
    let store = node_store(&client).await;
    let provider = KwokProvider::new(client.clone(), lister(&store), settings())
        .await
        .unwrap();
    assert_eq!(provider.node_groups().len(), 1);
    config_maps(
        &client,
        &[
            template("a", "a", json!({})),
            template(
                "b",
                "b",
                json!({"cluster-autoscaler.kwok.nodegroup/max-count": "5"}),
            ),
        ],
    )
    .await;
    provider.refresh().await.unwrap();
    let groups = provider.node_groups();
    assert_eq!(
        groups.len(),
        2,
        "a group added to the templates appears without a restart"
    );

    let faults = provider.faults();
    faults.set(
        "b",
        Fault::IncreaseSizeFails(quota_exceeded("quota 'CPUS' exceeded")),
    );
    let b = groups.iter().find(|g| g.id() == "b").unwrap();
    let err = b.increase_size(1).await.unwrap_err();
    assert_eq!(err.to_string(), "kwok node group b: quota 'CPUS' exceeded");
    assert_eq!(b.target_size().unwrap(), 0);

    faults.set("b", Fault::NeverRegister);
    b.increase_size(2).await.unwrap();
    assert_eq!(b.target_size().unwrap(), 2);
    assert_eq!(b.nodes().unwrap().len(), 2, "instances exist");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(store.state().is_empty(), "but no Node registers");
    b.decrease_target_size(-2).await.unwrap();
    assert!(b.nodes().unwrap().is_empty());

    // A broken config is an error naming the ConfigMap, not a crash.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let mut cm = cms.get("kwok-provider-config").await.unwrap();
    cm.data = Some([("config".to_string(), "readNodesFrom: somewhere".to_string())].into());
    cm.metadata.managed_fields = None;
    cms.replace("kwok-provider-config", &PostParams::default(), &cm)
        .await
        .unwrap();
    let err = provider.refresh().await.unwrap_err().to_string();
    assert!(
        err.contains("ConfigMap kwok-provider-config") && err.contains("readNodesFrom"),
        "{err}"
    );
    assert_eq!(provider.node_groups().len(), 2, "the last good groups stay");
}

#[tokio::test]
async fn the_shipped_example_config_maps_work() {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let client = api.client();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/kwok-provider-configmaps.yaml"
    ))
    .unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    for d in docs {
        cms.create(&PostParams::default(), &serde_json::from_value(d).unwrap())
            .await
            .unwrap();
    }
    let store = node_store(&client).await;
    let provider = KwokProvider::new(client.clone(), lister(&store), settings())
        .await
        .unwrap();
    let groups: Vec<(String, usize, usize)> = provider
        .node_groups()
        .iter()
        .map(|g| (g.id(), g.min_size(), g.max_size()))
        .collect();
    assert_eq!(
        groups,
        [("large".to_string(), 0, 5), ("small".to_string(), 0, 10)]
    );
}

#[tokio::test]
async fn faults_can_come_from_template_annotations() {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let client = api.client();
    config_maps(
        &client,
        &[
            template("ghost", "ghost", json!({"testbed.cluster-autoscaler.kwok/fault": "never-register"})),
            template("full", "full", json!({"testbed.cluster-autoscaler.kwok/fault": "increase-size-error=OutOfResource:ZONE_RESOURCE_POOL_EXHAUSTED:no capacity in zone a"})),
        ],
    )
    .await;
    let store = node_store(&client).await;
    let provider = KwokProvider::new(client.clone(), lister(&store), settings())
        .await
        .unwrap();
    let groups = provider.node_groups();
    let (full, ghost) = (&groups[0], &groups[1]);
    let err = full.increase_size(1).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "kwok node group full: no capacity in zone a"
    );
    ghost.increase_size(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(store.state().is_empty());
    assert_eq!(ghost.nodes().unwrap().len(), 1);
    // A bad value leaves that group out (the error, naming the template
    // and the annotation, is logged); the others go on.
    config_maps(
        &client,
        &[
            template(
                "bad",
                "bad",
                json!({"testbed.cluster-autoscaler.kwok/fault": "explode"}),
            ),
            template("ghost", "ghost", json!({})),
        ],
    )
    .await;
    provider.refresh().await.unwrap();
    let ids: Vec<String> = provider.node_groups().iter().map(|g| g.id()).collect();
    assert_eq!(ids, ["ghost"]);
}

#[tokio::test]
async fn nodes_made_before_a_failed_creation_count_towards_the_target() {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let client = api.client();
    let bounds = json!({"cluster-autoscaler.kwok.nodegroup/min-count": "1",
        "cluster-autoscaler.kwok.nodegroup/max-count": "10"});
    config_maps(&client, &[template("pool", "pool", bounds)]).await;
    let store = node_store(&client).await;
    // The provider's own requests are the ones that fail.
    let provider = KwokProvider::new(api.client_under_test(), lister(&store), settings())
        .await
        .unwrap();
    settle(&store, 1).await;
    let pool = provider.node_groups()[0].clone();
    let fail_one_creation = apiserver::faults::Rule {
        verb: Some("create".into()),
        resource: Some("nodes".into()),
        fault: apiserver::faults::Fault::InternalError,
        rate: 1.0,
        times: Some(1),
    };
    api.server().faults.add(fail_one_creation).unwrap();
    let err = pool.increase_size(3).await.unwrap_err().to_string();
    assert!(err.contains("creating node pool-"), "{err}");
    // Two of the three nodes exist: the target says so, so that a later
    // scale-down can remove them.
    settle(&store, 3).await;
    assert_eq!(pool.target_size().unwrap(), 3);
}
