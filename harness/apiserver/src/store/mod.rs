//! The one store: every object of every resource, one monotonically
//! increasing resourceVersion, a window of recent changes per resource
//! ([`crate::window`]), and watchers fed in commit order.
//!
//! Objects are kept serialized (`Bytes`) with the few parsed facts that
//! selection needs (labels, selectable fields, owner uids). A commit happens
//! under one lock: it assigns the next resourceVersion, serializes the object,
//! appends the change to its resource's window and hands it to every watcher's
//! unbounded channel before the lock is released. Watchers therefore see every
//! change of a key exactly once and in order, and a watch that starts from a
//! resourceVersion replays the window from there atomically with
//! registering for live changes.
//!
//! [`index`] keeps objects by label and by selected field values, so a
//! selection reads the objects it may match rather than the resource.

mod index;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use apimachinery::labels::LabelSelector;
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::registry::{GroupResource, ResourceDef};
use crate::window::{Versioned, Window, WindowPolicy};
use index::{FieldIndex, LabelIndex};

/// (namespace, name); namespace is empty for cluster-scoped objects.
pub type ObjKey = (String, String);

/// One stored object.
#[derive(Debug)]
pub struct Stored {
    /// Namespace (empty when cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion` as a number.
    pub rv: u64,
    /// The object's JSON, with `metadata.resourceVersion` set.
    pub json: Bytes,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// Selectable field values, aligned with the resource's field table.
    pub fields: Vec<String>,
    /// uids of `metadata.ownerReferences`.
    pub owners: Vec<String>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl Stored {
    /// Parses the stored JSON.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }
}

/// A page of a list ([`Store::list_page`]).
#[derive(Debug)]
pub struct Page {
    /// The resourceVersion the page was read at.
    pub rv: u64,
    /// The objects of the page.
    pub items: Vec<Arc<Stored>>,
    /// Whether accepted objects follow the page.
    pub more: bool,
    /// When more follow and the count was asked for: how many objects,
    /// accepted or not, from the first one left out to the end.
    pub rest: Option<usize>,
}

impl Page {
    fn empty(rv: u64) -> Self {
        Self {
            rv,
            items: Vec::new(),
            more: false,
            rest: None,
        }
    }

    /// The page of `objects` (in key order) that `keep` accepts, at most
    /// `limit` of them (0: no limit). A cut page has read one accepted
    /// object past its end; `objects` goes on after it.
    fn fill<'a>(
        rv: u64,
        objects: &mut impl Iterator<Item = &'a Arc<Stored>>,
        limit: usize,
        keep: impl Fn(&Stored) -> bool,
    ) -> Self {
        let mut page = Self::empty(rv);
        for o in objects.by_ref() {
            if !keep(o) {
                continue;
            }
            if limit > 0 && page.items.len() == limit {
                page.more = true;
                break;
            }
            page.items.push(o.clone());
        }
        page
    }
}

/// Kind of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted.
    Deleted,
}

/// One committed change.
#[derive(Debug)]
pub struct Change {
    /// resourceVersion of the commit.
    pub rv: u64,
    /// The resource changed.
    pub gr: GroupResource,
    /// Created, updated or deleted.
    pub kind: ChangeType,
    /// The object after the change (for deletes: its last state at the delete's resourceVersion).
    pub obj: Arc<Stored>,
    /// The object before the change (updates and deletes).
    pub prev: Option<Arc<Stored>>,
}

impl Versioned for Change {
    fn rv(&self) -> u64 {
        self.rv
    }
}

