//! A watcher that checks the testbed's watch promise: every change of a
//! resource arrives, once, in resourceVersion order. It lists the resource,
//! watches it from the list's resourceVersion as any client does (again
//! from the last version seen when a watch ends at its timeout), and keeps
//! each object's name and resourceVersion. At the end, on a quiet cluster,
//! the view it built must equal a fresh list: an object missing, extra or
//! at another version means a change was lost on the way.
//!
//! `testbed bench` runs one on Pods and one on Nodes from before the
//! backlog until the autoscaler has stopped.

use std::collections::HashMap;
use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use harness::cluster::for_each_page;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a watch asks to stay open before it is made again.
const WATCH_SECONDS: u32 = 290;

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchReport {
    /// The resource checked (`Pod`, `Node`).
    pub kind: String,
    /// ADDED, MODIFIED and DELETED events received.
    pub events: u64,
    /// Events whose resourceVersion was not above the one before.
    pub out_of_order: u64,
    /// Watches answered 410 Gone (each followed by a list: changes between
    /// are not seen one by one).
    pub gone: u64,
    /// Objects in the final list.
    pub listed: usize,
    /// Objects whose name or version differs between the view and the
    /// final list (up to ten are named in `examples`).
    pub differ: usize,
    /// Some of the objects that differ, with what each side had.
    pub examples: Vec<String>,
}

impl WatchReport {
    /// Whether every change arrived, in order.
    pub fn holds(&self) -> bool {
        self.out_of_order == 0 && self.gone == 0 && self.differ == 0
    }
}

impl std::fmt::Display for WatchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} events, {} out of order, {} watches gone; view against a list of {}: {} differ",
            self.kind, self.events, self.out_of_order, self.gone, self.listed, self.differ
        )?;
        if !self.examples.is_empty() {
            write!(f, " ({})", self.examples.join("; "))?;
        }
        Ok(())
    }
}

/// The view a check builds: object key to resourceVersion.
#[derive(Debug, Default)]
struct View {
    objects: HashMap<String, u64>,
    last_rv: u64,
    events: u64,
    out_of_order: u64,
    gone: u64,
}

fn key_of<K: Resource>(o: &K) -> String {
    format!(
        "{}/{}",
        o.meta().namespace.as_deref().unwrap_or(""),
        o.meta().name.as_deref().unwrap_or("")
    )
}

fn rv_of<K: Resource>(o: &K) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl View {
    fn apply<K: Resource>(&mut self, o: &K, deleted: bool) {
        let rv = rv_of(o);
        self.events += 1;
        if rv <= self.last_rv {
            self.out_of_order += 1;
        }
        self.last_rv = self.last_rv.max(rv);
        if deleted {
            self.objects.remove(&key_of(o));
        } else {
            self.objects.insert(key_of(o), rv);
        }
    }
}

/// A running check; [`WatchCheck::finish`] stops it and compares.
pub struct WatchCheck<K> {
    client: Client,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<View, String>>,
    _kind: std::marker::PhantomData<K>,
}

impl<K> WatchCheck<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// Lists `K` and starts watching it.
    pub async fn start(client: &Client) -> Result<Self, String> {
        // The starting objects, and the list's version the watch goes on from.
        let mut view = View::default();
        relist::<K>(client, &mut view).await?;
        if view.last_rv == 0 {
            return Err(format!(
                "the list of {} has no resourceVersion",
                K::kind(&())
            ));
        }
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(follow::<K>(client.clone(), view, stopped));
        Ok(Self {
            client: client.clone(),
            stop,
            task,
            _kind: std::marker::PhantomData,
        })
    }

    /// Waits until no event has come for `quiet`, stops, lists `K` again
    /// and compares it with the view.
    pub async fn finish(self, quiet: Duration) -> Result<WatchReport, String> {
        let kind = K::kind(&()).to_string();
        // The watcher stops at the first quiet spell after this.
        tokio::time::sleep(quiet).await;
        let _ = self.stop.send(true);
        let view = self
            .task
            .await
            .map_err(|e| format!("the {kind} watch check: {e}"))??;
        let mut listed: HashMap<String, u64> = HashMap::new();
        for_each_page::<K>(&self.client, ListParams::default(), |page| {
            listed.extend(page.iter().map(|o| (key_of(o), rv_of(o))));
        })
        .await?;
        let mut examples = Vec::new();
        let mut differ = 0;
        for (k, rv) in &listed {
            let seen = view.objects.get(k);
            if seen != Some(rv) {
                differ += 1;
                if examples.len() < 10 {
                    examples.push(format!("{k}: listed at {rv}, watched {seen:?}"));
                }
            }
        }
        for (k, rv) in &view.objects {
            if !listed.contains_key(k) {
                differ += 1;
                if examples.len() < 10 {
                    examples.push(format!("{k}: not listed, watched at {rv}"));
                }
            }
        }
        Ok(WatchReport {
            kind,
            events: view.events,
            out_of_order: view.out_of_order,
            gone: view.gone,
            listed: listed.len(),
            differ,
            examples,
        })
    }
}

