//! The static shape of a cluster: its nodes, node pools (one per GPU model), leaf groups and
//! the search groups of the two-level search. Built once from node rows; immutable after.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{
    ExtendedResources, GroupId, Labels, LeafId, LinkMatrix, LinkProfile, MAX_GPUS_PER_NODE,
    MILLI_PER_GPU, ModelError, NodeId, NodeSpec, NodeTopology, PodRequest, PoolId, Taint, Tier,
};

/// Nodes of a pool that have no leaf group are searched in blocks of this many nodes, so a
/// flat, topology-less cluster still gets a two-level (and parallel) search.
pub const UNGROUPED_BLOCK: usize = 32;

/// A leaf group of more nodes than this (a label naming a zone or a whole pool rather than
/// a leaf switch) is searched as several groups of at most this many nodes, near equal, so
/// that a pod reads a block of nodes and not the whole leaf: a leaf is still one domain.
pub const LEAF_BLOCK: usize = 64;

/// All nodes of one GPU model.
#[derive(Debug, Clone)]
pub struct Pool {
    /// The GPU model, `None` for the CPU-only pool.
    pub gpu_model: Option<String>,
    pub nodes: Vec<NodeId>,
    /// The pool's search groups, numbered consecutively.
    pub groups: Vec<GroupId>,
    /// The most GPUs on one node of the pool: the ideal node count of a job is
    /// `ceil(job GPUs / gpus_per_node)`.
    pub gpus_per_node: u32,
    /// GPUs of the pool's largest leaf group, `None` when no node of it has a leaf group.
    pub largest_leaf_gpus: Option<u32>,
    /// The leaf groups its nodes are in, a block of its nodes outside every leaf counting as
    /// one: the most leaves a gang could span in it.
    pub leaves: usize,
    /// Whether a leaf group of the pool is searched as several groups ([`LEAF_BLOCK`]).
    pub leaves_in_blocks: bool,
    /// `node_sizes[k]`: the pool's nodes of `k` GPUs.
    pub node_sizes: [u32; MAX_GPUS_PER_NODE + 1],
    /// The distinct taints on the pool's nodes, of every effect.
    pub taints: Vec<super::Taint>,
    /// The most one node of the pool allocates: a pod asking more fits no node of it.
    pub largest_allocatable: Allocatable,
}

/// CPU, memory and ephemeral storage a node allocates, `None` where unknown (unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocatable {
    pub cpu_milli: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub ephemeral_bytes: Option<u64>,
}

impl Allocatable {
    /// What a pool without nodes allocates.
    const NOTHING: Allocatable = Allocatable {
        cpu_milli: Some(0),
        memory_bytes: Some(0),
        ephemeral_bytes: Some(0),
    };

    fn of(node: &NodeSpec) -> Allocatable {
        Allocatable {
            cpu_milli: node.cpu_milli,
            memory_bytes: node.memory_bytes,
            ephemeral_bytes: node.ephemeral_bytes,
        }
    }

    /// The larger of each, unknown (unlimited) where either is.
    fn max(self, other: Allocatable) -> Allocatable {
        let larger = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| a.max(b));
        Allocatable {
            cpu_milli: larger(self.cpu_milli, other.cpu_milli),
            memory_bytes: larger(self.memory_bytes, other.memory_bytes),
            ephemeral_bytes: larger(self.ephemeral_bytes, other.ephemeral_bytes),
        }
    }

    /// What of a pod's request this cannot cover, in kube-scheduler's word for it.
    pub fn short_of(&self, pod: &PodRequest) -> Option<&'static str> {
        let below = |allocatable: Option<u64>, asked: u64| allocatable.is_some_and(|a| a < asked);
        if below(self.cpu_milli, pod.cpu_milli) {
            Some("cpu")
        } else if below(self.memory_bytes, pod.memory_bytes) {
            Some("memory")
        } else if below(self.ephemeral_bytes, pod.ephemeral_bytes) {
            Some("ephemeral-storage")
        } else {
            None
        }
    }
}

