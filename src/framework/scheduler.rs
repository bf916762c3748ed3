//! The scheduler object both worlds drive: it takes events (a job submitted, finished,
//! bound or failed to bind) and returns decisions, running one scheduling cycle per job
//! the queues offer. It owns the cluster state, the tenants' quota accounting and the
//! running jobs; the world owns time and I/O.
//!
//! A cycle: static quota admission (no search when the tenant's quota cannot cover the
//! job), PreFilter (dynamic admission from aggregates), the search, PostFilter
//! (preemption, then one more search), Reserve, Permit, Bind.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::cache::{CacheError, ClusterState, Placement, PlacementPhase, PodKey};
use crate::model::{
    ClusterSpec, GroupId, Job, JobId, JobShape, MILLI_PER_GPU, NodeId, PodAffinityTerm, PodRequest,
    PodRules, PodWidths, PoolId,
};
use crate::queue::{
    Admission, Attempted, Driver, FreeNodes, HeadQuota, Offer, PoolsWanted, PreemptionReach,
    QueueingPolicy, Queues, Room, TenantMode, Tenants, Waiting,
};

use super::fruitless::{FailedSearch, RoomLog, SearchScope};
use super::plugin::{
    Bind, JobPlan, Landing, PostFilterResult, PreemptionContext, PreemptionKind, RunningJob,
    overtakes,
};
use super::search::{
    Found, HeldForGpuPods, HeldGroups, RoomUse, TightWaitSince, WithinTightestTier,
    bounded_within_tightest_tier, diagnose, domain_limits, is_patient, patience_periods, place_job,
    pools_for, pools_hold_spread, reservation_groups, tight_wait_ends,
};
use super::usable::{Reach, ReachOf, ReachesByShape, reach, single_pod_usable};
use super::{CandidateMemo, Code, CycleState, Diagnosis, Profile, SearchMode, Stamped, Status};

/// What a scheduling round decided, for the world to carry out and report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Every pod of the job is reserved where the plan says and handed to the binder.
    /// `bound` is true when the binder bound it at once.
    Placed {
        job: JobId,
        plan: JobPlan,
        bound: bool,
    },
    /// These jobs were evicted whole to make room for `by`, for `kind` (victims evicted for
    /// different reasons come in one decision per reason); they are back in their queues
    /// (or, when victims are held until gone, terminating).
    Preempted {
        victims: Vec<JobId>,
        by: JobId,
        kind: PreemptionKind,
    },
    /// Binding failed: every reservation of the job was forgotten; it is tried again from
    /// `retry_at` (exponential backoff).
    Requeued {
        job: JobId,
        reason: String,
        retry_at: u64,
    },
}

/// Search groups held for a backfill head: jobs of no higher priority are not placed there
/// until the head is (one asking no GPU only where the node keeps what the head's pods need
/// besides GPUs: `HeldForGpuPods`), as long as the head's quota admits it or, short of
/// room, it awaits jobs that overtook it there until they may go (`awaits_until`).
#[derive(Debug, Clone)]
pub struct Reservation {
    pub head: Arc<Job>,
    /// The head's milli-GPUs in all.
    pub milli: u64,
    /// The head's tenant.
    pub tenant: usize,
    /// Sorted.
    pub groups: Vec<GroupId>,
    /// Some other job's search has left these groups alone: giving them back frees
    /// capacity for it.
    pub kept_out: bool,
    /// Made while the head was short of room, awaiting jobs that overtook it inside their
    /// minimum runtime, the last of which may go then: given back once a try as head
    /// finds it short of room awaiting none, or once that time has passed.
    pub awaits_until: Option<u64>,
}

/// What the scheduler remembers of a job that failed to be placed.
#[derive(Debug, Clone, Copy, Default)]
struct Wait {
    /// Its last search, which found nothing.
    failed_search: Option<FailedSearch>,
    /// As a backfill head short of room, it held room while awaiting jobs that overtook it
    /// inside their minimum runtime: it does not hold so again until it is placed.
    held_awaiting_victims: bool,
}

/// A gang holding out for a tight placement. Its patience is spent only while its pools
/// hold it spread: a placement there that leaves them short of it pauses the count, which
/// goes on from where it was at its next try that finds them holding it again. So it never
/// declines room to spread past its tightest tier for longer than its patience in all,
/// nor is that spent while it had no room to decline. The same count, past its patience,
/// lets it span one more leaf per patience period (see `search::leaf_limits`): it
/// declines room on more leaves than that for as long.
struct Patience {
    /// Since when it would have held out had its stretches been one (world clock); `None`
    /// while paused.
    since: Option<u64>,
    /// How long it held out, until its pools last came short of it.
    spent_ms: u64,
    /// Its pools as searched (kept to those its quota admitted it on).
    pools: Vec<PoolId>,
    widths: PodWidths,
}

impl Patience {
    /// Its count's start for a try at `now_ms` (going on from where it paused).
    fn since(&self, now_ms: u64) -> u64 {
        (self.since).unwrap_or_else(|| now_ms.saturating_sub(self.spent_ms))
    }

    fn pause(&mut self, now_ms: u64) {
        if let Some(since) = self.since.take() {
            self.spent_ms = now_ms.saturating_sub(since);
        }
    }
}

/// The scheduler: one profile, one cluster state, one queue per tenant.
pub struct Scheduler {
    profile: Profile,
    binder: Box<dyn Bind>,
    state: ClusterState,
    queues: Queues,
    tenants: Stamped<Tenants>,
    /// Jobs with every pod reserved or bound.
    running: Stamped<HashMap<JobId, RunningJob>>,
    /// Preemption candidates found per class of jobs, for these running jobs and tenants.
    candidate_memo: CandidateMemo,
    /// Running jobs per priority (for a quick "is anyone preemptible" check).
    running_priorities: BTreeMap<i32, usize>,
    /// Bumped whenever capacity is returned: a job that failed at the current epoch would
    /// fail again and is not retried.
    capacity_epoch: u64,
    /// What the scheduler remembers of jobs that failed to be placed.
    waits: HashMap<JobId, Wait>,
    /// Gangs waiting only for a tight placement.
    patient: HashMap<JobId, Patience>,
    /// Where room came back: a search that found nothing is not repeated until room comes
    /// back where it could use it.
    room_log: RoomLog,
    /// Every search is repeated (see [`Scheduler::repeat_every_search`]).
    repeats_every_search: bool,
    /// What the nodes each waiting job may use could ever hold, for this cluster shape
    /// (a single pod's once it failed).
    reaches: HashMap<JobId, Arc<Reach>>,
    /// The same, for jobs alike (most gangs of a trace ask alike).
    reaches_by_shape: ReachesByShape,
    /// The nodes of each topology domain, for what a pod with anti-affinity opens.
    domains: DomainIndex,
    /// Failed bindings per job, and failed attempts of a job waiting on other pods (its
    /// affinity or spread), for the backoff.
    bind_failures: HashMap<JobId, u32>,
    /// Jobs evicted during a round, back into their queues at its end: (job, tenant).
    evicted: Vec<(Arc<Job>, usize)>,
    /// Jobs evicted as backfilled past a head (and back in their queues, in the simulator;
    /// made again by their controllers, under `kant run`): no head evicts them as
    /// backfilled again, until they finish or are withdrawn.
    evicted_as_backfilled: HashSet<JobId>,
    /// Whether victims hold what they had until the world reports their pods gone (a
    /// real cluster, where eviction takes time), instead of leaving at once (the
    /// simulator).
    hold_victims: bool,
    /// Victims of the current cycle to hold, with their placements.
    terminating: Vec<(RunningJob, Vec<Option<Placement>>)>,
    /// Room held for backfill heads that waited past the threshold.
    reservations: Vec<Reservation>,
    /// Counts the times room held for a backfill head was given back.
    holds_given_back: u64,
    /// Room held for a backfill head, which kept some job out, was returned since the
    /// current round began.
    room_returned: bool,
    /// Per tenant, the pools its waiting jobs may want GPUs of: as the round began, and
    /// the pools of its jobs evicted since.
    pools_wanted: Vec<PoolsWanted>,
    decisions: Vec<Decision>,
}

impl Scheduler {
    /// A scheduler with the default tenant alone, which may use the whole cluster.
    pub fn new(profile: Profile, binder: Box<dyn Bind>, spec: Arc<ClusterSpec>) -> Self {
        let tenants = Tenants::resolve(&[], &spec).expect("no tenants: nothing to resolve");
        Self::with_tenants(profile, binder, spec, tenants)
    }

    /// A scheduler with `tenants` (resolved against `spec`). A job's `tenant` is an index
    /// into them; one out of range goes to the default tenant (index 0).
    pub fn with_tenants(
        profile: Profile,
        binder: Box<dyn Bind>,
        spec: Arc<ClusterSpec>,
        tenants: Tenants,
    ) -> Self {
        let queues = empty_queues(&profile, tenants.len());
        Self {
            profile,
            binder,
            state: ClusterState::new(spec),
            queues,
            tenants: Stamped::new(tenants),
            running: Stamped::new(HashMap::new()),
            candidate_memo: CandidateMemo::default(),
            running_priorities: BTreeMap::new(),
            capacity_epoch: 0,
            waits: HashMap::new(),
            patient: HashMap::new(),
            room_log: RoomLog::default(),
            repeats_every_search: false,
            reaches: HashMap::new(),
            reaches_by_shape: ReachesByShape::default(),
            domains: DomainIndex::default(),
            bind_failures: HashMap::new(),
            evicted_as_backfilled: HashSet::new(),
            evicted: Vec::new(),
            hold_victims: false,
            terminating: Vec::new(),
            reservations: Vec::new(),
            holds_given_back: 0,
            room_returned: false,
            pools_wanted: Vec::new(),
            decisions: Vec::new(),
        }
    }

