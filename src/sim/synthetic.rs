//! The embedded default cluster and a seeded synthetic workload, for runs without a trace
//! and for tests. Both are deterministic: the cluster has no randomness, the workload is a
//! function of the cluster and [`SyntheticOptions`] alone (ChaCha8 seeded from `seed`).
//!
//! This module owns the definitions below; it builds model types only and touches no file
//! (`--write-trace` writes what it returns through `sim::trace`).
//!
//! # Default cluster
//!
//! 384 nodes of 8 GPUs, 3,072 GPUs, 224 CPU cores and 2,048 GiB each, one superspine `ss0`:
//! - `H100`: 256 nodes ([`LinkProfile::NvlinkAll`]), 8 leaf groups of 32 nodes; leaves 0-3
//!   under `spine-0`, 4-7 under `spine-1`; every 8 consecutive nodes share an HBD
//!   (`hbd-0` .. `hbd-31`).
//! - `A100`: 128 nodes ([`LinkProfile::NvlinkPairs`]: PCIe cards with NVLink bridges), 8 leaf
//!   groups of 16 nodes under `spine-2`, no HBD.
//!
//! Nodes are named `h100-l3-n07` (leaf 3, node 7 of that leaf). Leaf names repeat across
//! spines on purpose (`leaf-0` exists under each of the three spines) so that every consumer
//! has to identify a leaf by its whole path.
//!
//! # Synthetic workload
//!
//! The shape the Kant paper reports for production AI clusters: most jobs are small, a few
//! large gangs hold most of the GPU-time. Per job, independently:
//!
//! | kind | share | pods × GPUs | duration (log-uniform) | priority | GPU model |
//! |---|---|---|---|---|---|
//! | inference | 25% | 1 × 0.25 (20%), 0.5 (30%), 1 (35%), 2 (15%) | 2–12 h | 100 | secondary 60%, either 40% |
//! | dev | 10% | 1 × 0.5 (25%), 1 (50%), 2 (25%) | 10–60 min | 0 | balanced, below |
//! | train | 65% | total GPUs below | by size, below | 50 for 10%, else 0 | balanced, below |
//!
//! Train sizes in total GPUs (weights): 1 (30), 2 (10), 4 (12), 8 (25), 16 (8), 32 (6),
//! 64 (4), 128 (2.5), 256 (1.5), 512 (0.7), 1024 (0.3). Up to 8 GPUs a job is one pod of that
//! size; above, a gang of 8-GPU pods. Train durations: up to 8 GPUs 5 min–4 h, 16–32 GPUs
//! 30 min–8 h, 64 GPUs and more 1–12 h. Durations are whole seconds. Train jobs of exactly
//! 64 GPUs prefer one scale-up domain (`preferred:hbd`) when the cluster has HBDs.
//!
//! Tenants: `default` is index 0 and owns no generated job; `team-nlp` (40%),
//! `team-vision` (25%), `team-speech` (20%), `team-research` (15%).
//!
//! GPU models: "primary" is the GPU pool with the most GPUs (`H100` in the default
//! cluster), "secondary" the next (`A100`), "either" both. Train and dev jobs accept either
//! model 15% of the time (never the jobs of 64 GPUs or more); otherwise they name the
//! primary or the secondary pool in proportion to the pools' GPUs; a job larger than half
//! the secondary pool names the primary, and nothing offsets those, so the primary pool
//! is offered more of its capacity than the secondary (on the default cluster, 93% and 76%
//! on average over seeds 1 to 30). On another cluster: with a
//! single GPU pool every choice is that pool; train sizes larger than the primary pool are
//! left out of the mix; gang pods hold at most as many GPUs as the primary pool's nodes
//! (rounded down to a power of two); a secondary-pool job larger than that pool asks for
//! the primary pool instead.
//!
//! Arrivals: sizes and durations are drawn first, then `jobs` exponential inter-arrival
//! gaps, scaled together so that they add up to exactly the horizon
//! `T = Σ(GPUs × duration) / (load × cluster GPUs)`: the offered load over the arrival
//! horizon is `load` exactly for the sample (a Poisson process conditioned on its
//! horizon). The first job comes at 0 and each next one a gap later, so the last comes one
//! gap (about `T / jobs`) before `T`: over the metrics' window, first to last submission,
//! the offered load is that much above `load`. Submit times are whole seconds from 0, jobs
//! are named `syn-000001`, ... in submission order and their ids are dense. A load that is
//! not a positive finite number gives a horizon of 0 (every job submitted at 0). Cost is
//! O(jobs).

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::model::{
    ClusterSpec, ClusterSpecBuilder, GpuRequest, Job, JobId, JobKind, LeafPath, LinkProfile,
    NodeRow, PodRequest, PoolId, TenantId, Tier, TopologyNeed,
};

