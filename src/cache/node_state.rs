//! The changing part of one node: milli-GPUs in use per device (and how much of it pods
//! that share the node hold), device health, CPU, memory and ephemeral storage in use,
//! and its pods. Fixed-size and `Copy`, so the persistent array that holds it copies a
//! leaf with plain memory moves.

use crate::model::{MAX_GPUS_PER_NODE, MILLI_PER_GPU, Milli, NodeSpec};

use super::Placement;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeState {
    /// Milli-GPUs assigned on each device.
    used: [u16; MAX_GPUS_PER_NODE],
    /// Devices with anything assigned.
    busy: u32,
    /// Devices that must take no new pod.
    unhealthy: u32,
    /// Devices in the node (a mask).
    devices: u32,
    /// Milli-GPUs assigned on the whole node: the sum of `used`.
    used_total: u32,
    /// Of `used_total`, what pods holding less than every device of the node hold (at most
    /// 32,000, so a `u16`, which keeps the state from growing).
    sharing: u16,
    pub cpu_used: u64,
    pub memory_used: u64,
    pub ephemeral_used: u64,
    pub pods: u32,
    /// The most free devices connected by NVLink (kept by the cache on every change).
    nvlink_island: u8,
}

impl NodeState {
    pub fn new(spec: &NodeSpec) -> Self {
        Self {
            used: [0; MAX_GPUS_PER_NODE],
            busy: 0,
            unhealthy: spec.unhealthy,
            devices: spec.all_devices(),
            used_total: 0,
            sharing: 0,
            cpu_used: 0,
            memory_used: 0,
            ephemeral_used: 0,
            pods: 0,
            nvlink_island: spec
                .links
                .largest_nvlink_island(spec.all_devices() & !spec.unhealthy)
                as u8,
        }
    }

    /// Devices that are healthy and entirely unassigned.
    #[inline]
    pub fn free_whole(&self) -> u32 {
        self.devices & !self.busy & !self.unhealthy
    }

    /// Devices with anything assigned.
    #[inline]
    pub fn busy(&self) -> u32 {
        self.busy
    }

    /// Devices that take no new pod.
    #[inline]
    pub fn unhealthy(&self) -> u32 {
        self.unhealthy
    }

    /// The most free devices connected by NVLink.
    #[inline]
    pub fn nvlink_island(&self) -> u32 {
        u32::from(self.nvlink_island)
    }

    pub(super) fn set_nvlink_island(&mut self, size: u32) {
        self.nvlink_island = size as u8;
    }

    #[inline]
    pub fn free_whole_count(&self) -> u32 {
        self.free_whole().count_ones()
    }

    /// Whether every device is free and healthy (a node with GPUs only).
    #[inline]
    pub fn is_fully_free(&self) -> bool {
        self.devices != 0 && self.free_whole() == self.devices
    }

    #[inline]
    pub fn device_used(&self, device: usize) -> Milli {
        Milli::from(self.used[device])
    }

    #[inline]
    pub fn device_count(&self) -> u32 {
        self.devices.count_ones()
    }

    /// Its pod slots, CPU, memory and ephemeral storage in use, in
    /// [`NodeSpec::allocatable`]'s order.
    #[inline]
    pub fn in_use(&self) -> [u64; 4] {
        [
            u64::from(self.pods),
            self.cpu_used,
            self.memory_used,
            self.ephemeral_used,
        ]
    }

    /// Milli-GPUs assigned on the whole node.
    #[inline]
    pub fn used_milli(&self) -> u64 {
        u64::from(self.used_total)
    }

    /// Milli-GPUs assigned to pods that hold less than every device of the node (pods that
    /// share it), as opposed to pods that have the node to themselves.
    #[inline]
    pub fn sharing_milli(&self) -> u64 {
        u64::from(self.sharing)
    }

