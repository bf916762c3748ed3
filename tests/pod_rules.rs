//! Rules between pods, as kube-scheduler decides them.
//!
//! - Required inter-pod affinity and anti-affinity (the `pod-affinity` plugin, after
//!   `InterPodAffinity`): replicas that must avoid each other placed in one round, pods
//!   drawn to a domain of selected pods, existing pods' anti-affinity keeping others away,
//!   gangs keeping their rules among their own pods, and the rules following pods that go
//!   and clusters that change.
//! - Hard topology spread constraints (the `topology-spread` plugin, after
//!   `PodTopologySpread`): replicas spread by zone and by node, existing pods counted, the
//!   node inclusion policy and `minDomains`, gangs spreading among their own pods.
//! - Preferred node affinity and inter-pod affinity and anti-affinity (the scores of the
//!   `node-affinity` and `pod-affinity` plugins): they order the nodes that pass.

mod common;

use std::sync::Arc;

use common::*;
use kant::framework::{Decision, Scheduler};
use kant::model::{
    ClusterSpec, ClusterSpecBuilder, GpuRequest, JobId, LinkProfile, NodeConstraints, NodeRow,
    PodAffinityTerm, PodIdentity, PodRules, Requirement, SelectorOp, SelectorTerm,
    SpreadConstraint, Weighted,
};

const HOSTNAME: &str = "kubernetes.io/hostname";

/// Nodes of 8 H100 GPUs named `n0`, `n1`, ..., each in the zone given.
fn zoned(zones: &[&str]) -> Arc<ClusterSpec> {
    let nodes: Vec<(&str, &str)> = zones.iter().map(|&z| (z, "H100")).collect();
    zoned_models(&nodes)
}

/// Nodes of 8 GPUs named `n0`, `n1`, ..., each in the zone and of the GPU model given.
fn zoned_models(nodes: &[(&str, &str)]) -> Arc<ClusterSpec> {
    zoned_nodes(nodes.iter().map(|&(zone, model)| (zone, model, None)))
}

/// Nodes of 8 GPUs named `n0`, `n1`, ..., each in the zone, of the GPU model and under
/// the leaf given.
fn zoned_nodes<'a>(
    nodes: impl Iterator<Item = (&'a str, &'a str, Option<kant::model::LeafPath>)>,
) -> Arc<ClusterSpec> {
    let mut builder = ClusterSpecBuilder::new();
    for (i, (zone, model, leaf)) in nodes.enumerate() {
        let name = format!("n{i}");
        let row = NodeRow {
            labels: [
                (HOSTNAME.to_owned(), name.clone()),
                ("zone".to_owned(), zone.to_string()),
            ]
            .into(),
            name,
            gpu_model: Some(model.to_string()),
            gpus: 8,
            leaf,
            ..Default::default()
        };
        builder
            .add(row, LinkProfile::NvlinkAll)
            .expect("valid node");
    }
    Arc::new(builder.build())
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
    job.pod_rules = Some(Arc::new(PodRules {
        identity: PodIdentity {
            namespace: "ml".into(),
            labels: [("app".to_owned(), app.to_owned())].into(),
        },
        affinity,
        anti_affinity,
        ..PodRules::default()
    }));
    job
}

/// A job like [`app`] whose pods spread by the given constraints instead.
fn spread_app(
    id: u32,
    pods: usize,
    gpus: u32,
    name: &str,
    spread: Vec<SpreadConstraint>,
) -> kant::model::Job {
    let mut job = app(id, pods, gpus, name, vec![], vec![]);
    let mut rules = job.pod_rules.as_deref().unwrap().clone();
    rules.spread = spread;
    job.pod_rules = Some(Arc::new(rules));
    job
}

/// At most `max_skew` more `app=<app>` pods in one domain of `key` than in the emptiest.
fn skew(app: &str, key: &str, max_skew: u32) -> SpreadConstraint {
    SpreadConstraint {
        pods: term(app, key),
        max_skew,
        min_domains: None,
        honor_node_affinity: true,
        honor_taints: false,
    }
}

