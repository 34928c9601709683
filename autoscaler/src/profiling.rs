//! `--profiling`: the debugging endpoints under `/debug/pprof/` on
//! `--address`, in this process's terms. Upstream serves Go's pprof
//! (goroutines, heap, CPU profiles); a Rust process has neither goroutines
//! nor Go's heap profiler, so each name serves what stands for it here, as
//! plain text:
//!
//! - `heap`: the process's memory as the kernel counts it
//!   (`/proc/self/status`: resident, peak, virtual, anonymous);
//! - `goroutine`: the async runtime's workers, live tasks and queued
//!   tasks;
//! - `threadcreate`: the process's threads by name.
//!
//! `profile` and `trace` (CPU profiles) answer 501 and say how to take one
//! with `perf`: sampling needs a profiler this build does not carry. Other
//! names answer 404 `Unknown profile`, as upstream's index does, and
//! `/debug/pprof` redirects to `/debug/pprof/`.

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The names the index lists, with what each serves.
const PROFILES: [(&str, &str); 3] = [
    (
        "goroutine",
        "the async runtime's workers, live tasks and queued tasks",
    ),
    ("heap", "the process's memory (/proc/self/status)"),
    ("threadcreate", "the process's threads by name"),
];

/// The routes, to merge into the endpoints' router.
pub fn routes() -> Router {
    Router::new()
        .route(
            "/debug/pprof",
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/debug/pprof/")]) }),
        )
        .route(
            "/debug/pprof/",
            get(|| async { text(StatusCode::OK, index()) }),
        )
        .route("/debug/pprof/{name}", get(profile))
}

fn text(code: StatusCode, body: String) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

fn index() -> String {
    let mut out = String::from("/debug/pprof/\n\nProfiles:\n");
    for (name, what) in PROFILES {
        out.push_str(&format!("  {name}: {what}\n"));
    }
    out.push_str("\nprofile, trace: not served (CPU profiles: perf record -g -p <pid>)\n");
    out
}

async fn profile(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "heap" => text(StatusCode::OK, heap()),
        "goroutine" => text(StatusCode::OK, runtime()),
        "threadcreate" => text(StatusCode::OK, threads()),
        "profile" | "trace" => text(
            StatusCode::NOT_IMPLEMENTED,
            format!(
                "{name}: CPU profiles are not served by this build; take one with `perf record -g -p {}`\n",
                std::process::id()
            ),
        ),
        _ => text(StatusCode::NOT_FOUND, "Unknown profile\n".into()),
    }
}

/// The memory lines of `/proc/self/status`.
fn heap() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let lines: Vec<&str> = status
        .lines()
        .filter(|l| {
            [
                "VmRSS", "VmHWM", "VmSize", "VmPeak", "RssAnon", "RssFile", "VmData",
            ]
            .iter()
            .any(|k| l.starts_with(&format!("{k}:")))
        })
        .collect();
    if lines.is_empty() {
        return "heap: /proc/self/status is not readable here\n".into();
    }
    lines.join("\n") + "\n"
}

/// The async runtime's counts.
fn runtime() -> String {
    match tokio::runtime::Handle::try_current() {
        Ok(h) => {
            let m = h.metrics();
            format!(
                "workers: {}\nalive tasks: {}\nglobal queue depth: {}\n",
                m.num_workers(),
                m.num_alive_tasks(),
                m.global_queue_depth()
            )
        }
        Err(e) => format!("no async runtime: {e}\n"),
    }
}

/// The threads of the process, by name.
fn threads() -> String {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return "threads: /proc/self/task is not readable here\n".into();
    };
    let mut names: Vec<String> = dir
        .flatten()
        .map(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .map(|n| n.trim().to_string())
                .unwrap_or_default()
        })
        .collect();
    names.sort();
    format!("threads: {}\n{}\n", names.len(), names.join("\n"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get(path: &str) -> (u16, String) {
        let req = axum::http::Request::builder()
            .uri(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = routes().oneshot(req).await.unwrap();
        let code = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (code, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn each_profile_name_serves_what_stands_for_it() {
        let (code, body) = get("/debug/pprof/heap").await;
        assert_eq!(code, 200);
        assert!(body.contains("VmRSS:"), "{body}");
        let (code, body) = get("/debug/pprof/goroutine").await;
        assert_eq!(code, 200);
        assert!(body.contains("alive tasks:"), "{body}");
        assert_eq!(get("/debug/pprof/profile").await.0, 501);
        assert_eq!(
            get("/debug/pprof/cmdline").await,
            (404, "Unknown profile\n".into())
        );
        assert_eq!(get("/debug/pprof").await.0, 302);
        assert!(get("/debug/pprof/").await.1.contains("threadcreate"));
    }
}
