//! The live metrics of a running scheduler, exported in the OpenMetrics text format (which
//! Prometheus scrapes) through `prometheus-client`.
//!
//! Owns [`LiveMetrics`]: the scheduling loop writes into it (every method takes `&self`) while
//! the HTTP handlers encode it concurrently. GAR, SOR, GFR, JWTD and JTTED come from the very
//! [`MetricsCollector`] the simulator's report uses, refreshed on demand; beside them it keeps
//! Prometheus-native series (exact time integrals as counters, histograms) so that any window
//! can be computed with `rate()`.
//!
//! It knows no Kubernetes, no HTTP and no clock: times are integer milliseconds on the world's
//! clock (Unix epoch milliseconds in the Kubernetes world), GPU amounts integer milli-GPUs. It
//! must not touch the collector's definitions (`super`): it feeds them.
//!
//! # A capacity that changes
//!
//! [`MetricsCollector`] takes a fixed total, while a live cluster's GPUs and GPU nodes come and
//! go. Two views are exported, equal while the capacity does not change:
//!
//! - The since-start gauges (`kant_gar_mean`, `kant_gar_p50`, `kant_sor`, `kant_gfr_mean`)
//!   read DESIGN's definitions with the total at each instant: the GAR series is
//!   alloc(t) / total(t), `kant_gar_mean` its time-average and `kant_gar_p50` its time-weighted
//!   median; SOR is the time-average of run(t) / total(t), GFR that of fragmented(t) /
//!   nodes(t); a time with no capacity counts as 0. The collector computes them all: it is
//!   built with fixed totals ([`GPU_SCALE`], [`NODE_SCALE`]) and fed each observation as that
//!   fraction of them (rounded to the nearest 10⁻¹² of the capacity, 10⁻⁹ of the nodes;
//!   `kant_gar_p50` down to 10⁻⁴).
//! - The counters integrate the raw series exactly, so over any window
//!   `rate(kant_gpu_allocated_milli_seconds_total) / rate(kant_gpu_capacity_milli_seconds_total)`
//!   is ∫ alloc dt / ∫ total dt: GPU-time allocated over GPU-time that existed, where a larger
//!   cluster weighs more.
//!
//! The collector could take the capacity per observation itself (ratios kept as exact
//! fractions) and drop the rounding; until then the scaling above stays in this file.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeMetric,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::{MetricsCollector, MetricsReport, PlacementSpread, SizeBucket};

/// The Content-Type to serve [`LiveMetrics::encode`]'s text with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The GPU capacity the collector is built with: allocations reach it as fractions of this.
pub const GPU_SCALE: u64 = 1_000_000_000_000;

/// The GPU node count the collector is built with: fragmented nodes reach it as fractions of
/// this.
pub const NODE_SCALE: u32 = 1_000_000_000;

/// `kant_gar_p50`'s resolution, 10⁻⁴ of the capacity (rounded down): a series scaled to a
/// capacity that changes takes ever new values, and the median's table would otherwise
/// grow with every one over a replica's lifetime; it now holds at most 10,001 levels.
const GAR_MEDIAN_STEP: u64 = GPU_SCALE / 10_000;

/// The preemption kinds whose counters exist (at 0) from the start.
pub const PREEMPTION_KINDS: [&str; 3] = ["priority", "quota-reclaim", "backfill"];

/// `kant_job_wait_seconds` upper bounds: 100 ms to a day.
const WAIT_BUCKETS: [f64; 18] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0,
    14400.0, 28800.0, 86400.0,
];

/// `kant_scheduling_round_seconds` upper bounds: 100 µs to 10 s.
const ROUND_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// `kant_bind_seconds` upper bounds: 1 ms to 30 s.
const BIND_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The label set of a per-size series: `size` = [`SizeBucket::label`].
type SizeLabels = [(&'static str, &'static str); 1];

