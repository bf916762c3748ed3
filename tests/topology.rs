//! Topology-aware placement across nodes: the fewest nodes and leaf groups for a large
//! gang, required tiers never crossed, scale-up domains, patience before spreading, and
//! E-Binpack keeping whole leaf groups free.

mod common;

use std::collections::HashSet;

use common::*;
use kant::config::Placement;
use kant::framework::Scheduler;
use kant::model::{
    GpuRequest, JobId, LEAF_BLOCK, LinkProfile, NodeId, Tier, TopologyNeed, UNGROUPED_BLOCK,
};
use kant::queue::QueueingPolicy;

const MINUTE_MS: u64 = 60_000;

/// The node of each of a job's pods, a node once per pod on it.
fn replicas_of(s: &Scheduler, job: JobId) -> Vec<NodeId> {
    s.state()
        .placements()
        .filter(|(k, _)| k.job == job)
        .map(|(_, p)| p.placement.node)
        .collect()
}

fn nodes_of(s: &Scheduler, job: JobId) -> HashSet<NodeId> {
    replicas_of(s, job).into_iter().collect()
}

/// Leaves, spines and HBDs a job's nodes span.
fn spans(s: &Scheduler, job: JobId) -> (usize, usize, usize) {
    let spec = s.state().spec();
    let nodes = nodes_of(s, job);
    let count = |tier: Tier| {
        nodes
            .iter()
            .filter_map(|&n| spec.group_domain(spec.node_group[n.index()], tier))
            .collect::<HashSet<_>>()
            .len()
    };
    let hbds: HashSet<_> = nodes
        .iter()
        .filter_map(|&n| spec.node(n).topology.hbd)
        .collect();
    (count(Tier::Leaf), count(Tier::Spine), hbds.len())
}

fn needing(mut job: kant::model::Job, tier: Tier, required: bool) -> kant::model::Job {
    job.topology = Some(TopologyNeed { tier, required });
    job
}

#[test]
fn a_2048_gpu_gang_on_an_empty_8192_gpu_cluster_takes_256_nodes_in_8_leaves() {
    // 1,024 nodes of 8 GPUs, leaves of 32 nodes, 4 leaves to a spine.
    let spec = fabric(1024, 8, 32, 4, 0, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(0, 256, whole(8), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
    assert_eq!(nodes_of(&s, JobId(0)).len(), 256);
    let (leaves, spines, _) = spans(&s, JobId(0));
    assert_eq!((leaves, spines), (8, 2));
}

#[test]
fn a_gang_that_fits_one_leaf_stays_in_it() {
    let spec = fabric(64, 8, 16, 2, 0, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(0, 3, whole(8), 0, 0)); // a small job opens leaf 0
    s.submit(job(1, 16, whole(8), 0, 0)); // a whole leaf
    s.submit(job(2, 10, whole(8), 0, 0));
    // Equal priority and submission: the smaller job goes first.
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0), JobId(2), JobId(1)]);
    assert_eq!(spans(&s, JobId(1)).0, 1);
    assert_eq!(spans(&s, JobId(2)).0, 1);
}

#[test]
fn a_gang_stays_inside_one_leaf_searched_as_several_blocks() {
    // Two leaves under one spine, each searched as two blocks; each gang fits one leaf but
    // no block.
    let per_leaf = LEAF_BLOCK + 8;
    let gang_nodes = LEAF_BLOCK + 4;
    let spec = fabric(2 * per_leaf, 8, per_leaf, 2, 0, LinkProfile::NvlinkAll);
    assert_eq!(spec.groups.len(), 4);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(needing(
        job(0, gang_nodes, whole(8), 0, 0),
        Tier::Leaf,
        true,
    ));
    s.submit(job(1, gang_nodes, whole(8), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0), JobId(1)]);
    for gang in [JobId(0), JobId(1)] {
        assert_eq!(spans(&s, gang).0, 1, "{gang:?} inside one leaf");
    }
}

#[test]
fn a_gang_over_several_leaves_fills_a_leaf_of_blocks_whole_before_the_next() {
    // Under one spine: a leaf of two blocks, and two leaves each with more nodes than one
    // of those blocks but fewer than the pair. A gang of the first two leaves' nodes.
    let block = LEAF_BLOCK / 2 + 4;
    let leaves = [2 * block, block + 6, block + 4];
    let rows = leaves.iter().enumerate().flat_map(|(leaf, &nodes)| {
        (0..nodes).map(move |n| kant::model::NodeRow {
            name: format!("leaf{leaf}-{n}"),
            gpu_model: Some("H100".into()),
            gpus: 8,
            leaf: Some(kant::model::LeafPath {
                superspine: "ss".into(),
                spine: "spine".into(),
                leaf: format!("leaf-{leaf}"),
            }),
            ..Default::default()
        })
    });
    let spec = nvlink_cluster(rows);
    assert_eq!(spec.groups.len(), 4);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(0, leaves[0] + leaves[1], whole(8), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
    assert_eq!(spans(&s, JobId(0)).0, 2);
}

/// 8 nodes, two leaves of 4 under one spine; node `i` holds single-node job `i` except the
/// nodes in `free`.
fn cluster_with_free_nodes(free: &[u32]) -> Scheduler {
    full_but(fabric(8, 8, 4, 2, 0, LinkProfile::NvlinkAll), free)
}

/// The cluster of 8-GPU nodes, node `i` holding single-node job `i` except the nodes in
/// `free`. Best-effort FIFO, so that no backfill threshold wakes a blocked job.
fn full_but(spec: std::sync::Arc<kant::model::ClusterSpec>, free: &[u32]) -> Scheduler {
    let nodes = spec.nodes.len() as u32;
    let best_effort = Some(QueueingPolicy::BestEffortFifo);
    let mut s = scheduler(profile("default", best_effort, None), spec);
    for i in 0..nodes {
        s.submit(job(i, 1, whole(8), 0, 0));
    }
    s.schedule(0);
    for &i in free {
        assert_eq!(
            nodes_of(&s, JobId(i)),
            HashSet::from([NodeId(i)]),
            "E-Binpack fills in order"
        );
        s.finish(JobId(i));
    }
    s
}

#[test]
fn a_required_leaf_waits_rather_than_spills_and_a_preferred_one_spreads() {
    // Leaf 0 has one free node, leaf 1 four: a 5-node gang fits only across both.
    let mut s = cluster_with_free_nodes(&[3, 4, 5, 6, 7]);
    s.submit(needing(job(10, 5, whole(8), 0, 0), Tier::Leaf, true));
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    assert!(nodes_of(&s, JobId(10)).is_empty());
    assert_eq!(
        s.next_retry_ms(0),
        None,
        "a required tier is not retried on time alone"
    );
    s.submit(needing(job(11, 5, whole(8), 0, 0), Tier::Leaf, false));
    // Two leaves of 4 nodes cannot hold 5 nodes on an empty cluster either: the tightest
    // possible domain is the spine, so no patience applies.
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(11)]);
    assert_eq!(spans(&s, JobId(11)).0, 2);
}

#[test]
fn a_required_tier_no_domain_can_ever_hold_is_unresolvable_not_blocking() {
    // Leaves of 2 nodes (16 GPUs) under spines of 2 leaves, and one scale-up domain of 2.
    let spec = fabric(8, 8, 2, 2, 2, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("native", None, None), spec);
    s.submit(needing(job(0, 3, whole(8), 0, 0), Tier::Leaf, true));
    s.submit(needing(job(1, 3, whole(8), 0, 1), Tier::Hbd, true));
    s.submit(needing(job(2, 5, whole(8), 0, 2), Tier::Spine, true));
    s.submit(needing(job(3, 4, whole(8), 0, 3), Tier::Spine, true));
    // Five nodes, with four free: the head of the strict FIFO queue, blocked.
    s.submit(job(4, 5, whole(8), 0, 4));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(3)]);
    for (id, tier) in [(0, "leaf"), (1, "hbd"), (2, "spine")] {
        let message = s.diagnose(JobId(id), 0).expect("pending").message();
        assert!(
            message.contains(&format!("no {tier} of the job's node pools can ever hold")),
            "{message}"
        );
    }
}

/// A job asking no GPU that requires a scale-up domain needs one with a node of its pool:
/// the only one here has none, so it is unresolvable and blocks no strict FIFO queue.
#[test]
fn a_scale_up_domain_without_a_node_of_the_pool_holds_not_even_a_pod_without_gpus() {
    let rows = [("H100", None), ("A100", Some("h0"))].map(|(model, hbd)| kant::model::NodeRow {
        name: format!("node-{model}"),
        gpu_model: Some(model.into()),
        gpus: 8,
        hbd: hbd.map(Into::into),
        ..Default::default()
    });
    let strict = Some(QueueingPolicy::StrictFifo);
    let mut s = scheduler(profile("default", strict, None), nvlink_cluster(rows));
    let on_h100 = |mut job: kant::model::Job| {
        job.pools = vec![kant::model::PoolId(0)];
        job
    };
    s.submit(on_h100(needing(
        job(0, 1, GpuRequest::NONE, 0, 0),
        Tier::Hbd,
        true,
    )));
    s.submit(on_h100(needing(
        job(1, 2, GpuRequest::NONE, 0, 0),
        Tier::Hbd,
        true,
    )));
    s.submit(on_h100(job(2, 1, whole(1), 0, 5)));
    assert_eq!(placed_jobs(&s.schedule(5_000)), [JobId(2)]);
}

