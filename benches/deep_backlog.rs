//! Deep-backlog replay: one-pod jobs of 1 to 8 GPUs, all submitted at once, replayed by
//! the simulator on 16 nodes of 8 GPUs (128 GPUs) under the embedded `default` profile,
//! in jobs replayed per second at four backlog depths.
//!
//! Each completion frees capacity, and with it every pending job could fit again; the
//! queue offers only those its tenant could still be admitted for, so a round over a
//! deep backlog reads the queue's sums, not each job. The depths are compared inside one
//! run: the rates at 8,000, 32,000 and 128,000 jobs against the rate at 2,000 show how
//! the cost of a round grows with the backlog (a rate that falls four-fold at each step
//! would mean every pending job, or every chunk of them, is read after every completion).
//!
//! Durations (10 to 60 minutes) and sizes come from a fixed-seed generator, so every
//! iteration replays the same workload. Building the workload is outside the timed region.
//!
//! `deep_backlog_preempting` replays the same bursts, smaller, spread over the four
//! synthetic tenants (one isolated) with priorities 0, 50 and 100 (0 for half of the jobs),
//! under the default profile with `preemption` (priority and quota reclaim) in place of
//! `backfill-preemption`: most waiting jobs may then outrank a running one or reclaim
//! quota, so each is tried for victims at every completion. Its depths are compared with
//! one another as above.
//!
//! Run: `cargo bench --bench deep_backlog` (add `-- --quick` for a short run). The
//! machine is shared: compare figures side by side from one run, not across runs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use kant::config::{Config, PluginConfig};
use kant::framework::{Profile, SearchMode};
use kant::model::{ClusterSpec, JobId, TenantId};
use kant::queue::{TenantConfig, Tenants};
use kant::sim::synthetic::default_tenants;
use kant::sim::{EventLog, ReplayOptions, Workload};

const NODES: usize = 16;
const DEPTHS: [u32; 4] = [2_000, 8_000, 32_000, 128_000];
const PREEMPTING_DEPTHS: [u32; 2] = [500, 2_000];

/// `count` one-pod jobs submitted at time 0, sizes 1 to 8 GPUs, 10 to 60 minutes long.
fn burst(count: u32) -> Workload {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |below: u64| {
        // xorshift64: a fixed sequence, no dependency.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % below
    };
    let jobs = (0..count)
        .map(|id| {
            let gpus = 1 + next(8) as u32;
            let minutes = 10 + next(51);
            kant::model::Job {
                id: JobId(id),
                submit_ms: 0,
                duration_ms: Some(minutes * 60_000),
                tenant: TenantId(0),
                ..common::job(id, 1, gpus)
            }
        })
        .collect();
    Workload {
        jobs,
        tenants: vec![kant::queue::DEFAULT_TENANT.to_owned()],
        skipped: Vec::new(),
    }
}

fn deep_backlog(c: &mut Criterion) {
    let spec = common::cluster(NODES);
    let profile = common::default_profile(SearchMode::TwoLevel, common::embedded_search_options());
    replay_group(c, "deep_backlog", &spec, &profile, &DEPTHS, &[], burst);
}

/// Replays, as group `name`, the workload `workload_of(depth)` for each depth, under
/// `profile` with the tenants `tenants` declare.
fn replay_group(
    c: &mut Criterion,
    name: &str,
    spec: &Arc<ClusterSpec>,
    profile: &Profile,
    depths: &[u32],
    tenants: &[TenantConfig],
    workload_of: impl Fn(u32) -> Workload,
) {
    let mut group = c.benchmark_group(name);
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for &depth in depths {
        let workload = workload_of(depth);
        group.throughput(Throughput::Elements(u64::from(depth)));
        group.bench_function(BenchmarkId::new("replay", depth), |b| {
            b.iter(|| {
                let tenants = Tenants::resolve(tenants, spec).expect("the tenants resolve");
                let report = kant::sim::run(
                    spec.clone(),
                    &workload,
                    profile.clone(),
                    tenants,
                    &mut EventLog::disabled(),
                    ReplayOptions::default(),
                )
                .expect("no event log to write");
                assert!(report.never_placed.is_empty(), "every job fits the cluster");
                report
            });
        });
    }
    group.finish();
}

/// [`burst`], its jobs dealt in turn to the synthetic tenants (indices 1 to 4, after the
/// default tenant) with priorities 0, 0, 50 and 100 in turn.
fn preempting_burst(count: u32, spec: &ClusterSpec) -> Workload {
    let tenants = default_tenants(spec);
    let mut workload = burst(count);
    for (job, i) in workload.jobs.iter_mut().zip(0u32..) {
        job.tenant = TenantId((1 + i as usize % tenants.len()) as u16);
        job.priority = [0, 0, 50, 100][(i / 4 % 4) as usize];
    }
    workload.tenants = std::iter::once(kant::queue::DEFAULT_TENANT.to_owned())
        .chain(tenants.into_iter().map(|t| t.name))
        .collect();
    workload
}

/// The embedded `default` profile with `preemption` in place of `backfill-preemption`.
fn preempting_profile() -> Profile {
    let config = Config::embedded();
    let mut profile = (config.profile("default"))
        .expect("the embedded configuration has a `default` profile")
        .clone();
    for plugin in &mut profile.plugins {
        if plugin.name() == "backfill-preemption" {
            *plugin = PluginConfig::Name("preemption".to_owned());
        }
    }
    kant::plugins::build_profile(&profile, &config).expect("the profile builds")
}

fn deep_backlog_preempting(c: &mut Criterion) {
    let spec = common::cluster(NODES);
    let tenants = default_tenants(&spec);
    replay_group(
        c,
        "deep_backlog_preempting",
        &spec,
        &preempting_profile(),
        &PREEMPTING_DEPTHS,
        &tenants,
        |depth| preempting_burst(depth, &spec),
    );
}

criterion_group!(benches, deep_backlog, deep_backlog_preempting);
criterion_main!(benches);
