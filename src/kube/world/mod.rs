//! The Kubernetes world as a synchronous state machine: watch events go in ([`Input`]),
//! the scheduler's decisions come out as API writes to carry out ([`Output`]). It owns the
//! mapping between Kubernetes objects and the scheduler's model: pods to jobs (a lone pod,
//! or a PodGroup's gang), nodes to the cluster spec, Queues to tenants. It performs no
//! I/O and never waits: the async driver (`kube::run`) feeds it and executes its outputs,
//! and tests drive it directly.
//!
//! A round ([`World::round`]) applies what the events changed, in order: a node kept with
//! GPU devices it no longer lists takes up its listing once no pod holds them, the cluster
//! is rebuilt if a node changed in a way that matters, the tenants if a Queue changed, pods
//! found bound are adopted, waiting pods form jobs and enter their queues, devices reported
//! unhealthy are marked; then the scheduler runs and its decisions become bindings,
//! evictions and status.

mod nodes;
mod outcomes;
mod pods;
mod report;
mod resync;
mod returns;
mod volumes;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::watcher;

use crate::config::Config;
use crate::framework::{Bind, JobPlan, Plugin, Profile, Scheduler, Status};
use crate::metrics::live::LiveMetrics;
use crate::model::{Job, JobId, node_device_mask};
use crate::queue::Tenants;

use super::convert::{NodeConverter, TopologyKeys};
use super::crd::{PodGroup, PodGroupStatus, Queue, QueueStatus};
pub use super::events::{Kind as EventKind, Regarding};
use super::lease::ShardSeen;

pub use pods::PodRef;
pub use volumes::{ClaimBinding, SELECTED_NODE_ANNOTATION};

use nodes::Nodes;
use pods::Pods;
use report::Reporter;
use resync::{Change, Resync};
use volumes::Volumes;

/// How this replica takes part in the cluster.
#[derive(Debug, Clone)]
pub struct WorldOptions {
    /// Pods opt in with this `spec.schedulerName`.
    pub scheduler_name: String,
    /// This replica's shard: its leader election's Lease is `kant-scheduler-<shard>`, and
    /// a Queue's status counts its jobs under this name.
    pub shard: String,
    /// The GPU models (node pools) this replica schedules; empty: every model.
    pub shard_models: Vec<String>,
    /// Whether this replica also takes pods that name no GPU model. (Every replica uses
    /// CPU-only nodes, for the launchers of its gangs.)
    pub default_shard: bool,
    pub topology_keys: TopologyKeys,
    /// The shortest time between two explanations of why one job waits (each costs a
    /// pass over the nodes of its pools).
    pub diagnose_every_ms: u64,
    /// The most such explanations per round, so that a long backlog never slows a round.
    pub diagnoses_per_round: usize,
}

impl Default for WorldOptions {
    fn default() -> Self {
        Self {
            scheduler_name: "kant-scheduler".into(),
            shard: "all".into(),
            shard_models: Vec::new(),
            default_shard: true,
            topology_keys: TopologyKeys::default(),
            diagnose_every_ms: 30_000,
            diagnoses_per_round: 16,
        }
    }
}

impl WorldOptions {
    /// Whether pods and nodes of GPU model `model` belong to this replica.
    fn owns_model(&self, model: &str) -> bool {
        self.shard_models.is_empty() || self.shard_models.iter().any(|s| s == model)
    }
}

/// The GPU models some shard of this scheduler is configured for, as the shards' current
/// Leases show them (this replica's own included).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ShardModels {
    /// Some shard takes every model.
    Every,
    Listed(BTreeSet<String>),
}

impl ShardModels {
    fn of(shards: &[ShardSeen], own: &WorldOptions) -> Self {
        let mut listed = BTreeSet::new();
        let current = shards.iter().filter(|s| s.current);
        for models in (current.map(|s| &s.claim.gpu_models)).chain([&own.shard_models]) {
            if models.is_empty() {
                return ShardModels::Every;
            }
            listed.extend(models.iter().cloned());
        }
        ShardModels::Listed(listed)
    }

