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
//! The workload comes from a fixed seed and is built outside the timed region.
//!
//! Run: `cargo bench --bench replay_at_scale` (add `-- --quick` for a short run). The
//! machine is shared: compare figures side by side from one run, not across runs.

mod common;

use std::time::Duration;

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use kant::framework::SearchMode;
use kant::queue::Tenants;
use kant::sim::synthetic::{SyntheticOptions, generate_workload};
use kant::sim::{EventLog, ReplayOptions};

/// Nodes of 8 GPUs: 3,072 and 98,304 GPUs.
const SIZES: [usize; 2] = [384, 12_288];

fn replay_at_scale(c: &mut Criterion) {
    let profile = common::default_profile(SearchMode::TwoLevel, common::embedded_search_options());
    let mut group = c.benchmark_group("replay_at_scale");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
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
            b.iter(|| {
                let tenants = Tenants::resolve(&[], &spec).expect("no tenants to resolve");
                kant::sim::run(
                    spec.clone(),
                    &workload,
                    profile.clone(),
                    tenants,
                    &mut EventLog::disabled(),
                    ReplayOptions::default(),
                )
                .expect("no event log to write")
            });
        });
    }
    group.finish();
}

criterion_group!(benches, replay_at_scale);
criterion_main!(benches);
