//! `resource-fit` (PreFilter, GroupFilter, Filter): the job's pools hold enough free whole
//! GPUs, each group and node has room for a pod's whole GPUs, CPU, memory and ephemeral
//! storage, and the node runs fewer pods than its limit. Unknown node CPU, memory,
//! ephemeral storage or pod limit counts as unlimited. The extended resources a job's pods
//! ask for ([`NodeConstraints::extended`]) are accounted like CPU: a node takes a pod only
//! if what it lists, less what placed pods (and the job's pods placed earlier in this
//! attempt) hold, covers the pod. A node that lists too little never takes the pod, and a
//! job that no node of its pools could take is unresolvable; so is a job with a pod asking
//! more CPU, memory or ephemeral storage than any node it may go to allocates, which would
//! otherwise block a strict FIFO queue, or hold room as a backfill head, for good.
//! Device-level choice is `gpu-devices`' concern.

use crate::cache::{ClusterState, GpuAggregate};
use crate::framework::{
    CycleState, Filter, GroupFilter, GroupQuery, NodeView, Plugin, PodContext, PreFilter, Status,
    pools_for,
};
use crate::model::{GroupId, Job, NodeConstraints, Pool, PoolId};

pub struct ResourceFit;

impl Plugin for ResourceFit {
    fn name(&self) -> &'static str {
        "resource-fit"
    }
}

/// The cluster state the cycle started from, kept (an O(1) snapshot) for what placed
/// pods hold of extended resources; written only for jobs that ask for some.
struct HeldBefore(ClusterState);

/// Whether some pod of the job asks for extended resources.
fn asks_extended(job: &Job) -> bool {
    job.all_constraints().any(|c| !c.extended.is_empty())
}

impl PreFilter for ResourceFit {
    fn pre_filter(&self, job: &Job, snapshot: &ClusterState, state: &mut CycleState) -> Status {
        let pools = pools_for(job, snapshot);
        if asks_extended(job) {
            state.write(HeldBefore(snapshot.snapshot()));
            let spec = snapshot.spec();
            let listed_somewhere = |c: &NodeConstraints| {
                pools.iter().any(|&p| {
                    let nodes = &spec.pool(p).nodes;
                    nodes
                        .iter()
                        .any(|&n| c.lacking(&spec.node(n).extended).is_none())
                })
            };
            if let Some(constraints) = job.all_constraints().find(|c| !listed_somewhere(c)) {
                let asked: Vec<String> = constraints
                    .extended
                    .iter()
                    .map(|(name, amount)| format!("{amount} {name}"))
                    .collect();
                return Status::unresolvable(format!(
                    "no node of the job's pools has {} allocatable for each pod",
                    asked.join(" and ")
                ));
            }
        }
        if let Some(resource) = short_on_every_node(job, snapshot, pools) {
            return Status::unresolvable(format!(
                "no node a pod of the job may go to allocates the {resource} it asks"
            ));
        }
        let needed: u64 = job.pods.iter().map(|p| u64::from(p.gpu.whole())).sum();
        if needed == 0 {
            return Status::SUCCESS;
        }
        let free: u64 = pools
            .iter()
            .map(|&p| u64::from(snapshot.pool(p).free_gpus))
            .sum();
        if free >= needed {
            Status::SUCCESS
        } else {
            // A fixed reason: this runs for every waiting job whenever capacity frees.
            Status::unschedulable("Insufficient free nvidia.com/gpu in the job's pools")
        }
    }
}

