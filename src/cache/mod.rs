//! The cluster state: node usage, device health, pod placements and incremental aggregates,
//! all persistent (node states and aggregates in `persistent_array`, placements and pod
//! rules in `imbl` maps) so that a snapshot is an O(1) clone sharing structure and a
//! change copies only the path it touches.
//!
//! This module owns the first invariant: no GPU device is ever assigned past its capacity
//! (a whole-GPU pod never shares a device). It decides nothing: placements come from the
//! framework, and the world confirms or forgets them. Besides GPUs it accounts each node's
//! CPU, memory, ephemeral storage and pod count, and the extended resources (`rdma/hca`,
//! hugepages, ...) that the placed pods of Kubernetes jobs hold.

mod aggregate;
mod node_state;
mod persistent_array;

use std::sync::Arc;

use imbl::OrdMap;

pub use aggregate::GpuAggregate;
pub use node_state::NodeState;
use persistent_array::PersistentArray;

use crate::model::{
    ClusterSpec, ExtendedResources, GroupId, Job, JobId, LinkClass, MILLI_PER_GPU, Milli, NodeId,
    PodRules, PoolId,
};

/// One pod of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub job: JobId,
    pub pod: u32,
}

/// The GPU devices given to one pod: a set of devices, each with the same share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DeviceAlloc {
    /// The devices, a bit per device index on the node.
    pub devices: u32,
    /// Milli-GPUs on each device: 1000 for whole GPUs, less for a shared fraction.
    pub milli_each: Milli,
}

impl DeviceAlloc {
    pub fn whole(devices: u32) -> Self {
        Self {
            devices,
            milli_each: MILLI_PER_GPU,
        }
    }

    pub fn total_milli(&self) -> u64 {
        u64::from(self.devices.count_ones()) * u64::from(self.milli_each)
    }
}

/// Where one pod is placed, exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub node: NodeId,
    pub gpus: DeviceAlloc,
    pub cpu_milli: u64,
    pub memory_bytes: u64,
    pub ephemeral_bytes: u64,
}

/// Whether the world has confirmed a placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementPhase {
    /// Reserved by the scheduler, not yet reported bound.
    Assumed,
    /// The world reported the pod bound to its node.
    Bound,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacedPod {
    pub placement: Placement,
    pub phase: PlacementPhase,
}

/// Why a change to the cluster state was refused; the state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    #[error("pod {0:?} is already placed")]
    AlreadyPlaced(PodKey),
    #[error("pod {0:?} is not placed")]
    NotPlaced(PodKey),
    #[error("node {node:?} cannot take devices {devices:#b} at {milli} milli-GPUs each")]
    DeviceConflict {
        node: NodeId,
        devices: u32,
        milli: Milli,
    },
    #[error("node {0:?} does not exist")]
    UnknownNode(NodeId),
}

/// The whole cluster state. Cloning it is the O(1) snapshot.
#[derive(Debug, Clone)]
pub struct ClusterState {
    spec: Arc<ClusterSpec>,
    nodes: PersistentArray<NodeState>,
    groups: PersistentArray<GpuAggregate>,
    pools: PersistentArray<GpuAggregate>,
    hbds: PersistentArray<GpuAggregate>,
    total: GpuAggregate,
    /// An ordered map rather than a hash map: its 16-entry nodes copy less per change than
    /// a hash trie's 32-entry ones (measured in `benches/snapshot.rs`: about half the cost).
    placements: OrdMap<PodKey, PlacedPod>,
    /// Milli-GPUs of the placements still only assumed (not yet confirmed bound).
    assumed_milli: u64,
    /// Who the pods of each job with placed pods are, with their rules, for the inter-pod
    /// rules of pods placed later (Kubernetes pods only); apart, the jobs whose pods carry
    /// anti-affinity terms, which every incoming pod is checked against.
    pod_rules: OrdMap<JobId, Arc<PodRules>>,
    anti_affinities: OrdMap<JobId, Arc<PodRules>>,
    /// What each pod asks of extended resources (by pod index), for each job with placed
    /// pods that asks for some, and what the placed pods hold on each node (nodes holding
    /// none are absent). Only Kubernetes pods ask for them: these stay empty in the
    /// simulator.
    extended_asks: OrdMap<JobId, Arc<[ExtendedResources]>>,
    extended_used: OrdMap<NodeId, ExtendedResources>,
}

