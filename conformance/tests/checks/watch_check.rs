//! The watch check of `testbed bench` (`conformance::watch_check`): a view
//! built from a list and a watch equals the final list when every change
//! arrives, and the check fails when changes are lost to a 410.

use std::time::Duration;

use apiserver::ApiServer;
use apiserver::faults::{Fault, Rule};
use conformance::watch_check::WatchCheck;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use simclock::Clock;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

async fn churn(api: &Api<ConfigMap>, from: usize, to: usize) {
    for i in from..to {
        api.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    for i in (from..to).step_by(3) {
        let patch = json!({"data": {"k": "changed"}});
        api.patch(
            &format!("c{i}"),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    }
    for i in (from..to).step_by(5) {
        api.delete(&format!("c{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn every_change_arrives_in_order_and_the_view_equals_a_list() {
    let server = ApiServer::start(Clock::new()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    churn(&api, 0, 10).await;
    let check = WatchCheck::<ConfigMap>::start(&server.client_under_test())
        .await
        .unwrap();
    churn(&api, 10, 40).await;
    let report = check.finish(Duration::from_secs(2)).await.unwrap();
    // 30 created, 10 patched, 6 deleted after the start.
    assert_eq!(report.events, 46, "{report}");
    assert!(report.holds(), "{report}");
    // 10 - 2 before, 30 - 6 after, and the cluster's own ConfigMaps.
    let all = Api::<ConfigMap>::all(server.client())
        .list(&Default::default())
        .await
        .unwrap();
    assert!(all.items.len() >= 32);
    assert_eq!(report.listed, all.items.len(), "{report}");
}

#[tokio::test(start_paused = true)]
async fn changes_lost_to_a_410_fail_the_check() {
    let server = ApiServer::start(Clock::new()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let check = WatchCheck::<ConfigMap>::start(&server.client_under_test())
        .await
        .unwrap();
    churn(&api, 0, 5).await;
    let gone = Rule {
        verb: Some("watch".into()),
        resource: Some("configmaps".into()),
        fault: Fault::WatchGone,
        rate: 1.0,
        times: Some(1),
    };
    server.server().faults.add(gone).unwrap();
    server.server().faults.cut_watches(Some("configmaps"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    churn(&api, 5, 10).await;
    let report = check.finish(Duration::from_secs(2)).await.unwrap();
    assert_eq!(report.gone, 1, "{report}");
    assert!(!report.holds(), "{report}");
}
