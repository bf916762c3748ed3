//! Required inter-pod affinity and anti-affinity (the `pod-affinity` plugin), as
//! kube-scheduler's `InterPodAffinity` decides: replicas that must avoid each other placed
//! in one round, pods drawn to a domain of selected pods, existing pods' anti-affinity
//! keeping others away, gangs keeping their rules among their own pods, and the rules
//! following pods that go and clusters that change.

mod common;

use std::sync::Arc;

use common::*;
use kant::framework::Scheduler;
use kant::model::{
    ClusterSpec, ClusterSpecBuilder, GpuRequest, JobId, LinkProfile, Namespaces, NodeRow,
    PodAffinity, PodAffinityTerm, PodIdentity, Requirement, SelectorOp,
};

const HOSTNAME: &str = "kubernetes.io/hostname";

/// Nodes of 8 GPUs named `n0`, `n1`, ..., each in the zone given.
fn zoned(zones: &[&str]) -> Arc<ClusterSpec> {
    let mut builder = ClusterSpecBuilder::new();
    for (i, zone) in zones.iter().enumerate() {
        let name = format!("n{i}");
        let row = NodeRow {
            labels: [
                (HOSTNAME.to_owned(), name.clone()),
                ("zone".to_owned(), zone.to_string()),
            ]
            .into(),
            name,
            gpu_model: Some("H100".into()),
            gpus: 8,
            ..Default::default()
        };
        builder
            .add(row, LinkProfile::NvlinkAll)
            .expect("valid node");
    }
    Arc::new(builder.build())
}

/// A term selecting pods labelled `app=<app>` in namespace `ml`.
fn term(app: &str, topology_key: &str) -> PodAffinityTerm {
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

/// A job of `pods` pods of `gpus` GPUs each, labelled `app=<app>` in namespace `ml`.
fn app(
    id: u32,
    pods: usize,
    gpus: u32,
    app: &str,
    affinity: Vec<PodAffinityTerm>,
    anti_affinity: Vec<PodAffinityTerm>,
) -> kant::model::Job {
    let mut job = job(id, pods, GpuRequest::Whole(gpus), 0, u64::from(id));
    job.pod_affinity = Some(Arc::new(PodAffinity {
        identity: PodIdentity {
            namespace: "ml".into(),
            labels: [("app".to_owned(), app.to_owned())].into(),
        },
        affinity,
        anti_affinity,
    }));
    job
}

fn nodes_of(s: &Scheduler, job: u32) -> Vec<String> {
    s.state()
        .job_nodes(JobId(job))
        .map(|n| s.state().spec().node(n).name.clone())
        .collect()
}

fn default_scheduler(spec: Arc<ClusterSpec>) -> Scheduler {
    scheduler(profile("default", None, None), spec)
}

#[test]
fn replicas_that_avoid_each_other_spread_within_one_round() {
    let mut s = default_scheduler(zoned(&["a", "a", "b"]));
    // Without the rule, E-Binpack would stack all four 1-GPU replicas on one node.
    for id in 1..=4 {
        s.submit(app(id, 1, 1, "web", vec![], vec![term("web", HOSTNAME)]));
    }
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1), JobId(2), JobId(3)]);
    let mut nodes: Vec<String> = (1..=3).flat_map(|j| nodes_of(&s, j)).collect();
    nodes.sort();
    assert_eq!(nodes, ["n0", "n1", "n2"]);
    assert_eq!(
        s.diagnose(JobId(4), 0).unwrap().message(),
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    );
    // A replica leaving frees its node for the one that waited.
    let freed = nodes_of(&s, 2);
    s.finish(JobId(2));
    assert_eq!(placed_jobs(&s.schedule(1)), [JobId(4)]);
    assert_eq!(nodes_of(&s, 4), freed);
}

#[test]
fn affinity_draws_a_pod_into_the_zone_of_the_pods_it_selects() {
    let mut s = default_scheduler(zoned(&["a", "a", "b", "b"]));
    // The database fills n2 (zone b); E-Binpack alone would put the cache on n0.
    s.submit(app(1, 1, 8, "db", vec![], vec![]));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(nodes_of(&s, 1), ["n0"]);
    s.submit(app(2, 1, 1, "cache", vec![term("db", "zone")], vec![]));
    s.submit(app(3, 1, 1, "cache", vec![term("db", HOSTNAME)], vec![]));
    s.submit(app(4, 1, 1, "cache", vec![term("search", "zone")], vec![]));
    assert_eq!(placed_jobs(&s.schedule(1)), [JobId(2)]);
    assert_eq!(nodes_of(&s, 2), ["n1"], "zone a, where the database runs");
    assert_eq!(
        s.diagnose(JobId(3), 1).unwrap().message(),
        "0/4 nodes are available: 3 node(s) didn't match pod affinity rules, \
         1 Insufficient nvidia.com/gpu."
    );
    assert_eq!(
        s.diagnose(JobId(4), 1).unwrap().message(),
        "0/4 nodes are available: 3 node(s) didn't match pod affinity rules, \
         1 Insufficient nvidia.com/gpu.",
        "no pod selected, and the pod does not select itself"
    );
}

