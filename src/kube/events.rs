//! Events on pods (events.k8s.io/v1): the same event again within [`SERIES_TTL`] (the
//! same pod, type, reason and note) is one Event whose `series` counts it; a different
//! note is a new Event, since the API server refuses to change an Event's note. That is
//! how client-go's core/v1 event recorder keys events (with the message). Its
//! events.k8s.io broadcaster, and kube-runtime's `Recorder`, leave the note out of what
//! they count as the same event: a pod's later reasons would be counted under its first
//! one, which `kubectl describe` would go on showing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use kube::{Api, Client};
use serde_json::json;

use super::world::PodRef;

/// How long after its last occurrence an event still counts in its series (client-go's
/// and kube-runtime's: 6 minutes).
const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// The most bytes of an event's note (events.k8s.io/v1 refuses a longer one with 422).
const NOTE_MAX_BYTES: usize = 1024;

/// What makes two events the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EventKey {
    pod: PodRef,
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

    /// Records an event on a pod; `message` is cut to what the API server takes.
    pub async fn publish(
        &self,
        pod: &PodRef,
        warning: bool,
        reason: &'static str,
        message: String,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = EventKey {
            pod: pod.clone(),
            warning,
            reason,
            note: fit_note(message),
        };
        let repeat = {
            let mut written = self.written.lock().expect("events cache poisoned");
            written.retain(|_, w| w.last + SERIES_TTL > now);
            written.get(&key).map(|w| (w.name.clone(), w.count + 1))
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &pod.namespace);
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
                namespace: Some(key.pod.namespace.clone()),
                name: Some(format!("{}.{:x}", key.pod.name, now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            regarding: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some(key.pod.namespace.clone()),
                name: Some(key.pod.name.clone()),
                uid: Some(key.pod.uid.clone()),
                ..ObjectReference::default()
            }),
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
