//! The metric reference, `docs/reference/metrics.md`, rendered from the
//! registry itself: every metric [`Metrics::new`] registers
//! ([`Metrics::described`]), with its type and help, the labels of the
//! series it starts with (from `/metrics`'s text), and whether it needs
//! `--emit-per-nodegroup-metrics`. A test in
//! `conformance/tests/checks/docs.rs` compares the document with [`markdown`].

use std::collections::{BTreeMap, BTreeSet};

use super::Metrics;

/// The label names of the series each family of an OpenMetrics text
/// starts with, by family name (with its prefix).
fn starting_labels(text: &str, names: &[String]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((sample, labels)) = line.split_once('{') else {
            continue;
        };
        // A counter's samples end in `_total`, a histogram's in `_bucket`,
        // `_sum` and `_count`: the longest family name they start with.
        let Some(family) = names
            .iter()
            .filter(|n| sample.starts_with(n.as_str()))
            .max_by_key(|n| n.len())
        else {
            continue;
        };
        let labels = labels.split('}').next().unwrap_or_default();
        out.entry(family.clone()).or_default().extend(
            labels
                .split(',')
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, _)| k.to_string())
                .filter(|k| k != "le"),
        );
    }
    out
}

/// `docs/reference/metrics.md`.
pub fn markdown() -> String {
    let all = Metrics::new(true);
    let always: BTreeSet<&str> = Metrics::new(false)
        .described()
        .iter()
        .map(|d| d.name)
        .collect();
    let mut described: Vec<&super::Described> = all.described().iter().collect();
    described.sort_by_key(|d| d.name);
    let names: Vec<String> = described
        .iter()
        .map(|d| format!("{PREFIX}{}", d.name))
        .collect();
    let labels = starting_labels(&all.encode(), &names);
    let mut out = String::from("# Metrics\n\n");
    out.push_str(
        "Every metric `cluster-autoscaler` serves on `/metrics` (at `--address`, `:8085` by \
         default), read from its registry (`autoscaler/src/metrics/mod.rs`): name, type and \
         help as registered, the labels of the series it starts with (a family that starts \
         with none shows its labels once it has a series: see \
         [Metrics, events and the status ConfigMap](../operators/observability.md)), and \
         whether it needs `--emit-per-nodegroup-metrics`. Counters are served with the \
         `_total` suffix. Generated: `UPDATE_REFERENCE=1 cargo test -p conformance --test \
         docs` writes it, and the same test fails when it differs from the code.\n\n",
    );
    out.push_str(&format!(
        "{} metrics, {} of them only with `--emit-per-nodegroup-metrics`.\n\n",
        described.len(),
        described
            .iter()
            .filter(|d| !always.contains(d.name))
            .count()
    ));
    out.push_str("| metric | type | starting labels | description |\n|---|---|---|---|\n");
    for (d, name) in described.iter().zip(&names) {
        let per_group = if always.contains(d.name) {
            ""
        } else {
            " (with `--emit-per-nodegroup-metrics`)"
        };
        let labels = labels
            .get(name)
            .map(|l| {
                l.iter()
                    .map(|l| format!("`{l}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "| `{name}` | {} | {labels} | {}{per_group} |\n",
            d.kind,
            d.help.replace('|', "\\|"),
        ));
    }
    out
}

/// The prefix of every metric's name.
const PREFIX: &str = "cluster_autoscaler_";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starting_labels_take_the_label_names_of_each_family() {
        let text = "# TYPE cluster_autoscaler_nodes_count gauge\n\
                    cluster_autoscaler_nodes_count{state=\"ready\"} 0\n\
                    cluster_autoscaler_errors_total{type=\"cloudProviderError\"} 1\n\
                    cluster_autoscaler_errors_total{type=\"apiCallError\",x=\"1\"} 1\n";
        let names = vec![
            "cluster_autoscaler_nodes_count".to_string(),
            "cluster_autoscaler_errors".to_string(),
        ];
        let labels = starting_labels(text, &names);
        assert_eq!(
            labels["cluster_autoscaler_nodes_count"],
            BTreeSet::from(["state".to_string()])
        );
        assert_eq!(
            labels["cluster_autoscaler_errors"],
            BTreeSet::from(["type".to_string(), "x".to_string()])
        );
    }

    #[test]
    fn the_reference_lists_every_registered_metric() {
        let doc = markdown();
        let all = Metrics::new(true);
        assert!(all.described().len() > 25, "{}", all.described().len());
        for d in all.described() {
            let row = format!("| `{PREFIX}{}` | {} |", d.name, d.kind);
            assert!(doc.contains(&row), "{row} missing");
        }
        assert!(doc.contains("`cluster_autoscaler_node_group_min_count` | gauge"));
        assert!(doc.contains("(with `--emit-per-nodegroup-metrics`)"));
    }
}
