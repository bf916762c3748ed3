//! Decision throughput: single-pod 1-GPU jobs submitted to a `Scheduler` and placed by one
//! `schedule()` round, in pods per second, two-level search against flat search.
//!
//! Clusters of 1,000 and 12,500 nodes of 8 GPUs (one GPU model, NVLink-all, leaf groups of
//! 32 nodes, 4 leaves per spine, one superspine; see `common`). Both profiles are the
//! embedded `default` profile (best-effort FIFO, binpack) with only `search` changed
//! (`two-level` / `flat`), so each comparison isolates the search.
//!
//! Two groups, each comparison inside one group so the figures come from one run:
//!
//! - `fill_0_to_90pct`: a fresh scheduler, every job of the fill submitted, then one
//!   `schedule()` until the cluster is 90% full (7,200 pods on 1,000 nodes, 90,000 on
//!   12,500). Two-level at both sizes, flat at 1,000 only: a flat fill of 12,500 nodes
//!   scores every node for every pod (a one-off probe took 34 s to fill them to 85%).
//! - `fill_85_to_90pct`: the slice of the fill from 85% to 90% on 12,500 nodes (5,000
//!   pods), both searches, on schedulers pre-filled to 85%. A scheduler's search cannot be
//!   switched after it is built, so each scheduler pre-fills itself with its own search,
//!   and it does so with single-pod 8-GPU jobs (10,625 whole nodes, about 4 s by the flat
//!   search) instead of 85,000 1-GPU jobs (34 s by the flat search). Both searches fill
//!   nodes in id order (binpack, lowest id among equals), so either pre-fill leaves nodes
//!   0..10,624 full and the rest empty; the bench asserts that the two schedulers' node
//!   states and group aggregates are equal. What differs from a 1-GPU pre-fill is what the
//!   search does not read (pods per node) and the size of the placement map (10,625
//!   entries, not 85,000), which `assume` inserts into. A one-off probe (two rounds each)
//!   timed the two-level slice at 79-88 ms after the 8-GPU pre-fill and 89-94 ms after a
//!   1-GPU one, the flat slice at 1.52-1.66 s and 1.49 s: within noise for flat, perhaps a
//!   few percent for two-level. After each measured round the slice's jobs are finished,
//!   which returns the scheduler to the pre-filled state for the next round.
//!
//! Building the scheduler, creating and submitting the jobs, checking the decisions and
//! dropping everything are outside the timed region (`iter_custom`): only `schedule()` is
//! timed. Everything runs inside a 1-thread rayon pool (`RAYON_NUM_THREADS=1` made
//! explicit): single-pod jobs never fork (parallel group evaluation starts at
//! `parallel_min_pods`, 4 pods), so this is the single-thread decision rate.
//!
//! Run: `cargo bench --bench decision_throughput`
//! (add `-- --quick` for a short run). The machine is shared: compare figures side by side
//! from one run, not across runs.

mod common;

use std::ops::Range;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};
use kant::framework::{Profile, Scheduler, SearchMode};

/// Nodes of the cluster the fill slice runs on.
const SLICE_NODES: usize = 12_500;
/// Job ids of the slice start here, clear of the pre-fill's.
const SLICE_FIRST_ID: u32 = 1_000_000;

/// The full fills measured: (search, nodes). Flat at 12,500 nodes is left to the slice.
const FULL_FILLS: [(SearchMode, usize); 3] = [
    (SearchMode::TwoLevel, 1_000),
    (SearchMode::Flat, 1_000),
    (SearchMode::TwoLevel, 12_500),
];

fn search_name(search: SearchMode) -> &'static str {
    match search {
        SearchMode::TwoLevel => "two_level",
        SearchMode::Flat => "flat",
    }
}

fn profile(search: SearchMode) -> Profile {
    common::default_profile(search, common::embedded_search_options())
}

fn single_thread_pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a 1-thread rayon pool builds")
}

/// Few, long samples: one fill is tens of milliseconds to seconds.
fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
}

/// Submits the 1-GPU jobs `ids`, times one `schedule()`, checks every job was placed.
fn timed_round(scheduler: &mut Scheduler, ids: Range<u32>) -> Duration {
    let expected = ids.len();
    for job in common::one_gpu_jobs(ids) {
        scheduler.submit(job);
    }
    let start = Instant::now();
    let decisions = scheduler.schedule(0);
    let elapsed = start.elapsed();
    assert_eq!(
        common::placed_pods(&decisions),
        expected,
        "a job was not placed"
    );
    elapsed
}

fn fill_0_to_90pct(c: &mut Criterion) {
    let pool = single_thread_pool();
    let mut group = c.benchmark_group("decision_throughput/fill_0_to_90pct");
    configure(&mut group);
    for (search, nodes) in FULL_FILLS {
        let spec = common::cluster(nodes);
        let profile = profile(search);
        let pods = common::gpus_at_percent(&spec, 90);
        group.throughput(Throughput::Elements(u64::from(pods)));
        group.bench_function(BenchmarkId::new(search_name(search), nodes), |b| {
            b.iter_custom(|iters| {
                pool.install(|| {
                    (0..iters)
                        .map(|_| timed_round(&mut common::scheduler(&profile, &spec), 0..pods))
                        .sum()
                })
            });
        });
    }
    group.finish();
}

fn fill_85_to_90pct(c: &mut Criterion) {
    let pool = single_thread_pool();
    let spec = common::cluster(SLICE_NODES);
    let from = common::gpus_at_percent(&spec, 85);
    let to = common::gpus_at_percent(&spec, 90);
    let per_node = common::GPUS_PER_NODE as u32;
    assert_eq!(from % per_node, 0, "85% is a whole number of nodes");
    let slice = SLICE_FIRST_ID..SLICE_FIRST_ID + (to - from);

    let mut schedulers: Vec<(SearchMode, Scheduler)> = [SearchMode::TwoLevel, SearchMode::Flat]
        .into_iter()
        .map(|search| {
            let mut scheduler = common::scheduler(&profile(search), &spec);
            pool.install(|| common::prefill(&mut scheduler, 0..from / per_node, per_node));
            (search, scheduler)
        })
        .collect();
    assert!(
        common::same_usage(schedulers[0].1.state(), schedulers[1].1.state()),
        "the two pre-fills left different states"
    );

    let mut group = c.benchmark_group("decision_throughput/fill_85_to_90pct");
    configure(&mut group);
    group.throughput(Throughput::Elements(slice.len() as u64));
    for (search, scheduler) in &mut schedulers {
        let placed_before = scheduler.state().placed_pods();
        group.bench_function(BenchmarkId::new(search_name(*search), SLICE_NODES), |b| {
            b.iter_custom(|iters| {
                pool.install(|| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += timed_round(scheduler, slice.clone());
                        common::release(scheduler, slice.clone());
                        assert_eq!(scheduler.state().placed_pods(), placed_before);
                    }
                    total
                })
            });
        });
    }
    group.finish();
}

criterion_group!(benches, fill_0_to_90pct, fill_85_to_90pct);
criterion_main!(benches);
