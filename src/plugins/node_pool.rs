//! `node-pool` (PreFilter, Filter): a job only goes to the pools of the GPU models it
//! accepts, and a job no such pool could ever hold (nor, with a required topology tier,
//! any one domain of that tier) is unresolvable, not merely waiting.

use crate::cache::ClusterState;
use crate::framework::{
    CycleState, Filter, NodeView, Plugin, PodContext, PreFilter, Status, pools_for,
    some_domain_could_hold,
};
use crate::model::{GpuRequest, Job, MILLI_PER_GPU, pods_that_fit};

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
        // Whether the pool, all free, would hold every pod, each inside one node: pods of
        // the widest size are counted against the pool's node sizes, and the job's devices
        // against the pool's.
        let widest_pod = job.pods.iter().map(|p| p.gpu.whole()).max().unwrap_or(0);
        let devices = fewest_devices(job);
        let fits_some_pool = pools.iter().any(|&p| {
            let pool = spec.pool(p);
            pods_that_fit(&pool.node_sizes, widest_pod) >= job.pods.len() as u64
                && u64::from(snapshot.pool(p).gpus) >= devices
        });
        if !fits_some_pool {
            return Status::unresolvable(format!(
                "no node pool of the job's GPU models can ever hold {} pods of {} GPUs",
                job.pods.len(),
                job.pods.first().map_or("0".into(), |p| p.gpu.to_string())
            ));
        }
        match job.topology.filter(|need| need.required) {
            Some(need) if !some_domain_could_hold(job, snapshot, &pools, need.tier) => {
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

/// The fewest devices that could ever hold the job: its whole GPUs, and for its fractional
/// pods the most that any size forces (pods of at least `m` milli-GPUs share a device at
/// most `1000 / m` at a time), or their total, whichever is more.
fn fewest_devices(job: &Job) -> u64 {
    let whole: u64 = job.pods.iter().map(|p| u64::from(p.gpu.whole())).sum();
    let mut fractions: Vec<u32> = job
        .pods
        .iter()
        .filter_map(|p| match p.gpu {
            GpuRequest::Fraction(milli) => Some(milli),
            GpuRequest::Whole(_) => None,
        })
        .collect();
    fractions.sort_unstable_by(|a, b| b.cmp(a));
    let by_size = fractions
        .iter()
        .enumerate()
        .map(|(larger, &milli)| (larger as u64 + 1).div_ceil(u64::from(MILLI_PER_GPU / milli)));
    let total = fractions
        .iter()
        .map(|&m| u64::from(m))
        .sum::<u64>()
        .div_ceil(u64::from(MILLI_PER_GPU));
    whole + by_size.chain([total]).max().unwrap_or(0)
}

impl Filter for NodePool {
    fn filter(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> Status {
        let gpu_ok = pod.request.gpu.is_none() || node.spec.gpus() > 0;
        if gpu_ok && pod.job.accepts_pool(node.spec.pool) {
            Status::SUCCESS
        } else {
            Status::unresolvable("node(s) didn't match the job's GPU model")
        }
    }
}