/// The zone of each node holding a pod of these jobs, sorted.
fn zones_of(s: &Scheduler, jobs: impl IntoIterator<Item = u32>) -> Vec<String> {
    let mut zones: Vec<String> = jobs
        .into_iter()
        .flat_map(|j| s.state().job_nodes(JobId(j)).collect::<Vec<_>>())
        .map(|n| s.state().spec().node(n).labels["zone"].clone())
        .collect();
    zones.sort();
    zones
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
    let mut rules = other_namespace.pod_rules.as_deref().unwrap().clone();
    rules.identity.namespace = "research".into();
    other_namespace.pod_rules = Some(Arc::new(rules));
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

#[test]
fn replicas_spread_evenly_over_zones_counting_those_already_placed() {
    let mut s = default_scheduler(zoned(&["a", "a", "b", "c"]));
    // Two replicas already run in zone a.
    s.submit(app(1, 2, 1, "web", vec![], vec![]));
    s.schedule(0);
    assert_eq!(zones_of(&s, [1]), ["a", "a"]);
    // E-Binpack alone would stack these on n0 too.
    for id in 2..=6 {
        s.submit(spread_app(id, 1, 1, "web", vec![skew("web", "zone", 1)]));
    }
    assert_eq!(placed_jobs(&s.schedule(1)).len(), 5);
    assert_eq!(
        per_zone(&s, 1..=6),
        [2, 2, 3],
        "seven replicas over three zones"
    );
}

/// How many pods of these jobs each zone holds, fewest first.
fn per_zone(s: &Scheduler, jobs: impl IntoIterator<Item = u32>) -> Vec<usize> {
    let zones = zones_of(s, jobs);
    let mut counts: Vec<usize> = zones
        .chunk_by(|a, b| a == b)
        .map(|same| same.len())
        .collect();
    counts.sort();
    counts
}

#[test]
fn a_spread_by_node_and_its_gang_form() {
    let mut s = default_scheduler(zoned(&["a", "a", "a"]));
    for id in 1..=4 {
        s.submit(spread_app(id, 1, 1, "web", vec![skew("web", HOSTNAME, 1)]));
    }
    // A gang of three that spreads its own pods over the nodes.
    s.submit(spread_app(5, 3, 1, "ps", vec![skew("ps", HOSTNAME, 1)]));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 5);
    let mut web: Vec<String> = (1..=4).flat_map(|j| nodes_of(&s, j)).collect();
    web.sort();
    web.dedup();
    assert_eq!(
        web.len(),
        3,
        "four replicas, at most two on a node: {web:?}"
    );
    let mut ps = nodes_of(&s, 5);
    ps.sort();
    assert_eq!(ps, ["n0", "n1", "n2"]);
}

#[test]
fn only_nodes_the_pod_may_use_make_domains_unless_told_otherwise() {
    // Zone c's node lacks the pool label the pods select.
    let mut spec = (*zoned(&["a", "b", "c"])).clone();
    for node in &mut spec.nodes[..2] {
        node.labels.insert("pool".into(), "web".into());
    }
    let spec = Arc::new(spec);
    let with_selector = |id: u32, honor_node_affinity: bool| {
        let mut job = spread_app(
            id,
            1,
            1,
            "web",
            vec![SpreadConstraint {
                honor_node_affinity,
                ..skew("web", "zone", 1)
            }],
        );
        job.set_constraints(NodeConstraints {
            node_selector: vec![("pool".into(), "web".into())],
            ..NodeConstraints::default()
        });
        job
    };
    let mut honoured = default_scheduler(spec.clone());
    for id in 1..=4 {
        honoured.submit(with_selector(id, true));
    }
    assert_eq!(
        placed_jobs(&honoured.schedule(0)).len(),
        4,
        "zones a and b: 2 and 2"
    );
    // Counted in, zone c stays empty and holds the others to one pod per zone.
    let mut ignored = default_scheduler(spec);
    for id in 1..=4 {
        ignored.submit(with_selector(id, false));
    }
    assert_eq!(placed_jobs(&ignored.schedule(0)).len(), 2);
    assert_eq!(
        ignored.diagnose(JobId(3), 0).unwrap().message(),
        "0/3 nodes are available: 2 node(s) didn't match pod topology spread constraints, \
         1 node(s) didn't match Pod's node affinity/selector."
    );
}

