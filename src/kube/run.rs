//! `kant run`: connects to the API server, starts the watches, the writer, the endpoints
//! and the shard's leader election, and runs the scheduling loop on a thread of its own.
//! The loop owns the [`World`]; it takes in every event that arrived, runs a round, and
//! hands the outputs to the writer, never waiting on the network.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::events::Reporter;
use kube::{Api, Client};

use crate::config::Config;
use crate::metrics::live::LiveMetrics;
use crate::plugins::build_profile;

use super::lease::{self, Attempt, Elector, LEASE_PREFIX, ShardClaim, ShardLeases};
use super::serve::{Health, serve};
use super::watch;
use super::world::{Input, World, WorldOptions};
use super::writer::Writer;

/// Everything `kant run` is told.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// A kubeconfig file; `None`: in-cluster configuration (or `KUBECONFIG`).
    pub kubeconfig: Option<PathBuf>,
    pub config: Config,
    /// The profile to run; `None`: the configuration's default.
    pub profile: Option<String>,
    pub world: WorldOptions,
    pub lease_namespace: String,
    /// This replica's identity in the Lease (its pod name).
    pub identity: String,
    /// Whether to elect a leader; without, this replica schedules at once (one replica).
    pub leader_election: bool,
    pub metrics_addr: SocketAddr,
    pub health_addr: SocketAddr,
    /// Bindings and evictions in flight at most.
    pub max_in_flight: usize,
    /// Status writes per second at most.
    pub status_qps: u32,
    /// The longest a binding, an eviction or a status write waits for the API server's
    /// answer.
    pub api_timeout: Duration,
}

/// The host name and a random suffix: two replicas started without an identity never
/// share one, and so never both hold the Lease.
pub fn unique_identity() -> String {
    use std::hash::BuildHasher;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kant-scheduler".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // The standard library seeds each `RandomState` at random.
    let suffix =
        std::collections::hash_map::RandomState::new().hash_one((std::process::id(), nanos));
    format!("{host}_{suffix:016x}")
}

impl RunOptions {
    /// Options for one replica with the defaults of the command line.
    pub fn new(config: Config) -> Self {
        Self {
            kubeconfig: None,
            config,
            profile: None,
            world: WorldOptions::default(),
            lease_namespace: "kube-system".into(),
            identity: unique_identity(),
            leader_election: true,
            metrics_addr: ([0, 0, 0, 0], 9090).into(),
            health_addr: ([0, 0, 0, 0], 8081).into(),
            max_in_flight: 64,
            status_qps: 50,
            api_timeout: Duration::from_secs(30),
        }
    }
}

/// The addresses a running scheduler serves on (port 0 in the options gets a free one).
#[derive(Debug, Clone, Copy)]
pub struct Serving {
    pub metrics: SocketAddr,
    pub health: SocketAddr,
}

/// Milliseconds since the Unix epoch: the Kubernetes world's clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Why `kant run` ended by itself.
#[derive(Debug)]
pub enum RunError {
    /// What it was given cannot run: the kubeconfig (or no in-cluster configuration), the
    /// profile, the configuration.
    Setup(anyhow::Error),
    /// It ran and stopped: it lost its Lease, or could not serve or go on.
    Stopped(anyhow::Error),
}

/// The error and its causes, joined by `: `, leaving out a cause whose text the message
/// already ends with (kube's errors print their source in their own text).
impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (RunError::Setup(e) | RunError::Stopped(e)) = self;
        let mut message = String::new();
        for cause in e.chain() {
            let text = cause.to_string();
            if message.is_empty() {
                message = text;
            } else if !message.ends_with(&text) {
                message = format!("{message}: {text}");
            }
        }
        f.write_str(&message)
    }
}

impl std::error::Error for RunError {}

/// Runs the scheduler until `shutdown` completes. `serving` learns the bound addresses.
pub async fn run(
    options: RunOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
    serving: Option<tokio::sync::oneshot::Sender<Serving>>,
) -> Result<(), RunError> {
    let config = client_config(options.kubeconfig.as_deref())
        .await
        .map_err(RunError::Setup)?;
    run_with_config(config, options, shutdown, serving).await
}