use super::trace::Workload;
use crate::queue::{DEFAULT_TENANT, TenantConfig, TenantMode};

/// How to generate a synthetic workload.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticOptions {
    pub seed: u64,
    pub jobs: usize,
    /// Offered load: GPU-time asked for over the arrival horizon, as a share of the
    /// cluster's GPUs.
    pub load: f64,
}

impl Default for SyntheticOptions {
    fn default() -> Self {
        Self {
            seed: 42,
            jobs: 4000,
            load: 0.9,
        }
    }
}

/// CPU of every default-cluster node, in millicores (224 cores).
pub const DEFAULT_NODE_CPU_MILLI: u64 = 224_000;
/// Memory of every default-cluster node, in bytes (2,048 GiB).
pub const DEFAULT_NODE_MEMORY_BYTES: u64 = 2_048 << 30;

/// One GPU model's part of the default cluster.
struct PoolLayout {
    model: &'static str,
    prefix: &'static str,
    leaves: usize,
    nodes_per_leaf: usize,
    leaves_per_spine: usize,
    first_spine: usize,
    links: LinkProfile,
    hbd_nodes: Option<usize>,
}

const DEFAULT_POOLS: [PoolLayout; 2] = [
    PoolLayout {
        model: "H100",
        prefix: "h100",
        leaves: 8,
        nodes_per_leaf: 32,
        leaves_per_spine: 4,
        first_spine: 0,
        links: LinkProfile::NvlinkAll,
        hbd_nodes: Some(8),
    },
    PoolLayout {
        model: "A100",
        prefix: "a100",
        leaves: 8,
        nodes_per_leaf: 16,
        leaves_per_spine: 8,
        first_spine: 2,
        links: LinkProfile::NvlinkPairs,
        hbd_nodes: None,
    },
];

const DEFAULT_GPUS_PER_NODE: usize = 8;
const DEFAULT_SUPERSPINE: &str = "ss0";

/// The embedded default cluster (see the module documentation). Also what
/// `--write-trace` writes.
pub fn default_cluster() -> ClusterSpec {
    let mut builder = ClusterSpecBuilder::new();
    for layout in &DEFAULT_POOLS {
        for leaf in 0..layout.leaves {
            let spine = layout.first_spine + leaf / layout.leaves_per_spine;
            for n in 0..layout.nodes_per_leaf {
                let index = leaf * layout.nodes_per_leaf + n;
                let row = NodeRow {
                    name: format!("{}-l{leaf}-n{n:02}", layout.prefix),
                    gpu_model: Some(layout.model.to_owned()),
                    gpus: DEFAULT_GPUS_PER_NODE,
                    cpu_milli: Some(DEFAULT_NODE_CPU_MILLI),
                    memory_bytes: Some(DEFAULT_NODE_MEMORY_BYTES),
                    leaf: Some(LeafPath {
                        superspine: DEFAULT_SUPERSPINE.to_owned(),
                        spine: format!("spine-{spine}"),
                        leaf: format!("leaf-{}", leaf % layout.leaves_per_spine),
                    }),
                    hbd: layout.hbd_nodes.map(|size| format!("hbd-{}", index / size)),
                    ..Default::default()
                };
                builder
                    .add(row, layout.links)
                    .expect("the embedded default cluster is valid");
            }
        }
    }
    builder.build()
}

