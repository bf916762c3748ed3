//! Pods and the jobs they form. A pod of this scheduler that is not bound waits until it
//! may enter a queue (not gated, well-formed, of a known Queue and PodGroup), then forms a
//! job: alone, or with the other members of its PodGroup once enough of them wait. Each
//! pod keeps its own node rules (selector, affinity, tolerations, extended resources); the
//! rest a job has once for all its pods: a gang's GPU models, kind, topology need, queue
//! and pod identity are those of its member asking for the most GPUs (the first by name
//! among equals), and members whose GPU models differ are told so. A pod found bound (placed
//! before a restart, by another scheduler, or by a binding whose answer was lost) is
//! adopted into the cluster state with the devices its annotations name, so no device is
//! ever given twice. It is counted by its resources alone (its extended resources
//! included): a scheduling field that does not parse is reported but does not stop that,
//! and a device list that does not parse, names the wrong count or names devices another
//! pod holds gives way to the lowest free devices (unhealthy ones too, where the healthy
//! ones are too few), as for a pod placed elsewhere (whose device list, copied from a
//! template maybe, is not trusted). A pod bound to another shard's node is not counted,
//! but kept by node: it is adopted once its node is this shard's (relabelled, or
//! reporting its GPUs again). A pod that goes away returns what it held.
//!
//! Placements are kept by node name: node ids change whenever the cluster is rebuilt.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::cache::{DeviceAlloc, Placement, PodKey};
use crate::framework::{Adopted, PreemptionKind};
use crate::model::{
    ClusterSpec, ExtendedResources, GpuRequest, Job, JobId, JobKind, MAX_GPUS_PER_NODE, MAX_POOLS,
    MILLI_PER_GPU, NodeConstraints, NodeId, PodRequest, PodRules, PoolId, TenantId, bits,
};
use crate::queue::DEFAULT_TENANT;

use super::super::convert::{
    ConvertError, GPU_PRODUCT_LABEL, PodFacts, QUEUE_LABEL, bound_devices, bound_request,
    label_value, pod_facts,
};
use super::super::crd::POD_GROUP_LABEL;
use super::outcomes::VICTIM_PATIENCE_MS;
use super::resync::Change;
use super::returns::{Eviction, Returns};
use super::{Condition, Output, Regarding, World};

/// A pod as the API server names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A PodGroup's namespace and name.
pub(super) type GroupKey = (String, String);

/// Why a pod of this scheduler is not in a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Hold {
    /// The pod cannot be read: the message names the field.
    Invalid(String),
    /// `spec.schedulingGates` is not empty.
    Gated,
    /// Its `kant.io/queue` names no usable Queue: the reason.
    UnknownQueue(String),
    /// A PersistentVolumeClaim of its keeps it from every node for now (missing, unbound,
    /// being deleted): the reason.
    Volume(String),
    /// Its PodGroup does not exist (yet).
    NoGroup(String),
    /// Its gang lacks members: fewer than `needed` wait. (A message counting them would be
    /// written again to every member each time one more comes: some N² writes for a gang
    /// created pod by pod; and a message naming a member held back would change as each
    /// is let go, Kueue lifting its gates pod by pod.) `others_held`: some member is held
    /// for a reason of its own.
    GangIncomplete {
        group: String,
        needed: usize,
        others_held: bool,
    },
    /// Its gang has the members it needs without it: it goes once `needed` are placed.
    GangStarting { group: String, needed: usize },
}

impl Hold {
    pub fn message(&self) -> String {
        match self {
            Hold::Invalid(reason) | Hold::UnknownQueue(reason) | Hold::Volume(reason) => {
                reason.clone()
            }
            Hold::Gated => "the pod has scheduling gates".into(),
            Hold::NoGroup(group) => format!("pod group {group} {ABSENT}"),
            Hold::GangIncomplete {
                group,
                needed,
                others_held,
            } => {
                let mut message = format!(
                    "pod group {group}: fewer than the {needed} pods needed to start are waiting"
                );
                if *others_held {
                    message.push_str(
                        "; other members are held back (scheduling gates, a malformed pod, an \
                         unknown Queue or a volume): their own conditions say why",
                    );
                }
                message
            }
            Hold::GangStarting { group, needed } => format!(
                "pod group {group}: waits until the {needed} pods it needs to start are placed"
            ),
        }
    }
}

/// What a pod naming a PodGroup or Queue the watch does not show is told: one that cannot
/// be read is left out of it (and logged).
const ABSENT: &str = "does not exist, or cannot be read (the scheduler's log says why)";

/// Where a pod stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PodState {
    /// Not this replica's concern: another scheduler's pending pod, a pod bound to another
    /// shard's node (parked once the node is no longer another shard's), or a finished one.
    Ignored,
    /// This scheduler's pod whose GPU models, or whose gang, are another shard's; examined
    /// again when a member of its gang joins or changes, or when the GPU models nodes carry
    /// change (either may make it this shard's).
    OtherShard,
    /// This scheduler's, not in a queue, for the reason given.
    Held(Hold),
    /// This scheduler's and ready to form a job, not before the given time (a backoff).
    Waiting { not_before: u64 },
    /// A member of a job the scheduler holds: queued, reserved, running or terminating.
    InJob { job: JobId, index: u32 },
    /// Bound to a node, waiting to be adopted into the cluster state (its node may not be
    /// usable yet).
    Parked,
}

/// What a bound pod holds, as read from the pod.
#[derive(Debug, Clone)]
pub(super) struct BoundFacts {
    pub node: String,
    /// What its resources ask for, whatever else is wrong with it, or why they cannot be
    /// read.
    pub request: Result<PodRequest, String>,
    /// The extended resources it holds (none where its resources cannot be read).
    pub extended: ExtendedResources,
    /// The devices its `kant.io/gpu-ids` names (none for a pod without GPUs); `None`: none
    /// named, the list cannot be read, or the pod is another scheduler's (the pod then
    /// gets the lowest free devices).
    pub devices: Option<DeviceAlloc>,
    /// What of the pod cannot be read and what it costs, reported when it is adopted.
    pub unread: Vec<String>,
    /// Placed for this scheduler (it may be a victim).
    pub ours: bool,
    /// The Queue it is charged to: its `kant.io/queue`, for a pod of this scheduler
    /// (`None`: the default tenant).
    pub queue: Option<String>,
    pub priority: i32,
    pub started_ms: u64,
    /// Who it is, for other pods' affinity (`None`: it cannot be read).
    pub pod_rules: Option<Arc<PodRules>>,
}

pub(super) struct PodEntry {
    pub target: PodRef,
    pub resource_version: String,
    pub created_ms: u64,
    pub group: Option<GroupKey>,
    /// `status.phase` is Running.
    pub running: bool,
    /// `status.phase` is Succeeded (`Some(true)`) or Failed (`Some(false)`).
    pub finished: Option<bool>,
    /// The pod's facts, for a pod of this scheduler (what a job is made of).
    pub facts: Option<PodFacts>,
    /// Set while the pod is bound to a node.
    pub bound: Option<BoundFacts>,
    pub state: PodState,
    /// The status of its `PodScheduled` condition as last seen (`None`: it has none).
    pub scheduled: Option<bool>,
    /// It has a deletion timestamp: on its way out.
    pub deleting: bool,
    /// The uid of the controller that owns it (its `ownerReferences` entry marked
    /// `controller`), which makes it again if it is evicted.
    pub controller: Option<String>,
}

impl PodEntry {
    /// `PodScheduled=False` for this pod. Its `lastTransitionTime` is set only where the
    /// condition was not False already, as kube-scheduler keeps it.
    pub fn not_scheduled(&self, reason: &'static str, message: String) -> Output {
        Output::PodCondition {
            target: self.target.clone(),
            resource_version: self.resource_version.clone(),
            transition: self.scheduled != Some(false),
            condition: Condition {
                status: false,
                reason,
                message,
            },
        }
    }
}

/// Where one pod is placed, by node name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Place {
    pub node: String,
    pub gpus: DeviceAlloc,
    pub cpu_milli: u64,
    pub memory_bytes: u64,
    pub ephemeral_bytes: u64,
}

impl Place {
    pub fn of(placement: &Placement, spec: &ClusterSpec) -> Place {
        Place {
            node: spec.node(placement.node).name.clone(),
            gpus: placement.gpus,
            cpu_milli: placement.cpu_milli,
            memory_bytes: placement.memory_bytes,
            ephemeral_bytes: placement.ephemeral_bytes,
        }
    }

    /// The placement on the cluster as it is now; `None` when the node is gone.
    pub fn resolve(&self, spec: &ClusterSpec) -> Option<Placement> {
        Some(Placement {
            node: spec.node_id(&self.node)?,
            gpus: self.gpus,
            cpu_milli: self.cpu_milli,
            memory_bytes: self.memory_bytes,
            ephemeral_bytes: self.ephemeral_bytes,
        })
    }
}

/// What a job is doing in the world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum JobPhase {
    /// In its tenant's queue.
    Queued,
    /// Bindings sent in binding round `round`: answers outstanding, failures so far (pod
    /// index, reason). An answer of another round (a placement given up while its
    /// bindings were in flight) is not this one's.
    Binding {
        round: u64,
        outstanding: u32,
        failed: Vec<(u32, String)>,
    },
    /// Placed after preemption: bound once these victims' pods are gone, if they are gone
    /// by `until_ms` (else it is queued again).
    AwaitingVictims { victims: Vec<JobId>, until_ms: u64 },
    /// Every pod bound.
    Running,
    /// Preempted for that job: its pods are being evicted; they hold their devices (as a
    /// terminating job in the scheduler) until they are gone. `unrecorded`: the kind of
    /// preemption, until the metrics count it, once an eviction lands or the pods are
    /// gone (a refused eviction leaves the job running, not preempted). `unanswered`:
    /// evictions whose answer has not come; `refused`: the pods whose eviction was refused
    /// (a disruption budget), which run on once every answer is in.
    Evicting {
        by: JobId,
        kind: PreemptionKind,
        /// Counted in the metrics (see [`World::record_preemption`]): an eviction landed,
        /// or the pods are gone.
        recorded: bool,
        unanswered: u32,
        refused: Vec<u32>,
    },
}