impl ClusterState {
    /// An empty cluster of the given shape: every device free and healthy.
    pub fn new(spec: Arc<ClusterSpec>) -> Self {
        let nodes: PersistentArray<NodeState> = spec.nodes.iter().map(NodeState::new).collect();
        let mut groups = vec![GpuAggregate::default(); spec.groups.len()];
        let mut pools = vec![GpuAggregate::default(); spec.pools.len()];
        let mut hbds = vec![GpuAggregate::default(); spec.hbds.len()];
        let mut total = GpuAggregate::default();
        for (index, state) in nodes.iter().enumerate() {
            let node = &spec.nodes[index];
            groups[spec.node_group[index].index()].apply(state, 1);
            pools[node.pool.index()].apply(state, 1);
            if let Some(hbd) = node.topology.hbd {
                hbds[hbd as usize].apply(state, 1);
            }
            total.apply(state, 1);
        }
        Self {
            nodes,
            groups: groups.into_iter().collect(),
            pools: pools.into_iter().collect(),
            hbds: hbds.into_iter().collect(),
            total,
            placements: OrdMap::new(),
            assumed_milli: 0,
            pod_rules: OrdMap::new(),
            anti_affinities: OrdMap::new(),
            extended_asks: OrdMap::new(),
            extended_used: OrdMap::new(),
            spec,
        }
    }

    /// A snapshot: an O(1) clone that later changes to `self` do not affect.
    pub fn snapshot(&self) -> ClusterState {
        self.clone()
    }

    pub fn spec(&self) -> &Arc<ClusterSpec> {
        &self.spec
    }

