//! The extension points, one small trait each, in the order a job meets them:
//! `QueueSort` → `PreFilter` → `GroupFilter` → `GroupScore` → `Filter` → `Score` →
//! `Reserve`/`Unreserve` → `Permit` → `Bind`, with `PostFilter` (preemption) after a failed
//! search and `Allocate` choosing the exact devices on the chosen node. The unit of
//! scheduling is a job: PreFilter, Reserve and Permit see the whole job; GroupFilter and
//! GroupScore see it against one search group's aggregate; Filter and Score see one pod
//! against one node.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::{ClusterState, DeviceAlloc, GpuAggregate, NodeState, Placement, PodKey};
use crate::metrics::PlacementSpread;
use crate::model::{
    ClusterSpec, GroupId, Job, JobId, NodeId, NodeSpec, PodRequest, PodWidths, Pool, PoolId, Tier,
};
use crate::queue::{PoolsWanted, Tenants};

use super::{CandidateMemo, CycleState, Status};

/// The highest score a plugin gives a node (kube-scheduler's `MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;

/// Every plugin has a name, the one the configuration file uses.
pub trait Plugin: Send + Sync {
    fn name(&self) -> &'static str;
}

/// One node as a Filter or Score plugin sees it: its spec and its current state (which
/// includes the pods of the same job already placed in this cycle).
#[derive(Clone, Copy)]
pub struct NodeView<'a> {
    pub id: NodeId,
    pub spec: &'a NodeSpec,
    pub state: &'a NodeState,
    /// The node's pool (its largest node, what a pod could find elsewhere in it).
    pub pool: &'a Pool,
}

impl<'a> NodeView<'a> {
    /// Node `id` of `state`.
    pub fn of(state: &'a ClusterState, id: NodeId) -> Self {
        let spec = state.spec().node(id);
        NodeView {
            id,
            spec,
            state: state.node(id),
            pool: state.spec().pool(spec.pool),
        }
    }
}

/// One pod of the job being placed.
#[derive(Clone, Copy)]
pub struct PodContext<'a> {
    pub job: &'a Job,
    pub index: u32,
    pub request: &'a PodRequest,
    /// The job's pods already placed in this attempt.
    pub placed: &'a [(PodKey, Placement)],
    /// The nodes those pods are on.
    pub placed_nodes: &'a JobNodes,
    /// Of the job's pods not yet placed in this attempt, how many ask for as many GPUs as
    /// this one, this one included (1 for a pod judged alone).
    pub alike_left: u32,
}

impl PodContext<'_> {
    /// Whether another pod of the same job is already on `node` in this attempt.
    pub fn shares_node(&self, node: NodeId) -> bool {
        self.placed_nodes.pods_on(node) > 0
    }
}

/// The nodes a job's pods placed so far are on, each with how many, in node order: what
/// the plugins read of a gang's own pods per node they judge, in O(log nodes) however many
/// pods the gang has (a scan of the pods placed made a gang of thousands quadratic).
#[derive(Debug, Clone, Default)]
pub struct JobNodes(Vec<(NodeId, u32)>);

impl JobNodes {
    pub fn add(&mut self, node: NodeId) {
        match self.0.binary_search_by_key(&node, |&(n, _)| n) {
            Ok(at) => self.0[at].1 += 1,
            Err(at) => self.0.insert(at, (node, 1)),
        }
    }

    /// Takes back one pod added on `node`.
    pub fn remove(&mut self, node: NodeId) {
        if let Ok(at) = self.0.binary_search_by_key(&node, |&(n, _)| n) {
            self.0[at].1 -= 1;
            if self.0[at].1 == 0 {
                self.0.remove(at);
            }
        }
    }

    /// How many of the job's placed pods are on `node`.
    pub fn pods_on(&self, node: NodeId) -> u32 {
        (self.0.binary_search_by_key(&node, |&(n, _)| n)).map_or(0, |at| self.0[at].1)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each node with the job's pods on it, and how many.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, u32)> + '_ {
        self.0.iter().copied()
    }
}

/// A whole job's placement: every pod with its exact node and devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPlan {
    pub pods: Vec<(PodKey, Placement)>,
}

