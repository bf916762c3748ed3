//! Searches skipped while no room came back where they could use it: cases where room
//! comes back outside what the groups' aggregates tell (a launcher's node, a domain an
//! anti-affinity kept a job out of, a fraction's node in a search across groups). Each
//! job is placed as soon as searching it again would place it, as when every search is
//! repeated.

mod common;

use std::sync::Arc;

use common::*;
use kant::framework::{Decision, Scheduler};
use kant::model::{
    ClusterSpec, ClusterSpecBuilder, GpuRequest, Job, JobId, LeafPath, LinkProfile, NodeRow,
    PodAffinityTerm, PodIdentity, PodRequest, PodRules, Tier, TopologyNeed,
};

fn row(name: &str, model: Option<&str>, gpus: usize, cpu: u64, leaf: &str, zone: &str) -> NodeRow {
    NodeRow {
        name: name.into(),
        gpu_model: model.map(Into::into),
        gpus,
        cpu_milli: Some(cpu),
        memory_bytes: Some(1 << 40),
        leaf: Some(LeafPath {
            superspine: "ss".into(),
            spine: "sp".into(),
            leaf: leaf.into(),
        }),
        labels: [("zone".to_owned(), zone.to_owned())].into(),
        ..Default::default()
    }
}

fn spec(rows: Vec<NodeRow>) -> Arc<ClusterSpec> {
    let mut b = ClusterSpecBuilder::new();
    for r in rows {
        b.add(r, LinkProfile::NvlinkAll).unwrap();
    }
    Arc::new(b.build())
}

fn sched(spec: &Arc<ClusterSpec>, every: bool) -> Scheduler {
    let mut s = scheduler(profile("default", None, None), spec.clone());
    if every {
        s.repeat_every_search();
    }
    s
}

fn placed(decisions: &[Decision]) -> Vec<JobId> {
    placed_jobs(decisions)
}

/// `run` places `job` in its last round both searching every time and skipping.
fn placed_both_ways(run: fn(bool) -> Vec<JobId>, job: u32) {
    for every in [true, false] {
        assert_eq!(run(every), [JobId(job)], "searching every time: {every}");
    }
}

/// A gang's launcher (a pod without GPUs) may go to any node of the cluster; room coming
/// back for it on a CPU-only node (outside the gang's pools) is never read.
fn launcher_run(every: bool) -> Vec<JobId> {
    let spec = spec(vec![
        row("gpu-0", Some("H100"), 8, 8_000, "leaf-0", "a"),
        row("cpu-0", None, 0, 2_000, "leaf-1", "a"),
    ]);
    let h100 = spec.pool_of_model(Some("H100")).unwrap();
    let cpu = spec.pool_of_model(None).unwrap();
    let mut s = sched(&spec, every);
    // A CPU-only job filling the CPU node.
    let mut c = Job::new(
        JobId(0),
        vec![PodRequest {
            cpu_milli: 2_000,
            ..PodRequest::gpus(GpuRequest::NONE)
        }],
    );
    c.pools = vec![cpu];
    s.submit(c);
    assert_eq!(placed(&s.schedule(0)), [JobId(0)]);
    // A gang: an 8-GPU worker taking all of gpu-0's CPU, and a launcher.
    let mut x = Job::new(
        JobId(1),
        vec![
            PodRequest {
                cpu_milli: 8_000,
                ..PodRequest::gpus(GpuRequest::Whole(8))
            },
            PodRequest {
                cpu_milli: 1_000,
                ..PodRequest::gpus(GpuRequest::NONE)
            },
        ],
    );
    x.pools = vec![h100];
    s.submit(x);
    assert!(
        placed(&s.schedule(1)).is_empty(),
        "the launcher fits nowhere"
    );
    s.finish(JobId(0));
    placed(&s.schedule(2))
}

#[test]
fn a_launcher_may_use_room_outside_its_gangs_pools() {
    placed_both_ways(launcher_run, 1);
}

fn app(id: u32, gpus: u32, name: &str, anti: Vec<PodAffinityTerm>) -> Job {
    let mut j = job(id, 1, GpuRequest::Whole(gpus), 0, u64::from(id));
    j.pod_rules = Some(Arc::new(PodRules {
        identity: PodIdentity {
            namespace: "ml".into(),
            labels: [("app".to_owned(), name.to_owned())].into(),
        },
        anti_affinity: anti,
        ..PodRules::default()
    }));
    j
}