async fn client_config(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Config> {
    match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("kubeconfig {}", path.display()))
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig given and no in-cluster configuration found"),
    }
}

/// How long the client waits for the API server's next bytes before it takes the
/// connection for dead, where its configuration sets no limit (kube's default): a watch
/// call ends within [`watch::WATCH_TIMEOUT_S`], and this bounds every other call too. A
/// list (after a 410 Gone, say) sent over a connection gone silent, an API server lost
/// behind a load balancer, would otherwise never return, and that watch's kind would stay
/// as last seen for good.
const READ_TIMEOUT: Duration = Duration::from_secs(watch::WATCH_TIMEOUT_S as u64 + 15);

/// The client configuration with [`READ_TIMEOUT`] where it sets no read timeout, counted
/// from each request sent rather than from when its pooled connection went idle.
fn with_read_timeout(mut config: kube::Config) -> kube::Config {
    if config.read_timeout.is_none() {
        config.read_timeout = Some(READ_TIMEOUT);
        config.reset_reader_on_write = true;
    }
    config
}

/// [`run`] with the client configuration given (tests give one for their in-process API
/// server).
pub async fn run_with_config(
    client_config: kube::Config,
    options: RunOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
    serving: Option<tokio::sync::oneshot::Sender<Serving>>,
) -> Result<(), RunError> {
    let setup = |e: anyhow::Error| RunError::Setup(e);
    let client_config = with_read_timeout(client_config);
    let client = Client::try_from(client_config.clone())
        .context("building the Kubernetes client")
        .map_err(setup)?;
    // Evictions see a disruption budget's 429 at once, rather than after kube's retries.
    let mut no_retry = client_config;
    no_retry.default_retry = false;
    let eviction_client = Client::try_from(no_retry)
        .context("building the Kubernetes client")
        .map_err(setup)?;
    let config = &options.config;
    let profile_name = options
        .profile
        .as_deref()
        .unwrap_or(&config.default_profile);
    let profile = config.profile(profile_name).ok_or_else(|| {
        RunError::Setup(anyhow::anyhow!(
            "no profile `{profile_name}` in the configuration"
        ))
    })?;
    let profile = build_profile(profile, config).map_err(|e| setup(anyhow::Error::msg(e)))?;
    let metrics = Arc::new(LiveMetrics::new());
    // A replica stands by until it leads (World::took_the_lead).
    metrics.set_leading(!options.leader_election);
    let health = Health::new();
    let world = World::new(options.world.clone(), config, profile, metrics.clone())
        .map_err(|e| setup(anyhow::Error::msg(e)))?;

    let (stop_serving, serving_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = serve(
        options.metrics_addr,
        options.health_addr,
        metrics.clone(),
        health.clone(),
        async {
            let _ = serving_stopped.await;
        },
    )
    .await
    .map_err(RunError::Stopped)?;
    if let Some(tx) = serving {
        let _ = tx.send(Serving {
            metrics: server.metrics_addr(),
            health: server.health_addr(),
        });
    }

    let (inputs, events) = mpsc::channel::<Input>();
    let relist_pods = Arc::new(tokio::sync::Notify::new());
    let watchers = watch::spawn_all(&client, &inputs, relist_pods.clone());
    let reporter = Reporter {
        controller: options.world.scheduler_name.clone(),
        instance: Some(options.identity.clone()),
    };
    let leader = Arc::new(AtomicBool::new(!options.leader_election));
    let writer = Writer::start(
        (client.clone(), eviction_client),
        inputs.clone(),
        leader.clone(),
        reporter,
        &options,
    );
    let (lost_tx, lost) = tokio::sync::oneshot::channel::<String>();
    let election = options.leader_election.then(|| {
        elect(
            client.clone(),
            &options,
            leader.clone(),
            health.clone(),
            metrics.clone(),
            inputs.clone(),
            lost_tx,
        )
    });
    if election.is_none() {
        health.set_leader(true);
        if !options.world.shard_models.is_empty() {
            tracing::warn!(
                "without leader election this shard writes no Lease: the other shards \
                 cannot see the GPU models it schedules, and a pod naming one of them \
                 and one of theirs may be placed by both (the API server takes one binding)"
            );
        }
    }

    let stopping = Arc::new(AtomicBool::new(false));
    let loop_thread = {
        let (stopping, leader, health) = (stopping.clone(), leader.clone(), health.clone());
        // Without an election there is no leader before this replica to catch up with.
        let relist_pods = election.is_some().then_some(relist_pods);
        std::thread::Builder::new()
            .name("kant-scheduling".into())
            .spawn(move || {
                scheduling_loop(world, events, writer, leader, health, stopping, relist_pods)
            })
            .context("starting the scheduling thread")
            .map_err(RunError::Stopped)?
    };
    // A leader that loses its lease stops, as kube-scheduler does: what it had in flight
    // is the new leader's to find in the API server, and a fresh replica starts as a
    // standby with a clean cache.
    let lost_lease = tokio::select! {
        () = shutdown => None,
        Ok(lease) = lost => Some(lease),
    };
    stopping.store(true, Ordering::Release);
    // It schedules no more: another replica may lead meanwhile.
    metrics.set_leading(false);
    // Wakes the loop if it sleeps.
    drop(inputs);
    for task in watchers {
        task.abort();
    }
    let writer = tokio::task::spawn_blocking(move || loop_thread.join()).await;
    // Scheduling has stopped, and what it sent has been answered: the Lease is given up,
    // if held. What is still unanswered by then is sent no further, and the Lease is left
    // to expire: the replica that takes it over waits for those bindings.
    if let Some(Election { task, stop }) = election {
        let answered = match writer {
            Ok(Ok(writer)) => writer.drained(options.api_timeout).await,
            _ => false,
        };
        if !answered {
            leader.store(false, Ordering::Release);
        }
        let _ = stop.send(answered);
        let _ = tokio::time::timeout(lease::RELEASE_WITHIN, task).await;
    }
    let _ = stop_serving.send(());
    server.stopped().await.map_err(RunError::Stopped)?;
    match lost_lease {
        Some(lease) => Err(RunError::Stopped(anyhow::anyhow!(
            "lost the lease {lease} after leading; exiting"
        ))),
        None => Ok(()),
    }
}

/// The shard's leader election, running: stopping it gives the Lease up when told `true`
/// (what this replica sent has been answered).
struct Election {
    task: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<bool>,
}

/// Leader election on the shard's Lease ([`lease`]): `leader` and `health` follow it. A
/// leader that loses it, to another replica or by not renewing it in time, says so on
/// `lost`; one told to stop gives it up once what it sent is answered. One that takes it
/// over from a leader whose record expired, or from an earlier run of itself, places
/// nothing for `--api-timeout`. While leading, it reads the shards' Leases
/// ([`ShardsCheck`]: what they show goes to `inputs`, overlaps into `metrics`).
fn elect(
    client: Client,
    options: &RunOptions,
    leader: Arc<AtomicBool>,
    health: Health,
    metrics: Arc<LiveMetrics>,
    inputs: mpsc::Sender<Input>,
    lost: tokio::sync::oneshot::Sender<String>,
) -> Election {
    let name = format!("{LEASE_PREFIX}{}", options.world.shard);
    let leases: Api<Lease> = Api::namespaced(client, &options.lease_namespace);
    let claim = ShardClaim {
        scheduler_name: options.world.scheduler_name.clone(),
        gpu_models: options.world.shard_models.clone(),
        default_shard: options.world.default_shard,
    };
    let own_claim = claim.to_string();
    let mut elector = Elector::new(leases, name, options.identity.clone(), claim);
    let api_timeout = options.api_timeout;
    let shards = ShardsCheck::new(metrics.clone(), inputs);
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<bool>();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(lease::RETRY_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tracing::info!("standing by for lease {}", elector.name());
        // A Lease that cannot be read or written (no Role, no such namespace) is said once
        // per distinct error: every replica would stand by for good. Until the Lease has
        // been read once, leadership stays undecided and the replica is not ready, so
        // that a rollout of replicas that can never lead stops.
        let mut last_failure = None;
        // The leader's differing claim, said once each.
        let mut told_claim = None;
        let (mut renewed, taken_over_from) = loop {
            tokio::select! {
                _ = &mut stopped => return,
                _ = tick.tick() => {}
            }
            let deadline = tokio::time::Instant::now() + lease::RENEW_DEADLINE;
            // A stop is not kept waiting for a try that may take the renew deadline.
            let attempt = tokio::select! {
                _ = &mut stopped => return,
                attempt = elector.try_acquire_or_renew(deadline) => attempt,
            };
            match attempt {
                Attempt::Holds(sent) => break (sent, None),
                Attempt::TookOver(from, sent) => break (sent, Some(from)),
                Attempt::HeldByOther(holder, differing) => {
                    health.set_leader(false);
                    last_failure = None;
                    if let Some(claim) = differing
                        .as_ref()
                        .filter(|c| told_claim.as_ref() != Some(*c))
                    {
                        tracing::error!(
                            "lease {}: its leader {holder} schedules {claim}, this replica {}: \
                             unless a rollout is changing the shard's flags, two Deployments \
                             were given the same --shard, and what only this one names is \
                             scheduled by no one while it stands by",
                            elector.name(),
                            own_claim,
                        );
                    }
                    told_claim = differing;
                }
                Attempt::Failed(e) if last_failure.as_ref() != Some(&e) => {
                    tracing::warn!("lease {}: {e}; trying again", elector.name());
                    last_failure = Some(e);
                }
                Attempt::Failed(_) => {}
            }
        };
        // Read apart, so that a slow listing never holds a renewal back; it ends with
        // the leadership.
        let shards_check = AbortOnDrop(tokio::spawn(shards.run(elector.shard_leases())));
        // The leader replaced stood down unheard (or is an earlier run of this replica): a
        // binding it sent just before may land up to --api-timeout later, onto devices
        // this replica would see free. Nothing is placed until then, so that the watch
        // shows those bindings first.
        let mut fenced_until = match taken_over_from {
            None => {
                leader.store(true, Ordering::Release);
                health.set_leader(true);
                tracing::info!("leading lease {}: scheduling", elector.name());
                None
            }
            Some(from) => {
                tracing::info!(
                    "leading lease {}, taken over from {from} (whose record expired, or an \
                     earlier run of this replica): placing nothing for {api_timeout:?}, \
                     while bindings it sent may still land",
                    elector.name()
                );
                health.set_taking_over();
                Some(tokio::time::Instant::now() + api_timeout)
            }
        };
        let lease_name = elector.name().to_owned();
        let why = loop {
            let deadline = renewed + lease::RENEW_DEADLINE;
            let next = {
                // Kept in flight when the wait above ends: a renewal dropped there could
                // still land, and the next would take a read and a second write.
                let renewal = async {
                    tick.tick().await;
                    elector.try_acquire_or_renew(deadline).await
                };
                tokio::pin!(renewal);
                loop {
                    tokio::select! {
                        answered = &mut stopped => break Leading::Stopped(answered == Ok(true)),
                        () = tokio::time::sleep_until(deadline) => break Leading::NotRenewed,
                        () = tokio::time::sleep_until(fenced_until.unwrap_or(deadline)),
                            if fenced_until.is_some() =>
                        {
                            fenced_until = None;
                            leader.store(true, Ordering::Release);
                            health.set_leader(true);
                            tracing::info!("lease {lease_name}: scheduling");
                        }
                        attempt = &mut renewal => break Leading::Tried(attempt),
                    }
                }
            };
            match next {
                Leading::Stopped(answered) => {
                    // The loop has stopped scheduling: the Lease is free for a standby,
                    // unless bindings this replica or the leader before it sent may
                    // still land. Left to expire, it is taken over by one that waits.
                    if answered && fenced_until.is_none() {
                        elector.release().await;
                    } else {
                        tracing::warn!(
                            "lease {lease_name}: left to expire, as bindings sent may still land"
                        );
                    }
                    return;
                }
                Leading::NotRenewed => {
                    break format!("no renewal landed within {:?}", lease::RENEW_DEADLINE);
                }
                Leading::Tried(attempt) => match attempt {
                    Attempt::Holds(sent) => renewed = sent,
                    Attempt::HeldByOther(other, _) => break format!("{other} holds it"),
                    // Another replica led meanwhile.
                    Attempt::TookOver(other, _) => break format!("{other} held it meanwhile"),
                    Attempt::Failed(e) => tracing::warn!("lease {lease_name}: not renewed ({e})"),
                },
            }
        };
        drop(shards_check);
        tracing::warn!("lease {lease_name}: {why}; standing down");
        leader.store(false, Ordering::Release);
        health.set_leader(false);
        metrics.set_leading(false);
        let _ = lost.send(lease_name);
    });
    Election { task, stop }
}