impl JobPlan {
    /// The nodes and leaf groups the plan's pods with GPUs span, against the ideal for
    /// their pool (the input of JTTED: a launcher without GPUs, wherever it runs, is not
    /// the job's spread); `total_milli` is the job's whole request.
    pub fn spread(&self, cluster: &ClusterSpec, total_milli: u64) -> PlacementSpread {
        let mut nodes: Vec<u32> = self
            .pods
            .iter()
            .filter(|(_, p)| p.gpus.devices != 0)
            .map(|(_, p)| p.node.0)
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        let leaves: Option<Vec<u32>> = nodes
            .iter()
            .map(|&n| cluster.nodes[n as usize].topology.leaf.map(|l| l.0))
            .collect();
        let groups_used = leaves.map(|mut l| {
            l.sort_unstable();
            l.dedup();
            l.len() as u32
        });
        let pool = nodes
            .first()
            .map(|&n| cluster.pool(cluster.nodes[n as usize].pool));
        PlacementSpread::new(
            total_milli,
            nodes.len() as u32,
            pool.map_or(0, |p| p.gpus_per_node),
            groups_used,
            pool.and_then(|p| p.largest_leaf_gpus),
        )
    }
}

/// Orders the pending jobs: `Less` means `a` is tried first.
pub trait QueueSort: Plugin {
    fn compare(&self, a: &Job, b: &Job) -> Ordering;
}

/// A job as the first level of the two-level search judges it: the job, with the pod
/// widths every group is measured against, read once per search rather than once per
/// group (a gang of hundreds of pods meets hundreds of groups).
pub struct GroupQuery<'a> {
    pub job: &'a Job,
    pub widths: PodWidths,
    /// The cluster the groups belong to.
    pub spec: &'a ClusterSpec,
}

impl<'a> GroupQuery<'a> {
    pub fn of(job: &'a Job, spec: &'a ClusterSpec) -> Self {
        Self {
            job,
            widths: PodWidths::of(job),
            spec,
        }
    }
}

/// Job-level checks and precomputation before any node is visited.
pub trait PreFilter: Plugin {
    fn pre_filter(&self, job: &Job, snapshot: &ClusterState, state: &mut CycleState) -> Status;
}

/// The first level of the two-level search: whether a whole search group may hold the
/// job's pods, judged from its aggregate alone, without visiting nodes. Only the plugins
/// registered here are asked, once per group for every job, so a `Filter` with nothing
/// to say of a group stays out.
pub trait GroupFilter: Plugin {
    fn filter_group(
        &self,
        query: &GroupQuery,
        state: &CycleState,
        group: GroupId,
        aggregate: &GpuAggregate,
    ) -> bool;
}

/// Whether a pod can go on a node.
pub trait Filter: Plugin {
    fn filter(&self, pod: &PodContext, state: &CycleState, node: NodeView) -> Status;

    /// Whether the plugin may refuse any node of `cluster` to this job's pods; when not,
    /// it is not asked per node by the search (a diagnosis still asks it).
    fn applies(&self, _job: &Job, _cluster: &ClusterSpec) -> bool {
        true
    }

    /// Whether the plugin may refuse some node of `cluster` to this job's pods by the
    /// node's spec alone, a verdict that stands whatever runs there (node selectors,
    /// taints): the checks of what a gang could ever fit then leave such nodes out (see
    /// `framework::usable`). The cycle state is the one the PreFilters wrote.
    fn judges_spec(&self, _job: &Job, _cluster: &ClusterSpec, _state: &CycleState) -> bool {
        false
    }
}

/// How good a search group is for a job, from its aggregate alone: the first level of the
/// two-level search tries the groups of the highest weighted sum first. Only the plugins
/// registered here are asked, once per group for every job.
pub trait GroupScore: Plugin {
    fn score_group(
        &self,
        query: &GroupQuery,
        state: &CycleState,
        group: GroupId,
        aggregate: &GpuAggregate,
    ) -> i64;
}

/// How good a node is for a pod, `0..=MAX_NODE_SCORE`.
pub trait Score: Plugin {
    fn score(&self, pod: &PodContext, state: &CycleState, node: NodeView) -> i64;

    /// Whether the plugin has anything to say about this job's pods on `cluster`; when
    /// not, it is not asked per node (its score would be the same everywhere).
    fn applies(&self, _job: &Job, _cluster: &ClusterSpec) -> bool {
        true
    }

    /// Rescales the scores of all feasible nodes for one pod; scores already in
    /// `0..=MAX_NODE_SCORE` need nothing.
    fn normalize(&self, _scores: &mut [i64]) {}

    /// Whether `normalize` must be called (it costs a pass over the feasible nodes).
    fn normalizes(&self) -> bool {
        false
    }
}

/// Chooses the exact devices for a pod on the node the search chose. A profile has
/// exactly one.
pub trait Allocate: Plugin {
    fn allocate(&self, pod: &PodContext, node: NodeView) -> Option<DeviceAlloc>;
}

/// Runs when a job's placement is reserved in the cache; `unreserve` undoes it and must be
/// idempotent.
pub trait Reserve: Plugin {
    fn reserve(&self, job: &Job, plan: &JobPlan, state: &mut CycleState) -> Status;
    fn unreserve(&self, job: &Job, plan: &JobPlan, state: &mut CycleState);
}