#[test]
fn a_required_tier_whose_gpus_suffice_but_whose_nodes_cannot_hold_the_pods_is_unresolvable() {
    // A leaf holds 16 GPUs, but only four pods of 3 GPUs (two per 8-GPU node).
    let spec = fabric(4, 8, 2, 2, 0, LinkProfile::NvlinkAll);
    let mut s = scheduler(
        profile("default", Some(QueueingPolicy::StrictFifo), None),
        spec,
    );
    s.submit(needing(job(0, 5, whole(3), 0, 0), Tier::Leaf, true));
    s.submit(job(1, 1, whole(1), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert!(
        message.contains("no leaf of the job's node pools can ever hold"),
        "{message}"
    );
}

/// Gangs alike but for their size are judged apart: a leaf could hold the smaller, so it
/// may hold out for one, while the larger could never be held by one and spreads at once.
#[test]
fn gangs_alike_but_for_their_size_are_judged_apart() {
    let spec = fabric(8, 8, 2, 2, 0, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(needing(job(0, 2, whole(8), 0, 0), Tier::Leaf, false));
    s.submit(needing(job(1, 3, whole(8), 0, 1), Tier::Leaf, false));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0), JobId(1)]);
    assert_eq!(spans(&s, JobId(0)).0, 1);
    assert_eq!(spans(&s, JobId(1)).0, 2);
}

/// Nodes of 8 GPUs `(model, leaf, hbd)`, every leaf under one spine.
fn two_model_fabric(nodes: &[(&str, &str, &str)]) -> std::sync::Arc<kant::model::ClusterSpec> {
    let rows = nodes
        .iter()
        .enumerate()
        .map(|(i, &(model, leaf, hbd))| kant::model::NodeRow {
            name: format!("n{i}"),
            gpu_model: Some(model.into()),
            gpus: 8,
            leaf: Some(kant::model::LeafPath {
                superspine: "ss".into(),
                spine: "spine".into(),
                leaf: leaf.into(),
            }),
            hbd: Some(hbd.into()),
            ..Default::default()
        });
    nvlink_cluster(rows)
}

#[test]
fn a_gang_accepting_two_models_never_mixes_them_in_a_spine_or_an_hbd() {
    // Each model has one node under leaf l0 and one under l1, all four in one spine, and
    // each scale-up domain holds one node of each model.
    let spec = two_model_fabric(&[
        ("H100", "l0", "h0"),
        ("A100", "l0", "h0"),
        ("H100", "l1", "h1"),
        ("A100", "l1", "h1"),
    ]);
    let both = |mut job: kant::model::Job| {
        job.pools = vec![kant::model::PoolId(0), kant::model::PoolId(1)];
        job
    };
    let mut s = scheduler(profile("default", None, None), spec.clone());
    // No scale-up domain holds two nodes of one model.
    s.submit(both(needing(job(9, 2, whole(8), 0, 0), Tier::Hbd, true)));
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    let message = s.diagnose(JobId(9), 0).expect("pending").message();
    assert!(
        message.contains("no hbd of the job's node pools can ever hold"),
        "{message}"
    );
    // Leaf l0's H100 node and l1's A100 node are taken.
    let mut h100 = job(0, 1, whole(8), 0, 0);
    h100.pools = vec![kant::model::PoolId(0)];
    let mut a100 = job(1, 1, whole(8), 0, 0);
    a100.pools = vec![kant::model::PoolId(1)];
    s.submit(h100);
    s.submit(a100);
    s.schedule(0);
    // Two free nodes in one spine, of two models: the gang waits.
    s.submit(both(needing(job(2, 2, whole(8), 0, 1), Tier::Spine, true)));
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    // Once an H100 node frees, the spine gang takes both H100 nodes.
    s.finish(JobId(0));
    assert_eq!(placed_jobs(&s.schedule(MINUTE_MS)), [JobId(2)]);
    let models: HashSet<_> = nodes_of(&s, JobId(2))
        .into_iter()
        .map(|n| spec.node(n).pool)
        .collect();
    assert_eq!(models.len(), 1);
}

#[test]
fn nodes_outside_every_leaf_group_never_meet_a_required_tier() {
    let spec = models_cluster(&[("H100", 8), ("H100", 8)]);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(needing(job(0, 2, whole(8), 0, 0), Tier::Leaf, true));
    s.submit(needing(job(1, 2, whole(8), 0, 0), Tier::Leaf, false));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
}

/// A gang of pods without GPUs has no launcher that may go anywhere: its pods keep to the
/// tier they require. The only leaf's node is tainted, the other node has no leaf.
#[test]
fn a_gang_without_gpus_never_crosses_its_required_tier() {
    let rows = [None, Some("leaf-0")]
        .into_iter()
        .enumerate()
        .map(|(i, leaf)| kant::model::NodeRow {
            name: format!("node-{i}"),
            gpu_model: Some("H100".into()),
            gpus: 8,
            leaf: leaf.map(|leaf| kant::model::LeafPath {
                superspine: "ss".into(),
                spine: "spine".into(),
                leaf: leaf.into(),
            }),
            taints: leaf.map_or(vec![], |_| vec![reserved_taint()]),
            ..Default::default()
        });
    let mut s = scheduler(profile("default", None, None), nvlink_cluster(rows));
    s.submit(needing(job(0, 2, GpuRequest::NONE, 0, 0), Tier::Leaf, true));
    s.submit(needing(
        job(1, 2, GpuRequest::NONE, 0, 0),
        Tier::Leaf,
        false,
    ));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(nodes_of(&s, JobId(1)), HashSet::from([NodeId(0)]));
    // It can never be placed, and is told why.
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert!(
        message.contains("no one domain of its required tier"),
        "{message}"
    );
    assert!(message.contains("taint"), "{message}");
}

/// A gang of pods without GPUs that requires no tier spans GPU models: each of two nodes
/// of two models holds one of its pods alone. Naming a model, it keeps to that model's
/// nodes, as a single pod does: it waits while one of them is busy (in either search), and
/// is told it can never run where they could never hold it.
#[test]
fn a_gang_without_gpus_spans_gpu_models_unless_it_names_one() {
    let h100_only = |mut gang: kant::model::Job| {
        gang.pools = vec![kant::model::PoolId(0)];
        gang
    };
    for search in [None, Some(kant::framework::SearchMode::Flat)] {
        let models = [("H100", 8), ("H100", 8), ("A100", 8)];
        let spec = models_cluster_with_cpu(&models, Some(4_000));
        let mut s = scheduler(profile("default", None, search), spec);
        s.submit(asking_cpu(job(0, 1, whole(1), 0, 0), 3_000));
        assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
        s.submit(h100_only(asking_cpu(
            job(1, 2, GpuRequest::NONE, 0, 1),
            3_000,
        )));
        assert!(placed_jobs(&s.schedule(1)).is_empty(), "{search:?}");
        let mut any_model = asking_cpu(job(2, 2, GpuRequest::NONE, 0, 2), 3_000);
        any_model.pools.clear();
        s.submit(any_model);
        assert_eq!(placed_jobs(&s.schedule(2)), [JobId(2)], "{search:?}");
        assert_eq!(nodes_of(&s, JobId(2)).len(), 2);
    }
    let spec = models_cluster_with_cpu(&[("H100", 8), ("A100", 8)], Some(4_000));
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(h100_only(asking_cpu(
        job(0, 2, GpuRequest::NONE, 0, 0),
        3_000,
    )));
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert!(
        message.contains("hold at most 1 of its 2 pods without GPUs"),
        "{message}"
    );
}

/// A pod without GPUs naming a model asks more CPU than that model's nodes allocate: it
/// can never run, though another model's nodes allocate enough (only a launcher beside
/// GPU pods may go to any node).
#[test]
fn a_pod_without_gpus_is_judged_on_the_nodes_of_its_model() {
    let row = |name: &str, model: &str, cpu_milli: u64| kant::model::NodeRow {
        name: name.into(),
        gpu_model: Some(model.into()),
        gpus: 8,
        cpu_milli: Some(cpu_milli),
        ..Default::default()
    };
    let spec = nvlink_cluster([row("h", "H100", 4_000), row("a", "A100", 8_000)]);
    let mut s = scheduler(profile("default", None, None), spec);
    let mut pod = asking_cpu(job(0, 1, GpuRequest::NONE, 0, 0), 6_000);
    pod.pools = vec![kant::model::PoolId(0)];
    s.submit(pod);
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert!(
        message.contains("no node a pod of the job may go to allocates the cpu it asks"),
        "{message}"
    );
}