impl JobPhase {
    /// The victims a preemptor still waits for (none in any other phase).
    pub fn awaited_victims(&self) -> &[JobId] {
        match self {
            JobPhase::AwaitingVictims { victims, .. } => victims,
            _ => &[],
        }
    }
}

pub(super) struct JobEntry {
    pub job: Arc<Job>,
    /// The uid of each member by pod index; `None` once the pod is gone.
    pub pods: Vec<Option<String>>,
    pub group: Option<GroupKey>,
    /// The Queue it was submitted to (`None`: the default tenant).
    pub queue: Option<String>,
    pub phase: JobPhase,
    /// Where each pod is reserved or bound, once placed.
    pub places: Vec<Place>,
    /// Pods the watch has shown bound where they were placed.
    pub landed: Vec<bool>,
    pub started_ms: u64,
    /// What the metrics count as one workload: the PodGroup or the lone pod.
    pub workload: String,
    /// A job of this shard, counted among its Queue's running jobs. False for pods of
    /// another scheduler or another shard found bound (on a CPU-only node, which every
    /// shard uses: each would count them), and for pods found on their way out (charged
    /// to no Queue); they hold what they hold all the same.
    pub own: bool,
    /// A preemption victim back (see `returns`), until it is placed whole: the eviction
    /// its wait to run again counts from.
    pub evicted: Option<Eviction>,
}

/// The metrics' name of a PodGroup's workload.
pub fn group_workload(group: &GroupKey) -> String {
    format!("group:{}/{}", group.0, group.1)
}

/// The metrics' name of a lone pod's workload.
fn pod_workload(uid: &str) -> String {
    format!("pod:{uid}")
}

impl JobEntry {
    /// A job of these pods (their uids by pod index), placed at `places` if it runs.
    pub fn new(
        job: Job,
        uids: &[String],
        group: Option<GroupKey>,
        queue: Option<String>,
        phase: JobPhase,
        places: Vec<Place>,
        started_ms: u64,
    ) -> JobEntry {
        let workload = match &group {
            Some(group) => group_workload(group),
            None => pod_workload(uids.first().map_or("", String::as_str)),
        };
        let landed = vec![phase == JobPhase::Running; places.len()];
        JobEntry {
            job: Arc::new(job),
            pods: uids.iter().cloned().map(Some).collect(),
            group,
            queue,
            phase,
            places,
            landed,
            started_ms,
            workload,
            own: true,
            evicted: None,
        }
    }

    /// A job's name: its PodGroup's, or its lone pod's.
    pub fn name(group: &Option<GroupKey>, pod: &PodRef) -> String {
        match group {
            Some((ns, g)) => format!("{ns}/{g}"),
            None => pod.to_string(),
        }
    }

    pub fn alive(&self) -> impl Iterator<Item = (u32, &String)> {
        self.pods
            .iter()
            .enumerate()
            .filter_map(|(i, uid)| uid.as_ref().map(|u| (i as u32, u)))
    }

    pub fn place(&self, index: u32) -> Option<&Place> {
        self.places.get(index as usize)
    }
}

/// A job whose pods are nominated to a node (`status.nominatedNodeName`, set by an
/// earlier leader's preemption) where pods of lower priority are still on their way out:
/// as kube-scheduler has such a pod wait for its victims, it may not preempt others until
/// they are gone or `until_ms` passes (a node that stopped answering may keep them
/// terminating for good). `may_preempt`: whether it may then.
#[derive(Debug, Clone)]
pub(super) struct GoingWait {
    pub node: String,
    pub until_ms: u64,
    pub may_preempt: bool,
}

/// The pod and job tables.
#[derive(Default)]
pub(super) struct Pods {
    pub entries: HashMap<String, PodEntry>,
    pub jobs: HashMap<JobId, JobEntry>,
    /// The pods of each PodGroup, by uid.
    pub members: HashMap<GroupKey, BTreeSet<String>>,
    /// Lone pods and groups to (re)consider for a job at the next round.
    forming: BTreeSet<String>,
    forming_groups: BTreeSet<GroupKey>,
    /// Bound pods to adopt, and whether any came (or the cluster changed) since the last
    /// attempt: pods whose node is not usable stay, without a scan every round.
    parked: BTreeSet<String>,
    parked_dirty: bool,
    /// Bound pods adopted short of their GPUs, on the devices their node had free (see
    /// [`World::placement_of`]): adopted again, on more, when room comes free there (see
    /// [`World::grow_short_pods`]).
    short: BTreeSet<String>,
    /// Bound pods on nodes of another shard, by node: parked once their node is no longer
    /// another shard's (a node's GPU model may change, or come back with its GPUs).
    on_other_shards_nodes: BTreeMap<String, BTreeSet<String>>,
    /// Pods newly held, whose reason is to be reported.
    held: BTreeSet<String>,
    /// Pods told that some of their constraints are not enforced.
    warned: BTreeSet<String>,
    /// PodGroup members told that another member's GPU models, Queue, topology need or
    /// workload kind, or the gang's priority, are applied to them: the reasons told, by
    /// uid.
    told_differing: BTreeMap<String, BTreeSet<&'static str>>,
    /// PodGroups told that their negative `minMember` is read as 1, with the value told.
    pub told_negative_min: BTreeMap<GroupKey, i32>,
    /// Pods told that no node carries the GPU models they name.
    told_uncarried: BTreeSet<String>,
    /// Pods held for an unknown Queue, re-examined when the Queues change.
    held_on_queue: BTreeSet<String>,
    /// Pods held for their volumes, re-examined when claims, volumes or classes change.
    held_on_volume: BTreeSet<String>,
    /// Claims, volumes or classes changed since queued jobs were last checked against
    /// them.
    volumes_changed: bool,
    next_job: u32,
    /// The last binding round started, over all jobs.
    pub bind_rounds: u64,
    /// Preemptors waiting for their victims to go, by the time they stop waiting (some may
    /// have stopped already).
    pub victim_deadlines: BTreeSet<(u64, JobId)>,
    /// Workloads submitted, and placed, at least once (the metrics count the first).
    pub submitted_workloads: BTreeSet<String>,
    pub placed_workloads: BTreeSet<String>,
    /// Jobs that wait, rather than preempt, for pods on their way out where an earlier
    /// leader's preemption nominated them (see [`GoingWait`]).
    pub going_waits: BTreeMap<JobId, GoingWait>,
    /// Gangs part of whose bindings landed and part were refused, not yet whole again:
    /// the jobs their landed pods run as, merged into one once the gang is whole. They are
    /// not running in the metrics' sense (SOR counts a gang once whole), and the gang's
    /// first placement counts them with the rest.
    pub landed_parts: BTreeMap<String, Vec<JobId>>,
    /// Preemption victims whose controllers have yet to make them again.
    pub returns: Returns,
}

impl Pods {
    /// The earliest end of a pod's backoff after `now_ms`.
    pub fn next_release(&self, now_ms: u64) -> Option<u64> {
        self.forming
            .iter()
            .filter_map(|uid| match self.entries.get(uid)?.state {
                PodState::Waiting { not_before } if not_before > now_ms => Some(not_before),
                _ => None,
            })
            .min()
    }

    /// The pods held since the last call.
    pub fn take_held(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.held)
    }

    /// Queues changed: pods held for an unknown queue are examined again.
    pub fn queues_changed(&mut self) {
        let held = std::mem::take(&mut self.held_on_queue);
        self.forming.extend(held);
    }

    /// Claims, volumes or classes changed: pods held for their volumes are examined again,
    /// and so are queued jobs of pods with claims.
    pub fn volumes_changed(&mut self) {
        let held = std::mem::take(&mut self.held_on_volume);
        self.forming.extend(held);
        self.volumes_changed = true;
    }

    pub fn group_changed(&mut self, group: &GroupKey) {
        self.forming_groups.insert(group.clone());
        if let Some(members) = self.members.get(group) {
            self.forming.extend(members.iter().cloned());
        }
    }

    /// The job goes back to its queue, and its PodGroup is looked at again (its
    /// `minMember` may have changed while the job was being placed). Returns the phase it
    /// left.
    pub fn requeue(&mut self, job: JobId) -> Option<JobPhase> {
        let entry = self.jobs.get_mut(&job)?;
        let left = std::mem::replace(&mut entry.phase, JobPhase::Queued);
        if let Some(group) = entry.group.clone() {
            self.group_changed(&group);
        }
        Some(left)
    }

    /// A workload that is gone: one made again under its name is a new job. Whether it
    /// was submitted and never placed (withdrawn, in the metrics).
    #[must_use]
    pub fn forget_workload(&mut self, workload: &str) -> bool {
        let submitted = self.submitted_workloads.remove(workload);
        let placed = self.placed_workloads.remove(workload);
        self.landed_parts.remove(workload);
        self.returns.forget(workload);
        submitted && !placed
    }

    /// A workload that now waits in another shard: whether this replica had counted it
    /// submitted and never placed it (withdrawn, in the metrics). Counted submitted again
    /// if it comes back.
    pub fn left_unplaced(&mut self, workload: &str) -> bool {
        !self.placed_workloads.contains(workload) && self.submitted_workloads.remove(workload)
    }

    /// The cluster changed: parked pods may be adopted now.
    pub fn cluster_changed(&mut self) {
        self.parked_dirty = true;
    }

    /// The members of the pod's gang left to another shard are examined again with it:
    /// the gang's shard may change with this member.
    fn reexamine_gang(&mut self, uid: &str) {
        let Some(group) = self.entries.get(uid).and_then(|e| e.group.as_ref()) else {
            return;
        };
        let Some(members) = self.members.get(group) else {
            return;
        };
        let entries = &self.entries;
        let other_shard = members.iter().filter(|member| {
            entries
                .get(*member)
                .is_some_and(|e| e.state == PodState::OtherShard)
        });
        self.forming.extend(other_shard.cloned());
    }

    pub fn park(&mut self, uid: &str) {
        if let Some(entry) = self.entries.get_mut(uid) {
            entry.state = PodState::Parked;
            self.parked.insert(uid.to_owned());
            self.parked_dirty = true;
        }
    }

    /// A bound pod on a node of another shard: not counted while the node is that
    /// shard's.
    fn set_on_other_shards_node(&mut self, uid: &str, node: &str) {
        if let Some(entry) = self.entries.get_mut(uid) {
            entry.state = PodState::Ignored;
            self.parked.remove(uid);
            self.on_other_shards_nodes
                .entry(node.to_owned())
                .or_default()
                .insert(uid.to_owned());
        }
    }

    /// The pod is no longer kept on another shard's node (it is gone).
    fn leave_other_shards_node(&mut self, uid: &str) {
        let Some(node) = self
            .entries
            .get(uid)
            .and_then(|e| Some(e.bound.as_ref()?.node.as_str()))
        else {
            return;
        };
        if let Some(pods) = self.on_other_shards_nodes.get_mut(node) {
            pods.remove(uid);
            if pods.is_empty() {
                self.on_other_shards_nodes.remove(node);
            }
        }
    }

    /// These nodes are no longer another shard's (they are this replica's now, invalid,
    /// or gone): the pods bound to them are parked, adopted once their node is usable.
    pub fn nodes_left_other_shards(&mut self, nodes: Vec<String>) {
        for node in nodes {
            let pods = self.on_other_shards_nodes.remove(&node).unwrap_or_default();
            for uid in pods {
                self.park(&uid);
            }
        }
    }

    /// Whether a pod of priority lower than `priority` is on its way out on `node`.
    pub fn going_below(&self, node: &str, priority: i32) -> bool {
        self.entries.values().any(|e| {
            e.deleting
                && matches!(e.state, PodState::InJob { .. })
                && e.bound
                    .as_ref()
                    .is_some_and(|b| b.node == node && b.priority < priority)
        })
    }

    pub fn new_job_id(&mut self) -> JobId {
        self.next_job = self.next_job.wrapping_add(1);
        JobId(self.next_job)
    }
}