    #[inline]
    pub fn node(&self, id: NodeId) -> &NodeState {
        &self.nodes[id.index()]
    }

    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &NodeState)> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (NodeId(i as u32), n))
    }

    #[inline]
    pub fn group(&self, id: GroupId) -> &GpuAggregate {
        &self.groups[id.index()]
    }

    /// Milli-GPUs of the whole GPUs free in these groups.
    pub fn free_whole_milli_in(&self, groups: &[GroupId]) -> u64 {
        (groups.iter())
            .map(|&g| u64::from(self.group(g).free_gpus) * u64::from(MILLI_PER_GPU))
            .sum()
    }

    /// The groups of a pool with their aggregates, in id order, read sequentially (the
    /// builder numbers a pool's groups consecutively).
    pub fn pool_groups(&self, pool: PoolId) -> impl Iterator<Item = (GroupId, &GpuAggregate)> {
        let groups = &self.spec.pool(pool).groups;
        let range = match (groups.first(), groups.last()) {
            (Some(first), Some(last)) => first.index()..last.index() + 1,
            _ => 0..0,
        };
        let start = range.start;
        self.groups
            .range(range)
            .enumerate()
            .map(move |(i, aggregate)| (GroupId((start + i) as u32), aggregate))
    }

    #[inline]
    pub fn pool(&self, id: PoolId) -> &GpuAggregate {
        &self.pools[id.index()]
    }

    /// A scale-up domain's aggregate.
    #[inline]
    pub fn hbd(&self, id: u32) -> &GpuAggregate {
        &self.hbds[id as usize]
    }

    /// The whole cluster's aggregate.
    pub fn total(&self) -> &GpuAggregate {
        &self.total
    }

    pub fn placement(&self, pod: PodKey) -> Option<&PlacedPod> {
        self.placements.get(&pod)
    }

    pub fn placements(&self) -> impl Iterator<Item = (&PodKey, &PlacedPod)> {
        self.placements.iter()
    }

    pub fn placed_pods(&self) -> usize {
        self.placements.len()
    }

    /// The nodes of a job's placed pods, in pod order.
    pub fn job_nodes(&self, job: JobId) -> impl Iterator<Item = NodeId> + '_ {
        let pods = PodKey { job, pod: 0 }..=PodKey { job, pod: u32::MAX };
        self.placements
            .range(pods)
            .map(|(_, placed)| placed.placement.node)
    }

    /// Records what the state must know of a job with placed pods: who its pods are, for
    /// the inter-pod rules of pods placed later, and the extended resources each of its
    /// pods holds. Call it once a pod of the job is placed (pods placed earlier are
    /// accounted then); it is dropped with the job's last placement.
    pub fn record_job(&mut self, job: &Job) {
        if let Some(rules) = &job.pod_rules {
            self.set_pod_rules(job.id, rules);
        }
        if job.all_constraints().any(|c| !c.extended.is_empty()) {
            let asks = (0..job.pods.len() as u32)
                .map(|pod| {
                    job.constraints_of(pod)
                        .map(|c| c.extended.clone())
                        .unwrap_or_default()
                })
                .collect();
            self.set_extended_asks(job.id, asks);
        }
    }

    /// Records (or replaces) who a job's pods are, for the inter-pod rules of pods placed
    /// later. Call it once a pod of the job is placed: it is dropped with the job's last
    /// placement.
    pub fn set_pod_rules(&mut self, job: JobId, rules: &Arc<PodRules>) {
        if rules.anti_affinity.is_empty() {
            self.anti_affinities.remove(&job);
        } else {
            self.anti_affinities.insert(job, rules.clone());
        }
        self.pod_rules.insert(job, rules.clone());
    }

    /// Records (or replaces) the extended resources each pod of a job holds, and accounts
    /// them for the job's pods placed now and later.
    fn set_extended_asks(&mut self, job: JobId, asks: Arc<[ExtendedResources]>) {
        if let Some(old) = self.extended_asks.get(&job).cloned() {
            self.account_job_extended(job, &old, false);
        }
        self.account_job_extended(job, &asks, true);
        self.extended_asks.insert(job, asks);
    }

    /// Takes over what `old` knew of its jobs that still have a placement here (the
    /// cluster was rebuilt).
    pub fn keep_jobs(&mut self, old: &ClusterState) {
        for (&job, rules) in &old.pod_rules {
            if self.job_nodes(job).next().is_some() {
                self.set_pod_rules(job, rules);
            }
        }
        for (&job, asks) in &old.extended_asks {
            if self.job_nodes(job).next().is_some() {
                self.set_extended_asks(job, asks.clone());
            }
        }
    }

    /// The extended resources the placed pods hold on a node (`None`: none).
    pub fn extended_used(&self, node: NodeId) -> Option<&ExtendedResources> {
        self.extended_used.get(&node)
    }

    /// Adds (or, with `take` false, returns) each placed pod's `asks` (by pod index).
    fn account_job_extended(&mut self, job: JobId, asks: &[ExtendedResources], take: bool) {
        let pods = PodKey { job, pod: 0 }..=PodKey { job, pod: u32::MAX };
        let placed: Vec<(u32, NodeId)> = self
            .placements
            .range(pods)
            .map(|(key, placed)| (key.pod, placed.placement.node))
            .collect();
        for (pod, node) in placed {
            if let Some(ask) = asks.get(pod as usize) {
                self.account_extended(node, ask, take);
            }
        }
    }

    /// Adds (or, with `take` false, returns) what one pod of a recorded job asks.
    fn account_pod_extended(&mut self, pod: PodKey, node: NodeId, take: bool) {
        let asks = self.extended_asks.get(&pod.job).cloned();
        if let Some(ask) = asks.as_ref().and_then(|a| a.get(pod.pod as usize)) {
            self.account_extended(node, ask, take);
        }
    }

    /// Adds (or, with `take` false, returns) one pod's `asks` on a node.
    fn account_extended(&mut self, node: NodeId, asks: &ExtendedResources, take: bool) {
        let used = self.extended_used.entry(node).or_default();
        for (name, &amount) in asks {
            let held = used.entry(name.clone()).or_default();
            *held = if take {
                *held + amount
            } else {
                held.saturating_sub(amount)
            };
            if *held == 0 {
                used.remove(name);
            }
        }
        if used.is_empty() {
            self.extended_used.remove(&node);
        }
    }

    /// Every job with placed pods whose identity is known.
    pub fn pod_rules(&self) -> impl Iterator<Item = (JobId, &Arc<PodRules>)> {
        self.pod_rules.iter().map(|(&job, a)| (job, a))
    }

    /// The jobs with placed pods that carry anti-affinity terms.
    pub fn anti_affinities(&self) -> impl Iterator<Item = (JobId, &Arc<PodRules>)> {
        self.anti_affinities.iter().map(|(&job, a)| (job, a))
    }

    /// Whether any placed pod carries anti-affinity terms.
    pub fn has_anti_affinities(&self) -> bool {
        !self.anti_affinities.is_empty()
    }

    /// Milli-GPUs held by placements not yet confirmed bound.
    pub fn assumed_milli(&self) -> u64 {
        self.assumed_milli
    }

    /// Assumes a placement: its resources are taken now, before the world confirms it.
    pub fn assume(&mut self, pod: PodKey, placement: Placement) -> Result<(), CacheError> {
        self.insert(pod, placement, PlacementPhase::Assumed, true)
    }

    /// Records a placement the world already made (a pod found bound on start, or a
    /// cluster rebuilt after a node changed). Unlike [`ClusterState::assume`] it accepts
    /// devices that have turned unhealthy since: the pod keeps them. Capacity still holds:
    /// no device is given past it.
    pub fn restore(
        &mut self,
        pod: PodKey,
        placement: Placement,
        phase: PlacementPhase,
    ) -> Result<(), CacheError> {
        self.insert(pod, placement, phase, false)
    }

    fn insert(
        &mut self,
        pod: PodKey,
        placement: Placement,
        phase: PlacementPhase,
        healthy_only: bool,
    ) -> Result<(), CacheError> {
        if self.placements.contains_key(&pod) {
            return Err(CacheError::AlreadyPlaced(pod));
        }
        let node = placement.node;
        if node.index() >= self.nodes.len() {
            return Err(CacheError::UnknownNode(node));
        }
        let gpus = placement.gpus;
        if !self.nodes[node.index()].can_take(gpus.devices, gpus.milli_each, healthy_only) {
            return Err(CacheError::DeviceConflict {
                node,
                devices: gpus.devices,
                milli: gpus.milli_each,
            });
        }
        self.update_node(node, |state| state.add(&placement));
        self.account_pod_extended(pod, node, true);
        if phase == PlacementPhase::Assumed {
            self.assumed_milli += gpus.total_milli();
        }
        self.placements.insert(pod, PlacedPod { placement, phase });
        Ok(())
    }

    /// The world reports the pod bound where it was assumed.
    pub fn confirm(&mut self, pod: PodKey) -> Result<(), CacheError> {
        let placed = self
            .placements
            .get_mut(&pod)
            .ok_or(CacheError::NotPlaced(pod))?;
        if placed.phase == PlacementPhase::Assumed {
            self.assumed_milli -= placed.placement.gpus.total_milli();
        }
        placed.phase = PlacementPhase::Bound;
        Ok(())
    }

    /// A placed pod's CPU and memory changed where it runs (it was resized in place): its
    /// node holds the new amounts. Its devices stay (no GPU is resized in place).
    pub fn resize(
        &mut self,
        pod: PodKey,
        cpu_milli: u64,
        memory_bytes: u64,
    ) -> Result<(), CacheError> {
        let placed = *self
            .placements
            .get(&pod)
            .ok_or(CacheError::NotPlaced(pod))?;
        let (old, new) = (
            placed.placement,
            Placement {
                cpu_milli,
                memory_bytes,
                ..placed.placement
            },
        );
        self.update_node(old.node, |state| {
            state.remove(&old);
            state.add(&new);
        });
        let resized = PlacedPod {
            placement: new,
            ..placed
        };
        self.placements.insert(pod, resized);
        Ok(())
    }

    /// Forgets a placement (binding failed, the pod finished or was evicted) and returns
    /// its resources.
    pub fn forget(&mut self, pod: PodKey) -> Result<Placement, CacheError> {
        let placed = self
            .placements
            .remove(&pod)
            .ok_or(CacheError::NotPlaced(pod))?;
        if placed.phase == PlacementPhase::Assumed {
            self.assumed_milli -= placed.placement.gpus.total_milli();
        }
        let p = placed.placement;
        self.update_node(p.node, |state| state.remove(&p));
        self.account_pod_extended(pod, p.node, false);
        let known =
            self.pod_rules.contains_key(&pod.job) || self.extended_asks.contains_key(&pod.job);
        if known && self.job_nodes(pod.job).next().is_none() {
            self.pod_rules.remove(&pod.job);
            self.anti_affinities.remove(&pod.job);
            self.extended_asks.remove(&pod.job);
        }
        Ok(p)
    }

    /// Marks a device healthy or not. An unhealthy device keeps the pods it has and takes
    /// no new one.
    pub fn set_device_health(
        &mut self,
        node: NodeId,
        device: usize,
        healthy: bool,
    ) -> Result<(), CacheError> {
        if node.index() >= self.nodes.len() || device >= self.spec.node(node).gpus() {
            return Err(CacheError::UnknownNode(node));
        }
        self.update_node(node, |state| state.set_healthy(device, healthy));
        Ok(())
    }

    /// The worst link class inside a pod's device set (for reports).
    pub fn link_class_of(&self, placement: &Placement) -> LinkClass {
        self.spec
            .node(placement.node)
            .links
            .worst_class(placement.gpus.devices)
    }

    /// Applies `change` to one node and moves its contribution in every aggregate.
    fn update_node(&mut self, node: NodeId, change: impl FnOnce(&mut NodeState)) {
        let index = node.index();
        let group = self.spec.node_group[index];
        let node = &self.spec.nodes[index];
        let (pool, hbd) = (node.pool, node.topology.hbd);
        let slot = &mut self.nodes[index];
        let before = *slot;
        change(slot);
        slot.set_nvlink_island(node.links.largest_nvlink_island(slot.free_whole()));
        let after = *slot;
        let hbd = hbd.map(|h| &mut self.hbds[h as usize]);
        for aggregate in [
            Some(&mut self.groups[group.index()]),
            Some(&mut self.pools[pool.index()]),
            hbd,
            Some(&mut self.total),
        ]
        .into_iter()
        .flatten()
        {
            aggregate.apply(&before, -1);
            aggregate.apply(&after, 1);
        }
        let was = before.shared_room().0;
        if after.shared_room().0 < was {
            self.renew_shared_room_max(index, was);
        }
    }

    /// After node `index`'s roomiest shared device lost room, from `was` milli-GPUs: the
    /// most room of each aggregate whose last node at `was` this was, worked out anew.
    /// Groups and scale-up domains from their nodes, a pool from its groups, the cluster
    /// from its pools (each partitions the next); an aggregate with another node at the
    /// most room keeps it.
    fn renew_shared_room_max(&mut self, index: usize, was: Milli) {
        let stale = |a: &GpuAggregate| a.shared_room_max == was && a.shared_room_at_max == 0;
        let spec = &self.spec;
        let nodes = &self.nodes;
        let of_nodes = |members: &[NodeId]| {
            most_room(
                members
                    .iter()
                    .map(|id| (nodes[id.index()].shared_room().0, 1)),
            )
        };
        let node = &spec.nodes[index];
        let group = spec.node_group[index];
        let aggregate = &mut self.groups[group.index()];
        if stale(aggregate) {
            set_most_room(aggregate, of_nodes(&spec.group(group).nodes));
        }
        if let Some(hbd) = node.topology.hbd {
            let aggregate = &mut self.hbds[hbd as usize];
            if stale(aggregate) {
                set_most_room(aggregate, of_nodes(&spec.hbd_nodes[hbd as usize]));
            }
        }
        let of_aggregates = |all: &mut dyn Iterator<Item = &GpuAggregate>| {
            most_room(all.map(|a| (a.shared_room_max, a.shared_room_at_max)))
        };
        let pool = node.pool.index();
        if !stale(&self.pools[pool]) {
            return;
        }
        let groups = &self.groups;
        let mut in_groups = spec.pools[pool].groups.iter().map(|g| &groups[g.index()]);
        set_most_room(&mut self.pools[pool], of_aggregates(&mut in_groups));
        if stale(&self.total) {
            let most = of_aggregates(&mut self.pools.iter());
            set_most_room(&mut self.total, most);
        }
    }
}

/// The most room of `(room, nodes at it)` counts, and how many nodes have it (0 and 0:
/// none).
fn most_room(counts: impl Iterator<Item = (Milli, u32)>) -> (Milli, u32) {
    counts
        .filter(|&(room, _)| room > 0)
        .fold((0, 0), |(most, at), (room, nodes)| match room.cmp(&most) {
            std::cmp::Ordering::Greater => (room, nodes),
            std::cmp::Ordering::Equal => (most, at + nodes),
            std::cmp::Ordering::Less => (most, at),
        })
}

fn set_most_room(aggregate: &mut GpuAggregate, (most, at): (Milli, u32)) {
    (aggregate.shared_room_max, aggregate.shared_room_at_max) = (most, at);
}

#[cfg(test)]
mod tests;