    fn has(&self, model: &str) -> bool {
        match self {
            ShardModels::Every => true,
            ShardModels::Listed(listed) => listed.contains(model),
        }
    }
}

/// What the world is told: watch events, and the outcomes of the writes it asked for.
#[derive(Debug)]
pub enum Input {
    Pod(Box<watcher::Event<Pod>>),
    /// The pod watch starts a listing anew, as [`World::took_the_lead`] asked: the pods it
    /// lists next were read after the lead was taken.
    PodsListedAnew,
    Node(Box<watcher::Event<Node>>),
    PodGroup(Box<watcher::Event<PodGroup>>),
    Queue(Box<watcher::Event<Queue>>),
    Claim(Box<watcher::Event<PersistentVolumeClaim>>),
    Volume(Box<watcher::Event<PersistentVolume>>),
    StorageClass(Box<watcher::Event<StorageClass>>),
    /// A binding of one pod was answered (`round`: the job's binding round it was sent in).
    Bound {
        job: JobId,
        pod: u32,
        round: u64,
        outcome: Result<(), WriteError>,
        latency: std::time::Duration,
    },
    /// An eviction of one pod was answered.
    Evicted {
        job: JobId,
        pod: u32,
        outcome: Result<(), WriteError>,
    },
    /// A status write failed in a way that may pass if sent again (no answer, 429, 5xx):
    /// it is to be written again.
    NotWritten(Unwritten),
    /// The shards of this scheduler, as their Leases show them (read by the leader every
    /// 30 s).
    Shards(Vec<ShardSeen>),
}

/// Which status write failed ([`Input::NotWritten`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unwritten {
    /// A pod's `PodScheduled` condition.
    Condition(PodRef),
    /// A PodGroup's status (namespace, name).
    PodGroup(String, String),
    /// A Queue's status.
    Queue(String),
}

/// Why a write to the API server failed: its HTTP code (`None`: no answer) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteError {
    pub code: Option<u16>,
    pub message: String,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            Some(code) => write!(f, "{code}: {}", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

/// A write for the driver to carry out.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Bind the pod to the node through `pods/binding`, with the device annotations;
    /// `round` tells the answer from those of the job's earlier placements. Its claims
    /// not bound yet (in the pod's namespace) are bound first, as `claims` says.
    Bind {
        job: JobId,
        pod: u32,
        round: u64,
        target: PodRef,
        node: String,
        annotations: BTreeMap<String, String>,
        claims: Vec<ClaimBinding>,
    },
    /// Evict the pod through the Eviction API (disruption budgets hold).
    Evict {
        job: JobId,
        pod: u32,
        target: PodRef,
    },
    /// Set the pod's `PodScheduled` condition, only if the pod has not changed since this
    /// resourceVersion (a binding that landed meanwhile wins over a stale "unschedulable").
    PodCondition {
        target: PodRef,
        resource_version: String,
        /// The status changes: its `lastTransitionTime` is set.
        transition: bool,
        condition: Condition,
    },
    /// Set the pod's `status.nominatedNodeName`; `None` clears it.
    Nominate {
        target: PodRef,
        node: Option<String>,
    },
    /// Record an event.
    Event {
        target: Regarding,
        warning: bool,
        reason: &'static str,
        message: String,
    },
    PodGroupStatus {
        namespace: String,
        name: String,
        status: PodGroupStatus,
    },
    QueueStatus {
        name: String,
        status: QueueStatus,
    },
}

/// A `PodScheduled` condition to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

/// The binder the scheduler sees: the world carries bindings out after the round, so
/// every placement waits for the API server's answer.
struct DeferredBinder;

impl Plugin for DeferredBinder {
    fn name(&self) -> &'static str {
        "api-binder"
    }
}

impl Bind for DeferredBinder {
    fn bind(&self, _job: &Job, _plan: &JobPlan) -> Status {
        Status::new(
            crate::framework::Code::Wait,
            "binding through the API server",
        )
    }
}