#[test]
fn a_gang_waits_its_patience_for_one_leaf_then_spreads() {
    // Two free nodes in each leaf: a 3-node gang could fit one leaf once more is freed.
    let mut s = cluster_with_free_nodes(&[0, 1, 4, 5]);
    s.submit(job(10, 3, whole(8), 0, 0));
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    let patience_ms = 600_000;
    assert_eq!(s.next_retry_ms(0), Some(patience_ms));
    assert!(placed_jobs(&s.schedule(patience_ms - 1)).is_empty());
    assert_eq!(placed_jobs(&s.schedule(patience_ms)), [JobId(10)]);
    assert_eq!(spans(&s, JobId(10)).0, 2);
}

#[test]
fn a_patient_gang_takes_one_leaf_as_soon_as_it_frees() {
    let mut s = cluster_with_free_nodes(&[0, 1, 4, 5]);
    s.submit(job(10, 3, whole(8), 0, 0));
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    s.finish(JobId(2));
    assert_eq!(placed_jobs(&s.schedule(1_000)), [JobId(10)]);
    assert_eq!(
        nodes_of(&s, JobId(10)),
        HashSet::from([NodeId(0), NodeId(1), NodeId(2)])
    );
}

/// Two spines of four leaves of two nodes (16 nodes of 8 GPUs), node `i` holding
/// single-node job `i` except the nodes in `free`.
fn two_spines_with_free_nodes(free: &[u32]) -> Scheduler {
    full_but(fabric(16, 8, 2, 4, 0, LinkProfile::NvlinkAll), free)
}

/// Spine 0 has one free node in each of its leaves, an exact fit for a 4-node gang over
/// four leaves; spine 1 is free, where it spans two. The fewest leaves win over the best
/// fit.
#[test]
fn a_gang_goes_to_the_domain_where_it_spans_the_fewest_leaves() {
    let mut s = two_spines_with_free_nodes(&[1, 3, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    s.submit(needing(job(20, 4, whole(8), 0, 0), Tier::Spine, true));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(20)]);
    assert_eq!(spans(&s, JobId(20)), (2, 1, 0));
}

/// Spine 1 holding a 4-node gang (job 20) now only over three leaves, a whole one and
/// two halves, after the gang's first try at 0, which places nothing: it holds out for
/// the two leaves it could span.
fn gang_holding_out_for_two_leaves() -> Scheduler {
    let mut s = two_spines_with_free_nodes(&[8, 9, 10, 12]);
    s.submit(job(20, 4, whole(8), 0, 0));
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    s
}

/// The gang waits its patience for two leaves, then spreads over three; or takes two
/// once a leaf frees whole.
#[test]
fn a_patient_gang_holds_out_for_its_fewest_leaves_then_spreads() {
    let patience_ms = 10 * MINUTE_MS;
    let mut s = gang_holding_out_for_two_leaves();
    assert_eq!(s.next_retry_ms(0), Some(patience_ms));
    assert_eq!(placed_jobs(&s.schedule(patience_ms)), [JobId(20)]);
    assert_eq!(spans(&s, JobId(20)), (3, 1, 0));

    let mut s = gang_holding_out_for_two_leaves();
    s.finish(JobId(11));
    assert_eq!(placed_jobs(&s.schedule(MINUTE_MS)), [JobId(20)]);
    assert_eq!(spans(&s, JobId(20)), (2, 1, 0));
}

/// Past its patience, a gang spans one more leaf per further patience period: with one
/// free node in each leaf of spine 0 (a 4-node gang's fewest leaves are two), it may take
/// three leaves after its patience and four a period later, not all four at once.
#[test]
fn a_gang_spreads_one_more_leaf_per_patience_period() {
    let period = 10 * MINUTE_MS;
    let mut s = two_spines_with_free_nodes(&[1, 3, 5, 7]);
    s.submit(job(20, 4, whole(8), 0, 0));
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    assert_eq!(s.next_retry_ms(0), Some(period));
    assert!(placed_jobs(&s.schedule(period)).is_empty(), "three leaves");
    assert_eq!(s.next_retry_ms(period), Some(2 * period));
    assert!(placed_jobs(&s.schedule(2 * period - 1)).is_empty());
    assert_eq!(placed_jobs(&s.schedule(2 * period)), [JobId(20)]);
    assert_eq!(spans(&s, JobId(20)), (4, 1, 0));
}

/// A patient gang's patience is spent only while its pools hold it spread: a placement
/// that leaves them short of it pauses the count, which goes on once they hold it again.
#[test]
fn a_gangs_patience_pauses_while_its_pools_are_short_of_it() {
    let patience_ms = 10 * MINUTE_MS;
    let mut s = gang_holding_out_for_two_leaves();
    // A later job goes ahead (best-effort) and leaves three free nodes, a minute in.
    s.submit(job(21, 1, whole(8), 0, 60));
    assert_eq!(placed_jobs(&s.schedule(MINUTE_MS)), [JobId(21)]);
    s.finish(JobId(21));
    // Four minutes later, room again: nine minutes of patience are left.
    assert!(placed_jobs(&s.schedule(5 * MINUTE_MS)).is_empty());
    let ends = 5 * MINUTE_MS + patience_ms - MINUTE_MS;
    assert_eq!(s.next_retry_ms(5 * MINUTE_MS), Some(ends));
    assert!(placed_jobs(&s.schedule(ends - 1)).is_empty());
    assert_eq!(placed_jobs(&s.schedule(ends)), [JobId(20)]);
    assert_eq!(spans(&s, JobId(20)), (3, 1, 0));
}

/// A gang accepting two GPU models holds out for each pool's own fewest leaves: two of
/// `H100`'s leaves of two nodes, four of `A100`'s of one. With `H100` short of it, it
/// takes four `A100` leaves at once.
#[test]
fn a_patient_gang_counts_the_leaves_of_each_pool_apart() {
    let mut nodes: Vec<(&str, &str, &str)> = ["h0", "h0", "h1", "h1"]
        .iter()
        .map(|&leaf| ("H100", leaf, "hbd"))
        .collect();
    nodes.extend(
        ["a0", "a1", "a2", "a3"]
            .iter()
            .map(|&leaf| ("A100", leaf, "hbd")),
    );
    let mut s = scheduler(profile("default", None, None), two_model_fabric(&nodes));
    s.submit(job(1, 1, whole(8), 0, 0)); // the first H100 node
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    let mut either = job(2, 4, whole(8), 0, 0);
    either.pools.clear();
    s.submit(either);
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(2)]);
    let spec = s.state().spec();
    let models: HashSet<_> = (nodes_of(&s, JobId(2)).iter())
        .map(|&n| spec.node(n).gpu_model.clone())
        .collect();
    assert_eq!(models, HashSet::from([Some("A100".to_string())]));
    assert_eq!(spans(&s, JobId(2)).0, 4);
}

/// A gang making room by priority preemption without patience (`topology_patience_s: 0`)
/// takes the victims that let it in inside one spine, though the cheapest set spans two:
/// on the two spines of leaves of two nodes, every node runs a one-node job of priority
/// 0, those on nodes 0, 1, 8 and 9 started a minute later (the least GPU-time lost). The
/// gang comes once the last of them has run its minimum runtime (10 minutes).
#[test]
fn a_gang_preempting_makes_its_room_inside_one_spine() {
    let config = kant::config::Config::parse(
        "kant.yaml",
        &kant::config::DEFAULT_CONFIG.replace("topology_patience_s: 600", "topology_patience_s: 0"),
    )
    .expect("valid configuration");
    let mut profile = profile_config("default", Some(QueueingPolicy::BestEffortFifo), None);
    for plugin in &mut profile.plugins {
        if plugin.name() == "backfill-preemption" {
            *plugin = kant::config::PluginConfig::Name("preemption".into());
        }
    }
    let profile = kant::plugins::build_profile(&profile, &config).expect("valid profile");
    let mut s = scheduler(profile, fabric(16, 8, 2, 4, 0, LinkProfile::NvlinkAll));
    for i in 0..16 {
        s.submit(job(i, 1, whole(8), 0, 0));
    }
    s.schedule(0);
    let later = [0, 1, 8, 9];
    for i in later {
        s.finish(JobId(i));
        s.submit(job(100 + i, 1, whole(8), 0, 60));
    }
    s.schedule(MINUTE_MS);
    for i in later {
        assert_eq!(nodes_of(&s, JobId(100 + i)), HashSet::from([NodeId(i)]));
    }
    let at_s = 11 * 60;
    s.submit(job(20, 4, whole(8), 10, at_s));
    let decisions = s.schedule(at_s * 1000);
    let mut victims: Vec<JobId> = (decisions.iter())
        .flat_map(|d| match d {
            kant::framework::Decision::Preempted { victims, by, .. } if *by == JobId(20) => {
                victims.clone()
            }
            _ => Vec::new(),
        })
        .collect();
    victims.sort();
    assert_eq!(victims, [JobId(2), JobId(3), JobId(100), JobId(101)]);
    assert!(placed_jobs(&decisions).contains(&JobId(20)));
    assert_eq!(spans(&s, JobId(20)), (2, 1, 0));
}

