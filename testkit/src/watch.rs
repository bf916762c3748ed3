//! Watch streams: a registered subscription (see `Store::subscribe`) turned into the chunked
//! HTTP body the real server sends, one JSON event per line.
//!
//! Filtering follows the real watch cache: with a label or field selector, a MODIFIED event
//! whose object starts matching is sent as ADDED, and one whose object stops matching is
//! sent as DELETED carrying the previous object stamped with the event's resourceVersion;
//! events for objects that neither match now nor matched before are not sent. Bookmarks
//! (with `allowWatchBookmarks=true`) are sent every bookmark interval, carrying the current
//! resourceVersion; they are queued under the store lock, so every event at or before that
//! resourceVersion precedes them. `timeoutSeconds` ends the stream cleanly (default 1800 s);
//! `ApiServer::drop_watches` aborts it mid-stream (the connection is cut without the final
//! chunk); `ApiServer::pause_watches` holds everything back, in order, until it is resumed.
//! `sendInitialEvents=true` is supported: the synthetic ADDED events are followed by a
//! bookmark annotated `k8s.io/initial-events-end`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::handle::Shared;
use crate::selectors::Selectors;
use crate::store::{Event, EventType, Msg, Obj, ResId, meta_mut, render_line};
use crate::util::lock;

/// A parsed watch request.
pub(crate) struct WatchSpec {
    pub id: ResId,
    pub ns: Option<String>,
    pub selectors: Selectors,
    /// `None`: resourceVersion unset or "0" (start with the current state).
    pub from: Option<u64>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout: Duration,
}

fn stream_response(body: Body) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// Starts a watch: registers it under the store lock and returns the streaming response.
pub(crate) fn start(shared: &Arc<Shared>, spec: WatchSpec) -> Response {
    let registered = {
        let mut store = lock(&shared.store);
        let def = store.def(spec.id);
        let from = if spec.send_initial_events {
            None
        } else {
            spec.from
        };
        store
            .subscribe(spec.id, spec.ns.as_deref(), from, spec.send_initial_events)
            .map(|(rx, tx)| (def, rx, tx))
    };
    let (def, rx, tx) = match registered {
        Ok(r) => r,
        Err(e) => {
            // The real server answers 200 and sends the 410 as an ERROR event.
            let line = render_line("ERROR", e.to_status().to_string().as_bytes());
            let once = futures::stream::once(async move { Ok::<Bytes, io::Error>(line) });
            return stream_response(Body::from_stream(once));
        }
    };
    let bookmark = if spec.bookmarks {
        let period = shared.bookmark_interval().max(Duration::from_millis(1));
        let mut i = tokio::time::interval_at(Instant::now() + period, period);
        i.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Some(i)
    } else {
        None
    };
    let state = WatchStream {
        shared: shared.clone(),
        kind: def.kind.clone(),
        api_version: def.api_version(),
        ns: spec.ns,
        selectors: spec.selectors,
        rx,
        tx,
        bookmark,
        deadline: Instant::now() + spec.timeout,
        dropped: shared.drop_rx(),
        paused: shared.paused_rx(),
        done: false,
    };
    let body = futures::stream::unfold(state, |mut st| async move {
        let item = st.next_chunk().await?;
        Some((item, st))
    });
    stream_response(Body::from_stream(body))
}

struct WatchStream {
    shared: Arc<Shared>,
    kind: String,
    api_version: String,
    ns: Option<String>,
    selectors: Selectors,
    rx: UnboundedReceiver<Msg>,
    /// Our own sender, to queue bookmarks behind the events already sent to us.
    tx: UnboundedSender<Msg>,
    bookmark: Option<Interval>,
    deadline: Instant,
    dropped: tokio::sync::watch::Receiver<u64>,
    /// While true, messages wait in `rx`.
    paused: tokio::sync::watch::Receiver<bool>,
    done: bool,
}

enum Wake {
    Dropped,
    Msg(Option<Msg>),
    Timeout,
    Tick,
    PauseChanged,
}

/// How many queued messages one chunk may carry.
const MAX_BATCH: usize = 256;

impl WatchStream {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, io::Error>> {
        if self.done {
            return None;
        }
        loop {
            let paused = *self.paused.borrow_and_update();
            let wake = tokio::select! {
                biased;
                _ = self.dropped.changed() => Wake::Dropped,
                _ = self.paused.changed() => Wake::PauseChanged,
                m = self.rx.recv(), if !paused => Wake::Msg(m),
                _ = tokio::time::sleep_until(self.deadline) => Wake::Timeout,
                _ = tick(&mut self.bookmark) => Wake::Tick,
            };
            match wake {
                Wake::PauseChanged => {}
                Wake::Dropped => {
                    self.done = true;
                    return Some(Err(io::Error::other("watch dropped by kant-testkit")));
                }
                Wake::Timeout => {
                    self.done = true;
                    return None;
                }
                Wake::Tick => {
                    let store = lock(&self.shared.store);
                    let _ = self.tx.send(Msg::Bookmark(store.rv));
                }
                Wake::Msg(None) => return None,
                Wake::Msg(Some(m)) => {
                    let mut buf = BytesMut::new();
                    self.render(m, &mut buf);
                    for _ in 1..MAX_BATCH {
                        match self.rx.try_recv() {
                            Ok(m) => self.render(m, &mut buf),
                            Err(_) => break,
                        }
                    }
                    if !buf.is_empty() {
                        return Some(Ok(buf.freeze()));
                    }
                }
            }
        }
    }

    fn render(&self, msg: Msg, buf: &mut BytesMut) {
        match msg {
            Msg::Event(ev) => {
                if let Some(line) = self.filter(&ev) {
                    buf.put_slice(&line);
                }
            }
            Msg::Bookmark(rv) => buf.put_slice(&self.bookmark_line(rv, false)),
            Msg::InitialEventsEnd(rv) => buf.put_slice(&self.bookmark_line(rv, true)),
        }
    }

    fn bookmark_line(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.kind, "apiVersion": self.api_version, "metadata": meta});
        render_line("BOOKMARK", obj.to_string().as_bytes())
    }

    fn in_scope(&self, obj: &Obj) -> bool {
        match &self.ns {
            Some(ns) => obj.meta_str("namespace") == ns,
            None => true,
        }
    }

    /// The line this watcher gets for an event, if any (see the module docs).
    fn filter(&self, ev: &Event) -> Option<Bytes> {
        if !self.in_scope(&ev.obj) {
            return None;
        }
        if self.selectors.is_empty() {
            return Some(ev.line());
        }
        let cur = self.selectors.matches(&ev.obj.value);
        match ev.ty {
            EventType::Added | EventType::Deleted => cur.then(|| ev.line()),
            EventType::Modified => {
                let old = ev
                    .prev
                    .as_ref()
                    .is_some_and(|p| self.selectors.matches(&p.value));
                match (cur, old) {
                    (true, true) => Some(ev.line()),
                    (true, false) => Some(render_line("ADDED", &ev.obj.json)),
                    (false, true) => {
                        let prev = ev.prev.as_ref()?;
                        let mut v: Value = prev.value.clone();
                        meta_mut(&mut v)
                            .insert("resourceVersion".into(), Value::String(ev.rv.to_string()));
                        let json = serde_json::to_vec(&v).ok()?;
                        Some(render_line("DELETED", &json))
                    }
                    (false, false) => None,
                }
            }
        }
    }
}

async fn tick(i: &mut Option<Interval>) {
    match i {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending::<()>().await,
    }
}
