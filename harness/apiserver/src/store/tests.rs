//! The store's reads, writes, windows and indexes.

use super::*;
use crate::registry::Registry;
use serde_json::json;

fn cm(name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}, "data": {"k": data}})
}

fn labelled(name: &str, ns: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"), "labels": labels}})
}

#[test]
fn a_selection_through_the_label_index_is_what_a_scan_selects() {
    let reg = Registry::with_builtins();
    let def = reg.get("", "v1", "configmaps").unwrap();
    let s = Store::new(WindowPolicy::changes(10));
    for (name, ns, labels) in [
        ("a", "default", json!({"app": "web", "tier": "front"})),
        ("b", "default", json!({"app": "db"})),
        ("c", "default", json!({"app": "web"})),
        ("d", "default", json!({"tier": "front"})),
        ("e", "default", json!({"app": "cache", "tier": "back"})),
        ("f", "other", json!({"app": "web"})),
    ] {
        s.create(&def, labelled(name, ns, labels)).unwrap();
    }
    let selected = |selector: &str| -> Vec<String> {
        let sel = LabelSelector::parse(selector).unwrap();
        s.list_selected(&def.gr(), "default", &sel)
            .iter()
            .map(|o| o.name.clone())
            .collect()
    };
    for (selector, want) in [
        ("app=web", vec!["a", "c"]),
        ("app in (web,cache)", vec!["a", "c", "e"]),
        ("app=web,tier=front", vec!["a"]),
        ("tier,app in (db,cache)", vec!["e"]),
        ("app!=web", vec!["b", "d", "e"]),
        ("app=none", vec![]),
        ("", vec!["a", "b", "c", "d", "e"]),
    ] {
        assert_eq!(selected(selector), want, "{selector}");
    }
    // A relabelled object moves in the index; a deleted one leaves it.
    let c = s.get(&def.gr(), "default", "c").unwrap();
    s.update(&def, c.rv, labelled("c", "default", json!({"app": "db"})))
        .unwrap();
    s.delete(&def, "default", "a", None).unwrap();
    assert_eq!(selected("app=web"), Vec::<String>::new());
    assert_eq!(selected("app=db"), vec!["b", "c"]);
    assert!(
        s.list_selected(&def.gr(), "default", &LabelSelector::Nothing)
            .is_empty()
    );
}

#[test]
fn a_list_through_the_field_index_is_what_a_scan_lists() {
    let reg = Registry::with_builtins();
    let def = reg.get("", "v1", "pods").unwrap();
    let field = def
        .field_names()
        .iter()
        .position(|f| *f == "spec.nodeName")
        .unwrap();
    let s = Store::new(WindowPolicy::changes(10));
    let pod = |name: &str, ns: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}")},
            "spec": {"nodeName": node}})
    };
    s.create(&def, pod("a", "default", "n1")).unwrap();
    // Objects stored before the index is made are indexed too.
    s.index_field(&def.gr(), field);
    for (name, ns, node) in [
        ("b", "default", "n2"),
        ("c", "default", "n1"),
        ("d", "other", "n1"),
        ("e", "default", ""),
    ] {
        s.create(&def, pod(name, ns, node)).unwrap();
    }
    let listed = |ns: Option<&str>, node: &str, after: Option<&ObjKey>, limit: usize| {
        let keep = |o: &Stored| o.fields[field] == node;
        let by_index = s.list_page_where(&def.gr(), ns, after, limit, &[(field, node)], keep);
        let by_scan = s.list_page(&def.gr(), ns, after, limit, keep, false);
        let names = |p: &Page| -> Vec<String> {
            p.items
                .iter()
                .map(|o| format!("{}/{}", o.namespace, o.name))
                .collect()
        };
        assert_eq!(names(&by_index), names(&by_scan), "{ns:?} {node}");
        assert_eq!(by_index.more, by_scan.more, "{ns:?} {node}");
        names(&by_index)
    };
    assert_eq!(
        listed(None, "n1", None, 0),
        ["default/a", "default/c", "other/d"]
    );
    assert_eq!(
        listed(Some("default"), "n1", None, 0),
        ["default/a", "default/c"]
    );
    assert_eq!(listed(None, "", None, 0), ["default/e"]);
    assert_eq!(listed(None, "n3", None, 0), Vec::<String>::new());
    // Pages resume after the last key.
    assert_eq!(listed(None, "n1", None, 2), ["default/a", "default/c"]);
    let after = ("default".to_string(), "c".to_string());
    assert_eq!(listed(None, "n1", Some(&after), 2), ["other/d"]);
    // A pod bound elsewhere moves in the index; a deleted one leaves it.
    let e = s.get(&def.gr(), "default", "e").unwrap();
    s.update(&def, e.rv, pod("e", "default", "n1")).unwrap();
    s.delete(&def, "default", "a", None).unwrap();
    assert_eq!(
        listed(None, "n1", None, 0),
        ["default/c", "default/e", "other/d"]
    );
    assert_eq!(listed(None, "", None, 0), Vec::<String>::new());
    // ... and keeps no key for a value nothing has any more.
    assert!(s.lock().by_field[&def.gr()][0].keys("").is_none());
}