/// The label set of `kant_bind_errors_total`: `code` = the HTTP status or `network`.
type CodeLabels = [(&'static str, String); 1];

/// The label set of a per-kind series: `kind` = one of [`PREEMPTION_KINDS`].
type KindLabels = [(&'static str, &'static str); 1];

/// The label set of `kant_backfill_returns_total`: `outcome` (see
/// [`LiveMetrics::backfill_returns`]).
type OutcomeLabels = [(&'static str, &'static str); 1];

/// The live metrics: written by the scheduling loop, encoded by the HTTP handlers.
///
/// Writes are cheap (an uncontended lock and a few integer operations, or an atomic
/// histogram); only [`LiveMetrics::refresh`] computes the collector's report (it walks the
/// GAR median's levels), so the loop calls it about once a second, never per event. The figures that come
/// from the report (GAR, SOR, GFR, wait percentiles, JTTED) are as of the latest refresh; the
/// time integrals and instant gauges as of the latest observation or refresh.
#[derive(Debug)]
pub struct LiveMetrics {
    registry: Registry,
    /// The accumulators of the paper's metrics, fed scaled (see the module's documentation).
    /// Only the loop takes this lock.
    feed: Mutex<Feed>,
    /// What a scrape reads besides the registry's own metrics; also held by the [`Exporter`].
    shared: Arc<Mutex<Shared>>,
    job_wait: Family<SizeLabels, Histogram, fn() -> Histogram>,
    round_seconds: Histogram,
    decisions: Counter,
    bind_seconds: Histogram,
    bind_errors: Family<CodeLabels, Counter>,
    backfill_returns: Family<OutcomeLabels, Counter>,
    victim_wait_again: Family<KindLabels, Histogram, fn() -> Histogram>,
}

impl Default for LiveMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveMetrics {
    /// Empty metrics: no job, no observation (every series at 0).
    pub fn new() -> Self {
        let collector =
            MetricsCollector::new(GPU_SCALE, NODE_SCALE, None).with_median_step(GAR_MEDIAN_STEP);
        let shared = Arc::new(Mutex::new(Shared {
            series: Series::default(),
            jobs_submitted: 0,
            jobs_placed: 0,
            jobs_withdrawn: 0,
            report: collector.report(0),
            queues: BTreeMap::new(),
            shard_overlaps: Vec::new(),
            isolated_quota_excess: BTreeMap::new(),
            preemptions: PREEMPTION_KINDS
                .iter()
                .map(|&kind| (kind.to_owned(), Preempted::default()))
                .collect(),
            leading: true,
        }));

        let job_wait = Family::<SizeLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            wait_histogram,
        );
        let victim_wait_again =
            Family::<KindLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                wait_histogram,
            );
        // Every size and kind exists from the start, so that rate() sees a 0 rather than no
        // series.
        for bucket in SizeBucket::ALL {
            drop(job_wait.get_or_create(&size_labels(bucket)));
        }
        for kind in PREEMPTION_KINDS {
            drop(victim_wait_again.get_or_create(&[("kind", kind)]));
        }
        let round_seconds = Histogram::new(ROUND_BUCKETS);
        let decisions = Counter::default();
        let bind_seconds = Histogram::new(BIND_BUCKETS);
        let bind_errors = Family::<CodeLabels, Counter>::default();
        let backfill_returns = Family::<OutcomeLabels, Counter>::default();

        // The registry appends a period to each help text.
        let mut registry = Registry::default();
        registry.register(
            "kant_job_wait_seconds",
            "JWTD: seconds from a job's submission to the first moment all its pods are \
             placed, by job size (total GPUs)",
            job_wait.clone(),
        );
        registry.register(
            "kant_scheduling_round_seconds",
            "Latency of one scheduling round",
            round_seconds.clone(),
        );
        registry.register(
            "kant_scheduling_decisions",
            "Decisions of the scheduling rounds (placements, preemptions, requeues); the mean \
             time per decision is rate(kant_scheduling_round_seconds_sum) / rate(this)",
            decisions.clone(),
        );
        registry.register(
            "kant_bind_seconds",
            "Latency of one pod binding, successful or not",
            bind_seconds.clone(),
        );
        registry.register(
            "kant_bind_errors",
            "Failed pod bindings, by HTTP status code (or `network`)",
            bind_errors.clone(),
        );
        registry.register(
            "kant_backfill_returns",
            "Jobs evicted as backfilled, by what became of their return (the job their \
             controller's new pods form, exempt from backfill eviction): owed at the eviction \
             (and again when an exempt job comes apart to form anew), taken by that job, cancelled where \
             every eviction was refused, expired after an hour",
            backfill_returns.clone(),
        );
        registry.register(
            "kant_victim_wait_again_seconds",
            "Seconds from a preemption victim's eviction to the first moment the job its \
             PodGroup or controller makes again is placed whole, by preemption kind (its \
             count against kant_preemptions_total: the victims back within an hour)",
            victim_wait_again.clone(),
        );
        registry.register_collector(Box::new(Exporter(shared.clone())));

        LiveMetrics {
            registry,
            feed: Mutex::new(Feed {
                collector,
                level: None,
            }),
            shared,
            job_wait,
            round_seconds,
            decisions,
            bind_seconds,
            bind_errors,
            backfill_returns,
            victim_wait_again,
        }
    }

    /// A job was submitted at `t_ms`. The first call opens the window of the since-start
    /// gauges.
    pub fn job_submitted(&self, t_ms: u64) {
        lock(&self.feed).collector.job_submitted(t_ms);
        lock(&self.shared).jobs_submitted += 1;
    }

    /// A job deleted before its pods were ever all placed: it no longer waits.
    pub fn job_withdrawn(&self) {
        lock(&self.shared).jobs_withdrawn += 1;
    }

    /// From `t_ms` on, `alloc_milli` milli-GPUs are assigned (running or only reserved),
    /// `run_milli` of them to jobs whose every pod is placed, and `fragmented_nodes` GPU nodes
    /// are partly assigned, in a cluster of `total_milli` milli-GPUs on `gpu_nodes` GPU nodes.
    /// Called after every change of the cluster's assignment or capacity, in non-decreasing
    /// time (an earlier `t_ms` counts as the latest time seen: the past is never rewritten).
    pub fn observe(
        &self,
        t_ms: u64,
        alloc_milli: u64,
        run_milli: u64,
        fragmented_nodes: u32,
        total_milli: u64,
        gpu_nodes: u32,
    ) {
        let fragmented = scaled(
            u64::from(fragmented_nodes),
            u64::from(gpu_nodes),
            u64::from(NODE_SCALE),
        );
        lock(&self.feed).observe(
            t_ms,
            FedLevel {
                alloc: scaled(alloc_milli, total_milli, GPU_SCALE),
                run: scaled(run_milli, total_milli, GPU_SCALE),
                fragmented: u32::try_from(fragmented).unwrap_or(u32::MAX),
            },
        );
        lock(&self.shared).series.observe(
            t_ms,
            Level {
                alloc_milli,
                run_milli,
                total_milli,
                fragmented_nodes,
                gpu_nodes,
            },
        );
    }

    /// A job's pods became all placed for the first time at `t_ms` (submitted at
    /// `submit_ms`); `total_milli` its total request; `spread` where its placement landed
    /// (None for jobs of less than one GPU).
    pub fn job_first_placed(
        &self,
        t_ms: u64,
        submit_ms: u64,
        total_milli: u64,
        spread: Option<PlacementSpread>,
    ) {
        lock(&self.feed)
            .collector
            .job_first_placed(t_ms, submit_ms, total_milli, spread);
        let wait_s = t_ms.saturating_sub(submit_ms) as f64 / 1000.0;
        self.job_wait
            .get_or_create(&size_labels(SizeBucket::of(total_milli)))
            .observe(wait_s);
        lock(&self.shared).jobs_placed += 1;
    }

    /// Recomputes the since-start gauges from the collector's report at `now_ms`, and carries
    /// the time integrals up to `now_ms` (the latest observation holds until then). Call it
    /// about once a second, not per event.
    pub fn refresh(&self, now_ms: u64) {
        let report = {
            let mut feed = lock(&self.feed);
            // Both sides move to `now_ms`, so that a later observation dated earlier is
            // clamped alike by the collector and by the counters.
            if let Some(level) = feed.level {
                feed.observe(now_ms, level);
            }
            feed.collector.report(now_ms)
        };
        let mut shared = lock(&self.shared);
        shared.series.advance(now_ms);
        shared.report = report;
    }

    /// One scheduling round took `latency` and made `decisions` decisions (placements,
    /// preemptions, requeues).
    pub fn round(&self, latency: Duration, decisions: u64) {
        self.round_seconds.observe(latency.as_secs_f64());
        self.decisions.inc_by(decisions);
    }

    /// One pod binding took `latency`; `outcome` is its error code on failure (the HTTP
    /// status, or `network` when no answer came).
    pub fn bind(&self, latency: Duration, outcome: Result<(), String>) {
        self.bind_seconds.observe(latency.as_secs_f64());
        if let Err(code) = outcome {
            self.bind_errors.get_or_create(&[("code", code)]).inc();
        }
    }

    /// `count` returns of jobs evicted as backfilled came to `outcome` (`owed`, `taken`,
    /// `cancelled` or `expired`).
    pub fn backfill_returns(&self, outcome: &'static str, count: u64) {
        if count > 0 {
            let counter = self.backfill_returns.get_or_create(&[("outcome", outcome)]);
            counter.inc_by(count);
        }
    }

    /// A victim of a preemption for `kind` (one of [`PREEMPTION_KINDS`]) is placed whole
    /// again, `waited_ms` after its eviction.
    pub fn victim_placed_again(&self, kind: &'static str, waited_ms: u64) {
        (self.victim_wait_again.get_or_create(&[("kind", kind)]))
            .observe(waited_ms as f64 / 1000.0);
    }

    /// A job was preempted for `kind` (`priority`, `quota-reclaim`, `backfill`); it held
    /// `victim_milli` milli-GPUs and had run `ran_ms` since its placement.
    pub fn preempted(&self, kind: &str, victim_milli: u64, ran_ms: u64) {
        let mut shared = lock(&self.shared);
        let entry = shared.preemptions.entry(kind.to_owned()).or_default();
        entry.count += 1;
        entry.milli_ms += u128::from(victim_milli) * u128::from(ran_ms);
    }

    /// The queue (tenant) `queue` has `pending` jobs waiting.
    pub fn queue_depth(&self, queue: &str, pending: u64) {
        lock(&self.shared).queues.insert(queue.to_owned(), pending);
    }

    /// The queue is gone: its series disappears.
    pub fn remove_queue(&self, queue: &str) {
        lock(&self.shared).queues.remove(queue);
    }

    /// Every queue's pending jobs at once: queues not named disappear. A scrape sees the old
    /// set or the new one, never a mix.
    pub fn set_queue_depths(&self, depths: impl IntoIterator<Item = (String, u64)>) {
        let queues: BTreeMap<String, u64> = depths.into_iter().collect();
        lock(&self.shared).queues = queues;
    }

    /// Whether this replica schedules (new metrics: it does). A standby exports
    /// `kant_leader 0` and none of the figures only a leader keeps (the cluster's
    /// levels and ratios, the jobs, the queues), which would read as an empty cluster.
    pub fn set_leading(&self, leading: bool) {
        lock(&self.shared).leading = leading;
    }

    /// The Leases of the other shards' leaders found scheduling this shard's GPU models
    /// too (all of them at once: those not named disappear).
    pub fn set_shard_overlaps(&self, leases: impl IntoIterator<Item = String>) {
        lock(&self.shared).shard_overlaps = leases.into_iter().collect();
    }

    /// The GPU models whose isolated quotas add up past their GPUs, with the excess in
    /// GPUs (all of them at once: those not named disappear).
    pub fn set_isolated_quota_excess(&self, excess: impl IntoIterator<Item = (String, u64)>) {
        lock(&self.shared).isolated_quota_excess = excess.into_iter().collect();
    }

    /// The text exposition: `# HELP` and `# TYPE` per family, ending with `# EOF`. Serve it
    /// with [`CONTENT_TYPE`]. Fails only if a metric cannot be written (a bug, not a state).
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// A histogram of waits, in [`WAIT_BUCKETS`].
fn wait_histogram() -> Histogram {
    Histogram::new(WAIT_BUCKETS)
}

/// The label set of one size bucket.
fn size_labels(bucket: SizeBucket) -> SizeLabels {
    [("size", bucket.label())]
}

/// `value / total` as a fraction of `scale`, rounded to the nearest; 0 when `total` is 0.
fn scaled(value: u64, total: u64, scale: u64) -> u64 {
    if total == 0 {
        return 0;
    }
    let total = u128::from(total);
    let fraction = (u128::from(value) * u128::from(scale) + total / 2) / total;
    u64::try_from(fraction).unwrap_or(u64::MAX)
}

/// Locks `mutex`, taking the data of a poisoned one as it is: every update here leaves the
/// data consistent between statements.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The collector and the values it was last fed.
#[derive(Debug)]
struct Feed {
    collector: MetricsCollector,
    /// None before the first observation.
    level: Option<FedLevel>,
}

/// One observation as the collector sees it: fractions of [`GPU_SCALE`] and [`NODE_SCALE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FedLevel {
    alloc: u64,
    run: u64,
    fragmented: u32,
}

