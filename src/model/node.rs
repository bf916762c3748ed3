//! A node as the scheduler sees it: capacity, GPU devices and topology coordinates.

use std::sync::Arc;

use super::{
    ExtendedResources, Labels, LeafId, LinkMatrix, MILLI_PER_GPU, PodRequest, PoolId, Taint,
};

/// The most GPU devices one node may carry (device sets are 32-bit masks).
pub const MAX_GPUS_PER_NODE: usize = 32;

/// Where a node sits in the network: its leaf switch group (identified by the whole
/// superspine/spine/leaf path) and optional scale-up (HBD) domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeTopology {
    pub leaf: Option<LeafId>,
    pub hbd: Option<u32>,
}

/// The immutable description of a node. What changes (usage, device health) lives in the
/// cache's node state.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub name: String,
    /// The GPU model, `None` for a CPU-only node.
    pub gpu_model: Option<String>,
    pub pool: PoolId,
    /// Allocatable CPU in millicores; `None` when unknown (treated as unlimited).
    pub cpu_milli: Option<u64>,
    /// Allocatable memory in bytes; `None` when unknown (treated as unlimited).
    pub memory_bytes: Option<u64>,
    /// Allocatable ephemeral storage in bytes; `None` when unknown (treated as unlimited).
    pub ephemeral_bytes: Option<u64>,
    /// The most pods the node runs; `None` when unknown (unlimited).
    pub max_pods: Option<u32>,
    /// Allocatable extended resources (none in traces); one not listed is 0.
    pub extended: ExtendedResources,
    pub links: Arc<LinkMatrix>,
    pub topology: NodeTopology,
    /// Devices that take no new pod when the node is first seen (a bit per device).
    pub unhealthy: u32,
    /// Kubernetes labels (empty in traces).
    pub labels: Labels,
    /// Kubernetes taints (none in traces).
    pub taints: Vec<Taint>,
}

impl NodeSpec {
    #[inline]
    pub fn gpus(&self) -> usize {
        self.links.devices()
    }

    /// GPU capacity in milli-GPUs.
    #[inline]
    pub fn gpu_capacity_milli(&self) -> u64 {
        self.gpus() as u64 * u64::from(MILLI_PER_GPU)
    }

    /// Mask of all the node's devices.
    #[inline]
    pub fn all_devices(&self) -> u32 {
        device_mask(self.gpus())
    }

    /// Its pod slots, CPU, memory and ephemeral storage (`None`: unknown, no limit).
    #[inline]
    pub fn allocatable(&self) -> [Option<u64>; 4] {
        [
            self.max_pods.map(u64::from),
            self.cpu_milli,
            self.memory_bytes,
            self.ephemeral_bytes,
        ]
    }

    /// How many pods asking `pod` the node, empty, holds at once: as many as each of its
    /// GPUs, CPU, memory, ephemeral storage and pod limit allows (`u64::MAX`: no limit).
    pub fn holds_at_once(&self, pod: &PodRequest) -> u64 {
        self.holds_beside(pod, None).unwrap_or(0)
    }

    /// [`Self::holds_at_once`], with `beside` (a pod without GPUs) on the node too; `None`
    /// where `beside` alone does not fit it.
    pub fn holds_beside(&self, pod: &PodRequest, beside: Option<&PodRequest>) -> Option<u64> {
        let taken = beside.map_or([0; 4], PodRequest::node_asks);
        let mut held = pod.gpu.pods_on(self.gpus() as u64);
        for ((allocatable, taken), asked) in (self.allocatable().into_iter())
            .zip(taken)
            .zip(pod.node_asks())
        {
            // Unknown allocatable, or none of it asked: no limit.
            if let Some(allocatable) = allocatable {
                let left = allocatable.checked_sub(taken)?;
                if let Some(pods) = left.checked_div(asked) {
                    held = held.min(pods);
                }
            }
        }
        Some(held)
    }
}

/// The mask of devices `0..n`.
#[inline]
pub fn device_mask(n: usize) -> u32 {
    if n >= 32 { u32::MAX } else { (1u32 << n) - 1 }
}

/// How many pods of `per_pod` whole GPUs fit on nodes counted by free devices
/// (`histogram[k]`: nodes with `k` free devices), each pod inside one node.
pub fn pods_that_fit(histogram: &[u32], per_pod: u32) -> u64 {
    if per_pod == 0 {
        return u64::MAX;
    }
    histogram
        .iter()
        .enumerate()
        .skip(per_pod as usize)
        .map(|(free, &nodes)| u64::from(nodes) * (free as u64 / u64::from(per_pod)))
        .sum()
}