/// The link profiles of the default cluster's GPU models, for `TraceOptions::links_by_model`
/// so that a written and re-read default cluster has the same links.
pub fn default_links_by_model() -> HashMap<String, LinkProfile> {
    DEFAULT_POOLS
        .iter()
        .map(|layout| (layout.model.to_owned(), layout.links))
        .collect()
}

/// Tenants of the generated jobs with their shares; `default` (index 0) comes first.
const TENANTS: [(&str, f64); 4] = [
    ("team-nlp", 40.0),
    ("team-vision", 25.0),
    ("team-speech", 20.0),
    ("team-research", 15.0),
];

/// Of every GPU model, the share held as quota by the synthetic tenants; the rest is
/// owned by no one and borrowable by shared tenants.
const QUOTA_SHARE_OF_POOLS: f64 = 0.8;

/// The synthetic tenants with quotas: each holds, of every GPU model, its job share of
/// 80% of the pool; `team-research` is isolated, the others shared.
pub fn default_tenants(cluster: &ClusterSpec) -> Vec<TenantConfig> {
    let total: f64 = TENANTS.iter().map(|&(_, share)| share).sum();
    TENANTS
        .iter()
        .map(|&(name, share)| TenantConfig {
            name: name.to_owned(),
            mode: if name == "team-research" {
                TenantMode::Isolated
            } else {
                TenantMode::Shared
            },
            weight: 1.0,
            quota: cluster
                .pools
                .iter()
                .filter_map(|pool| {
                    let model = pool.gpu_model.clone()?;
                    let gpus: usize = pool.nodes.iter().map(|&n| cluster.node(n).gpus()).sum();
                    let quota = (gpus as f64 * QUOTA_SHARE_OF_POOLS * share / total).floor();
                    Some((model, quota as i64))
                })
                .collect(),
        })
        .collect()
}

/// Assigns every job that names no tenant to a synthetic tenant, by a seeded hash of its
/// name weighted by the tenants' job shares: the same job always goes to the same tenant.
/// The rows skipped for want of a duration too: `--fill` replays them.
pub fn assign_tenants(workload: &mut Workload, seed: u64) {
    let total: f64 = TENANTS.iter().map(|&(_, share)| share).sum();
    let mut ids = Vec::new();
    for &(name, _) in &TENANTS {
        let id = match workload.tenants.iter().position(|t| t == name) {
            Some(index) => index,
            None => {
                workload.tenants.push(name.to_owned());
                workload.tenants.len() - 1
            }
        };
        ids.push(TenantId(id as u16));
    }
    let jobs = workload.jobs.iter_mut().chain(&mut workload.skipped);
    for job in jobs.filter(|j| j.tenant == TenantId(0)) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ fnv1a(job.name.as_bytes()));
        let mut draw = rng.random::<f64>() * total;
        let mut chosen = ids[ids.len() - 1];
        for (&(_, share), &id) in TENANTS.iter().zip(&ids) {
            if draw < share {
                chosen = id;
                break;
            }
            draw -= share;
        }
        job.tenant = chosen;
    }
}

/// FNV-1a: a stable hash of a job name, independent of the platform and of Rust's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

const KINDS: [(JobKind, f64); 3] = [
    (JobKind::Inference, 25.0),
    (JobKind::Dev, 10.0),
    (JobKind::Train, 65.0),
];

const INFERENCE_GPUS: [(GpuRequest, f64); 4] = [
    (GpuRequest::Fraction(250), 20.0),
    (GpuRequest::Fraction(500), 30.0),
    (GpuRequest::Whole(1), 35.0),
    (GpuRequest::Whole(2), 15.0),
];

