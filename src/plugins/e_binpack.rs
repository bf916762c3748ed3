//! `e-binpack` (Score): Kant's enhanced binpack, at two levels.
//!
//! - Leaf group: a pod smaller than a node goes first to the groups that have a partly
//!   used node with room for it, busiest first, so small jobs fill the holes of groups
//!   already in use and whole nodes and whole groups stay free for large jobs. Groups
//!   where the pod would break a free node come after, busiest first.
//! - Node: a pod joins a node that already holds a pod of its own job (cutting cross-node
//!   traffic), else the node it fills best (the least left over).

use crate::cache::GpuAggregate;
use crate::framework::{CycleState, MAX_NODE_SCORE, NodeView, Plugin, PodContext, Score};
use crate::model::{GroupId, Job, MAX_GPUS_PER_NODE};

use super::utilization;

pub struct EBinpack;

impl Plugin for EBinpack {
    fn name(&self) -> &'static str {
        "e-binpack"
    }
}

/// Nodes of the aggregate that are partly used and have at least `k` free whole devices.
fn partly_used_with_room(aggregate: &GpuAggregate, k: u32) -> u32 {
    let with_room: u32 = aggregate.free_histogram[(k as usize).min(MAX_GPUS_PER_NODE)..]
        .iter()
        .sum();
    with_room.saturating_sub(aggregate.free_nodes)
}

impl Score for EBinpack {
    fn score_group(&self, job: &Job, _: &CycleState, _: GroupId, aggregate: &GpuAggregate) -> i64 {
        let half = MAX_NODE_SCORE / 2;
        let busy = utilization::group_used(aggregate) * half / MAX_NODE_SCORE;
        let narrowest = job
            .pods
            .iter()
            .map(|p| p.gpu.whole().max(1))
            .min()
            .unwrap_or(1);
        if partly_used_with_room(aggregate, narrowest) > 0 {
            half + busy
        } else {
            busy
        }
    }

    fn score(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> i64 {
        if pod.shares_node(node.id) {
            return MAX_NODE_SCORE;
        }
        utilization::node_after(pod, node) * (MAX_NODE_SCORE - 10) / MAX_NODE_SCORE
    }
}
