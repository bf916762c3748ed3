//! `e-binpack` (GroupScore, Score): Kant's enhanced binpack, at two levels.
//!
//! - Leaf group: small jobs gather in a few groups, so that the others can drain whole.
//!   - A pod smaller than a node goes first to the groups that have a partly used node
//!     with room for it (filling a hole rather than breaking a free node; a fraction goes
//!     to a group with a shared device it fits on before any other), and among
//!     those, as among the rest, to the groups where pods that share their nodes already
//!     hold the most GPUs, not merely the busiest: a group busy with gangs that end
//!     whole, and that one small pod with hours left would keep from ever being free for
//!     a gang that needs all of it, is the last place for it. A block of nodes outside
//!     every leaf keeps no network domain whole: there a group with a partly used node
//!     the pod fills exactly comes before the others with a hole.
//!   - A job whose pods take whole nodes goes to the busiest groups, keeping whole
//!     groups free for larger ones.
//! - Node: a pod joins a node that already holds a pod of its own job (cutting cross-node
//!   traffic), else the node that could hold the most of the job's pods still to place
//!   as wide as this one (so that a gang of pods narrower than a node takes the fewest
//!   nodes, in a pool of nodes of several sizes too), and among those the node it fills
//!   best (the least left over); a fraction, a node with a shared device it fits on
//!   before any other, so that it breaks no whole GPU.

use crate::cache::GpuAggregate;
use crate::framework::{
    CycleState, GroupQuery, GroupScore, MAX_NODE_SCORE, NodeView, Plugin, PodContext, Score,
};
use crate::model::{GpuRequest, GroupId, MILLI_PER_GPU};

use super::utilization;

pub struct EBinpack;

impl Plugin for EBinpack {
    fn name(&self) -> &'static str {
        "e-binpack"
    }
}

/// Nodes of the aggregate that are partly used and have at least `k` free whole devices.
fn partly_used_with_room(aggregate: &GpuAggregate, k: u32) -> u32 {
    let with_room: u32 = (aggregate.free_histogram_to_top().get(k as usize..))
        .map_or(0, |levels| levels.iter().sum());
    with_room.saturating_sub(aggregate.free_nodes)
}

/// Whether a pod of `gpu` is narrower than the aggregate's nodes, against their average
/// size: exact where they are all alike.
pub(super) fn narrower_than_nodes(gpu: GpuRequest, aggregate: &GpuAggregate) -> bool {
    gpu.milli() * u64::from(aggregate.nodes) < u64::from(aggregate.gpus) * u64::from(MILLI_PER_GPU)
}

/// What a group with a hole for a small pod scores above one without, out of
/// `MAX_NODE_SCORE`; the rest ranks groups by how much small pods already hold there.
const HOLE: i64 = MAX_NODE_SCORE / 4;

/// What a group outside every leaf with a node a small pod fills exactly scores above one
/// with only other holes for it.
const SNUG: i64 = MAX_NODE_SCORE / 4;

impl GroupScore for EBinpack {
    fn score_group(
        &self,
        query: &GroupQuery,
        _: &CycleState,
        group: GroupId,
        aggregate: &GpuAggregate,
    ) -> i64 {
        let capacity = u64::from(aggregate.gpus) * u64::from(MILLI_PER_GPU);
        if capacity == 0 {
            return 0;
        }
        // The narrowest pod with GPUs (a launcher without GPUs goes where its workers go).
        let narrowest = query.widths.narrowest_gpu;
        let shares_nodes = narrowest.is_none_or(|gpu| narrower_than_nodes(gpu, aggregate));
        if shares_nodes {
            let fits = narrowest.map_or(1, |gpu| gpu.whole().max(1));
            let hole = partly_used_with_room(aggregate, fits) > 0;
            // A block of nodes outside every leaf keeps nothing whole that a gang could use
            // better: there a pod goes first to a node it fills exactly.
            let leafless = query.spec.group(group).leaf.is_none();
            let snug_weight = if leafless { SNUG } else { 0 };
            let free = aggregate.free_histogram_to_top();
            let snug = hole && free.get(fits as usize).is_some_and(|&nodes| nodes > 0);
            let sharing = utilization::scale(aggregate.sharing_milli, capacity);
            let score = i64::from(hole) * HOLE
                + i64::from(snug) * snug_weight
                + sharing * (MAX_NODE_SCORE - HOLE - snug_weight) / MAX_NODE_SCORE;
            match narrowest {
                // A fraction goes first where a shared device has room for it: it breaks
                // no whole GPU there.
                Some(GpuRequest::Fraction(milli)) => {
                    i64::from(aggregate.has_shared_room(milli)) * (MAX_NODE_SCORE / 2) + score / 2
                }
                _ => score,
            }
        } else {
            utilization::group_used(aggregate)
        }
    }
}

impl Score for EBinpack {
    fn score(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> i64 {
        if pod.shares_node(node.id) {
            return MAX_NODE_SCORE;
        }
        let packed = utilization::packed_after(pod, node);
        // The node that would hold the most of the job's pods still to place comes first
        // (a gang of narrow pods takes the fewest nodes), then the one it fills best: the
        // two read as one number, `held` counting by `PACKED` steps.
        const PACKED: i64 = MAX_NODE_SCORE + 1;
        let (held, most) = pods_held_here(pod, node);
        ((held - 1) * PACKED + packed) * (MAX_NODE_SCORE - 10) / (most * PACKED - 1)
    }
}

/// How many of the job's pods still to place as wide as this one (this one included) the
/// node could hold, and the most the largest node of its pool could (so that in a pool of
/// nodes of several sizes a node holding more of them comes first, however full one pod
/// leaves a smaller node): both 1 for the last such pod, a pod that is not of whole GPUs,
/// or one no node of the pool holds two of.
fn pods_held_here(pod: &PodContext, node: NodeView) -> (i64, i64) {
    let width = pod.request.gpu.whole();
    let left = pod.alike_left;
    let per_node = node.pool.gpus_per_node / width.max(1);
    if width == 0 || left <= 1 || per_node <= 1 {
        return (1, 1);
    }
    let most = left.min(per_node);
    let held = (node.state.free_whole_count() / width).clamp(1, most);
    (i64::from(held), i64::from(most))
}
