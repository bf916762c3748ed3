//! Placement latency under the embedded default profile:
//!
//! - `gang_placement`: one gang of 256, 1,024 or 2,048 GPUs (pods of 8 GPUs) on 2,048
//!   nodes of 8 GPUs (16,384 GPUs, `common`'s cluster: 64 leaf groups of 32 nodes, 4
//!   leaves to a spine) filled to about 50%, placed by one `schedule()` round at one hour
//!   past its submission (its patience for a single leaf has run out, so the search may
//!   widen tier by tier: the slow path). No leaf group holds such a gang, so the search
//!   goes from the group aggregates to a domain.
//! - `held_to_a_dedicated_leaf`: on 12,512 nodes (100,096 GPUs, 391 leaf groups) filled to
//!   about 50%, a job of 4 or 32 pods of 8 GPUs that selects and tolerates the last leaf
//!   group, dedicated (labelled and tainted) and so left empty by the fill. The group
//!   aggregates count GPUs, not labels: the groups where none of its nodes may take the
//!   job (judged once per job) are passed by.
//! - `short_of_cpu`: candidate groups evaluated in parallel (the default rayon pool)
//!   against one at a time (`SearchOptions { parallel: false, .. }`), on the same 12,512
//!   nodes, each but the dedicated leaf's running a pod of 1 GPU and nearly all its CPU.
//!   A job of 4 or 32 pods of 4 GPUs and 16 cores, tolerating the dedicated leaf's taint,
//!   fits only there. The aggregates say every group may hold it, and the CPU left is
//!   known only node by node, so the groups ranked before the dedicated one (E-Binpack
//!   ranks an empty leaf last) are each tried and refuse it: the path where parallel
//!   evaluation has work to share.
//!
//! The fill to 50%: single-pod jobs of 1, 2, 4 and 8 GPUs in a fixed rotation up to 60%
//! of the GPUs, then every sixth of them finished, which leaves holes in partly used
//! nodes, as a busy cluster has. Each measured round submits the job, times `schedule()`,
//! checks every pod was placed, and finishes the job, which returns the scheduler to its
//! state before.
//!
//! Run: `cargo bench --bench gang_placement` (add `-- --quick` for a short run). The
//! machine is shared: compare figures side by side from one run, not across runs.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};

use kant::framework::{Scheduler, SearchMode, SearchOptions};
use kant::model::{ClusterSpec, Job, JobId, NodeConstraints};

const NODES: usize = 2_048;
const GANG_GPUS: [usize; 3] = [256, 1_024, 2_048];
const GANG_GPUS_PER_POD: u32 = 8;
const GANG_ID: u32 = 1_000_000;
const AN_HOUR_MS: u64 = 3_600_000;
/// The cases of a job kept to one leaf are measured at the mission's scale: 391 whole leaf
/// groups of 32 nodes, 100,096 GPUs.
const HELD_NODES: usize = 12_512;
const HELD_JOB_PODS: [usize; 2] = [4, 32];
/// CPU of a pod that takes nearly all of a node's 192 cores.
const CPU_HOG_MILLI: u64 = 190_000;
/// Each pod of the job short of CPU: 4 GPUs and more CPU than a node with a hog has left.
const SHORT_OF_CPU_GPUS: u32 = 4;
const SHORT_OF_CPU_MILLI: u64 = 16_000;

/// A scheduler on `spec` filled to about 50% with small jobs, with holes.
fn filled(spec: &Arc<ClusterSpec>, options: SearchOptions) -> Scheduler {
    let profile = common::default_profile(SearchMode::TwoLevel, options);
    let mut scheduler = common::scheduler(&profile, spec);
    let target = u64::from(common::gpus_at_percent(spec, 60));
    let mut gpus = 0u64;
    let mut id = 0u32;
    while gpus < target {
        let size = [1, 2, 4, 8][id as usize % 4];
        scheduler.submit(common::job(id, 1, size));
        gpus += u64::from(size);
        id += 1;
    }
    let decisions = scheduler.schedule(0);
    assert_eq!(
        common::placed_pods(&decisions),
        id as usize,
        "the fill did not fit"
    );
    for done in (0..id).step_by(6) {
        scheduler.finish(JobId(done));
    }
    scheduler
}

/// Times `schedule()` at `now_ms` for `job`, submitted afresh in each iteration, checks
/// that all its pods were placed, and finishes it.
fn time_placement(scheduler: &mut Scheduler, job: &Job, now_ms: u64, iters: u64) -> Duration {
    let placed_before = scheduler.state().placed_pods();
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        scheduler.submit(job.clone());
        let start = Instant::now();
        let decisions = scheduler.schedule(now_ms);
        total += start.elapsed();
        assert_eq!(common::placed_pods(&decisions), job.pods.len());
        common::release(scheduler, job.id.0..job.id.0 + 1);
        assert_eq!(scheduler.state().placed_pods(), placed_before);
    }
    total
}