/// The resource (cpu, memory, ephemeral-storage) some pod of the job asks more of than
/// any node it may go to allocates: a node of `job_pools`, or any node for a gang's pod
/// without GPUs beside pods with GPUs (a launcher).
fn short_on_every_node(
    job: &Job,
    snapshot: &ClusterState,
    job_pools: &[PoolId],
) -> Option<&'static str> {
    let spec = snapshot.spec();
    let has_launchers = job.is_gang() && job.pods.iter().any(|p| !p.gpu.is_none());
    let mut previous = None;
    for pod in &job.pods {
        // A gang's pods mostly ask alike: each request is judged once in a row.
        if previous.replace(pod) == Some(pod) {
            continue;
        }
        let mut short = None;
        let mut fits = |pool: &Pool| {
            let lacking = pool.largest_allocatable.short_of(pod);
            short = short.or(lacking);
            lacking.is_none()
        };
        let fits_somewhere = if pod.gpu.is_none() && has_launchers {
            spec.pools.iter().any(&mut fits)
        } else {
            job_pools.iter().any(|&p| fits(spec.pool(p)))
        };
        if !fits_somewhere && short.is_some() {
            return short;
        }
    }
    None
}

impl GroupFilter for ResourceFit {
    fn filter_group(
        &self,
        query: &GroupQuery,
        _state: &CycleState,
        _group: GroupId,
        aggregate: &GpuAggregate,
    ) -> bool {
        aggregate.max_free_on_node() >= query.widths.narrowest_whole
    }
}

/// Why a node is refused for each of [`crate::model::NodeSpec::allocatable`]'s resources, in
/// kube-scheduler's words.
const SHORT_OF: [&str; 4] = [
    "Too many pods",
    "Insufficient cpu",
    "Insufficient memory",
    "Insufficient ephemeral-storage",
];

impl Filter for ResourceFit {
    fn filter(&self, pod: &PodContext, state: &CycleState, node: NodeView) -> Status {
        let request = pod.request;
        let (spec, usage) = (node.spec, node.state);
        if usage.free_whole_count() < request.gpu.whole() {
            return Status::unschedulable("Insufficient nvidia.com/gpu");
        }
        // No capacity: unlimited.
        let accounted = (spec.allocatable().into_iter())
            .zip(usage.in_use())
            .zip(request.node_asks())
            .zip(SHORT_OF);
        for (((capacity, used), asked), reason) in accounted {
            if capacity.is_some_and(|c| used.saturating_add(asked) > c) {
                return Status::unschedulable(reason);
            }
        }
        match pod.job.constraints_of(pod.index) {
            Some(constraints) if !constraints.extended.is_empty() => {
                extended_fit(constraints, pod, state, node)
            }
            _ => Status::SUCCESS,
        }
    }
}

/// Whether the node's extended resources, less what placed pods hold, cover the pod: a
/// node that lists too little is unresolvable for it, one whose pods hold too much only
/// unschedulable now.
fn extended_fit(
    constraints: &NodeConstraints,
    pod: &PodContext,
    state: &CycleState,
    node: NodeView,
) -> Status {
    if let Some(name) = constraints.lacking(&node.spec.extended) {
        return Status::unresolvable(format!("Insufficient {name}"));
    }
    let held_before = state
        .read::<HeldBefore>()
        .and_then(|h| h.0.extended_used(node.id));
    // The job's pods are looked for only on a node that has some.
    let siblings = if pod.shares_node(node.id) {
        pod.placed
    } else {
        &[]
    };
    let siblings_here: Vec<&NodeConstraints> = (siblings.iter())
        .filter(|(_, p)| p.node == node.id)
        .filter_map(|(key, _)| pod.job.constraints_of(key.pod))
        .collect();
    let short = constraints.extended.iter().find(|&(name, &asked)| {
        let before = held_before.and_then(|h| h.get(name)).copied().unwrap_or(0);
        let siblings: u64 = siblings_here
            .iter()
            .filter_map(|c| c.extended.get(name))
            .sum();
        let listed = node.spec.extended.get(name).copied().unwrap_or(0);
        before.saturating_add(siblings).saturating_add(asked) > listed
    });
    match short {
        Some((name, _)) => Status::unschedulable(format!("Insufficient {name}")),
        None => Status::SUCCESS,
    }
}