#[test]
fn too_few_domains_count_as_an_empty_one_and_unlabelled_nodes_are_out() {
    let mut spec = (*zoned(&["a", "b", "b"])).clone();
    spec.nodes[2].labels.remove("zone");
    let mut s = default_scheduler(Arc::new(spec));
    let min_three = SpreadConstraint {
        min_domains: Some(3),
        ..skew("web", "zone", 1)
    };
    for id in 1..=3 {
        s.submit(spread_app(id, 1, 1, "web", vec![min_three.clone()]));
    }
    // Two zones where three are asked for: each zone holds at most max_skew pods.
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 2);
    assert_eq!(
        s.diagnose(JobId(3), 0).unwrap().message(),
        "0/3 nodes are available: 2 node(s) didn't match pod topology spread constraints, \
         1 node(s) didn't match pod topology spread constraints (missing required label)."
    );
}

#[test]
fn preferences_order_the_nodes_that_pass() {
    let mut s = default_scheduler(zoned(&["a", "a", "b", "b"]));
    s.submit(app(1, 1, 1, "db", vec![], vec![]));
    s.schedule(0);
    assert_eq!(nodes_of(&s, 1), ["n0"]);
    let prefer = |id: u32, affinity: Vec<Weighted<PodAffinityTerm>>, anti| {
        let mut job = app(id, 1, 1, "web", vec![], vec![]);
        let mut rules = job.pod_rules.as_deref().unwrap().clone();
        rules.preferred_affinity = affinity;
        rules.preferred_anti_affinity = anti;
        job.pod_rules = Some(Arc::new(rules));
        job
    };
    let weighted = |weight, term| Weighted { weight, term };
    // E-Binpack alone would put each next to the database, on n0. Near the database's
    // zone but, more strongly, not on its node:
    s.submit(prefer(
        2,
        vec![weighted(10, term("db", "zone"))],
        vec![weighted(90, term("db", HOSTNAME))],
    ));
    // Away from the database's zone:
    s.submit(prefer(3, vec![], vec![weighted(50, term("db", "zone"))]));
    // In zone b, by node affinity:
    let mut zone_b = job(4, 1, GpuRequest::Whole(1), 0, 4);
    zone_b.set_constraints(NodeConstraints {
        preferred: vec![Weighted {
            weight: 10,
            term: SelectorTerm {
                match_expressions: vec![Requirement {
                    key: "zone".into(),
                    op: SelectorOp::In,
                    values: vec!["b".into()],
                }],
                ..SelectorTerm::default()
            },
        }],
        ..NodeConstraints::default()
    });
    s.submit(zone_b);
    assert_eq!(placed_jobs(&s.schedule(1)).len(), 3);
    assert_eq!(nodes_of(&s, 2), ["n1"]);
    assert_eq!(zones_of(&s, [3]), ["b"]);
    assert_eq!(zones_of(&s, [4]), ["b"]);
}

/// The default profile with the `preemption` plugin.
fn preempting_scheduler(spec: Arc<ClusterSpec>) -> Scheduler {
    let mut config = profile_config("default", None, None);
    config
        .plugins
        .push(kant::config::PluginConfig::Name("preemption".into()));
    scheduler(build(&config), spec)
}

fn victims(decisions: &[Decision]) -> Vec<JobId> {
    decisions
        .iter()
        .flat_map(|d| match d {
            Decision::Preempted { victims, .. } => victims.clone(),
            _ => Vec::new(),
        })
        .collect()
}

/// Two hours: the jobs placed at 0 are past their protection from preemption.
const LATER_MS: u64 = 7_200_000;

#[test]
fn preemption_judges_the_rules_without_its_victims() {
    // A cache must be in the database's zone: evicting the database cannot make room
    // for it, nor can evicting the filler of the other zone.
    let mut s = preempting_scheduler(zoned(&["a", "b"]));
    s.submit(app(1, 1, 8, "db", vec![], vec![]));
    s.submit(app(2, 1, 8, "filler", vec![], vec![]));
    s.schedule(0);
    let mut cache = app(3, 1, 8, "cache", vec![term("db", "zone")], vec![]);
    cache.priority = 10;
    s.submit(cache);
    let decisions = s.schedule(LATER_MS);
    assert!(victims(&decisions).is_empty(), "{decisions:?}");
    assert!(placed_jobs(&decisions).is_empty());

    // A noisy job keeps batch pods off its node: evicting it (4 GPUs, the least work
    // lost) makes room there, which only a judgement without it can see.
    let mut s = preempting_scheduler(zoned(&["a", "b"]));
    s.submit(app(1, 1, 4, "noisy", vec![], vec![term("batch", HOSTNAME)]));
    s.submit(app(2, 1, 8, "filler", vec![], vec![]));
    s.schedule(0);
    assert_eq!(nodes_of(&s, 1), ["n0"]);
    let mut batch = app(3, 1, 8, "batch", vec![], vec![]);
    batch.priority = 10;
    s.submit(batch);
    let decisions = s.schedule(LATER_MS);
    assert_eq!(victims(&decisions), [JobId(1)]);
    assert_eq!(nodes_of(&s, 3), ["n0"]);
}