/// A benchmark group of 20 samples over 3 s: each sample is a whole `schedule()` round.
fn short_group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    group
}

fn gang_placement(c: &mut Criterion) {
    let spec = common::cluster(NODES);
    let mut scheduler = filled(&spec, common::embedded_search_options());
    let mut group = short_group(c, "gang_placement/16384_gpus_50pct");
    for gang_gpus in GANG_GPUS {
        let pods = gang_gpus / GANG_GPUS_PER_POD as usize;
        let gang = common::job(GANG_ID, pods, GANG_GPUS_PER_POD);
        group.bench_function(BenchmarkId::from_parameter(gang_gpus), |b| {
            b.iter_custom(|iters| time_placement(&mut scheduler, &gang, AN_HOUR_MS, iters));
        });
    }
    group.finish();
}

fn held_to_a_dedicated_leaf(c: &mut Criterion) {
    let spec = common::cluster_with_dedicated_leaves(HELD_NODES, 1);
    let mut scheduler = filled(&spec, common::embedded_search_options());
    let mut group = short_group(c, "held_to_a_dedicated_leaf/100096_gpus_50pct");
    for pods in HELD_JOB_PODS {
        let mut job = common::job(GANG_ID, pods, GANG_GPUS_PER_POD);
        job.set_constraints(common::dedicated_constraints());
        group.bench_function(BenchmarkId::from_parameter(pods), |b| {
            b.iter_custom(|iters| time_placement(&mut scheduler, &job, 0, iters));
        });
    }
    group.finish();
}

/// A scheduler on `spec` whose nodes, but for the dedicated leaf, each run a pod of 1 GPU
/// and nearly all the node's CPU: 7 GPUs free on each, and almost no CPU.
fn cpu_taken(spec: &Arc<ClusterSpec>, options: SearchOptions) -> Scheduler {
    let profile = common::default_profile(SearchMode::TwoLevel, options);
    let mut scheduler = common::scheduler(&profile, spec);
    let hogs = spec.nodes.len() - common::NODES_PER_LEAF;
    for id in 0..hogs as u32 {
        let mut hog = common::job(id, 1, 1);
        hog.pods[0].cpu_milli = CPU_HOG_MILLI;
        scheduler.submit(hog);
    }
    let decisions = scheduler.schedule(0);
    assert_eq!(
        common::placed_pods(&decisions),
        hogs,
        "the CPU hogs did not fit"
    );
    scheduler
}

fn short_of_cpu(c: &mut Criterion) {
    let spec = common::cluster_with_dedicated_leaves(HELD_NODES, 1);
    let embedded = common::embedded_search_options();
    let mut schedulers = [true, false].map(|parallel| {
        let name = if parallel { "parallel" } else { "sequential" };
        (
            name,
            cpu_taken(
                &spec,
                SearchOptions {
                    parallel,
                    ..embedded
                },
            ),
        )
    });
    assert!(
        common::same_usage(schedulers[0].1.state(), schedulers[1].1.state()),
        "the two fills left different states"
    );
    let last_leaf = (spec.nodes.len() - 1) / common::NODES_PER_LEAF;
    let mut group = short_group(c, "short_of_cpu/100096_gpus");
    for pods in HELD_JOB_PODS {
        // Tolerating the dedicated leaf's taint, and asking more CPU than the other
        // nodes have left: only the dedicated leaf holds it.
        let mut job = common::job(GANG_ID, pods, SHORT_OF_CPU_GPUS);
        job.set_constraints(NodeConstraints {
            node_selector: Vec::new(),
            ..common::dedicated_constraints()
        });
        for pod in &mut job.pods {
            pod.cpu_milli = SHORT_OF_CPU_MILLI;
        }
        for (name, scheduler) in &mut schedulers {
            scheduler.submit(job.clone());
            assert_eq!(common::placed_pods(&scheduler.schedule(0)), pods);
            let in_last_leaf = (scheduler.state().job_nodes(job.id))
                .all(|n| n.index() / common::NODES_PER_LEAF == last_leaf);
            assert!(
                in_last_leaf,
                "the job short of CPU is not inside the last leaf"
            );
            common::release(scheduler, job.id.0..job.id.0 + 1);
            group.bench_function(BenchmarkId::new(*name, pods), |b| {
                b.iter_custom(|iters| time_placement(scheduler, &job, 0, iters));
            });
        }
    }
    group.finish();
}

criterion_group!(
    benches,
    gang_placement,
    held_to_a_dedicated_leaf,
    short_of_cpu
);
criterion_main!(benches);
