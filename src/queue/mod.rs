//! QSCH, the queue side: which pending job may try for resources, and when. One queue per
//! tenant in QueueSort order; across tenants, the one furthest below its weighted quota
//! share is served next; inside a queue, the queueing policy decides what happens behind a
//! head that cannot be placed. It never looks at nodes (that is the framework's search).
//!
//! A job that failed is not tried again until capacity has been freed since (feasibility
//! only grows when resources are returned), or until a time it asked for, which keeps a
//! long backlog cheap. Once capacity is freed, a job that asks for more than admission
//! could grant its tenant now (quota, free GPUs, free nodes for its pods, counting only
//! the nodes outside room held for backfill heads where it is kept out of that room)
//! fails without being offered. Each queue sums up its jobs chunk by chunk (`pending`), so
//! a round over a deep backlog reads the chunks and the jobs worth trying, not every job.
//! A requeued job waits out its backoff before it is tried again.

mod pending;
mod tenants;

use std::sync::Arc;

use pending::{Cursor, Pending, RoundView, TenantQueue};
pub use tenants::{
    Admission, DEFAULT_TENANT, MAX_QUOTA_GPUS, MAX_TENANTS, Oversubscribed, TenantConfig,
    TenantMode, Tenants,
};

use crate::framework::QueueSort;
use crate::model::{Job, JobId, MAX_GPUS_PER_NODE, PodWidths, PoolId, pods_that_fit};

/// What happens behind a job that cannot be placed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum QueueingPolicy {
    /// Nothing behind a blocked head is placed.
    StrictFifo,
    /// Later jobs that fit go ahead of a blocked head.
    BestEffortFifo,
    /// As best-effort, but the first job blocked past the backfill threshold becomes the
    /// head: once its pools have room enough free, that room is held for it (no job of
    /// lower or equal priority is placed there); short of room, it is made, with
    /// `backfill-preemption` or `preemption`, by preempting the jobs placed after it
    /// blocked, and without either the head waits as under best-effort. An isolated
    /// tenant's later jobs may wait behind its head for its quota ([`HeadQuota`]).
    Backfill,
}

/// What an isolated tenant's quota does for its overdue backfill head
/// ([`Driver::head_quota`]), judged on the pools it could ever admit the head on whose
/// nodes could hold the head's pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadQuota {
    /// It covers the head on one of them: the head waits for room, and the tenant's later
    /// jobs take only what leaves it covered.
    Covers,
    /// It gathers for the head: the tenant's later jobs that could use those pools wait.
    /// Where nothing would evict what overtook the head (no preemption, or a head that may
    /// not preempt), as soon as it falls short of the head; where the head may evict those
    /// jobs, on the pools where they are all that keep it out.
    Gathers,
    /// It falls short of the head on every one of them beside the jobs that did not
    /// overtake it (older than the head, say): the tenant's later jobs that the head could
    /// evict as backfilled take what the head could not have yet; the others wait.
    Lends,
}

/// An isolated tenant's overdue backfill head, and what its quota does for it.
struct HeadHold {
    head: Arc<Job>,
    quota: HeadQuota,
    pools: Vec<PoolId>,
}

/// A pending job as [`Queues::waiting`] lists it.
pub struct Waiting<'a> {
    pub job: &'a Arc<Job>,
    pub tenant: usize,
    /// When it first failed to place; `None` if it was never tried.
    pub blocked_since: Option<u64>,
    /// Its last attempt found that the cluster as it is can never hold it.
    pub unresolvable: bool,
}

/// The pools a tenant's waiting jobs asking for GPUs may use, as a mask that may name
/// more pools than they do, never fewer (bit 63 stands for every pool past 62 as well).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolsWanted(u64);

impl PoolsWanted {
    /// Whether some waiting job may want GPUs of `pool`.
    pub fn may_want(self, pool: PoolId) -> bool {
        self.0 & 1 << pool.index().min(63) != 0
    }

    /// Counts `job` as waiting too.
    pub fn add(&mut self, job: &Job) {
        if job.total_milli() > 0 {
            self.0 |= pool_mask(&job.pools);
        }
    }
}

/// What the scheduler did with the job the queue offered.
pub enum Attempted {
    Placed,
    /// Not now; under strict FIFO it blocks the jobs behind it. It is tried again when
    /// capacity is freed, or at `retry_at` on the world's clock.
    Failed {
        retry_at: Option<u64>,
    },
    /// Can never be placed as the cluster and the tenants are (no pool could hold it, or
    /// no quota admit it): it waits, blocks no one, and is not offered again until
    /// [`Queues::forget_failures`] says they changed.
    Unresolvable,
    /// Its binding failed: it is not tried again before `until`.
    Backoff {
        until: u64,
    },
}

/// What a job asks for, as admission weighs it.
#[derive(Debug, Clone, Copy, Default)]
struct Need {
    /// Milli-GPUs in all (its quota).
    milli: u64,
    /// Whole GPUs in all.
    whole: u64,
    /// Pods of `width` whole GPUs each that must find room on nodes at once: all of them
    /// when they ask for the same whole GPUs, else the widest alone (0 wide, which any
    /// room holds, for a job of fractions; nothing at all for a job asking for no GPU).
    pods: u64,
    width: u32,
    /// The job's priority, where it may preempt (`None`: it never does).
    preempts_at: Option<i32>,
    /// The job's priority: room held for a backfill head of this priority or higher is
    /// not its to use.
    priority: i32,
    /// It was offered as a backfill head, so room may be held for it: room held is then
    /// not judged out of its reach.
    held_for: bool,
}

impl Need {
    fn of(job: &Job) -> Need {
        let milli = job.total_milli();
        if milli == 0 {
            // Admission never refuses a job asking for no GPU.
            return Need::default();
        }
        let widths = PodWidths::of(job);
        Need {
            milli,
            whole: widths.whole_gpus,
            // Pods that differ, or ask for fractions: a node with room for the widest.
            pods: widths.uniform_whole.map_or(1, |_| widths.pods),
            width: widths.widest_whole,
            preempts_at: job.may_preempt.then_some(job.priority),
            priority: job.priority,
            held_for: false,
        }
    }