/// Which watch streams have delivered their first complete listing.
#[derive(Debug, Default, Clone, Copy)]
struct Synced {
    pods: bool,
    nodes: bool,
    groups: bool,
    queues: bool,
    claims: bool,
    volumes: bool,
    classes: bool,
}

/// The state machine. See the module documentation.
pub struct World {
    options: WorldOptions,
    scheduler: Scheduler,
    nodes: Nodes,
    pods: Pods,
    groups: HashMap<(String, String), PodGroup>,
    queues: BTreeMap<String, Queue>,
    volumes: Volumes,
    tenants_dirty: bool,
    pod_resync: Resync<Pod>,
    node_resync: Resync<Node>,
    group_resync: Resync<PodGroup>,
    queue_resync: Resync<Queue>,
    claim_resync: Resync<PersistentVolumeClaim>,
    volume_resync: Resync<PersistentVolume>,
    class_resync: Resync<StorageClass>,
    synced: Synced,
    reporter: Reporter,
    metrics: Arc<LiveMetrics>,
    outputs: Vec<Output>,
    /// Which of a pod's scheduling fields the profile's plugins enforce.
    enforced: Enforced,
    /// The GPU models some shard is configured for; `None` until the Leases are read.
    shard_models: Option<ShardModels>,
}

/// Whether the profile has the filters that enforce a pod's node and inter-pod rules (a
/// custom profile may leave them out; the pods are then told).
#[derive(Debug, Clone, Copy)]
pub(super) struct Enforced {
    pub node_affinity: bool,
    pub pod_affinity: bool,
    pub topology_spread: bool,
}

impl Enforced {
    fn of(profile: &Profile) -> Self {
        let has = |name: &str| profile.filters.iter().any(|f| f.name() == name);
        Self {
            node_affinity: has("node-affinity"),
            pod_affinity: has("pod-affinity"),
            topology_spread: has("topology-spread"),
        }
    }
}

impl World {
    /// A world for `profile`, with the configuration's link layouts for nodes that do not
    /// describe their own.
    pub fn new(
        options: WorldOptions,
        config: &Config,
        profile: Profile,
        metrics: Arc<LiveMetrics>,
    ) -> Result<World, String> {
        let converter = NodeConverter::new(config, options.topology_keys.clone())?;
        let mut nodes = Nodes::new(converter);
        let spec = nodes.build_spec();
        let tenants = Tenants::resolve(&[], &spec)?;
        let enforced = Enforced::of(&profile);
        let mut scheduler =
            Scheduler::with_tenants(profile, Box::new(DeferredBinder), Arc::new(spec), tenants);
        // Evicted pods take time to go: their devices are theirs until they are gone.
        scheduler.hold_victims_until_gone();
        Ok(World {
            scheduler,
            nodes,
            pods: Pods::default(),
            groups: HashMap::new(),
            queues: BTreeMap::new(),
            volumes: Volumes::default(),
            tenants_dirty: false,
            pod_resync: Resync::default(),
            node_resync: Resync::default(),
            group_resync: Resync::default(),
            queue_resync: Resync::default(),
            claim_resync: Resync::default(),
            volume_resync: Resync::default(),
            class_resync: Resync::default(),
            synced: Synced::default(),
            reporter: Reporter::new(options.diagnose_every_ms, options.diagnoses_per_round),
            metrics,
            outputs: Vec::new(),
            enforced,
            shard_models: None,
            options,
        })
    }

    /// Whether every watch has delivered its first complete listing: only then is the
    /// cache trustworthy enough to place anything (a device bound before a restart must be
    /// known before it could be given again).
    pub fn synced(&self) -> bool {
        let s = self.synced;
        s.pods && s.nodes && s.groups && s.queues && s.claims && s.volumes && s.classes
    }

    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// How many jobs the world keeps: queued, being placed, running or leaving.
    pub fn job_count(&self) -> usize {
        self.pods.jobs.len()
    }

