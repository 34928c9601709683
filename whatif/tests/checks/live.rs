//! The what-if reads a live cluster through a kubeconfig with list calls
//! only: the shop (`data/shop.json`) loaded into an embedded cluster
//! served over TLS, read with the token of a ServiceAccount whose one verb
//! is `list` (any other call is refused by the cluster's RBAC), gives the
//! same outcome as the dump it came from; a token that may not list pods
//! is refused with the API's answer.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use harness::cluster::Cluster;
use whatif::flags::Flags;
use whatif::input::Input;
use whatif::{WhatIf, groups, load, plan};

fn shop() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/shop.json")
}

fn what_if(inputs: Vec<PathBuf>, kubeconfig: Option<PathBuf>) -> WhatIf {
    WhatIf {
        inputs,
        kubeconfig,
        recording: None,
        flags: Flags::default(),
        sides: Vec::new(),
        group_label: None,
        duration: Duration::from_secs(3600),
        seed: 3,
        timeline: Default::default(),
        prices: Default::default(),
        parallel: 1,
        sweep: Vec::new(),
        case: None,
    }
}

/// A two-thread runtime: the testbed and a client over TLS side by side.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A ServiceAccount `name` bound to a ClusterRole of `rules`, and a token
/// for it.
pub(crate) async fn service_account(
    cluster: &Cluster,
    name: &str,
    rules: serde_json::Value,
) -> String {
    for object in [
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": name, "namespace": "default"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}]}),
    ] {
        cluster.create(object).await.expect("RBAC object created");
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(cluster.client(), "default")
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("a token")
        .status
        .expect("the token in the status")
        .token
}

#[test]
fn a_service_account_that_may_only_list_reads_all_the_what_if_needs() {
    let runtime = runtime();
    let dir = tempfile::tempdir().expect("a directory");
    let (reader, no_pods) = (dir.path().join("reader"), dir.path().join("no-pods"));
    let (_cluster, _endpoint) = runtime.block_on(async {
        // Loaded before the controllers start, as a cluster that has been
        // running: the Deployments find their ReplicaSets there.
        let input = Input::read(&[shop()]).expect("the shop reads");
        let grouping = groups::infer(&input, None, &[]).expect("groups");
        let planned = plan::plan(&input, &grouping).expect("a plan");
        let (cluster, _) = Cluster::builder()
            .start_loaded(|client, server| async move {
                load::load(client, &server, &planned, std::time::SystemTime::now())
                    .await
                    .map_err(whatif::run::RunError::Load)
            })
            .await
            .expect("the shop loads");
        let list_only = service_account(
            &cluster,
            "whatif-reader",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}]),
        )
        .await;
        let nodes_only = service_account(
            &cluster,
            "whatif-no-pods",
            json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]),
        )
        .await;
        let endpoint = cluster
            .api_server()
            .expect("embedded")
            .serve_tls("127.0.0.1:0".parse().expect("an address"))
            .await
            .expect("served over TLS");
        std::fs::write(&reader, endpoint.kubeconfig_with_token(&list_only)).expect("written");
        std::fs::write(&no_pods, endpoint.kubeconfig_with_token(&nodes_only)).expect("written");
        // The token may list, and nothing else.
        let client = endpoint.client_with_token(&list_only).expect("a client");
        let refused = Api::<ServiceAccount>::namespaced(client, "default")
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "x"}})).expect("an object"),
            )
            .await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(s)) if s.code == 403),
            "{refused:?}"
        );
        (cluster, endpoint)
    });

    let from_file = whatif::run(&what_if(vec![shop()], None)).expect("the dump runs");
    let live = whatif::run(&what_if(Vec::new(), Some(reader))).expect("the live cluster runs");
    assert_eq!(live.sides[0].name, "as deployed");
    assert_eq!(live.sides[0].flags, from_file.sides[0].flags);
    assert_eq!(
        live.sides[0].summary,
        from_file.sides[0].summary,
        "{}\n{}",
        live.markdown(),
        from_file.markdown()
    );
    let removed = |r: &whatif::report::Report| -> Vec<String> {
        r.sides[0]
            .nodes
            .iter()
            .filter(|n| n.removed_at.is_some())
            .map(|n| n.name.clone())
            .collect()
    };
    assert_eq!(removed(&live), removed(&from_file));
    assert!(!removed(&live).is_empty());

    let e = whatif::run(&what_if(Vec::new(), Some(no_pods)))
        .expect_err("pods cannot be listed")
        .to_string();
    assert!(e.contains("listing Pods"), "{e}");
    assert!(e.contains("forbidden"), "{e}");
}