/// Nodes of 8 GPUs named `n0`, `n1`, ..., each of the GPU model, spine, leaf and zone
/// given.
fn fabric_in_zones(nodes: &[(&str, &str, &str, &str)]) -> Arc<ClusterSpec> {
    zoned_nodes(nodes.iter().map(|&(model, spine, leaf, zone)| {
        let path = kant::model::LeafPath {
            superspine: "ss".into(),
            spine: spine.into(),
            leaf: leaf.into(),
        };
        (zone, model, Some(path))
    }))
}

/// Runs a job of one pod of 8 GPUs and the priority given on each node named, in turn,
/// from job 100 on (its model the node's).
fn running_on(s: &mut Scheduler, nodes: &[(&str, i32)]) {
    for (i, &(node, priority)) in nodes.iter().enumerate() {
        let mut job = app(100 + i as u32, 1, 8, "other", vec![], vec![]);
        job.pools.clear();
        job.set_constraints(NodeConstraints {
            node_selector: vec![(HOSTNAME.into(), node.into())],
            ..NodeConstraints::default()
        });
        job.priority = priority;
        s.submit(job);
    }
    assert_eq!(placed_jobs(&s.schedule(0)).len(), nodes.len());
}

/// A gang of two 8-GPU pods of priority 5 spreading over zones, on the pools given.
fn spreading_gang(pools: &[u16]) -> kant::model::Job {
    let mut gang = spread_app(1, 2, 8, "web", vec![skew("web", "zone", 1)]);
    gang.priority = 5;
    gang.pools = pools.iter().map(|&p| kant::model::PoolId(p)).collect();
    gang
}

/// Later, the gang (job 1) evicts exactly `expected` and lands on `nodes`.
fn assert_makes_room(s: &mut Scheduler, expected: &[u32], nodes: [&str; 2]) {
    let decisions = s.schedule(LATER_MS);
    let expected: Vec<JobId> = expected.iter().map(|&v| JobId(v)).collect();
    assert_eq!(victims(&decisions), expected, "{decisions:?}");
    let mut landed = nodes_of(s, 1);
    landed.sort();
    assert_eq!(landed, nodes);
}

/// A gang spreading its pods over zones made of leaves goes wherever its pools hold it,
/// patient or not, and so may make room across spines. Two spines of two nodes, a leaf
/// each; zone `a` is the first node of each spine, zone `b` the second. Jobs it may not
/// evict hold one node of each spine; one it may holds a third node, in zone `a`.
#[test]
fn a_gang_spreading_over_zones_makes_room_across_spines() {
    let mut s = preempting_scheduler(fabric_in_zones(&[
        ("H100", "spine-0", "leaf-0", "a"),
        ("H100", "spine-0", "leaf-1", "b"),
        ("H100", "spine-1", "leaf-2", "a"),
        ("H100", "spine-1", "leaf-3", "b"),
    ]));
    running_on(&mut s, &[("n0", 9), ("n3", 9), ("n2", 0)]);
    s.submit(spreading_gang(&[0]));
    assert_makes_room(&mut s, &[102], ["n1", "n2"]);
}

/// Whether a gang spreads is judged on the pools its quota admits it on: a gang the full
/// cluster admits on neither of its models, whose `A100` leaf straddles both zones, is
/// admitted on `H100` alone once its victims go, and spreads there over two leaves, each a
/// zone. (A review found the victim search refusing it: it had judged the gang held to one
/// leaf, from the attempt on both pools.)
#[test]
fn a_spreading_gang_makes_room_on_the_pool_its_quota_admits_once_victims_go() {
    let mut s = preempting_scheduler(fabric_in_zones(&[
        ("H100", "spine-0", "leaf-0", "a"),
        ("H100", "spine-0", "leaf-0", "a"),
        ("H100", "spine-0", "leaf-1", "b"),
        ("H100", "spine-0", "leaf-1", "b"),
        ("A100", "spine-1", "leaf-2", "a"),
        ("A100", "spine-1", "leaf-2", "b"),
    ]));
    running_on(
        &mut s,
        &[
            ("n0", 0),
            ("n1", 9),
            ("n2", 0),
            ("n3", 9),
            ("n4", 9),
            ("n5", 9),
        ],
    );
    s.submit(spreading_gang(&[0, 1]));
    assert_makes_room(&mut s, &[100, 102], ["n0", "n2"]);
}