const DEV_GPUS: [(GpuRequest, f64); 3] = [
    (GpuRequest::Fraction(500), 25.0),
    (GpuRequest::Whole(1), 50.0),
    (GpuRequest::Whole(2), 25.0),
];

/// Train job sizes in total GPUs, with weights.
const TRAIN_SIZES: [(u32, f64); 11] = [
    (1, 30.0),
    (2, 10.0),
    (4, 12.0),
    (8, 25.0),
    (16, 8.0),
    (32, 6.0),
    (64, 4.0),
    (128, 2.5),
    (256, 1.5),
    (512, 0.7),
    (1024, 0.3),
];

/// Train jobs of at least this many GPUs never accept either model: they name one pool.
const LARGE_TRAIN_GPUS: u32 = 64;
/// Train jobs of exactly this many GPUs prefer one scale-up domain (`preferred:hbd`) when
/// the cluster has HBDs.
const HBD_TRAIN_GPUS: u32 = 64;
/// GPUs per pod of a gang.
const GANG_POD_GPUS: u32 = 8;
/// Share of train jobs at priority 50.
const TRAIN_HIGH_PRIORITY_SHARE: f64 = 0.10;

const MINUTE: f64 = 60.0;
const HOUR: f64 = 3_600.0;
const INFERENCE_DURATION_S: (f64, f64) = (2.0 * HOUR, 12.0 * HOUR);
const DEV_DURATION_S: (f64, f64) = (10.0 * MINUTE, 60.0 * MINUTE);

fn train_duration_s(gpus: u32) -> (f64, f64) {
    match gpus {
        0..=8 => (5.0 * MINUTE, 4.0 * HOUR),
        9..=32 => (30.0 * MINUTE, 8.0 * HOUR),
        _ => (HOUR, 12.0 * HOUR),
    }
}

#[derive(Debug, Clone, Copy)]
enum ModelChoice {
    Primary,
    Secondary,
    Either,
}

/// Share of train and dev jobs that accept either GPU model; the rest ask for one model,
/// chosen in proportion to the pools' GPUs so that each pool is offered the same load.
const EITHER_MODEL_SHARE: f64 = 0.15;

const INFERENCE_MODELS: [(ModelChoice, f64); 2] =
    [(ModelChoice::Secondary, 60.0), (ModelChoice::Either, 40.0)];

/// The GPU pools the mix's model choices resolve to.
struct Pools {
    /// (pool, its GPUs), the largest first; at most two.
    ranked: Vec<(PoolId, u64)>,
    gang_pod_gpus: u32,
}

impl Pools {
    fn of(cluster: &ClusterSpec) -> Self {
        let mut ranked: Vec<(PoolId, u64, u32)> = cluster
            .pools
            .iter()
            .enumerate()
            .filter(|(_, pool)| pool.gpu_model.is_some())
            .map(|(index, pool)| {
                let gpus = pool
                    .nodes
                    .iter()
                    .map(|&n| cluster.node(n).gpus() as u64)
                    .sum::<u64>();
                (PoolId(index as u16), gpus, pool.gpus_per_node)
            })
            .collect();
        // Stable: equal pools keep cluster order.
        ranked.sort_by_key(|&(_, gpus, _)| std::cmp::Reverse(gpus));
        let gang_pod_gpus = match ranked.first() {
            Some(&(_, _, per_node)) if per_node > 0 => GANG_POD_GPUS.min(1 << per_node.ilog2()),
            _ => GANG_POD_GPUS,
        };
        Self {
            ranked: ranked
                .into_iter()
                .take(2)
                .map(|(pool, gpus, _)| (pool, gpus))
                .collect(),
            gang_pod_gpus,
        }
    }

