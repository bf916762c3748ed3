//! Scheduling scenarios through the public scheduler: device choice, gangs, queueing
//! policies, packing, binding failures and the invariants under random workloads.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use common::*;
use kant::cache::{ClusterState, PlacementPhase};
use kant::config::{Config, Placement};
use kant::framework::{Decision, Scheduler, SearchMode};
use kant::model::{
    ClusterSpec, ClusterSpecBuilder, GpuRequest, Job, JobId, JobKind, LeafPath, LinkClass,
    LinkProfile, MILLI_PER_GPU, NodeId, NodeRow, PodIdentity, PodRequest, PodRules, TenantId, bits,
};
use kant::plugins::{ZoneConfig, build_profile};
use kant::queue::{QueueingPolicy, TenantConfig, TenantMode, Tenants};
use proptest::prelude::*;

#[test]
fn two_gpu_pod_takes_an_nvlink_pair() {
    let spec = cluster(1, 8, 1, LinkProfile::NvlinkPairs);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(0, 1, whole(1), 0, 0));
    s.submit(job(1, 1, whole(2), 0, 1));
    let decisions = s.schedule(0);
    assert_eq!(placed_jobs(&decisions), [JobId(0), JobId(1)]);
    for (_, placed) in s.state().placements() {
        let class = s.state().link_class_of(&placed.placement);
        assert_eq!(class, LinkClass::NvLink, "{placed:?}");
        assert_eq!(placed.phase, PlacementPhase::Bound);
    }
    // The lone GPU did not break a pair that the 2-GPU pod could have used: after both,
    // three NVLink pairs minus one are still whole.
    let node = s.state().node(NodeId(0));
    assert_eq!(node.free_whole_count(), 5);
}

#[test]
fn gang_is_placed_whole_or_not_at_all() {
    let spec = cluster(4, 8, 2, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(0, 1, whole(8), 0, 0));
    // 4 pods of 8 GPUs need all four nodes; one is taken, so nothing of it is placed.
    s.submit(job(1, 4, whole(8), 0, 1));
    // 3 pods of 8 fit on the three free nodes, across two leaf groups.
    s.submit(job(2, 3, whole(8), 0, 2));
    let decisions = s.schedule(0);
    assert_eq!(placed_jobs(&decisions), [JobId(0), JobId(2)]);
    let pods_of = |job: JobId| s.state().placements().filter(|(k, _)| k.job == job).count();
    assert_eq!(pods_of(JobId(1)), 0);
    assert_eq!(pods_of(JobId(2)), 3);
    assert_eq!(s.pending(), 1);
}

#[test]
fn strict_fifo_blocks_behind_its_head_and_best_effort_does_not() {
    for (policy, expected) in [
        (QueueingPolicy::StrictFifo, vec![JobId(0)]),
        (QueueingPolicy::BestEffortFifo, vec![JobId(0), JobId(2)]),
    ] {
        let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
        let mut s = scheduler(profile("default", Some(policy), None), spec);
        s.submit(job(0, 1, whole(8), 0, 0));
        s.submit(job(1, 2, whole(8), 0, 1)); // needs both nodes: blocked
        s.submit(job(2, 1, whole(4), 0, 2));
        assert_eq!(placed_jobs(&s.schedule(0)), expected, "{policy:?}");
        if policy == QueueingPolicy::StrictFifo {
            let message = s.diagnose(JobId(2), 0).expect("pending").message();
            assert_eq!(
                message,
                "waiting behind job-1 at the head of tenant default's queue (strict FIFO)"
            );
        }
        // Once the first job finishes, the head goes first in both policies.
        s.finish(JobId(0));
        let next = placed_jobs(&s.schedule(0));
        match policy {
            QueueingPolicy::StrictFifo => assert_eq!(next, [JobId(1)]),
            // Job 2 holds half a node, so the two-node gang still waits.
            _ => assert!(next.is_empty()),
        }
    }
}