    /// Whether a placement leaves room on the node for other pods' GPUs. Judged against
    /// every device of the node: on a node with an unhealthy device, a pod holding all
    /// the healthy ones still counts as sharing it, as the node cannot take a whole-node
    /// pod either.
    fn shares_node(&self, p: &Placement) -> bool {
        p.gpus.devices != self.devices || p.gpus.milli_each < MILLI_PER_GPU
    }

    /// Something assigned, and room left for more: a healthy device free, or one shared
    /// with room. A node whose only free devices are unhealthy strands nothing.
    pub fn is_fragmented(&self) -> bool {
        self.used_milli() > 0 && (self.free_whole() != 0 || self.shared_room().1 > 0)
    }

    /// Free milli-GPUs on the healthy devices that are partly assigned: on the roomiest
    /// one, and on all of them together (0 and 0: none).
    pub fn shared_room(&self) -> (Milli, Milli) {
        if self.used_total == self.busy.count_ones() * MILLI_PER_GPU {
            // Every device in use is full: the common case of whole GPUs, read at once.
            return (0, 0);
        }
        crate::model::bits(self.busy & !self.unhealthy)
            .map(|d| MILLI_PER_GPU - self.device_used(d))
            .fold((0, 0), |(most, all), room| (most.max(room), all + room))
    }

    /// Healthy shared devices that still have room for `milli`, with their use.
    pub fn shared_with_room(&self, milli: Milli) -> impl Iterator<Item = (usize, Milli)> + '_ {
        crate::model::bits(self.busy & !self.unhealthy)
            .map(|d| (d, self.device_used(d)))
            .filter(move |&(_, used)| used + milli <= MILLI_PER_GPU)
    }

    /// Whether `milli` on each device of `set` fits without sharing a whole-GPU device or
    /// going past a device's capacity (on healthy devices only, if `healthy_only`).
    pub fn can_take(&self, set: u32, milli: Milli, healthy_only: bool) -> bool {
        if set & !self.devices != 0 || (healthy_only && set & self.unhealthy != 0) {
            return false;
        }
        crate::model::bits(set).all(|d| {
            let used = self.device_used(d);
            if milli == MILLI_PER_GPU {
                used == 0
            } else {
                used + milli <= MILLI_PER_GPU
            }
        })
    }

    /// Takes what a placement on this node holds.
    pub(super) fn add(&mut self, p: &Placement) {
        for d in crate::model::bits(p.gpus.devices) {
            self.used[d] += p.gpus.milli_each as u16;
            self.used_total += p.gpus.milli_each;
        }
        self.busy |= p.gpus.devices;
        if self.shares_node(p) {
            self.sharing += p.gpus.total_milli() as u16;
        }
        // Saturating: pods adopted on a node of unknown capacity may ask for absurd sums.
        self.cpu_used = self.cpu_used.saturating_add(p.cpu_milli);
        self.memory_used = self.memory_used.saturating_add(p.memory_bytes);
        self.ephemeral_used = self.ephemeral_used.saturating_add(p.ephemeral_bytes);
        self.pods += 1;
    }

    /// Returns what a placement on this node held.
    pub(super) fn remove(&mut self, p: &Placement) {
        for d in crate::model::bits(p.gpus.devices) {
            self.used[d] -= p.gpus.milli_each as u16;
            self.used_total -= p.gpus.milli_each;
            if self.used[d] == 0 {
                self.busy &= !(1 << d);
            }
        }
        if self.shares_node(p) {
            self.sharing -= p.gpus.total_milli() as u16;
        }
        self.cpu_used = self.cpu_used.saturating_sub(p.cpu_milli);
        self.memory_used = self.memory_used.saturating_sub(p.memory_bytes);
        self.ephemeral_used = self.ephemeral_used.saturating_sub(p.ephemeral_bytes);
        self.pods -= 1;
    }

    pub(super) fn set_healthy(&mut self, device: usize, healthy: bool) {
        if healthy {
            self.unhealthy &= !(1 << device);
        } else {
            self.unhealthy |= 1 << device;
        }
    }
}