    /// Searches every job the queues offer again, though no room came back where its last
    /// search could use it: slower, and deciding the same wherever tests compared the two.
    #[doc(hidden)]
    pub fn repeat_every_search(&mut self) {
        self.repeats_every_search = true;
    }

    /// Victims keep what they hold, as terminating jobs, until their pods are released
    /// one by one ([`Scheduler::release_pod`]): nothing but their preemptor is placed on
    /// it meanwhile. They are not requeued (their pods are gone for good).
    pub fn hold_victims_until_gone(&mut self) {
        self.hold_victims = true;
    }

    /// The current cluster state (clone it for an O(1) snapshot).
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    pub fn tenants(&self) -> &Tenants {
        &self.tenants
    }

    /// Jobs holding resources.
    pub fn running(&self) -> &HashMap<JobId, RunningJob> {
        &self.running
    }

    pub fn pending(&self) -> usize {
        self.queues.len()
    }

    /// Pending jobs of one tenant.
    pub fn pending_of(&self, tenant: usize) -> usize {
        self.queues.pending(tenant)
    }

    /// Every pending job, with its tenant and since when it is blocked.
    pub fn waiting(&self) -> impl Iterator<Item = Waiting<'_>> {
        self.queues.waiting()
    }

    /// The time before which a pending job is not tried (its binding failed).
    pub fn not_before(&self, job: JobId) -> Option<u64> {
        self.queues.not_before(job)
    }

    /// Takes a pending job out of its queue (its pods were deleted or placed elsewhere).
    pub fn withdraw(&mut self, job: JobId) -> Option<Arc<Job>> {
        let (job, _) = self.queues.remove(job)?;
        self.forget_job(job.id);
        Some(job)
    }

    /// The job is what a controller made again of one a head evicted as backfilled, or
    /// what runs on of it (`kant run`, where victims' pods are deleted): no head evicts it
    /// as backfilled again until it finishes, as in the simulator, where the victim itself
    /// goes back to its queue.
    pub fn exempt_from_backfill_eviction(&mut self, job: JobId) {
        self.evicted_as_backfilled.insert(job);
        if let Some(running) = self.running.get_mut(&job) {
            running.backfill_exempt = true;
        }
    }

    /// Whether no head may evict the job as backfilled: it was evicted as backfilled
    /// before (or exempt as such, above), or placed as an overdue head.
    pub fn is_exempt_from_backfill_eviction(&self, job: JobId) -> bool {
        self.evicted_as_backfilled.contains(&job)
            || self.running.get(&job).is_some_and(|r| r.backfill_exempt)
    }

    /// Drops what the scheduler remembers of a job that is neither pending nor running.
    fn forget_job(&mut self, job: JobId) {
        self.drop_reservation(job);
        self.evicted_as_backfilled.remove(&job);
        self.waits.remove(&job);
        self.patient.remove(&job);
        self.reaches.remove(&job);
        self.bind_failures.remove(&job);
    }

    /// Records a job whose pods the world already placed: pods found bound when the
    /// scheduler starts (its own, from their device annotations), pods another scheduler
    /// placed, or pods on their way out. `placements[i]` is pod `i`'s, `None` for a pod
    /// that is not there. Fails, changing nothing, when a placement does not fit what is
    /// already recorded: no device is ever given twice.
    pub fn adopt(
        &mut self,
        job: Job,
        placements: &[Option<Placement>],
        started_ms: u64,
        adopted: Adopted,
    ) -> Result<(), CacheError> {
        let job = Arc::new(job);
        let plan = JobPlan {
            pods: placements
                .iter()
                .enumerate()
                .filter_map(|(pod, p)| {
                    let key = PodKey {
                        job: job.id,
                        pod: pod as u32,
                    };
                    Some((key, (*p)?))
                })
                .collect(),
        };
        let mut state = self.state.clone();
        for &(key, placement) in &plan.pods {
            state.restore(key, placement, PlacementPhase::Bound)?;
        }
        if !plan.pods.is_empty() {
            state.record_job(&job);
        }
        self.state = state;
        let tenant = self.tenant_of(&job);
        match adopted {
            Adopted::Running { .. } => {
                let pools = self.pools_held(&plan);
                self.start_running(job, tenant, pools, started_ms, adopted);
            }
            Adopted::Terminating => {
                self.start_running(job, tenant, Vec::new(), started_ms, adopted);
            }
        }
        self.capacity_epoch += 1;
        Ok(())
    }

    /// A running job's pods changed who they are (their labels): other pods' rules see
    /// the new identity.
    pub fn set_pod_rules(&mut self, job: JobId, rules: &Arc<PodRules>) {
        if self.state.job_nodes(job).next().is_some() {
            // Pods that kept others out of whole domains (by their anti-affinity, or
            // others' anti-affinity selecting them) may keep them out no more.
            self.room_log.clear();
            self.state.set_pod_rules(job, rules);
        }
        if let Some(running) = self.running.get_mut(&job) {
            let mut relabelled = (*running.job).clone();
            relabelled.pod_rules = Some(rules.clone());
            running.job = Arc::new(relabelled);
        }
    }

    /// Marks a device of a node healthy or not (the world's reading of the node changed):
    /// an unhealthy device keeps its pods and takes no new one.
    pub fn set_device_health(
        &mut self,
        node: NodeId,
        device: usize,
        healthy: bool,
    ) -> Result<(), CacheError> {
        self.state.set_device_health(node, device, healthy)?;
        // Only a device turning healthy frees room that waiting jobs may use.
        if healthy {
            self.capacity_epoch += 1;
            self.room_back_on([node]);
        }
        Ok(())
    }

    /// A placed pod was resized in place: it holds its new CPU and memory.
    pub fn resize_pod(
        &mut self,
        pod: PodKey,
        cpu_milli: u64,
        memory_bytes: u64,
    ) -> Result<(), CacheError> {
        self.state.resize(pod, cpu_milli, memory_bytes)?;
        // It may have given room back.
        self.capacity_epoch += 1;
        if let Some(placed) = self.state.placement(pod) {
            self.room_back_on([placed.placement.node]);
        }
        Ok(())
    }

    /// One pod of a running job is gone (deleted, finished, or its node removed): its
    /// resources and its share of the tenant's quota return. The job stops running when
    /// its last pod is gone.
    pub fn release_pod(&mut self, pod: PodKey) -> Option<Placement> {
        if !self.running.contains_key(&pod.job) {
            return None;
        }
        let placement = self.state.forget(pod).ok()?;
        let job = self.running[&pod.job].job.clone();
        let pool = self.state.spec().node(placement.node).pool;
        self.pod_gone(pod.job, pool, placement.gpus.total_milli());
        self.capacity_epoch += 1;
        self.room_back_from(&job, [placement.node]);
        Some(placement)
    }

    /// Uncharges a pod of a running job that is no longer in the cluster state; the job
    /// stops running when none of its pods is left.
    fn pod_gone(&mut self, job: JobId, pool: PoolId, milli: u64) {
        let Some(running) = self.running.get_mut(&job) else {
            return;
        };
        // Only what was charged is returned (a terminating job was charged nothing).
        if let Some((_, held)) = running.pools.iter_mut().find(|(p, _)| *p == pool) {
            let returned = milli.min(*held);
            *held -= returned;
            self.tenants
                .charge(running.tenant, pool, -(returned as i64));
        }
        let members = running.job.pods.len() as u32;
        let state = &self.state;
        if !(0..members).any(|pod| state.placement(PodKey { job, pod }).is_some()) {
            self.release(job);
            self.bind_failures.remove(&job);
            self.evicted_as_backfilled.remove(&job);
        }
    }

    /// The cluster changed shape (nodes came, went or changed). Every placement whose
    /// node is still there, by name, and can still hold it is kept. A bound pod whose node
    /// is gone or cannot hold it is forgotten (its job runs on without it); a job with such
    /// a pod only reserved is released whole and requeued with backoff. Pool ids must be
    /// kept (see [`crate::model::ClusterSpecBuilder::with_pools`]).
    pub fn set_cluster(&mut self, spec: Arc<ClusterSpec>, now_ms: u64) -> Reshaped {
        let old = std::mem::replace(&mut self.state, ClusterState::new(spec.clone()));
        self.tenants.follow_cluster(&spec);
        let mut reshaped = Reshaped::default();
        let mut lost_reserved: Vec<JobId> = Vec::new();
        // Kept pods whose node changed GPU model: (job, old pool, new pool, milli-GPUs).
        let mut moved = Vec::new();
        for (&key, placed) in old.placements() {
            let old_node = old.spec().node(placed.placement.node);
            let kept = spec.node_id(&old_node.name).filter(|&node| {
                let placement = Placement {
                    node,
                    ..placed.placement
                };
                self.state.restore(key, placement, placed.phase).is_ok()
            });
            match (kept, placed.phase) {
                (Some(node), _) => {
                    let pool = spec.node(node).pool;
                    if pool != old_node.pool {
                        let milli = placed.placement.gpus.total_milli();
                        moved.push((key.job, old_node.pool, pool, milli));
                    }
                }
                (None, PlacementPhase::Bound) => reshaped.lost_bound.push(key),
                (None, PlacementPhase::Assumed) => lost_reserved.push(key.job),
            }
        }
        self.state.keep_jobs(&old);
        for (job, from, to, milli) in moved {
            self.move_charge(job, from, to, milli);
        }
        for &key in &reshaped.lost_bound {
            if let Some(placed) = old.placement(key) {
                let pool = old.spec().node(placed.placement.node).pool;
                self.pod_gone(key.job, pool, placed.placement.gpus.total_milli());
            }
        }
        lost_reserved.dedup();
        for job in lost_reserved {
            if self.bind_failed(job, now_ms).is_some() {
                reshaped.requeued.push(job);
            }
        }
        // Group ids changed: room held for backfill heads is chosen again (a head that held
        // some while awaiting the jobs that overtook it may so again), and what gangs could
        // ever fit is judged again.
        self.reservations.clear();
        for wait in self.waits.values_mut() {
            wait.held_awaiting_victims = false;
        }
        self.reaches.clear();
        self.reaches_by_shape.clear();
        self.domains.clear();
        self.queues.forget_failures();
        self.room_log.clear();
        self.capacity_epoch += 1;
        reshaped
    }

    /// A running job's pod stays on a node that moved from pool `from` to pool `to` (its
    /// GPU model changed): what was charged for it moves with it, so that it is returned
    /// to the right pool when the pod ends.
    fn move_charge(&mut self, job: JobId, from: PoolId, to: PoolId, milli: u64) {
        let Some(running) = self.running.get_mut(&job) else {
            return;
        };
        let Some((_, held)) = running.pools.iter_mut().find(|(p, _)| *p == from) else {
            return;
        };
        let moved = milli.min(*held);
        *held -= moved;
        match running.pools.iter_mut().find(|(p, _)| *p == to) {
            Some((_, held)) => *held += moved,
            None => running.pools.push((to, moved)),
        }
        self.tenants.charge(running.tenant, from, -(moved as i64));
        self.tenants.charge(running.tenant, to, moved as i64);
    }

    /// Replaces the tenants (queues were added, removed or changed their quotas), matched
    /// to the current ones by name; a job of a tenant that is gone moves to the default
    /// tenant. What running jobs use is charged to the new tenants.
    pub fn set_tenants(&mut self, mut tenants: Tenants) {
        tenants.follow_cluster(self.state.spec());
        let map: Vec<usize> = (0..self.tenants.len())
            .map(|t| tenants.index(self.tenants.name(t)).unwrap_or(0))
            .collect();
        for running in self.running.values_mut() {
            running.tenant = map[running.tenant];
            for &(pool, milli) in &running.pools {
                tenants.charge(running.tenant, pool, milli as i64);
            }
        }
        for r in &mut self.reservations {
            r.tenant = map[r.tenant];
        }
        self.queues.renumber(&map, tenants.len());
        self.queues.forget_failures();
        self.room_log.clear();
        // What a job could ever be placed on is judged on the pools its quota could ever
        // admit it on.
        self.reaches.clear();
        self.reaches_by_shape.clear();
        *self.tenants = tenants;
    }

    /// Charges running jobs to other tenants from now on, `(job, tenant)` each (a world
    /// that learns their tenants anew: a Queue came back, or came to exist, after they
    /// started).
    pub fn move_running(&mut self, moves: &[(JobId, usize)]) {
        let mut moved = false;
        for &(job, tenant) in moves {
            let Some(running) = self.running.get_mut(&job) else {
                continue;
            };
            if tenant >= self.tenants.len() || running.tenant == tenant {
                continue;
            }
            for &(pool, milli) in &running.pools {
                self.tenants.charge(running.tenant, pool, -(milli as i64));
                self.tenants.charge(tenant, pool, milli as i64);
            }
            running.tenant = tenant;
            moved = true;
        }
        if moved {
            self.queues.forget_failures();
            self.room_log.clear();
        }
    }

    /// A new job enters its tenant's queue.
    pub fn submit(&mut self, job: Job) {
        let tenant = self.tenant_of(&job);
        self.queues.push(Arc::new(job), tenant, 0);
    }

    fn tenant_of(&self, job: &Job) -> usize {
        Some(job.tenant.index())
            .filter(|&t| t < self.tenants.len())
            .unwrap_or(0)
    }

    /// Runs cycles at `now_ms` (the world's clock) for the jobs the queueing policy
    /// offers; returns what was decided.
    pub fn schedule(&mut self, now_ms: u64) -> Vec<Decision> {
        let placeholder = empty_queues(&self.profile, self.tenants.len());
        let mut queues = std::mem::replace(&mut self.queues, placeholder);
        // Room a backfill head held and gave back during a round is capacity freed for the
        // jobs it kept out, those tried before it in that round too: they get another. So
        // do the victims evicted in a round, back in their queues: room elsewhere may hold
        // them now. A job placed at `now_ms` is no victim in that instant (see the
        // preemption plugin), so each round that evicts leaves fewer jobs that could be.
        loop {
            self.room_returned = false;
            // The queues may offer no job this round: the holds are judged here first.
            self.release_stale_holds(now_ms);
            self.pools_wanted = queues.pools_wanted();
            let epoch = self.capacity_epoch;
            queues.run(
                epoch,
                now_ms,
                &mut Round {
                    scheduler: self,
                    now_ms,
                },
            );
            let evicted = !self.evicted.is_empty();
            for (job, tenant) in self.evicted.drain(..) {
                queues.push(job, tenant, now_ms);
            }
            if !self.room_returned && !evicted {
                break;
            }
        }
        self.queues = queues;
        std::mem::take(&mut self.decisions)
    }

    /// One scheduling cycle for the job the queue offers; its preemption victims, if held,
    /// hold what its placement left of theirs. Holds whose heads their quota no longer
    /// admits are given back after the attempt, as its placement may have taken their
    /// quota (the round's start judged them against what came before), and so are those
    /// whose awaited jobs may all go.
    fn cycle(&mut self, offer: Offer, now_ms: u64) -> Attempted {
        let attempted = self.attempt(offer, now_ms);
        self.release_stale_holds(now_ms);
        for (victim, placements) in std::mem::take(&mut self.terminating) {
            self.hold_terminating(victim, placements);
        }
        attempted
    }

    /// A victim whose pods are still going holds again, of `placements` (its live pods'),
    /// every device still free: what its preemptor's reservation took, when the preemptor
    /// gave up waiting or went.
    pub fn hold_going(&mut self, job: JobId, placements: Vec<Option<Placement>>) {
        if let Some(victim) = self.release(job) {
            self.hold_terminating(victim, placements);
        }
    }

    /// Records a victim as terminating: each pod holds the devices of its placement that
    /// are still free (its preemptor may have taken some), charged to no tenant.
    fn hold_terminating(&mut self, victim: RunningJob, placements: Vec<Option<Placement>>) {
        let held: Vec<Option<Placement>> = placements
            .into_iter()
            .map(|p| {
                let p = p?;
                let node = self.state.node(p.node);
                let devices = crate::model::bits(p.gpus.devices)
                    .filter(|&d| node.can_take(1 << d, p.gpus.milli_each, false))
                    .fold(0, |acc, d| acc | 1 << d);
                let gpus = crate::cache::DeviceAlloc { devices, ..p.gpus };
                Some(Placement { gpus, ..p })
            })
            .collect();
        let job = Job {
            tenant: crate::model::TenantId(victim.tenant as u16),
            ..(*victim.job).clone()
        };
        // Only devices still free are taken: this cannot conflict.
        let _ = self.adopt(job, &held, victim.started_ms, Adopted::Terminating);
    }

    /// The body of a cycle.
    fn attempt(&mut self, offer: Offer, now_ms: u64) -> Attempted {
        let job = offer.job;
        // What is searched: the job, kept to the pools its quota admits it on.
        let within_quota = admitted_job(job, offer.milli, offer.tenant, &self.tenants, &self.state);
        let admitted = within_quota.is_some();
        let searched_job = within_quota.as_ref().unwrap_or(job);
        if !admitted && !self.tenants.could_ever_admit(offer.tenant, job) {
            self.drop_reservation(job.id);
            return Attempted::Unresolvable;
        }
        // Without room now, only preemption could help: a job that cannot preempt (the
        // profile has no preemption for it, or the job never preempts) costs no search.
        let may_preempt = job.may_preempt
            && (self.profile.post_filters.iter())
                .any(|p| offer.backfill_since.is_some() || !p.for_backfill_heads_only());
        if !admitted && !may_preempt {
            // Told so now, a job no pool could ever hold would count as resolvable and
            // block a strict FIFO queue, or become a backfill head, for good.
            if self.never_placeable(job, offer.tenant, now_ms) {
                self.drop_reservation(job.id);
                return Attempted::Unresolvable;
            }
            return Attempted::Failed { retry_at: None };
        }
        let mut cycle = CycleState::new(now_ms);
        let mut room_now = admitted;
        for plugin in &self.profile.pre_filters {
            match plugin
                .pre_filter(searched_job, &self.state, &mut cycle)
                .code
            {
                Code::Success | Code::Skip => {}
                // Refused on all its pools, or on those it could ever be admitted on.
                Code::UnschedulableAndUnresolvable
                    if Arc::ptr_eq(searched_job, job)
                        || self.ever_unresolvable(job, offer.tenant, now_ms) =>
                {
                    self.drop_reservation(job.id);
                    return Attempted::Unresolvable;
                }
                // Unresolvable only on the pools its quota admits it on now: it waits, or
                // makes room where it could go.
                Code::UnschedulableAndUnresolvable if may_preempt => room_now = false,
                Code::UnschedulableAndUnresolvable => return Attempted::Failed { retry_at: None },
                _ if may_preempt => room_now = false,
                _ => return Attempted::Failed { retry_at: None },
            }
        }
        // A gang the nodes its pods may use could never hold is unresolvable; one they
        // could holds out for the tightest tier they could hold it in.
        let mut gang_reach = None;
        if job.pods.len() > 1 {
            let reach = self.reach_of(job, offer.tenant, &cycle);
            if reach.never.is_some() {
                self.drop_reservation(job.id);
                return Attempted::Unresolvable;
            }
            cycle.write(ReachOf(reach.clone()));
            gang_reach = Some(reach);
        }
        // Room is held for a backfill head when there is enough of it (its quota admits
        // it, which for a shared tenant means its pools have the room free): then holding
        // keeps others from breaking the shape it needs. A head still short of room holds
        // only while it awaits jobs that overtook it, inside their minimum runtime, whose
        // going would make its room (see `AwaitsVictims`), and only once until placed
        // (what it awaits may never come: the owner rule may refuse the set once they
        // could go): otherwise holding would idle the room until enough drained, and it
        // waits as any job.
        let wait = self.waits.get(&job.id).copied().unwrap_or_default();
        // Short of room, the groups it would hold are chosen only if preemption is asked.
        let may_hold = offer.backfill_since.is_some()
            && (admitted || !wait.held_awaiting_victims)
            && !self.reservations.iter().any(|r| r.head.id == job.id);
        if may_hold && admitted {
            let groups = self.groups_to_hold(searched_job, gang_reach.as_deref(), &cycle);
            self.hold(&offer, groups, None);
        }
        let mut held_awaiting_victims = wait.held_awaiting_victims;
        let since = self.patient.get(&job.id).map(|p| p.since(now_ms));
        // A job asking no GPU may use held room that leaves the head what its pods need
        // besides GPUs (the flat search reads no held room at all).
        let beside_heads =
            self.profile.search == SearchMode::TwoLevel && job.pods.iter().all(|p| p.gpu.is_none());
        let mut held: Vec<GroupId> = Vec::new();
        let mut held_for_gpu_pods = Vec::new();
        for r in &mut self.reservations {
            if r.head.id != job.id && r.head.priority >= job.priority {
                r.kept_out = true;
                if beside_heads {
                    let kinds = HeldForGpuPods::kinds_of(&r.head);
                    held_for_gpu_pods.extend(r.groups.iter().map(|&g| (g, kinds.clone())));
                } else {
                    held.extend_from_slice(&r.groups);
                }
            }
        }
        held.sort_unstable();
        held_for_gpu_pods.sort_unstable_by_key(|&(g, _)| g);
        let inputs = CycleInputs {
            now_ms,
            tight_since: since,
            within_tightest_tier: false,
            reach: gang_reach,
            held,
            held_for_gpu_pods,
        };
        inputs.write(&mut cycle);
        // Pods arriving elsewhere free no capacity, yet may be what a job's affinity or
        // spread waits for.
        let waits_on_pods = job
            .pod_rules
            .as_ref()
            .is_some_and(|r| !r.affinity.is_empty() || !r.spread.is_empty());
        let scope = SearchScope {
            pools: pools_for(searched_job, &self.state),
            patience_periods: patience_periods(&self.profile, searched_job, &cycle),
        };
        let mark = self.room_log.mark();
        let room_use = OnceCell::new();
        let could_use = |group| {
            let room_use = room_use
                .get_or_init(|| RoomUse::new(&self.profile, searched_job, &self.state, &cycle));
            room_use.could_use(group)
        };
        // Where a job may go must be told by the groups' room alone: not for a job with
        // rules on other pods (whose going opens whole domains), nor a gang with a pod
        // asking no GPU (which may take any node, the GPU-less ones too).
        let told_by_room = job
            .pod_rules
            .as_ref()
            .is_none_or(|r| !r.has_terms() && r.spread.is_empty())
            && !(job.pods.len() > 1 && job.pods.iter().any(|p| p.gpu.is_none()));
        let skips = room_now && told_by_room && !self.repeats_every_search;
        let still_fails = (wait.failed_search.filter(|_| skips)).and_then(|last| {
            (self.room_log).still_fails(&last, self.state.spec(), &scope, could_use)
        });
        let mut failed_search = still_fails;
        let searched = if !room_now || still_fails.is_some() {
            None
        } else {
            let found = place_job(&self.profile, searched_job, &self.state, &cycle);
            failed_search = found
                .is_none()
                .then(|| self.room_log.failed(mark, &scope))
                .flatten();
            found
        };
        let mut preemption_retry = None;
        let found = searched.or_else(|| {
            if !may_preempt {
                return None;
            }
            let would_hold = (may_hold && !admitted)
                .then(|| self.groups_to_hold(searched_job, inputs.reach.as_deref(), &cycle))
                .filter(|groups| !groups.is_empty());
            let preempted = self.preempt(&offer, admitted, &inputs, &cycle, would_hold.as_deref());
            let awaits_until = match preempted {
                Preempted::RetryAt { awaits_until, .. } => awaits_until,
                Preempted::Evicted { .. } | Preempted::Nothing => None,
            };
            if let (Some(groups), Some(until)) = (would_hold, awaits_until) {
                self.hold(&offer, groups, Some(until));
                held_awaiting_victims = true;
            } else if offer.backfill_since.is_some()
                && !admitted
                && awaits_until.is_none()
                && !matches!(preempted, Preempted::Evicted { .. })
            {
                self.give_back_awaiting_hold(job.id);
            }
            let compactly = match preempted {
                Preempted::Evicted { compactly } => compactly,
                Preempted::RetryAt { retry_at, .. } => {
                    preemption_retry = Some(retry_at);
                    return None;
                }
                Preempted::Nothing => return None,
            };
            // The victims' going must have let the job into its quota too; room made
            // compactly is taken inside its domain.
            let admitted =
                admitted_job(job, offer.milli, offer.tenant, &self.tenants, &self.state)?;
            let compact = compactly.then(|| inputs.within_tightest_tier());
            (compact.and_then(|compact| compact.place(&self.profile, &admitted, &self.state)))
                .or_else(|| inputs.place(&self.profile, &admitted, &self.state))
        });
        let Some(found) = found else {
            // A single pod is judged on the nodes it may use only once it failed: most
            // pods are placed at once, and the judgement is a pass over its pools.
            if job.pods.len() == 1 && self.reach_of(job, offer.tenant, &cycle).never.is_some() {
                self.drop_reservation(job.id);
                return Attempted::Unresolvable;
            }
            let since = since.unwrap_or(now_ms);
            let tight_retry = tight_wait_ends(&self.profile, searched_job, &self.state, &cycle);
            if tight_retry.is_some() {
                // Its quota may admit it on other pools than at its last try.
                let pools = pools_for(searched_job, &self.state).to_vec();
                let patience = self.patient.entry(job.id).or_insert_with(|| Patience {
                    since: None,
                    spent_ms: 0,
                    pools: Vec::new(),
                    widths: PodWidths::of(searched_job),
                });
                (patience.since, patience.pools) = (Some(since), pools);
            } else if let Some(patience) = self.patient.get_mut(&job.id) {
                patience.pause(now_ms);
            }
            let wait = Wait {
                failed_search,
                held_awaiting_victims,
            };
            match wait.failed_search.is_some() || wait.held_awaiting_victims {
                true => self.waits.insert(job.id, wait),
                false => self.waits.remove(&job.id),
            };
            // A job waiting on other pods is tried again after the requeue backoff, which
            // doubles with each failure up to its cap.
            let rules_retry = waits_on_pods.then(|| now_ms.saturating_add(self.backoff(job.id)));
            let retry_at = [tight_retry, preemption_retry, rules_retry]
                .into_iter()
                .flatten()
                .filter(|&t| t > now_ms)
                .min();
            return Attempted::Failed { retry_at };
        };
        self.waits.remove(&job.id);
        self.patient.remove(&job.id);
        self.reaches.remove(&job.id);
        let attempted = self.commit(job, offer.tenant, found, &mut cycle, now_ms);
        if matches!(attempted, Attempted::Placed) {
            self.drop_reservation(job.id);
            let evicted_before = self.evicted_as_backfilled.contains(&job.id);
            if let Some(running) = self.running.get_mut(&job.id) {
                running.backfill_exempt = offer.backfill_since.is_some() || evicted_before;
            }
        }
        attempted
    }

    /// Whether a PreFilter finds the job unresolvable on every pool its tenant's quota
    /// could ever admit it on (a PreFilter that refused it on the pools admitted now may
    /// not have seen the others).
    fn ever_unresolvable(&self, job: &Arc<Job>, tenant: usize, now_ms: u64) -> bool {
        self.pre_filtered_where_ever_admitted(job, tenant, now_ms)
            .is_none()
    }

    /// Whether the job could never be placed, though it was not searched: a PreFilter
    /// finds it unresolvable on every pool its quota could ever admit it on, or (a gang)
    /// the nodes its pods may use could never hold it.
    fn never_placeable(&mut self, job: &Arc<Job>, tenant: usize, now_ms: u64) -> bool {
        match self.pre_filtered_where_ever_admitted(job, tenant, now_ms) {
            None => true,
            Some(cycle) => job.pods.len() > 1 && self.reach_of(job, tenant, &cycle).never.is_some(),
        }
    }

    /// The cycle state of the PreFilters run on the job as kept to the pools its tenant's
    /// quota could ever admit it on; `None` where one finds it unresolvable there, or
    /// there are no such pools.
    fn pre_filtered_where_ever_admitted(
        &self,
        job: &Arc<Job>,
        tenant: usize,
        now_ms: u64,
    ) -> Option<CycleState> {
        let ever = self.kept_to_ever_admitted(job, tenant)?;
        let mut cycle = CycleState::new(now_ms);
        let unresolvable = self.profile.pre_filters.iter().any(|plugin| {
            plugin.pre_filter(&ever, &self.state, &mut cycle).code
                == Code::UnschedulableAndUnresolvable
        });
        (!unresolvable).then_some(cycle)
    }

    /// The job kept to the pools its tenant's quota could ever admit it on; `None` where
    /// there are none.
    fn kept_to_ever_admitted<'j>(&self, job: &'j Job, tenant: usize) -> Option<Cow<'j, Job>> {
        let all = pools_for(job, &self.state);
        let pools: Vec<PoolId> = all
            .iter()
            .copied()
            .filter(|&p| self.tenants.could_ever_admit_on(tenant, job, p))
            .collect();
        // (No pool: none named means any, so it is said here.)
        if pools.is_empty() {
            return None;
        }
        Some(match pools.len() < all.len() {
            true => Cow::Owned(Job {
                pools,
                ..job.clone()
            }),
            false => Cow::Borrowed(job),
        })
    }

    /// What the nodes a job may use, in the pools its tenant's quota could ever admit it
    /// on, could ever hold: judged once per cluster shape and tenants.
    fn reach_of(&mut self, job: &Job, tenant: usize, cycle: &CycleState) -> Arc<Reach> {
        if let Some(judged) = self.reaches.get(&job.id) {
            return judged.clone();
        }
        let mut by_shape = std::mem::take(&mut self.reaches_by_shape);
        let judged = by_shape.get_or_judge(
            &self.profile,
            (job, tenant),
            self.state.spec(),
            cycle,
            || self.judge_reach(job, tenant, cycle),
        );
        self.reaches_by_shape = by_shape;
        self.reaches.insert(job.id, judged.clone());
        judged
    }

    /// [`Self::reach_of`], judged afresh. A job no pool could ever admit is judged on all
    /// of its pools: its quota says why it waits.
    fn judge_reach(&self, job: &Job, tenant: usize, cycle: &CycleState) -> Reach {
        let ever = self
            .kept_to_ever_admitted(job, tenant)
            .unwrap_or(Cow::Borrowed(job));
        let mut judged = reach(&self.profile, &ever, &self.state, cycle);
        if let (Cow::Owned(kept), Some(never)) = (&ever, &mut judged.never) {
            let spec = self.state.spec();
            let models: Vec<&str> = kept
                .pools
                .iter()
                .filter_map(|&p| spec.pool(p).gpu_model.as_deref())
                .collect();
            never.reason = format!(
                "{} (of the pools tenant {}'s quota could ever admit it on: {})",
                never.reason,
                self.tenants.name(tenant),
                models.join(", ")
            )
            .into();
        }
        judged
    }

    /// The groups to hold for a backfill head (sorted; none where they would overlap
    /// another head's): only of the nodes it may use, a single pod's judged now.
    fn groups_to_hold(&self, job: &Job, reach: Option<&Reach>, cycle: &CycleState) -> Vec<GroupId> {
        let single;
        let usable = match reach {
            Some(reach) => reach.usable.as_ref(),
            None => {
                single = single_pod_usable(&self.profile, job, &self.state, cycle);
                single.as_ref()
            }
        };
        let mut groups = reservation_groups(job, &self.state, cycle, usable);
        groups.sort_unstable();
        // Reservations never overlap: a later head waits for the earlier one's turn.
        let taken = self
            .reservations
            .iter()
            .any(|r| r.groups.iter().any(|g| groups.binary_search(g).is_ok()));
        if taken {
            groups.clear();
        }
        groups
    }

    /// Holds `groups` for the offered backfill head (nothing where there are none).
    fn hold(&mut self, offer: &Offer, groups: Vec<GroupId>, awaits_until: Option<u64>) {
        if !groups.is_empty() {
            self.reservations.push(Reservation {
                head: offer.job.clone(),
                milli: offer.milli,
                tenant: offer.tenant,
                groups,
                kept_out: false,
                awaits_until,
            });
        }
    }

    /// Gives back the room held for a head short of room that awaited jobs that overtook
    /// it inside their minimum runtime, now that it awaits none.
    fn give_back_awaiting_hold(&mut self, job: JobId) {
        if self
            .reservations
            .iter()
            .any(|r| r.head.id == job && r.awaits_until.is_some())
        {
            self.drop_reservation(job);
        }
    }

    /// Returns the room held for a backfill head to everyone: for the jobs it kept out,
    /// it is capacity freed.
    fn drop_reservation(&mut self, job: JobId) {
        let kept_out = self
            .reservations
            .iter()
            .any(|r| r.head.id == job && r.kept_out);
        let groups: Vec<GroupId> = (self.reservations.iter())
            .filter(|r| r.head.id == job)
            .flat_map(|r| r.groups.iter().copied())
            .collect();
        let held = self.reservations.len();
        self.reservations.retain(|r| r.head.id != job);
        if self.reservations.len() < held {
            self.holds_given_back += 1;
        }
        if kept_out {
            self.capacity_epoch += 1;
            self.room_returned = true;
            let opened = self.state.spec().groups_sharing_scale_up_domains(&groups);
            self.room_log.room_gained(groups.into_iter().chain(opened));
        }
    }

    /// Gives back the room held for heads that have it free, whole, but that their quota
    /// no longer admits (others took, outside the hold, what a shared head needed): what
    /// such a head waits for is quota, not shape, and holding would idle the room
    /// meanwhile. A hold made for a head awaiting the jobs that overtook it (whose quota
    /// admits it only once they are gone) is given back once they all may go: the head
    /// would have evicted them by then, had it still been the head.
    fn release_stale_holds(&mut self, now_ms: u64) {
        let stale: Vec<JobId> = self
            .reservations
            .iter()
            .filter(|r| match r.awaits_until {
                Some(until) => now_ms > until,
                None => {
                    self.free_in(r) >= r.milli
                        && self.tenants.admit_milli(r.tenant, &r.head, r.milli) == Admission::Denied
                }
            })
            .map(|r| r.head.id)
            .collect();
        for job in stale {
            self.drop_reservation(job);
        }
    }

    /// Room came back on these nodes, which the job's pods left, and, where its
    /// anti-affinity kept the pods it selects out of the domains around them, on every
    /// node of those domains.
    fn room_back_from(&mut self, job: &Job, nodes: impl IntoIterator<Item = NodeId>) {
        let terms = job
            .pod_rules
            .as_ref()
            .map_or(&[][..], |r| &r.anti_affinity[..]);
        if terms.is_empty() {
            return self.room_back_on(nodes);
        }
        let nodes: Vec<NodeId> = nodes.into_iter().collect();
        let opened = (self.domains).nodes_in_domains(self.state.spec(), terms, &nodes);
        self.room_back_on(nodes.into_iter().chain(opened));
    }

    /// Room came back on these nodes: searches that could use their groups are worth
    /// repeating.
    fn room_back_on(&mut self, nodes: impl IntoIterator<Item = NodeId>) {
        let spec = self.state.spec();
        let mut groups: Vec<GroupId> = nodes
            .into_iter()
            .map(|n| spec.node_group[n.index()])
            .collect();
        // Once each: a gang's pods share groups.
        groups.sort_unstable();
        groups.dedup();
        self.room_log.room_gained(groups);
    }

    /// Room held for backfill heads.
    pub fn reservations(&self) -> &[Reservation] {
        &self.reservations
    }

    /// Free milli-GPUs held for backfill heads (each holds at most what it needs): room
    /// that counts as allocated.
    pub fn held_milli(&self) -> u64 {
        self.reservations
            .iter()
            .map(|r| self.free_in(r).min(r.milli))
            .sum()
    }

    /// Free milli-GPUs of a reservation's groups.
    fn free_in(&self, reservation: &Reservation) -> u64 {
        self.state.free_whole_milli_in(&reservation.groups)
    }

    /// Reserve, Permit and Bind a found placement. Any refusal undoes the reservation; a
    /// failed binding requeues the job with backoff.
    fn commit(
        &mut self,
        job: &Arc<Job>,
        tenant: usize,
        found: Found,
        cycle: &mut CycleState,
        now_ms: u64,
    ) -> Attempted {
        // Reserve: the search's state already holds the job's placements as assumed; it
        // becomes the cache's root (a statement commit), the old root is the rollback.
        let rollback = std::mem::replace(&mut self.state, found.state);
        let plan = found.plan;
        let reserved = self
            .profile
            .reserves
            .iter()
            .position(|plugin| !plugin.reserve(job, &plan, cycle).is_success());
        let permitted = reserved.is_none()
            && self
                .profile
                .permits
                .iter()
                .all(|p| p.permit(job, &plan, cycle).is_success());
        let status = if permitted {
            self.binder.bind(job, &plan)
        } else {
            super::Status::unschedulable("not permitted")
        };
        let bound = match status.code {
            Code::Success => true,
            Code::Wait => false,
            _ => {
                let undo = reserved.map_or(self.profile.reserves.len(), |i| i + 1);
                for plugin in self.profile.reserves[..undo].iter().rev() {
                    plugin.unreserve(job, &plan, cycle);
                }
                self.state = rollback;
                if !permitted {
                    return Attempted::Failed { retry_at: None };
                }
                let retry_at = now_ms.saturating_add(self.backoff(job.id));
                self.decisions.push(Decision::Requeued {
                    job: job.id,
                    reason: status.reason.to_string(),
                    retry_at,
                });
                return Attempted::Backoff { until: retry_at };
            }
        };
        if bound {
            for (key, _) in &plan.pods {
                // The plan's pods were assumed by the search.
                let _ = self.state.confirm(*key);
            }
            // Bound: the backoff starts afresh should the job come back (preempted).
            self.bind_failures.remove(&job.id);
        }
        // A job whose binding is not yet confirmed is not a victim: its pods may not
        // even exist on their nodes yet.
        let pools = self.pools_held(&plan);
        self.pause_patience(&pools, now_ms);
        let adopted = Adopted::Running { preemptible: bound };
        self.start_running(job.clone(), tenant, pools, now_ms, adopted);
        self.decisions.push(Decision::Placed {
            job: job.id,
            plan,
            bound,
        });
        Attempted::Placed
    }

    /// A job placed on `taken` (its pools): the gangs holding out whose pools it leaves
    /// short of them pause their count.
    fn pause_patience(&mut self, taken: &[(PoolId, u64)], now_ms: u64) {
        let state = &self.state;
        for patience in self.patient.values_mut() {
            let shares_a_pool = (patience.pools.iter()).any(|p| taken.iter().any(|t| t.0 == *p));
            if patience.since.is_some()
                && shares_a_pool
                && !pools_hold_spread(&patience.widths, &patience.pools, state)
            {
                patience.pause(now_ms);
            }
        }
    }

    /// Records a job as running, charging its tenant what it holds per pool.
    fn start_running(
        &mut self,
        job: Arc<Job>,
        tenant: usize,
        pools: Vec<(PoolId, u64)>,
        started_ms: u64,
        adopted: Adopted,
    ) {
        for &(pool, milli) in &pools {
            self.tenants.charge(tenant, pool, milli as i64);
        }
        *self.running_priorities.entry(job.priority).or_default() += 1;
        self.running.insert(
            job.id,
            RunningJob {
                job,
                tenant,
                started_ms,
                pools,
                preemptible: adopted == (Adopted::Running { preemptible: true }),
                backfill_exempt: false,
                terminating: adopted == Adopted::Terminating,
            },
        );
    }

    /// The placement of each pod of a job (`None` for a pod not placed).
    fn placements_of(&self, job: JobId) -> Vec<Option<Placement>> {
        let members = self
            .running
            .get(&job)
            .map_or(0, |r| r.job.pods.len() as u32);
        (0..members)
            .map(|pod| Some(self.state.placement(PodKey { job, pod })?.placement))
            .collect()
    }

    /// Milli-GPUs a plan holds per pool.
    fn pools_held(&self, plan: &JobPlan) -> Vec<(PoolId, u64)> {
        let spec = self.state.spec();
        let mut pools: Vec<(PoolId, u64)> = Vec::new();
        for (_, placement) in &plan.pods {
            let pool = spec.node(placement.node).pool;
            let milli = placement.gpus.total_milli();
            match pools.iter_mut().find(|(p, _)| *p == pool) {
                Some((_, held)) => *held += milli,
                None => pools.push((pool, milli)),
            }
        }
        pools
    }

    /// The wait before the next attempt after a failed binding (or a failed attempt of a
    /// job waiting on other pods): doubling per failure, capped.
    fn backoff(&mut self, job: JobId) -> u64 {
        let failures = self.bind_failures.entry(job).or_insert(0);
        *failures += 1;
        let settings = &self.profile.queue_settings;
        let doubled = settings
            .requeue_backoff
            .saturating_mul(1u64 << (*failures - 1).min(32));
        doubled.min(settings.requeue_backoff_max)
    }

    /// Asks the PostFilter plugins (preemption) for room and evicts the first proposal;
    /// `would_hold`: the groups a backfill head short of room holding none would hold.
    ///
    /// Once a set is found, a gang whose patience is spent (one still patient is held to
    /// its tightest tier anyway) takes instead, where there is one, a set that lets it in
    /// inside one domain of the tightest tier that could ever hold it, on as many of its
    /// leaves as it may span by then ([`WithinTightestTier`]), though it may cost more:
    /// the cheapest set alone would scatter a long-waiting gang over the small jobs of
    /// several spines. That set is minimal within the domain. Sought only once some set
    /// is found, it costs nothing to the many tries that find none; nor is it sought where
    /// the marker bounds nothing (a gang whose pods go to any group, or one no domain of
    /// any tier could hold).
    fn preempt(
        &mut self,
        offer: &Offer,
        admitted: bool,
        inputs: &CycleInputs,
        cycle: &CycleState,
        would_hold: Option<&[GroupId]>,
    ) -> Preempted {
        let job = offer.job;
        let mut victims = match self.propose_victims(offer, admitted, inputs, cycle, would_hold) {
            Ok(victims) => victims,
            Err(nothing) => return nothing,
        };
        let mut compactly = false;
        let required = job.topology.is_some_and(|need| need.required);
        if !required
            && !is_patient(&self.profile, job, cycle)
            && bounded_within_tightest_tier(&self.profile, job, &self.state, cycle)
        {
            let compact_inputs = inputs.within_tightest_tier();
            let mut compact_cycle = cycle.clone();
            compact_inputs.write(&mut compact_cycle);
            let found =
                self.propose_victims(offer, admitted, &compact_inputs, &compact_cycle, would_hold);
            if let Ok(found) = found {
                (victims, compactly) = (found, true);
            }
        }
        for &(victim, kind) in &victims {
            let placements = if self.hold_victims {
                self.placements_of(victim)
            } else {
                Vec::new()
            };
            if let Some(evicted) = self.release(victim) {
                // Its tenant wants its room back: no other job may now borrow it where
                // that tenant could reclaim it at once (see the preemption plugin).
                if let Some(wanted) = self.pools_wanted.get_mut(evicted.tenant) {
                    wanted.add(&evicted.job);
                }
                if self.hold_victims {
                    // Its pods go; what comes back (a controller's new pods) is a new job,
                    // which the world knows again (`exempt_from_backfill_eviction`).
                    self.terminating.push((evicted, placements));
                } else {
                    if kind == PreemptionKind::Backfill {
                        self.evicted_as_backfilled.insert(victim);
                    }
                    self.evicted.push((evicted.job, evicted.tenant));
                }
            }
        }
        // One decision per reason, so that each victim is counted under its own.
        for kind in [
            PreemptionKind::Backfill,
            PreemptionKind::QuotaReclaim,
            PreemptionKind::Priority,
        ] {
            let of_kind: Vec<JobId> = (victims.iter())
                .filter(|&&(_, why)| why == kind)
                .map(|&(victim, _)| victim)
                .collect();
            if !of_kind.is_empty() {
                self.decisions.push(Decision::Preempted {
                    victims: of_kind,
                    by: job.id,
                    kind,
                });
            }
        }
        Preempted::Evicted { compactly }
    }

    /// The victims the first PostFilter plugin proposes for the offered job, placed with
    /// `inputs` (on `cycle`'s domain limits); otherwise what the job awaits.
    fn propose_victims(
        &self,
        offer: &Offer,
        admitted: bool,
        inputs: &CycleInputs,
        cycle: &CycleState,
        would_hold: Option<&[GroupId]>,
    ) -> Result<Vec<(JobId, PreemptionKind)>, Preempted> {
        let (job, tenant) = (offer.job, offer.tenant);
        let mut retry_at: Option<u64> = None;
        let mut awaits_until: Option<u64> = None;
        let milli = job.total_milli();
        let fits = |state: &ClusterState, tenants: &Tenants| {
            let admitted = admitted_job(job, milli, tenant, tenants, state)?;
            let found = inputs.place(&self.profile, &admitted, state)?;
            let pods = &found.plan.pods;
            let (_, landing) = (pods.iter())
                .find(|(_, p)| p.gpus.devices != 0)
                .or(pods.first())?;
            Some(Landing {
                pool: state.spec().node(landing.node).pool,
                nodes: pods.iter().map(|(_, p)| p.node).collect(),
            })
        };
        let reserved = self
            .reservations
            .iter()
            .find(|r| r.head.id == job.id)
            .map(|r| r.groups.as_slice());
        let domain_limits = domain_limits(&self.profile, job, &self.state, cycle);
        (self.candidate_memo).keep_for((self.running.stamp(), self.tenants.stamp(), inputs.now_ms));
        let context = PreemptionContext {
            snapshot: &self.state,
            now_ms: inputs.now_ms,
            tenant,
            admitted,
            tenants: &self.tenants,
            pools_wanted: &self.pools_wanted,
            running: &self.running,
            candidates: &self.candidate_memo,
            lowest_running_priority: self.running_priorities.keys().next().copied(),
            backfill_since: offer.backfill_since,
            reclaims_whole_from: (offer.blocked_since.unwrap_or(inputs.now_ms))
                .saturating_add(self.profile.queue_settings.backfill_threshold),
            reserved,
            would_hold,
            domain_limits: &domain_limits,
            fits: &fits,
        };
        let proposal = self.profile.post_filters.iter().find_map(|plugin| {
            let (at, until) = match plugin.post_filter(job, &context) {
                PostFilterResult::Preempt { victims } => return Some(victims),
                PostFilterResult::RetryAt(at) => (at, None),
                PostFilterResult::AwaitsVictims { retry_at, until } => (retry_at, Some(until)),
                PostFilterResult::None => return None,
            };
            retry_at = Some(retry_at.map_or(at, |t: u64| t.min(at)));
            awaits_until = awaits_until.max(until);
            None
        });
        proposal.ok_or(match retry_at {
            Some(retry_at) => Preempted::RetryAt {
                retry_at,
                awaits_until,
            },
            None => Preempted::Nothing,
        })
    }

    /// The world reports a job's pods bound (after a binder answered `Wait`).
    /// Pods of the job released meanwhile (deleted while binding) are skipped. From now
    /// on the job may be a victim.
    pub fn bound(&mut self, job: JobId) -> Result<(), CacheError> {
        let running = self
            .running
            .get_mut(&job)
            .ok_or(CacheError::NotPlaced(PodKey { job, pod: 0 }))?;
        running.preemptible = true;
        for pod in 0..running.job.pods.len() as u32 {
            let key = PodKey { job, pod };
            if self.state.placement(key).is_some() {
                self.state.confirm(key)?;
            }
        }
        self.bind_failures.remove(&job);
        Ok(())
    }

    /// The job ran to completion: its resources return to the cluster.
    pub fn finish(&mut self, job: JobId) -> Option<Arc<Job>> {
        self.bind_failures.remove(&job);
        self.evicted_as_backfilled.remove(&job);
        self.release(job).map(|r| r.job)
    }

    /// Binding failed after the binder answered `Wait`: every reservation of the job is
    /// forgotten and it re-enters its queue after a backoff. Returns when it is tried
    /// again.
    pub fn bind_failed(&mut self, job: JobId, now_ms: u64) -> Option<u64> {
        let released = self.release(job)?;
        let retry_at = now_ms.saturating_add(self.backoff(job));
        self.queues.push(released.job, released.tenant, retry_at);
        Some(retry_at)
    }

    /// Forgets every pod of a running job, returns its capacity and its tenant's quota.
    fn release(&mut self, job: JobId) -> Option<RunningJob> {
        let released = self.running.remove(&job)?;
        let priority = released.job.priority;
        if let Some(count) = self.running_priorities.get_mut(&priority) {
            *count -= 1;
            if *count == 0 {
                self.running_priorities.remove(&priority);
            }
        }
        let nodes: Vec<NodeId> = self.state.job_nodes(job).collect();
        for pod in 0..released.job.pods.len() as u32 {
            // A pod may already be gone (its node vanished); the rest are still released.
            let _ = self.state.forget(PodKey { job, pod });
        }
        self.room_back_from(&released.job, nodes);
        for &(pool, milli) in &released.pools {
            self.tenants.charge(released.tenant, pool, -(milli as i64));
        }
        self.capacity_epoch += 1;
        Some(released)
    }

    /// When the scheduler should run again although nothing happens before: a patience
    /// period of a gang waiting for a tight placement ends, a backoff ends, a backfill
    /// head's threshold passes.
    pub fn next_retry_ms(&self, now_ms: u64) -> Option<u64> {
        self.queues.next_retry_ms(self.capacity_epoch, now_ms)
    }

    /// Why a pending job cannot be placed now, in kube-scheduler's words: the job as a
    /// whole when the head of its strict FIFO queue, a PreFilter or its tenant's quota
    /// holds it, else node by node.
    pub fn diagnose(&self, job: JobId, now_ms: u64) -> Option<Diagnosis> {
        let waiting = self.queues.waiting().find(|w| w.job.id == job)?;
        let (job, tenant) = (waiting.job, waiting.tenant);
        if self.profile.queueing == QueueingPolicy::StrictFifo && !waiting.unresolvable {
            // Nothing behind a blocked head is tried: the head is the reason. (The head is
            // the queue's first job not found unresolvable; an unresolvable one blocks
            // nothing and has its own reason.)
            let head = self
                .queues
                .waiting()
                .find(|w| w.tenant == tenant && !w.unresolvable)
                .filter(|head| head.job.id != job.id);
            if let Some(head) = head {
                return Some(Diagnosis::job_level(Status::unschedulable(format!(
                    "waiting behind {} at the head of tenant {}'s queue (strict FIFO)",
                    head.job.name,
                    self.tenants.name(tenant)
                ))));
            }
        }
        let gpus = job.total_milli() as f64 / f64::from(MILLI_PER_GPU);
        let mut cycle = CycleState::new(now_ms);
        for plugin in &self.profile.pre_filters {
            let status = plugin.pre_filter(job, &self.state, &mut cycle);
            if status.code == Code::UnschedulableAndUnresolvable {
                return Some(Diagnosis::job_level(status));
            }
        }
        if job.pods.len() > 1 {
            let judged = self.reaches.get(&job.id).cloned();
            let reach = judged.unwrap_or_else(|| Arc::new(self.judge_reach(job, tenant, &cycle)));
            if let Some(never) = &reach.never {
                return Some(Diagnosis::job_level(never.clone()));
            }
        }
        if !self.tenants.could_ever_admit(tenant, job) {
            let ceilings = self.tenants.ceilings(tenant, job, self.state.spec());
            let message = format!(
                "the job needs {gpus} GPUs: more than tenant {} can ever have ({ceilings})",
                self.tenants.name(tenant)
            );
            return Some(Diagnosis::job_level(Status::unresolvable(message)));
        }
        // A shared tenant denied admission lacks room the nodes explain; an isolated one
        // waits for its own quota.
        let isolated = self.tenants.mode(tenant) == TenantMode::Isolated;
        if isolated && self.tenants.admit(tenant, job) == Admission::Denied {
            let message = format!(
                "the job needs {gpus} GPUs: more than is free now of isolated tenant {}'s quota",
                self.tenants.name(tenant)
            );
            return Some(Diagnosis::job_level(Status::unschedulable(message)));
        }
        Some(diagnose(&self.profile, job, &self.state, &cycle))
    }
}

