//! `binpack` (GroupScore, Score): most-allocated first. Nodes that are already full get the
//! next pod, and busy groups are tried first, so whole nodes and groups stay free for large
//! jobs. A fraction goes first to a node with a shared device it fits on.

use crate::cache::GpuAggregate;
use crate::framework::{CycleState, GroupQuery, GroupScore, NodeView, Plugin, PodContext, Score};
use crate::model::GroupId;

use super::utilization;

pub struct Binpack;

impl Plugin for Binpack {
    fn name(&self) -> &'static str {
        "binpack"
    }
}

impl GroupScore for Binpack {
    fn score_group(
        &self,
        _: &GroupQuery,
        _: &CycleState,
        _: GroupId,
        aggregate: &GpuAggregate,
    ) -> i64 {
        utilization::group_used(aggregate)
    }
}

impl Score for Binpack {
    fn score(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> i64 {
        utilization::packed_after(pod, node)
    }
}