/// What a watcher receives.
#[derive(Debug, Clone)]
pub enum WatchItem {
    /// A committed change.
    Change(Arc<Change>),
    /// Every change up to this resourceVersion has been delivered.
    Bookmark(u64),
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No such object.
    #[error("not found")]
    NotFound,
    /// An object with this key exists.
    #[error("already exists")]
    AlreadyExists,
    /// The object changed since it was read.
    #[error("resourceVersion conflict (current {0})")]
    Conflict(u64),
    /// The requested resourceVersion is older than the resource's window.
    #[error("too old resource version: {requested} ({oldest})")]
    Gone {
        /// Requested.
        requested: u64,
        /// Oldest resourceVersion a watch may start from.
        oldest: u64,
    },
    /// The object could not be serialized or lacks metadata.
    #[error("{0}")]
    Malformed(String),
    /// The object is over etcd's request limit ([`crate::limits::ETCD_MAX_REQUEST_BYTES`]).
    #[error("etcdserver: request is too large")]
    TooLarge,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum WatchFrom {
    /// Synthetic ADDED events for the current state, then live changes
    /// (resourceVersion unset or "0").
    Now,
    /// Every change after this resourceVersion.
    Version(u64),
}

/// Identifies a registered watcher.
pub type WatcherId = u64;

struct Watcher {
    gr: Option<GroupResource>,
    namespace: Option<String>,
    tx: mpsc::UnboundedSender<WatchItem>,
}

impl Watcher {
    fn wants(&self, c: &Change) -> bool {
        self.gr.as_ref().is_none_or(|g| *g == c.gr)
            && self
                .namespace
                .as_ref()
                .is_none_or(|n| *n == c.obj.namespace)
    }
}

#[derive(Default)]
struct Inner {
    rv: u64,
    tables: HashMap<GroupResource, BTreeMap<ObjKey, Arc<Stored>>>,
    windows: HashMap<GroupResource, Window<Change>>,
    policy: WindowPolicy,
    /// In registration order: each change is sent (and its watcher woken)
    /// in the same order from one run to the next.
    watchers: BTreeMap<WatcherId, Watcher>,
    next_watcher: WatcherId,
    /// uid -> where the object lives.
    uids: HashMap<String, (GroupResource, ObjKey)>,
    /// owner uid -> dependents, in order (the garbage collector deletes
    /// them in this order).
    dependents: HashMap<String, BTreeSet<(GroupResource, ObjKey)>>,
    /// Each resource's objects by label, for selections.
    labelled: HashMap<GroupResource, LabelIndex>,
    /// The resources' objects by the value of an indexed field.
    by_field: HashMap<GroupResource, Vec<FieldIndex>>,
}

/// The store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
}

impl Store {
    /// An empty store whose resources keep the changes `policy` says for
    /// resuming watches.
    pub fn new(policy: WindowPolicy) -> Self {
        Self {
            inner: Mutex::new(Inner {
                policy,
                ..Inner::default()
            }),
        }
    }

    /// Changes how many changes each resource keeps from now on (a
    /// scenario makes the window tiny to make clients relist).
    pub fn set_window(&self, policy: WindowPolicy) {
        self.lock().policy = policy;
    }

