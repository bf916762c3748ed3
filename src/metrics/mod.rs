//! The paper's metrics (Kant section 4, defined exactly in DESIGN.md): the accumulators for
//! GAR, SOR and GFR (exact time integrals of piecewise-constant series over the submission
//! window), JWTD (job wait times per size bucket) and JTTED (placement spread per size
//! bucket). The simulator's report and the live `/metrics` endpoint (`live`) share them.
//!
//! This module knows no cluster and no scheduler: it is fed numbers (times in integer
//! milliseconds, GPU amounts in integer milli-GPUs) by whoever watches the cluster, and
//! turns them into a [`MetricsReport`]. Integrals are kept exact in `u128` and become `f64`
//! only in the report.

mod buckets;
pub mod live;
mod report;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

pub use buckets::{PlacementSpread, SizeBucket};
pub use report::{Jtted, Jwtd, MetricsReport, SpreadStats, WaitStats};

use buckets::MILLI;

/// The value of the observed series from `since_ms` until the next observation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Level {
    since_ms: u64,
    alloc_milli: u64,
    run_milli: u64,
    fragmented_nodes: u32,
}

/// Exact integrals over the part of the window seen so far: value × milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Integrals {
    /// ∫ alloc dt, milli-GPU·ms.
    alloc: u128,
    /// ∫ run dt, milli-GPU·ms.
    run: u128,
    /// ∫ fragmented nodes dt, node·ms.
    fragmented: u128,
}

impl Integrals {
    /// Adds `level` held for `dur_ms`.
    fn add(&mut self, level: &Level, dur_ms: u64) {
        let dur = u128::from(dur_ms);
        self.alloc += u128::from(level.alloc_milli) * dur;
        self.run += u128::from(level.run_milli) * dur;
        self.fragmented += u128::from(level.fragmented_nodes) * dur;
    }
}

/// Running sums of one JTTED bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct SpreadSums {
    count: u64,
    node_dev_sum: f64,
    group_count: u64,
    group_dev_sum: f64,
}

/// The accumulators of every metric. Feed it submissions, observations of the cluster's
/// GPU assignment after each change, and first placements; ask it for a report at any time.
///
/// Calls are expected in non-decreasing time across all methods (a submission at t before or
/// after the observations at the same t makes no difference). Before the first observation
/// the series are 0 (nothing assigned). An observation earlier than the previous one is
/// taken as happening at the previous one's time: the collector never rewrites the past.
#[derive(Debug, Clone)]
pub struct MetricsCollector {
    total_milli: u64,
    gpu_nodes: u32,
    window_end_ms: Option<u64>,
    /// The first submission's time: the window's start; None until a job is submitted.
    window_start_ms: Option<u64>,
    jobs_submitted: u64,
    jobs_placed: u64,
    /// The series' value since the latest observation (not yet integrated).
    current: Level,
    /// Integrals over the window up to `current.since_ms`.
    integrals: Integrals,
    /// alloc_milli, rounded down to a multiple of `median_step`, → milliseconds of the
    /// window spent at that value, up to `current.since_ms` (for the time-weighted median
    /// of GAR).
    alloc_time: BTreeMap<u64, u128>,
    /// The resolution of GAR's median, in alloc_milli units: 1 (exact) unless set.
    median_step: u64,
    /// Waits in milliseconds of the placed jobs, per bucket.
    waits: [WaitList; 8],
    /// JTTED sums per bucket.
    spreads: [SpreadSums; 8],
}

impl MetricsCollector {
    /// `total_milli`: the cluster's GPU capacity in milli-GPUs (GPU nodes only); `gpu_nodes`:
    /// number of nodes with GPUs; `window_end_ms`: the last submission time when known in
    /// advance (the simulator), None for a live, open window (which then ends at the time
    /// asked for in [`MetricsCollector::report`]).
    pub fn new(total_milli: u64, gpu_nodes: u32, window_end_ms: Option<u64>) -> Self {
        MetricsCollector {
            total_milli,
            gpu_nodes,
            window_end_ms,
            window_start_ms: None,
            jobs_submitted: 0,
            jobs_placed: 0,
            current: Level::default(),
            integrals: Integrals::default(),
            alloc_time: BTreeMap::new(),
            median_step: 1,
            waits: Default::default(),
            spreads: [SpreadSums::default(); 8],
        }
    }

    /// GAR's median resolved to multiples of `step` alloc_milli units, rounded down: its
    /// table then holds at most `total_milli / step + 1` levels, however many values the
    /// series takes (a live series scaled to a changing capacity takes ever new ones).
    pub fn with_median_step(mut self, step: u64) -> Self {
        self.median_step = step.max(1);
        self
    }