    /// A model choice that offers each pool load in proportion to its GPUs: either model
    /// for a share of jobs (never for `large` ones, which name one), else the primary or
    /// secondary pool by their GPUs; a job larger than half the secondary pool goes to the
    /// primary.
    fn balanced(&self, rng: &mut ChaCha8Rng, large: bool, gpus: u32) -> ModelChoice {
        let draw: f64 = rng.random();
        let (primary, secondary) = match self.ranked.as_slice() {
            [(_, a), (_, b), ..] => (*a as f64, *b as f64),
            _ => return ModelChoice::Primary,
        };
        if !large && draw < EITHER_MODEL_SHARE {
            return ModelChoice::Either;
        }
        let draw = if large {
            draw
        } else {
            (draw - EITHER_MODEL_SHARE) / (1.0 - EITHER_MODEL_SHARE)
        };
        let fits_secondary = f64::from(gpus) * 2.0 <= secondary;
        if fits_secondary && draw * (primary + secondary) >= primary {
            ModelChoice::Secondary
        } else {
            ModelChoice::Primary
        }
    }

    fn primary_gpus(&self) -> Option<u64> {
        self.ranked.first().map(|&(_, gpus)| gpus)
    }

    fn resolve(&self, choice: ModelChoice, job_milli: u64) -> Vec<PoolId> {
        let primary = self.ranked.first().map(|&(p, _)| p);
        let secondary = self
            .ranked
            .get(1)
            .filter(|&&(_, gpus)| gpus * 1000 >= job_milli)
            .map(|&(p, _)| p);
        match choice {
            ModelChoice::Primary => primary.into_iter().collect(),
            ModelChoice::Secondary => secondary.or(primary).into_iter().collect(),
            ModelChoice::Either => match self.ranked.as_slice() {
                [(a, _), (b, _)] => vec![*a, *b],
                other => other.iter().map(|&(p, _)| p).collect(),
            },
        }
    }
}

/// Draws one of `table`'s values by weight.
fn pick<T: Copy>(rng: &mut ChaCha8Rng, table: &[(T, f64)]) -> T {
    let total: f64 = table.iter().map(|&(_, w)| w).sum();
    let mut point = rng.random::<f64>() * total;
    for &(value, weight) in table {
        if point < weight {
            return value;
        }
        point -= weight;
    }
    table[table.len() - 1].0
}

/// A log-uniform draw in `[low, high]`, rounded to whole seconds (at least 1), in ms.
fn log_uniform_ms(rng: &mut ChaCha8Rng, (low, high): (f64, f64)) -> u64 {
    let u: f64 = rng.random();
    let seconds = (low.ln() + u * (high.ln() - low.ln())).exp();
    (seconds.round() as u64).max(1) * 1000
}

