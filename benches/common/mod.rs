//! Builders shared by the benchmarks: the synthetic cluster, the profiles, an instant binder
//! and the jobs. Each bench uses a part of this module, hence the `dead_code` allowance.
//!
//! The cluster is uniform: one GPU model (`H100`), 8 GPUs per node linked NVLink-all, leaf
//! groups of 32 nodes, 4 leaves per spine, one superspine. Nodes are numbered leaf by leaf,
//! so leaf `l` holds nodes `32 l .. 32 l + 31` and is search group `l`.

#![allow(dead_code)]

use std::sync::Arc;

use kant::cache::ClusterState;
use kant::config::Config;
use kant::framework::{
    Bind, Decision, JobPlan, Plugin, Profile, Scheduler, SearchMode, SearchOptions, Status,
};
use kant::model::{
    ClusterSpec, ClusterSpecBuilder, GpuRequest, GroupId, Job, JobId, LeafPath, LinkProfile,
    NodeConstraints, NodeRow, PodRequest, Taint, TaintEffect, Toleration,
};

pub const GPUS_PER_NODE: usize = 8;
pub const NODES_PER_LEAF: usize = 32;
pub const LEAVES_PER_SPINE: usize = 4;
pub const GPU_MODEL: &str = "H100";

/// A cluster of `nodes` nodes of 8 GPUs in the shape described above.
pub fn cluster(nodes: usize) -> Arc<ClusterSpec> {
    cluster_with_dedicated_leaves(nodes, 0)
}

/// The label and the `NoSchedule` taint, both `dedicated=reserved`, that keep a dedicated
/// leaf group's nodes to the pods that select and tolerate them.
pub const DEDICATED: (&str, &str) = ("dedicated", "reserved");

/// [`cluster`], with the nodes of its last `dedicated` leaf groups labelled and tainted
/// [`DEDICATED`]: the usual way of reserving nodes for one team's pods.
pub fn cluster_with_dedicated_leaves(nodes: usize, dedicated: usize) -> Arc<ClusterSpec> {
    let leaves = nodes.div_ceil(NODES_PER_LEAF);
    let first_dedicated = leaves.saturating_sub(dedicated) * NODES_PER_LEAF;
    let mut builder = ClusterSpecBuilder::new();
    for index in 0..nodes {
        let leaf = index / NODES_PER_LEAF;
        let mut row = NodeRow {
            name: format!("node-{index:05}"),
            gpu_model: Some(GPU_MODEL.into()),
            gpus: GPUS_PER_NODE,
            cpu_milli: Some(192_000),
            memory_bytes: Some(2 << 40),
            leaf: Some(LeafPath {
                superspine: "superspine-0".into(),
                spine: format!("spine-{}", leaf / LEAVES_PER_SPINE),
                leaf: format!("leaf-{leaf}"),
            }),
            hbd: None,
            ..Default::default()
        };
        if index >= first_dedicated {
            let (key, value) = DEDICATED;
            row.labels.insert(key.into(), value.into());
            row.taints.push(Taint {
                key: key.into(),
                value: value.into(),
                effect: TaintEffect::NoSchedule,
            });
        }
        builder
            .add(row, LinkProfile::NvlinkAll)
            .expect("generated node rows are valid");
    }
    Arc::new(builder.build())
}

/// What a pod needs to go to the dedicated nodes of [`cluster_with_dedicated_leaves`]:
/// their label as node selector, and a toleration of their taint.
pub fn dedicated_constraints() -> NodeConstraints {
    let (key, value) = DEDICATED;
    NodeConstraints {
        node_selector: vec![(key.into(), value.into())],
        tolerations: vec![Toleration {
            key: Some(key.into()),
            exists: false,
            value: value.into(),
            effect: Some(TaintEffect::NoSchedule),
        }],
        ..Default::default()
    }
}