    /// `alloc_milli` as GAR's median resolves it.
    fn median_level(&self, alloc_milli: u64) -> u64 {
        alloc_milli - alloc_milli % self.median_step
    }

    /// A job was submitted at `t_ms`. The first call opens the window.
    pub fn job_submitted(&mut self, t_ms: u64) {
        self.jobs_submitted += 1;
        if self.window_start_ms.is_none() {
            self.window_start_ms = Some(t_ms);
        }
    }

    /// From `t_ms` on (until the next call), `alloc_milli` GPUs are assigned (running or only
    /// reserved), `run_milli` are assigned to jobs whose every pod is placed, and
    /// `fragmented_nodes` GPU nodes have assigned milli-GPUs above 0 and below capacity.
    /// Calls come in non-decreasing time; several at the same t: the last one wins for the
    /// following interval.
    ///
    /// O(log k) in the number k of distinct `alloc_milli` levels seen (see
    /// [`Self::with_median_step`]); allocates only when a new level is first met.
    pub fn observe(&mut self, t_ms: u64, alloc_milli: u64, run_milli: u64, fragmented_nodes: u32) {
        let t_ms = t_ms.max(self.current.since_ms);
        let cap = self.window_end_ms.unwrap_or(u64::MAX);
        if let Some(dur) = self.clipped(t_ms.min(cap)) {
            self.integrals.add(&self.current, dur);
            let level = self.median_level(self.current.alloc_milli);
            *self.alloc_time.entry(level).or_insert(0) += u128::from(dur);
        }
        self.current = Level {
            since_ms: t_ms,
            alloc_milli,
            run_milli,
            fragmented_nodes,
        };
    }

    /// A job's pods became all placed for the first time at `t_ms` (submitted at
    /// `submit_ms`); `total_milli` its total request. `spread` is None for jobs of less than
    /// one GPU (JTTED counts jobs of at least 1 GPU = 1000 milli; a spread given for a
    /// smaller job is ignored).
    pub fn job_first_placed(
        &mut self,
        t_ms: u64,
        submit_ms: u64,
        total_milli: u64,
        spread: Option<PlacementSpread>,
    ) {
        self.jobs_placed += 1;
        let bucket = SizeBucket::of(total_milli).index();
        self.waits[bucket].push(t_ms.saturating_sub(submit_ms));
        if let Some(spread) = spread.filter(|_| total_milli >= MILLI) {
            let sums = &mut self.spreads[bucket];
            sums.count += 1;
            sums.node_dev_sum += ratio(spread.nodes_used, spread.ideal_nodes);
            if let Some((used, ideal)) = spread.groups {
                sums.group_count += 1;
                sums.group_dev_sum += ratio(used, ideal);
            }
        }
    }

    /// The report over the window [first submission, min(window_end, now_ms)]. Does not
    /// mutate.
    ///
    /// A `now_ms` before the latest observation counts as that observation's time. When the
    /// window is empty or has zero length (no submission yet, one submission, all at one
    /// instant), `gar_mean`, `gar_p50`, `sor` and `gfr_mean` are `None`: an average over no
    /// time is undefined. The GAR and SOR figures of a cluster of zero capacity, and GFR of
    /// a cluster of no GPU nodes, are 0.0. JWTD,
    /// JTTED and the job counts cover every job, whatever the window.
    pub fn report(&self, now_ms: u64) -> MetricsReport {
        let now_ms = now_ms.max(self.current.since_ms);
        let end_ms = self.window_end_ms.map_or(now_ms, |end| end.min(now_ms));
        let window_ms = self
            .window_start_ms
            .map_or(0, |start| end_ms.saturating_sub(start));

        let mut integrals = self.integrals;
        let pending = self.clipped(end_ms);
        if let Some(dur) = pending {
            integrals.add(&self.current, dur);
        }

        let (gar_mean, gar_p50, sor, gfr_mean) = if window_ms == 0 {
            (None, None, None, None)
        } else {
            let w = u128::from(window_ms);
            let capacity = u128::from(self.total_milli) * w;
            let median = self.alloc_median(window_ms, pending);
            (
                Some(fraction(integrals.alloc, capacity)),
                Some(fraction(u128::from(median), u128::from(self.total_milli))),
                Some(fraction(integrals.run, capacity)),
                Some(fraction(
                    integrals.fragmented,
                    u128::from(self.gpu_nodes) * w,
                )),
            )
        };

        MetricsReport {
            gar_mean,
            gar_p50,
            sor,
            gfr_mean,
            jwtd: Jwtd(std::array::from_fn(|i| wait_stats(&self.waits[i]))),
            jtted: Jtted(std::array::from_fn(|i| spread_stats(&self.spreads[i]))),
            jobs_submitted: self.jobs_submitted,
            jobs_placed: self.jobs_placed,
            jobs_never_placed: self.jobs_submitted.saturating_sub(self.jobs_placed),
            window_s: window_ms as f64 / 1000.0,
        }
    }

