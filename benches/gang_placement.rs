//! Gang placement latency: one job of 32 pods x 8 GPUs (256 GPUs) placed by one
//! `schedule()` round on 2,048 nodes of 8 GPUs (16,384 GPUs, `common`'s cluster: 64 leaf
//! groups of 32 nodes) half-filled with single-pod 1-GPU jobs, two-level search with the
//! candidate groups evaluated in parallel (the default rayon pool) against one at a time
//! (`SearchOptions { parallel: false, .. }`). One size only for now.
//!
//! Each scheduler is pre-filled once (8,192 1-GPU jobs, placed by its own two-level
//! search; the bench asserts both pre-fills leave the same state). Each measured round
//! submits the gang, times `schedule()`, checks that all 32 pods were placed, and finishes
//! the gang, which returns the scheduler to the pre-filled state. Only `schedule()` is timed.
//!
//! Note on this state: binpack fills nodes in id order, so the pre-fill leaves leaf groups
//! 0-31 full and 32-63 empty, and the first candidate group holds the gang whole. The
//! sequential search therefore tries one group; the parallel one tries a batch of one
//! group per rayon thread at once and keeps the first in rank order, i.e. the same result
//! for more work spread over the pool's threads plus the fork.
//!
//! Run: `cargo bench --bench gang_placement` (add
//! `-- --quick` for a short run). The machine is shared: compare figures side by side from
//! one run, not across runs.

mod common;

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kant::framework::{Scheduler, SearchMode, SearchOptions};

const NODES: usize = 2_048;
const GANG_PODS: usize = 32;
const GANG_GPUS_PER_POD: u32 = 8;
const GANG_ID: u32 = 1_000_000;

fn prefilled(options: SearchOptions) -> Scheduler {
    let spec = common::cluster(NODES);
    let profile = common::default_profile(SearchMode::TwoLevel, options);
    let mut scheduler = common::scheduler(&profile, &spec);
    common::prefill(&mut scheduler, 0..common::gpus_at_percent(&spec, 50), 1);
    scheduler
}

fn gang_placement(c: &mut Criterion) {
    let embedded = common::embedded_search_options();
    let mut schedulers = [
        (
            "parallel",
            prefilled(SearchOptions {
                parallel: true,
                ..embedded
            }),
        ),
        (
            "sequential",
            prefilled(SearchOptions {
                parallel: false,
                ..embedded
            }),
        ),
    ];
    assert!(
        common::same_usage(schedulers[0].1.state(), schedulers[1].1.state()),
        "the two pre-fills left different states"
    );

    let mut group = c.benchmark_group("gang_placement/256_gpus_on_2048_nodes_50pct");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (name, scheduler) in &mut schedulers {
        let placed_before = scheduler.state().placed_pods();
        group.bench_function(BenchmarkId::new(*name, NODES), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    scheduler.submit(common::job(GANG_ID, GANG_PODS, GANG_GPUS_PER_POD));
                    let start = Instant::now();
                    let decisions = scheduler.schedule(0);
                    total += start.elapsed();
                    assert_eq!(common::placed_pods(&decisions), GANG_PODS);
                    common::release(scheduler, GANG_ID..GANG_ID + 1);
                    assert_eq!(scheduler.state().placed_pods(), placed_before);
                }
                total
            });
        });
    }
    group.finish();
}

criterion_group!(benches, gang_placement);
criterion_main!(benches);