    /// Part by part, the lesser of two needs: admission refuses it only if it refuses
    /// both (fewer pods, or narrower ones, fit at least as easily).
    fn least(&self, other: &Need) -> Need {
        Need {
            milli: self.milli.min(other.milli),
            whole: self.whole.min(other.whole),
            pods: self.pods.min(other.pods),
            width: self.width.min(other.width),
            // A higher priority may preempt more, and is kept out of less held room.
            preempts_at: self.preempts_at.max(other.preempts_at),
            priority: self.priority.max(other.priority),
            held_for: self.held_for || other.held_for,
        }
    }
}

/// Where priority and quota-reclaim preemption are on: which jobs of a tenant could
/// preempt to make the room admission finds missing.
#[derive(Debug, Clone, Copy)]
pub struct PreemptionReach {
    /// The lowest priority of a running job: a job of a higher one may preempt it.
    pub lowest_running: Option<i32>,
    /// Whether the tenant may reclaim quota: it is below its quota on a pool where another
    /// tenant borrows.
    pub reclaims: bool,
}

impl PreemptionReach {
    fn may_make_room(&self, need: &Need) -> bool {
        need.preempts_at.is_some_and(|priority| {
            self.reclaims || self.lowest_running.is_some_and(|lowest| lowest < priority)
        })
    }
}

/// What admission could grant a tenant now, over all pools, and what the free nodes could
/// hold: a job asking for more of any part fails at once, as static or dynamic admission,
/// or the search, would fail it.
#[derive(Debug, Clone, Copy)]
pub struct Room {
    /// Milli-GPUs its quota, or what it may borrow, still covers.
    quota_milli: u64,
    /// Free whole GPUs on every node.
    free: FreeNodes,
    /// Where room is held for backfill heads: the free whole GPUs outside the held groups,
    /// and the lowest priority of a head holding. A job of no higher priority asking for
    /// GPUs, never offered as a head, is kept out of every held group (the two-level search
    /// passes them by), so this is all it could use.
    outside_holds: Option<(FreeNodes, i32)>,
    /// Whether a backfill head may make room by preemption: admission then refuses it
    /// nothing, as its victims may free what it lacks.
    heads_make_room: bool,
    /// With priority and quota-reclaim preemption, the jobs admission refuses nothing
    /// either.
    preemption: Option<PreemptionReach>,
}

/// Free whole GPUs on a set of nodes.
#[derive(Debug, Clone, Copy)]
pub struct FreeNodes {
    /// In all.
    gpus: u64,
    /// `histogram[k]`: nodes with exactly `k` free.
    histogram: [u32; MAX_GPUS_PER_NODE + 1],
    /// The most on one node.
    widest_node: u32,
}

impl FreeNodes {
    pub fn new(gpus: u64, histogram: [u32; MAX_GPUS_PER_NODE + 1]) -> FreeNodes {
        let widest_node = histogram.iter().rposition(|&n| n > 0).unwrap_or(0) as u32;
        FreeNodes {
            gpus,
            histogram,
            widest_node,
        }
    }

    /// Whether these nodes could hold the whole GPUs `need` asks for, and, unless for a
    /// backfill head (for which room is held in the shape it needs), its pods of its width.
    fn could_hold(&self, need: &Need, head: bool) -> bool {
        let within_nodes = need.width <= self.widest_node
            && (need.pods <= 1 || pods_that_fit(&self.histogram, need.width) >= need.pods);
        need.whole <= self.gpus && (head || within_nodes)
    }
}

impl Room {
    pub fn new(quota_milli: u64, free: FreeNodes) -> Room {
        Room {
            quota_milli,
            free,
            outside_holds: None,
            heads_make_room: false,
            preemption: None,
        }
    }

    /// The same room where room is held for backfill heads: `outside` is what the nodes
    /// outside every held group have free, `lowest_head_priority` the lowest priority of a
    /// head holding.
    pub fn with_holds(self, outside: FreeNodes, lowest_head_priority: i32) -> Room {
        Room {
            outside_holds: Some((outside, lowest_head_priority)),
            ..self
        }
    }

    /// The same room where a backfill head may make room by preemption.
    pub fn with_heads_making_room(self) -> Room {
        Room {
            heads_make_room: true,
            ..self
        }
    }

    /// The same room where priority and quota-reclaim preemption may make room too, for
    /// backfill heads and for the jobs `reach` tells.
    pub fn with_preemption(self, reach: PreemptionReach) -> Room {
        Room {
            preemption: Some(reach),
            ..self.with_heads_making_room()
        }
    }

    /// Whether admission refuses a job asking for `need`: more than its quota covers,
    /// more free GPUs than there are, or more pods of its width than the free nodes hold
    /// (for a job of one pod, or of pods that differ, a node with room for the widest),
    /// counting only nodes outside held groups for a job kept out of them. A backfill
    /// head is judged on its quota and the free GPUs alone, as the scheduler holds room
    /// for it in the shape it needs, and not at all where it may preempt.
    fn refuses(&self, need: &Need, head: bool) -> bool {
        let free = match &self.outside_holds {
            Some((outside, priority)) if !head && !need.held_for && need.priority <= *priority => {
                outside
            }
            _ => &self.free,
        };
        self.refuses_on(free, need, head)
    }

    /// Whether admission would refuse a job asking for `need` if no room were held for
    /// backfill heads.
    fn refuses_ignoring_holds(&self, need: &Need, head: bool) -> bool {
        self.refuses_on(&self.free, need, head)
    }

    fn refuses_on(&self, free: &FreeNodes, need: &Need, head: bool) -> bool {
        if head && self.heads_make_room {
            return false;
        }
        let short = need.milli > self.quota_milli || !free.could_hold(need, head);
        short
            && !self
                .preemption
                .is_some_and(|reach| reach.may_make_room(need))
    }
}

#[cfg(test)]
impl Room {
    /// The room of nodes with these free whole GPUs.
    pub(crate) fn of_nodes(quota_milli: u64, free_per_node: &[u32]) -> Room {
        let mut free_histogram = [0; MAX_GPUS_PER_NODE + 1];
        for &free in free_per_node {
            free_histogram[free as usize] += 1;
        }
        let free_gpus = free_per_node.iter().map(|&f| u64::from(f)).sum();
        Room::new(quota_milli, FreeNodes::new(free_gpus, free_histogram))
    }
}

/// A job the queue offers, with what the policy allows for it.
pub struct Offer<'a> {
    pub job: &'a Arc<Job>,
    /// The job's milli-GPUs in all (its quota), summed once.
    pub milli: u64,
    pub tenant: usize,
    /// Set for the backfill head of a queue (its first job blocked past the threshold):
    /// since when it is blocked. The scheduler holds room for it once enough is free (or
    /// while it awaits jobs that overtook it, inside their minimum runtime), and may
    /// preempt jobs placed after that time.
    pub backfill_since: Option<u64>,
    /// Since when the job has been blocked (its first failed try), if it has.
    pub blocked_since: Option<u64>,
}

