//! `gpu-topology` (GroupScore, Score): inside-node topology across nodes. A multi-GPU pod
//! goes where the best-connected free set is best linked: an all-NVLink set first, then one
//! PCIe switch, then one NUMA node, then across; and to the groups that still have a node
//! with that many NVLink-connected free devices (from their aggregates). Weighted above the
//! packing scorer, link quality comes first and packing breaks ties.

use crate::cache::GpuAggregate;
use crate::framework::{
    CycleState, GroupQuery, GroupScore, MAX_NODE_SCORE, NodeView, Plugin, PodContext, Score,
};
use crate::model::{GroupId, LinkClass};

pub struct GpuTopology;

impl Plugin for GpuTopology {
    fn name(&self) -> &'static str {
        "gpu-topology"
    }
}

impl GroupScore for GpuTopology {
    fn score_group(
        &self,
        query: &GroupQuery,
        _: &CycleState,
        _: GroupId,
        aggregate: &GpuAggregate,
    ) -> i64 {
        // Where the widest pod, if it has two GPUs or more, would get an all-NVLink set.
        let wanted = query.widths.widest_whole;
        if wanted >= 2 && aggregate.max_nvlink_island() < wanted {
            0
        } else {
            MAX_NODE_SCORE
        }
    }
}

impl Score for GpuTopology {
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