#[test]
fn resource_versions_increase_and_conflicts_are_detected() {
    let reg = Registry::with_builtins();
    let def = reg.get("", "v1", "configmaps").unwrap();
    let s = Store::new(WindowPolicy::changes(10));
    let a = s.create(&def, cm("a", "1")).unwrap();
    assert_eq!(a.rv, 1);
    assert_eq!(
        s.create(&def, cm("a", "1")).unwrap_err(),
        StoreError::AlreadyExists
    );
    let a2 = s.update(&def, 1, cm("a", "2")).unwrap();
    assert_eq!(a2.rv, 2);
    assert_eq!(
        s.update(&def, 1, cm("a", "3")).unwrap_err(),
        StoreError::Conflict(2)
    );
    // A no-op update keeps the resourceVersion.
    assert_eq!(s.update(&def, 2, cm("a", "2")).unwrap().rv, 2);
    let gone = s.delete(&def, "default", "a", None).unwrap();
    assert_eq!(gone.rv, 3);
    assert!(s.get(&def.gr(), "default", "a").is_none());
}

#[test]
fn watch_replays_history_then_live_in_order_and_expires_old_versions() {
    let reg = Registry::with_builtins();
    let def = reg.get("", "v1", "configmaps").unwrap();
    let s = Store::new(WindowPolicy::changes(3));
    for i in 0..5 {
        s.create(&def, cm(&format!("c{i}"), "x")).unwrap();
    }
    assert!(matches!(
        s.watch(Some(def.gr()), None, WatchFrom::Version(1)),
        Err(StoreError::Gone { .. })
    ));
    let (_, mut rx, initial) = s
        .watch(Some(def.gr()), None, WatchFrom::Version(3))
        .unwrap();
    assert!(initial.is_empty());
    s.create(&def, cm("c5", "x")).unwrap();
    let mut seen = Vec::new();
    while let Ok(WatchItem::Change(c)) = rx.try_recv() {
        seen.push(c.rv);
    }
    assert_eq!(seen, vec![4, 5, 6]);
    let (_, _, initial) = s
        .watch(Some(def.gr()), Some("default".into()), WatchFrom::Now)
        .unwrap();
    assert_eq!(initial.len(), 6);
}

#[test]
fn each_resource_keeps_its_own_window() {
    // kube-apiserver: one watch cache per resource; a busy resource does
    // not push a quiet one's changes out.
    let reg = Registry::with_builtins();
    let cms = reg.get("", "v1", "configmaps").unwrap();
    let secrets = reg.get("", "v1", "secrets").unwrap();
    let s = Store::new(WindowPolicy::changes(2));
    s.create(&secrets, cm("quiet", "x")).unwrap();
    for i in 0..5 {
        s.create(&cms, cm(&format!("c{i}"), "x")).unwrap();
    }
    assert!(
        s.watch(Some(secrets.gr()), None, WatchFrom::Version(0))
            .is_ok()
    );
    let Err(StoreError::Gone { requested, oldest }) =
        s.watch(Some(cms.gr()), None, WatchFrom::Version(2))
    else {
        panic!("a watch from before the window is gone");
    };
    // too old resource version: 2 (4): the oldest kept change is rv 5.
    assert_eq!((requested, oldest), (2, 4));
}

#[tokio::test(start_paused = true)]
async fn the_kube_apiserver_window_keeps_75_seconds_and_at_least_100() {
    let reg = Registry::with_builtins();
    let def = reg.get("", "v1", "configmaps").unwrap();
    let s = Store::new(WindowPolicy::KUBE_APISERVER);
    for i in 0..150 {
        s.create(&def, cm(&format!("c{i}"), "x")).unwrap();
    }
    // All 150 are younger than 75 s: a watch from the start resumes.
    assert!(s.watch(Some(def.gr()), None, WatchFrom::Version(0)).is_ok());
    tokio::time::advance(std::time::Duration::from_secs(76)).await;
    s.create(&def, cm("late", "x")).unwrap();
    // Past 75 s only the last 100 are kept.
    assert!(matches!(
        s.watch(Some(def.gr()), None, WatchFrom::Version(1)),
        Err(StoreError::Gone { oldest: 51, .. })
    ));
    assert!(
        s.watch(Some(def.gr()), None, WatchFrom::Version(51))
            .is_ok()
    );
}

#[test]
fn a_new_crd_window_starts_at_its_registration() {
    // kube-apiserver starts a CRD's watch cache when the CRD is
    // established: older versions are gone.
    let reg = Registry::with_builtins();
    let def = reg.get("", "v1", "configmaps").unwrap();
    let s = Store::new(WindowPolicy::changes(10));
    s.create(&def, cm("a", "x")).unwrap();
    s.create(&def, cm("b", "x")).unwrap();
    let widgets = GroupResource::new("example.com", "widgets");
    s.open_window(widgets.clone());
    assert!(matches!(
        s.watch(Some(widgets.clone()), None, WatchFrom::Version(1)),
        Err(StoreError::Gone { oldest: 2, .. })
    ));
    assert!(s.watch(Some(widgets), None, WatchFrom::Version(2)).is_ok());
}

#[test]
fn owner_index_tracks_dependents() {
    let reg = Registry::with_builtins();
    let def = reg.get("", "v1", "configmaps").unwrap();
    let s = Store::new(WindowPolicy::changes(10));
    let mut child = cm("child", "x");
    child["metadata"]["ownerReferences"] =
        json!([{"uid": "uid-parent", "name": "parent", "kind": "ConfigMap", "apiVersion": "v1"}]);
    s.create(&def, child).unwrap();
    assert_eq!(s.dependents("uid-parent").len(), 1);
    s.delete(&def, "default", "child", None).unwrap();
    assert!(s.dependents("uid-parent").is_empty());
}