    /// Starts a resource's window afresh at the current resourceVersion, as
    /// kube-apiserver starts a watch cache for a newly registered CRD: a
    /// watch from an older version is gone.
    pub fn open_window(&self, gr: GroupResource) {
        let mut inner = self.lock();
        let rv = inner.rv;
        inner.windows.insert(gr, Window::starting_at(rv));
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-written commit:
        // commits build everything first and mutate last.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The latest committed resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Reads one object.
    pub fn get(&self, gr: &GroupResource, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        let inner = self.lock();
        inner
            .tables
            .get(gr)
            .and_then(|t| t.get(&(namespace.to_string(), name.to_string())))
            .cloned()
    }

    /// Lists objects of a resource (in one namespace or all) in key order,
    /// starting after `after`, with the resourceVersion of the snapshot.
    pub fn list(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
        after: Option<&ObjKey>,
    ) -> (u64, Vec<Arc<Stored>>) {
        let page = self.list_page(gr, namespace, after, 0, |_| true, false);
        (page.rv, page.items)
    }

    /// One page of a list, read under the lock without copying what it
    /// does not return: the objects (in one namespace or all) after
    /// `after` that `keep` accepts, at most `limit` of them (0: no limit),
    /// and, when `count_rest` (for a `keep` that keeps every object), how
    /// many objects follow.
    pub fn list_page(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
        after: Option<&ObjKey>,
        limit: usize,
        keep: impl Fn(&Stored) -> bool,
        count_rest: bool,
    ) -> Page {
        let inner = self.lock();
        let Some(t) = inner.tables.get(gr) else {
            return Page::empty(inner.rv);
        };
        let mut objects = t
            .range((first_key(namespace, after), std::ops::Bound::Unbounded))
            .take_while(|((ns, _), _)| namespace.is_none_or(|n| n == ns))
            .map(|(_, o)| o);
        let mut page = Page::fill(inner.rv, &mut objects, limit, keep);
        if page.more && count_rest {
            page.rest = Some(match (namespace, after) {
                // The first page of the whole resource: the rest is what
                // it leaves out.
                (None, None) => t.len() - limit,
                _ => 1 + objects.count(),
            });
        }
        page
    }

    /// Keeps the objects of `gr` indexed by their selectable field number
    /// `field` from now on (the objects already there included), so that a
    /// list selecting one value of it reads only those objects.
    pub fn index_field(&self, gr: &GroupResource, field: usize) {
        let mut inner = self.lock();
        let mut ix = FieldIndex::new(field);
        if let Some(t) = inner.tables.get(gr) {
            for (key, o) in t {
                ix.change(key, None, Some(&o.fields));
            }
        }
        let indexes = inner.by_field.entry(gr.clone()).or_default();
        indexes.retain(|i| i.field != field);
        indexes.push(ix);
    }

    /// [`Store::list_page`] for a selection that requires each `(field,
    /// value)` of `equal` (selectable field number and value; `keep` tests
    /// them and the rest of the selection): read through the index of the
    /// first of those fields that is indexed, else a scan.
    pub fn list_page_where(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
        after: Option<&ObjKey>,
        limit: usize,
        equal: &[(usize, &str)],
        keep: impl Fn(&Stored) -> bool,
    ) -> Page {
        let inner = self.lock();
        let indexed = inner.by_field.get(gr).and_then(|indexes| {
            equal.iter().find_map(|(field, value)| {
                indexes
                    .iter()
                    .find(|i| i.field == *field)
                    .map(|i| i.keys(value))
            })
        });
        let Some(keys) = indexed else {
            drop(inner);
            return self.list_page(gr, namespace, after, limit, keep, false);
        };
        let (Some(keys), Some(t)) = (keys, inner.tables.get(gr)) else {
            return Page::empty(inner.rv);
        };
        let mut objects = keys
            .range((first_key(namespace, after), std::ops::Bound::Unbounded))
            .take_while(|(ns, _)| namespace.is_none_or(|n| n == ns))
            .filter_map(|k| t.get(k));
        Page::fill(inner.rv, &mut objects, limit, keep)
    }

    /// The objects of a resource in namespace `ns` that `selector` matches,
    /// in key order. Through the label index when the selector has an `In`
    /// requirement (a budget's or a workload's `matchLabels`): only the
    /// objects carrying one of its values are tested.
    pub fn list_selected(
        &self,
        gr: &GroupResource,
        ns: &str,
        selector: &LabelSelector,
    ) -> Vec<Arc<Stored>> {
        let inner = self.lock();
        let Some(t) = inner.tables.get(gr) else {
            return Vec::new();
        };
        let candidates = inner
            .labelled
            .get(gr)
            .and_then(|i| i.candidates(ns, selector));
        match candidates {
            Some(names) => names
                .into_iter()
                .filter_map(|n| t.get(&(ns.to_string(), n.clone())))
                .filter(|o| selector.matches(&o.labels))
                .cloned()
                .collect(),
            None => {
                drop(inner);
                self.list_page(
                    gr,
                    Some(ns),
                    None,
                    0,
                    |o| selector.matches(&o.labels),
                    false,
                )
                .items
            }
        }
    }

    /// Stores a new object. `value` must carry metadata.name (and namespace
    /// for namespaced resources); the store sets `metadata.resourceVersion`.
    pub fn create(&self, def: &ResourceDef, mut value: Value) -> Result<Arc<Stored>, StoreError> {
        let gr = def.gr();
        let mut inner = self.lock();
        let key = key_of(&value)?;
        if inner.tables.get(&gr).is_some_and(|t| t.contains_key(&key)) {
            return Err(StoreError::AlreadyExists);
        }
        let rv = inner.rv + 1;
        let stored = Arc::new(make_stored(def, &mut value, rv)?);
        inner.rv = rv;
        inner.index(&gr, &key, None, Some(&stored));
        inner
            .tables
            .entry(gr.clone())
            .or_default()
            .insert(key, stored.clone());
        self.commit(&mut inner, gr, ChangeType::Added, stored.clone(), None);
        Ok(stored)
    }

    /// Replaces an object if its resourceVersion is still `expected_rv`.
    /// An update that changes nothing returns the current object without a
    /// new resourceVersion, as the real API server does.
    pub fn update(
        &self,
        def: &ResourceDef,
        expected_rv: u64,
        mut value: Value,
    ) -> Result<Arc<Stored>, StoreError> {
        let gr = def.gr();
        let mut inner = self.lock();
        let key = key_of(&value)?;
        let prev = inner
            .tables
            .get(&gr)
            .and_then(|t| t.get(&key))
            .cloned()
            .ok_or(StoreError::NotFound)?;
        if prev.rv != expected_rv {
            return Err(StoreError::Conflict(prev.rv));
        }
        // No-op detection: serialize with the old resourceVersion and compare.
        set_rv(&mut value, prev.rv);
        let same = serde_json::to_vec(&value)
            .map(|b| b == prev.json)
            .unwrap_or(false);
        if same {
            return Ok(prev);
        }
        let rv = inner.rv + 1;
        let stored = Arc::new(make_stored(def, &mut value, rv)?);
        inner.rv = rv;
        inner.index(&gr, &key, Some(&prev), Some(&stored));
        inner
            .tables
            .entry(gr.clone())
            .or_default()
            .insert(key, stored.clone());
        self.commit(
            &mut inner,
            gr,
            ChangeType::Modified,
            stored.clone(),
            Some(prev),
        );
        Ok(stored)
    }

    /// Removes an object if its resourceVersion is still `expected_rv` (when given).
    pub fn delete(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        expected_rv: Option<u64>,
    ) -> Result<Arc<Stored>, StoreError> {
        self.delete_from(def, namespace, name, expected_rv, None)
    }

    /// [`Self::delete`] of the object at `expected_rv`, which the caller
    /// has parsed already (`last`): it is not parsed again.
    pub fn delete_parsed(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        expected_rv: u64,
        last: Value,
    ) -> Result<Arc<Stored>, StoreError> {
        self.delete_from(def, namespace, name, Some(expected_rv), Some(last))
    }

    fn delete_from(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        expected_rv: Option<u64>,
        parsed: Option<Value>,
    ) -> Result<Arc<Stored>, StoreError> {
        let gr = def.gr();
        let mut inner = self.lock();
        let key = (namespace.to_string(), name.to_string());
        let prev = inner
            .tables
            .get(&gr)
            .and_then(|t| t.get(&key))
            .cloned()
            .ok_or(StoreError::NotFound)?;
        if let Some(rv) = expected_rv
            && prev.rv != rv
        {
            return Err(StoreError::Conflict(prev.rv));
        }
        let rv = inner.rv + 1;
        // `parsed` is the object at `expected_rv`, which `prev` is.
        let mut last = parsed.unwrap_or_else(|| prev.value());
        let stored = Arc::new(make_stored(def, &mut last, rv)?);
        inner.rv = rv;
        inner.index(&gr, &key, Some(&prev), None);
        if let Some(t) = inner.tables.get_mut(&gr) {
            t.remove(&key);
        }
        self.commit(
            &mut inner,
            gr,
            ChangeType::Deleted,
            stored.clone(),
            Some(prev),
        );
        Ok(stored)
    }

    fn commit(
        &self,
        inner: &mut Inner,
        gr: GroupResource,
        kind: ChangeType,
        obj: Arc<Stored>,
        prev: Option<Arc<Stored>>,
    ) {
        let change = Arc::new(Change {
            rv: obj.rv,
            gr,
            kind,
            obj,
            prev,
        });
        inner.watchers.retain(|_, w| {
            if w.wants(&change) {
                w.tx.send(WatchItem::Change(change.clone())).is_ok()
            } else {
                !w.tx.is_closed()
            }
        });
        let now = tokio::time::Instant::now();
        let policy = inner.policy;
        inner
            .windows
            .entry(change.gr.clone())
            .or_default()
            .push(change, now, policy);
    }

    /// Registers a watcher on one resource (or all when `gr` is `None`) in
    /// one namespace (or all). Returns the receiver and, for
    /// [`WatchFrom::Now`], the current objects to send as ADDED first.
    #[allow(clippy::type_complexity)]
    pub fn watch(
        &self,
        gr: Option<GroupResource>,
        namespace: Option<String>,
        from: WatchFrom,
    ) -> Result<
        (
            WatcherId,
            mpsc::UnboundedReceiver<WatchItem>,
            Vec<Arc<Stored>>,
        ),
        StoreError,
    > {
        let mut inner = self.lock();
        let (tx, rx) = mpsc::unbounded_channel();
        let watcher = Watcher { gr, namespace, tx };
        let mut initial = Vec::new();
        match from {
            WatchFrom::Now => {
                for (g, t) in &inner.tables {
                    if watcher.gr.as_ref().is_some_and(|w| w != g) {
                        continue;
                    }
                    initial.extend(
                        t.values()
                            .filter(|o| {
                                watcher.namespace.as_ref().is_none_or(|n| *n == o.namespace)
                            })
                            .cloned(),
                    );
                }
            }
            WatchFrom::Version(rv) => {
                let windows: Vec<&Window<Change>> = match &watcher.gr {
                    Some(gr) => inner.windows.get(gr).into_iter().collect(),
                    None => inner.windows.values().collect(),
                };
                if let Some(oldest) = windows
                    .iter()
                    .map(|w| w.oldest_resumable())
                    .filter(|oldest| rv < *oldest)
                    .max()
                {
                    return Err(StoreError::Gone {
                        requested: rv,
                        oldest,
                    });
                }
                let mut replay: Vec<&Arc<Change>> =
                    windows.iter().flat_map(|w| w.since(rv)).collect();
                replay.sort_by_key(|c| c.rv);
                for c in replay {
                    if watcher.wants(c) {
                        // The receiver is alive: it is ours and not yet returned.
                        let _ = watcher.tx.send(WatchItem::Change(c.clone()));
                    }
                }
            }
        }
        let id = inner.next_watcher;
        inner.next_watcher += 1;
        inner.watchers.insert(id, watcher);
        Ok((id, rx, initial))
    }

    /// Unregisters a watcher.
    pub fn unwatch(&self, id: WatcherId) {
        self.lock().watchers.remove(&id);
    }

    /// Queues a bookmark at the current resourceVersion on a watcher's
    /// channel, behind every change already queued for it.
    pub fn bookmark(&self, id: WatcherId) {
        let inner = self.lock();
        if let Some(w) = inner.watchers.get(&id) {
            let _ = w.tx.send(WatchItem::Bookmark(inner.rv));
        }
    }

    /// Whether an object with this uid exists.
    pub fn uid_exists(&self, uid: &str) -> bool {
        self.lock().uids.contains_key(uid)
    }

    /// Where the object with this uid lives.
    pub fn locate(&self, uid: &str) -> Option<(GroupResource, ObjKey)> {
        self.lock().uids.get(uid).cloned()
    }

    /// Objects that name `uid` in their ownerReferences.
    pub fn dependents(&self, uid: &str) -> Vec<(GroupResource, ObjKey)> {
        self.lock()
            .dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every resource that has objects in `namespace`, with their keys.
    pub fn in_namespace(&self, namespace: &str) -> Vec<(GroupResource, ObjKey)> {
        let inner = self.lock();
        let mut out = Vec::new();
        for (gr, t) in &inner.tables {
            let lower = (namespace.to_string(), String::new());
            out.extend(
                t.range(lower..)
                    .take_while(|((ns, _), _)| ns == namespace)
                    .map(|(k, _)| (gr.clone(), k.clone())),
            );
        }
        out
    }
}

impl Inner {
    fn index(
        &mut self,
        gr: &GroupResource,
        key: &ObjKey,
        prev: Option<&Arc<Stored>>,
        next: Option<&Arc<Stored>>,
    ) {
        if let Some(indexes) = self.by_field.get_mut(gr) {
            for ix in indexes {
                ix.change(
                    key,
                    prev.map(|p| p.fields.as_slice()),
                    next.map(|n| n.fields.as_slice()),
                );
            }
        }
        let relabelled = match (prev, next) {
            (Some(p), Some(n)) => p.labels != n.labels,
            _ => true,
        };
        if relabelled {
            let index = self.labelled.entry(gr.clone()).or_default();
            if let Some(p) = prev {
                index.remove(key, &p.labels);
            }
            if let Some(n) = next {
                index.add(key, &n.labels);
            }
        }
        // Most updates keep the uid and the owners (a status write): then
        // the index already holds the entries.
        if let (Some(p), Some(n)) = (prev, next)
            && p.uid == n.uid
            && p.owners == n.owners
        {
            return;
        }
        if let Some(p) = prev {
            self.uids.remove(&p.uid);
            for o in &p.owners {
                if let Some(set) = self.dependents.get_mut(o) {
                    set.remove(&(gr.clone(), key.clone()));
                    if set.is_empty() {
                        self.dependents.remove(o);
                    }
                }
            }
        }
        if let Some(n) = next {
            self.uids.insert(n.uid.clone(), (gr.clone(), key.clone()));
            for o in &n.owners {
                self.dependents
                    .entry(o.clone())
                    .or_default()
                    .insert((gr.clone(), key.clone()));
            }
        }
    }
}

/// Where a list (in one namespace or all) resumes: after `after`, or at
/// the namespace's first key.
fn first_key(namespace: Option<&str>, after: Option<&ObjKey>) -> std::ops::Bound<ObjKey> {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    match after {
        Some(k) => Excluded(k.clone()),
        None => match namespace {
            Some(ns) => Included((ns.to_string(), String::new())),
            None => Unbounded,
        },
    }
}

fn key_of(value: &Value) -> Result<ObjKey, StoreError> {
    let meta = value
        .get("metadata")
        .ok_or_else(|| StoreError::Malformed("metadata is missing".into()))?;
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| StoreError::Malformed("metadata.name is missing".into()))?;
    let ns = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
    Ok((ns.to_string(), name.to_string()))
}

fn set_rv(value: &mut Value, rv: u64) {
    if let Some(m) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

thread_local! {
    /// [`make_stored`]'s serialization buffer.
    static SERIALIZED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn make_stored(def: &ResourceDef, value: &mut Value, rv: u64) -> Result<Stored, StoreError> {
    set_rv(value, rv);
    let (namespace, name) = key_of(value)?;
    let meta = &value["metadata"];
    let uid = meta
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let labels = meta
        .get("labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let owners = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let deleting = meta.get("deletionTimestamp").is_some_and(|t| !t.is_null());
    let fields = def.field_values(value);
    // Serialized into a reused buffer and copied out at its exact length:
    // a `Vec` grown by doubling keeps up to twice the object's size, and
    // the store holds every object of the cluster.
    let json = SERIALIZED.with_borrow_mut(|buf| {
        buf.clear();
        serde_json::to_writer(&mut *buf, value)
            .map(|()| Bytes::copy_from_slice(buf))
            .map_err(|e| StoreError::Malformed(e.to_string()))
    })?;
    if json.len() > crate::limits::ETCD_MAX_REQUEST_BYTES {
        return Err(StoreError::TooLarge);
    }
    Ok(Stored {
        namespace,
        name,
        uid,
        rv,
        json,
        labels,
        fields,
        owners,
        deleting,
    })
}

#[cfg(test)]
mod tests;
