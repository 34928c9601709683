//! kube-rs clients against the embedded API server, in memory and over TLS.

use std::collections::BTreeMap;
use std::time::Duration;

use apiserver::ApiServer;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Error};
use serde_json::{Value, json};
use simclock::Clock;

pub(crate) fn start() -> (ApiServer, Client) {
    let api = ApiServer::start(Clock::new()).expect("server starts");
    let client = api.client();
    (api, client)
}

pub(crate) fn api_code(e: &Error) -> (u16, String) {
    match e {
        Error::Api(s) => (s.code, s.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

pub(crate) fn pod(name: &str, labels: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "pause:3.9", "resources": {"requests": {"cpu": "100m"}}}]}
    }))
    .expect("valid pod")
}

async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test]
async fn typed_crud_selectors_and_errors() {
    let (_s, client) = start();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod("", json!({"app": "web", "tier": "front"}));
    p.metadata.generate_name = Some("web-".into());
    let created = pods
        .create(&PostParams::default(), &p)
        .await
        .expect("create");
    let name = created.metadata.name.clone().expect("generated name");
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    let status = created.status.clone().expect("status");
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("Burstable"));
    let spec = created.spec.clone().expect("spec");
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(spec.priority, Some(0));
    let tolerations = spec.tolerations.unwrap_or_default();
    assert!(
        tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some("node.kubernetes.io/not-ready")
                && t.toleration_seconds == Some(300))
    );

    pods.create(&PostParams::default(), &pod("db", json!({"app": "db"})))
        .await
        .expect("create db");
    let listed = pods
        .list(&ListParams::default().labels("app in (web,cache),tier"))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);
    let unbound = pods
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .expect("list");
    assert_eq!(unbound.items.len(), 2);

    // Errors carry the right code and reason.
    let (code, reason) = api_code(&pods.get("missing").await.unwrap_err());
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    let (code, reason) = api_code(
        &pods
            .create(&PostParams::default(), &pod("db", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));
    let no_containers: Pod =
        serde_json::from_value(json!({"metadata": {"name": "bad"}, "spec": {"containers": []}}))
            .unwrap();
    match pods
        .create(&PostParams::default(), &no_containers)
        .await
        .unwrap_err()
    {
        Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
            assert!(s.message.contains("spec.containers"), "{}", s.message);
        }
        other => panic!("{other:?}"),
    }
    let (code, _) = api_code(
        &pods
            .list(&ListParams::default().labels("app in (web"))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 400);
    let (code, _) = api_code(
        &pods
            .list(&ListParams::default().fields("spec.bogus=1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 400);
    let other_ns: Api<Pod> = Api::namespaced(client.clone(), "nope");
    let (code, _) = api_code(
        &other_ns
            .create(&PostParams::default(), &pod("x", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 404);
    // The failed requests changed nothing.
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
}

#[tokio::test]
async fn updates_conflict_patches_and_generation() {
    let (_s, client) = start();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1"}})).unwrap();
    let v1 = cms.create(&PostParams::default(), &cm).await.unwrap();
    cm = v1.clone();
    cm.data = Some(BTreeMap::from([("a".into(), "2".into())]));
    let v2 = cms.replace("c", &PostParams::default(), &cm).await.unwrap();
    assert_ne!(v1.metadata.resource_version, v2.metadata.resource_version);
    // Stale resourceVersion: 409 Conflict.
    let (code, reason) = api_code(
        &cms.replace("c", &PostParams::default(), &cm)
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    // All three patch types.
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"b": "x"}})),
    )
    .await
    .unwrap();
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Strategic(json!({"metadata": {"labels": {"l": "1"}}})),
    )
    .await
    .unwrap();
    let jp: json_patch::Patch =
        serde_json::from_value(json!([{"op": "remove", "path": "/data/a"}])).unwrap();
    let out = cms
        .patch("c", &PatchParams::default(), &Patch::<()>::Json(jp))
        .await
        .unwrap();
    assert_eq!(
        out.data.unwrap(),
        BTreeMap::from([("b".into(), "x".into())])
    );
    assert_eq!(out.metadata.labels.unwrap()["l"], "1");

    // Node: strategic patch of taints and status through the status subresource.
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let patched = nodes
        .patch("n1", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}, "status": {"capacity": {"cpu": "4"}}})))
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().taints.unwrap().len(), 1);
    assert!(
        patched.status.and_then(|s| s.capacity).is_none(),
        "status changes through the main resource are ignored"
    );
    let st = nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"capacity": {"cpu": "4"}}, "spec": {"unschedulable": true}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().capacity.unwrap()["cpu"].0, "4");
    assert_ne!(
        st.spec.and_then(|s| s.unschedulable),
        Some(true),
        "spec changes through status are ignored"
    );

    // A status write's status passes through the type as a whole object
    // does: an unknown field is dropped, or refused under strict field
    // validation; a field of the wrong type is refused; the rest stays.
    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"bogus": 1, "phase": "Running"}})),
        )
        .await
        .unwrap();
    let raw: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::erase::<Node>(&()));
    let stored = raw.get("n1").await.unwrap().data;
    assert_eq!(stored["status"]["phase"], "Running");
    assert_eq!(stored["status"]["capacity"]["cpu"], "4");
    assert!(stored["status"].get("bogus").is_none(), "{stored}");
    assert_eq!(stored["spec"]["taints"][0]["key"], "k");
    let strict = PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..PatchParams::default()
    };
    let e = nodes
        .patch_status(
            "n1",
            &strict,
            &Patch::Merge(json!({"status": {"bogus": 1}})),
        )
        .await
        .unwrap_err();
    let Error::Api(s) = &e else {
        panic!("expected an API error, got {e:?}")
    };
    assert_eq!(s.code, 400);
    assert!(
        s.message.contains("unknown field \"status.bogus\""),
        "{}",
        s.message
    );
    let e = nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"capacity": "four"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(&e).0, 422);
}