/// The job (of `milli` milli-GPUs in all) as static quota admission lets it be searched,
/// or `None` where it is denied. Its GPU pods all land in one pool, so a job accepting
/// several GPU models keeps only the pools where its tenant's quota, or what it may
/// borrow, covers it whole.
fn admitted_job(
    job: &Arc<Job>,
    milli: u64,
    tenant: usize,
    tenants: &Tenants,
    state: &ClusterState,
) -> Option<Arc<Job>> {
    if tenants.admit_milli(tenant, job, milli) == Admission::Denied {
        return None;
    }
    let pools = pools_for(job, state);
    if pools.len() <= 1 || pools.iter().all(|&p| tenants.admits_on(tenant, job, p)) {
        return Some(job.clone());
    }
    let admitted = pools
        .iter()
        .copied()
        .filter(|&p| tenants.admits_on(tenant, job, p))
        .collect();
    Some(Arc::new(Job {
        pools: admitted,
        ..(**job).clone()
    }))
}

/// How a job the world found placed takes part in scheduling ([`Scheduler::adopt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adopted {
    /// Running, charged to its tenant; a victim only if `preemptible`.
    Running { preemptible: bool },
    /// On its way out (evicted, terminating): it holds its devices until its pods are
    /// gone, is charged to no tenant and is never a victim.
    Terminating,
}