impl Feed {
    fn observe(&mut self, t_ms: u64, level: FedLevel) {
        self.collector
            .observe(t_ms, level.alloc, level.run, level.fragmented);
        self.level = Some(level);
    }
}

/// The raw series' values since the latest observation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Level {
    alloc_milli: u64,
    run_milli: u64,
    total_milli: u64,
    fragmented_nodes: u32,
    gpu_nodes: u32,
}

/// Exact time integrals of the raw series, from the first observation on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Series {
    /// Up to when the integrals run; None before the first observation.
    since_ms: Option<u64>,
    /// The values held since `since_ms`.
    level: Level,
    /// ∫ alloc dt, milli-GPU·ms.
    alloc: u128,
    /// ∫ run dt, milli-GPU·ms.
    run: u128,
    /// ∫ total dt, milli-GPU·ms.
    capacity: u128,
    /// ∫ fragmented nodes dt, node·ms.
    fragmented: u128,
    /// ∫ GPU nodes dt, node·ms.
    nodes: u128,
}

impl Series {
    /// Integrates the current level up to `t_ms` (a time before `since_ms` counts as
    /// `since_ms`).
    fn advance(&mut self, t_ms: u64) {
        let Some(since) = self.since_ms else {
            return;
        };
        let t_ms = t_ms.max(since);
        let dur = u128::from(t_ms - since);
        let level = &self.level;
        self.alloc += u128::from(level.alloc_milli) * dur;
        self.run += u128::from(level.run_milli) * dur;
        self.capacity += u128::from(level.total_milli) * dur;
        self.fragmented += u128::from(level.fragmented_nodes) * dur;
        self.nodes += u128::from(level.gpu_nodes) * dur;
        self.since_ms = Some(t_ms);
    }