/// An existing pod's anti-affinity keeps a job out of a whole zone (several groups); when
/// it goes, only its own node's group is logged.
fn anti_run(every: bool) -> Vec<JobId> {
    let spec = spec(vec![
        row("n0", Some("H100"), 8, 128_000, "leaf-0", "a"),
        row("n1", Some("H100"), 8, 128_000, "leaf-1", "b"),
        row("n2", Some("H100"), 8, 128_000, "leaf-2", "a"),
    ]);
    let mut s = sched(&spec, every);
    // n0 holds a 7-GPU job and the 1-GPU one keeping `batch` pods out of zone a; n1 is full.
    s.submit(app(1, 7, "web", vec![]));
    s.submit(app(2, 1, "noisy", vec![term("batch", "zone")]));
    s.submit(app(3, 8, "web", vec![]));
    assert_eq!(placed(&s.schedule(0)), [JobId(1), JobId(2), JobId(3)]);
    let node_of = |s: &Scheduler, j: u32| {
        let node = s.state().job_nodes(JobId(j)).next().expect("placed");
        s.state().spec().node(node).name.clone()
    };
    assert_eq!(
        [node_of(&s, 1), node_of(&s, 2), node_of(&s, 3)],
        ["n0", "n0", "n1"]
    );
    s.submit(app(4, 8, "batch", vec![]));
    assert!(placed(&s.schedule(1)).is_empty(), "n2 is in zone a");
    // Its going leaves a GPU free on n0 alone, and all of n2 (another group) open.
    s.finish(JobId(2));
    placed(&s.schedule(2))
}

#[test]
fn a_pod_whose_anti_affinity_kept_a_job_out_of_a_zone_frees_the_whole_zone() {
    placed_both_ways(anti_run, 4);
}

/// The flat search places a gang's fractional pod on any node of its pool; room for it in
/// a group that holds no whole-GPU pod is judged of no use.
fn flat_fraction_run(every: bool) -> Vec<JobId> {
    let spec = spec(vec![
        row("n0", Some("H100"), 8, 128_000, "leaf-0", "a"),
        row("n1", Some("H100"), 8, 128_000, "leaf-1", "a"),
        row("n2", Some("H100"), 8, 128_000, "leaf-2", "a"),
    ]);
    let mut s = scheduler(
        profile("default", None, Some(kant::framework::SearchMode::Flat)),
        spec.clone(),
    );
    if every {
        s.repeat_every_search();
    }
    let running = kant::framework::Adopted::Running { preemptible: false };
    for (id, node, devices, milli) in [
        (1, 0, 0b1111_1110, 1000),
        (2, 0, 1, 700),
        (3, 1, 0b1111_1110, 1000),
        (4, 1, 1, 700),
    ] {
        let gpu = if milli == 1000 {
            GpuRequest::Whole(7)
        } else {
            GpuRequest::Fraction(milli)
        };
        s.adopt(
            job(id, 1, gpu, 0, 0),
            &[Some(placement(node, devices, milli))],
            0,
            running,
        )
        .unwrap();
    }
    let mut x = job(5, 2, GpuRequest::Whole(8), 0, 1);
    x.pods[1] = PodRequest::gpus(GpuRequest::Fraction(500));
    s.submit(x);
    assert!(
        placed(&s.schedule(1)).is_empty(),
        "no device has half a GPU free"
    );
    // 0.7 of n0's last GPU comes back: no whole pod fits there, the fraction does.
    s.finish(JobId(2));
    placed(&s.schedule(2))
}

#[test]
fn a_gangs_fraction_may_use_a_group_holding_none_of_its_whole_pods() {
    placed_both_ways(flat_fraction_run, 5);
}

