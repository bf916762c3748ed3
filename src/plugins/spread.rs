//! `spread` (GroupScore, Score): least-allocated first, as kube-scheduler does by default:
//! the pod goes where the most is free, and idle groups are tried first.

use crate::cache::GpuAggregate;
use crate::framework::{
    CycleState, GroupQuery, GroupScore, MAX_NODE_SCORE, NodeView, Plugin, PodContext, Score,
};
use crate::model::GroupId;

use super::utilization;

pub struct Spread;

impl Plugin for Spread {
    fn name(&self) -> &'static str {
        "spread"
    }
}

impl GroupScore for Spread {
    fn score_group(
        &self,
        _: &GroupQuery,
        _: &CycleState,
        _: GroupId,
        aggregate: &GpuAggregate,
    ) -> i64 {
        MAX_NODE_SCORE - utilization::group_used(aggregate)
    }
}

impl Score for Spread {
    fn score(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> i64 {
        MAX_NODE_SCORE - utilization::node_after(pod, node)
    }
}
