//! The search for a job's nodes. Two-level (the default): candidate search groups of the
//! job's pools are filtered and ranked from their aggregates alone, then the job is placed
//! inside the best group that holds it whole, groups evaluated in parallel batches; a gang
//! that no single group holds is spread over the fewest groups. Flat (the baseline): every
//! node of the job's pools is scored for every pod.
//!
//! Each attempt plays the job on an O(1) clone of the snapshot (a KAI-style statement): a
//! rollback is dropping the clone.

use rayon::prelude::*;

use crate::cache::{ClusterState, Placement, PodKey};
use crate::model::{GroupId, Job, NodeId, PoolId};

use super::plugin::{JobPlan, NodeView, PodContext};
use super::{CycleState, Diagnosis, Profile, SearchMode, Status};

/// The pools a job may use: the ones it names, or every pool (for a GPU job, every pool
/// with GPUs).
pub fn pools_for(job: &Job, snapshot: &ClusterState) -> Vec<PoolId> {
    if !job.pools.is_empty() {
        return job.pools.clone();
    }
    let needs_gpu = job.total_milli() > 0;
    let spec = snapshot.spec();
    (0..spec.pools.len())
        .map(|i| PoolId(i as u16))
        .filter(|&p| !needs_gpu || spec.pool(p).gpus_per_node > 0)
        .collect()
}

/// A feasible placement of the whole job, with the state it leaves.
pub struct Found {
    pub plan: JobPlan,
    pub state: ClusterState,
}

/// Finds nodes and devices for every pod of `job`, or `None`.
pub fn place_job(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
) -> Option<Found> {
    let pools = pools_for(job, snapshot);
    match profile.search {
        SearchMode::Flat => {
            let spec = snapshot.spec();
            let nodes: Vec<&[NodeId]> = pools
                .iter()
                .map(|&p| spec.pool(p).nodes.as_slice())
                .collect();
            try_nodes(profile, job, snapshot, state, &nodes)
        }
        SearchMode::TwoLevel => two_level(profile, job, snapshot, state, &pools),
    }
}

fn two_level(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
    pools: &[PoolId],
) -> Option<Found> {
    let spec = snapshot.spec();
    let mut ranked: Vec<(i64, GroupId)> = Vec::new();
    for &pool in pools {
        for (group, aggregate) in snapshot.pool_groups(pool) {
            let passes = profile
                .filters
                .iter()
                .all(|f| f.filter_group(job, state, group, aggregate).is_success());
            if passes {
                let score = profile
                    .scores
                    .iter()
                    .map(|(s, w)| w * s.score_group(job, state, group, aggregate))
                    .sum();
                ranked.push((score, group));
            }
        }
    }

    let options = profile.search_options;
    let parallel = options.parallel && job.pods.len() >= options.parallel_min_pods;
    let batch = match options.groups_per_batch {
        _ if !parallel => 1,
        0 => rayon::current_num_threads(),
        n => n,
    };
    // Most jobs fit in one of the first groups tried: rank only the head of the list, and
    // sort the rest only if the head fails.
    let by_rank = |a: &(i64, GroupId), b: &(i64, GroupId)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
    let head = batch.min(ranked.len());
    if head < ranked.len() && head > 0 {
        ranked.select_nth_unstable_by(head - 1, by_rank);
    }
    ranked[..head].sort_unstable_by(by_rank);
    let attempt = |&group: &GroupId| {
        let nodes = [spec.group(group).nodes.as_slice()];
        try_nodes(profile, job, snapshot, state, &nodes)
    };
    let mut tried = 0;
    while tried < ranked.len() {
        if tried == head {
            ranked[head..].sort_unstable_by(by_rank);
        }
        let end = if tried < head {
            head
        } else {
            (tried + batch).min(ranked.len())
        };
        let candidates: Vec<GroupId> = ranked[tried..end]
            .iter()
            .map(|&(_, g)| g)
            .filter(|&g| may_hold_whole_job(job, snapshot, g))
            .collect();
        tried = end;
        let found = if candidates.len() > 1 {
            // Speculative: the first feasible group in rank order wins, whichever thread
            // finishes first, so the result is the same as trying them one by one.
            let mut results: Vec<Option<Found>> = candidates.par_iter().map(attempt).collect();
            results.iter_mut().find_map(Option::take)
        } else {
            candidates.iter().find_map(attempt)
        };
        if found.is_some() {
            return found;
        }
    }
    if job.pods.len() > 1 {
        spread_over_groups(profile, job, snapshot, state, &ranked)
    } else {
        None
    }
}

/// Whether a group's aggregate can hold every pod of the job at once (whole GPUs only;
/// fractions and CPU are left to the node filters).
fn may_hold_whole_job(job: &Job, snapshot: &ClusterState, group: GroupId) -> bool {
    let aggregate = snapshot.group(group);
    let whole: u64 = job.pods.iter().map(|p| u64::from(p.gpu.whole())).sum();
    if whole > u64::from(aggregate.free_gpus) {
        return false;
    }
    match job.pods.first() {
        Some(first) if job.pods.iter().all(|p| p.gpu == first.gpu) && first.gpu.whole() > 0 => {
            aggregate.pods_that_fit(first.gpu.whole()) >= job.pods.len() as u64
        }
        _ => true,
    }
}

/// A gang no single group holds: fill the groups that hold the most of it first, so the
/// job spans as few groups as possible.
fn spread_over_groups(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
    ranked: &[(i64, GroupId)],
) -> Option<Found> {
    let per_pod = job.pods.iter().map(|p| p.gpu.whole()).max().unwrap_or(0);
    let mut groups: Vec<(u64, i64, GroupId)> = ranked
        .iter()
        .map(|&(score, g)| (snapshot.group(g).pods_that_fit(per_pod), score, g))
        .filter(|&(fit, _, _)| fit > 0)
        .collect();
    groups.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    let spec = snapshot.spec();
    let mut attempt = Attempt::new(snapshot);
    for &(_, _, group) in &groups {
        attempt.fill(profile, job, state, &[spec.group(group).nodes.as_slice()]);
        if attempt.is_complete(job) {
            return Some(attempt.finish());
        }
    }
    None
}

