//! The links between the GPU devices of one node, and the choice of the best-connected set
//! of free devices for a multi-GPU pod.

use std::sync::{Arc, OnceLock};

use super::ModelError;

/// Matrices of at most this many devices answer [`LinkMatrix::best_set`] from a table.
const TABLED_DEVICES: usize = 8;

/// At most this many sets of an island that is connected without being fully linked are
/// weighed besides its greedy picks, lowest devices first: every set of one of at most
/// [`TABLED_DEVICES`] devices (70 at most).
const WEIGHED_SETS: usize = 256;

/// The most devices of an NVLink island whose largest all-NVLink set a weighing works out
/// for each candidate (a clique search, microseconds on 16 devices but up to milliseconds
/// on 32 of an odd matrix); a larger island counts its free devices instead, a bound.
const WEIGHED_ISLAND: u32 = 16;

/// The low bits of a link cost (`LinkMatrix::pair_cost`) that count NUMA crossings.
const NUMA_BITS: u32 = 10;

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

/// A named, generated link layout for nodes whose exact matrix is not given (trace nodes,
/// and Kubernetes nodes without one).
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
    /// Whether `nic` is a layout's assumption (one NIC per device or device pair) rather
    /// than read off the node (`nvidia-smi topo -m`, a configured matrix).
    nics_assumed: bool,
    /// The NICs' names where the matrix gives them (`nvidia-smi topo -m`'s NIC legend or
    /// NIC columns), by NIC number; empty otherwise.
    nic_names: Vec<String>,
    /// `within[c][i]`: devices reached from `i` over a link of class `c` or better.
    within: [Vec<u32>; 4],
    /// `numa_peers[i]`: the devices on `i`'s NUMA node, `i` among them.
    numa_peers: Vec<u32>,
    best_sets: BestSets,
}

/// [`LinkMatrix::best_set`] for every free set and count of a matrix of at most
/// [`TABLED_DEVICES`] devices, worked out at first need: the search asks it of every node
/// it scores for a multi-GPU pod, and nodes of one shape share one matrix. Entry
/// `free * (devices + 1) + count` is the set, 0 for none.
#[derive(Clone, Default)]
struct BestSets(OnceLock<Box<[u8]>>);

