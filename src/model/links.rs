//! The links between the GPU devices of one node, and the choice of the best-connected set
//! of free devices for a multi-GPU pod.

use std::sync::Arc;

use super::ModelError;

/// How two devices of one node talk, best first. The order is the preference order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinkClass {
    /// Direct NVLink (or through an NVSwitch).
    NvLink = 0,
    /// Behind the same PCIe switch.
    Pcie = 1,
    /// Same NUMA node, through the host bridge.
    SameNuma = 2,
    /// Across the inter-socket link.
    CrossNuma = 3,
}

impl LinkClass {
    pub const ALL: [LinkClass; 4] = [
        LinkClass::NvLink,
        LinkClass::Pcie,
        LinkClass::SameNuma,
        LinkClass::CrossNuma,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LinkClass::NvLink => "nvlink",
            LinkClass::Pcie => "pcie",
            LinkClass::SameNuma => "numa",
            LinkClass::CrossNuma => "cross-numa",
        }
    }
}

/// A named, generated link layout for nodes whose exact matrix is not given (trace nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkProfile {
    /// Every pair on NVLink (an NVSwitch baseboard such as HGX H100): one NUMA node per half.
    NvlinkAll,
    /// NVLink bridges between device pairs (0-1, 2-3, ...), each pair behind its own PCIe
    /// switch, half of the devices on each of two NUMA nodes (PCIe cards with bridges).
    NvlinkPairs,
    /// No NVLink: two devices per PCIe switch, half of the devices on each NUMA node.
    Pcie,
}

/// The link class between every pair of a node's devices, each device's NUMA node and its
/// nearest RDMA NIC. Immutable; nodes of one shape share one matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkMatrix {
    devices: u8,
    classes: Vec<LinkClass>,
    numa: Vec<u8>,
    nic: Vec<u8>,
    /// `within[c][i]`: devices reached from `i` over a link of class `c` or better.
    within: [Vec<u32>; 4],
}

impl LinkMatrix {
    /// Builds a matrix from its full `devices x devices` classes (row-major; the diagonal is
    /// ignored), NUMA node and nearest NIC of each device. Fails, naming `owner`, when the
    /// shape disagrees with the device count or the matrix is not symmetric.
    pub fn new(
        owner: &str,
        devices: usize,
        classes: Vec<LinkClass>,
        numa: Vec<u8>,
        nic: Vec<u8>,
    ) -> Result<Self, ModelError> {
        let err = |m: String| ModelError::new(owner, m);
        if devices > super::MAX_GPUS_PER_NODE {
            return Err(err(format!(
                "{devices} GPUs, more than the {} a node may have",
                super::MAX_GPUS_PER_NODE
            )));
        }
        if classes.len() != devices * devices {
            return Err(err(format!(
                "link matrix has {} entries, a node of {devices} GPUs needs {}",
                classes.len(),
                devices * devices
            )));
        }
        if numa.len() != devices || nic.len() != devices {
            return Err(err(format!(
                "NUMA map has {} entries and NIC map {}, the node has {devices} GPUs",
                numa.len(),
                nic.len()
            )));
        }
        for i in 0..devices {
            for j in 0..i {
                if classes[i * devices + j] != classes[j * devices + i] {
                    return Err(err(format!(
                        "link matrix is not symmetric between GPU {j} and GPU {i}"
                    )));
                }
            }
        }
        let within = LinkClass::ALL.map(|class| {
            (0..devices)
                .map(|i| {
                    (0..devices)
                        .filter(|&j| j == i || classes[i * devices + j] <= class)
                        .fold(0u32, |mask, j| mask | 1 << j)
                })
                .collect()
        });
        Ok(Self {
            devices: devices as u8,
            classes,
            numa,
            nic,
            within,
        })
    }

    /// The generated matrix of a profile for a node of `devices` GPUs. The NIC of a device
    /// is the one on its PCIe switch (one NIC per device pair), or one per device on an
    /// NVSwitch board.
    pub fn from_profile(profile: LinkProfile, devices: usize) -> Result<Self, ModelError> {
        let half = devices.div_ceil(2).max(1);
        let numa: Vec<u8> = (0..devices).map(|i| (i / half) as u8).collect();
        let switch = |i: usize| i / 2;
        let mut classes = Vec::with_capacity(devices * devices);
        for i in 0..devices {
            for j in 0..devices {
                let class = match profile {
                    LinkProfile::NvlinkAll => LinkClass::NvLink,
                    LinkProfile::NvlinkPairs | LinkProfile::Pcie if switch(i) == switch(j) => {
                        if profile == LinkProfile::NvlinkPairs {
                            LinkClass::NvLink
                        } else {
                            LinkClass::Pcie
                        }
                    }
                    _ if numa[i] == numa[j] => LinkClass::SameNuma,
                    _ => LinkClass::CrossNuma,
                };
                classes.push(class);
            }
        }
        let nic = (0..devices)
            .map(|i| match profile {
                LinkProfile::NvlinkAll => i as u8,
                _ => switch(i) as u8,
            })
            .collect();
        Self::new(&format!("{profile:?} profile"), devices, classes, numa, nic)
    }

    pub fn shared(self) -> Arc<Self> {
        Arc::new(self)
    }

    #[inline]
    pub fn devices(&self) -> usize {
        usize::from(self.devices)
    }

    #[inline]
    pub fn class(&self, a: usize, b: usize) -> LinkClass {
        self.classes[a * self.devices() + b]
    }

    /// The RDMA NIC nearest `device`.
    #[inline]
    pub fn nic(&self, device: usize) -> u8 {
        self.nic[device]
    }