/// What [`Scheduler::set_cluster`] had to give up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reshaped {
    /// Bound pods whose node is gone or can no longer hold them: forgotten.
    pub lost_bound: Vec<PodKey>,
    /// Jobs with a reserved pod on such a node: released whole and requeued with backoff.
    pub requeued: Vec<JobId>,
}

/// What asking for preemption came to.
enum Preempted {
    /// Victims went; `compactly`: found for a placement inside one domain of the job's
    /// tightest tier, which the job's placement then seeks first (see
    /// [`Scheduler::preempt`]).
    Evicted {
        compactly: bool,
    },
    /// Nothing now; victims become available at `retry_at`. `awaits_until`: a backfill
    /// head awaits the jobs that overtook it until then (`PostFilterResult::AwaitsVictims`).
    RetryAt {
        retry_at: u64,
        awaits_until: Option<u64>,
    },
    Nothing,
}

/// What the scheduler itself writes into a job's cycle state, kept so that the cycle can
/// be prepared again on another state: preemption judges the state without its victims,
/// and what PreFilter gathered from the placed pods (inter-pod rules) changes with them.
#[derive(Clone)]
struct CycleInputs {
    now_ms: u64,
    tight_since: Option<u64>,
    /// A gang seeking victims compactly ([`WithinTightestTier`]).
    within_tightest_tier: bool,
    /// For a gang, what its usable nodes could ever hold.
    reach: Option<Arc<Reach>>,
    /// Sorted.
    held: Vec<GroupId>,
    /// For a job asking no GPU, sorted by group.
    held_for_gpu_pods: Vec<(GroupId, Arc<[PodRequest]>)>,
}