fn uid_of(pod: &Pod) -> String {
    let meta = &pod.metadata;
    meta.uid.clone().unwrap_or_else(|| {
        format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        )
    })
}

fn millis(time: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<u64> {
    time.map(|t| t.0.as_millisecond().max(0) as u64)
}

/// How a PodGroup's members rank to be its template, the member whose GPU models, pod
/// rules, kind, topology need and queue its job takes (a job has one set for all its
/// pods): the most GPUs first, then the first by name. A launcher without GPUs thus never
/// decides where its workers go.
fn template_rank<'a>(request: &PodRequest, pod: &'a PodRef) -> (u64, Reverse<&'a str>) {
    (request.gpu.milli(), Reverse(pod.name.as_str()))
}

/// Each pod's node rules, in pod order, shared between neighbours that have the same (the
/// members of a gang are mostly alike).
fn shared(
    rules: impl Iterator<Item = Option<NodeConstraints>>,
) -> Vec<Option<Arc<NodeConstraints>>> {
    let mut shared: Vec<Option<Arc<NodeConstraints>>> = Vec::new();
    for rule in rules {
        let same = match (shared.last(), &rule) {
            (Some(Some(last)), Some(rule)) => (**last == *rule).then(|| last.clone()),
            _ => None,
        };
        shared.push(same.or_else(|| rule.map(Arc::new)));
    }
    shared
}

/// What a bound pod holds, from its facts as `pod_facts` read them, or from its resources
/// alone where they cannot be read.
fn bound_facts(
    pod: &Pod,
    facts: &Result<PodFacts, ConvertError>,
    node: String,
    scheduler_name: &str,
    created_ms: u64,
) -> BoundFacts {
    let spec = pod.spec.as_ref();
    let ours = spec.and_then(|s| s.scheduler_name.as_deref()) == Some(scheduler_name);
    let mut unread = Vec::new();
    let (request, extended) = match facts {
        Ok(facts) => {
            let extended = facts.constraints.as_ref().map(|c| c.extended.clone());
            let mut request = facts.request;
            // Another scheduler's pod holds what `nvidia.com/gpu` gives it, and no share
            // of a GPU (a fraction's pod asks for none), as `bound_request` reads it.
            if !ours && matches!(request.gpu, GpuRequest::Fraction(_)) {
                request.gpu = GpuRequest::Whole(0);
            }
            (Ok(request), extended.unwrap_or_default())
        }
        Err(e) => match bound_request(pod, ours) {
            Ok((request, extended)) => {
                unread.push(format!(
                    "{e}; it is counted by its resources, but other pods' rules do not see it"
                ));
                (Ok(request), extended)
            }
            Err(e) => (Err(e.to_string()), ExtendedResources::new()),
        },
    };
    let devices = match &request {
        // A pod without GPUs holds no device, named or not (its binding names none).
        Ok(request) if request.gpu == GpuRequest::Whole(0) => Some(DeviceAlloc::default()),
        // Only this scheduler's bindings name the devices a pod runs on: another
        // scheduler's pod may carry a `kant.io/gpu-ids` copied from a template.
        Ok(request) if ours => bound_devices(pod, request, MAX_GPUS_PER_NODE).unwrap_or_else(|e| {
            unread.push(format!(
                "{e}; it is counted on the lowest free devices of {node}"
            ));
            None
        }),
        _ => None,
    };
    let labels = pod.metadata.labels.as_ref();
    BoundFacts {
        node,
        request,
        extended,
        devices,
        unread,
        ours,
        queue: label_value(labels, QUEUE_LABEL)
            .filter(|_| ours)
            .map(str::to_owned),
        priority: spec.and_then(|s| s.priority).unwrap_or(0),
        started_ms: pod
            .status
            .as_ref()
            .and_then(|s| millis(s.start_time.as_ref()))
            .unwrap_or(created_ms),
        pod_rules: facts.as_ref().ok().map(|f| f.pod_rules.clone()),
    }
}

impl World {
    pub(super) fn apply_pods(&mut self, change: Change<Pod>, now_ms: u64) {
        let (applied, gone) = change.split(uid_of, self.pods.entries.keys().cloned());
        for uid in gone {
            self.pod_gone(&uid, now_ms);
            self.forget_pod(&uid);
        }
        for pod in applied {
            self.pod_changed(pod, now_ms);
        }
    }

    fn pod_changed(&mut self, pod: Pod, now_ms: u64) {
        let uid = uid_of(&pod);
        let meta = &pod.metadata;
        let resource_version = meta.resource_version.clone().unwrap_or_default();
        let previous = self.pods.entries.get(&uid);
        if previous
            .is_some_and(|e| e.resource_version == resource_version && !resource_version.is_empty())
        {
            return;
        }
        let previous_group = previous.and_then(|e| e.group.clone());
        let previous_state = previous.map(|e| e.state.clone());
        let previous_facts = previous.and_then(|e| e.facts.clone());
        let spec = pod.spec.as_ref();
        let node = spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        let ours =
            spec.and_then(|s| s.scheduler_name.as_deref()) == Some(&self.options.scheduler_name);
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let finished = match phase {
            Some("Succeeded") => Some(true),
            Some("Failed") => Some(false),
            _ => None,
        };
        let namespace = meta.namespace.clone().unwrap_or_default();
        let group = label_value(meta.labels.as_ref(), POD_GROUP_LABEL)
            .map(|g| (namespace.clone(), g.to_owned()));
        let target = PodRef {
            namespace,
            name: meta.name.clone().unwrap_or_default(),
            uid: uid.clone(),
        };
        let deleting = meta.deletion_timestamp.is_some();
        let controller = (meta.owner_references.iter().flatten())
            .find(|owner| owner.controller == Some(true))
            .map(|owner| owner.uid.clone());
        let created_ms = millis(meta.creation_timestamp.as_ref()).unwrap_or(now_ms);
        // Read once: a pod of ours needs its facts, a bound pod what it holds.
        let parsed = (ours || node.is_some()).then(|| pod_facts(&pod));
        let bound = node.clone().zip(parsed.as_ref()).map(|(n, facts)| {
            bound_facts(&pod, facts, n, &self.options.scheduler_name, created_ms)
        });
        let facts = parsed.filter(|_| ours);
        let regrouped = previous_group != group;
        if regrouped {
            self.leave_group(&uid, previous_group);
        }
        if let Some(g) = &group {
            self.pods
                .members
                .entry(g.clone())
                .or_default()
                .insert(uid.clone());
            self.pods.forming_groups.insert(g.clone());
        }
        let entry = PodEntry {
            target,
            resource_version,
            created_ms,
            group,
            running: phase == Some("Running"),
            finished,
            facts: facts.as_ref().and_then(|f| f.as_ref().ok().cloned()),
            bound,
            state: previous_state.clone().unwrap_or(PodState::Ignored),
            scheduled: scheduled_status(&pod),
            deleting,
            controller,
        };
        self.pods.entries.insert(uid.clone(), entry);
        // A queued pod whose PodGroup label changed leaves its job, which forms again
        // without it; it goes to its new group, or alone.
        if regrouped
            && let Some(PodState::InJob { job, .. }) = previous_state
            && self
                .pods
                .jobs
                .get(&job)
                .is_some_and(|j| j.phase == JobPhase::Queued)
        {
            self.withdraw_and_dissolve(job, now_ms);
        }

        if finished.is_some() {
            self.pod_gone(&uid, now_ms);
            return;
        }
        if let Some(node) = node {
            self.pod_bound(&uid, &node, now_ms);
            return;
        }
        if !ours || deleting {
            if deleting {
                self.pod_gone(&uid, now_ms);
            }
            return;
        }
        match previous_state {
            // Reserved or running: kept. Queued: formed again if what the job was made of
            // changed (tolerations added, labels, annotations); status writes do not count.
            Some(PodState::InJob { job, .. }) => {
                let queued =
                    (self.pods.jobs.get(&job)).is_some_and(|j| j.phase == JobPhase::Queued);
                let key = |f: &PodFacts| PodFacts {
                    nominated_node: None,
                    ..f.clone()
                };
                let changed = match (&previous_facts, &facts) {
                    (Some(old), Some(Ok(new))) => key(old) != key(new),
                    _ => true,
                };
                if queued && changed {
                    self.withdraw_and_dissolve(job, now_ms);
                    if let Some(Err(e)) = facts {
                        self.set_state(&uid, PodState::Held(Hold::Invalid(e.to_string())));
                    }
                }
            }
            _ => {
                let kept = match previous_state {
                    Some(PodState::Waiting { not_before }) => not_before,
                    _ => 0,
                };
                let state = match facts {
                    Some(Err(e)) => PodState::Held(Hold::Invalid(e.to_string())),
                    _ => PodState::Waiting { not_before: kept },
                };
                self.set_state(&uid, state);
                self.pods.reexamine_gang(&uid);
                self.pods.forming.insert(uid);
            }
        }
    }