#[test]
fn a_job_no_pool_can_hold_does_not_block_strict_fifo() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("native", None, None), spec);
    s.submit(job(0, 3, whole(8), 0, 0)); // 24 GPUs on a 16-GPU cluster: never
    s.submit(job(1, 1, whole(8), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(s.pending(), 1);
}

#[test]
fn a_gang_accepting_two_models_never_mixes_them() {
    let spec = models_cluster(&[("H100", 8), ("H100", 8), ("A100", 8), ("A100", 8)]);
    let mut s = scheduler(profile("default", None, None), spec.clone());
    let mut h100 = job(0, 1, whole(8), 0, 0);
    h100.pools = vec![kant::model::PoolId(0)];
    let mut other = job(1, 1, whole(8), 0, 0);
    other.pools = vec![kant::model::PoolId(1)];
    s.submit(h100);
    s.submit(other);
    s.schedule(0);
    // One H100 node and one A100 node are free: two nodes, but not of one model, so the
    // gang waits until a second node of one model frees.
    let mut gang = job(2, 2, whole(8), 0, 1);
    gang.pools = vec![kant::model::PoolId(0), kant::model::PoolId(1)];
    s.submit(gang);
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    s.finish(JobId(0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(2)]);
    let models: HashSet<_> = s
        .state()
        .placements()
        .filter(|(k, _)| k.job == JobId(2))
        .map(|(_, p)| spec.node(p.placement.node).pool)
        .collect();
    assert_eq!(models.len(), 1);
}

#[test]
fn a_gang_wider_than_a_mixed_pools_nodes_is_unresolvable_not_blocking() {
    // One 8-GPU node and four 4-GPU nodes: 24 GPUs, but only one node holds 8.
    let spec = models_cluster(&[
        ("V100", 8),
        ("V100", 4),
        ("V100", 4),
        ("V100", 4),
        ("V100", 4),
    ]);
    let mut s = scheduler(profile("native", None, None), spec);
    s.submit(job(0, 2, whole(8), 0, 0));
    s.submit(job(1, 1, whole(1), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    let diagnosis = s.diagnose(JobId(0), 0).expect("pending");
    assert!(
        diagnosis
            .message()
            .contains("can ever hold 2 pods of 8 GPUs"),
        "{}",
        diagnosis.message()
    );
}

#[test]
fn a_gang_is_judged_on_the_cpu_of_one_pool_at_a_time() {
    // An H100 node and an A100 node of 64 CPUs: each holds three pods of 1 GPU and 16.001
    // CPUs, six together, but a gang never mixes GPU models.
    let spec = models_cluster_with_cpu(&[("H100", 8), ("A100", 8)], Some(64_000));
    let strict = Some(QueueingPolicy::StrictFifo);
    let mut s = scheduler(profile("default", strict, None), spec);
    let either_model = |id, pods| {
        let mut gang = asking_cpu(job(id, pods, whole(1), 0, 0), 16_001);
        gang.pools = Vec::new();
        gang
    };
    s.submit(either_model(0, 4));
    s.submit(either_model(1, 3));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)], "behind job 0");
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert!(
        message.contains("hold at most 3 of its 4 pods of 1 GPUs at once in any one pool"),
        "{message}"
    );
}

#[test]
fn a_gang_whose_launcher_crowds_out_a_worker_on_every_node_is_unresolvable_not_blocking() {
    // Two nodes of 128 CPUs, no other: each holds one worker of 70 CPUs, and a launcher of
    // 60 CPUs leaves 68 beside it; one of 50 leaves 78.
    let gang = |id, launcher_cpu| {
        let mut gang = asking_cpu(job(id, 3, whole(1), 0, 0), 70_000);
        gang.pods[0] = PodRequest {
            cpu_milli: launcher_cpu,
            ..PodRequest::gpus(GpuRequest::NONE)
        };
        gang
    };
    let strict = Some(QueueingPolicy::StrictFifo);
    let mut s = scheduler(
        profile("default", strict, None),
        cluster(2, 8, 1, LinkProfile::NvlinkAll),
    );
    s.submit(gang(0, 60_000));
    s.submit(gang(1, 50_000));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)], "behind job 0");
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert!(
        message.contains("hold at most 1 of its 2 pods of 1 GPUs beside its launcher at once"),
        "{message}"
    );
}

