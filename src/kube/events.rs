//! Events (events.k8s.io/v1) on pods, and on the nodes and PodGroups Kant refuses or reads
//! otherwise than written: the same event again within [`SERIES_TTL`] (the same object,
//! type, reason and note) is one Event whose `series` counts it; a different
//! note is a new Event, since the API server refuses to change an Event's note. That is
//! how client-go's core/v1 event recorder keys events (with the message). Its
//! events.k8s.io broadcaster, and kube-runtime's `Recorder`, leave the note out of what
//! they count as the same event: a pod's later reasons would be counted under its first
//! one, which `kubectl describe` would go on showing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use kube::{Api, Client, Resource};
use serde_json::json;

use super::crd::PodGroup;
use super::world::PodRef;

/// How long after its last occurrence an event still counts in its series (client-go's
/// and kube-runtime's: 6 minutes).
const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// The most bytes of an event's note (events.k8s.io/v1 refuses a longer one with 422).
const NOTE_MAX_BYTES: usize = 1024;

/// The namespace of the events on a cluster-scoped object (a node), as kubelet writes them.
const CLUSTER_EVENTS_NAMESPACE: &str = "default";

/// The kinds of object Kant writes events on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Pod,
    Node,
    PodGroup,
}

/// What an event is about, as its `regarding` names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Regarding {
    pub kind: Kind,
    /// `None`: a cluster-scoped object, whose events go to [`CLUSTER_EVENTS_NAMESPACE`].
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
}

impl Regarding {
    pub fn node(name: &str, uid: &str) -> Self {
        Self {
            kind: Kind::Node,
            namespace: None,
            name: name.to_owned(),
            uid: uid.to_owned(),
        }
    }

    pub fn pod_group(namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            kind: Kind::PodGroup,
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
            uid: uid.to_owned(),
        }
    }

    /// The namespace its events are written in.
    fn events_namespace(&self) -> &str {
        self.namespace
            .as_deref()
            .unwrap_or(CLUSTER_EVENTS_NAMESPACE)
    }

    fn reference(&self) -> ObjectReference {
        let (api_version, kind) = match self.kind {
            Kind::Pod => (Pod::api_version(&()), Pod::kind(&())),
            Kind::Node => (Node::api_version(&()), Node::kind(&())),
            Kind::PodGroup => (PodGroup::api_version(&()), PodGroup::kind(&())),
        };
        ObjectReference {
            api_version: Some(api_version.into_owned()),
            kind: Some(kind.into_owned()),
            namespace: self.namespace.clone(),
            name: Some(self.name.clone()),
            uid: Some(self.uid.clone()),
            ..ObjectReference::default()
        }
    }
}

impl From<PodRef> for Regarding {
    fn from(pod: PodRef) -> Self {
        Self {
            kind: Kind::Pod,
            namespace: Some(pod.namespace),
            name: pod.name,
            uid: pod.uid,
        }
    }
}

impl std::fmt::Display for Regarding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{:?} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{:?} {}", self.kind, self.name),
        }
    }
}

/// What makes two events the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EventKey {
    regarding: Regarding,
    warning: bool,
    reason: &'static str,
    note: String,
}

/// An Event written: its name, and its series so far.
struct Written {
    name: String,
    count: i32,
    last: Timestamp,
}

/// Writes the events of one reporter (this replica).
pub struct EventRecorder {
    client: Client,
    reporter: Reporter,
    written: Mutex<HashMap<EventKey, Written>>,
}

impl EventRecorder {
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            written: Mutex::new(HashMap::new()),
        }
    }

    /// Records an event; `message` is cut to what the API server takes.
    pub async fn publish(
        &self,
        regarding: &Regarding,
        warning: bool,
        reason: &'static str,
        message: String,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = EventKey {
            regarding: regarding.clone(),
            warning,
            reason,
            note: fit_note(message),
        };
        let repeat = {
            let mut written = self.written.lock().expect("events cache poisoned");
            written.retain(|_, w| w.last + SERIES_TTL > now);
            written.get(&key).map(|w| (w.name.clone(), w.count + 1))
        };
        let namespace = regarding.events_namespace();
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let patched = match repeat {
            Some((name, count)) => {
                let series = EventSeries {
                    count,
                    last_observed_time: MicroTime(now),
                };
                let patch = Patch::Merge(json!({"series": series}));
                match api.patch(&name, &PatchParams::default(), &patch).await {
                    Ok(_) => Some((name, count)),
                    // Gone meanwhile (Events live an hour): a new one.
                    Err(kube::Error::Api(status)) if status.code == 404 => None,
                    Err(e) => return Err(e),
                }
            }
            None => None,
        };
        let (name, count) = match patched {
            Some(written) => written,
            None => {
                let event = self.event(&key, now);
                let name = event.metadata.name.clone().unwrap_or_default();
                // Counted before it is sent: a create that lands after its caller gave up
                // waiting is then counted at the next repeat (one that never landed is
                // found gone then, and created), not created twice.
                self.remember(&key, &name, 1, now);
                if let Err(e) = api.create(&PostParams::default(), &event).await {
                    self.written
                        .lock()
                        .expect("events cache poisoned")
                        .remove(&key);
                    return Err(e);
                }
                (name, 1)
            }
        };
        self.remember(&key, &name, count, now);
        Ok(())
    }

    fn remember(&self, key: &EventKey, name: &str, count: i32, last: Timestamp) {
        let mut written = self.written.lock().expect("events cache poisoned");
        let name = name.to_owned();
        written.insert(key.clone(), Written { name, count, last });
    }

    /// A new Event.
    fn event(&self, key: &EventKey, now: Timestamp) -> Event {
        let controller = &self.reporter.controller;
        Event {
            metadata: ObjectMeta {
                namespace: Some(key.regarding.events_namespace().to_owned()),
                name: Some(format!("{}.{:x}", key.regarding.name, now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            regarding: Some(key.regarding.reference()),
            type_: Some(if key.warning { "Warning" } else { "Normal" }.into()),
            reason: Some(key.reason.into()),
            action: Some("Scheduling".into()),
            note: Some(key.note.clone()),
            reporting_controller: Some(controller.clone()),
            reporting_instance: Some(
                (self.reporter.instance.clone()).unwrap_or_else(|| controller.clone()),
            ),
            ..Event::default()
        }
    }
}

/// A note cut to `NOTE_MAX_BYTES` and ending in " ..." when cut, as kube-scheduler cuts its
/// messages (here on a character boundary).
pub(super) fn fit_note(mut note: String) -> String {
    const CUT: &str = " ...";
    if note.len() <= NOTE_MAX_BYTES {
        return note;
    }
    let mut end = NOTE_MAX_BYTES - CUT.len();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note.truncate(end);
    note.push_str(CUT);
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_note_is_cut_to_the_limit_on_a_character_boundary() {
        let fits = "x".repeat(NOTE_MAX_BYTES);
        assert_eq!(fit_note(fits.clone()), fits);
        let long = fit_note("x".repeat(NOTE_MAX_BYTES + 1));
        assert_eq!(long.len(), NOTE_MAX_BYTES);
        assert!(long.ends_with("x ..."), "{long}");
        // Two-byte characters after one byte: the cut falls inside one and moves before it.
        let wide = fit_note(format!("x{}", "é".repeat(NOTE_MAX_BYTES)));
        assert_eq!(wide.len(), NOTE_MAX_BYTES - 1);
        assert!(wide.ends_with("é ..."), "{wide}");
    }
}
