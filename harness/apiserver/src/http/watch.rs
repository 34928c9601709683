//! Watches: the initial state, then every change that passes the
//! selectors, with bookmarks, timeouts and the injected watch faults.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::json::Lookup;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde_json::{Value, json};

use super::request::{Ctx, bytes_response};
use crate::error::{ApiError, ApiResult, Cause};
use crate::faults::{self, Fault};
use crate::registry::ResourceDef;
use crate::server::{Filter, Server};
use crate::store::{ChangeType, StoreError, WatchFrom, WatchItem, WatcherId};
use crate::table;

/// Watch timeout when the client gives none (upstream: 30 to 60 minutes).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// Interval between bookmarks on watches that asked for them.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);

impl Ctx {
    /// Streams a watch on a collection.
    pub(super) fn watch(self, def: Arc<ResourceDef>, ns: Option<String>) -> ApiResult<Response> {
        let filter = Filter::parse(
            &def,
            self.param("labelSelector"),
            self.param("fieldSelector"),
        )?;
        self.validate_watch_options()?;
        let send_initial = self.flag("sendInitialEvents");
        let from =
            match self.param("resourceVersion") {
                _ if send_initial => WatchFrom::Now,
                None | Some("") | Some("0") => WatchFrom::Now,
                Some(rv) => WatchFrom::Version(rv.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?),
            };
        let timeout = match self.param("timeoutSeconds") {
            Some(t) => Duration::from_secs(
                t.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
            ),
            None => DEFAULT_WATCH_TIMEOUT,
        };
        let bookmarks = self.flag("allowWatchBookmarks");
        let server = self.server.clone();
        match self.watch_fault {
            Some(Fault::WatchGone) => return Ok(watch_gone(&server)),
            Some(Fault::WatchStall { millis }) => {
                let silent = millis.map_or(timeout, |m| timeout.min(Duration::from_millis(m)));
                return Ok(stalled_watch(silent));
            }
            _ => {}
        }
        let (id, rx, initial) = match server.store.watch(Some(def.gr()), ns.clone(), from) {
            Ok(watch) => watch,
            // As kube-apiserver's watch cache: the watch itself succeeds and
            // its one event is the 410 (`newErrWatcher`).
            Err(StoreError::Gone { requested, oldest }) => {
                if self.under_test {
                    server.count_expired_watch();
                }
                return Ok(error_event(&ApiError::gone(format!(
                    "too old resource version: {requested} ({oldest})"
                ))));
            }
            Err(other) => return Err(ApiError::internal(other.to_string())),
        };
        let start_rv = match from {
            WatchFrom::Version(rv) => rv,
            WatchFrom::Now => server.store.current_rv(),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let state = WatchState {
            guard: WatchGuard {
                server: server.clone(),
                id,
            },
            def,
            filter,
            table: self.wants_table,
            version: self.version.clone(),
            initial: initial.into_iter(),
            end_marker: send_initial && bookmarks,
            rx,
            deadline,
            bookmarks,
            next_bookmark: tokio::time::Instant::now() + BOOKMARK_INTERVAL,
            last_rv: start_rv,
            cuts: self.under_test.then(|| server.faults.cuts()),
        };
        let stream = futures::stream::unfold(state, |mut st| async move {
            let chunk = st.next_chunk().await?;
            Some((Ok::<Bytes, std::convert::Infallible>(chunk), st))
        });
        let body = Body::from_stream(stream.boxed());
        Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response())
    }
}

/// A watch answered at once with kube-apiserver's `ERROR` event for a
/// resourceVersion it no longer keeps (the client must list again).
fn watch_gone(server: &Server) -> Response {
    let rv = server.store.current_rv();
    error_event(&ApiError::gone(format!(
        "too old resource version: 1 ({rv})"
    )))
}

/// A watch whose only event is `ERROR` with `error`'s Status.
fn error_event(error: &ApiError) -> Response {
    let mut line =
        serde_json::to_vec(&json!({"type": "ERROR", "object": error.status()})).unwrap_or_default();
    line.push(b'\n');
    bytes_response(StatusCode::OK, Bytes::from(line))
}