    /// `level` holds from `t_ms` on.
    fn observe(&mut self, t_ms: u64, level: Level) {
        self.advance(t_ms);
        self.since_ms.get_or_insert(t_ms);
        self.level = level;
    }
}

/// Preemptions of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Preempted {
    count: u64,
    /// Σ victim milli-GPUs × milliseconds it had run.
    milli_ms: u128,
}

/// What the [`Exporter`] encodes on a scrape.
#[derive(Debug, Clone)]
struct Shared {
    series: Series,
    jobs_submitted: u64,
    jobs_placed: u64,
    /// Jobs deleted before they were ever placed whole.
    jobs_withdrawn: u64,
    /// The collector's report as of the latest refresh.
    report: MetricsReport,
    /// Pending jobs per queue.
    queues: BTreeMap<String, u64>,
    /// Other shards' Leases whose leaders schedule this shard's GPU models too.
    shard_overlaps: Vec<String>,
    /// GPUs by which the isolated quotas exceed the pool, per GPU model where they do.
    isolated_quota_excess: BTreeMap<String, u64>,
    /// Per kind.
    preemptions: BTreeMap<String, Preempted>,
    /// Whether this replica schedules: a standby's cache is not the cluster's figures.
    leading: bool,
}

/// Encodes [`Shared`] on each scrape (a `prometheus-client` collector).
#[derive(Debug)]
struct Exporter(Arc<Mutex<Shared>>);

impl Collector for Exporter {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        // A copy, so that the loop never waits on a scrape's writing.
        let shared = lock(&self.0).clone();
        shared.encode(&mut encoder)
    }
}

/// An integral in value·milliseconds as value·seconds: one rounding, at export.
fn per_second(value_ms: u128) -> f64 {
    value_ms as f64 / 1000.0
}