#[tokio::test]
async fn pagination_is_complete_and_ordered() {
    let (_s, client) = start();
    let cms: Api<ConfigMap> = Api::namespaced(client, "kube-public");
    for i in 0..25 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:02}")}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let mut names = Vec::new();
    let mut remaining = Vec::new();
    let mut lp = ListParams::default().limit(10);
    loop {
        let page = cms.list(&lp).await.unwrap();
        names.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        remaining.push(page.metadata.remaining_item_count);
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    // Each cut page says how many objects the next pages hold; the last
    // says nothing, as kube-apiserver.
    assert_eq!(remaining, [Some(15), Some(5), None]);
    let expected: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(names, expected);
    // The same across every namespace, the first page's count read off
    // the resource's size.
    let all: Api<ConfigMap> = Api::all(cms.clone().into_client());
    let total = all.list(&ListParams::default()).await.unwrap().items.len();
    let (mut lp, mut counts) = (ListParams::default().limit(10), Vec::new());
    while let Ok(page) = all.list(&lp).await {
        counts.push(page.metadata.remaining_item_count.map(|n| n as usize));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    let pages = total.div_ceil(10);
    let expected: Vec<_> = (1..pages)
        .map(|p| Some(total - 10 * p))
        .chain([None])
        .collect();
    assert_eq!(counts, expected);
    // A count with a selector would cost a match of every object: none.
    let selected = cms
        .list(
            &ListParams::default()
                .limit(10)
                .fields("metadata.namespace=kube-public"),
        )
        .await
        .unwrap();
    assert!(selected.metadata.continue_.is_some());
    assert_eq!(selected.metadata.remaining_item_count, None);
}

#[tokio::test]
async fn watchers_see_every_change_in_order_and_old_versions_are_gone() {
    let api = ApiServer::with_history(Clock::new(), 20).unwrap();
    let client = api.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "counter"}, "data": {"n": "0"}}))
            .unwrap();
    let start_rv = cms
        .create(&PostParams::default(), &cm)
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(
            &WatchParams::default().fields("metadata.name=counter"),
            &start_rv,
        )
        .await
        .unwrap()
        .boxed();

    // Writers race on one object: every increment lands exactly once.
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let cms = cms.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for _ in 0..10 {
                loop {
                    let mut cur = cms.get("counter").await.unwrap();
                    let n: u32 = cur.data.as_ref().unwrap()["n"].parse().unwrap();
                    cur.data = Some(BTreeMap::from([("n".into(), (n + 1).to_string())]));
                    match cms.replace("counter", &PostParams::default(), &cur).await {
                        Ok(_) => break,
                        Err(Error::Api(s)) if s.code == 409 => conflicts += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            conflicts
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(cms.get("counter").await.unwrap().data.unwrap()["n"], "40");
    let mut seen = Vec::new();
    while seen.len() < 40 {
        match tokio::time::timeout(Duration::from_secs(5), stream.next()).await {
            Ok(Some(Ok(WatchEvent::Modified(c)))) => {
                seen.push(c.data.unwrap()["n"].parse::<u32>().unwrap())
            }
            other => panic!("unexpected watch item {other:?}"),
        }
    }
    assert_eq!(
        seen,
        (1..=40).collect::<Vec<_>>(),
        "every committed change, in order"
    );

    // History keeps 20 changes: resuming from the first version is 410 Gone.
    let res = cms.watch(&WatchParams::default(), &start_rv).await;
    let gone = match res {
        Err(Error::Api(s)) => s.code == 410,
        Ok(s) => matches!(s.boxed().next().await, Some(Ok(WatchEvent::Error(e))) if e.code == 410),
        Err(e) => panic!("{e}"),
    };
    assert!(gone, "a too-old resourceVersion is 410 Gone");
}

#[tokio::test]
async fn runtime_watcher_and_reflector_work() {
    let (_s, client) = start();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.create(&PostParams::default(), &pod("before", json!({"app": "a"})))
        .await
        .unwrap();
    let (reader, writer) = kube::runtime::reflector::store();
    let stream = kube::runtime::reflector(
        writer,
        watcher(pods.clone(), watcher::Config::default().labels("app=a")),
    )
    .applied_objects()
    .boxed();
    let handle = tokio::spawn(async move { stream.try_for_each(|_| async { Ok(()) }).await });
    pods.create(&PostParams::default(), &pod("after", json!({"app": "a"})))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("other", json!({"app": "b"})))
        .await
        .unwrap();
    eventually("the reflector holds both matching pods", || {
        let reader = reader.clone();
        async move { reader.state().len() == 2 }
    })
    .await;
    pods.delete("before", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the reflector drops the deleted pod", || {
        let reader = reader.clone();
        async move { reader.state().len() == 1 }
    })
    .await;
    handle.abort();
}

