//! How full a node or group would be, shared by the `binpack` and `spread` scorers.

use crate::cache::GpuAggregate;
use crate::framework::{MAX_NODE_SCORE, NodeView, PodContext};
use crate::model::GpuRequest;

/// The node's utilization after the pod lands, scaled to `0..=MAX_NODE_SCORE`: GPUs for a
/// GPU pod, else CPU (or the pod count, when the node's CPU is unknown).
pub fn node_after(pod: &PodContext, node: NodeView) -> i64 {
    let request = pod.request;
    let (used, capacity) = if request.gpu.milli() > 0 {
        (
            node.state.used_milli() + request.gpu.milli(),
            node.spec.gpu_capacity_milli(),
        )
    } else {
        match node.spec.cpu_milli {
            Some(cpu) if cpu > 0 => (node.state.cpu_used + request.cpu_milli, cpu),
            _ => (
                u64::from(node.state.pods) + 1,
                u64::from(node.state.pods) + 2,
            ),
        }
    };
    scale(used, capacity)
}

/// How well the pod packs the node, `0..=MAX_NODE_SCORE`: [`node_after`], except that a
/// fractional pod ranks the nodes with a shared device it fits on (where it breaks no
/// whole GPU) in the upper half, above every node where it would open a fresh device.
pub fn packed_after(pod: &PodContext, node: NodeView) -> i64 {
    let after = node_after(pod, node);
    let GpuRequest::Fraction(milli) = pod.request.gpu else {
        return after;
    };
    let half = MAX_NODE_SCORE / 2;
    if node.state.shared_with_room(milli).next().is_some() {
        half + after * (MAX_NODE_SCORE - half) / MAX_NODE_SCORE
    } else {
        after * (half - 1) / MAX_NODE_SCORE
    }
}

/// The share of a group's GPUs already assigned, `0..=MAX_NODE_SCORE`.
pub fn group_used(aggregate: &GpuAggregate) -> i64 {
    scale(
        aggregate.used_milli,
        u64::from(aggregate.gpus) * u64::from(crate::model::MILLI_PER_GPU),
    )
}

/// `used` of `capacity`, scaled to `0..=MAX_NODE_SCORE` (0 for no capacity).
pub fn scale(used: u64, capacity: u64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    (used.min(capacity) as u128 * MAX_NODE_SCORE as u128 / capacity as u128) as i64
}