    pub(super) fn set_state(&mut self, uid: &str, state: PodState) {
        if let Some(entry) = self.pods.entries.get_mut(uid) {
            if matches!(state, PodState::Held(_)) {
                self.pods.held.insert(uid.to_owned());
            }
            entry.state = state;
        }
    }

    /// The pod's PodGroup label changed: it leaves the old group.
    fn leave_group(&mut self, uid: &str, group: Option<GroupKey>) {
        let Some(group) = group else {
            return;
        };
        if let Some(members) = self.pods.members.get_mut(&group) {
            members.remove(uid);
            if members.is_empty() {
                self.pods.members.remove(&group);
            }
        }
        self.pods.forming_groups.insert(group);
    }

    /// The pod is on `node`: our own binding landing, an update to a pod that runs, or a
    /// placement made elsewhere (an earlier binding of ours that landed late counts as
    /// elsewhere when it named other devices: the pod runs on those).
    fn pod_bound(&mut self, uid: &str, node: &str, now_ms: u64) {
        let pod = self.pods.entries.get(uid);
        let state = pod.map(|e| e.state.clone());
        let devices = pod
            .and_then(|e| e.bound.as_ref()?.devices)
            .map_or(0, |d| d.devices);
        if let Some(PodState::InJob { job, index }) = state {
            let Some(entry) = self.pods.jobs.get_mut(&job) else {
                return;
            };
            // Once every pod of a job is bound, where each runs is settled (a pod adopted
            // on the lowest free devices names none): only a binding in flight can land
            // on other devices than planned.
            let settled = matches!(entry.phase, JobPhase::Running | JobPhase::Evicting { .. });
            let planned = entry
                .place(index)
                .is_some_and(|p| p.node == node && (settled || p.gpus.devices == devices));
            if planned && entry.phase != JobPhase::Queued {
                // Our binding landed (its answer may still come, or be lost), or the pod
                // that runs was updated.
                if let Some(landed) = entry.landed.get_mut(index as usize) {
                    *landed = true;
                }
                self.follow_relabel(uid, job);
                self.follow_resize(uid, job, index);
                return;
            }
            // Placed by someone else while it waited in our queue, or bound elsewhere than
            // planned: it leaves its job; its binding answer no longer matters.
            self.leave_job(job, index, now_ms);
        }
        match self.nodes.is_ours(node) {
            Some(false) => self.pods.set_on_other_shards_node(uid, node),
            _ => self.pods.park(uid),
        }
    }

    /// A lone pod that runs may have changed its labels: other pods' rules see the new
    /// ones. (A gang keeps its template member's, as it was formed.)
    fn follow_relabel(&mut self, uid: &str, job: JobId) {
        let rules = self
            .pods
            .entries
            .get(uid)
            .and_then(|e| e.bound.as_ref()?.pod_rules.clone());
        let Some(rules) = rules else {
            return;
        };
        let Some(entry) = self.pods.jobs.get_mut(&job).filter(|e| e.pods.len() == 1) else {
            return;
        };
        if entry.job.pod_rules.as_ref() != Some(&rules) {
            let mut relabelled = (*entry.job).clone();
            relabelled.pod_rules = Some(rules.clone());
            entry.job = Arc::new(relabelled);
            self.scheduler.set_pod_rules(job, &rules);
        }
    }

    /// A placed pod whose CPU or memory changed (resized in place, which Kubernetes allows
    /// for no GPU) holds the new amounts where it runs, as its spec now asks.
    fn follow_resize(&mut self, uid: &str, job: JobId, index: u32) {
        let Some(pod) = self.pods.entries.get(uid) else {
            return;
        };
        let Some(Ok(request)) = pod.bound.as_ref().map(|b| b.request.as_ref()) else {
            return;
        };
        let target = pod.target.clone();
        let (cpu_milli, memory_bytes) = (request.cpu_milli, request.memory_bytes);
        let place = (self.pods.jobs.get_mut(&job)).and_then(|e| e.places.get_mut(index as usize));
        let Some(place) = place else {
            return;
        };
        if (place.cpu_milli, place.memory_bytes) == (cpu_milli, memory_bytes) {
            return;
        }
        (place.cpu_milli, place.memory_bytes) = (cpu_milli, memory_bytes);
        let key = PodKey { job, pod: index };
        if let Err(e) = self.scheduler.resize_pod(key, cpu_milli, memory_bytes) {
            tracing::warn!("pod {target}: its resize is not counted: {e}");
        }
    }

    /// The pod is gone, finished or being deleted: whatever it held returns.
    pub(super) fn pod_gone(&mut self, uid: &str, now_ms: u64) {
        let Some(entry) = self.pods.entries.get_mut(uid) else {
            return;
        };
        let state = std::mem::replace(&mut entry.state, PodState::Ignored);
        self.pods.forming.remove(uid);
        self.pods.parked.remove(uid);
        self.pods.short.remove(uid);
        self.pods.leave_other_shards_node(uid);
        if let PodState::InJob { job, index } = state {
            self.leave_job(job, index, now_ms);
        }
    }

    /// Pod `index` of `job` leaves it: what it holds or has reserved returns; a queued job
    /// or a gang not yet bound forms again without it; a job none of whose pods is left is
    /// dropped (once its binding answers are in).
    fn leave_job(&mut self, job: JobId, index: u32, now_ms: u64) {
        // Room may come free: parked pods get another try.
        self.pods.parked_dirty |= !self.pods.parked.is_empty();
        let Some(entry) = self.pods.jobs.get_mut(&job) else {
            return;
        };
        if let Some(slot) = entry.pods.get_mut(index as usize) {
            *slot = None;
        }
        let phase = entry.phase.clone();
        let gang = entry.group.is_some();
        let none_left = entry.alive().next().is_none();
        // A preemptor that gives up its reservation leaves its victims, still going, to
        // hold what it had taken of theirs.
        let victims = phase.awaited_victims().to_vec();
        match phase {
            JobPhase::Queued => {
                self.withdraw_and_dissolve(job, now_ms);
            }
            JobPhase::AwaitingVictims { .. } if gang => {
                // A gang that lost a member before binding: it forms again, whole.
                self.nominate(job, false);
                self.scheduler.bind_failed(job, now_ms);
                self.withdraw_and_dissolve(job, now_ms);
            }
            JobPhase::Evicting { by, .. } => {
                self.scheduler.release_pod(PodKey { job, pod: index });
                if none_left {
                    self.record_preemption(job, now_ms);
                    self.pods.jobs.remove(&job);
                    self.victim_gone(by, job, now_ms);
                }
            }
            JobPhase::Binding { .. } | JobPhase::AwaitingVictims { .. } | JobPhase::Running => {
                self.scheduler.release_pod(PodKey { job, pod: index });
                if none_left && !matches!(phase, JobPhase::Binding { .. }) {
                    self.pods.jobs.remove(&job);
                }
            }
        }
        self.hold_while_going(&victims);
    }

    /// Drops every trace of a deleted pod.
    fn forget_pod(&mut self, uid: &str) {
        let pods = &mut self.pods;
        pods.held_on_queue.remove(uid);
        pods.held_on_volume.remove(uid);
        pods.held.remove(uid);
        pods.warned.remove(uid);
        pods.told_differing.remove(uid);
        pods.told_uncarried.remove(uid);
        let Some(entry) = pods.entries.remove(uid) else {
            return;
        };
        let withdrawn = match entry.group {
            None => pods.forget_workload(&pod_workload(uid)),
            Some(group) => {
                let members = pods.members.get_mut(&group);
                let emptied = members.is_some_and(|m| {
                    m.remove(uid);
                    m.is_empty()
                });
                pods.forming_groups.insert(group.clone());
                if emptied {
                    pods.members.remove(&group);
                    // Pods made again for a PodGroup that lives on (after a preemption,
                    // say) are the same job, as in the simulator: it is forgotten with
                    // its PodGroup.
                    !self.groups.contains_key(&group)
                        && pods.forget_workload(&group_workload(&group))
                } else {
                    false
                }
            }
        };
        if withdrawn {
            self.metrics.job_withdrawn();
        }
    }

    /// A job the scheduler holds (queued, or placed and not bound) leaves it and comes
    /// apart (see [`World::dissolve`]), to form again from now or the end of its backoff.
    pub(super) fn withdraw_and_dissolve(&mut self, job: JobId, now_ms: u64) {
        // A job in its backoff stays in it as it forms again.
        let backoff = self.scheduler.not_before(job).unwrap_or(0);
        self.withdraw_keeping_exemption(job, now_ms);
        self.dissolve(job, now_ms.max(backoff));
    }