impl Ctx {
    /// kube-apiserver's `validateWatchOptions` (WatchList on, as since 1.32):
    /// `sendInitialEvents` needs `resourceVersionMatch=NotOlderThan`, and
    /// `resourceVersionMatch` needs `sendInitialEvents` and no `continue`.
    fn validate_watch_options(&self) -> ApiResult<()> {
        const NOT_OLDER_THAN: &str = "NotOlderThan";
        let field = "resourceVersionMatch";
        let matched = self.param(field).unwrap_or("");
        let send_initial = self.param("sendInitialEvents").is_some();
        let mut causes = Vec::new();
        if send_initial && matched != NOT_OLDER_THAN {
            causes.push(Cause::forbidden(
                field,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !matched.is_empty() {
            if !send_initial {
                causes.push(Cause::forbidden(
                    field,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if matched != NOT_OLDER_THAN {
                causes.push(Cause {
                    reason: "FieldValueNotSupported",
                    message: format!(
                        "Unsupported value: {matched:?}: supported values: \"{NOT_OLDER_THAN}\""
                    ),
                    field: field.into(),
                });
            }
            if self.param("continue").is_some_and(|c| !c.is_empty()) {
                causes.push(Cause::forbidden(
                    field,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", causes))
        }
    }
}

/// A watch that sends nothing, not even bookmarks, for `silent`, then ends.
fn stalled_watch(silent: Duration) -> Response {
    let stream = futures::stream::once(async move {
        tokio::time::sleep(silent).await;
        Ok::<Bytes, std::convert::Infallible>(Bytes::new())
    });
    let body = Body::from_stream(stream.boxed());
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// Waits until the fault rules cut the watches on `resource`; never for a
/// watch that cannot be cut.
async fn cut(
    cuts: &mut Option<tokio::sync::watch::Receiver<(u64, Option<String>)>>,
    resource: &str,
) {
    let Some(rx) = cuts.as_mut() else {
        return std::future::pending().await;
    };
    loop {
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
        if rx
            .borrow_and_update()
            .1
            .as_deref()
            .is_none_or(|r| r == resource)
        {
            return;
        }
    }
}

/// Unregisters the watcher when the response body is dropped.
struct WatchGuard {
    server: Arc<Server>,
    id: WatcherId,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.server.store.unwatch(self.id);
    }
}

struct WatchState {
    guard: WatchGuard,
    def: Arc<ResourceDef>,
    filter: Filter,
    table: bool,
    version: String,
    initial: std::vec::IntoIter<Arc<crate::store::Stored>>,
    end_marker: bool,
    rx: tokio::sync::mpsc::UnboundedReceiver<WatchItem>,
    deadline: tokio::time::Instant,
    bookmarks: bool,
    next_bookmark: tokio::time::Instant,
    last_rv: u64,
    /// Cuts from the fault rules, for the client under test's watches.
    cuts: Option<tokio::sync::watch::Receiver<(u64, Option<String>)>>,
}

impl WatchState {
    fn encode(&self, out: &mut BytesMut, ty: &str, obj: &Bytes) {
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(ty.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        if self.table {
            let v: Value = serde_json::from_slice(obj).unwrap_or(Value::Null);
            let rv = v
                .lookup("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let t = table::table(&self.def, &[v], self.guard.server.clock.now(), rv, None);
            out.extend_from_slice(&serde_json::to_vec(&t).unwrap_or_default());
        } else if self.def.custom && self.def.versions.len() > 1 {
            let mut v: Value = serde_json::from_slice(obj).unwrap_or(Value::Null);
            v["apiVersion"] = json!(crate::registry::api_version(&self.def.group, &self.version));
            out.extend_from_slice(&serde_json::to_vec(&v).unwrap_or_default());
        } else {
            out.extend_from_slice(obj);
        }
        out.extend_from_slice(b"}\n");
    }

    fn bookmark(&self, out: &mut BytesMut, rv: u64, initial_end: bool) {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let ev = json!({"type": "BOOKMARK", "object": {"kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": meta}});
        out.extend_from_slice(&serde_json::to_vec(&ev).unwrap_or_default());
        out.extend_from_slice(b"\n");
    }

    /// Appends the event for one change, if the filter lets it through.
    fn change(&mut self, out: &mut BytesMut, item: WatchItem) {
        match item {
            WatchItem::Bookmark(rv) => {
                if self.bookmarks {
                    self.bookmark(out, rv.max(self.last_rv), false);
                }
            }
            WatchItem::Change(c) => {
                self.last_rv = c.rv;
                let now = self.filter.matches(&c.obj);
                let before = c.prev.as_ref().is_some_and(|p| self.filter.matches(p));
                let ty = match c.kind {
                    ChangeType::Added if now => "ADDED",
                    ChangeType::Modified if now && before => "MODIFIED",
                    ChangeType::Modified if now => "ADDED",
                    ChangeType::Modified if before => "DELETED",
                    ChangeType::Deleted if before => "DELETED",
                    _ => return,
                };
                self.encode(out, ty, &c.obj.json);
            }
        }
    }

    async fn next_chunk(&mut self) -> Option<Bytes> {
        let mut out = BytesMut::new();
        // Initial state first, in chunks.
        while out.len() < 256 * 1024 {
            let Some(o) = self.initial.next() else { break };
            if self.filter.matches(&o) {
                self.encode(&mut out, "ADDED", &o.json);
            }
        }
        if !out.is_empty() {
            return Some(out.freeze());
        }
        if self.end_marker {
            self.end_marker = false;
            self.bookmark(&mut out, self.last_rv, true);
            return Some(out.freeze());
        }
        loop {
            // In this order when several are ready at once: the same
            // chunks from one run to the next.
            tokio::select! {
                biased;
                item = self.rx.recv() => {
                    let item = item?;
                    self.change(&mut out, item);
                    while out.len() < 256 * 1024 {
                        match self.rx.try_recv() {
                            Ok(item) => self.change(&mut out, item),
                            Err(_) => break,
                        }
                    }
                    if !out.is_empty() {
                        return Some(out.freeze());
                    }
                }
                _ = tokio::time::sleep_until(self.deadline) => return None,
                () = cut(&mut self.cuts, &self.def.resource) => {
                    self.guard.server.faults.count(faults::WATCH_CUT, 1);
                    return None;
                }
                _ = tokio::time::sleep_until(self.next_bookmark), if self.bookmarks => {
                    self.next_bookmark = tokio::time::Instant::now() + BOOKMARK_INTERVAL;
                    self.guard.server.store.bookmark(self.guard.id);
                }
            }
        }
    }
}