#[test]
fn only_pods_that_every_affinity_term_selects_count() {
    let mut s = default_scheduler(zoned(&["a", "b"]));
    let labelled = |id: u32, labels: &[(&str, &str)], affinity: Vec<PodAffinityTerm>| {
        let mut job = app(id, 1, 1, "", vec![], vec![]);
        let mut rules = job.pod_rules.as_deref().unwrap().clone();
        rules.identity.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        rules.affinity = affinity;
        job.pod_rules = Some(Arc::new(rules));
        job
    };
    // One pod is a database, another gold tier; none is both.
    s.submit(labelled(1, &[("app", "db")], vec![]));
    s.submit(labelled(2, &[("tier", "gold")], vec![]));
    s.schedule(0);
    let gold = PodAffinityTerm {
        selector: Some(vec![Requirement {
            key: "tier".into(),
            op: SelectorOp::In,
            values: vec!["gold".into()],
        }]),
        ..term("", "zone")
    };
    s.submit(labelled(3, &[], vec![term("db", "zone"), gold.clone()]));
    assert!(placed_jobs(&s.schedule(1)).is_empty());
    // A gold database counts, once the waiting pod is tried again.
    s.submit(labelled(4, &[("app", "db"), ("tier", "gold")], vec![]));
    assert_eq!(placed_jobs(&s.schedule(2)), [JobId(4)]);
    let retry = s.next_retry_ms(2).expect("the waiting pod is tried again");
    assert_eq!(placed_jobs(&s.schedule(retry)), [JobId(3)]);
    assert_eq!(zones_of(&s, [3]), zones_of(&s, [4]));
}

#[test]
fn a_gang_spreads_evenly_over_its_nodes() {
    let mut s = default_scheduler(zoned(&["a", "a"]));
    s.submit(spread_app(1, 4, 1, "ps", vec![skew("ps", HOSTNAME, 1)]));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    let mut nodes = nodes_of(&s, 1);
    nodes.sort();
    assert_eq!(nodes, ["n0", "n0", "n1", "n1"]);
}

#[test]
fn a_self_drawn_gang_picks_its_domain_among_the_nodes_it_may_use() {
    // Zone b has the most room, but of another GPU model.
    let mut s = default_scheduler(zoned_models(&[("a", "H100"), ("b", "A100"), ("b", "A100")]));
    s.submit(app(1, 2, 4, "ring", vec![term("ring", "zone")], vec![]));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(nodes_of(&s, 1), ["n0", "n0"]);
}

#[test]
fn a_gang_that_spreads_over_zones_does_not_wait_for_one_leaf() {
    // Two leaves of two nodes, each leaf its own zone: the search would first hold out
    // for one leaf, which the spread forbids.
    let mut spec = (*cluster(4, 8, 2, LinkProfile::NvlinkAll)).clone();
    for (i, node) in spec.nodes.iter_mut().enumerate() {
        let zone = if i < 2 { "a" } else { "b" };
        node.labels.insert("zone".into(), zone.into());
    }
    let mut s = default_scheduler(Arc::new(spec));
    s.submit(spread_app(1, 2, 4, "ring", vec![skew("ring", "zone", 1)]));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(zones_of(&s, [1]), ["a", "b"]);
}

#[test]
fn a_soft_spread_prefers_the_emptier_zone() {
    let mut s = default_scheduler(zoned(&["a", "a", "b", "b"]));
    s.submit(app(1, 1, 1, "web", vec![], vec![]));
    s.schedule(0);
    assert_eq!(zones_of(&s, [1]), ["a"]);
    // E-Binpack alone would stack it on the first replica's node.
    let mut soft = spread_app(2, 1, 1, "web", vec![]);
    let mut rules = soft.pod_rules.as_deref().unwrap().clone();
    rules.preferred_spread = vec![skew("web", "zone", 1)];
    soft.pod_rules = Some(Arc::new(rules));
    s.submit(soft);
    assert_eq!(placed_jobs(&s.schedule(1)), [JobId(2)]);
    assert_eq!(zones_of(&s, [2]), ["b"]);
}