#[test]
fn a_fractional_gang_its_devices_cannot_hold_is_unresolvable_not_blocking() {
    // Three devices hold 3 GPUs, but only three pods of 0.6 GPU: one per device.
    let spec = models_cluster(&[("H100", 3)]);
    let mut s = scheduler(profile("native", None, None), spec);
    s.submit(job(0, 4, GpuRequest::Fraction(600), 0, 0));
    s.submit(job(1, 3, GpuRequest::Fraction(600), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert!(
        message.contains("can ever hold 4 pods of 0.6 GPUs"),
        "{message}"
    );
}

#[test]
fn a_gang_with_a_launcher_fits_as_many_nodes_as_it_has_workers() {
    // One CPU-only launcher and two 8-GPU workers on two 8-GPU nodes.
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    let mut gang = job(0, 3, whole(8), 0, 0);
    gang.pods[0].gpu = GpuRequest::NONE;
    s.submit(gang);
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
}

/// Gangs whose pods differ (a launcher without GPUs, workers of two widths) span search
/// groups as alike pods do: here two leaves of one 8-GPU node each, on both searches.
#[test]
fn a_gang_of_differing_pods_spans_groups() {
    let widths: [&[u32]; 3] = [&[0, 8, 8], &[8, 8, 0], &[4, 8, 4]];
    for search in [SearchMode::Flat, SearchMode::TwoLevel] {
        for pods in widths {
            let spec = cluster(2, 8, 1, LinkProfile::NvlinkAll);
            let mut s = scheduler(profile("default", None, Some(search)), spec);
            let mut gang = job(0, pods.len(), whole(8), 0, 0);
            for (pod, &gpus) in gang.pods.iter_mut().zip(pods) {
                pod.gpu = GpuRequest::Whole(gpus);
            }
            s.submit(gang);
            assert_eq!(
                placed_jobs(&s.schedule(0)),
                [JobId(0)],
                "{search:?}, pods of {pods:?} GPUs"
            );
        }
    }
}

/// A running job of one pod, placed by someone else on `node`'s `devices`, `milli_each`
/// on each.
fn adopt(s: &mut Scheduler, id: u32, gpu: GpuRequest, node: u32, devices: u32, milli_each: u32) {
    let placed = placement(node, devices, milli_each);
    let running = kant::framework::Adopted::Running { preemptible: true };
    s.adopt(job(id, 1, gpu, 0, 0), &[Some(placed)], 0, running)
        .unwrap();
}

/// A gang of pods of several widths that each pod's best node cannot hold, but another
/// arrangement can: 3 + 2 + 2 + 2 GPUs on nodes with 4 and 5 free (the 3 on the 4 leaves
/// the 2s three GPUs and one). It is placed, in one group or across two.
#[test]
fn a_gang_of_several_widths_is_placed_where_only_another_arrangement_holds_it() {
    for search in [SearchMode::TwoLevel, SearchMode::Flat] {
        for nodes_per_group in [1, 2] {
            let spec = cluster(2, 8, nodes_per_group, LinkProfile::NvlinkAll);
            let mut s = scheduler(profile("default", None, Some(search)), spec);
            adopt(&mut s, 1, whole(4), 0, 0x0f, 1000);
            adopt(&mut s, 2, whole(3), 1, 0x07, 1000);
            let mut gang = job(0, 4, whole(2), 0, 0);
            gang.pods[1].gpu = whole(3);
            s.submit(gang);
            assert_eq!(
                placed_jobs(&s.schedule(0)),
                [JobId(0)],
                "{search:?}, {nodes_per_group} node(s) per group"
            );
            assert_eq!(s.state().total().free_gpus, 0);
        }
    }
}

/// A binder that answers `Wait`: the world reports the outcome later.
struct LaterBinder;

impl kant::framework::Plugin for LaterBinder {
    fn name(&self) -> &'static str {
        "later-binder"
    }
}

impl kant::framework::Bind for LaterBinder {
    fn bind(&self, _: &kant::model::Job, _: &kant::framework::JobPlan) -> kant::framework::Status {
        kant::framework::Status::new(kant::framework::Code::Wait, "binding in flight")
    }
}

#[test]
fn a_binding_in_flight_stays_assumed_until_the_world_confirms_it() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let mut s = Scheduler::new(profile("default", None, None), Box::new(LaterBinder), spec);
    s.submit(job(0, 2, whole(4), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
    let phases = |s: &Scheduler| -> Vec<PlacementPhase> {
        s.state().placements().map(|(_, p)| p.phase).collect()
    };
    assert_eq!(phases(&s), [PlacementPhase::Assumed; 2]);
    s.bound(JobId(0)).expect("the job is placed");
    assert_eq!(phases(&s), [PlacementPhase::Bound; 2]);
    assert!(s.bound(JobId(7)).is_err(), "an unknown job is not bound");
}

#[test]
fn priority_goes_before_submission_order() {
    let spec = cluster(1, 8, 1, LinkProfile::NvlinkAll);
    let mut s = scheduler(
        profile("default", Some(QueueingPolicy::StrictFifo), None),
        spec,
    );
    s.submit(job(0, 1, whole(8), 0, 0));
    s.submit(job(1, 1, whole(8), 10, 5));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
}

#[test]
fn binpack_fills_a_node_spread_balances() {
    for (name, expected_nodes) in [("default", 1), ("native", 2)] {
        let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
        let mut s = scheduler(profile(name, None, None), spec);
        s.submit(job(0, 1, whole(2), 0, 0));
        s.submit(job(1, 1, whole(2), 0, 1));
        s.schedule(0);
        let nodes: HashSet<NodeId> = s
            .state()
            .placements()
            .map(|(_, p)| p.placement.node)
            .collect();
        assert_eq!(nodes.len(), expected_nodes, "profile {name}");
    }
}

#[test]
fn fractions_share_a_device_exactly() {
    let spec = cluster(1, 1, 1, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    for (id, milli) in [(0, 100), (1, 200), (2, 700), (3, 1)] {
        s.submit(job(id, 1, GpuRequest::Fraction(milli), 0, u64::from(id)));
    }
    // 0.1 + 0.2 + 0.7 fill the device exactly; the milli-GPU left over does not fit.
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0), JobId(1), JobId(2)]);
    assert_eq!(s.state().total().used_milli, u64::from(MILLI_PER_GPU));
}

