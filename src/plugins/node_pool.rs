//! `node-pool` (PreFilter, Filter): a job's pods with GPUs only go to the pools of the GPU
//! models it accepts (its pods without, such as a gang's launcher, go to any node their
//! own rules allow), and a job no such pool could ever hold (nor, with a required topology tier,
//! any one domain of that tier) is unresolvable, not merely waiting.

use crate::cache::ClusterState;
use crate::framework::{
    CycleState, Filter, NodeView, Plugin, PodContext, PreFilter, Status, pools_for,
    some_domain_could_hold,
};
use crate::model::{Job, JobShape, Pool};

pub struct NodePool;

impl Plugin for NodePool {
    fn name(&self) -> &'static str {
        "node-pool"
    }
}

impl PreFilter for NodePool {
    fn pre_filter(&self, job: &Job, snapshot: &ClusterState, _state: &mut CycleState) -> Status {
        let pools = pools_for(job, snapshot);
        let spec = snapshot.spec();
        let shape = JobShape::of(job);
        let fits_some_pool = pools.iter().any(|&p| shape.fits(&spec.pool(p).node_sizes));
        if !fits_some_pool {
            if let Some(uncarried) = uncarried_models(job, snapshot) {
                return Status::unresolvable(uncarried);
            }
            let widest = job.pods.iter().map(|p| p.gpu).max_by_key(|g| g.milli());
            let alike = job.pods.iter().all(|p| Some(p.gpu) == widest);
            let pods = match job.pods.len() {
                1 => "1 pod".to_owned(),
                n => format!("{n} pods"),
            };
            let gpus = match widest.filter(|g| !g.is_none()) {
                None => "without GPUs".to_owned(),
                Some(g) if alike => format!("of {g} GPUs"),
                Some(g) => format!("of up to {g} GPUs"),
            };
            return Status::unresolvable(format!(
                "no node pool of the job's GPU models can ever hold {pods} {gpus}"
            ));
        }
        match job.topology.filter(|need| need.required) {
            Some(need) if !some_domain_could_hold(&shape, snapshot, pools, need.tier, None) => {
                Status::unresolvable(format!(
                    "no {} of the job's node pools can ever hold its {} GPUs (required:{})",
                    need.tier.name(),
                    job.total_milli().div_ceil(1000),
                    need.tier.name()
                ))
            }
            _ => Status::SUCCESS,
        }
    }
}

/// Where the job names GPU models and no node carries any of them (a misspelt model, or
/// nodes not yet joined): which, with those the nodes do carry.
fn uncarried_models(job: &Job, snapshot: &ClusterState) -> Option<String> {
    let spec = snapshot.spec();
    let carried = |p: &Pool| !p.nodes.is_empty();
    let named = job.pools.iter().map(|&p| spec.pool(p));
    if job.pools.is_empty() || named.clone().any(carried) {
        return None;
    }
    let quoted = |pools: &mut dyn Iterator<Item = &Pool>| {
        let models = pools.filter_map(|p| p.gpu_model.as_deref());
        models
            .map(|m| format!("{m:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let names = quoted(&mut named.clone());
    let others = quoted(&mut spec.pools.iter().filter(|p| carried(p)));
    let model = if job.pools.len() == 1 {
        "model"
    } else {
        "models"
    };
    Some(match others.is_empty() {
        true => format!("no node carries the job's GPU {model} {names}, nor any other GPU"),
        false => format!("no node carries the job's GPU {model} {names} (nodes carry {others})"),
    })
}

impl Filter for NodePool {
    fn filter(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> Status {
        let gpuless = pod.request.gpu.is_none();
        if gpuless || (node.spec.gpus() > 0 && pod.job.accepts_pool(node.spec.pool)) {
            Status::SUCCESS
        } else {
            Status::unresolvable("node(s) didn't match the job's GPU model")
        }
    }
}