#[test]
fn a_scale_up_need_lands_inside_one_hbd_or_waits() {
    // 16 nodes in one leaf; scale-up domains of 4 nodes.
    let spec = fabric(16, 8, 16, 1, 4, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(0, 1, whole(8), 0, 0)); // breaks HBD 0
    s.submit(needing(job(1, 4, whole(8), 0, 1), Tier::Hbd, true));
    s.submit(needing(job(2, 5, whole(8), 0, 2), Tier::Hbd, true)); // larger than any HBD
    s.submit(needing(job(3, 3, whole(8), 0, 3), Tier::Hbd, false));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0), JobId(1), JobId(3)]);
    assert_eq!(spans(&s, JobId(1)).2, 1);
    assert_eq!(spans(&s, JobId(3)).2, 1);
    assert!(nodes_of(&s, JobId(2)).is_empty());
}

/// Room held for a backfill head on one GPU model's nodes of a scale-up domain keeps no
/// gang of another model out of its own nodes there.
#[test]
fn room_held_on_one_model_keeps_no_other_model_out_of_a_scale_up_domain() {
    let spec = two_model_fabric(&[
        ("H100", "l0", "h0"),
        ("A100", "l1", "h0"),
        ("H100", "l2", "h0"),
    ]);
    let on = |pool: u16, mut job: kant::model::Job| {
        job.pools = vec![kant::model::PoolId(pool)];
        job
    };
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(on(1, job(0, 1, whole(8), 0, 0)));
    s.submit(on(0, job(1, 1, whole(6), 0, 0)));
    s.submit(on(0, job(4, 1, whole(7), 0, 0)));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    // An H100 job of 3 GPUs, which the H100 nodes (2 and 1 free) hold in all but neither
    // alone, blocks past the backfill threshold: room is held for it on an H100 node.
    s.submit(on(0, job(2, 1, whole(3), 10, 1)));
    s.submit(on(1, needing(job(3, 2, whole(2), 0, 2), Tier::Hbd, true)));
    assert!(placed_jobs(&s.schedule(1_000)).is_empty());
    assert!(placed_jobs(&s.schedule(40 * MINUTE_MS)).is_empty());
    assert!(!s.reservations().is_empty());
    // The A100 node frees: the A100 gang takes it, inside the scale-up domain.
    s.finish(JobId(0));
    assert_eq!(placed_jobs(&s.schedule(41 * MINUTE_MS)), [JobId(3)]);
}

#[test]
fn a_parallel_search_chooses_the_group_a_one_by_one_search_chooses() {
    use kant::model::{NodeConstraints, Requirement, SelectorOp, SelectorTerm};
    // Six empty leaves of four nodes, which rank by group alone. The gang's affinity
    // keeps it off the nodes of leaves 0 to 2 (a node filter: their aggregates still say
    // it may fit), so the best group fails, then the others are tried in parallel: in
    // batches of two (a batch fails, and in the next both groups hold it), or all in one
    // pass (leaves 3 to 5 hold it). The best ranked of those that hold it, leaf 3, must
    // win.
    let excluded: Vec<String> = (0..12).map(|i| format!("node-{i:04}")).collect();
    let affinity = NodeConstraints {
        affinity: vec![SelectorTerm {
            match_expressions: Vec::new(),
            match_fields: vec![Requirement {
                key: "metadata.name".into(),
                op: SelectorOp::NotIn,
                values: excluded,
            }],
        }],
        ..Default::default()
    };
    let place = |parallel: bool, groups_per_batch: usize| {
        let spec = fabric(24, 8, 4, 6, 0, LinkProfile::NvlinkAll);
        let mut profile = profile("default", None, None);
        profile.search_options.parallel = parallel;
        profile.search_options.groups_per_batch = groups_per_batch;
        profile.search_options.parallel_min_pods = 2;
        let mut s = scheduler(profile, spec);
        let mut gang = job(0, 4, whole(8), 0, 0);
        gang.set_constraints(affinity.clone());
        s.submit(gang);
        assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
        let mut nodes: Vec<NodeId> = nodes_of(&s, JobId(0)).into_iter().collect();
        nodes.sort();
        nodes
    };
    let in_leaf_3: Vec<NodeId> = (12..16).map(NodeId).collect();
    assert_eq!(place(false, 0), in_leaf_3);
    assert_eq!(place(true, 2), in_leaf_3);
    assert_eq!(place(true, 0), in_leaf_3);
}