#[tokio::test]
async fn garbage_collection_background_foreground_and_orphan() {
    let (_s, client) = start();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let make_owner = |name: &str| {
        serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}})).unwrap()
    };
    for policy in ["Background", "Foreground", "Orphan"] {
        let owner = cms
            .create(
                &PostParams::default(),
                &make_owner(&format!("owner-{}", policy.to_lowercase())),
            )
            .await
            .unwrap();
        let uid = owner.metadata.uid.clone().unwrap();
        let oname = owner.metadata.name.clone().unwrap();
        for i in 0..3 {
            let dep: ConfigMap = serde_json::from_value(json!({"metadata": {
                "name": format!("{oname}-dep-{i}"),
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": oname, "uid": uid, "blockOwnerDeletion": true}]
            }}))
            .unwrap();
            cms.create(&PostParams::default(), &dep).await.unwrap();
        }
        let dp = match policy {
            "Background" => DeleteParams::background(),
            "Foreground" => DeleteParams::foreground(),
            _ => DeleteParams::orphan(),
        };
        cms.delete(&oname, &dp).await.unwrap();
        let prefix = format!("{oname}-dep-");
        let cms2 = cms.clone();
        eventually(&format!("{policy} deletion finishes"), || {
            let cms = cms2.clone();
            let oname = oname.clone();
            let prefix = prefix.clone();
            async move {
                let owner_gone = cms.get_opt(&oname).await.unwrap().is_none();
                let deps = cms.list(&ListParams::default()).await.unwrap().items;
                let deps: Vec<_> = deps
                    .iter()
                    .filter(|c| {
                        c.metadata
                            .name
                            .as_deref()
                            .unwrap_or("")
                            .starts_with(&prefix)
                    })
                    .collect();
                match policy {
                    "Orphan" => {
                        owner_gone
                            && deps.len() == 3
                            && deps.iter().all(|d| d.metadata.owner_references.is_none())
                    }
                    _ => owner_gone && deps.is_empty(),
                }
            }
        })
        .await;
    }
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (_s, client) = start();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    cms.delete("held", &DeleteParams::default()).await.unwrap();
    let held = cms.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(cms.get_opt("held").await.unwrap().is_none());
}