/// The last word before binding: `Success`, `Wait` (hold the reservation, e.g. until a
/// gang is complete) or a rejection (the reservation is undone).
pub trait Permit: Plugin {
    fn permit(&self, job: &Job, plan: &JobPlan, state: &CycleState) -> Status;
}

/// Carries a reserved placement out to the world. `Success` means bound now; `Wait` means
/// the world will report the outcome later.
pub trait Bind: Plugin {
    fn bind(&self, job: &Job, plan: &JobPlan) -> Status;
}

/// Why a job is preempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreemptionKind {
    /// A job of higher priority takes its resources.
    Priority,
    /// Its tenant borrowed quota that the owner reclaims.
    QuotaReclaim,
    /// It was placed after a backfill head blocked, and the head has waited long enough.
    Backfill,
}

impl PreemptionKind {
    pub fn name(self) -> &'static str {
        match self {
            PreemptionKind::Priority => "priority",
            PreemptionKind::QuotaReclaim => "quota-reclaim",
            PreemptionKind::Backfill => "backfill",
        }
    }
}

/// A job holding resources, as preemption sees it.
#[derive(Debug, Clone)]
pub struct RunningJob {
    pub job: Arc<Job>,
    pub tenant: usize,
    /// When all its pods were placed (world clock).
    pub started_ms: u64,
    /// Milli-GPUs it holds per pool.
    pub pools: Vec<(PoolId, u64)>,
    /// False for pods this scheduler does not manage (placed by another scheduler): they
    /// count against capacity but are never victims.
    pub preemptible: bool,
    /// Placed as a backfill head (blocked past the threshold), so served in its turn, not
    /// ahead of anyone; or evicted once before as backfilled past a head and requeued (the
    /// simulator's victims; a live cluster's come back as new pods): no head may evict it
    /// as backfilled (such a job loses at most one run to backfill preemption).
    pub backfill_exempt: bool,
    /// On its way out (a victim whose pods are still going, or pods found terminating):
    /// it holds its devices, is charged to no tenant and is never a victim.
    pub terminating: bool,
}

impl RunningJob {
    /// Milli-GPUs it holds on `pool`.
    pub fn held_on(&self, pool: PoolId) -> u64 {
        (self.pools.iter())
            .filter(|&&(p, _)| p == pool)
            .map(|&(_, milli)| milli)
            .sum()
    }

    /// Whether it overtook `head`, blocked since `head_blocked_since`, so that the head may
    /// evict it as backfilled (see `overtakes`).
    pub fn overtook(&self, head: &Job, head_blocked_since: u64) -> bool {
        self.preemptible
            && self.started_ms >= head_blocked_since
            && overtakes(&self.job, self.backfill_exempt, head)
    }
}

/// Whether `job`, started while `head` waited, overtakes it, so that the head may evict it
/// as backfilled: it was submitted after the head, at no higher priority (a job older than
/// the head never counts), and is not `exempt` (placed as an overdue head itself: no
/// cascade; or evicted as backfilled before).
pub fn overtakes(job: &Job, exempt: bool, head: &Job) -> bool {
    !exempt && job.submit_ms > head.submit_ms && job.priority <= head.priority
}

/// What a PostFilter plugin may look at to make room for a job.
pub struct PreemptionContext<'a> {
    pub snapshot: &'a ClusterState,
    pub now_ms: u64,
    /// The preemptor's tenant.
    pub tenant: usize,
    /// Whether static quota admission let the job in now: if not, only victims whose
    /// going lets it in can help.
    pub admitted: bool,
    pub tenants: &'a Tenants,
    /// Per tenant, the pools its waiting jobs may want GPUs of: as the round began, and
    /// the pools of its jobs evicted since.
    pub pools_wanted: &'a [PoolsWanted],
    pub running: &'a HashMap<JobId, RunningJob>,
    /// Candidates already found for jobs alike, while the running jobs, the tenants'
    /// accounts and the time are as they were.
    pub candidates: &'a CandidateMemo,
    /// The lowest priority among the running jobs.
    pub lowest_running_priority: Option<i32>,
    /// Set when the job is a backfill head blocked past the threshold: since when.
    pub backfill_since: Option<u64>,
    /// From when a reclaim for the job may take a job that holds more than its tenant
    /// borrows: once the job has been blocked for the backfill threshold (counted from now
    /// if it was never blocked before).
    pub reclaims_whole_from: u64,
    /// The search groups held for the job (its backfill reservation), sorted.
    pub reserved: Option<&'a [GroupId]>,
    /// For a backfill head short of room that holds none: the groups it would hold,
    /// sorted. Victims are not kept to them; whether it awaits protected victims is
    /// judged there ([`PostFilterResult::AwaitsVictims`]).
    pub would_hold: Option<&'a [GroupId]>,
    /// Per pool of the job, the tier of one domain its placement there must stay inside
    /// (`None`: the whole pool), as `fits` places it ([`super::search::domain_limits`]).
    pub domain_limits: &'a [(PoolId, Option<Tier>)],
    /// Whether the job would pass static quota admission with these accounts and be
    /// placed on this state (both without the victims), kept to the pools it is admitted
    /// on: where it would land.
    pub fits: &'a dyn Fn(&ClusterState, &Tenants) -> Option<Landing>,
}