#[test]
fn a_gang_passes_by_the_best_ranked_group_when_it_cannot_hold_the_gangs_pods() {
    // Three leaves of four nodes. E-Binpack ranks the busiest leaf first for whole-node
    // gangs, but once it has one free node left, a gang of two nodes must go to the next
    // busiest leaf that holds both, not spread across leaves.
    let spec = fabric(12, 8, 4, 3, 0, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec.clone());
    let leaf_of = |s: &Scheduler, id: u32| -> HashSet<usize> {
        nodes_of(s, JobId(id))
            .iter()
            .map(|n| n.index() / 4)
            .collect()
    };
    s.submit(job(0, 3, whole(8), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
    assert_eq!(leaf_of(&s, 0), HashSet::from([0]));
    for id in 1..3 {
        s.submit(job(id, 2, whole(8), 0, u64::from(id)));
        assert_eq!(placed_jobs(&s.schedule(u64::from(id))), [JobId(id)]);
        assert_eq!(leaf_of(&s, id), HashSet::from([1]), "gang {id}");
    }
}

#[test]
fn e_binpack_keeps_whole_leaf_groups_free_that_spread_breaks() {
    let untouched_leaves = |placement: Placement| {
        let spec = fabric(16, 8, 4, 4, 0, LinkProfile::NvlinkAll);
        let mut s = scheduler(placement_profile(placement), spec.clone());
        for i in 0..8 {
            s.submit(job(i, 1, whole(1), 0, u64::from(i)));
        }
        assert_eq!(placed_jobs(&s.schedule(0)).len(), 8);
        let used: HashSet<_> = s
            .state()
            .placements()
            .map(|(_, p)| spec.node_group[p.placement.node.index()])
            .collect();
        4 - used.len()
    };
    assert_eq!(untouched_leaves(Placement::EBinpack), 3);
    assert_eq!(untouched_leaves(Placement::Spread), 0);
}

#[test]
fn e_binpack_fills_a_hole_where_binpack_breaks_a_free_node() {
    let node_for_half_gpu_pod = |placement: Placement| {
        // Two leaves of two nodes. A, B: 4 GPUs each; C, D: a whole node each.
        let spec = fabric(4, 8, 2, 2, 0, LinkProfile::NvlinkAll);
        let mut s = scheduler(placement_profile(placement), spec);
        for (id, gpus) in [(0, 4), (1, 4), (2, 8), (3, 8)] {
            s.submit(job(id, 1, whole(gpus), 0, u64::from(id)));
            s.schedule(0);
        }
        let slots: Vec<_> = (0..4).map(|j| nodes_of(&s, JobId(j))).collect();
        assert_eq!(slots[0], slots[1], "{placement:?}: A and B share a node");
        // Leaf 0 keeps a half-used node and a free one (25% used); leaf 1 a full node and a
        // free one (50% used).
        s.finish(JobId(1));
        s.finish(JobId(2));
        s.submit(job(4, 1, whole(4), 0, 4));
        assert_eq!(placed_jobs(&s.schedule(0)), [JobId(4)]);
        let node = nodes_of(&s, JobId(4));
        (node == slots[0], node == slots[2] || node == slots[3])
    };
    assert_eq!(node_for_half_gpu_pod(Placement::EBinpack), (true, false));
    let (fills_hole, _) = node_for_half_gpu_pod(Placement::Binpack);
    assert!(
        !fills_hole,
        "plain binpack goes to the busier leaf and breaks its free node"
    );
}

#[test]
fn e_binpack_fills_a_node_exactly_among_blocks_outside_every_leaf_and_gathers_in_leaves() {
    // Two groups of 32 nodes of 8 GPUs. Group 0: node 0 has 3 free, node 1 has 1 free,
    // small pods holding 12 GPUs; group 1: node 32 has exactly 2 free, pods holding 6.
    let node_for_two_gpu_pod = |spec| {
        let mut s = scheduler(profile("default", None, None), spec);
        let running = kant::framework::Adopted::Running { preemptible: false };
        let pods = [(0, 0b111), (0, 0b11000), (1, 0b1111), (1, 0b111_0000)];
        let pods = pods.into_iter().chain([(32, 0b111), (32, 0b111_000)]);
        for (id, (node, devices)) in pods.enumerate() {
            let gpus = u32::count_ones(devices);
            let small = job(id as u32, 1, whole(gpus), 0, 0);
            s.adopt(small, &[Some(placement(node, devices, 1000))], 0, running)
                .expect("room for it");
        }
        s.submit(job(10, 1, whole(2), 0, 0));
        assert_eq!(placed_jobs(&s.schedule(0)), [JobId(10)]);
        replicas_of(&s, JobId(10))[0]
    };
    let blocks = UNGROUPED_BLOCK;
    let without_leaves = models_cluster(&vec![("H100", 8); 2 * blocks]);
    assert_eq!(without_leaves.groups.len(), 2);
    assert_eq!(node_for_two_gpu_pod(without_leaves), NodeId(32));
    // In leaves, a small pod goes where small pods hold the most, so other leaves drain.
    let leaves = cluster(2 * blocks, 8, blocks, LinkProfile::NvlinkAll);
    assert_eq!(node_for_two_gpu_pod(leaves), NodeId(0));
}

/// A gang of pods narrower than a node takes the fewest nodes: four 2-GPU pods go to the
/// free node that holds them all, not to the holes of two busy nodes and a third.
#[test]
fn e_binpack_gives_a_gang_of_narrow_pods_the_fewest_nodes() {
    let spec = fabric(4, 8, 4, 1, 0, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    let running = kant::framework::Adopted::Running { preemptible: true };
    for node in [0, 1] {
        let six = job(100 + node, 1, whole(6), 0, 0);
        s.adopt(six, &[Some(placement(node, 0x3f, 1000))], 0, running)
            .unwrap();
    }
    s.submit(job(1, 4, whole(2), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    let used = nodes_of(&s, JobId(1));
    assert_eq!(used.len(), 1, "{used:?}");
    // A gang of one such pod and a launcher without GPUs is one pod to pack: it fills a
    // hole, as a lone pod would.
    let mut launched = job(3, 2, whole(2), 0, 2);
    launched.pods[0] = kant::model::PodRequest::gpus(kant::model::GpuRequest::NONE);
    s.submit(launched);
    assert_eq!(placed_jobs(&s.schedule(2)), [JobId(3)]);
    let worker = s.state().placement(kant::cache::PodKey {
        job: JobId(3),
        pod: 1,
    });
    let node = worker.unwrap().placement.node;
    assert!(node == NodeId(0) || node == NodeId(1), "{node:?}");
    // Five such pods need two nodes at least; they fill the free one, then a hole.
    s.submit(job(2, 5, whole(2), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(1)), [JobId(2)]);
    let used = nodes_of(&s, JobId(2));
    assert_eq!(used.len(), 2, "{used:?}");
}

/// In a pool of nodes of several sizes, a gang that one large node holds goes there whole,
/// however well one of its pods would fill a small node.
#[test]
fn e_binpack_gives_a_gang_one_large_node_rather_than_a_small_node_it_fills() {
    for placement in [Placement::EBinpack, Placement::ESpread] {
        let rows = [("large", 8), ("small", 4)].map(|(name, gpus)| kant::model::NodeRow {
            name: name.into(),
            gpu_model: Some("H100".into()),
            gpus,
            ..Default::default()
        });
        let config = profile_config("default", None, None).with_placement(placement);
        let mut s = scheduler(build(&config), nvlink_cluster(rows));
        s.submit(job(1, 2, whole(4), 0, 0));
        assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
        assert_eq!(
            nodes_of(&s, JobId(1)),
            HashSet::from([NodeId(0)]),
            "{placement:?}"
        );
    }
}

#[test]
fn e_binpack_puts_a_small_pod_with_small_pods_so_that_a_gangs_leaf_drains_whole() {
    // Two leaves of four nodes. Leaf 0: a gang on three nodes and a 4-GPU pod on the
    // fourth. Leaf 1: two 6-GPU pods. Then a 2-GPU pod, which both leaves have a hole for.
    let leaf_of = |s: &Scheduler, job: u32| {
        let spec = s.state().spec();
        let nodes = nodes_of(s, JobId(job));
        let groups: HashSet<_> = nodes.iter().map(|n| spec.node_group[n.index()]).collect();
        assert_eq!(groups.len(), 1);
        groups.into_iter().next().map(|g| g.index())
    };
    let run = |placement: Placement| {
        let spec = fabric(8, 8, 4, 2, 0, LinkProfile::NvlinkAll);
        let mut s = scheduler(placement_profile(placement), spec);
        let jobs = [(0, 3, 8), (1, 1, 4), (2, 1, 6), (3, 1, 6), (4, 1, 2)];
        for (id, pods, gpus) in jobs {
            s.submit(job(id, pods, whole(gpus), 0, u64::from(id)));
            assert_eq!(placed_jobs(&s.schedule(0)), [JobId(id)]);
        }
        let layout: Vec<_> = (0..4).map(|j| leaf_of(&s, j)).collect();
        assert_eq!(
            layout,
            [Some(0), Some(0), Some(1), Some(1)],
            "{placement:?}"
        );
        let small_pod_leaf = leaf_of(&s, 4);
        // The gang and the 4-GPU pod end: a gang of a whole leaf fits one leaf or none.
        s.finish(JobId(0));
        s.finish(JobId(1));
        s.submit(job(5, 4, whole(8), 0, 5));
        s.schedule(0);
        (small_pod_leaf, spans(&s, JobId(5)).0)
    };
    // E-Binpack goes where small pods are; leaf 0 drains whole for the next gang.
    assert_eq!(run(Placement::EBinpack), (Some(1), 1));
    // Plain binpack goes to the busier leaf, whose gang would have freed it whole.
    assert_eq!(run(Placement::Binpack).0, Some(0));
}

/// The default profile with E-Spread over `zone`.
fn zone_profile(zone: kant::plugins::ZoneConfig) -> kant::framework::Profile {
    let config = kant::config::Config::embedded();
    let mut profile = config
        .profile("default")
        .expect("default")
        .with_placement(Placement::ESpread);
    profile.inference_zone = Some(zone);
    kant::plugins::build_profile(&profile, &config).expect("valid profile")
}

fn inference(mut job: kant::model::Job) -> kant::model::Job {
    job.kind = kant::model::JobKind::Inference;
    job
}

/// Spreading replicas over the zone never crosses a tier the job requires: 6 replicas of
/// one GPU that require one leaf stay in one leaf, though the zone (the second leaf) has
/// only 4 nodes.
#[test]
fn e_spread_never_crosses_a_required_tier() {
    let spec = fabric(8, 8, 4, 2, 0, LinkProfile::NvlinkAll);
    let zone = kant::plugins::ZoneConfig {
        nodes: (4..8).map(|i| format!("node-{i:04}")).collect(),
        ..Default::default()
    };
    let mut s = scheduler(zone_profile(zone), spec);
    s.submit(needing(
        inference(job(1, 6, whole(1), 0, 1)),
        Tier::Leaf,
        true,
    ));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(spans(&s, JobId(1)).0, 1);
}

#[test]
fn e_spread_puts_one_replica_per_zone_node_then_binpacks_the_rest() {
    let spec = fabric(8, 8, 4, 2, 0, LinkProfile::NvlinkAll);
    let zone = [
        "node-0004",
        "node-0005",
        "node-0006",
        "node-0007",
        "no-such-node",
    ];
    let zone = kant::plugins::ZoneConfig {
        nodes: zone.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    };
    let mut s = scheduler(zone_profile(zone), spec);
    s.submit(job(0, 2, whole(8), 0, 0)); // training: kept out of the zone
    s.submit(inference(job(1, 6, whole(1), 0, 1)));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0), JobId(1)]);
    let zone_nodes: HashSet<NodeId> = (4..8).map(NodeId).collect();
    assert!(nodes_of(&s, JobId(0)).is_disjoint(&zone_nodes));
    let replicas = replicas_of(&s, JobId(1));
    let in_zone: HashSet<_> = replicas.iter().filter(|n| zone_nodes.contains(n)).collect();
    assert_eq!(
        in_zone.len(),
        4,
        "one replica on each zone node: {replicas:?}"
    );
    let outside: HashSet<_> = replicas
        .iter()
        .filter(|n| !zone_nodes.contains(n))
        .collect();
    assert_eq!(
        outside.len(),
        1,
        "the two extra replicas share one general node: {replicas:?}"
    );
}

/// Replicas beyond the zone's room go to the general pool, fractions as well as whole
/// GPUs: a zone node that already holds a replica is the last choice, below a free
/// general node where a fraction breaks a whole GPU.
#[test]
fn e_spread_sends_replicas_past_the_zone_to_the_general_pool() {
    for gpu in [GpuRequest::Fraction(500), whole(1)] {
        let zone = kant::plugins::ZoneConfig {
            nodes: vec!["node-0000".into(), "node-0001".into()],
            ..Default::default()
        };
        let mut s = scheduler(
            zone_profile(zone),
            fabric(8, 8, 4, 2, 0, LinkProfile::NvlinkAll),
        );
        s.submit(inference(job(1, 4, gpu, 0, 0)));
        assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
        let replicas = replicas_of(&s, JobId(1));
        let in_zone = replicas.iter().filter(|n| n.0 < 2).count();
        assert_eq!(
            in_zone, 2,
            "{gpu:?}: one replica per zone node: {replicas:?}"
        );
    }
}

/// An inference pod as wide as a node is not what the zone is for: it goes to the general
/// pool, and to the zone only when the general pool has no room.
#[test]
fn e_spread_keeps_inference_pods_as_wide_as_a_node_out_of_the_zone_while_there_is_room() {
    let zone = kant::plugins::ZoneConfig {
        nodes: (4..8).map(|i| format!("node-{i:04}")).collect(),
        ..Default::default()
    };
    let mut s = scheduler(
        zone_profile(zone),
        fabric(8, 8, 4, 2, 0, LinkProfile::NvlinkAll),
    );
    s.submit(inference(job(1, 4, whole(8), 0, 0)));
    s.submit(inference(job(2, 1, whole(8), 0, 1)));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1), JobId(2)]);
    assert!(replicas_of(&s, JobId(1)).iter().all(|n| n.0 < 4));
    assert!(
        replicas_of(&s, JobId(2))[0].0 >= 4,
        "the general pool is full"
    );
}