#[test]
fn a_fraction_fills_a_shared_device_before_it_breaks_a_whole_gpu() {
    use kant::config::Placement as Strategy;
    for search in [SearchMode::TwoLevel, SearchMode::Flat] {
        for strategy in [Strategy::EBinpack, Strategy::Binpack] {
            let config = profile_config("default", None, Some(search)).with_placement(strategy);
            let mut s = scheduler(build(&config), cluster(2, 8, 2, LinkProfile::NvlinkAll));
            // Node 0: half of device 0 used. Node 1, busier: two whole GPUs.
            adopt(&mut s, 1, GpuRequest::Fraction(500), 0, 0b1, 500);
            adopt(&mut s, 2, whole(2), 1, 0b11, 1000);
            s.submit(job(3, 1, GpuRequest::Fraction(300), 0, 0));
            assert_eq!(placed_jobs(&s.schedule(0)), [JobId(3)]);
            let placed = s.state().placements().find(|(k, _)| k.job == JobId(3));
            let at = placed.map(|(_, p)| (p.placement.node, p.placement.gpus.devices));
            assert_eq!(at, Some((NodeId(0), 0b1)), "{search:?} {strategy:?}");
            assert_eq!(s.state().total().free_gpus, 13, "no whole GPU broken");
        }
    }
}