/// A leaf switch group's whole path: leaf names repeat under different spines.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeafPath {
    pub superspine: String,
    pub spine: String,
    pub leaf: String,
}

/// The unit of the first level of the search: the nodes of one pool under one leaf group
/// (a block of them, for a leaf of more than [`LEAF_BLOCK`] nodes), or a block of a pool's
/// nodes without a leaf group.
#[derive(Debug, Clone)]
pub struct SearchGroup {
    pub pool: PoolId,
    pub leaf: Option<LeafId>,
    pub nodes: Vec<NodeId>,
    /// `node_sizes[k]`: the group's nodes of `k` GPUs.
    pub node_sizes: [u32; MAX_GPUS_PER_NODE + 1],
}

/// The immutable cluster: nodes, pools, leaf groups, search groups.
#[derive(Debug, Clone, Default)]
pub struct ClusterSpec {
    pub nodes: Vec<NodeSpec>,
    pub pools: Vec<Pool>,
    pub leaves: Vec<LeafPath>,
    /// The spine of each leaf, a dense id over (superspine, spine) paths.
    pub leaf_spine: Vec<u32>,
    /// The superspine of each leaf, a dense id over superspine names.
    pub leaf_superspine: Vec<u32>,
    pub hbds: Vec<String>,
    /// The nodes of each scale-up domain.
    pub hbd_nodes: Vec<Vec<NodeId>>,
    pub groups: Vec<SearchGroup>,
    /// The search group of each node.
    pub node_group: Vec<GroupId>,
    node_by_name: HashMap<String, NodeId>,
    pool_by_model: HashMap<Option<String>, PoolId>,
    /// Every pool, and the pools whose nodes have GPUs: those a job accepting any pool
    /// may use, read per attempt.
    all_pools: Vec<PoolId>,
    gpu_pools: Vec<PoolId>,
}