/// The scheduler, as the queue sees it during a round.
pub trait Driver {
    /// The tenant's use against its weighted quota share (lower is served first).
    fn share(&self, tenant: usize) -> f64;
    /// What the tenant's quota does for its backfill head `head`, blocked since
    /// `head_blocked_since`, and on which pools (an empty list: every pool); `None`:
    /// nothing (the tenant's quota is not its alone: only an isolated tenant's own later
    /// jobs compete with its head for its quota). Asked once a round.
    fn head_quota(
        &self,
        tenant: usize,
        head: &Job,
        head_blocked_since: u64,
    ) -> Option<(HeadQuota, Vec<PoolId>)>;
    /// Whether the tenant's later job `job`, which may use the pools `pools` the quota
    /// `covers` or `lends` its head on, may go now: where it covers the head, if the head
    /// stays covered beside the job on one of them; where it lends, if the head could evict
    /// the job as backfilled.
    fn passes_head(
        &self,
        tenant: usize,
        head: &Job,
        quota: HeadQuota,
        pools: &[PoolId],
        job: &Job,
    ) -> bool;
    /// What admission could grant a job of the tenant now: a job that asks for more cannot
    /// be placed before capacity is freed, and fails as admission fails it (`Failed`, no
    /// retry time) without being offered; the room says which jobs preemption may still
    /// make room for. `None` when the driver cannot tell: every job is offered.
    fn admission_room(&self, tenant: usize) -> Option<Room>;
    /// Jobs were refused for room held for backfill heads, as if each had tried and been
    /// kept out of it: what is held is capacity freed for them once it is given back.
    fn kept_out_of_holds(&mut self);
    /// Counts the times room held for backfill heads was given back: what
    /// `admission_room` told a job kept out of it may have grown since.
    fn holds_given_back(&self) -> u64;
    fn attempt(&mut self, offer: Offer) -> Attempted;
}

/// The pending jobs, one queue per tenant, each in QueueSort order.
pub struct Queues {
    policy: QueueingPolicy,
    sort: Arc<dyn QueueSort>,
    backfill_threshold_ms: u64,
    queues: Vec<TenantQueue>,
    /// Tests read every chunk, to compare with rounds that pass chunks by.
    #[cfg(test)]
    read_every_chunk: bool,
}

impl Queues {
    pub fn new(
        policy: QueueingPolicy,
        sort: Arc<dyn QueueSort>,
        backfill_threshold_ms: u64,
        tenants: usize,
    ) -> Self {
        Self {
            policy,
            sort,
            backfill_threshold_ms,
            queues: (0..tenants).map(|_| TenantQueue::default()).collect(),
            #[cfg(test)]
            read_every_chunk: false,
        }
    }

    #[cfg(not(test))]
    fn reads_every_chunk(&self) -> bool {
        false
    }

    #[cfg(test)]
    fn reads_every_chunk(&self) -> bool {
        self.read_every_chunk
    }