/// The embedded `default` profile with the given search mode and options. Only the search
/// is changed, so two profiles built from here differ in the search alone.
pub fn default_profile(search: SearchMode, options: SearchOptions) -> Profile {
    let mut config = Config::embedded();
    config.search = options;
    let mut profile_config = config
        .profile("default")
        .expect("the embedded configuration has a `default` profile")
        .clone();
    profile_config.search = search;
    kant::plugins::build_profile(&profile_config, &config).expect("the default profile builds")
}

/// The search options of the embedded configuration.
pub fn embedded_search_options() -> SearchOptions {
    Config::embedded().search
}

/// A binder that binds at once (the simulator's is private).
pub struct InstantBinder;

impl Plugin for InstantBinder {
    fn name(&self) -> &'static str {
        "bench-instant-binder"
    }
}

impl Bind for InstantBinder {
    fn bind(&self, _job: &Job, _plan: &JobPlan) -> Status {
        Status::SUCCESS
    }
}

/// A fresh scheduler with an empty cluster state.
pub fn scheduler(profile: &Profile, spec: &Arc<ClusterSpec>) -> Scheduler {
    Scheduler::new(profile.clone(), Box::new(InstantBinder), spec.clone())
}

/// A job of `pods` pods of `gpus` whole GPUs each.
pub fn job(id: u32, pods: usize, gpus: u32) -> Job {
    Job {
        submit_ms: u64::from(id),
        ..Job::new(
            JobId(id),
            vec![PodRequest::gpus(GpuRequest::Whole(gpus)); pods],
        )
    }
}

/// Single-pod 1-GPU jobs with ids `ids`.
pub fn one_gpu_jobs(ids: std::ops::Range<u32>) -> Vec<Job> {
    ids.map(|id| job(id, 1, 1)).collect()
}

/// GPUs making up `percent` of the cluster: the number of 1-GPU pods that fill it so far.
pub fn gpus_at_percent(spec: &ClusterSpec, percent: u64) -> u32 {
    (spec.total_gpus() * percent / 100) as u32
}

/// Submits `jobs` and runs one scheduling round; returns the decisions.
pub fn submit_and_schedule(scheduler: &mut Scheduler, jobs: Vec<Job>) -> Vec<Decision> {
    for job in jobs {
        scheduler.submit(job);
    }
    scheduler.schedule(0)
}

/// Pods placed by a round's decisions.
pub fn placed_pods(decisions: &[Decision]) -> usize {
    decisions
        .iter()
        .map(|d| match d {
            Decision::Placed { plan, .. } => plan.pods.len(),
            Decision::Preempted { .. } | Decision::Requeued { .. } => 0,
        })
        .sum()
}

/// Fills a scheduler in one round with single-pod jobs `ids` of `gpus` GPUs each, and checks
/// that every one was placed.
pub fn prefill(scheduler: &mut Scheduler, ids: std::ops::Range<u32>, gpus: u32) {
    let expected = ids.len();
    let jobs = ids.map(|id| job(id, 1, gpus)).collect();
    let decisions = submit_and_schedule(scheduler, jobs);
    assert_eq!(
        placed_pods(&decisions),
        expected,
        "the pre-fill did not fit"
    );
}

/// Whether two states use the same devices on every node and agree on every search group's
/// aggregate: what the search reads.
pub fn same_usage(a: &ClusterState, b: &ClusterState) -> bool {
    let spec = a.spec();
    a.nodes().zip(b.nodes()).all(|((_, x), (_, y))| x == y)
        && (0..spec.groups.len()).all(|g| a.group(GroupId(g as u32)) == b.group(GroupId(g as u32)))
}

/// Returns the jobs `ids` (placed earlier) to the cluster, undoing their placement.
pub fn release(scheduler: &mut Scheduler, ids: std::ops::Range<u32>) {
    for id in ids {
        scheduler
            .finish(JobId(id))
            .expect("only placed jobs are released");
    }
}