fn try_nodes(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
    nodes: &[&[NodeId]],
) -> Option<Found> {
    let mut attempt = Attempt::new(snapshot);
    attempt.fill(profile, job, state, nodes);
    attempt.is_complete(job).then(|| attempt.finish())
}

/// A job being placed pod by pod on its own copy of the state.
struct Attempt {
    state: ClusterState,
    plan: Vec<(PodKey, Placement)>,
}

impl Attempt {
    fn new(snapshot: &ClusterState) -> Self {
        Self {
            state: snapshot.snapshot(),
            plan: Vec::new(),
        }
    }

    fn is_complete(&self, job: &Job) -> bool {
        self.plan.len() == job.pods.len()
    }

    fn finish(self) -> Found {
        Found {
            plan: JobPlan { pods: self.plan },
            state: self.state,
        }
    }

    /// Places the job's remaining pods on `nodes`, in pod order, until one does not fit.
    fn fill(&mut self, profile: &Profile, job: &Job, cycle: &CycleState, nodes: &[&[NodeId]]) {
        while let Some(request) = job.pods.get(self.plan.len()) {
            let pod = PodContext {
                job,
                index: self.plan.len() as u32,
                request,
            };
            let Some(node) = best_node(profile, &pod, cycle, &self.state, nodes) else {
                return;
            };
            let spec = self.state.spec().clone();
            let view = NodeView {
                id: node,
                spec: spec.node(node),
                state: self.state.node(node),
            };
            let Some(gpus) = profile.allocate.allocate(&pod, view) else {
                return;
            };
            let key = PodKey {
                job: job.id,
                pod: pod.index,
            };
            let placement = Placement {
                node,
                gpus,
                cpu_milli: request.cpu_milli,
                memory_mib: request.memory_mib,
            };
            if self.state.assume(key, placement).is_err() {
                return;
            }
            self.plan.push((key, placement));
        }
    }
}

/// The feasible node with the highest weighted score (the lowest id among equals).
fn best_node(
    profile: &Profile,
    pod: &PodContext,
    cycle: &CycleState,
    state: &ClusterState,
    nodes: &[&[NodeId]],
) -> Option<NodeId> {
    let spec = state.spec();
    let feasible = nodes.iter().flat_map(|s| s.iter()).filter_map(|&id| {
        let view = NodeView {
            id,
            spec: spec.node(id),
            state: state.node(id),
        };
        profile
            .filters
            .iter()
            .all(|f| f.filter(pod, cycle, view).is_success())
            .then_some(view)
    });
    if profile.scores.iter().any(|(s, _)| s.normalizes()) {
        return best_normalized(profile, pod, cycle, feasible.collect());
    }
    let mut best: Option<(i64, NodeId)> = None;
    for view in feasible {
        let score: i64 = profile
            .scores
            .iter()
            .map(|(s, w)| w * s.score(pod, cycle, view))
            .sum();
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, view.id));
        }
    }
    best.map(|(_, id)| id)
}

/// The slow path for profiles with a normalizing scorer: every plugin scores every
/// feasible node, normalizes, then the weighted sums are compared.
fn best_normalized(
    profile: &Profile,
    pod: &PodContext,
    cycle: &CycleState,
    feasible: Vec<NodeView>,
) -> Option<NodeId> {
    let mut totals = vec![0i64; feasible.len()];
    let mut scores = vec![0i64; feasible.len()];
    for (plugin, weight) in &profile.scores {
        for (slot, view) in scores.iter_mut().zip(&feasible) {
            *slot = plugin.score(pod, cycle, *view);
        }
        if plugin.normalizes() {
            plugin.normalize(&mut scores);
        }
        for (total, score) in totals.iter_mut().zip(&scores) {
            *total += weight * score;
        }
    }
    let best = (0..feasible.len()).max_by(|&a, &b| totals[a].cmp(&totals[b]).then(b.cmp(&a)))?;
    Some(feasible[best].id)
}

/// Why a job cannot be placed now, node by node, in kube-scheduler's words. Only called
/// when a world wants the message: the search itself never pays for it.
pub fn diagnose(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
) -> Diagnosis {
    let spec = snapshot.spec();
    let mut diagnosis = Diagnosis {
        nodes: spec.nodes.len() as u32,
        ..Diagnosis::default()
    };
    let Some(request) = job.pods.first() else {
        return Diagnosis::job_level(Status::unresolvable("job has no pods"));
    };
    let pod = PodContext {
        job,
        index: 0,
        request,
    };
    let pools = pools_for(job, snapshot);
    let outside_pools = spec
        .nodes
        .iter()
        .filter(|n| !pools.contains(&n.pool))
        .count() as u32;
    if outside_pools > 0 {
        diagnosis.add(
            "node(s) didn't match the job's GPU model".into(),
            outside_pools,
        );
    }
    for &pool in &pools {
        for &id in &spec.pool(pool).nodes {
            let view = NodeView {
                id,
                spec: spec.node(id),
                state: snapshot.node(id),
            };
            match profile
                .filters
                .iter()
                .map(|f| f.filter(&pod, state, view))
                .find(|s| !s.is_success())
            {
                Some(status) => diagnosis.add(status.reason, 1),
                None => diagnosis.add("node(s) could not hold the whole gang".into(), 1),
            }
        }
    }
    diagnosis
}
