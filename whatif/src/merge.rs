//! `testbed whatif merge`: one report from the reports of a sweep's cases
//! run apart (`--case`, the pods of an `--emit-job` Job). The cases must
//! be of one sweep (the same schema, input, groups, length, seed, prices,
//! timeline and swept values) and together be all of it, each once; the
//! merged report is the one the sweep run at once writes: the sides in
//! case order, each against the first, and the Pareto front over all.

use std::path::{Path, PathBuf};

use crate::report::{Report, SCHEMA};

/// Why reports could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A file could not be read.
    #[error("reading {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not a what-if report.
    #[error("{file}: not a what-if report: {why}")]
    NotReport {
        /// The file.
        file: String,
        /// Why.
        why: String,
    },
    /// A path holds no report.
    #[error(transparent)]
    Find(#[from] harness::indexed_job::FindError),
    /// No path was given.
    #[error("no report to merge")]
    Empty,
    /// A report of another schema.
    #[error("{file}: schema {found}, this testbed reads {SCHEMA}")]
    Schema {
        /// The file.
        file: String,
        /// Its schema.
        found: String,
    },
    /// A report that is not of a sweep's case.
    #[error("{0}: not a sweep's report (run with --sweep)")]
    NotSweep(String),
    /// Reports of two different runs.
    #[error("{file}: its {what} differs from {first}'s: not the same sweep")]
    Differs {
        /// The file.
        file: String,
        /// What differs.
        what: &'static str,
        /// The first report.
        first: String,
    },
    /// A case given twice.
    #[error("case {index} is in both {first} and {second}")]
    Twice {
        /// The case.
        index: usize,
        /// One report.
        first: String,
        /// The other.
        second: String,
    },
    /// Cases missing.
    #[error("{found} of {cases} cases found; missing: {missing}")]
    Missing {
        /// Found.
        found: usize,
        /// In the sweep.
        cases: usize,
        /// The indices missing.
        missing: String,
    },
    /// The sweep's values do not make cases.
    #[error(transparent)]
    Sweep(#[from] crate::sweep::SweepError),
}

/// Reads one report.
fn read(file: &Path) -> Result<Report, MergeError> {
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file).map_err(|source| MergeError::Read {
        file: name.clone(),
        source,
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| MergeError::NotReport {
            file: name.clone(),
            why: e.to_string(),
        })?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => {}
        Some(other) => {
            return Err(MergeError::Schema {
                file: name,
                found: other.to_string(),
            });
        }
        None => {
            return Err(MergeError::NotReport {
                file: name,
                why: "it has no schema".into(),
            });
        }
    }
    serde_json::from_value(value).map_err(|e| MergeError::NotReport {
        file: name,
        why: e.to_string(),
    })
}

/// The merged report of the case reports under `paths`.
pub fn merge(paths: &[PathBuf]) -> Result<Report, MergeError> {
    let files = harness::indexed_job::reports_under(paths, "report.json")?;
    let mut reports = Vec::with_capacity(files.len());
    for f in &files {
        let report = read(f)?;
        if report.sweep.is_none() {
            return Err(MergeError::NotSweep(f.display().to_string()));
        }
        reports.push((f.display().to_string(), report));
    }
    let Some((first_file, first)) = reports.first() else {
        return Err(MergeError::Empty);
    };
    let dimensions = first
        .sweep
        .as_ref()
        .map(|s| s.dimensions.clone())
        .unwrap_or_default();
    let shared = |r: &Report| -> Vec<(&'static str, String)> {
        let json = |v: serde_json::Result<String>| v.unwrap_or_default();
        vec![
            ("input", json(serde_json::to_string(&r.coverage))),
            ("node groups", json(serde_json::to_string(&r.groups))),
            ("length", r.duration_seconds.to_string()),
            ("seed", r.seed.to_string()),
            ("prices", json(serde_json::to_string(&r.prices))),
            ("timeline", json(serde_json::to_string(&r.timeline))),
            ("recording", json(serde_json::to_string(&r.recorded))),
            (
                "swept values",
                json(serde_json::to_string(
                    &r.sweep.as_ref().map(|s| &s.dimensions),
                )),
            ),
        ]
    };
    let expected = shared(first);
    let first_file = first_file.clone();
    for (file, r) in &reports[1..] {
        if let Some((what, _)) = shared(r)
            .into_iter()
            .zip(&expected)
            .find(|(a, b)| a != *b)
            .map(|(a, _)| a)
        {
            return Err(MergeError::Differs {
                file: file.clone(),
                what,
                first: first_file,
            });
        }
    }
    let cases = crate::sweep::cases(&dimensions)?.len();
    // Each case's side, by index.
    let mut by_index: Vec<Option<(String, crate::report::Side)>> =
        (0..cases).map(|_| None).collect();
    let mut base = None;
    for (file, r) in reports {
        let rows = r.sweep.map(|s| s.cases).unwrap_or_default();
        for (row, side) in rows.into_iter().zip(r.sides) {
            let slot = by_index
                .get_mut(row.index)
                .ok_or(crate::sweep::SweepError::NoCase {
                    index: row.index,
                    cases,
                })?;
            if let Some((first, _)) = slot {
                return Err(MergeError::Twice {
                    index: row.index,
                    first: first.clone(),
                    second: file,
                });
            }
            *slot = Some((file.clone(), side));
        }
        if base.is_none() {
            base = Some((
                r.coverage,
                r.duration_seconds,
                r.seed,
                r.prices,
                r.timeline,
                r.groups,
                r.recorded,
            ));
        }
    }
    let missing: Vec<String> = by_index
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing {
            found: cases - missing.len(),
            cases,
            missing: missing.join(", "),
        });
    }
    let sides: Vec<crate::report::Side> = by_index.into_iter().flatten().map(|(_, s)| s).collect();
    let differences = sides
        .iter()
        .skip(1)
        .map(|s| crate::report::difference(&sides[0], s))
        .collect();
    let indices: Vec<usize> = (0..cases).collect();
    let sweep = crate::sweep::summarize(&dimensions, &indices, &sides)?;
    let Some((coverage, duration_seconds, seed, prices, timeline, groups, recorded)) = base else {
        return Err(MergeError::Empty);
    };
    Ok(Report {
        schema: SCHEMA.to_string(),
        coverage,
        duration_seconds,
        seed,
        prices,
        timeline,
        groups,
        sides,
        differences,
        sweep: Some(sweep),
        recorded,
    })
}