impl ClusterSpec {
    pub fn node(&self, id: NodeId) -> &NodeSpec {
        &self.nodes[id.index()]
    }

    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_by_name.get(name).copied()
    }

    /// The pools a job accepting any pool may use: those with GPUs when it asks for GPUs.
    pub fn pools_for_any(&self, needs_gpu: bool) -> &[PoolId] {
        if needs_gpu {
            &self.gpu_pools
        } else {
            &self.all_pools
        }
    }

    /// The pool of a GPU model (`None`: the CPU-only pool).
    pub fn pool_of_model(&self, model: Option<&str>) -> Option<PoolId> {
        self.pool_by_model.get(&model.map(str::to_owned)).copied()
    }

    pub fn pool(&self, id: PoolId) -> &Pool {
        &self.pools[id.index()]
    }

    pub fn group(&self, id: GroupId) -> &SearchGroup {
        &self.groups[id.index()]
    }

    /// The domain (a dense id per tier) a search group belongs to at `tier`; `None` for a
    /// block of nodes without a leaf group, for a leaf under no spine (at the spine tier)
    /// or under neither a spine nor a superspine (at the superspine tier: a spine under no
    /// superspine is a domain of its own there), or for the HBD tier (HBDs cut across
    /// groups).
    pub fn group_domain(&self, id: GroupId, tier: Tier) -> Option<u32> {
        let leaf = self.groups[id.index()].leaf?;
        let path = &self.leaves[leaf.index()];
        match tier {
            Tier::Hbd => None,
            Tier::Leaf => Some(leaf.0),
            Tier::Spine => (!path.spine.is_empty()).then(|| self.leaf_spine[leaf.index()]),
            Tier::Superspine => {
                let under_some = !(path.superspine.is_empty() && path.spine.is_empty());
                under_some.then(|| self.leaf_superspine[leaf.index()])
            }
        }
    }

    /// The domain of `tier` inside which a job of group `id` crosses no `tier`: the
    /// group's own domain of `tier`, or, for a leaf under no spine (or no superspine),
    /// the leaf itself, which no job inside it crosses. `None` outside every leaf group.
    /// The ids of the two kinds never meet.
    pub fn enclosing_domain(&self, id: GroupId, tier: Tier) -> Option<u64> {
        match self.group_domain(id, tier) {
            Some(domain) => Some(u64::from(domain)),
            None if tier > Tier::Leaf => {
                Some(1 << 32 | u64::from(self.group_domain(id, Tier::Leaf)?))
            }
            None => None,
        }
    }

    /// The groups of every node in a scale-up domain that has a node in `groups` (a job
    /// needing one domain leaves alone a domain partly in room held for another job: such a
    /// hold reaches these groups too).
    pub fn groups_sharing_scale_up_domains(&self, groups: &[GroupId]) -> Vec<GroupId> {
        let mut domains: Vec<u32> = (groups.iter())
            .flat_map(|&g| &self.groups[g.index()].nodes)
            .filter_map(|&n| self.nodes[n.index()].topology.hbd)
            .collect();
        domains.sort_unstable();
        domains.dedup();
        let mut sharing: Vec<GroupId> = (domains.iter())
            .flat_map(|&d| &self.hbd_nodes[d as usize])
            .map(|&n| self.node_group[n.index()])
            .collect();
        sharing.sort_unstable();
        sharing.dedup();
        sharing
    }

    /// GPUs of GPU nodes in all.
    pub fn total_gpus(&self) -> u64 {
        self.nodes.iter().map(|n| n.gpus() as u64).sum()
    }

    /// [`ClusterSpec::total_gpus`] in milli-GPUs.
    pub fn total_milli(&self) -> u64 {
        self.total_gpus() * u64::from(MILLI_PER_GPU)
    }

    /// Number of nodes that carry at least one GPU.
    pub fn gpu_nodes(&self) -> usize {
        self.nodes.iter().filter(|n| n.gpus() > 0).count()
    }

    /// The nodes whose CPU or memory is unknown (treated as unlimited for fit).
    pub fn nodes_with_unknown_capacity(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.cpu_milli.is_none() || n.memory_bytes.is_none())
            .count()
    }

    pub fn gpu_models(&self) -> impl Iterator<Item = &str> {
        self.pools.iter().filter_map(|p| p.gpu_model.as_deref())
    }

    /// The GPU model of every pool, in pool id order (for [`ClusterSpecBuilder::with_pools`]).
    pub fn pool_models(&self) -> Vec<Option<String>> {
        self.pools.iter().map(|p| p.gpu_model.clone()).collect()
    }
}

/// One node as read from a trace row, generated, or converted from a Kubernetes node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeRow {
    pub name: String,
    pub gpu_model: Option<String>,
    pub gpus: usize,
    pub cpu_milli: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub ephemeral_bytes: Option<u64>,
    pub max_pods: Option<u32>,
    pub extended: ExtendedResources,
    pub leaf: Option<LeafPath>,
    pub hbd: Option<String>,
    /// Devices that take no new pod (a bit per device index).
    pub unhealthy: u32,
    pub labels: Labels,
    pub taints: Vec<Taint>,
}

/// Builds a [`ClusterSpec`] node by node, validating each.
/// The most pools (GPU models, and the CPU-only pool) one cluster numbers.
pub const MAX_POOLS: usize = u16::MAX as usize + 1;

#[derive(Debug, Default)]
pub struct ClusterSpecBuilder {
    spec: ClusterSpec,
    leaf_ids: HashMap<LeafPath, LeafId>,
    hbd_ids: HashMap<String, u32>,
    matrices: HashMap<(LinkProfile, usize), Arc<LinkMatrix>>,
    /// The taints each pool already lists (cluster-autoscaler's carry a per-node
    /// timestamp: thousands of distinct taints in one pool).
    pool_taints: HashSet<(PoolId, super::Taint)>,
}

