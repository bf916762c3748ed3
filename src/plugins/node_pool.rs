//! `node-pool` (PreFilter, Filter): a job only goes to the pools of the GPU models it
//! accepts, and a job no such pool could ever hold is unresolvable, not merely waiting.

use crate::cache::ClusterState;
use crate::framework::{
    CycleState, Filter, NodeView, Plugin, PodContext, PreFilter, Status, pools_for,
};
use crate::model::{Job, pods_that_fit};

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
        // the widest size are counted against the pool's node sizes.
        let widest_pod = job.pods.iter().map(|p| p.gpu.whole()).max().unwrap_or(0);
        let fits_some_pool = pools.iter().any(|&p| {
            let pool = spec.pool(p);
            let capacity: u64 = u64::from(snapshot.pool(p).gpus) * 1000;
            pods_that_fit(&pool.node_sizes, widest_pod) >= job.pods.len() as u64
                && capacity >= job.total_milli()
        });
        if fits_some_pool {
            Status::SUCCESS
        } else {
            Status::unresolvable(format!(
                "no node pool of the job's GPU models can ever hold {} pods of {} GPUs",
                job.pods.len(),
                job.pods.first().map_or("0".into(), |p| p.gpu.to_string())
            ))
        }
    }
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