/// A function of the matrix's links, whether worked out yet or not: every two matrices
/// with equal links have equal tables.
impl PartialEq for BestSets {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for BestSets {}

impl std::fmt::Debug for BestSets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BestSets")
    }
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
        let numa_peers = (0..devices)
            .map(|i| {
                (0..devices)
                    .filter(|&j| numa[j] == numa[i])
                    .fold(0u32, |mask, j| mask | 1 << j)
            })
            .collect();
        Ok(Self {
            devices: devices as u8,
            classes,
            numa,
            nic,
            nics_assumed: false,
            nic_names: Vec::new(),
            within,
            numa_peers,
            best_sets: BestSets::default(),
        })
    }

    /// The generated matrix of a profile for a node of `devices` GPUs: the first half on
    /// NUMA node 0, the rest on 1, and on each, PCIe switches of two devices in order (an
    /// odd one left alone), so that no switch straddles the sockets; a node of two GPUs has
    /// one switch. The NICs are one per PCIe switch (behind it), or one per device on
    /// an NVSwitch board (a node naming fewer shares them, see `kube::convert`).
    pub fn from_profile(profile: LinkProfile, devices: usize) -> Result<Self, ModelError> {
        let half = devices.div_ceil(2).max(1);
        let numa: Vec<u8> = (0..devices).map(|i| (i / half) as u8).collect();
        let switches_per_numa = half.div_ceil(2);
        let switch = |i: usize| match half {
            1 => i / 2,
            _ => (i / half) * switches_per_numa + (i % half) / 2,
        };
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
        // A NIC per PCIe switch, behind it (so never across NUMA nodes).
        let nic = (0..devices)
            .map(|i| match profile {
                LinkProfile::NvlinkAll => i as u8,
                _ => switch(i) as u8,
            })
            .collect();
        let matrix = Self::new(&format!("{profile:?} profile"), devices, classes, numa, nic)?;
        Ok(matrix.with_nics_assumed())
    }

    /// The matrix with its NICs marked as an assumption (a layout's, or a measured matrix
    /// without NIC columns), which a node naming fewer NICs shares out.
    pub(super) fn with_nics_assumed(self) -> Self {
        Self {
            nics_assumed: true,
            ..self
        }
    }

    /// The matrix with its NICs named, by NIC number.
    pub(super) fn with_nic_names(self, nic_names: Vec<String>) -> Self {
        Self { nic_names, ..self }
    }

    /// The matrix with `count` NICs spread over its devices in order, in place of the NICs
    /// it assumes (a node naming more than a layout assumes: one each for the first
    /// devices when it names as many as there are devices).
    pub fn with_nics_spread(&self, count: usize) -> Self {
        let devices = self.devices();
        let count = count.min(devices);
        Self {
            nic: (0..devices).map(|d| (d * count / devices) as u8).collect(),
            ..self.clone()
        }
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

    /// Whether the NICs are a layout's assumption rather than read off the node.
    pub fn nics_assumed(&self) -> bool {
        self.nics_assumed
    }

    /// The NICs' names, by NIC number, where the matrix gives them; empty otherwise.
    pub fn nic_names(&self) -> &[String] {
        &self.nic_names
    }

    /// The worst link class inside a set of devices (NVLink for a set of one).
    pub fn worst_class(&self, set: u32) -> LinkClass {
        pairs(set)
            .map(|(a, b)| self.class(a, b))
            .max()
            .unwrap_or(LinkClass::NvLink)
    }

    /// What linking `a` and `b` costs a pod: the link class, then whether the pair crosses
    /// NUMA nodes. The crossing sits in the low [`NUMA_BITS`], so that sums over fewer than
    /// `2^NUMA_BITS` pairs (any set of 32 devices) compare by classes first.
    fn pair_cost(&self, a: usize, b: usize) -> u32 {
        (self.class(a, b) as u32) << NUMA_BITS | u32::from(self.numa[a] != self.numa[b])
    }

    /// The best-connected `count` devices among `free` (a bit mask), or `None` when fewer
    /// are free. The set's worst link is as good as any free set allows: classes are tried
    /// best first, and at each the islands of free devices connected at that class that
    /// could hold the set.
    ///
    /// When every such island has its every pair linked at the class (NVSwitch boards,
    /// NVLink pairs, PCIe switches, NUMA nodes: every generated layout), the smallest gives
    /// the set (best fit, which leaves the larger islands whole; among equals, the one in
    /// the smallest coarser component, see `smallest_island`), picked by `greedy_pick`:
    /// inside one NUMA node when the island's share of one holds it. Any choice inside a
    /// fully linked island leaves as large an all-NVLink set free as any other would.
    ///
    /// When one is only connected (a DGX-1 cube mesh), a choice can break the one free
    /// all-NVLink set a later pod needs, so candidates are weighed: from each island, its
    /// greedy pick if fully linked, else a pick from every device keeping to devices
    /// linked at the class to all already chosen (should every start dead-end, an exact
    /// search settles whether such a set exists). The lowest total link class wins, then
    /// the largest all-NVLink set left free, the fewest pairs across NUMA nodes, the
    /// smaller island, the lowest devices.
    ///
    /// Cost: the fast path (every island fully linked, as on every generated profile) is
    /// two component walks per class plus an `O(n)` check and the `O(k * n)` pick, and a
    /// walk of the coarser components around two islands each time two are equally small
    /// (lone devices on PCIe or NVLink-pair boards). Only a node with an island that is
    /// connected but not fully linked pays the `O(n^2 * k)` multi-start pick and a largest
    /// clique search per candidate in the NVLink islands it takes from (a few thousand
    /// steps on 8 devices; none past [`WEIGHED_ISLAND`]), and only a start
    /// that finds no clean set pays the exact search, bounded by the island's cliques. A
    /// matrix of at most [`TABLED_DEVICES`] devices reads the answer from a table it works
    /// out at first need.
    pub fn best_set(&self, free: u32, count: u32) -> Option<u32> {
        if count == 0 {
            return Some(0);
        }
        let devices = self.devices();
        if devices > TABLED_DEVICES || free >> devices != 0 || count as usize > devices {
            return self.search_best_set(free, count);
        }
        let table = self.best_sets.0.get_or_init(|| {
            let sets = (0..1u32 << devices).flat_map(|free| {
                (0..=devices as u32).map(move |count| match count {
                    0 => 0,
                    _ => self.search_best_set(free, count).map_or(0, |set| set as u8),
                })
            });
            sets.collect()
        });
        let set = table[free as usize * (devices + 1) + count as usize];
        (set != 0).then_some(u32::from(set))
    }

    /// [`LinkMatrix::best_set`] worked out (`count` at least 1).
    fn search_best_set(&self, free: u32, count: u32) -> Option<u32> {
        if free.count_ones() < count {
            return None;
        }
        for class in LinkClass::ALL {
            let Some(smallest) = self.smallest_island(free, count, class) else {
                continue;
            };
            let holding = || {
                self.islands(free, class)
                    .filter(move |island| island.count_ones() >= count)
            };
            if holding().all(|island| self.fully_linked(island, class)) {
                return Some(self.greedy_pick(smallest, count));
            }
            // Rare: an island that is connected without being fully linked. A candidate
            // changes the all-NVLink sets of the NVLink islands it takes from alone.
            let nvlink: Vec<(u32, u32)> = (self.islands(free, LinkClass::NvLink))
                .map(|island| (island, self.nvlink_set_bound(island)))
                .collect();
            let left_free = |set: u32| {
                let left = nvlink.iter().map(|&(island, size)| match island & set {
                    0 => size,
                    _ => self.nvlink_set_bound(island & !set),
                });
                left.max().unwrap_or(0)
            };
            let best = holding()
                .flat_map(|island| {
                    let picks = if self.fully_linked(island, class) {
                        vec![self.greedy_pick(island, count)]
                    } else {
                        self.clean_picks(island, count, class)
                    };
                    picks.into_iter().map(move |set| (island, set))
                })
                .min_by_key(|&(island, set)| {
                    let cost: u32 = pairs(set).map(|(a, b)| self.pair_cost(a, b)).sum();
                    (
                        cost >> NUMA_BITS,
                        std::cmp::Reverse(left_free(set)),
                        cost,
                        island.count_ones(),
                        std::cmp::Reverse(set.reverse_bits()),
                    )
                });
            if let Some((_, set)) = best {
                return Some(set);
            }
        }
        None
    }

    /// The smallest connected component of `free` under links of `class` or better that
    /// holds at least `count` devices; among equals, the one in the smallest component at
    /// each coarser class in turn (a lone device before one whose PCIe switch or NUMA node
    /// has another free device a later pod could be paired with), then the lowest.
    fn smallest_island(&self, free: u32, count: u32, class: LinkClass) -> Option<u32> {
        let mut best: Option<u32> = None;
        for island in self.islands(free, class) {
            if island.count_ones() < count {
                continue;
            }
            best = match best {
                Some(b) if !self.snugger(island, b, free, class) => Some(b),
                _ => Some(island),
            };
        }
        best
    }

    /// Whether island `a` of `free` under `class` fits more snugly than island `b`: fewer
    /// devices, or as many in a smaller component at the first coarser class that differs.
    fn snugger(&self, a: u32, b: u32, free: u32, class: LinkClass) -> bool {
        if a.count_ones() != b.count_ones() {
            return a.count_ones() < b.count_ones();
        }
        for coarser in LinkClass::ALL.into_iter().filter(|&c| c > class) {
            let around = |island| self.component(island, free, coarser).count_ones();
            let (x, y) = (around(a), around(b));
            if x != y {
                return x < y;
            }
        }
        false
    }

    /// The devices of `free` reached from `from` over links of `class` or better.
    fn component(&self, from: u32, free: u32, class: LinkClass) -> u32 {
        let within = &self.within[class as usize];
        let mut reached = from;
        let mut frontier = from;
        while frontier != 0 {
            let device = frontier.trailing_zeros() as usize;
            frontier &= frontier - 1;
            let new = within[device] & free & !reached;
            reached |= new;
            frontier |= new;
        }
        reached
    }

    /// Whether every pair of `set` is linked at `class` or better.
    fn fully_linked(&self, set: u32, class: LinkClass) -> bool {
        let within = &self.within[class as usize];
        bits(set).all(|device| within[device] & set == set)
    }

    /// The size of the largest set of `free` devices whose every pair is on NVLink.
    ///
    /// An NVLink island that is fully linked (the common case: NVSwitch boards, NVLink
    /// pairs) counts whole, `O(n)`. One that is only connected (a cube mesh) is searched for
    /// its largest clique by branch and bound over bit masks: microseconds on 8 devices.
    pub fn largest_nvlink_island(&self, free: u32) -> u32 {
        let within = &self.within[LinkClass::NvLink as usize];
        let mut largest = 0;
        for island in self.islands(free, LinkClass::NvLink) {
            if island.count_ones() <= largest {
                continue;
            }
            if self.fully_linked(island, LinkClass::NvLink) {
                largest = island.count_ones();
            } else {
                largest_clique(within, 0, island, &mut largest);
            }
        }
        largest
    }

    /// The largest all-NVLink set of `free`, one NVLink island: exact on at most
    /// [`WEIGHED_ISLAND`] devices, else their count (a bound).
    fn nvlink_set_bound(&self, island: u32) -> u32 {
        match island.count_ones() {
            n if n > WEIGHED_ISLAND => n,
            _ => self.largest_nvlink_island(island),
        }
    }

    /// The connected components of `free` under links of `class` or better, lowest
    /// device first.
    fn islands(&self, free: u32, class: LinkClass) -> impl Iterator<Item = u32> + '_ {
        let mut unvisited = free;
        std::iter::from_fn(move || {
            if unvisited == 0 {
                return None;
            }
            let island = self.component(1 << unvisited.trailing_zeros(), free, class);
            unvisited &= !island;
            Some(island)
        })
    }

    /// `count` devices of a fully linked `island`: inside the NUMA node whose share of the
    /// island holds them most snugly (the fewest devices, then the lowest), if any, so that
    /// the roomier share stays whole for a wider pod, else across; from the lowest device,
    /// each next the one of lowest total cost (`pair_cost`) to those already chosen.
    fn greedy_pick(&self, island: u32, count: u32) -> u32 {
        let island = bits(island)
            .map(|device| island & self.numa_peers[device])
            .filter(|share| share.count_ones() >= count)
            .min_by_key(|share| share.count_ones())
            .unwrap_or(island);
        if island.count_ones() == count {
            return island;
        }
        let first = island.trailing_zeros();
        let mut chosen = 1u32 << first;
        while chosen.count_ones() < count {
            let next = bits(island & !chosen)
                .min_by_key(|&candidate| {
                    bits(chosen)
                        .map(|c| self.pair_cost(candidate, c))
                        .sum::<u32>()
                })
                .expect("island holds at least `count` devices");
            chosen |= 1 << next;
        }
        chosen
    }

    /// Sets of `count` devices of `island` whose every pair is linked at `class` or better:
    /// a greedy pick from each device that finds one (each next device the one of lowest
    /// total cost to those chosen, among those linked at `class` to all of them), and the
    /// first [`WEIGHED_SETS`] such sets, lowest devices first.
    fn clean_picks(&self, island: u32, count: u32, class: LinkClass) -> Vec<u32> {
        let within = &self.within[class as usize];
        let mut picks: Vec<u32> = bits(island)
            .filter_map(|start| {
                let mut chosen = 1u32 << start;
                let mut open = within[start] & island & !chosen;
                // Each device's total link cost to those chosen.
                let mut cost_to = [0u32; 32];
                let mut last = start;
                while chosen.count_ones() < count
                    && chosen.count_ones() + open.count_ones() >= count
                {
                    for device in bits(open) {
                        cost_to[device] += self.pair_cost(device, last);
                    }
                    last = bits(open)
                        .min_by_key(|&device| cost_to[device])
                        .expect("open holds a device");
                    chosen |= 1 << last;
                    open &= within[last] & !(1 << last);
                }
                (chosen.count_ones() == count).then_some(chosen)
            })
            .collect();
        let limit = picks.len() + WEIGHED_SETS;
        cliques(within, 0, island, count, limit, &mut picks);
        picks
    }
}