impl ClusterSpecBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder whose pools start as `models` (the first [`MAX_POOLS`]), in this order and
    /// with these ids, even those that get no node: a cluster rebuilt after nodes came or
    /// went keeps the pool ids that pending jobs and tenants' quotas refer to.
    pub fn with_pools(models: &[Option<String>]) -> Self {
        let mut builder = Self::default();
        for model in models.iter().take(MAX_POOLS) {
            let _ = builder.pool_for(model);
        }
        builder
    }

    /// Adds a node whose devices are linked as `profile` says.
    pub fn add(&mut self, row: NodeRow, profile: LinkProfile) -> Result<NodeId, ModelError> {
        let links = match self.matrices.get(&(profile, row.gpus)) {
            Some(m) => m.clone(),
            None => {
                let m = LinkMatrix::from_profile(profile, row.gpus)
                    .map_err(|e| ModelError::new(&row.name, e.message))?
                    .shared();
                self.matrices.insert((profile, row.gpus), m.clone());
                m
            }
        };
        self.add_with_links(row, links)
    }

    /// Adds a node with an explicit link matrix.
    pub fn add_with_links(
        &mut self,
        row: NodeRow,
        links: Arc<LinkMatrix>,
    ) -> Result<NodeId, ModelError> {
        let err = |m: String| ModelError::new(format!("node {}", row.name), m);
        if row.name.is_empty() {
            return Err(ModelError::new("node", "empty node name"));
        }
        if self.spec.node_by_name.contains_key(&row.name) {
            return Err(err("duplicate node name".into()));
        }
        match (&row.gpu_model, row.gpus) {
            (None, n) if n > 0 => {
                return Err(err(format!("{n} GPUs but no GPU model")));
            }
            (Some(model), 0) => {
                return Err(err(format!("GPU model `{model}` but 0 GPUs")));
            }
            _ => {}
        }
        if row.unhealthy & !super::node::device_mask(row.gpus) != 0 {
            return Err(err(format!(
                "unhealthy devices {:#b} beyond its {} GPUs",
                row.unhealthy, row.gpus
            )));
        }
        if links.devices() != row.gpus {
            return Err(err(format!(
                "its link matrix covers {} GPUs, but its gpus field says {}",
                links.devices(),
                row.gpus
            )));
        }
        let pool = self.pool_for(&row.gpu_model).map_err(err)?;
        let leaf = row.leaf.map(|path| {
            let next = LeafId(self.leaf_ids.len() as u32);
            *self.leaf_ids.entry(path.clone()).or_insert_with(|| {
                self.spec.leaves.push(path);
                next
            })
        });
        let hbd = row.hbd.map(|name| {
            let next = self.hbd_ids.len() as u32;
            *self.hbd_ids.entry(name.clone()).or_insert_with(|| {
                self.spec.hbds.push(name);
                next
            })
        });
        let id = NodeId(self.spec.nodes.len() as u32);
        self.spec.node_by_name.insert(row.name.clone(), id);
        let pool_spec = &mut self.spec.pools[pool.index()];
        pool_spec.nodes.push(id);
        for taint in &row.taints {
            if self.pool_taints.insert((pool, taint.clone())) {
                pool_spec.taints.push(taint.clone());
            }
        }
        self.spec.nodes.push(NodeSpec {
            name: row.name,
            gpu_model: row.gpu_model,
            pool,
            cpu_milli: row.cpu_milli,
            memory_bytes: row.memory_bytes,
            ephemeral_bytes: row.ephemeral_bytes,
            max_pods: row.max_pods,
            extended: row.extended,
            links,
            topology: NodeTopology { leaf, hbd },
            unhealthy: row.unhealthy,
            labels: row.labels,
            taints: row.taints,
        });
        Ok(id)
    }

    /// The pool of a GPU model, added if new; fails past the 65,536 pools a `PoolId` numbers.
    fn pool_for(&mut self, model: &Option<String>) -> Result<PoolId, String> {
        if let Some(&id) = self.spec.pool_by_model.get(model) {
            return Ok(id);
        }
        if self.spec.pools.len() >= MAX_POOLS {
            return Err(format!("more than {MAX_POOLS} GPU models in one cluster"));
        }
        let id = PoolId(self.spec.pools.len() as u16);
        self.spec.pools.push(Pool {
            gpu_model: model.clone(),
            nodes: Vec::new(),
            groups: Vec::new(),
            gpus_per_node: 0,
            largest_leaf_gpus: None,
            leaves: 0,
            leaves_in_blocks: false,
            node_sizes: [0; MAX_GPUS_PER_NODE + 1],
            taints: Vec::new(),
            largest_allocatable: Allocatable::NOTHING,
        });
        self.spec.pool_by_model.insert(model.clone(), id);
        Ok(id)
    }

    /// Forms the search groups and pool figures and returns the finished spec.
    pub fn build(mut self) -> ClusterSpec {
        let spec = &mut self.spec;
        let mut spines: HashMap<(&str, &str), u32> = HashMap::new();
        // A spine under no superspine is a superspine domain of its own.
        let mut superspines: HashMap<(&str, &str), u32> = HashMap::new();
        for path in &spec.leaves {
            let next = spines.len() as u32;
            spec.leaf_spine.push(
                *spines
                    .entry((&path.superspine, &path.spine))
                    .or_insert(next),
            );
            let next = superspines.len() as u32;
            let key = match path.superspine.as_str() {
                "" => ("", path.spine.as_str()),
                named => (named, ""),
            };
            spec.leaf_superspine
                .push(*superspines.entry(key).or_insert(next));
        }
        spec.hbd_nodes = vec![Vec::new(); spec.hbds.len()];
        for (index, node) in spec.nodes.iter().enumerate() {
            if let Some(hbd) = node.topology.hbd {
                spec.hbd_nodes[hbd as usize].push(NodeId(index as u32));
            }
        }
        spec.node_group = vec![GroupId(0); spec.nodes.len()];
        for pool_index in 0..spec.pools.len() {
            let pool_id = PoolId(pool_index as u16);
            // In the order the leaves first appear.
            let mut by_leaf: Vec<(LeafId, Vec<NodeId>)> = Vec::new();
            let mut leaf_at: HashMap<LeafId, usize> = HashMap::new();
            let mut ungrouped = Vec::new();
            for &node in &spec.pools[pool_index].nodes {
                match spec.nodes[node.index()].topology.leaf {
                    Some(leaf) => {
                        let at = *leaf_at.entry(leaf).or_insert_with(|| {
                            by_leaf.push((leaf, Vec::new()));
                            by_leaf.len() - 1
                        });
                        by_leaf[at].1.push(node);
                    }
                    None => ungrouped.push(node),
                }
            }
            let gpus_of = |nodes: &[NodeId]| -> u32 {
                nodes
                    .iter()
                    .map(|n| spec.nodes[n.index()].gpus() as u32)
                    .sum()
            };
            let largest_leaf = by_leaf.iter().map(|(_, nodes)| gpus_of(nodes)).max();
            let leaf_groups_of_pool = by_leaf.len();
            let leaves_in_blocks = by_leaf.iter().any(|(_, nodes)| nodes.len() > LEAF_BLOCK);
            let mut groups = Vec::new();
            let leaf_groups = by_leaf.into_iter().flat_map(|(leaf, nodes)| {
                let blocks = nodes.len().div_ceil(LEAF_BLOCK);
                let (size, longer) = (nodes.len() / blocks, nodes.len() % blocks);
                let mut rest = nodes.as_slice();
                (0..blocks)
                    .map(|b| {
                        let (block, after) = rest.split_at(size + usize::from(b < longer));
                        rest = after;
                        (Some(leaf), block.to_vec())
                    })
                    .collect::<Vec<_>>()
            });
            let blocks = ungrouped
                .chunks(UNGROUPED_BLOCK)
                .map(|c| (None, c.to_vec()))
                .collect::<Vec<_>>();
            let leaves = leaf_groups_of_pool + blocks.len();
            for (leaf, nodes) in leaf_groups.chain(blocks) {
                let gid = GroupId(spec.groups.len() as u32);
                let mut node_sizes = [0; MAX_GPUS_PER_NODE + 1];
                for n in &nodes {
                    spec.node_group[n.index()] = gid;
                    node_sizes[spec.nodes[n.index()].gpus()] += 1;
                }
                spec.groups.push(SearchGroup {
                    pool: pool_id,
                    leaf,
                    nodes,
                    node_sizes,
                });
                groups.push(gid);
            }
            let pool = &mut spec.pools[pool_index];
            pool.gpus_per_node = pool
                .nodes
                .iter()
                .map(|n| spec.nodes[n.index()].gpus() as u32)
                .max()
                .unwrap_or(0);
            pool.largest_leaf_gpus = largest_leaf;
            pool.leaves = leaves;
            pool.leaves_in_blocks = leaves_in_blocks;
            pool.groups = groups;
            for &node in &pool.nodes {
                let node = &spec.nodes[node.index()];
                pool.node_sizes[node.gpus()] += 1;
                pool.largest_allocatable = pool.largest_allocatable.max(Allocatable::of(node));
            }
        }
        let pools = || (0..spec.pools.len()).map(|i| PoolId(i as u16));
        spec.all_pools = pools().collect();
        spec.gpu_pools = pools()
            .filter(|&p| spec.pools[p.index()].gpus_per_node > 0)
            .collect();
        self.spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn row(name: &str, model: Option<&str>, gpus: usize, leaf: Option<&str>) -> NodeRow {
        NodeRow {
            name: name.into(),
            gpu_model: model.map(Into::into),
            gpus,
            cpu_milli: Some(64_000),
            memory_bytes: Some(512 << 30),
            leaf: leaf.map(|l| LeafPath {
                superspine: "ss".into(),
                spine: "sp".into(),
                leaf: l.into(),
            }),
            hbd: None,
            ..Default::default()
        }
    }

    #[test]
    fn groups_split_by_pool_and_leaf() {
        let mut b = ClusterSpecBuilder::new();
        b.add(
            row("a", Some("H100"), 8, Some("l1")),
            LinkProfile::NvlinkAll,
        )
        .unwrap();
        b.add(
            row("b", Some("H100"), 8, Some("l1")),
            LinkProfile::NvlinkAll,
        )
        .unwrap();
        b.add(
            row("c", Some("A100"), 8, Some("l1")),
            LinkProfile::NvlinkAll,
        )
        .unwrap();
        b.add(row("d", Some("A100"), 4, None), LinkProfile::NvlinkAll)
            .unwrap();
        let spec = b.build();
        assert_eq!(spec.pools.len(), 2);
        assert_eq!(spec.groups.len(), 3);
        let h100 = spec.pool_of_model(Some("H100")).unwrap();
        assert_eq!(spec.pool(h100).largest_leaf_gpus, Some(16));
        assert_eq!(spec.pool(h100).leaves, 1);
        let a100 = spec.pool_of_model(Some("A100")).unwrap();
        assert_eq!(spec.pool(a100).gpus_per_node, 8);
        assert_eq!(spec.pool(a100).largest_leaf_gpus, Some(8));
        assert_eq!(
            spec.pool(a100).leaves,
            2,
            "node d is in no leaf: a block of its own"
        );
        assert_eq!(spec.total_gpus(), 28);
    }

    #[test]
    fn a_leaf_of_more_than_a_block_is_searched_in_near_equal_blocks_and_stays_one_leaf() {
        let mut b = ClusterSpecBuilder::new();
        for (leaf, nodes) in [("big", 2 * LEAF_BLOCK + 2), ("full", LEAF_BLOCK)] {
            for n in 0..nodes {
                let name = format!("{leaf}-{n}");
                b.add(
                    row(&name, Some("H100"), 8, Some(leaf)),
                    LinkProfile::NvlinkAll,
                )
                .unwrap();
            }
        }
        let spec = b.build();
        let sizes: Vec<usize> = spec.groups.iter().map(|g| g.nodes.len()).collect();
        assert_eq!((sizes.len(), sizes[3]), (4, LEAF_BLOCK));
        assert_eq!(sizes[..3].iter().sum::<usize>(), 2 * LEAF_BLOCK + 2);
        assert!(sizes[0] - sizes[2] <= 1, "near equal: {sizes:?}");
        let leaves: Vec<_> = spec.groups.iter().map(|g| g.leaf).collect();
        assert_eq!(leaves[0], leaves[2], "the blocks of one leaf keep its leaf");
        assert_ne!(leaves[2], leaves[3]);
        let h100 = spec.pool(spec.pool_of_model(Some("H100")).unwrap());
        assert!(h100.leaves_in_blocks);
        assert_eq!(
            h100.largest_leaf_gpus,
            Some(8 * (2 * LEAF_BLOCK as u32 + 2))
        );
        let domain = |g: usize| spec.group_domain(GroupId(g as u32), Tier::Leaf);
        assert_eq!(domain(0), domain(2));
    }

    #[test]
    fn domains_follow_whole_paths() {
        let mut b = ClusterSpecBuilder::new();
        let at = |name: &str, superspine: &str, spine: &str, leaf: &str| NodeRow {
            leaf: Some(LeafPath {
                superspine: superspine.into(),
                spine: spine.into(),
                leaf: leaf.into(),
            }),
            hbd: Some(format!("hbd-{spine}")),
            ..row(name, Some("H100"), 8, None)
        };
        for (name, ss, sp, leaf) in [
            ("a", "ss0", "p0", "l0"),
            ("b", "ss0", "p1", "l0"),
            ("c", "ss1", "p0", "l0"),
            ("d", "ss0", "p0", "l0"),
        ] {
            b.add(at(name, ss, sp, leaf), LinkProfile::NvlinkAll)
                .unwrap();
        }
        let spec = b.build();
        assert_eq!(spec.leaves.len(), 3, "leaf l0 under three different spines");
        let group_of = |n: &str| spec.node_group[spec.node_id(n).unwrap().index()];
        let domain = |n: &str, t: Tier| spec.group_domain(group_of(n), t);
        assert_eq!(domain("a", Tier::Leaf), domain("d", Tier::Leaf));
        assert_ne!(domain("a", Tier::Spine), domain("b", Tier::Spine));
        assert_eq!(domain("a", Tier::Superspine), domain("b", Tier::Superspine));
        assert_ne!(
            domain("a", Tier::Spine),
            domain("c", Tier::Spine),
            "p0 under ss1 differs"
        );
        assert_eq!(spec.hbd_nodes.len(), 2);
        assert_eq!(spec.hbd_nodes[0].len(), 3);
    }

    #[test]
    fn rejects_gpu_count_and_model_disagreeing() {
        let mut b = ClusterSpecBuilder::new();
        let e = b
            .add(row("x", None, 8, None), LinkProfile::NvlinkAll)
            .unwrap_err();
        assert_eq!(e.to_string(), "node x: 8 GPUs but no GPU model");
        let e = b
            .add(row("y", Some("H100"), 0, None), LinkProfile::NvlinkAll)
            .unwrap_err();
        assert!(e.to_string().contains("but 0 GPUs"));
        b.add(row("z", Some("H100"), 8, None), LinkProfile::NvlinkAll)
            .unwrap();
        let e = b
            .add(row("z", Some("H100"), 8, None), LinkProfile::NvlinkAll)
            .unwrap_err();
        assert!(e.to_string().contains("duplicate"));
    }

    #[test]
    fn refuses_a_gpu_model_past_the_pools_a_cluster_numbers() {
        let models: Vec<Option<String>> = (0..MAX_POOLS).map(|i| Some(format!("M{i}"))).collect();
        let mut b = ClusterSpecBuilder::with_pools(&models);
        b.add(row("last", Some("M65535"), 1, None), LinkProfile::NvlinkAll)
            .unwrap();
        let e = b
            .add(row("x", Some("M65536"), 1, None), LinkProfile::NvlinkAll)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "node x: more than 65536 GPU models in one cluster"
        );
    }
}