/// A gang of replicas that accepts any GPU model reaches a zone named by GPU model: the
/// pool of the best-ranked group is tried first, not the first pool.
#[test]
fn e_spread_tries_the_zone_s_pool_first_for_replicas_of_any_gpu_model() {
    for count in [1, 2] {
        let spec = models_cluster(&[("H100", 8), ("H100", 8), ("L40S", 8), ("L40S", 8)]);
        let zone = kant::plugins::ZoneConfig {
            gpu_models: vec!["L40S".into()],
            ..Default::default()
        };
        let mut s = scheduler(zone_profile(zone), spec.clone());
        let mut replicas = inference(job(1, count, whole(1), 0, 0));
        replicas.pools = vec![];
        s.submit(replicas);
        assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
        let nodes = replicas_of(&s, JobId(1));
        let models: Vec<_> = nodes
            .iter()
            .map(|&n| spec.node(n).gpu_model.clone())
            .collect();
        assert!(
            models.iter().all(|m| m.as_deref() == Some("L40S")),
            "{models:?}"
        );
        assert_eq!(
            nodes.iter().collect::<HashSet<_>>().len(),
            count,
            "one per zone node"
        );
    }
}

/// The zone's leaf of three nodes (0 to 2, allowing training) beside the general pool:
/// nodes 3 and 4 in one leaf and node 5 in another, all under one spine.
fn zone_beside_uneven_leaves() -> Scheduler {
    let leaves = ["zone", "zone", "zone", "a", "a", "b"];
    let rows = (leaves.iter().enumerate()).map(|(i, leaf)| node_under(i, "spine", leaf));
    let zone = kant::plugins::ZoneConfig {
        nodes: (0..3).map(|i| format!("node-{i}")).collect(),
        allow_training: true,
        ..Default::default()
    };
    scheduler(zone_profile(zone), nvlink_cluster(rows))
}

const ZONE: [NodeId; 3] = [NodeId(0), NodeId(1), NodeId(2)];