    /// Takes in one event at `now_ms` (Unix milliseconds). Nothing is scheduled until the
    /// next [`World::round`].
    pub fn apply(&mut self, input: Input, now_ms: u64) {
        match input {
            Input::Pod(event) => {
                let change = self.pod_resync.feed(*event);
                self.synced.pods |= self.pod_resync.synced();
                if let Some(change) = change {
                    self.apply_pods(change, now_ms);
                }
            }
            Input::PodsListedAnew => self.pod_resync.begun_anew(),
            Input::Node(event) => {
                let change = self.node_resync.feed(*event);
                self.synced.nodes |= self.node_resync.synced();
                if let Some(change) = change {
                    let left_other_shards = self.nodes.apply(change, &self.options);
                    self.nodes_changed(left_other_shards, now_ms);
                }
            }
            Input::PodGroup(event) => {
                let change = self.group_resync.feed(*event);
                self.synced.groups |= self.group_resync.synced();
                if let Some(change) = change {
                    self.apply_groups(change);
                }
            }
            Input::Queue(event) => {
                let change = self.queue_resync.feed(*event);
                self.synced.queues |= self.queue_resync.synced();
                if let Some(change) = change {
                    self.apply_queues(change);
                }
            }
            Input::Claim(event) => {
                let change = self.claim_resync.feed(*event);
                self.synced.claims |= self.claim_resync.synced();
                if let Some(change) = change
                    && self.volumes.apply_claims(change)
                {
                    self.pods.volumes_changed();
                }
            }
            Input::Volume(event) => {
                let change = self.volume_resync.feed(*event);
                self.synced.volumes |= self.volume_resync.synced();
                if let Some(change) = change
                    && self.volumes.apply_volumes(change)
                {
                    self.pods.volumes_changed();
                }
            }
            Input::StorageClass(event) => {
                let change = self.class_resync.feed(*event);
                self.synced.classes |= self.class_resync.synced();
                if let Some(change) = change
                    && self.volumes.apply_classes(change)
                {
                    self.pods.volumes_changed();
                }
            }
            Input::Bound {
                job,
                pod,
                round,
                outcome,
                latency,
            } => {
                self.metrics.bind(
                    latency,
                    outcome.as_ref().map(|_| ()).map_err(|e| {
                        e.code
                            .map_or_else(|| "network".to_string(), |c| c.to_string())
                    }),
                );
                self.bind_answered(job, pod, round, outcome, now_ms);
            }
            Input::Evicted { job, pod, outcome } => {
                self.eviction_answered(job, pod, outcome, now_ms)
            }
            Input::NotWritten(what) => self.not_written(what),
            Input::Shards(shards) => {
                let seen = Some(ShardModels::of(&shards, &self.options));
                if seen != self.shard_models {
                    self.shard_models = seen;
                    self.shard_owners_changed(now_ms);
                }
            }
        }
    }

    /// This replica became the leader (again): what is told once, on the nodes, is told
    /// again at its next round, since the last leader may not have told it, and the
    /// metrics are its to export. With `pods_listed_anew`, the pod watch has been asked to
    /// list anew: nothing is placed until a listing it begins after
    /// [`Input::PodsListedAnew`] is complete, so that pods the last leader bound are
    /// known, however far behind the watch ran.
    pub fn took_the_lead(&mut self, pods_listed_anew: bool) {
        self.nodes.tell_again();
        self.metrics.set_leading(true);
        if pods_listed_anew {
            self.pod_resync.await_anew();
        }
    }

