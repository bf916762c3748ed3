//! Placement latency on a cluster filled to about 50% with small jobs, under the embedded
//! default profile:
//!
//! - `gang_placement`: one gang of 256, 1,024 or 2,048 GPUs (pods of 8 GPUs) on 2,048
//!   nodes of 8 GPUs (16,384 GPUs, `common`'s cluster: 64 leaf groups of 32 nodes, 4
//!   leaves to a spine), placed by one `schedule()` round at one hour past its submission
//!   (its patience for a single leaf has run out, so the search may widen tier by tier:
//!   the slow path). No leaf group holds such a gang, so the candidate groups are never
//!   evaluated in parallel: the search goes from the group aggregates to a domain.
//! - `held_to_a_dedicated_leaf`: candidate groups evaluated in parallel (the default rayon
//!   pool) against one at a time (`SearchOptions { parallel: false, .. }`), on 12,500
//!   nodes (100,000 GPUs, 391 groups). A job of 4 or 32 pods of 8 GPUs selects and
//!   tolerates the last leaf group, dedicated (labelled and tainted) and so left empty by
//!   the fill. The group aggregates count GPUs, not labels, and E-Binpack ranks an empty
//!   leaf last, so every group that may hold the job is tried, and refuses it node by
//!   node, before the dedicated one: the path where parallel evaluation has work to share.
//!
//! The fill: single-pod jobs of 1, 2, 4 and 8 GPUs in a fixed rotation up to 60% of the
//! GPUs, then every sixth of them finished, which leaves about 50% used with holes in
//! partly used nodes, as a busy cluster has. Each measured round submits the job, times
//! `schedule()`, checks every pod was placed, and finishes the job, which returns the
//! scheduler to the filled state.
//!
//! Run: `cargo bench --bench gang_placement` (add `-- --quick` for a short run). The
//! machine is shared: compare figures side by side from one run, not across runs.

mod common;

use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};
use std::sync::Arc;

use kant::framework::{Scheduler, SearchMode, SearchOptions};
use kant::model::{ClusterSpec, Job, JobId};

const NODES: usize = 2_048;
const GANG_GPUS: [usize; 3] = [256, 1_024, 2_048];
const GANG_GPUS_PER_POD: u32 = 8;
const GANG_ID: u32 = 1_000_000;
const AN_HOUR_MS: u64 = 3_600_000;
/// The dedicated-leaf case is measured at the mission's scale: 100,000 GPUs, 391 groups.
const HELD_NODES: usize = 12_500;
const HELD_JOB_PODS: [usize; 2] = [4, 32];

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

/// The same filled scheduler twice: evaluating candidate groups in parallel, and one at a
/// time.
fn parallel_and_sequential(spec: &Arc<ClusterSpec>) -> [(&'static str, Scheduler); 2] {
    let embedded = common::embedded_search_options();
    let schedulers = [true, false].map(|parallel| {
        let name = if parallel { "parallel" } else { "sequential" };
        (
            name,
            filled(
                spec,
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
    schedulers
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
    let mut schedulers = parallel_and_sequential(&spec);
    let dedicated = spec.nodes.len() - common::NODES_PER_LEAF;
    let mut group = short_group(c, "held_to_a_dedicated_leaf/100000_gpus_50pct");
    for pods in HELD_JOB_PODS {
        let mut job = common::job(GANG_ID, pods, GANG_GPUS_PER_POD);
        job.set_constraints(common::dedicated_constraints());
        for (name, scheduler) in &mut schedulers {
            scheduler.submit(job.clone());
            assert_eq!(common::placed_pods(&scheduler.schedule(0)), pods);
            let on_dedicated =
                (scheduler.state().job_nodes(job.id)).all(|n| n.index() >= dedicated);
            assert!(on_dedicated, "the held job left the dedicated leaf");
            common::release(scheduler, job.id.0..job.id.0 + 1);
            group.bench_function(BenchmarkId::new(*name, pods), |b| {
                b.iter_custom(|iters| time_placement(scheduler, &job, 0, iters));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, gang_placement, held_to_a_dedicated_leaf);
criterion_main!(benches);
