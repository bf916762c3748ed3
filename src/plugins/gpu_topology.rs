//! `gpu-topology` (Score): inside-node topology across nodes. A multi-GPU pod goes where
//! the best-connected free set is best linked: an all-NVLink set first, then one PCIe
//! switch, then one NUMA node, then across; and to the groups that still have a node with
//! that many NVLink-connected free devices (from their aggregates). Weighted above the
//! packing scorer, link quality comes first and packing breaks ties.

use crate::cache::GpuAggregate;
use crate::framework::{CycleState, MAX_NODE_SCORE, NodeView, Plugin, PodContext, Score};
use crate::model::{GroupId, Job, LinkClass};

pub struct GpuTopology;

impl Plugin for GpuTopology {
    fn name(&self) -> &'static str {
        "gpu-topology"
    }
}

/// The widest multi-GPU pod of the job, if any.
fn widest_multi_gpu_pod(job: &Job) -> Option<u32> {
    job.pods
        .iter()
        .map(|p| p.gpu.whole())
        .max()
        .filter(|&w| w >= 2)
}

impl Score for GpuTopology {
    fn score_group(&self, job: &Job, _: &CycleState, _: GroupId, aggregate: &GpuAggregate) -> i64 {
        match widest_multi_gpu_pod(job) {
            Some(wanted) if aggregate.max_nvlink_island() < wanted => 0,
            _ => MAX_NODE_SCORE,
        }
    }

    fn score(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> i64 {
        let wanted = pod.request.gpu.whole();
        if wanted < 2 || node.state.nvlink_island() >= wanted {
            return MAX_NODE_SCORE;
        }
        let links = &node.spec.links;
        match links.best_set(node.state.free_whole(), wanted) {
            Some(set) => match links.worst_class(set) {
                LinkClass::NvLink => MAX_NODE_SCORE,
                LinkClass::Pcie => MAX_NODE_SCORE * 3 / 5,
                LinkClass::SameNuma => MAX_NODE_SCORE * 3 / 10,
                LinkClass::CrossNuma => 0,
            },
            None => 0,
        }
    }
}