    /// The length of the current level's interval [since, upto) inside the window's start
    /// (the caller clips the end), when positive; None while the window is not open.
    fn clipped(&self, upto_ms: u64) -> Option<u64> {
        let start = self.window_start_ms?;
        let from = self.current.since_ms.max(start);
        let dur = upto_ms.saturating_sub(from);
        (dur > 0).then_some(dur)
    }

    /// The lower time-weighted median of alloc_milli over a window of `window_ms`: the
    /// smallest value v taken for a positive time with time(alloc <= v) >= window / 2. The
    /// current level, held for `pending` ms not yet in the map, is merged in on the fly.
    fn alloc_median(&self, window_ms: u64, pending: Option<u64>) -> u64 {
        let window = u128::from(window_ms);
        let pending_value = self.median_level(self.current.alloc_milli);
        let mut pending_ms = pending.map_or(0, u128::from);
        let mut cumulated: u128 = 0;
        // Every stored time is positive, so each value met is one GAR takes.
        for (&value, &ms) in &self.alloc_time {
            if pending_ms > 0 && pending_value < value {
                cumulated += std::mem::take(&mut pending_ms);
                if 2 * cumulated >= window {
                    return pending_value;
                }
            }
            cumulated += ms;
            if value == pending_value {
                cumulated += std::mem::take(&mut pending_ms);
            }
            if 2 * cumulated >= window {
                return value;
            }
        }
        if pending_ms > 0 {
            return pending_value;
        }
        // The times add up to the window, so the loop has returned; fall back to the largest.
        self.alloc_time.keys().next_back().copied().unwrap_or(0)
    }
}

/// `used / ideal` (an ideal of 0 counts as 1).
fn ratio(used: u32, ideal: u32) -> f64 {
    f64::from(used) / f64::from(ideal.max(1))
}

/// `num / den` as f64, 0.0 when `den` is 0.
fn fraction(num: u128, den: u128) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// One bucket's waits in milliseconds, kept so that a report never sorts them all again
/// (the live endpoint reports every second, over every job since start): in sorted runs of
/// distinct power-of-two sizes, as a binary counter keeps its bits, so that a wait is
/// merged O(log n) times in all and a rank is found across at most log n runs.
#[derive(Debug, Clone, Default)]
struct WaitList {
    /// Longest first.
    runs: Vec<Vec<u64>>,
    sum_ms: u128,
}

impl WaitList {
    fn push(&mut self, wait_ms: u64) {
        self.sum_ms += u128::from(wait_ms);
        let mut run = vec![wait_ms];
        while self.runs.last().is_some_and(|last| last.len() <= run.len()) {
            let Some(mut last) = self.runs.pop() else {
                break;
            };
            last.append(&mut run);
            // Two sorted runs: the stable sort merges them in linear time.
            last.sort();
            run = last;
        }
        self.runs.push(run);
    }

    fn len(&self) -> usize {
        self.runs.iter().map(Vec::len).sum()
    }

    /// The value at rank ceil(p/100 × n) (1-based, at least 1); None when empty. It is the
    /// least value of any run with at least that many values at or below it.
    fn nearest_rank(&self, p: usize) -> Option<u64> {
        let rank = (p * self.len()).div_ceil(100).max(1);
        let at_or_below = |v: u64| -> usize {
            self.runs
                .iter()
                .map(|run| run.partition_point(|&w| w <= v))
                .sum()
        };
        self.runs
            .iter()
            .filter_map(|run| run.get(run.partition_point(|&v| at_or_below(v) < rank)))
            .min()
            .copied()
    }
}

/// Count, mean and nearest-rank percentiles (in seconds) of waits in milliseconds.
fn wait_stats(waits: &WaitList) -> WaitStats {
    let n = waits.len();
    if n == 0 {
        return WaitStats::default();
    }
    let seconds = |ms: u64| ms as f64 / 1000.0;
    WaitStats {
        count: n as u64,
        mean: Some(waits.sum_ms as f64 / n as f64 / 1000.0),
        p50: waits.nearest_rank(50).map(seconds),
        p95: waits.nearest_rank(95).map(seconds),
    }
}

/// Mean deviations of one JTTED bucket.
fn spread_stats(sums: &SpreadSums) -> SpreadStats {
    let mean = |sum: f64, count: u64| (count > 0).then(|| sum / count as f64);
    SpreadStats {
        count: sums.count,
        node_dev: mean(sums.node_dev_sum, sums.count),
        group_dev: mean(sums.group_dev_sum, sums.group_count),
    }
}