    /// One round at `now_ms`: what the events changed is applied, the scheduler runs, and
    /// its decisions become outputs. Does nothing before the caches are synced, nor while
    /// a listing of pods is awaited anew.
    pub fn round(&mut self, now_ms: u64) {
        if !self.synced() || self.pod_resync.awaits_anew() {
            return;
        }
        self.take_up_listed_nodes(now_ms);
        self.outputs.extend(self.nodes.take_events(&self.options));
        self.rebuild_cluster(now_ms);
        if self.nodes.take_newly_deleted() {
            self.requeue_awaiting_on_deleted_nodes(now_ms);
        }
        if std::mem::take(&mut self.tenants_dirty) {
            self.rebuild_tenants(now_ms);
        }
        self.adopt_parked(now_ms);
        self.give_up_on_lingering_victims(now_ms);
        self.end_going_waits(now_ms);
        if self.volumes.expire_refused(now_ms) {
            self.pods.volumes_changed();
        }
        self.reform_on_volumes(now_ms);
        let jobs = self.form_jobs(now_ms);
        // A job may name a GPU model no node has yet: its empty pool must exist first.
        self.rebuild_cluster(now_ms);
        self.mark_unlisted_unhealthy();
        for job in jobs {
            self.submitted(&job, now_ms);
            self.scheduler.submit(job);
        }
        self.grow_short_pods(now_ms);
        let started = std::time::Instant::now();
        let decisions = self.scheduler.schedule(now_ms);
        self.metrics
            .round(started.elapsed(), decisions.len() as u64);
        self.carry_out(decisions, now_ms);
        self.report(now_ms);
    }

    /// Follows what a change to the nodes did to the shards: pods waiting on nodes that
    /// were another shard's, and the GPU models no node carried.
    fn nodes_changed(&mut self, left_other_shards: Vec<String>, now_ms: u64) {
        self.pods.nodes_left_other_shards(left_other_shards);
        if self.nodes.take_carried_changed() {
            self.nodes.warn_misnamed_link_models();
            self.shard_owners_changed(now_ms);
        }
    }

    /// Nodes kept with GPU devices they no longer list take up their listing once no pod
    /// holds one of those devices, and deleted nodes kept go once no pod is placed there
    /// (see `nodes`).
    fn take_up_listed_nodes(&mut self, now_ms: u64) {
        let state = self.scheduler.state();
        let holds_unlisted = |name: &str, listed: usize| {
            (state.spec().node_id(name))
                .is_some_and(|node| state.node(node).busy() & !node_device_mask(listed) != 0)
        };
        let holds_pods =
            |name: &str| (state.spec().node_id(name)).is_some_and(|node| state.node(node).pods > 0);
        let left_other_shards =
            (self.nodes).take_up_listed(&self.options, holds_unlisted, holds_pods);
        self.nodes_changed(left_other_shards, now_ms);
    }

    /// Rebuilds the cluster spec if a node changed in a way that matters, or a new GPU
    /// model was named.
    fn rebuild_cluster(&mut self, now_ms: u64) {
        if let Some(spec) = self.nodes.take_rebuilt() {
            let reshaped = self.scheduler.set_cluster(Arc::new(spec), now_ms);
            self.cluster_reshaped(reshaped, now_ms);
            self.pods.cluster_changed();
        }
    }

    /// Counts a job's submission in the metrics, once per workload (a gang formed again,
    /// or a job requeued, is not a new submission), and tells the scheduler of a job that
    /// is a backfill victim back (see `returns`).
    fn submitted(&mut self, job: &Job, now_ms: u64) {
        let Some(entry) = self.pods.jobs.get(&job.id) else {
            return;
        };
        if self.pods.submitted_workloads.insert(entry.workload.clone()) {
            self.metrics.job_submitted(now_ms);
        }
        self.take_return(job.id, now_ms);
    }

    /// When a round is next due although no event comes: a retry the scheduler asked for,
    /// a pod whose backoff ends, a wait for victims that ends, or a claim's refusal of a
    /// node (see `volumes`) that ends.
    pub fn next_wakeup(&self, now_ms: u64) -> Option<u64> {
        [
            self.scheduler.next_retry_ms(now_ms),
            self.pods.next_release(now_ms),
            self.pods
                .victim_deadlines
                .first()
                .map(|&(until_ms, _)| until_ms),
            (self.pods.going_waits.values()).map(|w| w.until_ms).min(),
            self.volumes.next_refusal_end(),
        ]
        .into_iter()
        .flatten()
        .filter(|&t| t > now_ms)
        .min()
    }

