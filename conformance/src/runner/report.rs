//! The reports of a run: the summary table printed at the end, JUnit XML
//! and cucumber JSON ([`write_reports`]), and the `test result:` line.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::records::{ScenarioRecord, Status, Summary};

/// `1h02m03s`, `4m05s`, `12.3s`.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 3600 {
        format!("{}h{:02}m{:02}s", secs / 3600, secs % 3600 / 60, secs % 60)
    } else if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// The summary table printed at the end of a run.
pub fn table(summary: &Summary) -> String {
    let mut out = String::new();
    let width = summary
        .scenarios
        .iter()
        .map(|s| s.feature.chars().count() + s.name.chars().count() + 3)
        .max()
        .unwrap_or(8)
        .clamp(8, 110);
    let _ = writeln!(
        out,
        "\n{:<6}  {:<width$}  {:>13}  {:>9}",
        "Result", "Scenario", "Scenario time", "Wall"
    );
    let mut total = Duration::ZERO;
    for s in &summary.scenarios {
        total += s.scenario_time;
        let mut name = format!("{} › {}", s.feature, s.name);
        if name.chars().count() > width {
            name = name.chars().take(width - 1).collect::<String>() + "…";
        }
        let _ = writeln!(
            out,
            "{:<6}  {:<width$}  {:>13}  {:>8.2}s",
            if s.failure.is_none() { "ok" } else { "FAILED" },
            name,
            format_duration(s.scenario_time),
            s.wall.as_secs_f64()
        );
    }
    for e in &summary.parse_errors {
        let _ = writeln!(out, "FAILED  {e}");
    }
    let _ = writeln!(
        out,
        "\n{} scenarios: {} passed, {} failed; {} of scenario time in {:.1}s of wall time",
        summary.scenarios.len(),
        summary.passed(),
        summary.failed(),
        format_duration(total),
        summary.wall.as_secs_f64()
    );
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JUnit XML: a test suite per feature, a test case per scenario.
pub fn junit(summary: &Summary) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"conformance\" tests=\"{}\" failures=\"{}\" time=\"{:.3}\">",
        summary.scenarios.len() + summary.parse_errors.len(),
        summary.failed(),
        summary.wall.as_secs_f64()
    );
    let mut features: Vec<&str> = Vec::new();
    for s in &summary.scenarios {
        if !features.contains(&s.file.as_str()) {
            features.push(&s.file);
        }
    }
    for file in features {
        let cases: Vec<&ScenarioRecord> = summary
            .scenarios
            .iter()
            .filter(|s| s.file == file)
            .collect();
        let failures = cases.iter().filter(|s| s.failure.is_some()).count();
        let time: f64 = cases.iter().map(|s| s.wall.as_secs_f64()).sum();
        let name = cases.first().map(|s| s.feature.as_str()).unwrap_or("");
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" file=\"{}\" tests=\"{}\" failures=\"{failures}\" time=\"{time:.3}\">",
            xml_escape(name),
            xml_escape(file),
            cases.len()
        );
        for s in cases {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\" line=\"{}\" time=\"{:.3}\"",
                xml_escape(&s.name),
                xml_escape(&s.feature),
                xml_escape(file),
                s.line,
                s.wall.as_secs_f64()
            );
            match &s.failure {
                None => out.push_str("/>\n"),
                Some(why) => {
                    let first = why.lines().next().unwrap_or("");
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                        xml_escape(first),
                        xml_escape(why)
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    if !summary.skipped.is_empty() {
        let _ = writeln!(
            out,
            "  <testsuite name=\"skipped: the autoscaler under test lacks what they need, or they would last too long at their time scale\" tests=\"{n}\" failures=\"0\" skipped=\"{n}\">",
            n = summary.skipped.len()
        );
        for (name, why) in &summary.skipped {
            let _ = writeln!(
                out,
                "    <testcase name=\"{}\"><skipped message=\"{}\"/></testcase>",
                xml_escape(name),
                xml_escape(&why.join("; "))
            );
        }
        out.push_str("  </testsuite>\n");
    }
    for e in &summary.parse_errors {
        let _ = writeln!(
            out,
            "  <testsuite name=\"parse errors\" tests=\"1\" failures=\"1\">\n    <testcase name=\"parse\"><failure message=\"{}\"/></testcase>\n  </testsuite>",
            xml_escape(e)
        );
    }
    out.push_str("</testsuites>\n");
    out
}

fn slug(s: &str) -> String {
    s.to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '-' })
        .collect()
}

fn tag_list(tags: &[String], line: usize) -> Value {
    Value::Array(
        tags.iter()
            .map(|t| json!({"name": format!("@{t}"), "line": line}))
            .collect(),
    )
}