/// Across leaf groups too: a fraction goes to the group with a shared device it fits on,
/// not to one busier with pods that share their nodes, where it would break a whole GPU.
#[test]
fn a_fraction_seeks_a_shared_device_in_another_group() {
    let mut s = scheduler(
        profile("default", None, None),
        cluster(2, 8, 1, LinkProfile::NvlinkAll),
    );
    // Node 0 (leaf 0): a device half used. Node 1 (leaf 1), busier: two whole GPUs.
    adopt(&mut s, 1, GpuRequest::Fraction(500), 0, 0b1, 500);
    adopt(&mut s, 2, whole(2), 1, 0b11, 1000);
    // 0.5 fits the half-used device; 0.6 does not, and goes where the group is busier.
    s.submit(job(3, 1, GpuRequest::Fraction(500), 0, 0));
    s.submit(job(4, 1, GpuRequest::Fraction(600), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(3), JobId(4)]);
    let at = |job: JobId| {
        let (_, placed) = s.state().placements().find(|(k, _)| k.job == job).unwrap();
        (placed.placement.node, placed.placement.gpus.devices)
    };
    assert_eq!(at(JobId(3)), (NodeId(0), 0b1));
    assert_eq!(at(JobId(4)).0, NodeId(1));
}

/// A fraction's room on a shared device is judged exactly when ranking groups: 0.33 goes
/// to the device with 0.4 free in the other group, not beside one with 0.3 free (same
/// tenth), where it would break the node's whole GPU.
#[test]
fn a_fraction_does_not_take_a_shared_device_a_little_too_small_for_room() {
    use kant::config::Placement as Strategy;
    let node = |i: usize, gpus: usize| NodeRow {
        name: format!("node-{i}"),
        gpu_model: Some("H100".into()),
        gpus,
        leaf: Some(LeafPath {
            superspine: "ss".into(),
            spine: "spine".into(),
            leaf: format!("leaf-{i}"),
        }),
        ..Default::default()
    };
    for strategy in [Strategy::EBinpack, Strategy::ESpread] {
        let config = profile_config("default", None, None).with_placement(strategy);
        let mut s = scheduler(build(&config), nvlink_cluster([node(0, 2), node(1, 1)]));
        // Node 0 (leaf 0): 0.3 free on device 0, device 1 whole. Node 1 (leaf 1): 0.4 free.
        adopt(&mut s, 1, GpuRequest::Fraction(700), 0, 0b1, 700);
        adopt(&mut s, 2, GpuRequest::Fraction(600), 1, 0b1, 600);
        let kind = JobKind::Inference;
        s.submit(Job {
            kind,
            ..job(3, 1, GpuRequest::Fraction(330), 0, 0)
        });
        assert_eq!(placed_jobs(&s.schedule(0)), [JobId(3)]);
        let placed = s.state().placements().find(|(k, _)| k.job == JobId(3));
        let at = placed.map(|(_, p)| (p.placement.node, p.placement.gpus.devices));
        assert_eq!(at, Some((NodeId(1), 0b1)), "{strategy:?}");
        assert_eq!(s.state().total().free_gpus, 1, "no whole GPU broken");
    }
}

#[test]
fn a_failed_binding_forgets_every_pod_and_requeues_the_job() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let mut s = Scheduler::new(
        profile("default", None, None),
        Box::new(TestBinder { refuse: true }),
        spec.clone(),
    );
    s.submit(job(0, 2, whole(8), 0, 0));
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    assert_eq!(s.state().placed_pods(), 0);
    assert_eq!(s.state().total().free_gpus, 16);
    assert_eq!(s.pending(), 1);
}

#[test]
fn unschedulable_job_is_explained_in_kube_scheduler_words() {
    let spec = cluster(3, 8, 3, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(0, 1, whole(4), 0, 0));
    s.submit(job(1, 1, whole(8), 0, 1));
    s.submit(job(2, 1, whole(8), 0, 2));
    s.submit(job(3, 1, whole(8), 0, 3));
    s.schedule(0);
    let diagnosis = s.diagnose(JobId(3), 0).expect("job 3 is pending");
    assert_eq!(
        diagnosis.message(),
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    );
}

#[test]
fn flat_and_two_level_searches_agree_on_feasibility() {
    for search in [SearchMode::Flat, SearchMode::TwoLevel] {
        let spec = cluster(6, 8, 2, LinkProfile::NvlinkAll);
        let mut s = scheduler(profile("default", None, Some(search)), spec);
        s.submit(job(0, 5, whole(8), 0, 0));
        s.submit(job(1, 2, whole(4), 0, 1));
        s.submit(job(2, 1, whole(8), 0, 2));
        assert_eq!(
            placed_jobs(&s.schedule(0)),
            [JobId(0), JobId(1)],
            "{search:?}"
        );
    }
}