/// Where a preemptor would be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Landing {
    /// The pool its pods with GPUs land in (its first pod's, without any).
    pub pool: PoolId,
    /// The nodes its pods take.
    pub nodes: Vec<NodeId>,
}

/// What a PostFilter plugin proposes after a failed search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostFilterResult {
    /// Nothing to do; the job waits.
    None,
    /// Evict these whole jobs, each for its own reason; the job then fits (checked on the
    /// state without them).
    Preempt {
        victims: Vec<(JobId, PreemptionKind)>,
    },
    /// Nothing now, but victims become available at this time (their protection ends).
    RetryAt(u64),
    /// As `RetryAt`, for a backfill head: jobs that overtook it, in the groups it holds
    /// (or would hold) and some still inside their minimum runtime, could with the room
    /// free there make its room once they may go, the last of them at `until`. The
    /// scheduler may hold those groups for it until then, so that newer jobs do not take
    /// what frees and keep it waiting on their own minimum runtime in turn.
    AwaitsVictims { retry_at: u64, until: u64 },
}

/// Runs after the search failed; preemption lives here.
pub trait PostFilter: Plugin {
    fn post_filter(&self, job: &Job, context: &PreemptionContext) -> PostFilterResult;

    /// Whether it makes room for overdue backfill heads only (for other jobs it is never
    /// worth asking).
    fn for_backfill_heads_only(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClusterSpecBuilder, LeafPath, LinkProfile, NodeRow};

    #[test]
    fn job_nodes_count_the_pods_on_each_node_until_each_is_taken_back() {
        let mut nodes = JobNodes::default();
        for n in [7, 3, 7, 5] {
            nodes.add(NodeId(n));
        }
        let counts = |nodes: &JobNodes| nodes.iter().map(|(n, c)| (n.0, c)).collect::<Vec<_>>();
        assert_eq!(counts(&nodes), [(3, 1), (5, 1), (7, 2)]);
        assert_eq!((nodes.pods_on(NodeId(7)), nodes.pods_on(NodeId(4))), (2, 0));
        nodes.remove(NodeId(7));
        nodes.remove(NodeId(3));
        assert_eq!(counts(&nodes), [(5, 1), (7, 1)]);
        nodes.remove(NodeId(5));
        nodes.remove(NodeId(7));
        assert!(nodes.is_empty());
    }

    /// A launcher without GPUs on a CPU-only node is not part of the job's spread: two
    /// workers on two nodes of one leaf are one leaf and two nodes, as ideal.
    #[test]
    fn a_launcher_without_gpus_is_not_counted_in_the_spread() {
        let mut builder = ClusterSpecBuilder::new();
        let leaf = LeafPath {
            superspine: "s".into(),
            spine: "p".into(),
            leaf: "l".into(),
        };
        for (name, gpus) in [("cpu", 0), ("g1", 8), ("g2", 8)] {
            let row = NodeRow {
                name: name.into(),
                gpu_model: (gpus > 0).then(|| "H100".to_string()),
                gpus,
                leaf: (gpus > 0).then(|| leaf.clone()),
                ..Default::default()
            };
            builder.add(row, LinkProfile::NvlinkAll).unwrap();
        }
        let cluster = builder.build();
        let pod = |pod: u32, node: &str, devices: u32| {
            let placement = Placement {
                node: cluster.node_id(node).unwrap(),
                gpus: DeviceAlloc::whole(devices),
                cpu_milli: 0,
                memory_bytes: 0,
                ephemeral_bytes: 0,
            };
            (PodKey { job: JobId(1), pod }, placement)
        };
        let plan = JobPlan {
            pods: vec![pod(0, "cpu", 0), pod(1, "g1", 0xff), pod(2, "g2", 0xff)],
        };
        let spread = plan.spread(&cluster, 16_000);
        assert_eq!(
            (spread.nodes_used, spread.ideal_nodes, spread.groups),
            (2, 2, Some((1, 1)))
        );
    }
}