impl CycleInputs {
    fn write(&self, cycle: &mut CycleState) {
        if let Some(since) = self.tight_since {
            cycle.write(TightWaitSince(since));
        }
        if self.within_tightest_tier {
            cycle.write(WithinTightestTier);
        }
        if let Some(reach) = &self.reach {
            cycle.write(ReachOf(reach.clone()));
        }
        if !self.held.is_empty() {
            cycle.write(HeldGroups(self.held.clone()));
        }
        if !self.held_for_gpu_pods.is_empty() {
            cycle.write(HeldForGpuPods(self.held_for_gpu_pods.clone()));
        }
    }

    /// These inputs for a gang seeking victims compactly ([`WithinTightestTier`]).
    fn within_tightest_tier(&self) -> CycleInputs {
        CycleInputs {
            within_tightest_tier: true,
            ..self.clone()
        }
    }

    /// The job's placement on `state`, PreFilter run afresh on it; `None` when a PreFilter
    /// refuses or the search finds nothing.
    fn place(&self, profile: &Profile, job: &Job, state: &ClusterState) -> Option<Found> {
        let mut cycle = CycleState::new(self.now_ms);
        for plugin in &profile.pre_filters {
            match plugin.pre_filter(job, state, &mut cycle).code {
                Code::Success | Code::Skip => {}
                _ => return None,
            }
        }
        self.write(&mut cycle);
        place_job(profile, job, state, &cycle)
    }
}