/// No device past capacity, no whole GPU shared, every placed job complete.
fn assert_invariants(
    state: &ClusterState,
    placed: &HashSet<JobId>,
    pods_of: &dyn Fn(JobId) -> usize,
) {
    let mut used = std::collections::HashMap::new();
    let mut per_job = std::collections::HashMap::new();
    for (key, placed_pod) in state.placements() {
        *per_job.entry(key.job).or_insert(0usize) += 1;
        let p = placed_pod.placement;
        for d in bits(p.gpus.devices) {
            let entry: &mut (u32, bool) = used.entry((p.node, d)).or_default();
            assert!(!entry.1, "a whole GPU shared");
            entry.0 += p.gpus.milli_each;
            entry.1 |= p.gpus.milli_each == MILLI_PER_GPU;
            assert!(entry.0 <= MILLI_PER_GPU, "device past capacity");
        }
    }
    for (job, count) in &per_job {
        assert!(placed.contains(job));
        assert_eq!(*count, pods_of(*job), "gang {job:?} partly placed");
    }
}

proptest! {
    // Few random cases need another arrangement than the greedy one: many are tried.
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(1000)))]
    /// A gang of pods of several widths is placed whenever some arrangement of its pods
    /// fits the nodes' free GPUs (one group of all-NVLink nodes, so only the counts
    /// matter). Each case is made from such an arrangement: each pod's node, and a few GPUs
    /// free beyond it on each node.
    #[test]
    fn a_gang_of_several_widths_is_placed_whenever_it_fits(
        pods in proptest::collection::vec((1u32..6, 0usize..4), 3..9),
        slack in proptest::collection::vec(0u32..2, 2..5),
        two_level in any::<bool>(),
    ) {
        // Each pod on its node, or the next with room for it, or left out.
        let mut free = slack.clone();
        let mut widths = Vec::new();
        for &(gpus, node) in &pods {
            let room = (0..free.len()).map(|i| (node + i) % free.len()).find(|&n| free[n] + gpus <= 8);
            if let Some(n) = room {
                free[n] += gpus;
                widths.push(gpus);
            }
        }
        prop_assume!(widths.len() > 1);
        let spec = cluster(free.len(), 8, free.len(), LinkProfile::NvlinkAll);
        let search = if two_level { SearchMode::TwoLevel } else { SearchMode::Flat };
        let mut s = scheduler(profile("default", None, Some(search)), spec);
        for (node, &f) in free.iter().enumerate() {
            if f < 8 {
                adopt(&mut s, 100 + node as u32, whole(8 - f), node as u32, (1 << (8 - f)) - 1, 1000);
            }
        }
        let mut gang = job(0, widths.len(), whole(1), 0, 0);
        for (pod, &gpus) in gang.pods.iter_mut().zip(&widths) {
            pod.gpu = whole(gpus);
        }
        s.submit(gang);
        prop_assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(48)))]
    #[test]
    fn random_workloads_keep_gangs_whole_and_devices_single(
        jobs in proptest::collection::vec((1usize..6, prop_oneof![Just(0u32), 1u32..9], 0u32..1000, any::<bool>()), 1..40),
        two_level in any::<bool>(),
        nodes in 1usize..10,
        gpus in prop_oneof![Just(2usize), Just(4), Just(8), Just(16)],
        per_leaf in 1usize..5,
        pairs in any::<bool>(),
    ) {
        // A random cluster: its size, node width, leaf groups and link layout.
        let links = if pairs { LinkProfile::NvlinkPairs } else { LinkProfile::Pcie };
        let spec = cluster(nodes, gpus, per_leaf, links);
        let search = if two_level { SearchMode::TwoLevel } else { SearchMode::Flat };
        let mut s = scheduler(profile("default", None, Some(search)), spec);
        let mut placed = HashSet::new();
        let mut sizes = Vec::new();
        for (i, &(pods, gpus, milli, finish_one)) in jobs.iter().enumerate() {
            let request = if gpus == 0 { GpuRequest::Fraction(milli.max(1)) } else { GpuRequest::Whole(gpus) };
            let pods = if gpus == 0 { 1 } else { pods };
            sizes.push(pods);
            s.submit(job(i as u32, pods, request, 0, i as u64));
            for id in placed_jobs(&s.schedule(0)) {
                placed.insert(id);
            }
            if finish_one && let Some(&done) = placed.iter().min() {
                s.finish(done);
                placed.remove(&done);
            }
            assert_invariants(s.state(), &placed, &|j: JobId| sizes[j.index()]);
        }
    }
}

