//! The object store: every object as `serde_json::Value` (with its serialized bytes cached),
//! per resource in a `BTreeMap` keyed by `(namespace, name)`; one global resourceVersion
//! counter (the etcd revision) shared by all resources; a bounded per-resource history of
//! change events that watches resume from; the open watch subscriptions each change is pushed
//! to; and the snapshots behind `continue` tokens.
//!
//! Every write happens under the one store lock and pushes its event to every subscriber
//! before the lock is released, so a watch registered under the same lock sees every change
//! exactly once and in resourceVersion order.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::resources::ResourceDef;
use crate::status::ApiError;

/// `(namespace, name)`; the namespace is `""` for cluster-scoped resources.
pub(crate) type Key = (String, String);

/// Index of a resource in the store.
pub(crate) type ResId = usize;

/// One stored object version.
#[derive(Debug)]
pub(crate) struct Obj {
    pub value: Value,
    /// `value` serialized, computed once per write and shared by every response and event.
    pub json: Bytes,
    pub rv: u64,
}

impl Obj {
    pub(crate) fn new(value: Value, rv: u64) -> Arc<Obj> {
        let json = serde_json::to_vec(&value).unwrap_or_else(|_| b"{}".to_vec());
        Arc::new(Obj {
            value,
            json: Bytes::from(json),
            rv,
        })
    }

    pub(crate) fn meta_str(&self, field: &str) -> &str {
        meta_str(&self.value, field)
    }
}