fn empty_queues(profile: &Profile, tenants: usize) -> Queues {
    Queues::new(
        profile.queueing,
        profile.queue_sort.clone(),
        profile.queue_settings.backfill_threshold,
        tenants,
    )
}

/// The scheduler as the queues see it during one round.
struct Round<'a> {
    scheduler: &'a mut Scheduler,
    now_ms: u64,
}

impl Driver for Round<'_> {
    fn share(&self, tenant: usize) -> f64 {
        self.scheduler.tenants.share(tenant)
    }

    fn head_quota(
        &self,
        tenant: usize,
        head: &Job,
        head_blocked_since: u64,
    ) -> Option<(HeadQuota, Vec<PoolId>)> {
        let scheduler = &self.scheduler;
        let tenants = &scheduler.tenants;
        if tenants.mode(tenant) != TenantMode::Isolated {
            return None;
        }
        let spec = scheduler.state.spec();
        let shape = JobShape::of(head);
        let pools: Vec<PoolId> = (pools_for(head, &scheduler.state).iter().copied())
            .filter(|&pool| tenants.could_ever_admit_on(tenant, head, pool))
            .filter(|&pool| shape.fits(&spec.pool(pool).node_sizes))
            .collect();
        if pools.is_empty() {
            return None;
        }
        let need = head.total_milli();
        // Whether the quota falls short of the head on a pool (it lands in one) beside what
        // the jobs that did not overtake it hold there.
        let short = |pool: PoolId, overtaken: u64| {
            let (quota, used) = (tenants.quota(tenant, pool), tenants.used(tenant, pool));
            used.saturating_sub(overtaken) + need > quota
        };
        if !pools.iter().all(|&pool| short(pool, 0)) {
            return Some((HeadQuota::Covers, pools));
        }
        // Where nothing would evict what overtook the head, it keeps the quota until it ends.
        if scheduler.profile.post_filters.is_empty() || !head.may_preempt {
            return Some((HeadQuota::Gathers, pools));
        }
        let overtaken = |pool: PoolId| {
            (scheduler.running.values())
                .filter(|r| r.tenant == tenant && !r.terminating)
                .filter(|r| r.overtook(head, head_blocked_since))
                .map(|r| r.held_on(pool))
                .sum::<u64>()
        };
        let gathering: Vec<PoolId> = (pools.iter().copied())
            .filter(|&pool| !short(pool, overtaken(pool)))
            .collect();
        Some(match gathering.is_empty() {
            true => (HeadQuota::Lends, pools),
            false => (HeadQuota::Gathers, gathering),
        })
    }

    fn passes_head(
        &self,
        tenant: usize,
        head: &Job,
        quota: HeadQuota,
        pools: &[PoolId],
        job: &Job,
    ) -> bool {
        let scheduler = &self.scheduler;
        match quota {
            HeadQuota::Covers => {
                let tenants = &scheduler.tenants;
                let need = head.total_milli() + job.total_milli();
                (pools.iter())
                    .any(|&pool| tenants.used(tenant, pool) + need <= tenants.quota(tenant, pool))
            }
            HeadQuota::Lends => {
                let exempt = scheduler.evicted_as_backfilled.contains(&job.id);
                overtakes(job, exempt, head)
            }
            HeadQuota::Gathers => false,
        }
    }

    fn admission_room(&self, tenant: usize) -> Option<Room> {
        // A job admission denies may still make room by preemption (`attempt`): a backfill
        // head, and with priority and quota-reclaim preemption a job that outranks a
        // running one or whose tenant may reclaim quota.
        let scheduler = &self.scheduler;
        let post_filters = &scheduler.profile.post_filters;
        let cluster = scheduler.state.total();
        let mut room = Room::new(
            scheduler.tenants.admission_room(tenant),
            FreeNodes::new(u64::from(cluster.free_gpus), cluster.free_histogram),
        );
        // The two-level search keeps a job out of room held for heads of its priority or
        // higher (the flat search holds nothing).
        let lowest_head_priority = (scheduler.reservations.iter())
            .map(|r| r.head.priority)
            .min()
            .filter(|_| scheduler.profile.search == SearchMode::TwoLevel);
        if let Some(priority) = lowest_head_priority {
            let (mut gpus, mut histogram) = (cluster.free_gpus, cluster.free_histogram);
            // Reservations never overlap.
            for &group in scheduler.reservations.iter().flat_map(|r| &r.groups) {
                let held = scheduler.state.group(group);
                gpus = gpus.saturating_sub(held.free_gpus);
                for (nodes, held) in histogram.iter_mut().zip(held.free_histogram) {
                    *nodes = nodes.saturating_sub(held);
                }
            }
            room = room.with_holds(FreeNodes::new(u64::from(gpus), histogram), priority);
        }
        Some(if post_filters.is_empty() {
            room
        } else if post_filters.iter().all(|p| p.for_backfill_heads_only()) {
            room.with_heads_making_room()
        } else {
            room.with_preemption(PreemptionReach {
                lowest_running: scheduler.running_priorities.keys().next().copied(),
                reclaims: scheduler.tenants.may_reclaim(tenant),
            })
        })
    }

    fn holds_given_back(&self) -> u64 {
        self.scheduler.holds_given_back
    }

    fn kept_out_of_holds(&mut self) {
        // Such a job is of no higher priority than any head holding: each kept it out.
        for reservation in &mut self.scheduler.reservations {
            reservation.kept_out = true;
        }
    }

    fn attempt(&mut self, offer: Offer) -> Attempted {
        self.scheduler.cycle(offer, self.now_ms)
    }
}