/// 16 `H100` nodes of 8 GPUs, `per_leaf` to a leaf, and 8 `A100` nodes, 4 to a leaf; two
/// leaves to a spine. Nodes are named `node-0000`, ... (the `H100` ones first), and
/// labelled with their name (`host`) and a zone of three leaves (`zone`).
fn two_models(per_leaf: usize) -> Arc<ClusterSpec> {
    let mut builder = ClusterSpecBuilder::new();
    for i in 0..24 {
        let (model, leaf) = match i < 16 {
            true => ("H100", i / per_leaf),
            false => ("A100", 100 + (i - 16) / 4),
        };
        let row = NodeRow {
            name: format!("node-{i:04}"),
            gpu_model: Some(model.into()),
            gpus: 8,
            leaf: Some(LeafPath {
                superspine: "ss".into(),
                spine: format!("spine-{}", leaf / 2),
                leaf: format!("leaf-{leaf}"),
            }),
            labels: [
                ("host".to_owned(), format!("node-{i:04}")),
                ("zone".to_owned(), format!("zone-{}", leaf / 3)),
            ]
            .into(),
            ..Default::default()
        };
        builder
            .add(row, LinkProfile::NvlinkAll)
            .expect("valid test node");
    }
    Arc::new(builder.build())
}

/// Replays `jobs` (in submission order) on the scheduler, a round at each submission,
/// completion and wake-up it asks for; returns every decision with its time.
fn replay_decisions(mut s: Scheduler, jobs: &[Job]) -> Vec<String> {
    let mut decisions = Vec::new();
    let mut ends: BTreeSet<(u64, JobId)> = BTreeSet::new();
    let mut next = 0;
    let mut wake = None;
    loop {
        let arrival = jobs.get(next).map(|j| j.submit_ms);
        let end = ends.first().map(|&(t, _)| t);
        let wake_up = wake.filter(|_| arrival.is_some() || end.is_some());
        let Some(now) = [arrival, end, wake_up].into_iter().flatten().min() else {
            break;
        };
        while let Some(&(t, job)) = ends.first().filter(|&&(t, _)| t == now) {
            ends.remove(&(t, job));
            s.finish(job);
        }
        while jobs.get(next).is_some_and(|j| j.submit_ms == now) {
            s.submit(jobs[next].clone());
            next += 1;
        }
        for decision in s.schedule(now) {
            if let Decision::Placed { job, .. } = &decision {
                let duration = jobs[job.index()].duration_ms.expect("a duration");
                ends.insert((now + duration, *job));
            }
            decisions.push(format!("{now}: {decision:?}"));
        }
        wake = s.next_retry_ms(now).filter(|&t| t > now);
    }
    decisions
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(1000)))]
    /// A search that found nothing is repeated only once room comes back where it could
    /// place the job: skipping the others changes no decision. Gangs hold out for one leaf
    /// or spine, backfill heads hold room, jobs of two priorities and three tenants (one
    /// isolated) compete over two GPU models, some accepting either, and inference
    /// replicas spread over an E-Spread zone (the first leaf; training takes it last where
    /// it allows training), on spines of leaves. Some pods keep others out of their node or
    /// zone by anti-affinity.
    #[test]
    fn skipping_fruitless_searches_changes_no_decision(
        jobs in proptest::collection::vec(
            (0u64..8 * 3600, 600u64..4 * 3600, prop_oneof![Just(1usize), 2usize..10], 0usize..5, any::<bool>(), any::<bool>(), 0usize..4, 0usize..3, 0u16..3, 0usize..6),
            1..60,
        ),
        queueing in prop_oneof![Just(QueueingPolicy::Backfill), Just(QueueingPolicy::BestEffortFifo), Just(QueueingPolicy::StrictFifo)],
        per_leaf in 2usize..5,
        zone in any::<bool>(),
        allow_training in any::<bool>(),
        flat in any::<bool>(),
    ) {
        let spec = two_models(per_leaf);
        let h100 = spec.pool_of_model(Some("H100")).expect("an H100 pool");
        let a100 = spec.pool_of_model(Some("A100")).expect("an A100 pool");
        let mut jobs: Vec<Job> = jobs
            .iter()
            .map(|&(submit_s, duration_s, pods, width, high, inference, first, pools, tenant, rules)| {
                let gpu = match (pods, width) {
                    (1, 0) => GpuRequest::Fraction(500),
                    (1, w) => whole(1 << (w - 1)),
                    _ => whole(8 >> (width % 4)),
                };
                let mut job = Job {
                    duration_ms: Some(duration_s * 1000),
                    kind: if inference { JobKind::Inference } else { JobKind::Train },
                    pools: [vec![h100], vec![a100], vec![h100, a100]][pools].clone(),
                    tenant: TenantId(tenant),
                    ..job(0, pods, gpu, if high { 10 } else { 0 }, submit_s)
                };
                // A gang's first pod may ask otherwise: 2 GPUs, half a GPU, or none (a
                // launcher, with CPU).
                if pods > 1 {
                    job.pods[0] = match first {
                        1 => PodRequest::gpus(whole(2)),
                        2 => PodRequest::gpus(GpuRequest::Fraction(500)),
                        3 => PodRequest { cpu_milli: 1_000, ..PodRequest::gpus(GpuRequest::NONE) },
                        _ => job.pods[0],
                    };
                }
                // Pods labelled `app: batch`, kept out of the node or zone of pods whose
                // anti-affinity selects them.
                let anti = match rules {
                    4 => vec![term("batch", "host")],
                    5 => vec![term("batch", "zone")],
                    _ => Vec::new(),
                };
                if rules >= 3 {
                    job.pod_rules = Some(Arc::new(PodRules {
                        identity: PodIdentity {
                            namespace: "ml".into(),
                            labels: [("app".to_owned(), if rules == 3 { "batch" } else { "web" }.to_owned())].into(),
                        },
                        anti_affinity: anti,
                        ..PodRules::default()
                    }));
                }
                job
            })
            .collect();
        jobs.sort_by_key(|j| j.submit_ms);
        for (id, job) in jobs.iter_mut().enumerate() {
            job.id = JobId(id as u32);
        }
        let config = Config::embedded();
        let search = if flat { SearchMode::Flat } else { SearchMode::TwoLevel };
        let mut profile = profile_config("default", Some(queueing), Some(search));
        if zone {
            profile = profile.with_placement(Placement::ESpread);
            profile.inference_zone = Some(ZoneConfig {
                nodes: (0..per_leaf).map(|i| format!("node-{i:04}")).collect(),
                allow_training,
                ..Default::default()
            });
        }
        let profile = build_profile(&profile, &config).expect("valid profile");
        let quota = |h100: i64, a100: i64| {
            BTreeMap::from([("H100".to_owned(), h100), ("A100".to_owned(), a100)])
        };
        let tenants = [("shared", TenantMode::Shared, quota(64, 16)), ("isolated", TenantMode::Isolated, quota(32, 24))]
            .map(|(name, mode, quota)| TenantConfig { name: name.into(), mode, weight: 1.0, quota });
        let tenants = Tenants::resolve(&tenants, &spec).expect("valid tenants");
        let scheduler = || {
            let binder = Box::new(TestBinder { refuse: false });
            Scheduler::with_tenants(profile.clone(), binder, spec.clone(), tenants.clone())
        };
        let mut searching_every_time = scheduler();
        searching_every_time.repeat_every_search();
        let skipping = replay_decisions(scheduler(), &jobs);
        prop_assert_eq!(skipping, replay_decisions(searching_every_time, &jobs));
    }
}
