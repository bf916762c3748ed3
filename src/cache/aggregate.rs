//! Aggregates of node states over a group, a pool or the whole cluster, kept up to date by
//! subtracting a node's old contribution and adding its new one on every change.

use crate::model::{MAX_GPUS_PER_NODE, Milli};

use super::NodeState;

/// What the first level of the search reads instead of visiting nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuAggregate {
    pub nodes: u32,
    /// GPU devices in all.
    pub gpus: u32,
    /// Healthy devices with nothing assigned.
    pub free_gpus: u32,
    /// Nodes whose every device is free and healthy.
    pub free_nodes: u32,
    /// `free_histogram[k]`: nodes with exactly `k` free whole devices.
    pub free_histogram: [u32; MAX_GPUS_PER_NODE + 1],
    /// Bit `k` set: `free_histogram[k]` is above 0. Its readers skip the histogram's empty
    /// top (it has room for nodes of 32 GPUs; most have 8) by it.
    pub free_levels: u64,
    /// Milli-GPUs assigned.
    pub used_milli: u64,
    /// Of `used_milli`, what pods that share their node hold (pods holding less than every
    /// device of it).
    pub sharing_milli: u64,
    /// Nodes with assigned milli-GPUs above 0 and below capacity.
    pub fragmented_nodes: u32,
    /// `nvlink_histogram[k]`: nodes whose largest NVLink-connected set of free devices
    /// has exactly `k` devices.
    pub nvlink_histogram: [u32; MAX_GPUS_PER_NODE + 1],
    /// Bit `k` set: `nvlink_histogram[k]` is above 0.
    pub nvlink_levels: u64,
    /// The most milli-GPUs free on one shared device (healthy and partly assigned) of any
    /// node, 0 when none has one. Removing a node cannot lower it (the next roomiest node
    /// is not known here): `ClusterState` works it out anew when the last node that had it
    /// loses it (`shared_room_at_max` reaches 0).
    pub shared_room_max: Milli,
    /// The nodes whose roomiest shared device has `shared_room_max` free (0 with it), so
    /// that many nodes at the most room are not each a rescan when they fill.
    pub shared_room_at_max: u32,
    /// Milli-GPUs free on healthy devices that are partly assigned.
    pub shared_room_milli: u64,
}

impl Default for GpuAggregate {
    fn default() -> Self {
        Self {
            nodes: 0,
            gpus: 0,
            free_gpus: 0,
            free_nodes: 0,
            free_histogram: [0; MAX_GPUS_PER_NODE + 1],
            free_levels: 0,
            used_milli: 0,
            sharing_milli: 0,
            fragmented_nodes: 0,
            nvlink_histogram: [0; MAX_GPUS_PER_NODE + 1],
            nvlink_levels: 0,
            shared_room_max: 0,
            shared_room_at_max: 0,
            shared_room_milli: 0,
        }
    }
}

impl GpuAggregate {
    /// Adds (`sign` = 1) or removes (`sign` = -1) one node's contribution.
    pub(super) fn apply(&mut self, node: &NodeState, sign: i64) {
        let step = |value: &mut u32, by: u32| {
            *value = (i64::from(*value) + sign * i64::from(by)) as u32;
        };
        let free = node.free_whole_count();
        step(&mut self.nodes, 1);
        step(&mut self.gpus, node.device_count());
        step(&mut self.free_gpus, free);
        step(&mut self.free_nodes, u32::from(node.is_fully_free()));
        step(&mut self.free_histogram[free as usize], 1);
        mark_level(&mut self.free_levels, &self.free_histogram, free);
        step(&mut self.fragmented_nodes, u32::from(node.is_fragmented()));
        let island = node.nvlink_island();
        step(&mut self.nvlink_histogram[island as usize], 1);
        mark_level(&mut self.nvlink_levels, &self.nvlink_histogram, island);
        let (roomiest, room) = node.shared_room();
        if roomiest > 0 {
            match (sign > 0, roomiest.cmp(&self.shared_room_max)) {
                (true, std::cmp::Ordering::Greater) => {
                    (self.shared_room_max, self.shared_room_at_max) = (roomiest, 1);
                }
                (_, std::cmp::Ordering::Equal) => step(&mut self.shared_room_at_max, 1),
                _ => {}
            }
        }
        self.shared_room_milli = (self.shared_room_milli as i64 + sign * i64::from(room)) as u64;
        self.used_milli = (self.used_milli as i64 + sign * node.used_milli() as i64) as u64;
        self.sharing_milli =
            (self.sharing_milli as i64 + sign * node.sharing_milli() as i64) as u64;
    }

    /// How many pods of `per_pod` whole GPUs fit on free devices, each pod inside one node.
    #[inline]
    pub fn pods_that_fit(&self, per_pod: u32) -> u64 {
        crate::model::pods_that_fit(self.free_histogram_to_top(), per_pod)
    }

    /// `free_histogram` up to its highest level with a node: the nodes with `k` free whole
    /// devices or more are the sum from `k`.
    #[inline]
    pub fn free_histogram_to_top(&self) -> &[u32] {
        &self.free_histogram[..=self.max_free_on_node() as usize]
    }

    /// The most free devices connected by NVLink on any one node.
    #[inline]
    pub fn max_nvlink_island(&self) -> u32 {
        top_level(self.nvlink_levels)
    }

    /// Whether some node has a shared device with room for a fraction of `milli` (above
    /// 0), exactly.
    pub fn has_shared_room(&self, milli: Milli) -> bool {
        milli <= self.shared_room_max
    }

    /// The most free whole devices on any one node.
    #[inline]
    pub fn max_free_on_node(&self) -> u32 {
        top_level(self.free_levels)
    }
}

/// Sets or clears bit `level` of `levels` by whether `histogram[level]` is above 0.
fn mark_level(levels: &mut u64, histogram: &[u32], level: u32) {
    let bit = 1u64 << level;
    match histogram[level as usize] {
        0 => *levels &= !bit,
        _ => *levels |= bit,
    }
}

/// The highest level set (0 when none is).
fn top_level(levels: u64) -> u32 {
    63u32.saturating_sub(levels.leading_zeros())
}
