//! Bad input is refused before anything runs, with the file, the object
//! and the field.

use std::path::PathBuf;
use std::time::Duration;

use whatif::flags::Flags;
use whatif::{SideSpec, WhatIf};

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("writes");
    p
}

fn shop() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/shop.json")
}

fn error(w: WhatIf) -> String {
    match whatif::run(&w) {
        Ok(_) => panic!("the what-if ran on bad input"),
        Err(e) => e.to_string(),
    }
}

fn what_if(inputs: Vec<PathBuf>) -> WhatIf {
    WhatIf {
        inputs,
        kubeconfig: None,
        recording: None,
        flags: Flags::default(),
        sides: Vec::new(),
        group_label: None,
        duration: Duration::from_secs(60),
        seed: 0,
        timeline: Default::default(),
        prices: Default::default(),
        parallel: 1,
        sweep: Vec::new(),
        case: None,
    }
}

#[test]
fn a_truncated_dump_is_refused_with_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(shop()).expect("reads");
    let cut = write(&dir, "cut.json", &text[..text.len() / 2]);
    let e = error(what_if(vec![cut.clone()]));
    assert!(
        e.starts_with(&format!("{}: line ", cut.display())) && e.contains("not valid JSON"),
        "{e}"
    );
}

#[test]
fn an_object_without_a_name_is_refused_with_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        &dir,
        "pods.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {namespace: default}\nspec: {containers: [{name: c, image: i}]}\n",
    );
    assert_eq!(
        error(what_if(vec![f.clone()])),
        format!(
            "{}: Pod at document 2: field metadata.name: missing",
            f.display()
        )
    );
}

#[test]
fn a_garbled_field_is_refused_with_the_object() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        &dir,
        "nodes.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: [4, 16Gi]}\n",
    );
    assert_eq!(
        error(what_if(vec![f.clone()])),
        format!(
            "{}: Node a: field status.allocatable: not a map of quantities",
            f.display()
        )
    );
}

#[test]
fn a_pod_bound_to_a_node_not_in_the_input_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        &dir,
        "pods.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: shop}\nspec: {nodeName: b, containers: [{name: c, image: i}]}\n",
    );
    assert_eq!(
        error(what_if(vec![f.clone()])),
        format!(
            "{}: Pod shop/p: field spec.nodeName: node b is not in the input",
            f.display()
        )
    );
}

#[test]
fn a_group_label_that_matches_no_node_is_refused() {
    let e = error(WhatIf {
        group_label: Some("pool".into()),
        ..what_if(vec![shop()])
    });
    assert!(
        e.starts_with("--group-label pool: no node has this label (labels on the nodes: "),
        "{e}"
    );
}

#[test]
fn two_sides_with_the_same_flags_are_refused() {
    let flags = |s: &str| {
        Flags::parse(
            "t",
            &s.split_whitespace().map(str::to_string).collect::<Vec<_>>(),
        )
        .expect("parses")
    };
    let e = error(WhatIf {
        sides: vec![
            SideSpec {
                name: "a".into(),
                flags: flags("--expander=random --scale-down-delay-after-add=5m"),
                binary: None,
            },
            SideSpec {
                name: "b".into(),
                flags: flags("--scale-down-delay-after-add=5m --expander=random"),
                binary: None,
            },
        ],
        ..what_if(vec![shop()])
    });
    assert!(e.starts_with("sides a and b have the same flags"), "{e}");
}

#[test]
fn a_flag_the_autoscaler_does_not_know_is_refused_naming_the_side() {
    let e = error(WhatIf {
        sides: vec![SideSpec {
            name: "typo".into(),
            flags: Flags::parse("t", &["--scale-down-utilisation-threshold=0.3".to_string()])
                .expect("parses"),
            binary: None,
        }],
        ..what_if(vec![shop()])
    });
    assert!(e.starts_with("side typo: starting the autoscaler: "), "{e}");
    assert!(e.contains("scale-down-utilisation-threshold"), "{e}");
}
