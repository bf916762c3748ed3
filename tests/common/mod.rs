//! Builders shared by the integration tests: small clusters, jobs and schedulers.
#![allow(dead_code)] // each test crate uses its own subset

pub mod kube;
pub mod rbac;

use std::sync::Arc;

use kant::config::Config;
use kant::framework::{Bind, JobPlan, Plugin, Profile, Scheduler, SearchMode, Status};
use kant::model::{
    ClusterSpec, ClusterSpecBuilder, GpuRequest, Job, JobId, LeafPath, LinkProfile, NodeRow,
    PodRequest, PoolId,
};
use kant::queue::QueueingPolicy;

/// `nodes` nodes of `gpus` GPUs of one model, `per_leaf` to a leaf group, all under one
/// spine.
pub fn cluster(nodes: usize, gpus: usize, per_leaf: usize, links: LinkProfile) -> Arc<ClusterSpec> {
    fabric(nodes, gpus, per_leaf, usize::MAX, 0, links)
}

/// Like [`cluster`], with `leaves_per_spine` leaves under each spine and, when `per_hbd`
/// is not 0, every `per_hbd` consecutive nodes in one scale-up domain.
pub fn fabric(
    nodes: usize,
    gpus: usize,
    per_leaf: usize,
    leaves_per_spine: usize,
    per_hbd: usize,
    links: LinkProfile,
) -> Arc<ClusterSpec> {
    let mut builder = ClusterSpecBuilder::new();
    for i in 0..nodes {
        let leaf = i / per_leaf;
        let row = NodeRow {
            name: format!("node-{i:04}"),
            gpu_model: Some("H100".into()),
            gpus,
            cpu_milli: Some(128_000),
            memory_bytes: Some(1 << 40),
            leaf: Some(LeafPath {
                superspine: "ss".into(),
                spine: format!("spine-{}", leaf / leaves_per_spine),
                leaf: format!("leaf-{leaf}"),
            }),
            hbd: (per_hbd > 0).then(|| format!("hbd-{}", i / per_hbd)),
            ..Default::default()
        };
        builder.add(row, links).expect("valid test node");
    }
    Arc::new(builder.build())
}

/// How many cases a property test runs: `PROPTEST_CASES` where set (to run more than CI
/// does), else `default`.
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default)
}

pub fn job(id: u32, pods: usize, gpus: GpuRequest, priority: i32, submit_s: u64) -> Job {
    Job {
        priority,
        pools: vec![PoolId(0)],
        submit_ms: submit_s * 1000,
        duration_ms: Some(3_600_000),
        ..Job::new(JobId(id), vec![PodRequest::gpus(gpus); pods])
    }
}

/// The job with each of its pods asking `cpu_milli` CPU.
pub fn asking_cpu(mut job: Job, cpu_milli: u64) -> Job {
    for pod in &mut job.pods {
        pod.cpu_milli = cpu_milli;
    }
    job
}

pub fn whole(n: u32) -> GpuRequest {
    GpuRequest::Whole(n)
}

/// A binder that binds at once, or refuses every binding.
pub struct TestBinder {
    pub refuse: bool,
}

impl Plugin for TestBinder {
    fn name(&self) -> &'static str {
        "test-binder"
    }
}

impl Bind for TestBinder {
    fn bind(&self, _job: &Job, _plan: &JobPlan) -> Status {
        if self.refuse {
            Status::new(kant::framework::Code::Error, "binding refused")
        } else {
            Status::SUCCESS
        }
    }
}

/// A profile's configuration from the embedded one, optionally with another queueing
/// policy or search.
pub fn profile_config(
    name: &str,
    queueing: Option<QueueingPolicy>,
    search: Option<SearchMode>,
) -> kant::config::ProfileConfig {
    let mut profile = Config::embedded()
        .profile(name)
        .expect("profile exists")
        .clone();
    if let Some(q) = queueing {
        profile.queueing = q;
    }
    if let Some(s) = search {
        profile.search = s;
    }
    profile
}

/// A profile of the embedded configuration, optionally with another queueing policy or
/// search.
pub fn profile(
    name: &str,
    queueing: Option<QueueingPolicy>,
    search: Option<SearchMode>,
) -> Profile {
    build(&profile_config(name, queueing, search))
}