#[tokio::test]
async fn namespace_deletion_removes_its_content() {
    let (_s, client) = start();
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap(),
    )
    .await
    .unwrap();
    nss.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let nss2 = nss.clone();
    eventually("the namespace is gone", || {
        let nss = nss2.clone();
        async move { nss.get_opt("doomed").await.unwrap().is_none() }
    })
    .await;
    assert_eq!(
        api_code(
            &nss.delete("kube-system", &DeleteParams::default())
                .await
                .unwrap_err()
        )
        .0,
        403
    );
}

#[tokio::test]
async fn priority_admission_and_binding() {
    let (_s, client) = start();
    let pcs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("scheduling.k8s.io", "v1", "PriorityClass"),
            "priorityclasses",
        ),
    );
    let pc: DynamicObject = serde_json::from_value(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch-low"}, "value": -10})).unwrap();
    pcs.create(&PostParams::default(), &pc).await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut p = pod("low", json!({}));
    p.spec.as_mut().unwrap().priority_class_name = Some("batch-low".into());
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    assert_eq!(created.spec.unwrap().priority, Some(-10));
    let mut crit = pod("crit", json!({}));
    crit.spec.as_mut().unwrap().priority_class_name = Some("system-node-critical".into());
    assert_eq!(
        pods.create(&PostParams::default(), &crit)
            .await
            .unwrap()
            .spec
            .unwrap()
            .priority,
        Some(2_000_001_000)
    );
    let mut bad = pod("bad", json!({}));
    bad.spec.as_mut().unwrap().priority_class_name = Some("nope".into());
    assert_eq!(
        api_code(&pods.create(&PostParams::default(), &bad).await.unwrap_err()).0,
        403
    );

    // Binding assigns the node once.
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "low"}, "target": {"kind": "Node", "name": "node-a"}});
    let req = http::Request::post("/api/v1/namespaces/default/pods/low/binding")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&binding).unwrap())
        .unwrap();
    client.request::<Value>(req).await.expect("bind");
    let bound = pods.get("low").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("node-a"));
    assert!(
        bound
            .status
            .unwrap()
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let again = http::Request::post("/api/v1/namespaces/default/pods/low/binding")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&binding).unwrap())
        .unwrap();
    assert_eq!(
        api_code(&client.request::<Value>(again).await.unwrap_err()).0,
        409
    );
}

#[tokio::test]
async fn crds_are_served_at_once_with_status_and_scale() {
    let (_s, client) = start();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "machinepools.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "machinepools", "kind": "MachinePool"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                               "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}}}]}
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "MachinePool"),
        "machinepools",
    );
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "MachinePool", "metadata": {"name": "p"}, "spec": {"replicas": 1}})).unwrap();
    pools.create(&PostParams::default(), &obj).await.unwrap();
    pools
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"replicas": 1, "selector": "pool=p"}, "spec": {"replicas": 9}}),
            ),
        )
        .await
        .unwrap();
    let p = pools.get("p").await.unwrap();
    assert_eq!(p.data["spec"]["replicas"], 1, "status writes ignore spec");
    assert_eq!(p.data["status"]["replicas"], 1);
    let scale = pools.get_scale("p").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("pool=p"));
    pools
        .patch_scale(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(pools.get("p").await.unwrap().data["spec"]["replicas"], 3);
    // Go writes a Scale of 0 without spec.replicas (`omitempty`): it means 0.
    let put_scale = |body: Value| {
        http::Request::put("/apis/example.com/v1/machinepools/p/scale")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap()
    };
    let zero = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "p"}, "spec": {}});
    client.request::<Value>(put_scale(zero)).await.unwrap();
    assert_eq!(pools.get("p").await.unwrap().data["spec"]["replicas"], 0);
    let bad = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "p"}, "spec": {"replicas": "two"}});
    let (code, _) = api_code(&client.request::<Value>(put_scale(bad)).await.unwrap_err());
    assert_eq!(code, 422);
    // Strategic merge patch is not for custom resources.
    let (code, _) = api_code(
        &pools
            .patch("p", &PatchParams::default(), &Patch::Strategic(json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 415);
    // Deleting the CRD removes the resource.
    crds.delete("machinepools.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        api_code(&pools.list(&ListParams::default()).await.unwrap_err()).0,
        404
    );
}

#[tokio::test]
async fn server_side_apply_creates_updates_and_reports_conflicts() {
    let (_s, client) = start();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"owner": "a"}});
    cms.patch("ssa", &PatchParams::apply("manager-a"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    let cfg2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"owner": "b"}});
    let (code, reason) = api_code(
        &cms.patch(
            "ssa",
            &PatchParams::apply("manager-b"),
            &Patch::Apply(&cfg2),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    let forced = cms
        .patch(
            "ssa",
            &PatchParams::apply("manager-b").force(),
            &Patch::Apply(&cfg2),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["owner"], "b");
}

#[tokio::test(start_paused = true)]
async fn timestamps_follow_virtual_time() {
    let epoch = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let api = ApiServer::start(Clock::starting_at(epoch)).unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(api.client());
    let a = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap(),
        )
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(600)).await;
    let b = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "b"}})).unwrap(),
        )
        .await
        .unwrap();
    let ta = a.metadata.creation_timestamp.unwrap().0;
    let tb = b.metadata.creation_timestamp.unwrap().0;
    assert_eq!(tb.duration_since(ta).as_secs(), 600);
}