#[test]
fn the_first_of_pods_drawn_to_each_other_goes_anywhere_and_the_rest_follow() {
    let mut s = default_scheduler(zoned(&["a", "b", "b"]));
    s.submit(app(1, 1, 8, "filler", vec![], vec![]));
    s.schedule(0);
    assert_eq!(nodes_of(&s, 1), ["n0"]);
    // Each replica needs 6 GPUs, so at most one fits a node; all must share a zone.
    for id in 2..=4 {
        s.submit(app(id, 1, 6, "ring", vec![term("ring", "zone")], vec![]));
    }
    assert_eq!(placed_jobs(&s.schedule(1)), [JobId(2), JobId(3)]);
    let mut nodes: Vec<String> = [2, 3].iter().flat_map(|&j| nodes_of(&s, j)).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2"], "both in zone b");
    // Zone a has room once the filler goes, but the ring is in zone b.
    s.finish(JobId(1));
    assert!(placed_jobs(&s.schedule(2)).is_empty());
}

#[test]
fn an_existing_pods_anti_affinity_keeps_the_pods_it_selects_away() {
    let mut s = default_scheduler(zoned(&["a", "a", "b"]));
    // A noisy job that wants no `batch` pod in its zone.
    s.submit(app(1, 1, 1, "noisy", vec![], vec![term("batch", "zone")]));
    s.schedule(0);
    assert_eq!(nodes_of(&s, 1), ["n0"]);
    s.submit(app(2, 1, 1, "batch", vec![], vec![]));
    s.submit(app(3, 1, 1, "web", vec![], vec![]));
    let mut other_namespace = app(4, 1, 1, "batch", vec![], vec![]);
    let mut rules = other_namespace.pod_affinity.as_deref().unwrap().clone();
    rules.identity.namespace = "research".into();
    other_namespace.pod_affinity = Some(Arc::new(rules));
    s.submit(other_namespace);
    assert_eq!(placed_jobs(&s.schedule(1)), [JobId(2), JobId(3), JobId(4)]);
    assert_eq!(nodes_of(&s, 2), ["n2"], "out of zone a");
    assert_eq!(
        nodes_of(&s, 3),
        ["n0"],
        "not selected: packed with the noisy job"
    );
    assert_eq!(nodes_of(&s, 4), ["n0"], "another namespace: not selected");
    s.submit(app(5, 1, 8, "batch", vec![], vec![]));
    assert_eq!(
        s.diagnose(JobId(5), 1).unwrap().message(),
        "0/3 nodes are available: 2 Insufficient nvidia.com/gpu, \
         1 node(s) didn't satisfy existing pods anti-affinity rules."
    );
}

#[test]
fn a_gang_keeps_its_rules_among_its_own_pods() {
    let mut s = default_scheduler(zoned(&["a", "a", "a", "b", "b"]));
    // Three 1-GPU pods that avoid each other: one per node, though one node holds all.
    s.submit(app(1, 3, 1, "ps", vec![], vec![term("ps", HOSTNAME)]));
    // Four 4-GPU workers that must share a zone: zone a has room for six, b for four.
    s.submit(app(2, 4, 4, "worker", vec![term("worker", "zone")], vec![]));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1), JobId(2)]);
    let mut ps = nodes_of(&s, 1);
    ps.dedup();
    assert_eq!(ps.len(), 3, "one parameter server per node: {ps:?}");
    let zones: Vec<String> = s
        .state()
        .job_nodes(JobId(2))
        .map(|n| s.state().spec().node(n).labels["zone"].clone())
        .collect();
    assert_eq!(zones.len(), 4);
    assert!(zones.iter().all(|z| *z == zones[0]), "one zone: {zones:?}");
    // A gang whose pods avoid each other cannot have more pods than nodes.
    s.submit(app(3, 6, 1, "shard", vec![], vec![term("shard", HOSTNAME)]));
    assert!(placed_jobs(&s.schedule(1)).is_empty());
}

#[test]
fn rules_survive_a_change_of_the_cluster() {
    let mut s = default_scheduler(zoned(&["a", "b"]));
    s.submit(app(1, 1, 1, "web", vec![], vec![term("web", HOSTNAME)]));
    s.schedule(0);
    assert_eq!(nodes_of(&s, 1), ["n0"]);
    // A third node joins: the cluster state is rebuilt with the placed pods.
    s.set_cluster(zoned(&["a", "b", "b"]), 1);
    for id in 2..=3 {
        s.submit(app(id, 1, 1, "web", vec![], vec![term("web", HOSTNAME)]));
    }
    assert_eq!(placed_jobs(&s.schedule(2)), [JobId(2), JobId(3)]);
    let mut nodes: Vec<String> = (1..=3).flat_map(|j| nodes_of(&s, j)).collect();
    nodes.sort();
    assert_eq!(nodes, ["n0", "n1", "n2"]);
}