/// Training the zone allows takes the general pool at any tier before the zone: a gang of
/// three nodes spreads over the general pool's two leaves rather than take the zone's
/// leaf whole; one the general pool can never hold takes as few zone nodes as it needs;
/// and once the general pool is full, the zone's leaf holds a gang whole.
#[test]
fn training_the_zone_allows_takes_the_general_pool_at_any_tier_first() {
    let general: HashSet<NodeId> = (3..6).map(NodeId).collect();
    let mut s = zone_beside_uneven_leaves();
    s.submit(job(1, 3, whole(8), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(nodes_of(&s, JobId(1)), general);

    let mut s = zone_beside_uneven_leaves();
    s.submit(job(1, 4, whole(5), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    let in_zone = nodes_of(&s, JobId(1)).intersection(&ZONE.into()).count();
    assert_eq!(in_zone, 1, "{:?}", nodes_of(&s, JobId(1)));

    let mut s = zone_beside_uneven_leaves();
    for id in 1..4 {
        s.submit(job(id, 1, whole(8), 0, 0));
    }
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    s.submit(job(4, 3, whole(8), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(1_000)), [JobId(4)]);
    assert_eq!(
        nodes_of(&s, JobId(4)),
        ZONE.into(),
        "the general pool is full"
    );
}

/// A training gang the zone allows holds out only for domains the general pool could give
/// it: with a replica on each zone node, it spreads over the general pool's leaves at once
/// rather than wait its patience for the zone's leaf.
#[test]
fn training_the_zone_allows_holds_out_only_for_the_general_pool_s_domains() {
    let mut s = zone_beside_uneven_leaves();
    s.submit(inference(job(1, 3, whole(1), 0, 0)));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(nodes_of(&s, JobId(1)), ZONE.into());
    s.submit(job(2, 3, whole(8), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(1_000)), [JobId(2)]);
    assert_eq!(nodes_of(&s, JobId(2)), (3..6).map(NodeId).collect());
}

#[test]
fn the_inference_zone_can_be_named_by_node_labels() {
    let rows = (0..4).map(|i| kant::model::NodeRow {
        name: format!("n{i}"),
        gpu_model: Some("H100".into()),
        gpus: 8,
        labels: [(
            "pool".to_string(),
            if i < 2 { "infer" } else { "train" }.to_string(),
        )]
        .into(),
        ..Default::default()
    });
    let profile = zone_profile(kant::plugins::ZoneConfig {
        labels: [("pool".to_string(), "infer".to_string())].into(),
        ..Default::default()
    });
    let mut s = scheduler(profile, nvlink_cluster(rows));
    s.submit(job(0, 1, whole(8), 0, 0)); // training: kept out of the zone
    s.submit(inference(job(1, 2, whole(1), 0, 1)));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0), JobId(1)]);
    let zone: HashSet<NodeId> = [NodeId(0), NodeId(1)].into();
    assert!(nodes_of(&s, JobId(0)).is_disjoint(&zone));
    assert_eq!(
        nodes_of(&s, JobId(1)),
        zone,
        "one replica on each labelled node"
    );
}

fn reserved_taint() -> kant::model::Taint {
    kant::model::Taint {
        key: "dedicated".into(),
        value: "infer".into(),
        effect: kant::model::TaintEffect::NoSchedule,
    }
}

fn selecting(mut job: kant::model::Job, key: &str, value: &str) -> kant::model::Job {
    job.set_constraints(kant::model::NodeConstraints {
        node_selector: vec![(key.into(), value.into())],
        ..Default::default()
    });
    job
}

#[test]
fn a_gang_holds_out_only_for_a_leaf_its_pods_may_use() {
    // Leaf 0, the only one of two nodes, is tainted: for a gang that does not tolerate it,
    // the tightest domain is the spine, so it spreads over leaves 1 and 2 at once rather
    // than waiting its patience for a leaf it can never use.
    let tainted = |i: usize| {
        (
            vec![],
            if i < 2 {
                vec![reserved_taint()]
            } else {
                vec![]
            },
        )
    };
    let mut s = scheduler(profile("default", None, None), uneven_leaves(tainted));
    s.submit(job(1, 2, whole(8), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(
        nodes_of(&s, JobId(1)),
        HashSet::from([NodeId(2), NodeId(3)])
    );
    // A gang that tolerates the taint may use leaf 0, which holds it whole.
    let mut s = scheduler(profile("default", None, None), uneven_leaves(tainted));
    let mut tolerant = job(1, 2, whole(8), 0, 0);
    tolerant.set_constraints(kant::model::NodeConstraints {
        tolerations: vec![kant::model::Toleration {
            key: Some("dedicated".into()),
            exists: true,
            value: String::new(),
            effect: None,
        }],
        ..Default::default()
    });
    s.submit(tolerant);
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(
        nodes_of(&s, JobId(1)),
        HashSet::from([NodeId(0), NodeId(1)])
    );

    // Leaf 0 closed to training as an inference zone: the same.
    let zone = kant::plugins::ZoneConfig {
        nodes: vec!["node-0000".into(), "node-0001".into()],
        ..Default::default()
    };
    let mut s = scheduler(zone_profile(zone), uneven_leaves(|_| (vec![], vec![])));
    s.submit(job(1, 2, whole(8), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(
        nodes_of(&s, JobId(1)),
        HashSet::from([NodeId(2), NodeId(3)])
    );

    // Selected onto nodes 1 to 3: no leaf has two of them, so it spreads at once.
    let labelled = |i: usize| (if i > 0 { vec![("pool", "a")] } else { vec![] }, vec![]);
    let mut s = scheduler(profile("default", None, None), uneven_leaves(labelled));
    s.submit(selecting(job(1, 2, whole(8), 0, 0), "pool", "a"));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert!(!nodes_of(&s, JobId(1)).contains(&NodeId(0)));

    // Selected onto nodes 0 to 2, with node 0 busy: leaf 0 could hold it, so it waits its
    // patience for node 0 rather than spread over nodes 1 and 2.
    let labelled = |i: usize| (if i < 3 { vec![("pool", "a")] } else { vec![] }, vec![]);
    let mut s = scheduler(profile("default", None, None), uneven_leaves(labelled));
    s.submit(selecting(job(0, 1, whole(8), 0, 0), "pool", "a"));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
    assert_eq!(nodes_of(&s, JobId(0)), HashSet::from([NodeId(0)]));
    s.submit(selecting(job(1, 2, whole(8), 0, 0), "pool", "a"));
    assert!(placed_jobs(&s.schedule(0)).is_empty(), "patient for leaf 0");
}

#[test]
fn a_gang_its_usable_nodes_can_never_hold_is_unresolvable_not_blocking() {
    // Nodes 0 and 2 carry `pool=a`: one in leaf 0, one in leaf 1.
    let labelled = |i: usize| {
        (
            if i.is_multiple_of(2) {
                vec![("pool", "a")]
            } else {
                vec![]
            },
            vec![],
        )
    };
    let strict = Some(QueueingPolicy::StrictFifo);
    let mut s = scheduler(profile("default", strict, None), uneven_leaves(labelled));
    let selected = |id, pods| selecting(job(id, pods, whole(8), 0, 0), "pool", "a");
    s.submit(needing(selected(0, 2), Tier::Leaf, true));
    s.submit(selected(1, 3));
    s.submit(job(2, 1, whole(8), 0, 1));
    assert_eq!(
        placed_jobs(&s.schedule(0)),
        [JobId(2)],
        "behind two unresolvable gangs"
    );
    let message = |id| s.diagnose(JobId(id), 0).expect("pending").message();
    assert_eq!(
        message(0),
        "no one domain of its required tier, of the nodes its pods may use, can ever hold \
         the gang: 0/4 nodes are available: 2 node(s) could not hold the whole gang, 2 \
         node(s) didn't match Pod's node affinity/selector."
    );
    assert!(
        message(1).starts_with("the nodes its pods may use can never hold the whole gang: "),
        "{}",
        message(1)
    );
    // Two selected nodes do hold a gang of two that requires only the spine.
    s.submit(needing(selected(3, 2), Tier::Spine, true));
    s.finish(JobId(2));
    assert_eq!(placed_jobs(&s.schedule(1_000)), [JobId(3)]);
}

#[test]
fn the_domains_a_gang_could_ever_use_count_the_pods_each_node_holds_for_its_cpu() {
    // Two leaves of two nodes of 8 GPUs and 128 CPUs. A pod of 1 GPU and 100 CPUs: each
    // node holds one, so no leaf holds three, though its GPUs would.
    let cpu_bound = |id, tier, required| {
        asking_cpu(needing(job(id, 3, whole(1), 0, 0), tier, required), 100_000)
    };
    let strict = Some(QueueingPolicy::StrictFifo);
    let mut s = scheduler(
        profile("default", strict, None),
        cluster(4, 8, 2, LinkProfile::NvlinkAll),
    );
    s.submit(cpu_bound(0, Tier::Leaf, true));
    s.submit(cpu_bound(1, Tier::Spine, true));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)], "behind job 0");
    assert_eq!(spans(&s, JobId(1)).0, 2);
    assert_eq!(
        s.diagnose(JobId(0), 0).expect("pending").message(),
        "no one domain of its required tier, of the nodes its pods may use, can ever hold \
         the gang"
    );
    // Preferring a leaf no leaf could ever hold, it spreads at once rather than wait its
    // patience.
    s.finish(JobId(1));
    s.submit(cpu_bound(2, Tier::Leaf, false));
    assert_eq!(placed_jobs(&s.schedule(1_000)), [JobId(2)]);
}

#[test]
fn a_single_pod_no_node_it_may_use_can_hold_is_unresolvable_not_blocking() {
    // Nodes 0 and 2 carry `pool=a`; node 1 carries `pool=b`.
    let labelled = |i: usize| match i {
        0 | 2 => (vec![("pool", "a")], vec![]),
        1 => (vec![("pool", "b")], vec![]),
        _ => (vec![], vec![]),
    };
    let strict = Some(QueueingPolicy::StrictFifo);
    let mut s = scheduler(profile("default", strict, None), uneven_leaves(labelled));
    s.submit(selecting(job(0, 1, whole(8), 0, 0), "pool", "nowhere"));
    s.submit(selecting(job(1, 1, whole(8), 0, 1), "pool", "b"));
    assert_eq!(
        placed_jobs(&s.schedule(0)),
        [JobId(1)],
        "behind an unresolvable pod"
    );
    // As under kube-scheduler, it is told the nodes' reasons.
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert_eq!(
        message,
        "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."
    );
    // One that only lacks room now (node 1 is busy) still blocks the queue behind it.
    s.submit(selecting(job(2, 1, whole(8), 0, 2), "pool", "b"));
    s.submit(job(3, 1, whole(8), 0, 3));
    assert!(placed_jobs(&s.schedule(1_000)).is_empty());
    s.finish(JobId(1));
    assert_eq!(placed_jobs(&s.schedule(2_000)), [JobId(2), JobId(3)]);
}

#[test]
fn a_single_pod_whose_required_tier_only_nodes_it_may_not_use_have_is_unresolvable() {
    // Node 0, in a scale-up domain, carries `pool=b`; node 1, in none, `pool=a`.
    let rows = [("b", Some("h0")), ("a", None)].map(|(pool, hbd)| kant::model::NodeRow {
        name: format!("node-{pool}"),
        gpu_model: Some("H100".into()),
        gpus: 8,
        hbd: hbd.map(Into::into),
        labels: [("pool".to_string(), pool.to_string())]
            .into_iter()
            .collect(),
        ..Default::default()
    });
    let strict = Some(QueueingPolicy::StrictFifo);
    let mut s = scheduler(profile("default", strict, None), nvlink_cluster(rows));
    s.submit(needing(
        selecting(job(0, 1, whole(4), 0, 0), "pool", "a"),
        Tier::Hbd,
        true,
    ));
    s.submit(job(1, 1, whole(8), 0, 1));
    assert_eq!(
        placed_jobs(&s.schedule(0)),
        [JobId(1)],
        "behind an unresolvable pod"
    );
    assert_eq!(
        s.diagnose(JobId(0), 0).expect("pending").message(),
        "0/2 nodes are available: 1 node(s) could not hold it inside a domain of its \
         required tier, 1 node(s) didn't match Pod's node affinity/selector."
    );
}

/// Nodes 0 and 1 carry `pool=a`: two pods selecting them leave 2 and 1 GPUs free there,
/// and a third of 4 GPUs selecting them blocks past the backfill threshold. The scheduler,
/// once room is held for it, which must be node 0's group.
fn held_for_a_selected_pod(spec: std::sync::Arc<kant::model::ClusterSpec>) -> Scheduler {
    let mut s = scheduler(profile("default", None, None), spec.clone());
    s.submit(selecting(job(0, 1, whole(8), 0, 0), "pool", "a"));
    s.submit(selecting(job(1, 1, whole(6), 0, 0), "pool", "a"));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 2);
    s.submit(selecting(job(2, 1, whole(4), 0, 1), "pool", "a"));
    assert!(placed_jobs(&s.schedule(1_000)).is_empty());
    assert!(placed_jobs(&s.schedule(40 * MINUTE_MS)).is_empty());
    let held: Vec<_> = s
        .reservations()
        .iter()
        .flat_map(|r| r.groups.clone())
        .collect();
    assert_eq!(held, [spec.node_group[0]]);
    s
}

/// Room held for a backfill head lies on nodes it may use: not on the freest leaf, which
/// its node selector keeps it off.
#[test]
fn room_is_held_for_a_single_pod_only_where_it_may_go() {
    // Nodes 0 and 1 (leaf 0) carry `pool=a`; leaves 1 and 2 have a node each.
    let labelled = |i: usize| (if i < 2 { vec![("pool", "a")] } else { vec![] }, vec![]);
    let spec = uneven_leaves(labelled);
    let mut s = held_for_a_selected_pod(spec);
    // Both other leaves stay open to jobs behind it.
    s.submit(job(3, 1, whole(8), 0, 2_500));
    s.submit(job(4, 1, whole(8), 0, 2_500));
    assert_eq!(placed_jobs(&s.schedule(42 * MINUTE_MS)).len(), 2);
}

/// Where the nodes a single pod may use are outside every leaf, room is held for it there.
#[test]
fn room_is_held_for_a_single_pod_whose_nodes_are_outside_every_leaf() {
    let rows = (0..4).map(|i| kant::model::NodeRow {
        name: format!("node-{i}"),
        gpu_model: Some("H100".into()),
        gpus: 8,
        leaf: (i >= 2).then(|| kant::model::LeafPath {
            superspine: "ss".into(),
            spine: "spine".into(),
            leaf: format!("leaf-{i}"),
        }),
        labels: [(
            "pool".to_string(),
            if i < 2 { "a" } else { "b" }.to_string(),
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    });
    let spec = nvlink_cluster(rows);
    held_for_a_selected_pod(spec);
}

/// Node `node-{i}` of 8 GPUs in `leaf` under the spine `spine` (empty: none) and no
/// superspine.
fn node_under(i: usize, spine: &str, leaf: &str) -> kant::model::NodeRow {
    kant::model::NodeRow {
        name: format!("node-{i}"),
        gpu_model: Some("H100".into()),
        gpus: 8,
        leaf: Some(kant::model::LeafPath {
            superspine: String::new(),
            spine: spine.into(),
            leaf: leaf.into(),
        }),
        ..Default::default()
    }
}

/// Two one-node leaves of 8 GPUs under the spine `spine` (empty: none) and no superspine.
fn two_leaves_under(spine: &str) -> std::sync::Arc<kant::model::ClusterSpec> {
    nvlink_cluster((0..2).map(|i| node_under(i, spine, &format!("leaf-{i}"))))
}

/// A leaf under no spine is a domain of its own at the tiers above it: a gang that
/// requires one spine may fill it (it crosses no spine there), whether or not spines
/// exist elsewhere, and what could ever hold a gang is judged the same way.
#[test]
fn a_leaf_under_no_spine_holds_a_gang_that_requires_one_spine() {
    let spineless = [node_under(0, "", "l0"), node_under(1, "", "l0")];
    let mut s = scheduler(
        profile("default", None, None),
        nvlink_cluster(spineless.clone()),
    );
    s.submit(needing(job(0, 2, whole(8), 0, 0), Tier::Spine, true));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
    // Beside a spine of two one-node leaves: one such gang in each domain, and a gang
    // of 3 nodes, which would span both, can never be placed.
    let rows = spineless
        .into_iter()
        .chain([node_under(2, "sp", "l1"), node_under(3, "sp", "l2")]);
    let mut s = scheduler(profile("default", None, None), nvlink_cluster(rows));
    s.submit(needing(job(0, 3, whole(8), 0, 0), Tier::Spine, true));
    for id in 1..3 {
        s.submit(needing(job(id, 2, whole(8), 0, 1), Tier::Spine, true));
    }
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1), JobId(2)]);
    for id in 1..3 {
        let nodes = nodes_of(&s, JobId(id));
        let in_leaf = nodes.iter().filter(|n| n.0 < 2).count();
        assert!(in_leaf == 0 || in_leaf == 2, "job {id} on {nodes:?}");
    }
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert!(
        message.contains("no spine of the job's node pools can ever hold"),
        "{message}"
    );
}