/// Cucumber JSON (the format of cucumber-jvm and cucumber-js reporters).
pub fn cucumber_json(summary: &Summary) -> Value {
    let mut features: Vec<Value> = Vec::new();
    let mut files: Vec<&str> = Vec::new();
    for s in &summary.scenarios {
        if !files.contains(&s.file.as_str()) {
            files.push(&s.file);
        }
    }
    for file in files {
        let cases: Vec<&ScenarioRecord> = summary
            .scenarios
            .iter()
            .filter(|s| s.file == file)
            .collect();
        let Some(first) = cases.first() else { continue };
        let fid = slug(&first.feature);
        let elements: Vec<Value> = cases
            .iter()
            .map(|s| {
                let steps: Vec<Value> = s
                    .steps
                    .iter()
                    .map(|st| {
                        let mut result = json!({"duration": u64::try_from(st.wall.as_nanos()).unwrap_or(u64::MAX)});
                        match &st.status {
                            Status::Passed => result["status"] = json!("passed"),
                            Status::Skipped => result["status"] = json!("skipped"),
                            Status::Failed(msg) => {
                                result["status"] = json!("failed");
                                result["error_message"] = json!(msg);
                            }
                        }
                        json!({"keyword": st.keyword, "name": st.text, "line": st.line, "result": result})
                    })
                    .collect();
                json!({"id": format!("{fid};{}", slug(&s.name)), "keyword": "Scenario", "type": "scenario",
                    "name": s.name, "line": s.line, "description": "", "tags": tag_list(&s.tags, s.line),
                    "steps": steps})
            })
            .collect();
        features.push(
            json!({"uri": file, "id": fid, "keyword": "Feature", "name": first.feature,
            "description": first.feature_description, "line": first.feature_line,
            "tags": tag_list(&first.feature_tags, first.feature_line), "elements": elements}),
        );
    }
    Value::Array(features)
}

/// Why the report files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The report directory or a file in it could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The directory or file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The cucumber JSON could not be encoded.
    #[error("encoding {}: {source}", path.display())]
    Encode {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// Writes `junit.xml`, `cucumber.json` and `summary.json` (the run's
/// records, which `testbed run merge` reads) into `dir`.
pub fn write_reports(dir: &Path, summary: &Summary) -> Result<(), ReportError> {
    let write = |path: &Path, text: String| {
        std::fs::write(path, text).map_err(|source| ReportError::Write {
            path: path.to_path_buf(),
            source,
        })
    };
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    write(&dir.join("junit.xml"), junit(summary))?;
    let encode = |path: PathBuf, value: serde_json::Result<String>| {
        value
            .map_err(|source| ReportError::Encode {
                path: path.clone(),
                source,
            })
            .and_then(|text| write(&path, text))
    };
    encode(
        dir.join("cucumber.json"),
        serde_json::to_string_pretty(&cucumber_json(summary)),
    )?;
    encode(
        dir.join("summary.json"),
        serde_json::to_string_pretty(summary),
    )
}

/// Each failed scenario and why, a line each (empty when none failed).
pub(super) fn failures(summary: &Summary) -> String {
    let mut out = String::new();
    for s in &summary.scenarios {
        if let Some(why) = &s.failure {
            let _ = writeln!(out, "FAILED {} › {}: {why}", s.feature, s.name);
        }
    }
    out
}

/// Prints the `test result:` line that `.ci/run` counts and returns the
/// exit code: 1 when a scenario failed or none ran. Each failure's step
/// and message come again just above it: a CI log cut to its tail still
/// says why.
pub fn test_result(summary: &Summary, what: &str) -> i32 {
    print!("{}", failures(summary));
    let failed = summary.failed();
    let verdict = if failed > 0 { "FAILED" } else { "ok" };
    println!(
        "test result: {verdict}. {} passed; {failed} failed; 0 ignored ({what})",
        summary.passed()
    );
    i32::from(failed > 0 || summary.scenarios.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::records::ScenarioRecord;

    #[test]
    fn failures_name_the_scenario_and_say_why() {
        let scenario = |name: &str, failure: Option<&str>| ScenarioRecord {
            feature: "Faults".into(),
            name: name.into(),
            failure: failure.map(String::from),
            ..ScenarioRecord::default()
        };
        let summary = Summary {
            scenarios: vec![
                scenario("passes", None),
                scenario("fails", Some("step \"Then x\" (line 3): no x")),
            ],
            ..Summary::default()
        };
        assert_eq!(
            failures(&summary),
            "FAILED Faults › fails: step \"Then x\" (line 3): no x\n"
        );
    }
}