/// `metadata.<field>` as a string, `""` when absent.
pub(crate) fn meta_str<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata` as a mutable map, created when absent or not an object.
pub(crate) fn meta_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    let Value::Object(m) = v else {
        unreachable!("just made an object")
    };
    let meta = m
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(meta) => meta,
        _ => unreachable!("just made an object"),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change: the object after it (for DELETED: the last state, stamped with the deletion's
/// resourceVersion) and the object before it.
#[derive(Debug)]
pub(crate) struct Event {
    pub ty: EventType,
    pub rv: u64,
    pub obj: Arc<Obj>,
    pub prev: Option<Arc<Obj>>,
    line: OnceLock<Bytes>,
}

impl Event {
    pub(crate) fn new(ty: EventType, rv: u64, obj: Arc<Obj>, prev: Option<Arc<Obj>>) -> Self {
        Self {
            ty,
            rv,
            obj,
            prev,
            line: OnceLock::new(),
        }
    }

    /// The watch line for this event as it happened (cached: rendered once for all watchers).
    pub(crate) fn line(&self) -> Bytes {
        self.line
            .get_or_init(|| render_line(self.ty.as_str(), &self.obj.json))
            .clone()
    }
}

/// `{"type":TYPE,"object":OBJECT}\n`
pub(crate) fn render_line(ty: &str, obj_json: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(obj_json.len() + 32);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(ty.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(obj_json);
    b.put_slice(b"}\n");
    b.freeze()
}

/// What a watch subscription receives, in order.
#[derive(Debug)]
pub(crate) enum Msg {
    Event(Arc<Event>),
    /// A bookmark at this resourceVersion (every event at or before it was sent before it).
    Bookmark(u64),
    /// The bookmark that ends the initial events of a `sendInitialEvents=true` watch.
    InitialEventsEnd(u64),
}

pub(crate) struct ResourceState {
    pub def: Arc<ResourceDef>,
    pub objects: BTreeMap<Key, Arc<Obj>>,
    history: VecDeque<Arc<Event>>,
    /// Watches may resume from any resourceVersion `>= floor`; older ones get 410.
    floor: u64,
    subscribers: Vec<UnboundedSender<Msg>>,
}

impl ResourceState {
    fn new(def: ResourceDef) -> Self {
        Self {
            def: Arc::new(def),
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            floor: 0,
            subscribers: Vec::new(),
        }
    }

    /// Objects in one namespace (`Some`) or all (`None`), in key order.
    pub(crate) fn iter_ns<'a>(
        &'a self,
        ns: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = &'a Arc<Obj>> + 'a> {
        match ns {
            None => Box::new(self.objects.values()),
            Some(ns) => Box::new(
                self.objects
                    .range((ns.to_string(), String::new())..)
                    .take_while(move |(k, _)| k.0 == ns)
                    .map(|(_, v)| v),
            ),
        }
    }
}

/// A consistent list result kept for its `continue` tokens.
struct Snapshot {
    id: u64,
    rv: u64,
    items: Arc<Vec<Arc<Obj>>>,
}

/// How many list snapshots stay reachable through `continue` tokens.
const MAX_SNAPSHOTS: usize = 64;

pub(crate) struct Store {
    /// The current (last written) resourceVersion.
    pub rv: u64,
    resources: Vec<ResourceState>,
    index: HashMap<(String, String, String), ResId>,
    pub history_limit: usize,
    snapshots: VecDeque<Snapshot>,
    next_snapshot: u64,
    /// Successful bindings, in order: (namespace, pod, node).
    pub bindings: Vec<(String, String, String)>,
}

impl Store {
    pub(crate) fn new(defs: Vec<ResourceDef>, history_limit: usize) -> Self {
        let mut s = Self {
            rv: 1,
            resources: Vec::new(),
            index: HashMap::new(),
            history_limit,
            snapshots: VecDeque::new(),
            next_snapshot: 1,
            bindings: Vec::new(),
        };
        for d in defs {
            s.register(d);
        }
        s
    }

    /// Adds a resource; a definition for an already served group/version/plural replaces its
    /// description and keeps the objects.
    pub(crate) fn register(&mut self, def: ResourceDef) -> ResId {
        let key = (def.group.clone(), def.version.clone(), def.plural.clone());
        if let Some(&id) = self.index.get(&key) {
            self.resources[id].def = Arc::new(def);
            return id;
        }
        let id = self.resources.len();
        self.resources.push(ResourceState::new(def));
        self.index.insert(key, id);
        id
    }

    pub(crate) fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<ResId> {
        self.index
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .copied()
    }

    pub(crate) fn defs(&self) -> Vec<Arc<ResourceDef>> {
        self.resources.iter().map(|r| r.def.clone()).collect()
    }

    pub(crate) fn res(&self, id: ResId) -> &ResourceState {
        &self.resources[id]
    }

    pub(crate) fn def(&self, id: ResId) -> Arc<ResourceDef> {
        self.resources[id].def.clone()
    }

    pub(crate) fn key(&self, id: ResId, ns: Option<&str>, name: &str) -> Key {
        if self.resources[id].def.namespaced {
            (ns.unwrap_or("").to_string(), name.to_string())
        } else {
            (String::new(), name.to_string())
        }
    }

    pub(crate) fn get(&self, id: ResId, key: &Key) -> Option<Arc<Obj>> {
        self.resources[id].objects.get(key).cloned()
    }

    /// Stores `value` under `key` as a new revision (ADDED when `prev` is `None`, else
    /// MODIFIED), stamping `metadata.resourceVersion`.
    pub(crate) fn commit_put(
        &mut self,
        id: ResId,
        key: Key,
        mut value: Value,
        prev: Option<Arc<Obj>>,
    ) -> Arc<Obj> {
        self.rv += 1;
        let rv = self.rv;
        meta_mut(&mut value).insert("resourceVersion".into(), Value::String(rv.to_string()));
        let obj = Obj::new(value, rv);
        self.resources[id].objects.insert(key, obj.clone());
        let ty = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.emit(id, Event::new(ty, rv, obj.clone(), prev));
        obj
    }

    /// Removes the object as a new revision; returns its last state stamped with the
    /// deletion's resourceVersion (what DELETED events and DELETE responses carry).
    pub(crate) fn commit_delete(&mut self, id: ResId, key: &Key) -> Option<Arc<Obj>> {
        let prev = self.resources[id].objects.remove(key)?;
        self.rv += 1;
        let rv = self.rv;
        let mut value = prev.value.clone();
        meta_mut(&mut value).insert("resourceVersion".into(), Value::String(rv.to_string()));
        let obj = Obj::new(value, rv);
        self.emit(
            id,
            Event::new(EventType::Deleted, rv, obj.clone(), Some(prev)),
        );
        Some(obj)
    }

    fn emit(&mut self, id: ResId, ev: Event) {
        let limit = self.history_limit;
        let st = &mut self.resources[id];
        let ev = Arc::new(ev);
        st.history.push_back(ev.clone());
        while st.history.len() > limit {
            if let Some(old) = st.history.pop_front() {
                st.floor = st.floor.max(old.rv);
            }
        }
        st.subscribers
            .retain(|tx| tx.send(Msg::Event(ev.clone())).is_ok());
    }

    /// Registers a watch. With `from == None` (resourceVersion unset or "0") the subscription
    /// starts with a synthetic ADDED for every current object (then, for
    /// `sendInitialEvents=true`, the initial-events-end bookmark); otherwise with every
    /// retained event after `from`, or 410 Expired when `from` is older than the history.
    pub(crate) fn subscribe(
        &mut self,
        id: ResId,
        ns: Option<&str>,
        from: Option<u64>,
        initial_events_end: bool,
    ) -> Result<(UnboundedReceiver<Msg>, UnboundedSender<Msg>), ApiError> {
        let (tx, rx) = unbounded_channel();
        let current = self.rv;
        let st = &mut self.resources[id];
        match from {
            None => {
                for obj in st.iter_ns(ns) {
                    let ev = Event::new(EventType::Added, obj.rv, obj.clone(), None);
                    let _ = tx.send(Msg::Event(Arc::new(ev)));
                }
                if initial_events_end {
                    let _ = tx.send(Msg::InitialEventsEnd(current));
                }
            }
            Some(from) => {
                if from < st.floor {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {from} ({})",
                        st.floor
                    )));
                }
                let start = st.history.partition_point(|e| e.rv <= from);
                for ev in st.history.range(start..) {
                    let _ = tx.send(Msg::Event(ev.clone()));
                }
            }
        }
        st.subscribers.push(tx.clone());
        Ok((rx, tx))
    }

    /// Open watch subscriptions (whose stream has not been dropped).
    pub(crate) fn open_watches(&mut self) -> usize {
        self.resources
            .iter_mut()
            .map(|r| {
                r.subscribers.retain(|tx| !tx.is_closed());
                r.subscribers.len()
            })
            .sum()
    }

    /// Forgets all watch history and every list snapshot: watches from any earlier
    /// resourceVersion, and `continue` tokens issued before, now get 410 Expired.
    pub(crate) fn compact(&mut self) {
        let rv = self.rv;
        for r in &mut self.resources {
            r.history.clear();
            r.floor = rv;
        }
        self.snapshots.clear();
    }

    /// Keeps a list result for its `continue` tokens; returns the snapshot id.
    pub(crate) fn save_snapshot(&mut self, items: Arc<Vec<Arc<Obj>>>) -> u64 {
        let id = self.next_snapshot;
        self.next_snapshot += 1;
        self.snapshots.push_back(Snapshot {
            id,
            rv: self.rv,
            items,
        });
        while self.snapshots.len() > MAX_SNAPSHOTS {
            self.snapshots.pop_front();
        }
        id
    }

    /// A saved list result and its resourceVersion.
    pub(crate) fn snapshot(&self, id: u64) -> Option<(u64, Arc<Vec<Arc<Obj>>>)> {
        self.snapshots
            .iter()
            .find(|s| s.id == id)
            .map(|s| (s.rv, s.items.clone()))
    }
}