impl Shared {
    fn encode(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        gauge(
            encoder,
            "kant_leader",
            "1 where this replica schedules (leads its shard, or runs without leader \
             election); 0 for a standby, or a replica stopping, which exports besides this \
             only the histograms and the decision counter of what it did.",
            u64::from(self.leading),
        )?;
        if !self.leading {
            return Ok(());
        }
        let series = &self.series;
        let level = &series.level;
        counter(
            encoder,
            "kant_gpu_allocated_milli_seconds",
            "Integral over time of the assigned milli-GPUs (running or only reserved), in \
             milli-GPU-seconds; GAR over a window = rate(this) / \
             rate(kant_gpu_capacity_milli_seconds_total).",
            per_second(series.alloc),
        )?;
        counter(
            encoder,
            "kant_gpu_running_milli_seconds",
            "Integral over time of the milli-GPUs of fully placed jobs, in milli-GPU-seconds; \
             SOR over a window = rate(this) / rate(kant_gpu_capacity_milli_seconds_total).",
            per_second(series.run),
        )?;
        counter(
            encoder,
            "kant_gpu_capacity_milli_seconds",
            "Integral over time of the cluster's milli-GPUs, in milli-GPU-seconds.",
            per_second(series.capacity),
        )?;
        counter(
            encoder,
            "kant_gpu_nodes_fragmented_seconds",
            "Integral over time of the fragmented GPU nodes (assigned above 0 and below \
             capacity), in node-seconds; GFR over a window = rate(this) / \
             rate(kant_gpu_nodes_seconds_total).",
            per_second(series.fragmented),
        )?;
        counter(
            encoder,
            "kant_gpu_nodes_seconds",
            "Integral over time of the GPU nodes, in node-seconds.",
            per_second(series.nodes),
        )?;
        gauge(
            encoder,
            "kant_gpus_allocated_milli",
            "Milli-GPUs assigned now (running or only reserved).",
            level.alloc_milli,
        )?;
        gauge(
            encoder,
            "kant_gpus_running_milli",
            "Milli-GPUs assigned now to jobs whose every pod is placed.",
            level.run_milli,
        )?;
        gauge(
            encoder,
            "kant_gpus_capacity_milli",
            "The cluster's milli-GPUs now.",
            level.total_milli,
        )?;
        gauge(
            encoder,
            "kant_gpu_nodes_fragmented",
            "GPU nodes assigned above 0 and below capacity now.",
            level.fragmented_nodes,
        )?;
        gauge(encoder, "kant_gpu_nodes", "GPU nodes now.", level.gpu_nodes)?;

        let report = &self.report;
        gauge(
            encoder,
            "kant_gar_mean",
            "GAR since the first submission: time-average of assigned / capacity.",
            report.gar_mean.unwrap_or(f64::NAN),
        )?;
        gauge(
            encoder,
            "kant_gar_p50",
            "GAR since the first submission: lower time-weighted median.",
            report.gar_p50.unwrap_or(f64::NAN),
        )?;
        gauge(
            encoder,
            "kant_sor",
            "SOR since the first submission: time-average of running / capacity.",
            report.sor.unwrap_or(f64::NAN),
        )?;
        gauge(
            encoder,
            "kant_gfr_mean",
            "GFR since the first submission: time-average of fragmented / GPU nodes.",
            report.gfr_mean.unwrap_or(f64::NAN),
        )?;
        gauge(
            encoder,
            "kant_metrics_window_seconds",
            "Length of the window of kant_gar_mean, kant_gar_p50, kant_sor and kant_gfr_mean.",
            report.window_s,
        )?;

        counter(
            encoder,
            "kant_jobs_submitted",
            "Jobs submitted.",
            self.jobs_submitted,
        )?;
        counter(
            encoder,
            "kant_jobs_placed",
            "Jobs whose pods were all placed at least once.",
            self.jobs_placed,
        )?;
        counter(
            encoder,
            "kant_jobs_withdrawn",
            "Jobs deleted before their pods were ever all placed.",
            self.jobs_withdrawn,
        )?;
        gauge(
            encoder,
            "kant_jobs_never_placed",
            "Jobs submitted, still there, whose pods were never all placed.",
            (self.jobs_submitted)
                .saturating_sub(self.jobs_placed)
                .saturating_sub(self.jobs_withdrawn),
        )?;

        labelled_gauges(
            encoder,
            "kant_job_wait_p50_seconds",
            "Median job wait (nearest rank) by job size, since start.",
            "size",
            report
                .jwtd
                .iter()
                .filter_map(|(b, s)| s.p50.map(|v| (b.label(), v))),
        )?;
        labelled_gauges(
            encoder,
            "kant_job_wait_p95_seconds",
            "95th percentile job wait (nearest rank) by job size, since start.",
            "size",
            report
                .jwtd
                .iter()
                .filter_map(|(b, s)| s.p95.map(|v| (b.label(), v))),
        )?;
        labelled_gauges(
            encoder,
            "kant_jtted_node_deviation",
            "JTTED: mean of nodes used / ideal nodes by job size (1 is optimal), since start.",
            "size",
            report
                .jtted
                .iter()
                .filter_map(|(b, s)| s.node_dev.map(|v| (b.label(), v))),
        )?;
        labelled_gauges(
            encoder,
            "kant_jtted_group_deviation",
            "JTTED: mean of leaf groups used / ideal groups by job size (1 is optimal), since \
             start.",
            "size",
            report
                .jtted
                .iter()
                .filter_map(|(b, s)| s.group_dev.map(|v| (b.label(), v))),
        )?;

        labelled_gauges(
            encoder,
            "kant_queue_pending_jobs",
            "Jobs waiting in each queue.",
            "queue",
            self.queues.iter().map(|(queue, &n)| (queue.as_str(), n)),
        )?;
        labelled_gauges(
            encoder,
            "kant_shard_overlap",
            "1 for each other shard's Lease whose leader schedules GPU models (or pods naming \
             none) that this shard schedules too: a misconfiguration, as both place pods on \
             the same nodes unaware of the other's bindings in flight.",
            "lease",
            self.shard_overlaps
                .iter()
                .map(|lease| (lease.as_str(), 1u64)),
        )?;
        labelled_gauges(
            encoder,
            "kant_isolated_quota_excess_gpus",
            "GPUs by which the isolated queues' quotas exceed a GPU model's GPUs, where they \
             do: those quotas cannot all be held, and an isolated queue within its quota may \
             wait.",
            "gpu_model",
            (self.isolated_quota_excess.iter()).map(|(model, &gpus)| (model.as_str(), gpus)),
        )?;
        labelled_counters(
            encoder,
            "kant_preemptions",
            "Jobs preempted, by kind.",
            "kind",
            self.preemptions
                .iter()
                .map(|(kind, p)| (kind.as_str(), p.count)),
        )?;
        labelled_counters(
            encoder,
            "kant_preempted_gpu_seconds",
            "GPU-seconds the preempted jobs had run, by kind.",
            "kind",
            self.preemptions
                .iter()
                .map(|(kind, p)| (kind.as_str(), p.milli_ms as f64 / 1_000_000.0)),
        )
    }
}