/// The nodes of each topology domain, by key and value, indexed as keys are first asked
/// for: a pod with anti-affinity leaving opens whole domains, which are read here rather
/// than found by reading every node.
#[derive(Default)]
struct DomainIndex {
    by_key: HashMap<String, HashMap<String, Vec<NodeId>>>,
}

impl DomainIndex {
    /// The nodes sharing a domain with one of `nodes` under the topology key of one of
    /// `terms` (a node without the key's label is in no domain of it), in order, once each.
    fn nodes_in_domains(
        &mut self,
        spec: &ClusterSpec,
        terms: &[PodAffinityTerm],
        nodes: &[NodeId],
    ) -> Vec<NodeId> {
        let mut opened = Vec::new();
        for term in terms {
            let key = term.topology_key.as_str();
            let domains = self.by_key.entry(key.to_owned()).or_insert_with(|| {
                let mut domains: HashMap<String, Vec<NodeId>> = HashMap::new();
                for (node, index) in spec.nodes.iter().zip(0..) {
                    if let Some(value) = node.labels.get(key) {
                        domains
                            .entry(value.clone())
                            .or_default()
                            .push(NodeId(index));
                    }
                }
                domains
            });
            let mut values: Vec<&String> = (nodes.iter())
                .filter_map(|&n| spec.node(n).labels.get(key))
                .collect();
            values.sort_unstable();
            values.dedup();
            for value in values {
                opened.extend_from_slice(&domains[value]);
            }
        }
        opened.sort_unstable();
        opened.dedup();
        opened
    }

