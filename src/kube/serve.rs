//! The HTTP endpoints of a running scheduler: `/metrics` on the metrics address, `/healthz`
//! and `/readyz` on the health address (one listener serves all three when both addresses
//! are the same, port 0 aside). Every other path answers 404.
//!
//! Owns the [`Health`] handle (what the probes answer, fed by the scheduling loop and the
//! leader election) and the listeners ([`serve`], [`Server`]). It only reads: the metrics are
//! [`LiveMetrics`]' own encoding, and nothing here touches the scheduler, the cache or the
//! API server.
//!
//! # When the probes fail
//!
//! - `/healthz` (liveness) answers 503 `stalled: ...` when the scheduling loop has not called
//!   [`Health::tick`] for longer than the stall limit ([`DEFAULT_STALL_LIMIT`] unless set);
//!   the time before the first tick counts from the handle's creation. Otherwise 200 `ok`.
//! - `/readyz` (readiness) answers, checking in this order: 503 `stalled` as `/healthz`
//!   does; 503 `not synced` until [`Health::set_synced`]`(true)` (the caches hold the API
//!   server's state) and whenever it is set back to false; 503 `leadership undecided` until
//!   [`Health::set_leader`] is first called; then 200 `ok` for the leader, 200 `taking over`
//!   for a leader that waits before it places (see [`Health::set_taking_over`]) and 200
//!   `standby` for a replica that does not lead: a synced standby is ready, so that a
//!   rollout proceeds.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::metrics::live::{CONTENT_TYPE, LiveMetrics};

/// How long the scheduling loop may go without a tick before `/healthz` fails.
pub const DEFAULT_STALL_LIMIT: Duration = Duration::from_secs(60);

/// [`HealthState::leadership`] values.
const UNDECIDED: u8 = 0;
const STANDBY: u8 = 1;
const LEADER: u8 = 2;
const TAKING_OVER: u8 = 3;

/// What the probes answer, shared (cheaply cloned) between the scheduling loop, the leader
/// election and the handlers. Every method takes `&self` and only touches atomics.
#[derive(Debug, Clone)]
pub struct Health(Arc<HealthState>);

#[derive(Debug)]
struct HealthState {
    /// The origin of `last_tick_ms` (a monotonic clock: wall-clock jumps do not stall).
    origin: Instant,
    stall_limit: Duration,
    /// Milliseconds from `origin` to the latest tick (0 until the first).
    last_tick_ms: AtomicU64,
    synced: AtomicBool,
    /// [`UNDECIDED`], [`STANDBY`] or [`LEADER`].
    leadership: AtomicU8,
}

/// What `/healthz` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// The loop has not ticked for `idle` (longer than the stall limit).
    Stalled {
        idle: Duration,
        limit: Duration,
    },
}

/// What `/readyz` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Synced and leading: scheduling.
    Leader,
    /// Synced and leading, but waiting for bindings an earlier leader may have in flight:
    /// ready, not placing yet.
    TakingOver,
    /// Synced and standing by for the lease: ready, not scheduling.
    Standby,
    /// The loop stalled (see [`Liveness::Stalled`]).
    Stalled,
    /// The caches have not synced from the API server.
    NotSynced,
    /// No leader election result yet.
    LeadershipUndecided,
}

impl Default for Health {
    fn default() -> Self {
        Self::new()
    }
}

impl Health {
    /// A handle with the [`DEFAULT_STALL_LIMIT`]: not synced, leadership undecided, the
    /// stall clock starting now.
    pub fn new() -> Self {
        Self::with_stall_limit(DEFAULT_STALL_LIMIT)
    }

    /// A handle whose `/healthz` fails after `stall_limit` without a tick.
    pub fn with_stall_limit(stall_limit: Duration) -> Self {
        Health(Arc::new(HealthState {
            origin: Instant::now(),
            stall_limit,
            last_tick_ms: AtomicU64::new(0),
            synced: AtomicBool::new(false),
            leadership: AtomicU8::new(UNDECIDED),
        }))
    }