#[tokio::test]
async fn tls_endpoint_requires_the_token() {
    let api = ApiServer::start(Clock::new()).unwrap();
    let ep = api.serve_tls("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let client = ep.client().unwrap();
    let nss: Api<Namespace> = Api::all(client);
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for want in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    // Watch over TLS.
    let cms: Api<ConfigMap> = Api::default_namespaced(ep.client().unwrap());
    let mut w = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "tls"}})).unwrap(),
    )
    .await
    .unwrap();
    match tokio::time::timeout(Duration::from_secs(5), w.next()).await {
        Ok(Some(Ok(WatchEvent::Added(c)))) => assert_eq!(c.metadata.name.as_deref(), Some("tls")),
        other => panic!("{other:?}"),
    }
    // Without the token: 401.
    let mut cfg = kube::Config::new(ep.url.parse().unwrap());
    cfg.root_cert = Some(vec![ep.ca_der.clone()]);
    let anon = Client::try_from(cfg).unwrap();
    let nss: Api<Namespace> = Api::all(anon);
    assert_eq!(
        api_code(&nss.list(&ListParams::default()).await.unwrap_err()).0,
        401
    );
}

/// Every resource upstream Cluster Autoscaler (and the kube-scheduler
/// framework it embeds) lists and watches is served, so its informers sync.
#[tokio::test]
async fn the_resources_upstream_ca_watches_are_served() {
    let (_s, client) = start();
    let watched = [
        ("", "v1", "Pod", "pods"),
        ("", "v1", "Node", "nodes"),
        ("", "v1", "Namespace", "namespaces"),
        ("", "v1", "Service", "services"),
        ("", "v1", "PersistentVolume", "persistentvolumes"),
        ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
        ("", "v1", "ReplicationController", "replicationcontrollers"),
        ("", "v1", "ConfigMap", "configmaps"),
        ("apps", "v1", "ReplicaSet", "replicasets"),
        ("apps", "v1", "StatefulSet", "statefulsets"),
        ("apps", "v1", "DaemonSet", "daemonsets"),
        ("batch", "v1", "Job", "jobs"),
        (
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
        ),
        ("storage.k8s.io", "v1", "StorageClass", "storageclasses"),
        ("storage.k8s.io", "v1", "CSINode", "csinodes"),
        ("storage.k8s.io", "v1", "CSIDriver", "csidrivers"),
        (
            "storage.k8s.io",
            "v1",
            "CSIStorageCapacity",
            "csistoragecapacities",
        ),
        (
            "storage.k8s.io",
            "v1",
            "VolumeAttachment",
            "volumeattachments",
        ),
        ("resource.k8s.io", "v1", "DeviceClass", "deviceclasses"),
        ("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"),
        (
            "resource.k8s.io",
            "v1",
            "ResourceClaimTemplate",
            "resourceclaimtemplates",
        ),
        ("resource.k8s.io", "v1", "ResourceSlice", "resourceslices"),
    ];
    for (group, version, kind, plural) in watched {
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        if let Err(e) = api.list(&Default::default()).await {
            panic!("listing {plural}.{group}/{version}: {e}");
        }
    }
    let slices: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceSlice"),
            "resourceslices",
        ),
    );
    let slice: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "node-0-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-0",
            "pool": {"name": "node-0", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}]}
    }))
    .unwrap();
    slices.create(&PostParams::default(), &slice).await.unwrap();
    let got = slices.get("node-0-gpu").await.unwrap();
    assert_eq!(got.data["spec"]["devices"][0]["name"], "gpu-0");
}