    /// The cluster changed shape: every domain is indexed again.
    fn clear(&mut self) {
        self.by_key.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClusterSpecBuilder, LinkProfile, Namespaces, NodeRow};

    fn keyed(topology_key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            selector: Some(Vec::new()),
            namespaces: Namespaces::All,
            topology_key: topology_key.into(),
        }
    }

    #[test]
    fn a_leaving_pods_anti_affinity_opens_every_node_of_its_domains() {
        let mut b = ClusterSpecBuilder::new();
        for (name, zone) in [
            ("n0", Some("a")),
            ("n1", Some("b")),
            ("n2", Some("a")),
            ("n3", None),
        ] {
            let mut labels: crate::model::Labels = [("host".to_owned(), name.to_owned())].into();
            if let Some(zone) = zone {
                labels.insert("zone".into(), zone.into());
            }
            let row = NodeRow {
                name: name.into(),
                gpu_model: Some("H100".into()),
                gpus: 8,
                labels,
                ..Default::default()
            };
            b.add(row, LinkProfile::NvlinkAll).unwrap();
        }
        let spec = b.build();
        let nodes = |ids: &[u32]| ids.iter().map(|&i| NodeId(i)).collect::<Vec<_>>();
        let mut index = DomainIndex::default();
        let mut nodes_in_domains =
            |terms: &[PodAffinityTerm], left: &[NodeId]| index.nodes_in_domains(&spec, terms, left);
        // One value per node: the node alone.
        assert_eq!(
            nodes_in_domains(&[keyed("host")], &nodes(&[1])),
            nodes(&[1])
        );
        // A zone: every node in it, once.
        let zone = [keyed("zone"), keyed("host")];
        assert_eq!(nodes_in_domains(&zone, &nodes(&[0, 2])), nodes(&[0, 2]));
        assert_eq!(nodes_in_domains(&zone, &nodes(&[2, 3])), nodes(&[0, 2, 3]));
        // A node without the key's label is in no domain of it.
        assert_eq!(nodes_in_domains(&[keyed("zone")], &nodes(&[3])), nodes(&[]));
    }
}