    /// The writes asked for since the last call, in order.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.outputs)
    }

    /// Tenants from the Queues: each Queue is a tenant, the default tenant takes pods
    /// that name none. A Queue whose spec is invalid is left out and reported in the log.
    fn rebuild_tenants(&mut self, now_ms: u64) {
        let mut configs = Vec::new();
        for (name, queue) in &self.queues {
            match queue.spec.to_tenant_config(name) {
                Ok(config) => configs.push(config),
                Err(e) => tracing::warn!("{e}"),
            }
        }
        for config in &configs {
            for model in config.quota.keys().filter(|m| !self.nodes.carries(m)) {
                tracing::warn!(
                    "queue {}: quota for GPU model {model}, which no node carries (yet?); \
                     models are nvidia.com/gpu.product values",
                    config.name
                );
            }
        }
        let models: Vec<&String> = configs.iter().flat_map(|c| c.quota.keys()).collect();
        for model in models {
            self.nodes.register_model(Some(model));
        }
        self.rebuild_cluster(now_ms);
        match Tenants::resolve(&configs, self.scheduler.state().spec()) {
            Ok(tenants) => self.scheduler.set_tenants(tenants),
            Err(e) => tracing::warn!("queues: {e}"),
        }
        // Running jobs are charged to their Queue whenever it exists: one that started
        // before it, or ran on through its deletion (counted in the default tenant
        // meanwhile), goes back to it.
        let moves: Vec<(JobId, usize)> = (self.pods.jobs.iter())
            .filter_map(|(&id, entry)| {
                let now = self.scheduler.running().get(&id)?.tenant;
                let wanted = self.tenant_of(entry.queue.as_deref()).index();
                (wanted != now).then_some((id, wanted))
            })
            .collect();
        self.scheduler.move_running(&moves);
        // Queued jobs of a Queue that is gone (or no longer valid) leave the queues: their
        // pods wait for it again. Running jobs run on, counted in the default tenant.
        let tenants = self.scheduler.tenants();
        let orphaned: Vec<JobId> = self
            .pods
            .jobs
            .iter()
            .filter(|(_, e)| e.phase == pods::JobPhase::Queued)
            .filter(|(_, e)| e.queue.as_ref().is_some_and(|q| tenants.index(q).is_none()))
            .map(|(&id, _)| id)
            .collect();
        for job in orphaned {
            self.withdraw_and_dissolve(job, now_ms);
        }
        self.pods.queues_changed();
    }

    fn apply_groups(&mut self, change: Change<PodGroup>) {
        let (applied, gone) = change.split(group_key, self.groups.keys().cloned());
        for key in gone {
            self.pods.group_changed(&key);
            self.pods.told_negative_min.remove(&key);
            self.groups.remove(&key);
            if !self.pods.members.contains_key(&key)
                && self.pods.forget_workload(&pods::group_workload(&key))
            {
                self.metrics.job_withdrawn();
            }
        }
        for group in applied {
            let key = group_key(&group);
            // Our own status writes come back as changes: only the spec matters here.
            if self.groups.get(&key).is_none_or(|g| g.spec != group.spec) {
                self.pods.group_changed(&key);
            }
            self.groups.insert(key, group);
        }
    }

    fn apply_queues(&mut self, change: Change<Queue>) {
        let name = |q: &Queue| q.metadata.name.clone().unwrap_or_default();
        let (applied, gone) = change.split(name, self.queues.keys().cloned());
        for key in gone {
            self.queues.remove(&key);
            self.tenants_dirty = true;
        }
        for queue in applied {
            let key = name(&queue);
            // Our own status writes come back as changes: only the spec matters here.
            if self.queues.get(&key).is_none_or(|q| q.spec != queue.spec) {
                self.tenants_dirty = true;
            }
            self.queues.insert(key, queue);
        }
    }
}

/// A PodGroup's namespace and name.
fn group_key(group: &PodGroup) -> (String, String) {
    (
        group.metadata.namespace.clone().unwrap_or_default(),
        group.metadata.name.clone().unwrap_or_default(),
    )
}