    /// A job comes apart: its remaining unbound pods wait to form a job again from
    /// `not_before`.
    pub(super) fn dissolve(&mut self, job: JobId, not_before: u64) {
        let Some(entry) = self.pods.jobs.remove(&job) else {
            return;
        };
        for (_, uid) in entry.alive() {
            if let Some(pod) = self.pods.entries.get_mut(uid)
                && matches!(pod.state, PodState::InJob { .. })
            {
                pod.state = PodState::Waiting { not_before };
                self.pods.forming.insert(uid.clone());
            }
        }
        if let Some(group) = entry.group {
            self.pods.forming_groups.insert(group);
        }
    }

    /// Whether a waiting pod may enter a queue now, or why not.
    fn eligibility(&self, facts: &PodFacts, pod: &PodRef) -> Result<(), Hold> {
        if facts.gated {
            return Err(Hold::Gated);
        }
        if let Err(reason) = self.volumes.plan(pod, &facts.claims) {
            return Err(Hold::Volume(reason));
        }
        if let Some(queue) = &facts.queue
            && self.scheduler.tenants().index(queue).is_none()
        {
            let reason = match self.queues.get(queue) {
                None => format!("queue {queue} {ABSENT}"),
                Some(q) => match q.spec.to_tenant_config(queue) {
                    Err(e) => format!("{e}; its pods wait until it is fixed"),
                    Ok(_) => format!("queue {queue} is not in effect yet"),
                },
            };
            return Err(Hold::UnknownQueue(reason));
        }
        Ok(())
    }

    /// Whether a PodGroup's gang is this replica's: as its member asking for the most
    /// GPUs says (the member whose GPU models its job takes), so that a member naming no
    /// GPU model (a launcher) follows its gang.
    pub(super) fn gang_in_shard(&self, group: &GroupKey) -> bool {
        self.gang_template(group)
            .is_some_and(|facts| self.in_shard(facts))
    }

    /// The facts of a PodGroup's member asking for the most GPUs, whose GPU models its
    /// job takes.
    fn gang_template(&self, group: &GroupKey) -> Option<&PodFacts> {
        self.pods
            .members
            .get(group)?
            .iter()
            .filter_map(|uid| {
                let entry = self.pods.entries.get(uid)?;
                Some((entry.facts.as_ref()?, &entry.target))
            })
            .max_by_key(|(facts, pod)| template_rank(&facts.request, pod))
            .map(|(facts, _)| facts)
    }

    /// A GPU model came to be carried by some node, or stopped being, or the GPU models
    /// the shards are configured for changed: a pod naming several may have changed
    /// shards. Queued jobs of such pods form again, and such pods left to another shard
    /// are looked at again.
    pub(super) fn shard_owners_changed(&mut self, now_ms: u64) {
        let entries = &self.pods.entries;
        let names_several =
            |uid: &String| (entries.get(uid)?.facts.as_ref()).map(|f| f.gpu_models.len() > 1);
        let queued: Vec<JobId> = (self.pods.jobs.iter())
            .filter(|(_, e)| e.phase == JobPhase::Queued)
            .filter(|(_, e)| e.alive().any(|(_, uid)| names_several(uid) == Some(true)))
            .map(|(&id, _)| id)
            .collect();
        let passed: Vec<String> = (entries.iter())
            .filter(|(uid, e)| e.state == PodState::OtherShard && names_several(uid) == Some(true))
            .map(|(uid, _)| uid.clone())
            .collect();
        self.pods.forming.extend(passed);
        for job in queued {
            self.withdraw_and_dissolve(job, now_ms);
        }
    }

    /// A pod left to other shards whose job names only GPU models (`models`) that no node
    /// carries (a misspelt `nvidia.com/gpu.product`, say) may be no shard's at all, and
    /// would wait without a word: the `--default-shard` replica tells it, once.
    fn tell_uncarried(&mut self, uid: &str, models: &[String]) {
        let uncarried = !models.is_empty() && !models.iter().any(|m| self.nodes.carries(m));
        if !self.options.default_shard || !uncarried || !self.pods.told_uncarried.insert(uid.into())
        {
            return;
        }
        let Some(entry) = self.pods.entries.get(uid) else {
            return;
        };
        let message = format!(
            "no node carries the GPU models it names ({GPU_PRODUCT_LABEL}: {}), and none of \
             them is this shard's; it waits for a node of one of them and its shard",
            models.join(", ")
        );
        tracing::warn!("pod {}: {message}", entry.target);
        self.outputs.push(Output::Event {
            target: entry.target.clone().into(),
            warning: true,
            reason: "FailedScheduling",
            message,
        });
    }

    /// Whether the pod is this replica's. A pod naming several GPU models is the shard's
    /// of the first it names that a node of the cluster carries and some shard is
    /// configured for, as the shards' Leases show (else of the first a node carries, else
    /// of the first it names), so that one shard places it, on the models of that shard it
    /// names.
    fn in_shard(&self, facts: &PodFacts) -> bool {
        let Some(first) = facts.gpu_models.first() else {
            return self.options.default_shard;
        };
        let carried = || (facts.gpu_models.iter()).filter(|m| self.nodes.carries(m));
        let owner = carried()
            .find(|m| self.shard_models.as_ref().is_none_or(|s| s.has(m)))
            .or_else(|| carried().next())
            .unwrap_or(first);
        self.options.owns_model(owner)
    }

    /// Forms jobs of the waiting pods: a lone pod at once, a PodGroup's members once
    /// enough of them wait. Returns them, to be submitted once the cluster spec knows any
    /// pool they registered.
    pub(super) fn form_jobs(&mut self, now_ms: u64) -> Vec<Job> {
        let mut jobs = Vec::new();
        // Whether a gang is this shard's, read once per gang rather than once per member.
        let mut gangs_in_shard: BTreeMap<GroupKey, bool> = BTreeMap::new();
        for uid in std::mem::take(&mut self.pods.forming) {
            let Some(entry) = self.pods.entries.get(&uid) else {
                continue;
            };
            match entry.state {
                PodState::Waiting { not_before } if not_before > now_ms => {
                    self.pods.forming.insert(uid);
                    continue;
                }
                PodState::Waiting { .. } | PodState::Held(_) | PodState::OtherShard => {}
                _ => continue,
            }
            let Some(facts) = entry.facts.clone() else {
                continue;
            };
            let ignored = self.unenforced(&facts);
            if !ignored.is_empty() && self.pods.warned.insert(uid.clone()) {
                self.outputs.push(Output::Event {
                    target: entry.target.clone().into(),
                    warning: true,
                    reason: "IgnoredConstraint",
                    message: format!(
                        "kant does not enforce {}; the pod is scheduled without it",
                        ignored.join(", ")
                    ),
                });
            }
            let other_shards = match &entry.group {
                Some(group) => !*gangs_in_shard
                    .entry(group.clone())
                    .or_insert_with(|| self.gang_in_shard(group)),
                None => !self.in_shard(&facts),
            };
            if other_shards {
                // A job asking for no GPU (MIG slices) names a model as a node label alone:
                // a node of slices carries none.
                let models = match &entry.group {
                    Some(group) => (self.gang_template(group))
                        .filter(|t| !t.request.gpu.is_none())
                        .map(|t| t.gpu_models.clone()),
                    None => Some(facts.gpu_models.clone()).filter(|_| !facts.request.gpu.is_none()),
                };
                let workload = match &entry.group {
                    Some(group) => group_workload(group),
                    None => pod_workload(&uid),
                };
                self.tell_uncarried(&uid, &models.unwrap_or_default());
                self.set_state(&uid, PodState::OtherShard);
                if self.pods.left_unplaced(&workload) {
                    self.metrics.job_withdrawn();
                }
                continue;
            }
            if let Err(hold) = self.eligibility(&facts, &entry.target) {
                match hold {
                    Hold::UnknownQueue(_) => self.pods.held_on_queue.insert(uid.clone()),
                    Hold::Volume(_) => self.pods.held_on_volume.insert(uid.clone()),
                    _ => false,
                };
                self.set_state(&uid, PodState::Held(hold));
                continue;
            }
            match entry.group.clone() {
                Some(group) => {
                    if !self.groups.contains_key(&group) {
                        let hold = Hold::NoGroup(format!("{}/{}", group.0, group.1));
                        self.set_state(&uid, PodState::Held(hold));
                        continue;
                    }
                    self.set_state(&uid, PodState::Waiting { not_before: 0 });
                    self.pods.forming_groups.insert(group);
                }
                None => {
                    self.set_state(&uid, PodState::Waiting { not_before: 0 });
                    if let Some(job) = self.new_job(vec![uid], None, now_ms) {
                        jobs.push(job);
                    }
                }
            }
        }
        for group in std::mem::take(&mut self.pods.forming_groups) {
            jobs.extend(self.form_gang(&group, now_ms));
        }
        jobs
    }

