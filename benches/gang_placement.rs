//! Gang placement latency: one gang of 256, 1,024 or 2,048 GPUs (pods of 8 GPUs) placed by
//! one `schedule()` round on 2,048 nodes of 8 GPUs (16,384 GPUs, `common`'s cluster: 64
//! leaf groups of 32 nodes, 4 leaves to a spine) filled to about 50% with small jobs, the
//! candidate groups evaluated in parallel (the default rayon pool) against one at a time
//! (`SearchOptions { parallel: false, .. }`).
//!
//! The fill: single-pod jobs of 1, 2, 4 and 8 GPUs in a fixed rotation up to 60% of the
//! GPUs, then every sixth of them finished, which leaves about 50% used with holes in
//! partly used nodes, as a busy cluster has. Each measured round submits the gang, times
//! `schedule()` at one hour past the gang's submission (its patience for a single leaf has
//! run out, so the search may widen tier by tier: the slow path), checks every pod was
//! placed, and finishes the gang, which returns the scheduler to the filled state.
//!
//! Run: `cargo bench --bench gang_placement` (add `-- --quick` for a short run). The
//! machine is shared: compare figures side by side from one run, not across runs.

mod common;

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kant::framework::{Scheduler, SearchMode, SearchOptions};
use kant::model::JobId;

const NODES: usize = 2_048;
const GANG_GPUS: [usize; 3] = [256, 1_024, 2_048];
const GANG_GPUS_PER_POD: u32 = 8;
const GANG_ID: u32 = 1_000_000;
const AN_HOUR_MS: u64 = 3_600_000;

/// A scheduler on the cluster filled to about 50% with small jobs, with holes.
fn filled(options: SearchOptions) -> Scheduler {
    let spec = common::cluster(NODES);
    let profile = common::default_profile(SearchMode::TwoLevel, options);
    let mut scheduler = common::scheduler(&profile, &spec);
    let target = u64::from(common::gpus_at_percent(&spec, 60));
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

fn gang_placement(c: &mut Criterion) {
    let embedded = common::embedded_search_options();
    let mut schedulers = [
        (
            "parallel",
            filled(SearchOptions {
                parallel: true,
                ..embedded
            }),
        ),
        (
            "sequential",
            filled(SearchOptions {
                parallel: false,
                ..embedded
            }),
        ),
    ];
    assert!(
        common::same_usage(schedulers[0].1.state(), schedulers[1].1.state()),
        "the two fills left different states"
    );

    let mut group = c.benchmark_group("gang_placement/16384_gpus_50pct");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for gang_gpus in GANG_GPUS {
        let pods = gang_gpus / GANG_GPUS_PER_POD as usize;
        for (name, scheduler) in &mut schedulers {
            let placed_before = scheduler.state().placed_pods();
            group.bench_function(BenchmarkId::new(*name, gang_gpus), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        scheduler.submit(common::job(GANG_ID, pods, GANG_GPUS_PER_POD));
                        let start = Instant::now();
                        let decisions = scheduler.schedule(AN_HOUR_MS);
                        total += start.elapsed();
                        assert_eq!(common::placed_pods(&decisions), pods);
                        common::release(scheduler, GANG_ID..GANG_ID + 1);
                        assert_eq!(scheduler.state().placed_pods(), placed_before);
                    }
                    total
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, gang_placement);
criterion_main!(benches);