/// Replaces the view's objects with a list, and its version with the
/// list's.
async fn relist<K>(client: &Client, view: &mut View) -> Result<(), String>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    view.objects.clear();
    let objects = &mut view.objects;
    let version = for_each_page::<K>(client, ListParams::default(), |page| {
        for o in &page {
            objects.insert(key_of(o), rv_of(o));
        }
    })
    .await?;
    if let Some(rv) = version.as_deref().and_then(|v| v.parse().ok()) {
        view.last_rv = view.last_rv.max(rv);
    }
    Ok(())
}

/// Follows the watch until told to stop and a second passes without an
/// event; a watch that ends is made again from the last version seen.
async fn follow<K>(
    client: Client,
    mut view: View,
    mut stopped: watch::Receiver<bool>,
) -> Result<View, String>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + 'static,
{
    const IDLE: Duration = Duration::from_secs(1);
    let api = Api::<K>::all(client.clone());
    loop {
        let wp = WatchParams::default().timeout(WATCH_SECONDS);
        let mut stream = api
            .watch(&wp, &view.last_rv.to_string())
            .await
            .map_err(|e| format!("watching {}: {e}", K::kind(&())))?
            .boxed();
        loop {
            let next = if *stopped.borrow() {
                match tokio::time::timeout(IDLE, stream.next()).await {
                    Ok(next) => next,
                    Err(_) => return Ok(view),
                }
            } else {
                tokio::select! {
                    next = stream.next() => next,
                    _ = stopped.changed() => continue,
                }
            };
            match next {
                Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => view.apply(&o, false),
                Some(Ok(WatchEvent::Deleted(o))) => view.apply(&o, true),
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    if let Ok(rv) = b.metadata.resource_version.parse::<u64>() {
                        view.last_rv = view.last_rv.max(rv);
                    }
                }
                // The changes since the last version seen are gone: the
                // check fails, and goes on from a new list.
                Some(Ok(WatchEvent::Error(e))) if e.code == 410 => {
                    view.gone += 1;
                    relist::<K>(&client, &mut view).await?;
                    break;
                }
                Some(Ok(WatchEvent::Error(e))) => {
                    return Err(format!("the {} watch failed: {e:?}", K::kind(&())));
                }
                Some(Err(e)) => return Err(format!("the {} watch failed: {e}", K::kind(&()))),
                // Ended at its timeout: watch again from the last version.
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn cm(name: &str, rv: u64) -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "d",
            "resourceVersion": rv.to_string()}}))
        .unwrap()
    }

    #[test]
    fn a_view_counts_events_out_of_order_and_forgets_deleted_objects() {
        let mut v = View {
            last_rv: 10,
            ..View::default()
        };
        v.apply(&cm("a", 11), false);
        v.apply(&cm("b", 12), false);
        v.apply(&cm("a", 12), false);
        v.apply(&cm("b", 13), true);
        assert_eq!(v.events, 4);
        assert_eq!(v.out_of_order, 1);
        assert_eq!(v.objects.get("d/a"), Some(&12));
        assert!(!v.objects.contains_key("d/b"));
    }
}