/// Raises `largest` to the size of the largest clique that extends `chosen` (the number of
/// devices chosen, all linked to every device of `open`) with devices of `open`, under the
/// adjacency `within`. Branch and bound: a branch that cannot beat `largest` is cut.
fn largest_clique(within: &[u32], chosen: u32, mut open: u32, largest: &mut u32) {
    if chosen > *largest {
        *largest = chosen;
    }
    while open != 0 && chosen + open.count_ones() > *largest {
        let device = open.trailing_zeros() as usize;
        open &= open - 1;
        largest_clique(within, chosen + 1, open & within[device], largest);
    }
}

/// Pushes onto `found`, until it holds `limit`, the sets of `count` devices, lowest first,
/// that extend `chosen` with devices of `open` (all linked to every chosen device) into a
/// clique under the adjacency `within`.
fn cliques(
    within: &[u32],
    chosen: u32,
    mut open: u32,
    count: u32,
    limit: usize,
    found: &mut Vec<u32>,
) {
    if chosen.count_ones() == count {
        found.push(chosen);
        return;
    }
    while found.len() < limit && chosen.count_ones() + open.count_ones() >= count {
        let device = open.trailing_zeros() as usize;
        open &= open - 1;
        cliques(
            within,
            chosen | 1 << device,
            open & within[device],
            count,
            limit,
            found,
        );
    }
}