/// A patient gang's widest tier is the tightest any of its searched pools could ever hold
/// it in: when its quota comes to admit it on fewer pools, the search may spread further
/// in those that are left, though the pools are a subset of the last search's.
fn narrowed_run(every: bool) -> Vec<JobId> {
    let spec = spec(vec![
        // H100: two leaves of one node under one spine: only the spine holds 2 x 8.
        row("a0", Some("H100"), 8, 128_000, "leaf-a0", "a"),
        row("a1", Some("H100"), 8, 128_000, "leaf-a1", "a"),
        // A100: a leaf of two nodes (the tightest tier over both pools is a leaf).
        row("b0", Some("A100"), 8, 128_000, "leaf-b0", "a"),
        row("b1", Some("A100"), 8, 128_000, "leaf-b0", "a"),
        row("b2", Some("A100"), 8, 128_000, "leaf-b1", "a"),
        row("b3", Some("A100"), 8, 128_000, "leaf-b2", "a"),
        // L40: elsewhere.
        row("c0", Some("L40"), 8, 128_000, "leaf-c0", "a"),
    ]);
    let h100 = spec.pool_of_model(Some("H100")).unwrap();
    let a100 = spec.pool_of_model(Some("A100")).unwrap();
    let l40 = spec.pool_of_model(Some("L40")).unwrap();
    let mut s = scheduler(
        profile(
            "default",
            Some(kant::queue::QueueingPolicy::BestEffortFifo),
            None,
        ),
        spec.clone(),
    );
    if every {
        s.repeat_every_search();
    }
    let single = |id: u32, pool| {
        let mut j = job(id, 1, GpuRequest::Whole(8), 0, 0);
        j.pools = vec![pool];
        j
    };
    // b0 taken: the A100 leaf of two nodes holds one free.
    s.submit(single(1, a100));
    s.submit(single(2, l40));
    assert_eq!(placed(&s.schedule(0)), [JobId(1), JobId(2)]);
    assert_eq!(
        s.state()
            .spec()
            .node(s.state().job_nodes(JobId(1)).next().unwrap())
            .name,
        "b0"
    );
    let mut gang = job(3, 2, GpuRequest::Whole(8), 0, 1);
    gang.pools = vec![h100, a100];
    s.submit(gang);
    assert!(
        placed(&s.schedule(1_000)).is_empty(),
        "holding out for a leaf (one A100 leaf could hold it)"
    );
    // The A100 pool fills: its quota no longer admits the gang there.
    s.submit(single(4, a100));
    s.submit(single(5, a100));
    assert_eq!(placed(&s.schedule(2_000)), [JobId(4), JobId(5)]);
    // Room comes back outside the gang's pools: it is offered again, admitted on H100 alone,
    // where the tightest tier that could ever hold it is the spine.
    s.finish(JobId(2));
    placed(&s.schedule(3_000))
}

#[test]
fn a_gang_admitted_on_fewer_pools_may_spread_further() {
    placed_both_ways(narrowed_run, 3);
}

/// A job requiring one scale-up domain leaves alone a domain partly in room held for a
/// backfill head; when the hold goes, the domain's other groups are of use to it again,
/// though the held groups themselves came back full (the head took them).
fn scale_up_domain_hold_run(every: bool) -> Vec<JobId> {
    let in_domain = |mut row: NodeRow| {
        row.hbd = Some("h0".into());
        row
    };
    let spec = spec(vec![
        row("a1", Some("H100"), 8, 128_000, "leaf-0", "a"),
        in_domain(row("a2", Some("H100"), 8, 128_000, "leaf-0", "a")),
        in_domain(row("b", Some("H100"), 8, 128_000, "leaf-1", "a")),
    ]);
    let mut s = sched(&spec, every);
    let needing = |mut job: Job, tier| {
        job.topology = Some(TopologyNeed {
            tier,
            required: true,
        });
        job
    };
    let running = kant::framework::Adopted::Running { preemptible: false };
    s.adopt(
        job(1, 1, GpuRequest::Whole(1), 0, 0),
        &[Some(placement(0, 1, 1000))],
        0,
        running,
    )
    .unwrap();
    // The head needs leaf-0 whole; past the threshold room is held for it there.
    s.submit(needing(job(2, 2, GpuRequest::Whole(8), 0, 10), Tier::Leaf));
    assert!(placed(&s.schedule(10_000)).is_empty());
    assert!(placed(&s.schedule(40 * 60_000)).is_empty());
    assert!(!s.reservations().is_empty(), "room held for the head");
    s.submit(needing(
        job(3, 1, GpuRequest::Whole(4), 0, 3_600),
        Tier::Hbd,
    ));
    assert!(
        placed(&s.schedule(3_600_000)).is_empty(),
        "h0 is partly held"
    );
    s.finish(JobId(1));
    placed(&s.schedule(7_200_000))
}

#[test]
fn a_hold_gone_opens_its_scale_up_domains_to_jobs_needing_one() {
    for every in [true, false] {
        assert_eq!(
            scale_up_domain_hold_run(every),
            [JobId(2), JobId(3)],
            "searching every time: {every}"
        );
    }
}