/// One unlabelled counter (the encoder appends `_total` to `name`).
fn counter<N: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> fmt::Result {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// One unlabelled gauge.
fn gauge<N: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> fmt::Result {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// A family of gauges with the one label `label`; described even when empty.
fn labelled_gauges<'a, N: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: impl Iterator<Item = (&'a str, N)>,
) -> fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (value_label, value) in values {
        let labels = [(label, value_label)];
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A family of counters with the one label `label` (the encoder appends `_total` to `name`).
fn labelled_counters<'a, N: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: impl Iterator<Item = (&'a str, N)>,
) -> fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (value_label, value) in values {
        let labels = [(label, value_label)];
        ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1000;

    /// The value of the sample `series` (its name and labels, as written) in `text`.
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            value.parse().ok()
        })
    }

    /// [`sample`], which must be there.
    fn value(text: &str, series: &str) -> f64 {
        sample(text, series).unwrap_or_else(|| panic!("no sample `{series}` in\n{text}"))
    }

    fn encoded(metrics: &LiveMetrics) -> String {
        metrics.encode().expect("the metrics encode")
    }

    fn close(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() < 1e-12,
            "expected {expected}, got {actual}"
        );
    }

    #[test]
    fn shared_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<LiveMetrics>();
    }

    #[test]
    fn integrals_are_exact_and_gauges_match_the_collector() {
        let metrics = LiveMetrics::new();
        let mut reference = MetricsCollector::new(16_000, 2, None);
        metrics.job_submitted(0);
        reference.job_submitted(0);
        for (t, alloc, fragmented) in [(0, 8_000, 1), (10 * S, 16_000, 0), (20 * S, 0, 0)] {
            metrics.observe(t, alloc, alloc, fragmented, 16_000, 2);
            reference.observe(t, alloc, alloc, fragmented);
        }
        metrics.refresh(30 * S);
        let text = encoded(&metrics);

        let expected = (8_000 * 10 + 16_000 * 10) as f64;
        assert_eq!(
            value(&text, "kant_gpu_allocated_milli_seconds_total"),
            expected
        );
        assert_eq!(
            value(&text, "kant_gpu_running_milli_seconds_total"),
            expected
        );
        assert_eq!(
            value(&text, "kant_gpu_capacity_milli_seconds_total"),
            16_000.0 * 30.0
        );
        assert_eq!(
            value(&text, "kant_gpu_nodes_fragmented_seconds_total"),
            10.0
        );
        assert_eq!(value(&text, "kant_gpu_nodes_seconds_total"), 60.0);
        assert_eq!(value(&text, "kant_gpus_allocated_milli"), 0.0);
        assert_eq!(value(&text, "kant_gpus_capacity_milli"), 16_000.0);
        assert_eq!(value(&text, "kant_gpu_nodes"), 2.0);

        let report = reference.report(30 * S);
        close(report.gar_mean.unwrap(), 0.5);
        close(report.gar_p50.unwrap(), 0.5);
        close(value(&text, "kant_gar_mean"), report.gar_mean.unwrap());
        close(value(&text, "kant_gar_p50"), report.gar_p50.unwrap());
        close(value(&text, "kant_sor"), report.sor.unwrap());
        close(value(&text, "kant_gfr_mean"), report.gfr_mean.unwrap());
        assert_eq!(value(&text, "kant_metrics_window_seconds"), 30.0);
        assert_eq!(value(&text, "kant_jobs_submitted_total"), 1.0);
        assert_eq!(value(&text, "kant_jobs_never_placed"), 1.0);
    }

    /// A standby's cache is not the cluster's figures: it says it stands by, and exports
    /// none of them (a capacity of 0, a GAR of NaN, would skew every sum and average).
    #[test]
    fn a_standby_exports_that_it_stands_by_and_none_of_the_leaders_figures() {
        let metrics = LiveMetrics::new();
        metrics.observe(0, 1_000, 1_000, 0, 8_000, 1);
        assert_eq!(value(&encoded(&metrics), "kant_leader"), 1.0);
        assert_eq!(
            value(&encoded(&metrics), "kant_gpus_capacity_milli"),
            8000.0
        );
        metrics.set_leading(false);
        let text = encoded(&metrics);
        assert_eq!(value(&text, "kant_leader"), 0.0);
        for absent in [
            "kant_gpus_capacity_milli",
            "kant_gar_mean",
            "kant_jobs_never_placed",
        ] {
            assert_eq!(sample(&text, absent), None, "{absent} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn gauges_of_the_report_wait_for_a_refresh() {
        let metrics = LiveMetrics::new();
        metrics.job_submitted(0);
        metrics.observe(0, 16_000, 16_000, 0, 16_000, 2);
        // Before any refresh: the empty report (an average over no time: NaN); the
        // integrals as of the latest observation.
        let text = encoded(&metrics);
        assert!(value(&text, "kant_gar_mean").is_nan());
        assert_eq!(value(&text, "kant_gpu_capacity_milli_seconds_total"), 0.0);
        assert_eq!(value(&text, "kant_gpus_allocated_milli"), 16_000.0);

        metrics.refresh(4 * S);
        let text = encoded(&metrics);
        assert_eq!(value(&text, "kant_gar_mean"), 1.0);
        assert_eq!(
            value(&text, "kant_gpu_capacity_milli_seconds_total"),
            16_000.0 * 4.0
        );
        // An observation dated before the refresh does not rewrite the past, on either side.
        metrics.observe(2 * S, 0, 0, 0, 16_000, 2);
        metrics.refresh(4 * S);
        let text = encoded(&metrics);
        assert_eq!(
            value(&text, "kant_gpu_allocated_milli_seconds_total"),
            16_000.0 * 4.0
        );
        assert_eq!(value(&text, "kant_gar_mean"), 1.0);
    }

    #[test]
    fn a_changing_capacity_integrates_exactly() {
        let metrics = LiveMetrics::new();
        metrics.job_submitted(0);
        // 8 of 16 GPUs for 10 s, then 8 of 32 (two nodes joined) for 10 s.
        metrics.observe(0, 8_000, 8_000, 1, 16_000, 2);
        metrics.observe(10 * S, 8_000, 0, 1, 32_000, 4);
        metrics.refresh(20 * S);
        let text = encoded(&metrics);

        let alloc = value(&text, "kant_gpu_allocated_milli_seconds_total");
        let capacity = value(&text, "kant_gpu_capacity_milli_seconds_total");
        assert_eq!(alloc, 8_000.0 * 20.0);
        assert_eq!(capacity, 16_000.0 * 10.0 + 32_000.0 * 10.0);
        assert_eq!(
            value(&text, "kant_gpu_running_milli_seconds_total"),
            80_000.0
        );
        assert_eq!(
            value(&text, "kant_gpu_nodes_fragmented_seconds_total"),
            20.0
        );
        assert_eq!(value(&text, "kant_gpu_nodes_seconds_total"), 60.0);
        assert_eq!(value(&text, "kant_gpus_capacity_milli"), 32_000.0);
        assert_eq!(value(&text, "kant_gpu_nodes"), 4.0);
        // Capacity-weighted, from the counters: GPU-time assigned / GPU-time that existed.
        close(alloc / capacity, 1.0 / 3.0);
        // The since-start gauges: the GAR series is 0.5 for 10 s, then 0.25 for 10 s.
        close(value(&text, "kant_gar_mean"), 0.375);
        close(value(&text, "kant_gar_p50"), 0.25);
        close(value(&text, "kant_sor"), 0.25);
        close(value(&text, "kant_gfr_mean"), (0.5 + 0.25) / 2.0);
    }

    #[test]
    fn the_gar_median_keeps_a_bounded_table_as_the_capacity_changes() {
        let metrics = LiveMetrics::new();
        metrics.job_submitted(0);
        // 1 GPU assigned of a capacity that grows by a milli-GPU each second: the GAR
        // series takes 20,000 values, from 1/3 down.
        for i in 0..20_000u64 {
            metrics.observe(i * S, 1_000, 1_000, 0, 3_000 + i, 1);
        }
        metrics.refresh(20_000 * S);
        let levels = lock(&metrics.feed).collector.alloc_time.len();
        assert!(levels <= 10_001, "{levels} levels");
        // Resolved to 10^-4 of the capacity, rounded down: 1/3 reads 0.3333.
        let metrics = LiveMetrics::new();
        metrics.job_submitted(0);
        metrics.observe(0, 1_000, 1_000, 0, 3_000, 1);
        metrics.refresh(10 * S);
        let text = encoded(&metrics);
        close(value(&text, "kant_gar_p50"), 0.3333);
        close(value(&text, "kant_gar_mean"), 1.0 / 3.0);
    }

    #[test]
    fn no_capacity_counts_as_zero() {
        let metrics = LiveMetrics::new();
        metrics.job_submitted(0);
        metrics.observe(0, 0, 0, 0, 0, 0);
        metrics.observe(10 * S, 8_000, 8_000, 0, 8_000, 1);
        metrics.refresh(20 * S);
        let text = encoded(&metrics);
        close(value(&text, "kant_gar_mean"), 0.5);
        assert_eq!(
            value(&text, "kant_gpu_capacity_milli_seconds_total"),
            80_000.0
        );
    }

    #[test]
    fn waits_fall_into_their_size() {
        let metrics = LiveMetrics::new();
        for _ in 0..3 {
            metrics.job_submitted(0);
        }
        // 1.5 GPUs waited 2.5 s; a CPU-only job 0.05 s; one GPU 40 s, spread over 2 nodes.
        let spread = PlacementSpread::new(1_000, 2, 8, None, None);
        metrics.job_first_placed(2_500, 0, 1_500, None);
        metrics.job_first_placed(50, 0, 0, None);
        metrics.job_first_placed(40 * S, 0, 1_000, Some(spread));
        metrics.refresh(40 * S);
        let text = encoded(&metrics);

        let bucket = |size: &str, le: &str| {
            value(
                &text,
                &format!("kant_job_wait_seconds_bucket{{le=\"{le}\",size=\"{size}\"}}"),
            )
        };
        assert_eq!(bucket("2-8", "1.0"), 0.0);
        assert_eq!(bucket("2-8", "2.5"), 1.0);
        assert_eq!(bucket("0", "0.1"), 1.0);
        assert_eq!(bucket("1", "30.0"), 0.0);
        assert_eq!(bucket("1", "60.0"), 1.0);
        assert_eq!(bucket("<1", "+Inf"), 0.0);
        assert_eq!(
            value(&text, "kant_job_wait_seconds_count{size=\"2-8\"}"),
            1.0
        );
        assert_eq!(value(&text, "kant_job_wait_seconds_sum{size=\"2-8\"}"), 2.5);
        assert_eq!(value(&text, "kant_job_wait_p50_seconds{size=\"2-8\"}"), 2.5);
        assert_eq!(value(&text, "kant_job_wait_p95_seconds{size=\"1\"}"), 40.0);
        assert_eq!(
            sample(&text, "kant_job_wait_p50_seconds{size=\"<1\"}"),
            None
        );
        assert_eq!(value(&text, "kant_jtted_node_deviation{size=\"1\"}"), 2.0);
        assert_eq!(
            sample(&text, "kant_jtted_node_deviation{size=\"2-8\"}"),
            None
        );
        assert_eq!(
            sample(&text, "kant_jtted_group_deviation{size=\"1\"}"),
            None
        );
        assert_eq!(value(&text, "kant_jobs_placed_total"), 3.0);
        assert_eq!(value(&text, "kant_jobs_never_placed"), 0.0);
    }

    #[test]
    fn queues_come_and_go() {
        let metrics = LiveMetrics::new();
        metrics.queue_depth("team-a", 3);
        metrics.queue_depth("team-b", 5);
        let text = encoded(&metrics);
        assert_eq!(
            value(&text, "kant_queue_pending_jobs{queue=\"team-a\"}"),
            3.0
        );
        assert_eq!(
            value(&text, "kant_queue_pending_jobs{queue=\"team-b\"}"),
            5.0
        );

        metrics.remove_queue("team-a");
        let text = encoded(&metrics);
        assert_eq!(
            sample(&text, "kant_queue_pending_jobs{queue=\"team-a\"}"),
            None
        );
        assert_eq!(
            value(&text, "kant_queue_pending_jobs{queue=\"team-b\"}"),
            5.0
        );

        metrics.set_queue_depths([("team-c".to_owned(), 1)]);
        let text = encoded(&metrics);
        assert_eq!(
            sample(&text, "kant_queue_pending_jobs{queue=\"team-b\"}"),
            None
        );
        assert_eq!(
            value(&text, "kant_queue_pending_jobs{queue=\"team-c\"}"),
            1.0
        );
        // The family stays described with no queue at all.
        metrics.set_queue_depths(Vec::new());
        let text = encoded(&metrics);
        assert!(text.contains("# TYPE kant_queue_pending_jobs gauge\n"));
        assert!(!text.contains("kant_queue_pending_jobs{"));
    }

    #[test]
    fn rounds_bindings_and_preemptions() {
        let metrics = LiveMetrics::new();
        metrics.round(Duration::from_millis(3), 4);
        metrics.round(Duration::from_millis(30), 2);
        metrics.bind(Duration::from_millis(7), Ok(()));
        metrics.bind(Duration::from_millis(20), Err("409".to_owned()));
        metrics.bind(Duration::from_secs(2), Err("network".to_owned()));
        metrics.bind(Duration::from_millis(20), Err("409".to_owned()));
        metrics.preempted("priority", 2_000, 30 * S);
        metrics.preempted("priority", 500, 4 * S);
        metrics.preempted("quota-reclaim", 8_000, 1);
        let text = encoded(&metrics);

        assert_eq!(value(&text, "kant_scheduling_round_seconds_count"), 2.0);
        assert_eq!(
            value(&text, "kant_scheduling_round_seconds_bucket{le=\"0.005\"}"),
            1.0
        );
        assert_eq!(value(&text, "kant_scheduling_decisions_total"), 6.0);
        assert_eq!(value(&text, "kant_bind_seconds_count"), 4.0);
        assert_eq!(value(&text, "kant_bind_seconds_bucket{le=\"0.01\"}"), 1.0);
        assert_eq!(value(&text, "kant_bind_errors_total{code=\"409\"}"), 2.0);
        assert_eq!(
            value(&text, "kant_bind_errors_total{code=\"network\"}"),
            1.0
        );
        assert_eq!(
            value(&text, "kant_preemptions_total{kind=\"priority\"}"),
            2.0
        );
        assert_eq!(
            value(&text, "kant_preemptions_total{kind=\"backfill\"}"),
            0.0
        );
        assert_eq!(
            value(&text, "kant_preempted_gpu_seconds_total{kind=\"priority\"}"),
            2.0 * 30.0 + 0.5 * 4.0
        );
        assert_eq!(
            value(
                &text,
                "kant_preempted_gpu_seconds_total{kind=\"quota-reclaim\"}"
            ),
            0.008
        );
    }

    #[test]
    fn preemption_kinds_are_the_frameworks() {
        use crate::framework::PreemptionKind;
        let names = [
            PreemptionKind::Priority,
            PreemptionKind::QuotaReclaim,
            PreemptionKind::Backfill,
        ]
        .map(PreemptionKind::name);
        assert_eq!(names, PREEMPTION_KINDS);
    }

    #[test]
    fn the_text_is_described_and_terminated() {
        let metrics = LiveMetrics::new();
        let text = encoded(&metrics);
        for described in [
            "# HELP kant_gar_mean ",
            "# TYPE kant_gar_mean gauge\n",
            "# TYPE kant_gpu_allocated_milli_seconds counter\n",
            "# TYPE kant_job_wait_seconds histogram\n",
            "# TYPE kant_preemptions counter\n",
        ] {
            assert!(text.contains(described), "no `{described}` in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
        // Every size's histogram exists before any job.
        for bucket in SizeBucket::ALL {
            let count = format!("kant_job_wait_seconds_count{{size=\"{}\"}}", bucket.label());
            assert_eq!(value(&text, &count), 0.0);
        }
    }

    #[test]
    fn scrapes_run_beside_the_writer() {
        let metrics = LiveMetrics::new();
        metrics.job_submitted(0);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for i in 0..1_000u64 {
                    metrics.observe(i * S, 1_000, 1_000, 0, 16_000, 2);
                }
                metrics.refresh(1_000 * S);
            });
            scope.spawn(|| {
                for _ in 0..50 {
                    assert!(encoded(&metrics).ends_with("# EOF\n"));
                }
            });
        });
        let text = encoded(&metrics);
        assert_eq!(
            value(&text, "kant_gpu_allocated_milli_seconds_total"),
            1_000.0 * 1_000.0
        );
    }
}