    /// Pending jobs in all.
    pub fn len(&self) -> usize {
        self.queues.iter().map(TenantQueue::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pending jobs of one tenant.
    pub fn pending(&self, tenant: usize) -> usize {
        self.queues.get(tenant).map_or(0, TenantQueue::len)
    }

    /// Per tenant, the pools its waiting jobs asking for GPUs may use.
    pub fn pools_wanted(&self) -> Vec<PoolsWanted> {
        (self.queues.iter())
            .map(|queue| PoolsWanted(queue.gpu_pools()))
            .collect()
    }

    /// Adds a job to its tenant's queue in QueueSort order, not to be tried before
    /// `not_before`.
    pub fn push(&mut self, job: Arc<Job>, tenant: usize, not_before: u64) {
        self.queues[tenant].push(Pending::new(job, not_before), &*self.sort);
    }

    /// The pending jobs with their tenant and, for those that failed to place, since when
    /// they are blocked.
    pub fn waiting(&self) -> impl Iterator<Item = Waiting<'_>> {
        self.queues.iter().enumerate().flat_map(|(tenant, queue)| {
            queue.iter().map(move |p| Waiting {
                job: &p.job,
                tenant,
                blocked_since: p.blocked_since,
                unresolvable: p.unresolvable,
            })
        })
    }

    /// Takes a job out of its queue (its pods are gone, or placed by someone else).
    pub fn remove(&mut self, job: JobId) -> Option<(Arc<Job>, usize)> {
        self.queues
            .iter_mut()
            .enumerate()
            .find_map(|(tenant, queue)| Some((queue.remove(job)?.job, tenant)))
    }

    /// The time before which a pending job is not tried (its backoff, after a binding
    /// failed).
    pub fn not_before(&self, job: JobId) -> Option<u64> {
        (self.queues.iter())
            .find_map(|queue| queue.iter().find(|p| p.job.id == job))
            .map(|p| p.not_before)
    }

    /// The cluster or the tenants changed shape: what the jobs learned from failing no
    /// longer holds (a job could have become impossible, or possible), so each is offered
    /// in full again.
    pub fn forget_failures(&mut self) {
        for queue in &mut self.queues {
            queue.forget_failures();
        }
    }

    /// Moves every queue to a new tenant numbering: `map[old]` is the new index of tenant
    /// `old`, and there are `tenants` queues after. Queues that land on one tenant merge in
    /// QueueSort order; what each job learned of its past attempts is kept.
    pub fn renumber(&mut self, map: &[usize], tenants: usize) {
        let renumbered = (0..tenants).map(|_| TenantQueue::default()).collect();
        let old = std::mem::replace(&mut self.queues, renumbered);
        for (from, mut queue) in old.into_iter().enumerate() {
            let to = map.get(from).copied().unwrap_or(0);
            for pending in queue.take_all() {
                self.queues[to].push(pending, &*self.sort);
            }
        }
    }

    /// The earliest time a pending job asked to be tried again although nothing was freed
    /// since it failed at capacity `epoch`: a retry time, or the end of a backoff.
    pub fn next_retry_ms(&self, epoch: u64, now_ms: u64) -> Option<u64> {
        let retries = self
            .queues
            .iter()
            .filter_map(|q| q.next_wakeup(epoch, now_ms));
        let backfill = (self.policy == QueueingPolicy::Backfill)
            .then(|| {
                (self.queues.iter())
                    .filter_map(|q| q.next_backfill_deadline(self.backfill_threshold_ms, now_ms))
            })
            .into_iter()
            .flatten();
        retries.chain(backfill).min()
    }

    /// One round at capacity `epoch` and time `now_ms`: offers the jobs worth trying to
    /// the driver, serving next the tenant furthest below its share, each queue as the
    /// policy allows. Placed jobs leave their queue.
    pub fn run(&mut self, epoch: u64, now_ms: u64, driver: &mut dyn Driver) {
        let strict = self.policy == QueueingPolicy::StrictFifo;
        let backfill = self.policy == QueueingPolicy::Backfill;
        let read_all = strict || self.reads_every_chunk();
        let tenants = self.queues.len();
        let mut cursor = vec![Cursor::default(); tenants];
        let mut done: Vec<bool> = self.queues.iter().map(|q| q.len() == 0).collect();
        let mut head_taken = vec![false; tenants];
        // Per tenant whose quota is its own, what it does for its backfill head, and on
        // which pools (`Driver::head_quota`): where it gathers, nothing behind the head that
        // could use them is placed. A shared tenant's later jobs compete with its head only
        // for room, as every other tenant's do, and the scheduler holds room for the head.
        // `None`: nothing held.
        let mut held: Vec<Option<HeadHold>> = (0..tenants).map(|_| None).collect();
        // Per tenant, what admission could grant it, as last asked: asked again after a
        // placement, or after room held for backfill heads was given back. A job that fails changes nothing, but for a preemptor in a live
        // cluster, which fails until its victims are gone: what their going changes in the
        // tenants' accounts is read at the next round.
        let mut rooms: Vec<Option<Option<Room>>> = vec![None; tenants];
        // The tenants' shares, as last asked: only an attempt changes them.
        let mut shares: Option<Vec<f64>> = None;
        loop {
            let shares_now =
                shares.get_or_insert_with(|| (0..tenants).map(|t| driver.share(t)).collect());
            let Some(tenant) = (0..tenants)
                .filter(|&t| !done[t])
                .min_by(|&a, &b| shares_now[a].total_cmp(&shares_now[b]))
            else {
                break;
            };
            let queue = &mut self.queues[tenant];
            // Chunks that hold no job worth trying are passed by unread; strict FIFO reads
            // every job, as the first that waits ends its queue's turn.
            let view = RoundView {
                epoch,
                now_ms,
                head_blocked_by: (backfill && !head_taken[tenant])
                    .then(|| now_ms.checked_sub(self.backfill_threshold_ms))
                    .flatten(),
                // Chunks are passed by for the jobs the quota gathering keeps out alone.
                held: (held[tenant].as_ref())
                    .filter(|hold| hold.quota == HeadQuota::Gathers)
                    .map(|hold| held_pool_mask(&hold.pools)),
            };
            let room = &mut rooms[tenant];
            let next = queue.next(cursor[tenant], |summary| {
                if read_all {
                    return true;
                }
                // Chunks kept out of held room only are read: a job kept out that would be
                // offered is told so (`kept_out_of_holds`), as if it had tried.
                let room = room.get_or_insert_with(|| driver.admission_room(tenant));
                summary.worth_a_look(&view, room.as_ref())
            });
            let Some(at) = next else {
                done[tenant] = true;
                continue;
            };
            cursor[tenant] = queue.after(at);
            let entry = queue.entry(at);
            if let Some(hold) = &held[tenant] {
                // A job asking for no GPUs takes none of the quota the head waits for.
                let competes = entry.asks_gpus()
                    && (hold.pools.is_empty()
                        || entry.job.pools.is_empty()
                        || entry.job.pools.iter().any(|p| hold.pools.contains(p)));
                let passes = || {
                    hold.quota != HeadQuota::Gathers
                        && driver.passes_head(
                            tenant,
                            &hold.head,
                            hold.quota,
                            &hold.pools,
                            &entry.job,
                        )
                };
                if competes && !passes() {
                    continue;
                }
            }
            let due = entry.retry_at.is_some_and(|t| t <= now_ms);
            // The first job of the queue blocked past the threshold is its backfill head;
            // one known to be unresolvable makes room for no one, and is passed over.
            let known_unresolvable = entry.unresolvable && entry.failed_at.is_some();
            let overdue = backfill
                && !head_taken[tenant]
                && !known_unresolvable
                && entry.blocked_since.is_some_and(|since| {
                    now_ms >= since.saturating_add(self.backfill_threshold_ms)
                });
            head_taken[tenant] |= overdue;
            // A head whose try for room failed waits for the capacity to change, or for the
            // retry it asked for (a victim's minimum runtime ending): it is a head then too.
            let backfill_since = entry
                .blocked_since
                .filter(|_| overdue && (entry.backfill_failed_at != Some(epoch) || due));
            // A job found unresolvable stays so until the cluster or the tenants change shape
            // (`forget_failures`): what it lacks no placement or completion brings.
            let waiting = now_ms < entry.not_before
                || known_unresolvable
                || (entry.failed_at == Some(epoch) && !due && backfill_since.is_none());
            if let Some(since) = entry.blocked_since.filter(|_| overdue)
                && !entry.unresolvable
                && entry.asks_gpus()
            {
                // The head holds its pools whether or not it is tried this round; one asking
                // for no GPU gathers no quota, and holds none.
                held[tenant] =
                    (driver.head_quota(tenant, &entry.job, since)).map(|(quota, pools)| HeadHold {
                        head: entry.job.clone(),
                        quota,
                        pools,
                    });
            }
            if waiting {
                // Nothing was freed since it failed, or its backoff runs: it would fail.
                done[tenant] = strict && !entry.unresolvable;
                continue;
            }
            // A job that failed before (so is known resolvable) and asks for more than
            // admission could grant its tenant would be refused: no need to read it.
            let head = backfill_since.is_some();
            let room = (entry.failed_at.is_some() && !entry.unresolvable)
                .then(|| rooms[tenant].get_or_insert_with(|| driver.admission_room(tenant)))
                .and_then(|room| room.as_ref());
            let beyond_admission = room.is_some_and(|room| room.refuses(&entry.need, head));
            if beyond_admission
                && room.is_some_and(|room| !room.refuses_ignoring_holds(&entry.need, head))
            {
                driver.kept_out_of_holds();
            }
            let attempted = if beyond_admission {
                Attempted::Failed { retry_at: None }
            } else {
                let offer = Offer {
                    job: &entry.job,
                    milli: entry.need.milli,
                    tenant,
                    backfill_since,
                    blocked_since: entry.blocked_since,
                };
                let given_back = driver.holds_given_back();
                let attempted = driver.attempt(offer);
                shares = None;
                // Room held for heads given back is room for the jobs kept out of it.
                if driver.holds_given_back() != given_back {
                    rooms.fill(None);
                }
                attempted
            };
            if !matches!(attempted, Attempted::Failed { .. }) {
                rooms.fill(None);
            }
            let entry = queue.entry_mut(at);
            // Room may be held for a head offered: it is never judged kept out of it.
            entry.need.held_for |= head && !beyond_admission;
            match attempted {
                Attempted::Placed => {
                    entry.placed = true;
                    if overdue {
                        held[tenant] = None;
                    }
                }
                Attempted::Failed { retry_at } => {
                    if backfill_since.is_some() {
                        entry.backfill_failed_at = Some(epoch);
                    }
                    entry.failed_at = Some(epoch);
                    entry.retry_at = retry_at;
                    entry.unresolvable = false;
                    if entry.blocked_since.is_none() {
                        entry.blocked_since = Some(now_ms);
                    }
                    done[tenant] = strict;
                }
                Attempted::Backoff { until } => {
                    entry.failed_at = Some(epoch);
                    entry.retry_at = Some(until);
                    entry.not_before = until;
                    entry.unresolvable = false;
                    done[tenant] = strict;
                }
                Attempted::Unresolvable => {
                    entry.failed_at = Some(epoch);
                    entry.retry_at = None;
                    entry.unresolvable = true;
                    // An unresolvable head holds nothing: its quota need not gather.
                    if overdue {
                        held[tenant] = None;
                    }
                }
            }
        }
        for queue in &mut self.queues {
            queue.end_round(now_ms);
        }
    }
}

/// The pools a job may use as a bit mask, never fewer than it names: bit `p` for pool `p`,
/// every bit for an empty list (any pool) or a pool past 63.
fn pool_mask(pools: &[PoolId]) -> u64 {
    if pools.is_empty() || pools.iter().any(|p| p.index() >= 64) {
        return u64::MAX;
    }
    low_pool_bits(pools)
}

/// The pools a backfill head holds as a bit mask, never more than it holds: every bit for
/// an empty list (it holds every pool), and no bit for a pool past 63.
fn held_pool_mask(pools: &[PoolId]) -> u64 {
    if pools.is_empty() {
        return u64::MAX;
    }
    low_pool_bits(pools)
}

fn low_pool_bits(pools: &[PoolId]) -> u64 {
    pools
        .iter()
        .filter(|p| p.index() < 64)
        .fold(0, |mask, p| mask | 1 << p.index())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::config::SizeOrder;
    use crate::model::{GpuRequest, PodRequest};
    use crate::plugins::PrioritySort;

    /// A job of `pods` pods of `gpu` each, submitted at `id` ms.
    fn job(id: u32, pods: usize, gpu: GpuRequest) -> Arc<Job> {
        Arc::new(Job {
            submit_ms: u64::from(id),
            ..Job::new(JobId(id), vec![PodRequest::gpus(gpu); pods])
        })
    }

    /// Fails every job it is offered (those in `unresolvable` as unresolvable, those in
    /// `backoff` with a backoff until then, those in `retry` asking to be tried then),
    /// and records which.
    struct Refuser {
        room: Option<Room>,
        offered: Vec<JobId>,
        /// Of those, the ones offered as their queue's backfill head.
        heads: Vec<JobId>,
        unresolvable: Vec<JobId>,
        backoff: Vec<(JobId, u64)>,
        retry: Vec<(JobId, u64)>,
        /// Times it was told jobs were kept out of room held for backfill heads.
        kept_out: usize,
    }

    impl Refuser {
        fn new(room: Option<Room>, unresolvable: Vec<JobId>) -> Self {
            Self {
                room,
                offered: Vec::new(),
                heads: Vec::new(),
                unresolvable,
                backoff: Vec::new(),
                retry: Vec::new(),
                kept_out: 0,
            }
        }
    }

    impl Driver for Refuser {
        fn share(&self, _tenant: usize) -> f64 {
            0.0
        }
        fn head_quota(&self, _: usize, _: &Job, _: u64) -> Option<(HeadQuota, Vec<PoolId>)> {
            None
        }
        fn passes_head(&self, _: usize, _: &Job, _: HeadQuota, _: &[PoolId], _: &Job) -> bool {
            true
        }
        fn admission_room(&self, _tenant: usize) -> Option<Room> {
            self.room
        }
        fn kept_out_of_holds(&mut self) {
            self.kept_out += 1;
        }
        fn holds_given_back(&self) -> u64 {
            0
        }
        fn attempt(&mut self, offer: Offer) -> Attempted {
            self.offered.push(offer.job.id);
            if offer.backfill_since.is_some() {
                self.heads.push(offer.job.id);
            }
            let id = offer.job.id;
            let time_of = |pairs: &[(JobId, u64)]| pairs.iter().find(|p| p.0 == id).map(|p| p.1);
            if self.unresolvable.contains(&id) {
                Attempted::Unresolvable
            } else if let Some(until) = time_of(&self.backoff) {
                Attempted::Backoff { until }
            } else {
                Attempted::Failed {
                    retry_at: time_of(&self.retry),
                }
            }
        }
    }

    const THRESHOLD_MS: u64 = 1_000;

    fn sort() -> Arc<PrioritySort> {
        Arc::new(PrioritySort {
            size_order: SizeOrder::SmallerFirst,
        })
    }

    /// Queues of one tenant holding, in order: one pod of 8 GPUs, one of 2, four of 2,
    /// and one of half a GPU; each offered and failed once at epoch 1.
    fn failed_once(policy: QueueingPolicy) -> Queues {
        let mut queues = Queues::new(policy, sort(), THRESHOLD_MS, 1);
        queues.push(job(0, 1, GpuRequest::Whole(8)), 0, 0);
        queues.push(job(1, 1, GpuRequest::Whole(2)), 0, 0);
        queues.push(job(2, 4, GpuRequest::Whole(2)), 0, 0);
        queues.push(job(3, 1, GpuRequest::Fraction(500)), 0, 0);
        let mut driver = Refuser::new(Some(Room::of_nodes(0, &[])), Vec::new());
        queues.run(1, 0, &mut driver);
        assert_eq!(
            driver.offered.len(),
            4,
            "a job never tried is always offered"
        );
        queues
    }

    fn offered(queues: &mut Queues, now_ms: u64, room: Option<Room>) -> Vec<u32> {
        let mut driver = Refuser::new(room, Vec::new());
        queues.run(2, now_ms, &mut driver);
        driver.offered.iter().map(|j| j.0).collect()
    }

    #[test]
    fn capacity_freed_offers_only_the_jobs_admission_could_grant() {
        let mut queues = failed_once(QueueingPolicy::BestEffortFifo);
        let room = Room::of_nodes(16_000, &[4, 2]);
        // Job 0's pod needs 8 GPUs on one node, job 2 needs 8 GPUs in all.
        assert_eq!(offered(&mut queues, 1, Some(room)), [1, 3]);
        // Nine GPUs free, but three nodes of three hold three of job 2's four pods.
        let mut queues = failed_once(QueueingPolicy::BestEffortFifo);
        let room = Room::of_nodes(16_000, &[3, 3, 3]);
        assert_eq!(offered(&mut queues, 1, Some(room)), [1, 3]);
        let mut queues = failed_once(QueueingPolicy::BestEffortFifo);
        let room = Room::of_nodes(16_000, &[4, 4]);
        assert_eq!(offered(&mut queues, 1, Some(room)), [1, 2, 3]);
        let mut queues = failed_once(QueueingPolicy::BestEffortFifo);
        let short_of_quota = Room::of_nodes(1_500, &[4, 2]);
        assert_eq!(offered(&mut queues, 1, Some(short_of_quota)), [3]);
        // A driver that cannot tell what admission would grant has every job tried.
        let mut queues = failed_once(QueueingPolicy::BestEffortFifo);
        assert_eq!(offered(&mut queues, 1, None), [0, 1, 2, 3]);
    }

    /// Where room is held for backfill heads, a job of no higher priority than every head
    /// is judged on the room outside the holds, and the driver is told when that alone
    /// refuses it (as a job kept out is told when it tries); a job of a higher priority is
    /// judged on all the room.
    #[test]
    fn jobs_kept_out_of_held_room_are_judged_on_the_room_outside_it() {
        let room = Room::of_nodes(16_000, &[4, 4]);
        let outside = Room::of_nodes(0, &[2]).free;
        let run = |lowest_head_priority| {
            let mut queues = failed_once(QueueingPolicy::BestEffortFifo);
            let held = room.with_holds(outside, lowest_head_priority);
            let mut driver = Refuser::new(Some(held), Vec::new());
            queues.run(2, 1, &mut driver);
            let offered: Vec<u32> = driver.offered.iter().map(|j| j.0).collect();
            (offered, driver.kept_out)
        };
        // Every job here is of priority 0. Job 0's pod of 8 GPUs fits no free node (not
        // kept out: refused as without holds); job 2's four pods of 2 GPUs fit the free
        // nodes, but not the one node outside the holds.
        assert_eq!(run(0), (vec![1, 3], 1));
        assert_eq!(run(1), (vec![1, 3], 1));
        assert_eq!(run(-1), (vec![1, 2, 3], 0));
    }

    /// With priority and quota-reclaim preemption, a job admission finds short of room is
    /// still offered where it could preempt: it outranks a running job, or its tenant may
    /// reclaim quota; else it waits for capacity as without preemption.
    #[test]
    fn with_preemption_only_jobs_that_could_preempt_are_offered_beyond_the_room() {
        let room = Room::of_nodes(16_000, &[4, 2]);
        let reach = |lowest_running, reclaims| {
            room.with_preemption(PreemptionReach {
                lowest_running,
                reclaims,
            })
        };
        // Every job here is of priority 0.
        let mut queues = failed_once(QueueingPolicy::BestEffortFifo);
        assert_eq!(offered(&mut queues, 1, Some(reach(Some(0), false))), [1, 3]);
        let mut queues = failed_once(QueueingPolicy::BestEffortFifo);
        assert_eq!(
            offered(&mut queues, 1, Some(reach(Some(-1), false))),
            [0, 1, 2, 3]
        );
        let mut queues = failed_once(QueueingPolicy::BestEffortFifo);
        assert_eq!(
            offered(&mut queues, 1, Some(reach(None, true))),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn a_backfill_head_is_offered_when_only_its_shape_is_missing() {
        let room = Room::of_nodes(16_000, &[4, 4, 2]);
        // Past the threshold, job 0 is the head: room is held for it in its shape.
        let mut queues = failed_once(QueueingPolicy::Backfill);
        assert_eq!(offered(&mut queues, THRESHOLD_MS, Some(room)), [0, 1, 2, 3]);
        // Before, it is as any job.
        let mut queues = failed_once(QueueingPolicy::Backfill);
        assert_eq!(
            offered(&mut queues, THRESHOLD_MS - 1, Some(room)),
            [1, 2, 3]
        );
    }

    #[test]
    fn an_unresolvable_job_waits_until_the_cluster_or_tenants_change() {
        let mut queues = Queues::new(QueueingPolicy::StrictFifo, sort(), THRESHOLD_MS, 1);
        queues.push(job(0, 1, GpuRequest::Whole(1)), 0, 0);
        queues.push(job(1, 1, GpuRequest::Whole(8)), 0, 0);
        let mut driver = Refuser::new(None, vec![JobId(0)]);
        queues.run(1, 0, &mut driver);
        assert_eq!(driver.offered, [JobId(0), JobId(1)], "it blocks no one");
        // Capacity freed: only the resolvable job is worth offering.
        driver.offered.clear();
        queues.run(2, 1, &mut driver);
        assert_eq!(driver.offered, [JobId(1)]);
        queues.forget_failures();
        driver.offered.clear();
        queues.run(2, 2, &mut driver);
        assert_eq!(driver.offered, [JobId(0), JobId(1)]);
    }

    /// A backfill head whose try for room failed, offered again once failures are forgotten
    /// (the tenants changed) before capacity changed, is offered as the head: its try for
    /// room is forgotten too, not taken for a plain job's.
    #[test]
    fn a_head_offered_again_once_failures_are_forgotten_is_offered_as_the_head() {
        let mut queues = Queues::new(QueueingPolicy::Backfill, sort(), THRESHOLD_MS, 1);
        queues.push(job(0, 1, GpuRequest::Whole(8)), 0, 0);
        let mut driver = Refuser::new(None, Vec::new());
        queues.run(1, 0, &mut driver);
        queues.run(2, THRESHOLD_MS, &mut driver);
        assert_eq!(driver.heads, [JobId(0)]);
        queues.forget_failures();
        driver.offered.clear();
        queues.run(2, THRESHOLD_MS + 1, &mut driver);
        assert_eq!(driver.offered, [JobId(0)]);
        assert_eq!(driver.heads, [JobId(0), JobId(0)]);
    }

    /// A job found unresolvable, offered again once failures are forgotten, whose binding
    /// then fails at once, is offered again when its backoff ends: it is not taken for
    /// unresolvable still.
    #[test]
    fn a_job_once_unresolvable_backs_off_as_any_other() {
        let mut queues = Queues::new(QueueingPolicy::StrictFifo, sort(), THRESHOLD_MS, 1);
        queues.push(job(0, 1, GpuRequest::Whole(1)), 0, 0);
        queues.push(job(1, 1, GpuRequest::Whole(8)), 0, 0);
        let mut driver = Refuser::new(None, vec![JobId(0)]);
        queues.run(1, 0, &mut driver);
        queues.forget_failures();
        driver.unresolvable.clear();
        driver.backoff.push((JobId(0), 10));
        driver.offered.clear();
        queues.run(1, 1, &mut driver);
        assert_eq!(
            driver.offered,
            [JobId(0)],
            "strict FIFO: it blocks job 1 now"
        );
        assert_eq!(queues.next_retry_ms(1, 1), Some(10));
        driver.backoff.clear();
        driver.offered.clear();
        queues.run(2, 20, &mut driver);
        assert_eq!(driver.offered, [JobId(0)]);
    }

    /// A retry time that came while its job was not reached (strict FIFO, behind a head
    /// that came later with higher priority) does not hide the head's own, later one.
    #[test]
    fn a_retry_time_past_unreached_hides_no_later_one() {
        let mut queues = Queues::new(QueueingPolicy::StrictFifo, sort(), THRESHOLD_MS, 1);
        queues.push(job(0, 1, GpuRequest::Whole(1)), 0, 0);
        let mut driver = Refuser::new(None, Vec::new());
        driver.retry = vec![(JobId(0), 100), (JobId(1), 200)];
        queues.run(1, 0, &mut driver);
        let urgent = Job {
            priority: 1,
            ..(*job(1, 1, GpuRequest::Whole(1))).clone()
        };
        queues.push(Arc::new(urgent), 0, 50);
        driver.offered.clear();
        queues.run(1, 50, &mut driver);
        assert_eq!(driver.offered, [JobId(1)]);
        assert_eq!(queues.next_retry_ms(1, 50), Some(100));
        assert_eq!(queues.next_retry_ms(1, 100), Some(200));
    }

    fn need() -> impl Strategy<Value = Need> {
        let preempts_at = proptest::option::of(-2i32..=2);
        let priority = (-2i32..=2, any::<bool>());
        (
            0u64..20_000,
            0u64..20,
            1u64..5,
            0u32..=8,
            preempts_at,
            priority,
        )
            .prop_map(
                |(milli, whole, pods, width, preempts_at, (priority, held_for))| Need {
                    milli,
                    whole,
                    pods,
                    width,
                    preempts_at,
                    priority,
                    held_for,
                },
            )
    }

    fn reach() -> impl Strategy<Value = Option<PreemptionReach>> {
        let lowest_running = proptest::option::of(-2i32..=2);
        proptest::option::of((lowest_running, any::<bool>()).prop_map(
            |(lowest_running, reclaims)| PreemptionReach {
                lowest_running,
                reclaims,
            },
        ))
    }

    proptest! {
        #[test]
        fn admission_refuses_the_least_of_two_needs_only_if_it_refuses_both(
            a in need(),
            b in need(),
            quota_milli in 0u64..20_000,
            free in proptest::collection::vec(0u32..=8, 0..5),
            head in any::<bool>(),
            reach in reach(),
            // Which of the free nodes are outside the holds, and the lowest head priority.
            holds in proptest::option::of((any::<u8>(), -2i32..=2)),
        ) {
            let room = Room::of_nodes(quota_milli, &free);
            let room = match holds {
                Some((outside, priority)) => {
                    let outside: Vec<u32> = (free.iter().enumerate())
                        .filter(|(i, _)| outside & 1 << i != 0)
                        .map(|(_, &f)| f)
                        .collect();
                    room.with_holds(Room::of_nodes(0, &outside).free, priority)
                }
                None => room,
            };
            let room = match reach {
                Some(reach) => room.with_preemption(reach),
                None => room,
            };
            if room.refuses(&a.least(&b), head) {
                prop_assert!(room.refuses(&a, head) && room.refuses(&b, head));
            }
        }
    }

    #[test]
    fn forgotten_failures_offer_every_job_again() {
        let mut queues = failed_once(QueueingPolicy::BestEffortFifo);
        queues.forget_failures();
        let nothing = Room::of_nodes(0, &[]);
        assert_eq!(offered(&mut queues, 1, Some(nothing)), [0, 1, 2, 3]);
    }

    /// Answers every offer by a fixed rule of the job and the round, the same for any
    /// queue, and records the offers.
    struct Scripted {
        round: u64,
        room: Option<Room>,
        placed: [u32; 2],
        /// (round, job, offered as its queue's backfill head)
        offered: Vec<(u64, JobId, bool)>,
    }

    impl Driver for Scripted {
        fn share(&self, tenant: usize) -> f64 {
            f64::from(self.placed[tenant])
        }
        fn head_quota(
            &self,
            tenant: usize,
            head: &Job,
            _: u64,
        ) -> Option<(HeadQuota, Vec<PoolId>)> {
            (tenant == 1).then(|| (HeadQuota::Gathers, head.pools.clone()))
        }
        fn passes_head(&self, _: usize, _: &Job, _: HeadQuota, _: &[PoolId], _: &Job) -> bool {
            false
        }
        fn admission_room(&self, _tenant: usize) -> Option<Room> {
            self.room
        }
        fn kept_out_of_holds(&mut self) {}
        fn holds_given_back(&self) -> u64 {
            0
        }
        fn attempt(&mut self, offer: Offer) -> Attempted {
            self.offered
                .push((self.round, offer.job.id, offer.backfill_since.is_some()));
            let roll = (u64::from(offer.job.id.0) * 2_654_435_761 + self.round * 40_503) % 100;
            match roll {
                0..15 => {
                    self.placed[offer.tenant] += 1;
                    Attempted::Placed
                }
                15..20 => Attempted::Unresolvable,
                20..25 => Attempted::Backoff {
                    until: self.round * 10 + 25,
                },
                25..40 => Attempted::Failed {
                    retry_at: Some(self.round * 10 + roll % 30),
                },
                _ => Attempted::Failed { retry_at: None },
            }
        }
    }

    /// A job of the property below: (tenant, pods, whole GPUs, a half or none, priority,
    /// pools).
    type JobRow = (usize, usize, u32, i32, u8);

    fn job_of(id: u32, &(_, pods, gpus, priority, pools): &JobRow) -> Arc<Job> {
        let gpu = match gpus {
            0 => GpuRequest::Fraction(500),
            9 => GpuRequest::NONE,
            g => GpuRequest::Whole(g),
        };
        let pools = [PoolId(0), PoolId(1)]
            .into_iter()
            .enumerate()
            .filter(|(bit, _)| pools & (1 << bit) != 0)
            .map(|(_, p)| p)
            .collect();
        Arc::new(Job {
            priority,
            pools,
            ..(*job(id, pods, gpu)).clone()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Rounds that pass chunks by offer exactly the jobs, in the order, that rounds
        /// reading every job offer, through failures, retries, backoffs, placements,
        /// removals, forgotten failures and new jobs, over many chunks.
        #[test]
        fn passing_chunks_by_offers_what_reading_every_job_offers(
            policy in prop_oneof![
                Just(QueueingPolicy::BestEffortFifo),
                Just(QueueingPolicy::Backfill),
            ],
            jobs in proptest::collection::vec(
                (0usize..2, 1usize..4, 0u32..=9, 0i32..3, 0u8..4), 80..200),
            rounds in proptest::collection::vec(
                (any::<bool>(), 0u64..4, prop::option::of((0u64..20_000, 0u32..=8, 0u32..4)),
                 0usize..6, 0u8..20),
                10..40),
        ) {
            let mut skipping = Queues::new(policy, sort(), 40, 2);
            let mut reading = Queues::new(policy, sort(), 40, 2);
            reading.read_every_chunk = true;
            let (first, later) = jobs.split_at(jobs.len() / 2);
            let mut next_id = 0u32;
            let push = |rows: &[JobRow], now: u64, [a, b]: [&mut Queues; 2], from: u32| {
                for (i, row) in rows.iter().enumerate() {
                    let job = job_of(from + i as u32, row);
                    a.push(job.clone(), row.0, now);
                    b.push(job, row.0, now);
                }
            };
            push(first, 0, [&mut skipping, &mut reading], next_id);
            next_id += first.len() as u32;
            let mut later = later.iter();
            let (mut epoch, mut now) = (0u64, 0u64);
            let mut drivers = [0, 1].map(|_| Scripted {
                round: 0,
                room: None,
                placed: [0; 2],
                offered: Vec::new(),
            });
            for (round, &(freed, step, room, arrivals, event)) in rounds.iter().enumerate() {
                // As in the scheduler, admission's room grows only when capacity is freed.
                let room = room.map(|(quota, widest, nodes)| {
                    Room::of_nodes(quota, &vec![widest; nodes as usize])
                });
                epoch += u64::from(freed);
                now += step * 10;
                for (driver, queues) in drivers.iter_mut().zip([&mut skipping, &mut reading]) {
                    driver.round = round as u64;
                    if freed || round == 0 {
                        driver.room = room;
                    }
                    queues.run(epoch, now, driver);
                }
                prop_assert_eq!(&drivers[0].offered, &drivers[1].offered, "round {}", round);
                let rows: Vec<JobRow> = later.by_ref().take(arrivals).copied().collect();
                push(&rows, now, [&mut skipping, &mut reading], next_id);
                next_id += rows.len() as u32;
                match event {
                    0 => {
                        skipping.forget_failures();
                        reading.forget_failures();
                    }
                    1..4 => {
                        let gone = JobId(u32::from(event) * 37 % next_id.max(1));
                        prop_assert_eq!(
                            skipping.remove(gone).map(|(j, _)| j.id),
                            reading.remove(gone).map(|(j, _)| j.id)
                        );
                    }
                    _ => {}
                }
                prop_assert_eq!(skipping.len(), reading.len());
            }
        }
    }

    #[test]
    fn a_job_known_unresolvable_is_not_its_queues_backfill_head() {
        let mut queues = Queues::new(QueueingPolicy::Backfill, sort(), THRESHOLD_MS, 1);
        queues.push(job(0, 1, GpuRequest::Whole(8)), 0, 0);
        queues.push(job(1, 1, GpuRequest::Whole(8)), 0, 0);
        let mut driver = Refuser::new(None, Vec::new());
        // Both block; then job 0 is found unresolvable (say, its tenant's quota was cut).
        queues.run(1, 0, &mut driver);
        driver.unresolvable.push(JobId(0));
        queues.run(2, 10, &mut driver);
        assert_eq!(driver.offered, [JobId(0), JobId(1), JobId(0), JobId(1)]);
        // Past the threshold, job 1 is the head: job 0 makes room for no one.
        driver.offered.clear();
        queues.run(3, THRESHOLD_MS + 10, &mut driver);
        assert_eq!(driver.offered, [JobId(1)]);
        assert_eq!(driver.heads, [JobId(1)]);
    }

    #[test]
    fn pool_masks_err_towards_trying_a_job() {
        let pools = |ids: &[u16]| ids.iter().map(|&i| PoolId(i)).collect::<Vec<_>>();
        // A job may use at least the pools it names; a head holds at most those it names.
        assert_eq!(pool_mask(&pools(&[0, 2])), 0b101);
        assert_eq!(held_pool_mask(&pools(&[0, 2])), 0b101);
        assert_eq!(pool_mask(&pools(&[1, 70])), u64::MAX);
        assert_eq!(held_pool_mask(&pools(&[1, 70])), 0b10);
        // Naming none: any pool, and a head that holds every pool.
        assert_eq!(pool_mask(&[]), u64::MAX);
        assert_eq!(held_pool_mask(&[]), u64::MAX);
        // A head holding pool 70 alone holds no pool a chunk could be passed by for.
        assert_eq!(held_pool_mask(&pools(&[70])), 0);
    }
}
