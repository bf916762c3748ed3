//! `resource-fit` (PreFilter, Filter): the job's pools hold enough free whole GPUs, each
//! group and node has room for a pod's whole GPUs, CPU and memory. Unknown node CPU or
//! memory counts as unlimited. Device-level choice is `gpu-devices`' concern.

use crate::cache::{ClusterState, GpuAggregate};
use crate::framework::{
    CycleState, Filter, NodeView, Plugin, PodContext, PreFilter, Status, pools_for,
};
use crate::model::{GroupId, Job};

pub struct ResourceFit;

impl Plugin for ResourceFit {
    fn name(&self) -> &'static str {
        "resource-fit"
    }
}

/// The fewest whole GPUs any pod of the job needs.
fn narrowest_pod(job: &Job) -> u32 {
    job.pods.iter().map(|p| p.gpu.whole()).min().unwrap_or(0)
}

impl PreFilter for ResourceFit {
    fn pre_filter(&self, job: &Job, snapshot: &ClusterState, _state: &mut CycleState) -> Status {
        let needed: u64 = job.pods.iter().map(|p| u64::from(p.gpu.whole())).sum();
        if needed == 0 {
            return Status::SUCCESS;
        }
        let free: u64 = pools_for(job, snapshot)
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

impl Filter for ResourceFit {
    fn filter_group(
        &self,
        job: &Job,
        _state: &CycleState,
        _group: GroupId,
        aggregate: &GpuAggregate,
    ) -> Status {
        if aggregate.max_free_on_node() >= narrowest_pod(job) {
            Status::SUCCESS
        } else {
            Status::unschedulable("Insufficient nvidia.com/gpu")
        }
    }

    fn filter(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> Status {
        let request = pod.request;
        if node.state.free_whole_count() < request.gpu.whole() {
            return Status::unschedulable("Insufficient nvidia.com/gpu");
        }
        let fits = |capacity: Option<u64>, used: u64, asked: u64| {
            capacity.is_none_or(|c| used + asked <= c)
        };
        if !fits(node.spec.cpu_milli, node.state.cpu_used, request.cpu_milli) {
            return Status::unschedulable("Insufficient cpu");
        }
        if !fits(
            node.spec.memory_mib,
            node.state.memory_used,
            request.memory_mib,
        ) {
            return Status::unschedulable("Insufficient memory");
        }
        Status::SUCCESS
    }
}