#[test]
fn a_gangs_preferences_count_its_own_pods() {
    let mut s = default_scheduler(zoned(&["a", "a", "b", "b"]));
    // Two 1-GPU pods preferring different zones, on an empty cluster: E-Binpack alone
    // would put both on n0.
    let mut soft = spread_app(1, 2, 1, "web", vec![]);
    let mut rules = soft.pod_rules.as_deref().unwrap().clone();
    rules.preferred_spread = vec![skew("web", "zone", 1)];
    soft.pod_rules = Some(Arc::new(rules));
    s.submit(soft);
    // Two preferring different nodes.
    let mut apart = app(2, 2, 1, "cache", vec![], vec![]);
    let mut rules = apart.pod_rules.as_deref().unwrap().clone();
    rules.preferred_anti_affinity = vec![Weighted {
        weight: 100,
        term: term("cache", HOSTNAME),
    }];
    apart.pod_rules = Some(Arc::new(rules));
    s.submit(apart);
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1), JobId(2)]);
    assert_eq!(zones_of(&s, [1]), ["a", "b"]);
    let mut nodes = nodes_of(&s, 2);
    nodes.dedup();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
}

/// The gang with its pod 0 made a launcher without GPUs and without node rules, and its
/// other pods (the workers) selecting `pool=gpu`.
fn with_launcher(mut gang: kant::model::Job) -> kant::model::Job {
    gang.pods[0] = kant::model::PodRequest::gpus(GpuRequest::NONE);
    let workers = Arc::new(NodeConstraints {
        node_selector: vec![("pool".into(), "gpu".into())],
        ..NodeConstraints::default()
    });
    gang.constraints = (0..gang.pods.len())
        .map(|i| (i > 0).then(|| workers.clone()))
        .collect();
    gang
}

#[test]
fn a_gangs_workers_spread_over_the_domains_of_their_own_node_rules() {
    // Zones a and b hold the `pool=gpu` nodes the workers select; zone c's node does not,
    // and only the launcher, which asks for no GPU, could go there.
    let mut spec = (*zoned(&["a", "b", "c"])).clone();
    for node in &mut spec.nodes[..2] {
        node.labels.insert("pool".into(), "gpu".into());
    }
    let mut s = default_scheduler(Arc::new(spec));
    s.submit(with_launcher(spread_app(
        1,
        5,
        4,
        "ring",
        vec![skew("ring", "zone", 1)],
    )));
    // As kube-scheduler counts a worker's domains (nodeAffinityPolicy: Honor): zones a
    // and b, two workers each.
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
}

#[test]
fn a_self_drawn_gang_goes_to_no_domain_anti_affinity_keeps_it_from() {
    // Zone b (n0, n2) has the most free GPUs, but a pod there keeps `ring` pods out of zone
    // b in one case, and the ring keeps out of a `db` pod's zone in the other. Zone a (n1)
    // holds the whole gang.
    let existing = [
        app(1, 1, 1, "noisy", vec![], vec![term("ring", "zone")]),
        app(1, 1, 1, "db", vec![], vec![]),
    ];
    let avoids_db = [vec![], vec![term("db", "zone")]];
    for (existing, avoids) in existing.into_iter().zip(avoids_db) {
        let mut s = default_scheduler(zoned(&["b", "a", "b"]));
        s.submit(existing);
        s.schedule(0);
        assert_eq!(nodes_of(&s, 1), ["n0"]);
        s.submit(app(2, 2, 4, "ring", vec![term("ring", "zone")], avoids));
        assert_eq!(placed_jobs(&s.schedule(1)), [JobId(2)]);
        assert_eq!(zones_of(&s, [2]), ["a", "a"]);
    }
}

#[test]
fn a_self_drawn_gang_picks_its_domain_by_the_rules_of_its_pods_asking_for_gpus() {
    // Zone c (n1, n2) has the most room but lacks the `pool=gpu` label the workers select;
    // zone a (n0) has it and room for both workers. The launcher (pod 0) has no rules.
    let mut spec = (*zoned(&["a", "c", "c"])).clone();
    spec.nodes[0].labels.insert("pool".into(), "gpu".into());
    let mut s = default_scheduler(Arc::new(spec));
    s.submit(with_launcher(app(
        1,
        3,
        4,
        "ring",
        vec![term("ring", "zone")],
        vec![],
    )));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(zones_of(&s, [1]), ["a", "a", "a"]);
}