/// What ended a leader's wait for its next renewal.
enum Leading {
    /// Told to stop; whether what it sent was all answered.
    Stopped(bool),
    /// The renew deadline passed.
    NotRenewed,
    /// A renewal was tried: what it found.
    Tried(Attempt),
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How often a leader reads the shards' Leases.
const SHARDS_CHECK_EVERY: Duration = Duration::from_secs(30);

/// How often an overlap that lasts is logged again.
const OVERLAP_REPEAT: Duration = Duration::from_secs(600);

/// A leader's look at the shards' Leases ([`ShardLeases::read`]), as soon as it leads and
/// every [`SHARDS_CHECK_EVERY`] after. What they show goes to the scheduling loop
/// ([`Input::Shards`]: a pod naming several GPU models goes to a shard configured for one
/// of them). Other shards' leaders configured to schedule this one's GPU models (or the
/// pods naming none) too ([`ShardLeases::overlapping`]) are each logged as an error when
/// found and every [`OVERLAP_REPEAT`] while it lasts, and exported as `kant_shard_overlap`.
/// Nothing stops: which shard is wrong is not known.
struct ShardsCheck {
    metrics: Arc<LiveMetrics>,
    inputs: mpsc::Sender<Input>,
    found: Vec<(String, Vec<String>)>,
    logged: Option<tokio::time::Instant>,
    /// The last reason the Leases could not be listed, said once.
    failure: Option<String>,
    /// Whether no current shard was found to take the pods that name no GPU model.
    no_default_shard: bool,
}

impl ShardsCheck {
    fn new(metrics: Arc<LiveMetrics>, inputs: mpsc::Sender<Input>) -> Self {
        Self {
            metrics,
            inputs,
            found: Vec::new(),
            logged: None,
            failure: None,
            no_default_shard: false,
        }
    }