/// The plugins of a profile configuration, with the embedded settings.
pub fn build(profile: &kant::config::ProfileConfig) -> Profile {
    kant::plugins::build_profile(profile, &Config::embedded()).expect("valid profile")
}

/// A term selecting pods labelled `app=<app>` in namespace `ml`.
pub fn term(app: &str, topology_key: &str) -> kant::model::PodAffinityTerm {
    use kant::model::{Namespaces, PodAffinityTerm, Requirement, SelectorOp};
    PodAffinityTerm {
        selector: Some(vec![Requirement {
            key: "app".into(),
            op: SelectorOp::In,
            values: vec![app.into()],
        }]),
        namespaces: Namespaces::Only(vec!["ml".into()]),
        topology_key: topology_key.into(),
    }
}

/// The jobs a round placed, in order.
pub fn placed_jobs(decisions: &[kant::framework::Decision]) -> Vec<JobId> {
    decisions
        .iter()
        .filter_map(|d| match d {
            kant::framework::Decision::Placed { job, .. } => Some(*job),
            _ => None,
        })
        .collect()
}

/// One node of `gpus` GPUs per entry, of the given GPU model, without topology.
pub fn models_cluster(nodes: &[(&str, usize)]) -> Arc<ClusterSpec> {
    models_cluster_with_cpu(nodes, None)
}

/// Like [`models_cluster`], each node allocating `cpu_milli` (`None`: unknown).
pub fn models_cluster_with_cpu(
    nodes: &[(&str, usize)],
    cpu_milli: Option<u64>,
) -> Arc<ClusterSpec> {
    let mut builder = ClusterSpecBuilder::new();
    for (i, &(model, gpus)) in nodes.iter().enumerate() {
        let row = NodeRow {
            name: format!("n{i}"),
            gpu_model: Some(model.into()),
            gpus,
            cpu_milli,
            memory_bytes: None,
            leaf: None,
            hbd: None,
            ..Default::default()
        };
        builder
            .add(row, LinkProfile::NvlinkAll)
            .expect("valid test node");
    }
    Arc::new(builder.build())
}

/// The default profile with another placement scorer.
pub fn placement_profile(placement: kant::config::Placement) -> Profile {
    build(&profile_config("default", None, None).with_placement(placement))
}

pub fn scheduler(profile: Profile, spec: Arc<ClusterSpec>) -> Scheduler {
    Scheduler::new(profile, Box::new(TestBinder { refuse: false }), spec)
}

/// A placement on `node` of `devices` (a bit set), `milli_each` on each, and nothing else.
pub fn placement(node: u32, devices: u32, milli_each: u32) -> kant::cache::Placement {
    kant::cache::Placement {
        node: kant::model::NodeId(node),
        gpus: kant::cache::DeviceAlloc {
            devices,
            milli_each,
        },
        cpu_milli: 0,
        memory_bytes: 0,
        ephemeral_bytes: 0,
    }
}

/// A cluster of these nodes, each all-NVLink.
pub fn nvlink_cluster(rows: impl IntoIterator<Item = kant::model::NodeRow>) -> Arc<ClusterSpec> {
    let mut builder = kant::model::ClusterSpecBuilder::new();
    for row in rows {
        builder
            .add(row, LinkProfile::NvlinkAll)
            .expect("valid node");
    }
    Arc::new(builder.build())
}

/// Four nodes of 8 GPUs under one spine: leaf 0 holds nodes 0 and 1, leaves 1 and 2 one
/// node each (nodes 2 and 3). `node` gives each node's labels and taints.
pub fn uneven_leaves(
    node: impl Fn(usize) -> (Vec<(&'static str, &'static str)>, Vec<kant::model::Taint>),
) -> Arc<ClusterSpec> {
    let rows = [0, 0, 1, 2].into_iter().enumerate().map(|(i, leaf)| {
        let (labels, taints) = node(i);
        kant::model::NodeRow {
            name: format!("node-{i:04}"),
            gpu_model: Some("H100".into()),
            gpus: 8,
            leaf: Some(kant::model::LeafPath {
                superspine: "ss".into(),
                spine: "spine".into(),
                leaf: format!("leaf-{leaf}"),
            }),
            labels: labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints,
            ..Default::default()
        }
    });
    nvlink_cluster(rows)
}
