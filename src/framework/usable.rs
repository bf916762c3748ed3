//! The nodes a job may ever use. Some filters refuse a node by its spec alone (node
//! selectors and affinity, untolerated taints, an inference zone closed to training; see
//! [`Filter::judges_spec`]), and such a refusal stands whatever runs there. Whether a job
//! could ever be placed, in its pools or (a gang) inside one domain of a tier it requires,
//! and for a gang the tightest tier it holds out for and the room held for it as a
//! backfill head, are judged on the nodes none of them refuses.

use std::sync::Arc;

use crate::cache::ClusterState;
use crate::model::{Job, JobShape, PoolId, Tier};

use super::plugin::{Filter, NodeView, PodContext};
use super::search::{node_sizes, some_domain_could_hold, tightest_possible_tier};
use super::{CycleState, Diagnosis, Profile, Status, pools_for};

/// What the nodes a job may use could ever hold, all free: judged once per cluster shape.
/// A single pod's is only `never`: one node is inside every domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// `Some`: they can never hold the job, and why.
    pub never: Option<Status>,
    /// Per pool of a gang, the tightest tier with one domain they could hold it in
    /// (`None`: only the whole pool, or not even that).
    tightest: Vec<(PoolId, Option<Tier>)>,
    /// Per node of the cluster, whether the gang may use it; `None`: every node of its
    /// pools.
    pub usable: Option<Vec<bool>>,
}

impl Reach {
    /// The tightest tier one domain of one of `pools` (the job's, or some of them) could
    /// ever hold the gang in (`None`: only whole pools).
    pub fn tightest(&self, pools: &[PoolId]) -> Option<Tier> {
        self.tightest
            .iter()
            .filter(|(pool, _)| pools.contains(pool))
            .filter_map(|&(_, tier)| tier)
            .min()
    }
}

/// Written into the cycle state by the scheduler: what the gang's usable nodes could
/// ever hold. A search without it counts every node of the job's pools.
pub struct ReachOf(pub Arc<Reach>);

/// The job's reach over the nodes of its pools that no spec-judging filter refuses; the
/// cycle state is the one its PreFilters wrote.
pub fn reach(profile: &Profile, job: &Job, snapshot: &ClusterState, cycle: &CycleState) -> Reach {
    let gang = job.pods.len() > 1;
    let pools = pools_for(job, snapshot);
    let shape = JobShape::of(job);
    let spec = snapshot.spec();
    let judges: Vec<&Arc<dyn Filter>> = profile
        .filters
        .iter()
        .filter(|f| f.judges_spec(job, spec, cycle))
        .collect();
    let judged = (!judges.is_empty()).then(|| usable_nodes(job, snapshot, cycle, &pools, &judges));
    let usable = judged.as_ref().map(|(usable, _)| usable.as_slice());
    let tightest = match gang {
        true => pools
            .iter()
            .map(|&p| (p, tightest_possible_tier(&shape, snapshot, &[p], usable)))
            .collect(),
        false => Vec::new(),
    };
    let never = usable.and_then(|usable| {
        let fits_some_pool = pools.iter().any(|&p| {
            let nodes = spec.pool(p).nodes.iter().copied();
            shape.fits(&node_sizes(spec, nodes.filter(|n| usable[n.index()])))
        });
        let required = job.topology.filter(|need| need.required && gang);
        match required {
            _ if !fits_some_pool && !gang => Some("no node it may use can ever hold it"),
            _ if !fits_some_pool => Some("the nodes its pods may use can never hold the whole gang"),
            Some(need)
                if !some_domain_could_hold(&shape, snapshot, &pools, need.tier, Some(usable)) =>
            {
                Some("no one domain of its required tier, of the nodes its pods may use, can ever hold the gang")
            }
            _ => None,
        }
    });
    let (usable, refusals) = judged
        .map(|(usable, refusals)| (usable, refusals.message()))
        .unzip();
    Reach {
        never: never
            .zip(refusals)
            .map(|(why, refusals)| Status::unresolvable(format!("{why}: {refusals}"))),
        tightest,
        usable: usable.filter(|_| gang),
    }
}

/// Per node of the cluster, whether some GPU pod of the job may use it; and the refusals,
/// counted per reason over the nodes of its pools.
fn usable_nodes(
    job: &Job,
    snapshot: &ClusterState,
    cycle: &CycleState,
    pools: &[PoolId],
    judges: &[&Arc<dyn Filter>],
) -> (Vec<bool>, Diagnosis) {
    let spec = snapshot.spec();
    // Pods next to each other with the same node rules are judged once.
    let mut pods: Vec<u32> = Vec::new();
    for (index, request) in job.pods.iter().enumerate() {
        let index = index as u32;
        let same_rules = |p: &u32| match (job.constraints_of(*p), job.constraints_of(index)) {
            (Some(a), Some(b)) => std::ptr::eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        if !request.gpu.is_none() && !pods.last().is_some_and(same_rules) {
            pods.push(index);
        }
    }
    let mut usable = vec![false; spec.nodes.len()];
    let mut refusals = Diagnosis::default();
    for &pool in pools {
        for &id in &spec.pool(pool).nodes {
            let view = NodeView {
                id,
                spec: spec.node(id),
                state: snapshot.node(id),
            };
            let mut refused = None;
            let may_use = |index: &u32| {
                let pod = PodContext {
                    job,
                    index: *index,
                    request: &job.pods[*index as usize],
                    placed: &[],
                    alike_left: 1,
                };
                let status = judges
                    .iter()
                    .map(|f| f.filter(&pod, cycle, view))
                    .find(|s| !s.is_success());
                let passes = status.is_none();
                refused = refused.take().or(status);
                passes
            };
            if pods.iter().any(may_use) {
                usable[id.index()] = true;
                refusals.add("node(s) could not hold the whole gang".into(), 1);
            } else if let Some(status) = refused {
                refusals.add(status.reason, 1);
            }
            refusals.nodes += 1;
        }
    }
    (usable, refusals)
}