/// The pairs `(a, b)` of devices of `set` with `a < b`.
fn pairs(set: u32) -> impl Iterator<Item = (usize, usize)> {
    bits(set).flat_map(move |a| bits(set & u32::MAX << a << 1).map(move |b| (a, b)))
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

    /// The table answers as the search does, for every free set and count (and the
    /// search past the table's reach: a 16-device board).
    #[test]
    fn the_tabled_best_sets_are_the_searched_ones() {
        let mut matrices = vec![dgx1()];
        for profile in [
            LinkProfile::NvlinkAll,
            LinkProfile::NvlinkPairs,
            LinkProfile::Pcie,
        ] {
            for devices in [1, 2, 3, 4, 6, 8, 16] {
                matrices.push(LinkMatrix::from_profile(profile, devices).unwrap());
            }
        }
        for m in &matrices {
            let devices = m.devices() as u32;
            // Every free set of a tabled matrix; a sample of the 16-device board's.
            let step = if devices as usize <= TABLED_DEVICES {
                1
            } else {
                97
            };
            for free in (0..1u32 << devices).step_by(step) {
                for count in 1..=devices + 1 {
                    let searched = m.search_best_set(free, count);
                    assert_eq!(m.best_set(free, count), searched, "{m:?} {free:b} {count}");
                    if let Some(set) = searched {
                        assert_eq!((set.count_ones(), set & !free), (count, 0));
                    }
                }
            }
            assert_eq!(m.best_set(0, 0), Some(0));
        }
    }

    /// On an NVSwitch board every pair is on NVLink: a pod goes inside one NUMA node (0-3
    /// or 4-7) when one holds it. On a cube mesh too, among NVLink pairs that leave as much
    /// on NVLink free.
    #[test]
    fn equally_linked_pods_stay_inside_a_numa_node() {
        let m = LinkMatrix::from_profile(LinkProfile::NvlinkAll, 8).unwrap();
        assert_eq!(m.best_set(mask(&[0, 4, 5]), 2), Some(mask(&[4, 5])));
        assert_eq!(m.best_set(mask(&[3, 4, 5, 6]), 2), Some(mask(&[4, 5])));
        let seven = mask(&[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(m.best_set(seven, 4), Some(mask(&[4, 5, 6, 7])));
        // No NUMA node holds five: three and two.
        assert_eq!(m.best_set(seven, 5), Some(mask(&[1, 2, 3, 4, 5])));
        assert_eq!(dgx1().best_set(mask(&[1, 4, 5]), 2), Some(mask(&[4, 5])));
        // Inside the NUMA node whose share holds it most snugly: 0-3 stay whole for a
        // 4-GPU pod (the first share, 0 and 1, would have sent it across).
        let six = mask(&[0, 1, 2, 3, 4, 5]);
        assert_eq!(m.best_set(six, 2), Some(mask(&[4, 5])));
        assert_eq!(m.best_set(six, 1), Some(mask(&[4])));
        assert_eq!(
            m.best_set(mask(&[0, 1, 2, 3]), 4),
            Some(mask(&[0, 1, 2, 3]))
        );
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

    /// Among lone devices, the one no other free device shares a PCIe switch with, then
    /// the one in the NUMA node with fewest free: the next pods find pairs and halves whole.
    #[test]
    fn single_gpu_keeps_switch_pairs_and_numa_nodes_whole() {
        let pcie = LinkMatrix::from_profile(LinkProfile::Pcie, 8).unwrap();
        let free = mask(&[2, 3, 5]);
        assert_eq!(pcie.best_set(free, 1), Some(mask(&[5])));
        assert_eq!(pcie.worst_class(free & !mask(&[5])), LinkClass::Pcie);
        let pairs = LinkMatrix::from_profile(LinkProfile::NvlinkPairs, 8).unwrap();
        // Lone devices 0 and 6: 6's NUMA node has 4 and 5 free as well.
        let free = mask(&[0, 4, 5, 6]);
        assert_eq!(pairs.best_set(free, 1), Some(mask(&[0])));
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

    /// A DGX-1 V100 hybrid cube-mesh: 0-3 and 4-7 all NVLink, plus 0-4, 1-5, 2-6 and 3-7;
    /// every other pair crosses the sockets.
    fn dgx1() -> LinkMatrix {
        let nv = |a: usize, b: usize| a / 4 == b / 4 || a % 4 == b % 4;
        let classes = (0..64)
            .map(|k| {
                if nv(k / 8, k % 8) {
                    LinkClass::NvLink
                } else {
                    LinkClass::CrossNuma
                }
            })
            .collect();
        let numa = vec![0, 0, 0, 0, 1, 1, 1, 1];
        LinkMatrix::new("dgx1", 8, classes, numa, (0..8).collect()).unwrap()
    }

    #[test]
    fn cube_mesh_takes_an_all_nvlink_set_not_a_connected_one() {
        let m = dgx1();
        let free = mask(&[0, 4, 5, 6]);
        let set = m.best_set(free, 3).unwrap();
        assert_eq!(m.worst_class(set), LinkClass::NvLink);
        assert_eq!(set, mask(&[4, 5, 6]));
        // Four of them are connected by NVLink, but no four are all pairwise NVLink.
        assert_eq!(m.largest_nvlink_island(free), 3);
        let four = m.best_set(free, 4).unwrap();
        assert_eq!(four, free);
        assert_eq!(m.worst_class(four), LinkClass::CrossNuma);
    }

    #[test]
    fn cube_mesh_islands_are_cliques() {
        let m = dgx1();
        assert_eq!(m.largest_nvlink_island(0xff), 4);
        assert_eq!(m.largest_nvlink_island(mask(&[0, 1, 4, 5])), 2);
        assert_eq!(m.largest_nvlink_island(mask(&[0, 1, 2, 5, 6, 7])), 3);
        assert_eq!(m.largest_nvlink_island(mask(&[0, 5])), 1);
        assert_eq!(m.largest_nvlink_island(0), 0);
        // 0-4 and 1-5 are NVLink, but 0-5 and 1-4 are not: a 3-GPU pod cannot be clean.
        let set = m.best_set(mask(&[0, 1, 4, 5]), 3).unwrap();
        assert_eq!(m.worst_class(set), LinkClass::CrossNuma);
        // Every 3-subset of a free quad, and the pairs across it, stay all NVLink.
        for free in [0xffu32, mask(&[1, 2, 3, 5, 6, 7]), mask(&[0, 2, 3, 6])] {
            for count in 2..=3 {
                let set = m.best_set(free, count).unwrap();
                assert_eq!(set.count_ones(), count);
                assert_eq!(set & !free, 0);
                assert_eq!(m.worst_class(set), LinkClass::NvLink, "{free:#x} {count}");
            }
        }
    }

    /// Free 0-3 and 5 of a cube mesh: 0-3 are the only four all on NVLink, and 5 is linked
    /// to 1 alone among them. A 1-GPU pod takes 5, which leaves 0-3 to a 4-GPU pod; a 2-GPU
    /// pod takes 1 and 5, which leaves 0, 2 and 3 all on NVLink.
    #[test]
    fn cube_mesh_keeps_the_largest_nvlink_set_free() {
        let m = dgx1();
        let free = mask(&[0, 1, 2, 3, 5]);
        assert_eq!(m.best_set(free, 1), Some(mask(&[5])));
        assert_eq!(
            m.best_set(mask(&[0, 1, 2, 3]), 4),
            Some(mask(&[0, 1, 2, 3]))
        );
        assert_eq!(m.best_set(free, 2), Some(mask(&[1, 5])));
        assert_eq!(m.largest_nvlink_island(mask(&[0, 2, 3])), 3);
    }

    /// A 1-GPU pod leaves as large an all-NVLink set free as any device would.
    fn assert_one_keeps_the_largest_nvlink_set(m: &LinkMatrix, free: u32) {
        let kept = |set: u32| m.largest_nvlink_island(free & !set);
        let best = bits(free).map(|device| kept(1 << device)).max();
        assert_eq!(m.best_set(free, 1).map(kept), best, "{m:?} {free:#x}");
    }

    /// The best worst class over every `count`-subset of `free`, by brute force.
    fn best_class_brute(m: &LinkMatrix, free: u32, count: u32) -> Option<LinkClass> {
        (0u32..1 << m.devices())
            .filter(|s| s & !free == 0 && s.count_ones() == count)
            .map(|s| m.worst_class(s))
            .min()
    }

    #[test]
    fn cube_mesh_matches_brute_force() {
        let m = dgx1();
        for free in 0u32..256 {
            let largest = (0u32..256)
                .filter(|s| s & !free == 0 && m.worst_class(*s) == LinkClass::NvLink)
                .map(u32::count_ones)
                .max()
                .unwrap();
            assert_eq!(m.largest_nvlink_island(free), largest, "{free:#x}");
            assert_one_keeps_the_largest_nvlink_set(&m, free);
            for count in 1..=8 {
                let set = m.best_set(free, count);
                match best_class_brute(&m, free, count) {
                    None => assert_eq!(set, None),
                    Some(class) => {
                        let set = set.unwrap();
                        assert_eq!((set.count_ones(), set & !free), (count, 0));
                        assert_eq!(m.worst_class(set), class, "{free:#x} {count}");
                    }
                }
            }
        }
    }

    /// The choice before NVLink islands had to be all-pairs sets: the smallest connected
    /// component at the best class that holds `count` (among equals, the one in the
    /// smallest component at each coarser class in turn, then the lowest), narrowed to the
    /// snuggest NUMA node's share of it that holds `count` if any (the fewest devices, then
    /// the lowest), greedy from its lowest device.
    fn component_best_set(m: &LinkMatrix, free: u32, count: u32) -> Option<u32> {
        if count == 0 {
            return Some(0);
        }
        let around = |island: u32, class: LinkClass| -> Vec<u32> {
            let coarser = LinkClass::ALL.into_iter().filter(|&c| c >= class);
            coarser
                .map(|c| {
                    let all = components(m, free, c);
                    all.into_iter()
                        .find(|c| c & island != 0)
                        .unwrap()
                        .count_ones()
                })
                .collect()
        };
        for class in LinkClass::ALL {
            let island = components(m, free, class)
                .into_iter()
                .filter(|island| island.count_ones() >= count)
                .min_by_key(|&island| around(island, class));
            let Some(island) = island else { continue };
            let island = (0..m.devices())
                .map(|d| bits(island).filter(move |&e| m.numa[e] == m.numa[d]))
                .map(|share| share.fold(0u32, |s, e| s | 1 << e))
                .filter(|share| share.count_ones() >= count)
                .min_by_key(|share| share.count_ones())
                .unwrap_or(island);
            if island.count_ones() == count {
                return Some(island);
            }
            let mut chosen = 1u32 << island.trailing_zeros();
            while chosen.count_ones() < count {
                let next = bits(island & !chosen)
                    .min_by_key(|&d| bits(chosen).map(|c| m.class(d, c) as u32).sum::<u32>())
                    .unwrap();
                chosen |= 1 << next;
            }
            return Some(chosen);
        }
        None
    }

    fn components(m: &LinkMatrix, free: u32, class: LinkClass) -> Vec<u32> {
        let mut out = Vec::new();
        let mut left = free;
        while left != 0 {
            let mut island = 1u32 << left.trailing_zeros();
            loop {
                let grown = bits(island).fold(island, |acc, a| {
                    acc | bits(free)
                        .filter(|&b| m.class(a, b) <= class)
                        .fold(0, |x, b| x | 1 << b)
                });
                if grown == island {
                    break;
                }
                island = grown;
            }
            left &= !island;
            out.push(island);
        }
        out
    }

    #[test]
    fn fully_connected_layouts_choose_as_before() {
        for profile in [
            LinkProfile::NvlinkAll,
            LinkProfile::NvlinkPairs,
            LinkProfile::Pcie,
        ] {
            for devices in [1usize, 2, 3, 4, 6, 8, 10, 16] {
                let m = LinkMatrix::from_profile(profile, devices).unwrap();
                // An odd number of devices per NUMA node puts one pair across the two: its
                // NUMA islands are connected, not fully linked. Every other profile node
                // has only fully linked islands, whatever is free.
                let common = profile == LinkProfile::NvlinkAll || devices.div_ceil(2) % 2 == 0;
                // Every free mask up to 10 devices, a spread of them at 16.
                let step = if devices > 10 { 97 } else { 1 };
                for free in (0u32..1 << devices).step_by(step) {
                    let largest = components(&m, free, LinkClass::NvLink)
                        .into_iter()
                        .map(u32::count_ones)
                        .max()
                        .unwrap_or(0);
                    let at = format!("{profile:?} {devices} {free:#x}");
                    assert_eq!(m.largest_nvlink_island(free), largest, "{at}");
                    let fully_linked = LinkClass::ALL.into_iter().all(|class| {
                        components(&m, free, class)
                            .into_iter()
                            .all(|island| m.worst_class(island) <= class)
                    });
                    assert!(fully_linked || !common, "{at}");
                    for count in 0..=devices as u32 {
                        let (new, old) =
                            (m.best_set(free, count), component_best_set(&m, free, count));
                        if fully_linked {
                            assert_eq!(new, old, "{at} {count}");
                        } else {
                            // Only ever a better worst link than the component's pick.
                            let class = |set: Option<u32>| set.map(|s| m.worst_class(s));
                            assert!(class(new) <= class(old), "{at} {count}");
                            assert_eq!(
                                class(new),
                                best_class_brute(&m, free, count),
                                "{at} {count}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn random_matrices_match_brute_force() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..200 {
            let devices = 2 + (next() % 7) as usize;
            let mut classes = vec![LinkClass::NvLink; devices * devices];
            for i in 0..devices {
                for j in 0..i {
                    let class = LinkClass::ALL[(next() % 4) as usize];
                    classes[i * devices + j] = class;
                    classes[j * devices + i] = class;
                }
            }
            let m = LinkMatrix::new(
                "random",
                devices,
                classes,
                vec![0; devices],
                vec![0; devices],
            )
            .unwrap();
            for _ in 0..8 {
                let free = (next() as u32) & ((1 << devices) - 1);
                let largest = (0u32..1 << devices)
                    .filter(|s| s & !free == 0 && m.worst_class(*s) == LinkClass::NvLink)
                    .map(u32::count_ones)
                    .max()
                    .unwrap();
                assert_eq!(m.largest_nvlink_island(free), largest);
                assert_one_keeps_the_largest_nvlink_set(&m, free);
                for count in 1..=devices as u32 {
                    let set = m.best_set(free, count);
                    assert_eq!(set.map(u32::count_ones).unwrap_or(count), count);
                    assert_eq!(set.unwrap_or(0) & !free, 0);
                    assert_eq!(
                        set.map(|s| m.worst_class(s)),
                        best_class_brute(&m, free, count)
                    );
                }
            }
        }
    }

    #[test]
    fn pair_across_numa_nodes_no_longer_drags_a_set_across() {
        // Six devices with NVLink pairs: 0-2 on NUMA 0, 3-5 on NUMA 1, the pair 2-3 across.
        let m = LinkMatrix::from_profile(LinkProfile::NvlinkPairs, 6).unwrap();
        let set = m.best_set(mask(&[2, 3, 4, 5]), 3).unwrap();
        assert_eq!(set, mask(&[3, 4, 5]));
        assert_eq!(m.worst_class(set), LinkClass::SameNuma);
    }

    #[test]
    fn nic_pairs_follow_the_pcie_switch() {
        let m = LinkMatrix::from_profile(LinkProfile::NvlinkPairs, 8).unwrap();
        assert_eq!((m.nic(0), m.nic(1), m.nic(2), m.nic(7)), (0, 0, 1, 3));
        let all = LinkMatrix::from_profile(LinkProfile::NvlinkAll, 8).unwrap();
        assert_eq!(all.nic(5), 5);
    }

    #[test]
    fn no_switch_straddles_the_sockets_of_an_odd_half() {
        // Six GPUs: 0-2 on NUMA node 0, 3-5 on node 1; switches {0,1}, {2}, {3,4}, {5}.
        for profile in [LinkProfile::Pcie, LinkProfile::NvlinkPairs] {
            let m = LinkMatrix::from_profile(profile, 6).unwrap();
            assert_eq!(m.class(2, 3), LinkClass::CrossNuma, "{profile:?}");
            assert_ne!(m.class(3, 4), LinkClass::SameNuma, "{profile:?}");
            assert_eq!(
                (0..6).map(|d| m.nic(d)).collect::<Vec<_>>(),
                [0, 0, 1, 2, 2, 3],
                "a NIC per switch: none serves both sockets, an NVLink pair has one"
            );
            assert_eq!(m.best_set(0b11_1100, 2), Some(0b01_1000), "{profile:?}");
        }
        // Two GPUs share one switch, as before.
        let pair = LinkMatrix::from_profile(LinkProfile::NvlinkPairs, 2).unwrap();
        assert_eq!(pair.class(0, 1), LinkClass::NvLink);
    }
}
