//! Where this run's clusters run ([`configure_backend`]), and the steps a
//! backend other than the embedded one cannot take.

use std::sync::OnceLock;

use super::errors::StartError;

/// Where this run's clusters run: a [`harness::backend`] name and an image
/// for the container backends.
#[derive(Debug, Clone, Default)]
pub struct BackendChoice {
    /// `embedded`, `testbed`, `kwok` or `kind`.
    pub name: String,
    /// The image, instead of the backend's default.
    pub image: Option<String>,
}

static BACKEND: OnceLock<BackendChoice> = OnceLock::new();

/// Sets where this process's clusters run (once; later calls are ignored
/// and return false). Without it: the embedded cluster.
pub fn configure_backend(choice: BackendChoice) -> bool {
    BACKEND.set(choice).is_ok()
}

/// The backend configured for this run.
pub fn backend() -> Result<Box<dyn harness::backend::ClusterBackend>, StartError> {
    match BACKEND.get() {
        Some(c) => harness::backend::by_name(&c.name, c.image.as_deref()).map_err(|e| {
            StartError::Backend {
                name: c.name.clone(),
                reason: e.to_string(),
            }
        }),
        None => Ok(Box::new(harness::backend::Embedded)),
    }
}

/// Steps that need this suite's kwok Stages
/// ([`super::stages::not_ready_stage`],
/// [`super::stages::graceful_termination_stage`]), which only our kwok
/// reads from the cluster (embedded and testbed image); on another backend
/// a scenario with one is skipped with this reason.
pub const STAGE_STEPS: [(&str, &str); 2] = [
    (
        r#"^new nodes of "\S+" never become ready$"#,
        "keeps nodes NotReady through a kwok Stage of the suite's, which only the testbed's kwok reads",
    ),
    (
        r#"^\d+ nodes? of "\S+" becomes? NotReady$"#,
        "makes nodes NotReady through a kwok Stage of the suite's, which only the testbed's kwok reads",
    ),
];

/// Steps that need the embedded API server in this process (its fault
/// rules, [`crate::steps::faults`]; its log of writes, [`crate::replicas`]);
/// on any other backend a scenario with one is skipped with this reason.
pub const EMBEDDED_STEPS: [(&str, &str); 2] = [
    (
        r"^the API server (answers|times out|adds|stalls|cuts|injects|injected)",
        "injects API faults, which only the embedded API server can",
    ),
    (
        r"replicas? (with leader election|is killed|acted)",
        "tells replicas apart by the embedded API server's log of writes",
    ),
];

/// Why the configured backend cannot run a scenario of these steps (none: it can).
pub fn backend_unmet<'a>(step_texts: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let name = BACKEND.get().map_or("embedded", |c| c.name.as_str());
    let mut rules: Vec<(&str, &str)> = Vec::new();
    if !backend_reads_stages() {
        rules.extend(STAGE_STEPS);
    }
    if name != "embedded" {
        rules.extend(EMBEDDED_STEPS);
    }
    let mut unmet = Vec::new();
    for text in step_texts {
        for &(pattern, why) in &rules {
            if regex::Regex::new(pattern).is_ok_and(|re| re.is_match(text)) {
                unmet.push(format!("the {name} backend: {why}"));
            }
        }
    }
    unmet.dedup();
    unmet
}

/// Whether the configured backend's kwok reads Stage objects from the cluster.
pub fn backend_reads_stages() -> bool {
    BACKEND
        .get()
        .is_none_or(|c| matches!(c.name.as_str(), "embedded" | "testbed"))
}