    /// The pod's scheduling fields that are not enforced: those Kant never reads, and
    /// those whose plugin the profile leaves out.
    fn unenforced(&self, facts: &PodFacts) -> Vec<&'static str> {
        let mut ignored = facts.ignored.clone();
        let rules = &facts.pod_rules;
        let node_rules = facts.constraints.as_ref().is_some_and(|c| {
            !c.node_selector.is_empty() || !c.affinity.is_empty() || !c.preferred.is_empty()
        });
        let missing = [
            (
                !self.enforced.node_affinity && node_rules,
                "spec.nodeSelector and spec.affinity.nodeAffinity (the profile has no \
                 node-affinity plugin)",
            ),
            (
                !self.enforced.pod_affinity && (rules.has_terms() || rules.has_preferences()),
                "spec.affinity.podAffinity and podAntiAffinity (the profile has no \
                 pod-affinity plugin)",
            ),
            (
                !self.enforced.topology_spread
                    && (!rules.spread.is_empty() || !rules.preferred_spread.is_empty()),
                "spec.topologySpreadConstraints (the profile has no topology-spread plugin)",
            ),
        ];
        ignored.extend(
            missing
                .into_iter()
                .filter(|(m, _)| *m)
                .map(|(_, what)| what),
        );
        ignored
    }

    /// A PodGroup's jobs, as scheduler-plugins' coscheduling admits its pods: until
    /// `minMember` of them are bound, one gang of as many waiting members as are still
    /// needed (those asking for the most GPUs first), the others waiting for it; once they
    /// are, each further member on its own. A queued gang is formed again when the group
    /// asks for more or fewer than it holds, or when the group is gone. Members on their
    /// way out (evicted or deleted) count neither as placed nor as waiting.
    fn form_gang(&mut self, group: &GroupKey, now_ms: u64) -> Vec<Job> {
        let Some(members) = self.pods.members.get(group) else {
            return Vec::new();
        };
        let mut waiting = Vec::new();
        // Whether a member is held for a reason of its own (a malformed pod, say).
        let mut others_held = false;
        let mut placed = 0usize;
        let mut queued: Option<JobId> = None;
        // Members past `minMember` queued on their own, once the gang was placed.
        let mut queued_alone: Vec<JobId> = Vec::new();
        // The gang is being bound, or waits for its victims to go.
        let mut starting = false;
        for uid in members {
            let Some(entry) = self.pods.entries.get(uid).filter(|e| !e.deleting) else {
                continue;
            };
            match &entry.state {
                PodState::Waiting { not_before } if *not_before <= now_ms => {
                    waiting.push(uid.clone());
                }
                PodState::Held(Hold::GangIncomplete { .. } | Hold::GangStarting { .. }) => {
                    waiting.push(uid.clone());
                }
                PodState::Held(
                    Hold::Invalid(_) | Hold::UnknownQueue(_) | Hold::Volume(_) | Hold::Gated,
                ) => others_held = true,
                PodState::InJob { job, .. } => {
                    let Some(j) = self.pods.jobs.get(job) else {
                        continue;
                    };
                    let gang = j.group.as_ref() == Some(group);
                    match &j.phase {
                        // Placed means bound, as coscheduling counts assigned pods.
                        JobPhase::Running => placed += 1,
                        JobPhase::Queued if gang => queued = Some(*job),
                        JobPhase::Queued => queued_alone.push(*job),
                        JobPhase::Binding { .. } | JobPhase::AwaitingVictims { .. } => {
                            starting |= gang;
                        }
                        JobPhase::Evicting { .. } => {}
                    }
                }
                PodState::Parked => placed += 1,
                _ => {}
            }
        }
        if !self.gang_in_shard(group) {
            // Another shard's now (a member asking for more GPUs of its models came): the
            // queued pods go there.
            for job in queued.into_iter().chain(queued_alone) {
                self.withdraw_and_dissolve(job, now_ms);
            }
            return Vec::new();
        }
        let Some(pod_group) = self.groups.get(group) else {
            // The group is gone: a queued gang waits for it again.
            if let Some(job) = queued {
                self.withdraw_and_dissolve(job, now_ms);
            }
            return Vec::new();
        };
        let min_member = pod_group.spec.min_member.max(1) as usize;
        self.tell_negative_min_member(group);
        let needed = min_member.saturating_sub(placed);
        let name = format!("{}/{}", group.0, group.1);
        if starting {
            self.hold_behind_gang(&waiting, &name, min_member);
            return Vec::new();
        }
        // The gang placed before is gone: members queued on their own form it again.
        if needed > 0 {
            for job in queued_alone {
                waiting.extend(self.unqueue(job, now_ms));
            }
        }
        if let Some(job) = queued {
            let queued_pods = self.pods.jobs.get(&job).map_or(0, |e| e.alive().count());
            if queued_pods == needed {
                self.hold_behind_gang(&waiting, &name, min_member);
                return Vec::new();
            }
            // The group asks for more, or fewer, than it holds: it forms again.
            waiting.extend(self.unqueue(job, now_ms));
            waiting.sort_unstable();
            waiting.dedup();
        }
        if needed == 0 {
            return waiting
                .into_iter()
                .filter_map(|uid| self.new_job(vec![uid], None, now_ms))
                .collect();
        }
        if waiting.len() < needed {
            let hold = Hold::GangIncomplete {
                group: name,
                needed,
                others_held,
            };
            for uid in &waiting {
                self.set_state(uid, PodState::Held(hold.clone()));
            }
            return Vec::new();
        }
        // Those asking for the most GPUs go first: the gang is made of its template.
        let entries = &self.pods.entries;
        let rank = |uid: &String| {
            entries
                .get(uid)
                .and_then(|e| Some(template_rank(&e.facts.as_ref()?.request, &e.target)))
        };
        waiting.sort_by_cached_key(|uid| {
            let (gpus, name) = rank(uid).unzip();
            (Reverse(gpus), name.map(|Reverse(n)| n.to_owned()))
        });
        let later = waiting.split_off(needed);
        self.hold_behind_gang(&later, &name, min_member);
        waiting.sort_unstable();
        self.new_job(waiting, Some(group.clone()), now_ms)
            .into_iter()
            .collect()
    }

    /// A PodGroup whose `minMember` is negative is told, once per value, that it is read as
    /// 1 (each member scheduled on its own), as scheduler-plugins' coscheduling reads it;
    /// by the replica that forms its gang. (0, or none, is read as 1 without a word.)
    fn tell_negative_min_member(&mut self, group: &GroupKey) {
        let Some(pod_group) = self.groups.get(group) else {
            return;
        };
        let min_member = pod_group.spec.min_member;
        if min_member >= 0 || self.pods.told_negative_min.get(group) == Some(&min_member) {
            return;
        }
        self.pods
            .told_negative_min
            .insert(group.clone(), min_member);
        let uid = pod_group.metadata.uid.as_deref().unwrap_or_default();
        let message = format!(
            "spec.minMember is {min_member}, below 1: kant reads it as 1, each member \
             scheduled on its own"
        );
        tracing::warn!("pod group {}/{}: {message}", group.0, group.1);
        self.outputs.push(Output::Event {
            target: Regarding::pod_group(&group.0, &group.1, uid),
            warning: true,
            reason: "InvalidMinMember",
            message,
        });
    }

    /// A queued job taken out of its queue, to be formed again: its live pods.
    fn unqueue(&mut self, job: JobId, now_ms: u64) -> Vec<String> {
        self.withdraw_keeping_exemption(job, now_ms);
        let entry = self.pods.jobs.remove(&job);
        entry
            .iter()
            .flat_map(|e| e.alive())
            .map(|(_, uid)| uid.clone())
            .collect()
    }

    /// Members past the ones a gang forming needs wait until its `minMember` are placed.
    fn hold_behind_gang(&mut self, uids: &[String], group: &str, min_member: usize) {
        let hold = Hold::GangStarting {
            group: group.to_owned(),
            needed: min_member,
        };
        for uid in uids {
            self.set_state(uid, PodState::Held(hold.clone()));
        }
    }

    /// The scheduler's tenant index of a Queue (`None`: the default tenant).
    pub(super) fn tenant_of(&self, queue: Option<&str>) -> TenantId {
        let name = queue.unwrap_or(DEFAULT_TENANT);
        TenantId(self.scheduler.tenants().index(name).unwrap_or(0) as u16)
    }

    /// A job of these waiting pods, recorded as queued (the caller submits it).
    fn new_job(&mut self, uids: Vec<String>, group: Option<GroupKey>, now_ms: u64) -> Option<Job> {
        let facts: Vec<(PodFacts, u64, PodRef)> = uids
            .iter()
            .filter_map(|uid| {
                let e = self.pods.entries.get(uid)?;
                Some((e.facts.clone()?, e.created_ms, e.target.clone()))
            })
            .collect();
        let template = facts
            .iter()
            .max_by_key(|(f, _, pod)| template_rank(&f.request, pod))?;
        if let Some(group) = &group {
            self.tell_differing_members(group, &facts, template);
        }
        let (template, _, template_pod) = template;
        let queue = template.queue.clone();
        // A job asking for no whole or shared GPU (MIG slices and renamed time-sliced GPUs
        // are extended resources) is kept to no pool: the model it names is a node label
        // its selectors enforce, and a node listing no `nvidia.com/gpu` is CPU-only here.
        let asks_gpus = facts.iter().any(|(f, _, _)| !f.request.gpu.is_none());
        let shard_models: Vec<&String> = (template.gpu_models.iter())
            .filter(|m| asks_gpus && self.options.owns_model(m))
            .collect();
        let pools: Option<Vec<PoolId>> = shard_models
            .into_iter()
            .map(|m| self.nodes.register_model(Some(m)))
            .collect();
        let Some(pools) = pools else {
            tracing::warn!(
                "{}: names a GPU model past the {MAX_POOLS} a cluster numbers; it waits",
                template_pod
            );
            return None;
        };
        let priority = facts.iter().map(|(f, _, _)| f.priority).max().unwrap_or(0);
        // One member that must not preempt keeps the whole gang from it.
        let may_preempt = facts.iter().all(|(f, _, _)| f.may_preempt);
        let going_where_nominated = facts
            .iter()
            .filter_map(|(f, _, _)| f.nominated_node.as_ref())
            .find(|node| self.pods.going_below(node, priority))
            .cloned();
        let job = Job {
            id: self.pods.new_job_id(),
            name: JobEntry::name(&group, template_pod),
            tenant: self.tenant_of(queue.as_deref()),
            priority,
            kind: template.kind,
            pools,
            pods: facts.iter().map(|(f, _, _)| f.request).collect(),
            submit_ms: facts.iter().map(|(_, c, _)| *c).min().unwrap_or(now_ms),
            duration_ms: None,
            topology: template.topology,
            constraints: shared((facts.iter()).map(|(f, _, pod)| self.with_volumes(f, pod))),
            pod_rules: Some(template.pod_rules.clone()),
            may_preempt: may_preempt && going_where_nominated.is_none(),
        };
        if let Some(node) = going_where_nominated {
            let until_ms = now_ms.saturating_add(VICTIM_PATIENCE_MS);
            let wait = GoingWait {
                node,
                until_ms,
                may_preempt,
            };
            self.pods.going_waits.insert(job.id, wait);
        }
        let entry = JobEntry::new(
            job.clone(),
            &uids,
            group,
            queue,
            JobPhase::Queued,
            Vec::new(),
            now_ms,
        );
        self.record_job(entry);
        Some(job)
    }

    /// Queued jobs some of whose pods' claims no longer say what they did as the job formed
    /// (a claim given a node, or freed of one; bound; gone) come apart, to form again as
    /// their claims say now: a pod waiting for a node its claim no longer names would wait
    /// for good.
    pub(super) fn reform_on_volumes(&mut self, now_ms: u64) {
        if !std::mem::take(&mut self.pods.volumes_changed) {
            return;
        }
        let outdated: Vec<JobId> = (self.pods.jobs.iter())
            .filter(|(_, e)| e.phase == JobPhase::Queued)
            .filter(|(_, e)| {
                (e.alive()).any(|(index, uid)| self.volumes_outdated(&e.job, index, uid))
            })
            .map(|(&id, _)| id)
            .collect();
        for job in outdated {
            self.withdraw_and_dissolve(job, now_ms);
        }
    }

    /// Whether pod `index` of `job` (`uid`) has claims that let it run elsewhere than the
    /// job says, or not at all.
    fn volumes_outdated(&self, job: &Job, index: u32, uid: &str) -> bool {
        let Some(entry) = self.pods.entries.get(uid) else {
            return false;
        };
        let Some(facts) = entry.facts.as_ref().filter(|f| !f.claims.is_empty()) else {
            return false;
        };
        let now = self.volumes.plan(&entry.target, &facts.claims);
        let then = job
            .constraints_of(index)
            .map_or(&[][..], |c| &c.volumes[..]);
        now.as_deref() != Ok(then)
    }

    /// A pod's node constraints with where its volumes let it run (as it entered its
    /// queue; its claims are looked at again as it is bound).
    fn with_volumes(&self, facts: &PodFacts, pod: &PodRef) -> Option<NodeConstraints> {
        let topology = (self.volumes.plan(pod, &facts.claims)).unwrap_or_default();
        if topology.is_empty() {
            return facts.constraints.clone();
        }
        let mut constraints = facts.constraints.clone().unwrap_or_default();
        constraints.volumes = topology;
        Some(constraints)
    }

    /// Tells each member of a PodGroup whose GPU models, Queue, topology need or workload
    /// kind differ from the template member's that the template's are applied to it (a
    /// gang never mixes GPU models, and is one job of one tenant, placed and scheduled as
    /// one), and each member naming a priority class below another member's that the
    /// gang takes the highest priority. A member that sets none of these (a launcher,
    /// mostly) is not overruled. Once per pod and difference.
    fn tell_differing_members(
        &mut self,
        group: &GroupKey,
        members: &[(PodFacts, u64, PodRef)],
        (template, _, template_pod): &(PodFacts, u64, PodRef),
    ) {
        // The member of the highest priority, the first by name among equals.
        let highest = (members.iter()).max_by_key(|(f, _, pod)| (f.priority, Reverse(&pod.name)));
        let t = format!("{template_pod}, the member asking for the most GPUs");
        for (facts, _, pod) in members {
            let mut told: Vec<(&'static str, String)> = Vec::new();
            if !facts.gpu_models.is_empty() && facts.gpu_models != template.gpu_models {
                let what = "the GPU models they accept";
                let models = template.gpu_models.join(", ");
                let shared = (facts.gpu_models.iter()).any(|m| template.gpu_models.contains(m));
                let how = if template.gpu_models.is_empty() {
                    format!(
                        "{t}, accepts any, so kant places them all on one model every member's \
                         node rules allow"
                    )
                } else if shared {
                    format!(
                        "{t}, accepts {models}: kant places them all on one of those that every \
                         member's node rules allow"
                    )
                } else {
                    format!(
                        "{t}, accepts {models}, which this pod's node rules exclude: kant cannot \
                         place the gang until they agree"
                    )
                };
                told.push(("GpuModelsDiffer", format!("{what}; {how}")));
            }
            if facts.queue != template.queue {
                let how = match template.queue {
                    Some(_) => format!("kant charges them all to the Queue of {t}"),
                    None => {
                        format!("{t}, names none, so kant charges them all to the default Queue")
                    }
                };
                told.push(("QueueDiffers", format!("their Queue; {how}")));
            }
            if facts.topology.is_some() && facts.topology != template.topology {
                let how = match template.topology {
                    Some(_) => format!("kant places them all by the topology need of {t}"),
                    None => {
                        format!("{t}, sets none, so kant places them all with no topology need")
                    }
                };
                told.push(("TopologyDiffers", format!("their kant.io/topology; {how}")));
            }
            if facts.kind != JobKind::Unknown && facts.kind != template.kind {
                let how = match template.kind {
                    JobKind::Unknown => {
                        format!("{t}, sets none, so kant schedules them all with no workload kind")
                    }
                    _ => format!("kant schedules them all as the workload of {t}"),
                };
                told.push(("WorkloadDiffers", format!("their kant.io/workload; {how}")));
            }
            if let Some((top, _, top_pod)) = highest
                && facts.names_priority_class
                && top.priority > facts.priority
            {
                let what = format!(
                    "priority; kant schedules them all, and preempts for them, at the highest, \
                     {} of {top_pod}",
                    top.priority
                );
                told.push(("PriorityDiffers", what));
            }
            for (reason, what) in told {
                let told = self.pods.told_differing.entry(pod.uid.clone()).or_default();
                if !told.insert(reason) {
                    continue;
                }
                self.outputs.push(Output::Event {
                    target: pod.clone().into(),
                    warning: true,
                    reason,
                    message: format!(
                        "the pods of pod group {}/{} differ in {what}",
                        group.0, group.1
                    ),
                });
            }
        }
    }

    /// Records a job and makes its live pods its members.
    pub(super) fn record_job(&mut self, entry: JobEntry) {
        let id = entry.job.id;
        for (index, uid) in entry.alive() {
            if let Some(pod) = self.pods.entries.get_mut(uid) {
                pod.state = PodState::InJob { job: id, index };
            }
        }
        self.pods.jobs.insert(id, entry);
    }

    /// Adopts the parked pods whose node is in the cluster, those whose annotations name
    /// their devices first (a pod placed elsewhere gets the free devices left after
    /// them). The members of one PodGroup found bound together become one job (so a gang
    /// is preempted whole); others one job each.
    pub(super) fn adopt_parked(&mut self, now_ms: u64) {
        if !std::mem::take(&mut self.pods.parked_dirty) {
            return;
        }
        let mut batches: BTreeMap<(bool, Option<GroupKey>), Vec<String>> = BTreeMap::new();
        for uid in &self.pods.parked {
            let Some(entry) = self.pods.entries.get(uid) else {
                continue;
            };
            let Some(bound) = &entry.bound else {
                continue;
            };
            if self.scheduler.state().spec().node_id(&bound.node).is_none() {
                // Its node is not (yet) usable: kept until it is.
                continue;
            }
            let unnamed = bound.devices.is_none();
            batches
                .entry((unnamed, entry.group.clone()))
                .or_default()
                .push(uid.clone());
        }
        for ((_, group), uids) in batches {
            for uid in &uids {
                self.pods.parked.remove(uid);
            }
            if group.is_some() && self.adopt(&uids, group.clone(), now_ms) {
                continue;
            }
            for uid in uids {
                self.adopt(std::slice::from_ref(&uid), None, now_ms);
            }
        }
    }

    /// Adopts bound pods as one running job, by what they hold (what else of a pod cannot
    /// be read is reported); false (nothing changed) when a pod's resources cannot be read
    /// or its devices conflict with what is recorded.
    fn adopt(&mut self, uids: &[String], group: Option<GroupKey>, now_ms: u64) -> bool {
        let mut requests = Vec::new();
        let mut placements = Vec::new();
        let mut members = Vec::new();
        let mut short = false;
        for uid in uids {
            let Some(entry) = self.pods.entries.get(uid) else {
                return false;
            };
            let Some(bound) = entry.bound.clone() else {
                return false;
            };
            let target = entry.target.clone();
            match self.placement_of(&bound, &target, &placements) {
                // A gang's members are adopted one by one where one is short.
                Ok((_, _, Some(_))) if uids.len() > 1 => return false,
                Ok((request, placement, asked)) => {
                    if let Some(asked) = asked {
                        tracing::warn!(
                            "pod {target}: {} has {} for its {asked}; it is counted on \
                             those, and on more as they come free (fractions placed by \
                             Kant ask Kubernetes for no GPU, so another scheduler sees \
                             their devices free)",
                            bound.node,
                            request.gpu
                        );
                        short = true;
                    }
                    requests.push(request);
                    placements.push(Some(placement));
                }
                Err(reason) => {
                    if uids.len() == 1 {
                        self.cannot_adopt(uid, &reason, bound.request.is_err());
                    }
                    return false;
                }
            }
            members.push((bound, target));
        }
        // A member whose rules cannot be read is passed over for the template.
        let template = members
            .iter()
            .zip(&requests)
            .max_by_key(|((bound, target), request)| {
                (bound.pod_rules.is_some(), template_rank(request, target))
            })
            .map(|((bound, _), _)| bound);
        // Pods of another shard (on a CPU-only node, which every shard uses) hold what they
        // hold, but are that shard's to charge, count and preempt, as another scheduler's.
        let other_shards = !self.bound_in_shard(uids, group.as_ref());
        let queue = template
            .and_then(|t| t.queue.clone())
            .filter(|_| !other_shards);
        let started = members
            .iter()
            .map(|(b, _)| b.started_ms)
            .fold(now_ms, u64::min);
        let job = Job {
            id: self.pods.new_job_id(),
            name: JobEntry::name(&group, &members[0].1),
            tenant: self.tenant_of(queue.as_deref()),
            priority: members.iter().map(|(b, _)| b.priority).max().unwrap_or(0),
            kind: JobKind::Unknown,
            pools: Vec::new(),
            pods: requests,
            submit_ms: started,
            duration_ms: None,
            topology: None,
            constraints: shared(members.iter().map(|(b, _)| {
                (!b.extended.is_empty()).then(|| NodeConstraints {
                    extended: b.extended.clone(),
                    ..NodeConstraints::default()
                })
            })),
            pod_rules: template.and_then(|t| t.pod_rules.clone()),
            may_preempt: true,
        };
        let ours = !other_shards && members.iter().any(|(b, _)| b.ours);
        // Pods already on their way out (an earlier leader's victims, pods being deleted)
        // hold their devices until gone, charged to no tenant and no victim.
        let deleting =
            (uids.iter()).all(|uid| self.pods.entries.get(uid).is_some_and(|e| e.deleting));
        let running = if deleting {
            Adopted::Terminating
        } else {
            Adopted::Running { preemptible: ours }
        };
        if let Err(e) = self
            .scheduler
            .adopt(job.clone(), &placements, started, running)
        {
            if uids.len() == 1 {
                self.cannot_adopt(&uids[0], &format!("bound where {e}"), false);
            }
            return false;
        }
        let spec = self.scheduler.state().spec();
        let places = placements
            .iter()
            .flatten()
            .map(|p| Place::of(p, spec))
            .collect();
        let mut entry = JobEntry::new(job, uids, group, queue, JobPhase::Running, places, started);
        entry.own = ours && !deleting;
        // A workload found running was submitted and placed before: the metrics count
        // neither again, nor, for a gang found part bound, the rest when it is placed.
        self.pods.submitted_workloads.insert(entry.workload.clone());
        self.pods.placed_workloads.insert(entry.workload.clone());
        self.record_job(entry);
        if short {
            self.pods.short.extend(uids.iter().cloned());
        }
        for problem in members.iter().flat_map(|(bound, _)| &bound.unread) {
            tracing::warn!("{problem}");
        }
        true
    }

    /// Pods adopted short of their GPUs take the room that has come back on their node
    /// since (a pod gone, a binding refused, a preemptor's reservation given up), before
    /// anything else is placed: each is released and adopted again, on as many of its GPUs
    /// as the node has free now, its own among them. One being evicted keeps what it holds
    /// until it is gone. A pod adopted again takes every free device of its node unless
    /// it is short no more, so none is adopted again before more room comes back.
    pub(super) fn grow_short_pods(&mut self, now_ms: u64) {
        if self.pods.short.is_empty() {
            return;
        }
        let state = self.scheduler.state();
        let growing: Vec<(String, JobId, u32)> = (self.pods.short.iter())
            .filter_map(|uid| {
                let entry = self.pods.entries.get(uid)?;
                let PodState::InJob { job, index } = entry.state else {
                    return None;
                };
                let running =
                    (self.pods.jobs.get(&job)).is_some_and(|e| e.phase == JobPhase::Running);
                let node = state.node(state.spec().node_id(&entry.bound.as_ref()?.node)?);
                let room = node.free_whole() | (node.unhealthy() & !node.busy());
                (running && room != 0).then(|| (uid.clone(), job, index))
            })
            .collect();
        for (uid, job, index) in growing {
            self.pods.short.remove(&uid);
            self.scheduler.release_pod(PodKey { job, pod: index });
            self.pods.jobs.remove(&job);
            if let Some(entry) = self.pods.entries.get_mut(&uid) {
                entry.state = PodState::Parked;
            }
            self.adopt(std::slice::from_ref(&uid), None, now_ms);
        }
    }

    /// Whether bound pods (a PodGroup's, or one alone) are this shard's to charge, count
    /// and preempt. Pods on a GPU node of this shard are: no other shard sees them (the
    /// models a pod names may have come to be another shard's since it was placed). On the
    /// CPU-only nodes, which every shard uses, their gang's or their own GPU models say; a
    /// pod whose facts cannot be read (another scheduler's too) names none anyone can read
    /// and is the `--default-shard` replica's, or every shard would count it.
    fn bound_in_shard(&self, uids: &[String], group: Option<&GroupKey>) -> bool {
        let on_cpu_only_node = |uid: &String| {
            (self.pods.entries.get(uid))
                .and_then(|e| e.bound.as_ref())
                .is_some_and(|b| self.nodes.is_cpu_only(&b.node))
        };
        if !uids.iter().all(on_cpu_only_node) {
            return true;
        }
        if let Some(template) = group.and_then(|g| self.gang_template(g)) {
            return self.in_shard(template);
        }
        uids.iter().all(|uid| {
            let Some(entry) = self.pods.entries.get(uid) else {
                return true;
            };
            match &entry.facts {
                Some(facts) => self.in_shard(facts),
                None => self.options.default_shard,
            }
        })
    }

    /// A bound pod that could not be adopted. One whose resources cannot be read is left
    /// uncounted; one whose node cannot hold it now (its node changed, or what it holds
    /// conflicts with a reservation) stays parked and is tried again when capacity or the
    /// cluster changes.
    fn cannot_adopt(&mut self, uid: &str, reason: &str, unreadable: bool) {
        let Some(target) = self.pods.entries.get(uid).map(|e| e.target.clone()) else {
            return;
        };
        if unreadable {
            tracing::warn!("pod {target}: {reason}; its resources are not counted");
            self.set_state(uid, PodState::Ignored);
        } else {
            tracing::warn!("pod {target}: {reason}; counted once its node can hold it");
            self.pods.parked.insert(uid.to_owned());
        }
    }

    /// The request and placement of a bound pod: the devices its annotations name, or,
    /// for a pod placed by another scheduler, the lowest free devices of its node (the
    /// count is right; which devices the device plugin chose is not known here). Named
    /// devices another pod holds (a binding that landed late, after they were given
    /// again) give way to the lowest free devices too: the kubelet counts the pod's GPUs
    /// whatever their indexes. `taken`: placements of the same adoption not yet in the
    /// cluster state.
    ///
    /// A node without free devices enough for the pod's GPUs (another scheduler placed a
    /// whole GPU beside Kant's fractions, which ask Kubernetes for none) has the pod
    /// counted on those it has, as asking for no more, its CPU and the rest in full: the
    /// GPU request asked for comes third.
    fn placement_of(
        &self,
        bound: &BoundFacts,
        target: &PodRef,
        taken: &[Option<Placement>],
    ) -> Result<(PodRequest, Placement, Option<GpuRequest>), String> {
        let mut request = bound.request.clone()?;
        let mut short = None;
        let state = self.scheduler.state();
        let node = state
            .spec()
            .node_id(&bound.node)
            .ok_or_else(|| format!("node {} is not in the cluster", bound.node))?;
        let devices = match bound.devices {
            Some(alloc)
                if state
                    .node(node)
                    .can_take(alloc.devices, alloc.milli_each, false) =>
            {
                alloc
            }
            named => {
                if let Some(alloc) = named {
                    let gpus = state.spec().node(node).gpus();
                    let ids: Vec<String> = bits(alloc.devices).map(|d| d.to_string()).collect();
                    let why = match bits(alloc.devices).any(|d| d >= gpus) {
                        true => format!("past the node's {gpus} GPUs"),
                        false => "held by another pod".to_owned(),
                    };
                    tracing::warn!(
                        "pod {target}: its GPUs {} on {} (`kant.io/gpu-ids`) are {why}; it \
                         is counted on the lowest free devices",
                        ids.join(","),
                        bound.node
                    );
                }
                self.free_devices(node, request.gpu, taken)
                    .unwrap_or_else(|some| {
                        short = Some(request.gpu);
                        request.gpu = GpuRequest::Whole(some.devices.count_ones());
                        some
                    })
            }
        };
        let placement = Placement {
            node,
            gpus: devices,
            cpu_milli: request.cpu_milli,
            memory_bytes: request.memory_bytes,
            ephemeral_bytes: request.ephemeral_bytes,
        };
        Ok((request, placement, short))
    }

    /// Free devices of a node for a request, lowest first, past those `taken` on it:
    /// healthy ones first, then unhealthy ones, as the pod runs there whatever their
    /// health (counting it on them keeps its GPUs from being given again). Where too few
    /// are free, the error holds every free whole device (none for a fraction).
    fn free_devices(
        &self,
        node: NodeId,
        gpu: GpuRequest,
        taken: &[Option<Placement>],
    ) -> Result<DeviceAlloc, DeviceAlloc> {
        let state = self.scheduler.state().node(node);
        let busy: u32 = taken
            .iter()
            .flatten()
            .filter(|p| p.node == node)
            .fold(0, |acc, p| acc | p.gpus.devices);
        let free_unhealthy = state.unhealthy() & !state.busy();
        match gpu {
            GpuRequest::Whole(0) => Ok(DeviceAlloc::default()),
            GpuRequest::Whole(n) => {
                let chosen: u32 = bits(state.free_whole() & !busy)
                    .chain(bits(free_unhealthy & !busy))
                    .take(n as usize)
                    .fold(0, |acc, d| acc | 1 << d);
                let alloc = DeviceAlloc::whole(chosen);
                if chosen.count_ones() == n {
                    Ok(alloc)
                } else {
                    Err(alloc)
                }
            }
            GpuRequest::Fraction(milli) => {
                let device = state
                    .shared_with_room(milli)
                    .map(|(d, _)| d)
                    .chain(bits(state.free_whole()))
                    .chain(bits(state.unhealthy()))
                    .find(|&d| busy & (1 << d) == 0 && state.can_take(1 << d, milli, false))
                    .ok_or_else(DeviceAlloc::default)?;
                Ok(DeviceAlloc {
                    devices: 1 << device,
                    milli_each: milli.min(MILLI_PER_GPU),
                })
            }
        }
    }
}

/// The status of the pod's `PodScheduled` condition (`None`: it has none).
fn scheduled_status(pod: &Pod) -> Option<bool> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let condition = conditions.iter().find(|c| c.type_ == "PodScheduled")?;
    Some(condition.status == "True")
}
