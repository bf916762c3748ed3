//! Replay throughput against cluster size: the synthetic workload (the embedded default's
//! mix of sizes, kinds and durations at 90% offered load, `sim::synthetic`) replayed by
//! the simulator under the embedded `default` profile on the benches' uniform cluster at
//! 3,072 and at 98,304 GPUs, with as many jobs as GPUs in both, in jobs replayed per
//! second.
//!
//! The two sizes are compared inside one run: the rate at 98,304 GPUs against the rate at
//! 3,072 shows what a cluster 32 times larger costs each scheduling decision (the
//! two-level search reads group aggregates, so it should cost little; a rate that falls
//! 32-fold would mean something visits every node). The replay includes what the
//! simulator measures alongside (metrics, the NVLink audit), as `kant simulate` does.
//!
//! `overloaded`: the same mix offered at twice the capacity of 10,240 nodes (81,920
//! GPUs), 40,000 jobs, so that a backlog builds: most jobs the queues offer after a
//! completion find no room they could use (gangs holding out for one leaf or spine, jobs
//! kept out of room held for a backfill head). Replayed as `kant simulate` does, and with
//! every such job searched again (`ReplayOptions::repeat_every_search`), side by side.
//! That both decide the same is checked by tests
//! (`skipping_fruitless_searches_changes_no_decision`), not here.
//!
//! The workload comes from a fixed seed and is built outside the timed region.
//!
//! Run: `cargo bench --bench replay_at_scale` (add `-- --quick` for a short run). The
//! machine is shared: compare figures side by side from one run, not across runs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};
use kant::framework::{Profile, SearchMode};
use kant::model::ClusterSpec;
use kant::queue::Tenants;
use kant::sim::synthetic::{SyntheticOptions, generate_workload};
use kant::sim::{EventLog, ReplayOptions, RunReport, Workload};

/// Nodes of 8 GPUs: 3,072 and 98,304 GPUs.
const SIZES: [usize; 2] = [384, 12_288];

/// A group of whole replays: a few samples, each of seconds.
fn replays<'c>(c: &'c mut Criterion, name: &str) -> BenchmarkGroup<'c, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    group
}

/// The embedded `default` profile.
fn default_profile() -> Profile {
    common::default_profile(SearchMode::TwoLevel, common::embedded_search_options())
}

/// Replays the workload under `profile`, as `kant simulate` does.
fn replay(
    spec: &Arc<ClusterSpec>,
    workload: &Workload,
    profile: &Profile,
    options: ReplayOptions,
) -> RunReport {
    let tenants = Tenants::resolve(&[], spec).expect("no tenants to resolve");
    let mut events = EventLog::disabled();
    kant::sim::run(
        spec.clone(),
        workload,
        profile.clone(),
        tenants,
        &mut events,
        options,
    )
    .expect("no event log to write")
}

fn replay_at_scale(c: &mut Criterion) {
    let profile = default_profile();
    let mut group = replays(c, "replay_at_scale");
    for nodes in SIZES {
        let spec = common::cluster(nodes);
        let gpus = nodes * common::GPUS_PER_NODE;
        let options = SyntheticOptions {
            jobs: gpus,
            ..SyntheticOptions::default()
        };
        let workload = generate_workload(&spec, &options);
        group.throughput(Throughput::Elements(gpus as u64));
        group.bench_function(BenchmarkId::new("gpus", gpus), |b| {
            b.iter(|| replay(&spec, &workload, &profile, ReplayOptions::default()));
        });
    }
    group.finish();
}

/// Nodes of 8 GPUs of the overloaded replay, its jobs and their offered load.
const OVERLOADED: (usize, usize, f64) = (10_240, 40_000, 2.0);

fn overloaded(c: &mut Criterion) {
    let profile = default_profile();
    let mut group = replays(c, "overloaded");
    let (nodes, jobs, load) = OVERLOADED;
    let spec = common::cluster(nodes);
    let options = SyntheticOptions {
        jobs,
        load,
        ..SyntheticOptions::default()
    };
    let workload = generate_workload(&spec, &options);
    group.throughput(Throughput::Elements(jobs as u64));
    for (name, repeat_every_search) in [
        ("skipping_fruitless_searches", false),
        ("searching_every_time", true),
    ] {
        let options = ReplayOptions {
            repeat_every_search,
            ..ReplayOptions::default()
        };
        group.bench_function(name, |b| {
            b.iter(|| replay(&spec, &workload, &profile, options))
        });
    }
    group.finish();
}

criterion_group!(benches, replay_at_scale, overloaded);
criterion_main!(benches);