    /// Looks at once, then every [`SHARDS_CHECK_EVERY`], a listing given up when the next
    /// look is due.
    async fn run(mut self, leases: ShardLeases) {
        let mut tick = tokio::time::interval(SHARDS_CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.look(&leases).await;
        }
    }

    async fn look(&mut self, leases: &ShardLeases) {
        let now = tokio::time::Instant::now();
        let shards = match leases.read(now + SHARDS_CHECK_EVERY).await {
            Ok(shards) => shards,
            Err(e) => {
                if self.failure.as_ref() != Some(&e) {
                    tracing::warn!(
                        "leases: cannot list them to see the other shards ({e}); trying \
                         again every {SHARDS_CHECK_EVERY:?} (the Role needs `list` on leases)"
                    );
                    self.failure = Some(e);
                }
                return;
            }
        };
        self.failure = None;
        let no_default_shard = !shards.iter().any(|s| s.current && s.claim.default_shard);
        if no_default_shard && !self.no_default_shard {
            tracing::error!(
                "no shard of this scheduler takes the pods that name no GPU model (no \
                 replica was started with --default-shard): they wait, and no one tells them"
            );
        } else if !no_default_shard && self.no_default_shard {
            tracing::info!("a shard takes the pods that name no GPU model again");
        }
        self.no_default_shard = no_default_shard;
        let found = leases.overlapping(&shards);
        // The loop has stopped if it hung up; it ignores a view that changes nothing.
        let _ = self.inputs.send(Input::Shards(shards));
        let repeat = self.logged.is_some_and(|at| now >= at + OVERLAP_REPEAT);
        if !found.is_empty() && (found != self.found || repeat) {
            for (lease, shared) in &found {
                tracing::error!(
                    "lease {lease}: that shard's leader schedules {} too, as this one ({}) \
                     does: both place pods on the same nodes, each unaware of the other's \
                     bindings in flight; give each shard --gpu-models of its own, and \
                     --default-shard to one",
                    shared.join(", "),
                    leases.name()
                );
            }
            self.logged = Some(now);
        } else if found.is_empty() && !self.found.is_empty() {
            tracing::info!("no other shard's leader schedules this shard's GPU models any more");
            self.logged = None;
        }
        (self.metrics).set_shard_overlaps(found.iter().map(|(lease, _)| lease.clone()));
        self.found = found;
    }
}

/// The longest the loop sleeps without an event, so that health keeps ticking.
const IDLE_TICK: Duration = Duration::from_millis(500);

/// The most events taken into one round.
const MAX_BATCH: usize = 4096;

/// Runs rounds until told to stop (or the inputs hang up); returns the writer, so that
/// what it still carries can be waited for.
fn scheduling_loop(
    mut world: World,
    events: mpsc::Receiver<Input>,
    writer: Writer,
    leader: Arc<AtomicBool>,
    health: Health,
    stopping: Arc<AtomicBool>,
    relist_pods: Option<Arc<tokio::sync::Notify>>,
) -> Writer {
    let mut wakeup: Option<u64> = None;
    let mut leading = false;
    while !stopping.load(Ordering::Acquire) {
        health.tick();
        let now = now_ms();
        let wait = wakeup
            .map_or(IDLE_TICK, |t| Duration::from_millis(t.saturating_sub(now)))
            .min(IDLE_TICK);
        let first = match events.recv_timeout(wait) {
            Ok(input) => Some(input),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return writer,
        };
        // What arrived meanwhile goes into one round, at one time; a storm of events is
        // cut into rounds of at most MAX_BATCH so that scheduling keeps its pace.
        let now = now_ms();
        let rest = std::iter::from_fn(|| events.try_recv().ok());
        for input in first.into_iter().chain(rest).take(MAX_BATCH) {
            world.apply(input, now);
        }
        health.set_synced(world.synced());
        let leads = leader.load(Ordering::Acquire);
        if leads && !leading {
            // The watch may run behind the leader before: the pods are listed anew, and
            // nothing is placed until that listing is in.
            world.took_the_lead(relist_pods.is_some());
            if let Some(relist) = &relist_pods {
                relist.notify_one();
            }
        }
        leading = leads;
        if leads {
            world.round(now);
            let outputs = world.take_outputs();
            // A leader that stood down during the round sends nothing of it.
            if leader.load(Ordering::Acquire) {
                for output in outputs {
                    writer.send(output);
                }
            }
        } else {
            // A standby keeps its cache warm and writes nothing.
            world.take_outputs();
        }
        wakeup = world.next_wakeup(now);
    }
    writer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_read_is_bounded_unless_the_configuration_bounds_it_itself() {
        let config = kube::Config::new("https://api.example:6443".parse().unwrap());
        let bounded = with_read_timeout(config.clone());
        assert_eq!(bounded.read_timeout, Some(Duration::from_secs(75)));
        assert!(bounded.reset_reader_on_write);
        let mut own = config;
        own.read_timeout = Some(Duration::from_secs(5));
        assert_eq!(
            with_read_timeout(own).read_timeout,
            Some(Duration::from_secs(5))
        );
    }
}