    /// The worst link class inside a set of devices (NVLink for a set of one).
    pub fn worst_class(&self, set: u32) -> LinkClass {
        let mut worst = LinkClass::NvLink;
        for a in bits(set) {
            for b in bits(set) {
                if b > a {
                    worst = worst.max(self.class(a, b));
                }
            }
        }
        worst
    }

    /// The best-connected `count` devices among `free` (a bit mask), or `None` when fewer
    /// are free. The set's worst link is as good as any free set allows: the smallest
    /// island of free devices connected at that class is used (best fit, which leaves the
    /// larger islands whole), and inside it devices are added one at a time by the lowest
    /// total link cost to those already chosen.
    pub fn best_set(&self, free: u32, count: u32) -> Option<u32> {
        if count == 0 {
            return Some(0);
        }
        if free.count_ones() < count {
            return None;
        }
        for class in LinkClass::ALL {
            let island = self.smallest_island(free, count, class);
            if let Some(island) = island {
                return Some(self.greedy_pick(island, count));
            }
        }
        None
    }

    /// The smallest connected component of `free` under links of `class` or better that
    /// holds at least `count` devices.
    fn smallest_island(&self, free: u32, count: u32, class: LinkClass) -> Option<u32> {
        self.islands(free, class)
            .filter(|island| island.count_ones() >= count)
            .min_by_key(|island| island.count_ones())
    }

    /// The size of the largest component of `free` connected by NVLink.
    pub fn largest_nvlink_island(&self, free: u32) -> u32 {
        self.islands(free, LinkClass::NvLink)
            .map(u32::count_ones)
            .max()
            .unwrap_or(0)
    }

    /// The connected components of `free` under links of `class` or better, lowest
    /// device first.
    fn islands(&self, free: u32, class: LinkClass) -> impl Iterator<Item = u32> + '_ {
        let within = &self.within[class as usize];
        let mut unvisited = free;
        std::iter::from_fn(move || {
            if unvisited == 0 {
                return None;
            }
            let seed = unvisited.trailing_zeros() as usize;
            let mut island = 1u32 << seed;
            let mut frontier = island;
            while frontier != 0 {
                let device = frontier.trailing_zeros() as usize;
                frontier &= frontier - 1;
                let reached = within[device] & free & !island;
                island |= reached;
                frontier |= reached;
            }
            unvisited &= !island;
            Some(island)
        })
    }

    fn greedy_pick(&self, island: u32, count: u32) -> u32 {
        if island.count_ones() == count {
            return island;
        }
        let first = island.trailing_zeros();
        let mut chosen = 1u32 << first;
        while chosen.count_ones() < count {
            let next = bits(island & !chosen)
                .min_by_key(|&candidate| {
                    bits(chosen)
                        .map(|c| self.class(candidate, c) as u32)
                        .sum::<u32>()
                })
                .expect("island holds at least `count` devices");
            chosen |= 1 << next;
        }
        chosen
    }
}

/// The indices of the set bits of `mask`, lowest first.
pub fn bits(mut mask: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if mask == 0 {
            None
        } else {
            let bit = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            Some(bit)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(devices: &[usize]) -> u32 {
        devices.iter().fold(0, |m, d| m | 1 << d)
    }

    #[test]
    fn nvlink_pair_preferred_over_pcie_neighbours() {
        let m = LinkMatrix::from_profile(LinkProfile::NvlinkPairs, 8).unwrap();
        // 0 is busy, so the pair 0-1 is broken; a 2-GPU pod takes the smallest whole NVLink
        // pair, not 1 with a neighbour.
        let free = mask(&[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(m.best_set(free, 2), Some(mask(&[2, 3])));
        assert_eq!(m.worst_class(mask(&[2, 3])), LinkClass::NvLink);
    }

    #[test]
    fn single_gpu_takes_the_orphan_device_first() {
        let m = LinkMatrix::from_profile(LinkProfile::NvlinkPairs, 8).unwrap();
        let free = mask(&[1, 2, 3, 4, 5, 6, 7]);
        // Best fit: device 1 is an island of one, taking it keeps every pair whole.
        assert_eq!(m.best_set(free, 1), Some(mask(&[1])));
    }

    #[test]
    fn falls_back_to_same_numa_before_cross_numa() {
        let m = LinkMatrix::from_profile(LinkProfile::Pcie, 8).unwrap();
        let free = mask(&[0, 2, 4, 5, 6, 7]);
        let four = m.best_set(free, 4).unwrap();
        assert_eq!(four, mask(&[4, 5, 6, 7]));
        assert_eq!(m.worst_class(four), LinkClass::SameNuma);
        let five = m.best_set(free, 5).unwrap();
        assert_eq!(m.worst_class(five), LinkClass::CrossNuma);
        assert_eq!(m.best_set(free, 7), None);
    }

    #[test]
    fn rejects_malformed_matrices() {
        let nv = LinkClass::NvLink;
        let pc = LinkClass::Pcie;
        let asym = LinkMatrix::new("node-a", 2, vec![nv, nv, pc, nv], vec![0, 0], vec![0, 0]);
        assert!(asym.unwrap_err().to_string().contains("node-a"));
        let short = LinkMatrix::new("node-b", 2, vec![nv; 3], vec![0, 0], vec![0, 0]);
        assert!(short.unwrap_err().message.contains("needs 4"));
    }

    #[test]
    fn nic_pairs_follow_the_pcie_switch() {
        let m = LinkMatrix::from_profile(LinkProfile::NvlinkPairs, 8).unwrap();
        assert_eq!((m.nic(0), m.nic(1), m.nic(2), m.nic(7)), (0, 0, 1, 3));
        let all = LinkMatrix::from_profile(LinkProfile::NvlinkAll, 8).unwrap();
        assert_eq!(all.nic(5), 5);
    }
}