    /// The scheduling loop is alive: call once per iteration (at least once per stall limit).
    pub fn tick(&self) {
        let ms = u64::try_from(self.0.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.last_tick_ms.store(ms, Ordering::Release);
    }

    /// Whether the caches hold the API server's state.
    pub fn set_synced(&self, synced: bool) {
        self.0.synced.store(synced, Ordering::Release);
    }

    /// Whether this replica leads its shard (false: a standby).
    pub fn set_leader(&self, leader: bool) {
        let value = if leader { LEADER } else { STANDBY };
        self.0.leadership.store(value, Ordering::Release);
    }

    /// This replica leads its shard but places nothing yet: it took the Lease over from a
    /// leader whose bindings may still land.
    pub fn set_taking_over(&self) {
        self.0.leadership.store(TAKING_OVER, Ordering::Release);
    }

    /// What `/healthz` answers now.
    pub fn liveness(&self) -> Liveness {
        let state = &self.0;
        let last_tick = Duration::from_millis(state.last_tick_ms.load(Ordering::Acquire));
        let idle = state.origin.elapsed().saturating_sub(last_tick);
        if idle > state.stall_limit {
            Liveness::Stalled {
                idle,
                limit: state.stall_limit,
            }
        } else {
            Liveness::Alive
        }
    }

    /// What `/readyz` answers now.
    pub fn readiness(&self) -> Readiness {
        if self.liveness() != Liveness::Alive {
            return Readiness::Stalled;
        }
        if !self.0.synced.load(Ordering::Acquire) {
            return Readiness::NotSynced;
        }
        match self.0.leadership.load(Ordering::Acquire) {
            LEADER => Readiness::Leader,
            TAKING_OVER => Readiness::TakingOver,
            STANDBY => Readiness::Standby,
            _ => Readiness::LeadershipUndecided,
        }
    }
}

/// The running endpoints: where they listen, and their tasks.
#[derive(Debug)]
pub struct Server {
    metrics_addr: SocketAddr,
    health_addr: SocketAddr,
    /// One serving task per listener, with what it serves (for errors).
    tasks: Vec<(&'static str, JoinHandle<std::io::Result<()>>)>,
}

impl Server {
    /// Where `/metrics` is served (the bound port where port 0 was asked).
    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics_addr
    }

    /// Where `/healthz` and `/readyz` are served.
    pub fn health_addr(&self) -> SocketAddr {
        self.health_addr
    }

    /// Waits until the listeners have stopped (after the shutdown future given to [`serve`]
    /// completed and the requests in flight were answered). Dropping the [`Server`] instead
    /// leaves them serving until that shutdown.
    pub async fn stopped(self) -> anyhow::Result<()> {
        for (what, task) in self.tasks {
            task.await
                .with_context(|| format!("the {what} endpoint's task failed"))?
                .with_context(|| format!("serving the {what} endpoint"))?;
        }
        Ok(())
    }
}

/// Binds the metrics and health listeners and serves them in background tasks until
/// `shutdown` completes. Fails when an address cannot be bound (nothing is served then).
/// Where both addresses are equal and name a port (not 0), one listener serves all paths.
pub async fn serve(
    metrics_addr: SocketAddr,
    health_addr: SocketAddr,
    metrics: Arc<LiveMetrics>,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Server> {
    let shutdown = shutdown.boxed().shared();
    if metrics_addr == health_addr && metrics_addr.port() != 0 {
        let what = "metrics and health";
        let (listener, addr) = bind(metrics_addr, what).await?;
        let routes = metrics_routes(metrics).merge(health_routes(health));
        return Ok(Server {
            metrics_addr: addr,
            health_addr: addr,
            tasks: vec![(what, spawn(listener, routes, shutdown))],
        });
    }
    let (metrics_listener, metrics_addr) = bind(metrics_addr, "metrics").await?;
    let (health_listener, health_addr) = bind(health_addr, "health").await?;
    Ok(Server {
        metrics_addr,
        health_addr,
        tasks: vec![
            (
                "metrics",
                spawn(metrics_listener, metrics_routes(metrics), shutdown.clone()),
            ),
            (
                "health",
                spawn(health_listener, health_routes(health), shutdown),
            ),
        ],
    })
}

/// A listener on `addr` and the address it got.
async fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the {what} endpoint to {addr}"))?;
    let bound = listener
        .local_addr()
        .with_context(|| format!("the address of the {what} endpoint ({addr})"))?;
    Ok((listener, bound))
}

fn spawn(
    listener: TcpListener,
    routes: Router,
    shutdown: Shared<BoxFuture<'static, ()>>,
) -> JoinHandle<std::io::Result<()>> {
    tokio::spawn(async move {
        axum::serve(listener, routes)
            .with_graceful_shutdown(shutdown)
            .await
    })
}

fn metrics_routes(metrics: Arc<LiveMetrics>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .with_state(metrics)
}

fn health_routes(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health)
}