/// A synthetic workload on `cluster` as the module documentation defines it.
pub fn generate_workload(cluster: &ClusterSpec, options: &SyntheticOptions) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let pools = Pools::of(cluster);
    let train_sizes: Vec<(u32, f64)> = TRAIN_SIZES
        .iter()
        .copied()
        .filter(|&(gpus, _)| {
            pools
                .primary_gpus()
                .is_none_or(|cap| u64::from(gpus) <= cap)
        })
        .collect();
    let train_sizes = if train_sizes.is_empty() {
        vec![TRAIN_SIZES[0]]
    } else {
        train_sizes
    };
    let tenant_ids: Vec<(TenantId, f64)> = TENANTS
        .iter()
        .enumerate()
        .map(|(i, &(_, share))| (TenantId(i as u16 + 1), share))
        .collect();

    let mut jobs = Vec::with_capacity(options.jobs);
    for index in 0..options.jobs {
        let kind = pick(&mut rng, &KINDS);
        let (gpu, pod_count, duration_ms, priority, models) = match kind {
            JobKind::Inference => {
                let gpu = pick(&mut rng, &INFERENCE_GPUS);
                let duration = log_uniform_ms(&mut rng, INFERENCE_DURATION_S);
                (gpu, 1, duration, 100, pick(&mut rng, &INFERENCE_MODELS))
            }
            JobKind::Dev => {
                let gpu = pick(&mut rng, &DEV_GPUS);
                let duration = log_uniform_ms(&mut rng, DEV_DURATION_S);
                let models = pools.balanced(&mut rng, false, gpu.whole());
                (gpu, 1, duration, 0, models)
            }
            _ => {
                let gpus = pick(&mut rng, &train_sizes);
                let pod_gpus = gpus.min(pools.gang_pod_gpus);
                let duration = log_uniform_ms(&mut rng, train_duration_s(gpus));
                let priority = if rng.random::<f64>() < TRAIN_HIGH_PRIORITY_SHARE {
                    50
                } else {
                    0
                };
                let models = pools.balanced(&mut rng, gpus >= LARGE_TRAIN_GPUS, gpus);
                let pods = (gpus / pod_gpus) as usize;
                (
                    GpuRequest::Whole(pod_gpus),
                    pods,
                    duration,
                    priority,
                    models,
                )
            }
        };
        let tenant = pick(&mut rng, &tenant_ids);
        let job_milli = gpu.milli() * pod_count as u64;
        jobs.push(Job {
            id: JobId(index as u32),
            name: format!("syn-{:06}", index + 1),
            tenant,
            priority,
            kind,
            pools: pools.resolve(models, job_milli),
            pods: vec![PodRequest::gpus(gpu); pod_count],
            submit_ms: 0,
            duration_ms: Some(duration_ms),
            topology: (kind == JobKind::Train
                && pod_count as u32 * gpu.whole() == HBD_TRAIN_GPUS
                && !cluster.hbds.is_empty())
            .then_some(TopologyNeed {
                tier: Tier::Hbd,
                required: false,
            }),
            constraints: Vec::new(),
            pod_rules: None,
            may_preempt: true,
        });
    }

    // Arrivals, from the drawn jobs: the horizon that makes the offered load exact.
    let gpu_seconds: f64 = jobs
        .iter()
        .map(|job| job.total_milli() as f64 / 1000.0 * job.duration_ms.unwrap_or(0) as f64 / 1000.0)
        .sum();
    let capacity = cluster.total_gpus() as f64 * options.load;
    let horizon_s = if capacity > 0.0 && capacity.is_finite() {
        gpu_seconds / capacity
    } else {
        0.0
    };
    let gaps: Vec<f64> = (0..jobs.len())
        .map(|_| -(1.0 - rng.random::<f64>()).ln())
        .collect();
    let total_gap: f64 = gaps.iter().sum();
    let scale = if total_gap > 0.0 {
        horizon_s / total_gap
    } else {
        0.0
    };
    let mut clock = 0.0;
    for (job, gap) in jobs.iter_mut().zip(&gaps) {
        job.submit_ms = (clock * scale).floor() as u64 * 1000;
        clock += gap;
    }

    let tenants = std::iter::once(DEFAULT_TENANT)
        .chain(TENANTS.iter().map(|&(name, _)| name))
        .map(str::to_owned)
        .collect();
    Workload {
        jobs,
        tenants,
        ..Workload::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (jobs by bucket, GPU-time share of jobs of 64+ GPUs, offered load).
    struct Figures {
        buckets: Vec<(&'static str, usize)>,
        large_share: f64,
        offered_load: f64,
    }

    fn figures(cluster: &ClusterSpec, workload: &Workload) -> Figures {
        let mut buckets = vec![
            ("<1", 0),
            ("1", 0),
            ("2-8", 0),
            ("9-64", 0),
            ("65-256", 0),
            ("257-1024", 0),
            (">1024", 0),
        ];
        let (mut all, mut large) = (0.0, 0.0);
        for job in &workload.jobs {
            let milli = job.total_milli();
            let bucket = match milli {
                0..1000 => 0,
                1000 => 1,
                1001..=8000 => 2,
                8001..=64_000 => 3,
                64_001..=256_000 => 4,
                256_001..=1_024_000 => 5,
                _ => 6,
            };
            buckets[bucket].1 += 1;
            let gpu_s = milli as f64 / 1000.0 * job.duration_ms.unwrap_or(0) as f64 / 1000.0;
            all += gpu_s;
            if milli >= 64_000 {
                large += gpu_s;
            }
        }
        let last_submit_s = workload.jobs.last().map_or(0, |j| j.submit_ms) as f64 / 1000.0;
        Figures {
            buckets,
            large_share: large / all,
            offered_load: all / (cluster.total_gpus() as f64 * last_submit_s),
        }
    }

    #[test]
    fn default_cluster_shape() {
        let cluster = default_cluster();
        assert_eq!(cluster.total_gpus(), 3072);
        assert_eq!(cluster.nodes.len(), 384);
        assert_eq!(cluster.pools.len(), 2);
        assert_eq!(cluster.leaves.len(), 16);
        assert_eq!(cluster.groups.len(), 16);
        assert_eq!(cluster.hbds.len(), 32);
        let h100 = cluster.pool_of_model(Some("H100")).expect("H100 pool");
        let a100 = cluster.pool_of_model(Some("A100")).expect("A100 pool");
        assert_eq!(cluster.pool(h100).nodes.len(), 256);
        assert_eq!(cluster.pool(h100).largest_leaf_gpus, Some(256));
        assert_eq!(cluster.pool(a100).largest_leaf_gpus, Some(128));
        assert_eq!(cluster.nodes_with_unknown_capacity(), 0);

        // Leaf-path identity: `leaf-0` under spine-0, spine-1 and spine-2 are three leaves.
        let leaf0: Vec<&LeafPath> = cluster
            .leaves
            .iter()
            .filter(|l| l.leaf == "leaf-0")
            .collect();
        assert_eq!(leaf0.len(), 3);
        let a = cluster.node(cluster.node_id("h100-l0-n00").expect("node"));
        let b = cluster.node(cluster.node_id("h100-l4-n00").expect("node"));
        let (la, lb) = (
            a.topology.leaf.expect("leaf"),
            b.topology.leaf.expect("leaf"),
        );
        assert_ne!(la, lb);
        assert_eq!(
            cluster.leaves[la.index()].leaf,
            cluster.leaves[lb.index()].leaf
        );
        assert_ne!(
            cluster.leaves[la.index()].spine,
            cluster.leaves[lb.index()].spine
        );

        // HBDs: 8 consecutive H100 nodes; none on A100.
        let hbd = |name: &str| {
            cluster
                .node(cluster.node_id(name).expect("node"))
                .topology
                .hbd
        };
        assert_eq!(hbd("h100-l0-n07"), hbd("h100-l0-n00"));
        assert_ne!(hbd("h100-l0-n08"), hbd("h100-l0-n07"));
        assert_eq!(hbd("a100-l2-n11"), None);
        let links = default_links_by_model();
        assert_eq!(links["H100"], LinkProfile::NvlinkAll);
        assert_eq!(links["A100"], LinkProfile::NvlinkPairs);
    }

    fn summary(workload: &Workload) -> Vec<(String, u32, u64, u64, Vec<PoolId>, i32)> {
        workload
            .jobs
            .iter()
            .map(|j| {
                (
                    j.name.clone(),
                    j.id.0,
                    j.submit_ms,
                    j.duration_ms.unwrap_or(0),
                    j.pools.clone(),
                    j.priority,
                )
            })
            .collect()
    }

    #[test]
    fn generator_is_deterministic_per_seed() {
        let cluster = default_cluster();
        let options = SyntheticOptions {
            jobs: 300,
            ..SyntheticOptions::default()
        };
        let a = generate_workload(&cluster, &options);
        let b = generate_workload(&cluster, &options);
        assert_eq!(summary(&a), summary(&b));
        let c = generate_workload(
            &cluster,
            &SyntheticOptions {
                seed: 43,
                ..options
            },
        );
        assert_ne!(summary(&a), summary(&c));
    }

    #[test]
    fn generated_jobs_are_well_formed() {
        let cluster = default_cluster();
        let workload = generate_workload(&cluster, &SyntheticOptions::default());
        assert_eq!(workload.jobs.len(), 4000);
        assert_eq!(workload.tenants[0], "default");
        assert_eq!(workload.tenants.len(), 5);
        assert_eq!(workload.jobs[0].submit_ms, 0);
        assert_eq!(workload.jobs[0].name, "syn-000001");
        let h100 = cluster.pool_of_model(Some("H100")).expect("H100");
        for (i, job) in workload.jobs.iter().enumerate() {
            assert_eq!(job.id, JobId(i as u32));
            assert!(i == 0 || workload.jobs[i - 1].submit_ms <= job.submit_ms);
            assert_eq!(job.submit_ms % 1000, 0);
            assert!(job.duration_ms.is_some_and(|d| d > 0 && d % 1000 == 0));
            assert!(job.tenant.index() >= 1 && job.tenant.index() < 5);
            if job.total_milli() >= 64_000 {
                assert_eq!(job.pools.len(), 1, "a large job names one model");
                assert_eq!(job.kind, JobKind::Train);
            }
            if job.total_milli() > 512_000 {
                assert_eq!(job.pools, [h100], "larger than half the A100 pool");
            }
            if job.is_gang() {
                assert!(job.pods.iter().all(|p| p.gpu == GpuRequest::Whole(8)));
            }
        }
    }

    #[test]
    fn size_mix_and_offered_load() {
        let cluster = default_cluster();
        for seed in [42, 1, 2] {
            let options = SyntheticOptions {
                seed,
                ..SyntheticOptions::default()
            };
            let workload = generate_workload(&cluster, &options);
            let f = figures(&cluster, &workload);
            println!(
                "seed {seed}: buckets {:?}, GPU-time share of 64+ GPU jobs {:.1}%, offered load {:.4}",
                f.buckets,
                f.large_share * 100.0,
                f.offered_load
            );
            let small: usize = f.buckets[..3].iter().map(|b| b.1).sum();
            assert!(
                small * 10 > workload.jobs.len() * 7,
                "most jobs ≤ 8 GPUs: {small}"
            );
            assert!(
                f.large_share > 0.5,
                "64+ GPU jobs hold {:.3}",
                f.large_share
            );
            assert!(
                (f.offered_load - options.load).abs() < 0.03 * options.load,
                "offered load {}",
                f.offered_load
            );
        }
    }

    #[test]
    fn other_clusters_and_edge_options() {
        let cluster = default_cluster();
        let none = generate_workload(
            &cluster,
            &SyntheticOptions {
                jobs: 0,
                ..SyntheticOptions::default()
            },
        );
        assert!(none.jobs.is_empty());
        let burst = generate_workload(
            &cluster,
            &SyntheticOptions {
                jobs: 10,
                load: 0.0,
                ..SyntheticOptions::default()
            },
        );
        assert!(burst.jobs.iter().all(|j| j.submit_ms == 0));

        // One small pool of 4-GPU nodes: sizes capped at the pool, pods at 4 GPUs.
        let mut builder = ClusterSpecBuilder::new();
        for n in 0..4 {
            let row = NodeRow {
                name: format!("n{n}"),
                gpu_model: Some("V100".into()),
                gpus: 4,
                cpu_milli: None,
                memory_bytes: None,
                leaf: None,
                hbd: None,
                ..Default::default()
            };
            builder.add(row, LinkProfile::Pcie).expect("node");
        }
        let small = builder.build();
        let pool = small.pool_of_model(Some("V100")).expect("pool");
        let workload = generate_workload(&small, &SyntheticOptions::default());
        for job in &workload.jobs {
            assert!(job.total_milli() <= 16_000, "{}", job.total_milli());
            assert!(job.pods.iter().all(|p| p.gpu.milli() <= 4_000));
            assert_eq!(job.pools, [pool]);
        }
    }
}