#[test]
fn leaves_under_no_spine_share_no_spine_or_superspine() {
    // Leaves that name no spine or superspine (a trace's empty columns, or nodes labelled
    // with a leaf alone) are in no domain above the leaf.
    let mut s = scheduler(profile("default", None, None), two_leaves_under(""));
    s.submit(needing(job(0, 2, whole(8), 0, 0), Tier::Spine, true));
    s.submit(needing(job(1, 2, whole(8), 0, 0), Tier::Superspine, true));
    s.submit(needing(job(2, 2, whole(8), 0, 1), Tier::Spine, false));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(2)]);
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert!(
        message.contains("no spine of the job's node pools can ever hold"),
        "{message}"
    );
    // Under one spine and no superspine, the spine is a superspine domain of its own: a
    // gang that requires a superspine fits it, as one that requires the spine does.
    for tier in [Tier::Spine, Tier::Superspine] {
        let mut s = scheduler(profile("default", None, None), two_leaves_under("sp"));
        s.submit(needing(job(0, 2, whole(8), 0, 0), tier, true));
        assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)], "{tier:?}");
    }
}

#[test]
fn only_taints_of_the_pools_a_job_may_use_are_judged() {
    use kant::framework::Filter;
    let gpu = kant::model::NodeRow {
        name: "gpu".into(),
        gpu_model: Some("H100".into()),
        gpus: 8,
        ..Default::default()
    };
    let control_plane = kant::model::NodeRow {
        name: "cp".into(),
        taints: vec![kant::model::Taint {
            key: "node-role.kubernetes.io/control-plane".into(),
            value: String::new(),
            effect: kant::model::TaintEffect::NoSchedule,
        }],
        ..Default::default()
    };
    let cluster = nvlink_cluster([gpu, control_plane]);
    let state = kant::framework::CycleState::new(0);
    let judges = |gpus| {
        let mut gang = job(0, 2, whole(gpus), 0, 0);
        gang.pools.clear();
        kant::plugins::TaintToleration.judges_spec(&gang, &cluster, &state)
    };
    // A GPU gang naming no model may use only the pools with GPUs: the tainted CPU-only
    // node refuses it nothing, and its usable nodes need no pass over the cluster.
    assert!(!judges(8));
    assert!(judges(0));
}

#[test]
fn room_held_for_a_scale_up_domain_is_ranked_by_what_the_gang_may_use() {
    // Domain hA: nodes 0 to 3, of which the gang may use only 0 and 1 (both busy); 2 and
    // 3 are free but not `pool=a`. Domain hB: nodes 4 to 6, all `pool=a`, only node 6
    // free. hA has more free GPUs, but none the gang may use. Each node is its own leaf.
    let rows = (0..7).map(|i| kant::model::NodeRow {
        name: format!("node-{i}"),
        gpu_model: Some("H100".into()),
        gpus: 8,
        leaf: Some(kant::model::LeafPath {
            superspine: "ss".into(),
            spine: "s1".into(),
            leaf: format!("l{i}"),
        }),
        hbd: Some(if i < 4 { "hA" } else { "hB" }.to_string()),
        labels: [("pool".to_string(), "a".to_string())]
            .into_iter()
            .filter(|_| !matches!(i, 2 | 3))
            .collect(),
        ..Default::default()
    });
    let spec = nvlink_cluster(rows);
    let backfill = profile("default", Some(QueueingPolicy::Backfill), None);
    let mut s = scheduler(backfill, spec);
    let running = kant::framework::Adopted::Running { preemptible: true };
    for node in [0, 1, 4, 5] {
        s.adopt(
            job(node, 1, whole(8), 0, 0),
            &[Some(placement(node, 0xff, 1000))],
            0,
            running,
        )
        .unwrap();
    }
    let head = selecting(job(10, 2, whole(8), 0, 10), "pool", "a");
    s.submit(needing(head, Tier::Hbd, true));
    assert!(placed_jobs(&s.schedule(10_000)).is_empty());
    let overdue = 10_000 + 30 * MINUTE_MS;
    assert!(placed_jobs(&s.schedule(overdue)).is_empty());
    // The head holds hB, where node 6 drains towards it: a later job of its priority
    // that could take node 6 does not.
    s.submit(selecting(job(11, 1, whole(8), 0, 2_000), "pool", "a"));
    assert!(placed_jobs(&s.schedule(2_000_000)).is_empty());
}

#[test]
fn room_held_for_a_gang_that_requires_a_scale_up_domain_is_in_one() {
    // Scale-up domain hA spans nodes 0 and 1, in leaves l1 and l2; nodes 2 and 3 fill
    // those leaves; leaf l0 (nodes 4 and 5) has no domain. Nodes 0 to 3 are busy.
    let places = [
        ("l1", true),
        ("l2", true),
        ("l1", false),
        ("l2", false),
        ("l0", false),
        ("l0", false),
    ];
    let rows = places
        .into_iter()
        .enumerate()
        .map(|(i, (leaf, hbd))| kant::model::NodeRow {
            name: format!("node-{i}"),
            gpu_model: Some("H100".into()),
            gpus: 8,
            leaf: Some(kant::model::LeafPath {
                superspine: "ss".into(),
                spine: "s1".into(),
                leaf: leaf.into(),
            }),
            hbd: hbd.then(|| "hA".to_string()),
            ..Default::default()
        });
    let spec = nvlink_cluster(rows);
    let backfill = profile("default", Some(QueueingPolicy::Backfill), None);
    let mut s = scheduler(backfill, spec);
    let running = kant::framework::Adopted::Running { preemptible: true };
    for node in 0..4 {
        s.adopt(
            job(node, 1, whole(8), 0, 0),
            &[Some(placement(node, 0xff, 1000))],
            0,
            running,
        )
        .unwrap();
    }
    s.submit(needing(job(10, 2, whole(8), 0, 10), Tier::Hbd, true));
    assert!(placed_jobs(&s.schedule(10_000)).is_empty());
    let overdue = 10_000 + 30 * MINUTE_MS;
    assert!(placed_jobs(&s.schedule(overdue)).is_empty());
    // The head holds its domain's leaves, not the free leaf it could never use: later jobs
    // of its priority take that leaf.
    s.submit(job(11, 1, whole(8), 0, 2_000));
    s.submit(job(12, 1, whole(8), 0, 2_000));
    assert_eq!(placed_jobs(&s.schedule(2_000_000)), [JobId(11), JobId(12)]);
}