async fn metrics_text(State(metrics): State<Arc<LiveMetrics>>) -> Response {
    match metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(_) => {
            tracing::error!("encoding the live metrics failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "encoding the metrics failed\n",
            )
                .into_response()
        }
    }
}

async fn healthz(State(health): State<Health>) -> (StatusCode, String) {
    match health.liveness() {
        Liveness::Alive => (StatusCode::OK, "ok\n".into()),
        Liveness::Stalled { idle, limit } => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "stalled: the scheduling loop has not ticked for {:.1} s (limit {:.1} s)\n",
                idle.as_secs_f64(),
                limit.as_secs_f64()
            ),
        ),
    }
}

async fn readyz(State(health): State<Health>) -> (StatusCode, &'static str) {
    match health.readiness() {
        Readiness::Leader => (StatusCode::OK, "ok\n"),
        Readiness::TakingOver => (StatusCode::OK, "taking over\n"),
        Readiness::Standby => (StatusCode::OK, "standby\n"),
        Readiness::Stalled => (StatusCode::SERVICE_UNAVAILABLE, "stalled\n"),
        Readiness::NotSynced => (StatusCode::SERVICE_UNAVAILABLE, "not synced\n"),
        Readiness::LeadershipUndecided => {
            (StatusCode::SERVICE_UNAVAILABLE, "leadership undecided\n")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    /// One response: status code, header lines (lower-cased names), body.
    #[derive(Debug)]
    struct Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Answer {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        }
    }

    /// GET `path` with a minimal HTTP/1.1 client (one request, then the server closes).
    async fn get(addr: SocketAddr, path: &str) -> Answer {
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).expect("connects");
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .expect("sets a timeout");
            write!(
                stream,
                "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            )
            .expect("sends the request");
            let mut raw = String::new();
            stream.read_to_string(&mut raw).expect("reads the answer");
            let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
            let mut lines = head.lines();
            let status_line = lines.next().expect("a status line");
            let status = status_line
                .split(' ')
                .nth(1)
                .and_then(|code| code.parse().ok())
                .expect("a status code");
            let headers = lines
                .filter_map(|line| line.split_once(':'))
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
                .collect();
            Answer {
                status,
                headers,
                body: body.to_owned(),
            }
        })
        .await
        .expect("the client ran")
    }

    fn local() -> SocketAddr {
        ([127, 0, 0, 1], 0).into()
    }

    /// Serves on two fresh ports; the sender stops the server.
    async fn start(
        metrics: Arc<LiveMetrics>,
        health: Health,
    ) -> (Server, tokio::sync::oneshot::Sender<()>) {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = serve(local(), local(), metrics, health, async {
            let _ = stopped.await;
        })
        .await
        .expect("serves");
        (server, stop)
    }

    #[tokio::test]
    async fn metrics_are_served_with_their_content_type() {
        let metrics = Arc::new(LiveMetrics::new());
        metrics.queue_depth("team-a", 4);
        let (server, stop) = start(metrics, Health::new()).await;
        assert_ne!(server.metrics_addr(), server.health_addr());

        let answer = get(server.metrics_addr(), "/metrics").await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("content-type"), Some(CONTENT_TYPE));
        assert!(answer.body.ends_with("# EOF\n"));
        assert!(
            answer
                .body
                .lines()
                .any(|line| line == "kant_queue_pending_jobs{queue=\"team-a\"} 4")
        );

        // Each port serves its own paths only.
        assert_eq!(get(server.metrics_addr(), "/healthz").await.status, 404);
        assert_eq!(get(server.metrics_addr(), "/nope").await.status, 404);
        assert_eq!(get(server.health_addr(), "/metrics").await.status, 404);

        let _ = stop.send(());
        let (metrics_addr, health_addr) = (server.metrics_addr(), server.health_addr());
        server.stopped().await.expect("stops cleanly");
        assert!(std::net::TcpStream::connect(metrics_addr).is_err());
        assert!(std::net::TcpStream::connect(health_addr).is_err());
    }

    #[tokio::test]
    async fn healthz_fails_when_the_loop_stalls() {
        let health = Health::with_stall_limit(Duration::from_millis(1_000));
        let (server, _stop) = start(Arc::new(LiveMetrics::new()), health.clone()).await;
        let addr = server.health_addr();

        health.tick();
        let answer = get(addr, "/healthz").await;
        assert_eq!((answer.status, answer.body.as_str()), (200, "ok\n"));

        tokio::time::sleep(Duration::from_millis(1_300)).await;
        let answer = get(addr, "/healthz").await;
        assert_eq!(answer.status, 503);
        assert!(answer.body.starts_with("stalled: "), "{}", answer.body);
        health.set_synced(true);
        health.set_leader(true);
        assert_eq!(get(addr, "/readyz").await.status, 503);

        health.tick();
        assert_eq!(get(addr, "/healthz").await.status, 200);
        assert_eq!(get(addr, "/readyz").await.status, 200);
    }

    #[tokio::test]
    async fn readyz_follows_sync_and_leadership() {
        let health = Health::new();
        let (server, _stop) = start(Arc::new(LiveMetrics::new()), health.clone()).await;
        let addr = server.health_addr();
        let readyz = || async move {
            let answer = get(addr, "/readyz").await;
            (answer.status, answer.body)
        };

        assert_eq!(readyz().await, (503, "not synced\n".into()));
        // Before any tick, the loop is not stalled yet: the limit counts from creation.
        assert_eq!(get(addr, "/healthz").await.status, 200);
        health.set_synced(true);
        assert_eq!(readyz().await, (503, "leadership undecided\n".into()));
        health.set_leader(false);
        assert_eq!(readyz().await, (200, "standby\n".into()));
        health.set_leader(true);
        assert_eq!(readyz().await, (200, "ok\n".into()));
        health.set_synced(false);
        assert_eq!(readyz().await, (503, "not synced\n".into()));
    }

    #[tokio::test]
    async fn one_address_serves_every_path() {
        // A free port, released for the server to take.
        let port = std::net::TcpListener::bind(local())
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let health = Health::new();
        health.set_synced(true);
        health.set_leader(true);
        let metrics = Arc::new(LiveMetrics::new());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = serve(addr, addr, metrics, health, async {
            let _ = stopped.await;
        })
        .await
        .expect("serves");
        assert_eq!(server.metrics_addr(), addr);
        assert_eq!(server.health_addr(), addr);
        assert_eq!(get(addr, "/metrics").await.status, 200);
        assert_eq!(get(addr, "/healthz").await.status, 200);
        assert_eq!(get(addr, "/readyz").await.status, 200);
        assert_eq!(get(addr, "/").await.status, 404);
        let _ = stop.send(());
        server.stopped().await.expect("stops cleanly");
    }

    #[tokio::test]
    async fn an_address_in_use_is_an_error() {
        let taken = std::net::TcpListener::bind(local()).expect("a port");
        let addr = taken.local_addr().expect("its address");
        let result = serve(
            local(),
            addr,
            Arc::new(LiveMetrics::new()),
            Health::new(),
            std::future::pending(),
        )
        .await;
        let error = format!("{:#}", result.expect_err("the port is taken"));
        assert!(error.contains("binding the health endpoint"), "{error}");
    }
}
