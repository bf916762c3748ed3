//! The discrete-event loop on a virtual clock: arrivals from the workload, completions a
//! job's duration after all its pods are placed, and a scheduling round after each instant's
//! events. It drives the very same `Scheduler` the Kubernetes world does; the binder
//! here binds at once.
//!
//! A fill replay ([`fill_workload`], `simulate --fill`) measures fragmentation as the FGD
//! paper does: jobs arrive one by one and never finish, a job that does not fit when it
//! arrives is dropped (nothing is preempted), and the GPUs allocated are read as the
//! demand arrived grows.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cache::PodKey;
use crate::framework::{
    Bind, Decision, JobPlan, Plugin, PreemptionKind, Profile, Scheduler, Status,
};
use crate::metrics::{MetricsCollector, MetricsReport};
use crate::model::{ClusterSpec, Job, JobId, MILLI_PER_GPU, TenantId, thousandths};
use crate::queue::Tenants;

use super::events::EventLog;
use super::link_audit::LinkAudit;
use super::tenant_report::{TenantReport, TenantSeries};
use super::trace::{MAX_TIME_MS, MAX_TRACE_JOBS, MAX_TRACE_PODS, Workload, format_seconds};

/// The simulator's binder: a pod is bound the moment it is placed.
pub(super) struct InstantBinder;

impl Plugin for InstantBinder {
    fn name(&self) -> &'static str {
        "instant-binder"
    }
}

impl Bind for InstantBinder {
    fn bind(&self, _job: &Job, _plan: &JobPlan) -> Status {
        Status::SUCCESS
    }
}

/// What one replay measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunReport {
    pub profile: String,
    /// Per tenant: quota, and quota in use, borrowed GPUs and pending jobs over time.
    pub tenants: Vec<TenantReport>,
    /// Jobs whose tenant the configuration does not know (they went to the default).
    pub jobs_unknown_tenant: u64,
    #[serde(flatten)]
    pub metrics: MetricsReport,
    /// Jobs read from the workload, skipped rows included.
    pub jobs_total: u64,
    pub jobs_skipped: u64,
    /// Virtual time from the first submission to the last event (the drain included).
    pub sim_span_s: f64,
    /// Wall-clock seconds the replay took.
    pub wall_s: f64,
    /// Pods placed per wall-clock second.
    pub placements_per_s: f64,
    pub pods_placed: u64,
    pub preemptions: PreemptionStats,
    /// Multi-GPU pods off NVLink while an NVLink set was free.
    pub nvlink: LinkAudit,
    /// The jobs still waiting when the replay ended, each with why it could not be placed
    /// on the cluster as the replay left it; in a fill, the jobs dropped, each with why it
    /// could not be placed when it arrived.
    pub never_placed: Vec<NeverPlaced>,
    /// A fill replay's figures; `None` for a timed replay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fill: Option<FillReport>,
}

/// How a replay runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplayOptions {
    /// Show a progress bar on standard error.
    pub progress: bool,
    /// A fill replay: no job finishes, one that does not fit on arrival is dropped, no
    /// gang waits for a tighter placement and nothing is preempted (a victim would never
    /// come back).
    pub fill: bool,
    /// Search every job the queues offer again, even where no room came back that its
    /// last search could use: slower, and deciding the same wherever tests compared the
    /// two (benches time both).
    pub repeat_every_search: bool,
}

/// A fill replay's figures: the GPUs allocated as the demand arrived grows.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FillReport {
    /// One point each time the GPU demand arrived first reaches another tenth of the
    /// cluster's GPUs, after the round of the job that reached it.
    pub points: Vec<FillPoint>,
    /// Jobs that did not fit when they arrived, and their GPUs.
    pub jobs_dropped: u64,
    pub gpus_dropped: f64,
    /// Arrivals of rows whose duration the trace leaves empty (they never ran there):
    /// a fill needs no duration.
    pub jobs_without_duration: u64,
}

/// The cluster when the GPU demand arrived first reached `arrived`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FillPoint {
    /// The tenth of the cluster's GPUs reached: 0.1, 0.2, … 1.0.
    pub arrived: f64,
    /// The GPU demand arrived then, as a share of the cluster's GPUs: at least `arrived`,
    /// more where the job that reached it is large.
    pub reached: f64,
    /// GPUs allocated, as a share of the cluster's GPUs.
    pub allocated: f64,
    /// GPU nodes fragmented, as a share of the GPU nodes (GFR then).
    pub fragmented: f64,
}

/// The points of a fill replay: every tenth of the cluster's GPUs.
const FILL_POINTS: u64 = 10;

/// A fill replay's running count.
struct Fill {
    capacity_milli: u64,
    gpu_nodes: usize,
    arrived_milli: u64,
    report: FillReport,
}

impl Fill {
    /// Records the points the demand arrived has reached since the last call.
    fn observe(&mut self, used_milli: u64, fragmented_nodes: u32) {
        let capacity = self.capacity_milli.max(1);
        loop {
            let next = self.report.points.len() as u64 + 1;
            if next > FILL_POINTS || self.arrived_milli * FILL_POINTS < next * capacity {
                return;
            }
            self.report.points.push(FillPoint {
                arrived: next as f64 / FILL_POINTS as f64,
                reached: self.arrived_milli as f64 / capacity as f64,
                allocated: used_milli as f64 / capacity as f64,
                fragmented: f64::from(fragmented_nodes) / self.gpu_nodes.max(1) as f64,
            });
        }
    }
}

/// A job the replay never placed, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NeverPlaced {
    pub job: String,
    pub reason: String,
}

/// Replays `workload` on `cluster` under `profile`, with `tenants` (the workload's tenants
/// are matched to them by name; a job of a tenant not among them goes to the default
/// tenant and is counted). Fails where the event log cannot be written, and, with a
/// [`PastTheClock`] inside the error, where a job would end past the clock's last second.
pub fn run(
    cluster: Arc<ClusterSpec>,
    workload: &Workload,
    mut profile: Profile,
    tenants: Tenants,
    events: &mut EventLog,
    options: ReplayOptions,
) -> io::Result<RunReport> {
    let started = Instant::now();
    let profile_name = profile.name.clone();
    if options.fill {
        profile.search_options.topology_patience_s = 0;
        profile.post_filters.clear();
    }
    let mut sim = Simulation::new(cluster, workload, profile, tenants, events);
    if options.repeat_every_search {
        sim.scheduler.repeat_every_search();
    }
    sim.fill = options.fill.then(|| Fill {
        capacity_milli: sim.cluster.total_milli(),
        gpu_nodes: sim.cluster.gpu_nodes(),
        arrived_milli: 0,
        report: FillReport::default(),
    });
    let bar = progress_bar(workload.jobs.len() as u64, options.progress);
    while let Some(now) = sim.next_instant() {
        match sim.step(now) {
            Ok(submitted) => bar.inc(submitted),
            Err(e) => {
                // The error is not printed under a bar left standing.
                bar.finish_and_clear();
                return Err(e);
            }
        }
    }
    bar.finish_and_clear();
    sim.events.flush()?;
    let wall_s = started.elapsed().as_secs_f64();
    let last = sim.clock_ms;
    let first = workload.jobs.first().map_or(0, |j| j.submit_ms);
    let waiting: Vec<NeverPlaced> = sim
        .scheduler
        .waiting()
        .filter(|w| !sim.ever_placed.contains(&w.job.id))
        .map(|w| NeverPlaced {
            job: w.job.name.clone(),
            reason: sim.why_waiting(w.job.id, last),
        })
        .collect();
    let mut never_placed = std::mem::take(&mut sim.dropped);
    never_placed.extend(waiting);
    let tenant_reports = sim.tenant_series.report(&sim.scheduler);
    Ok(RunReport {
        profile: profile_name,
        tenants: tenant_reports,
        jobs_unknown_tenant: sim.jobs_unknown_tenant,
        metrics: sim.metrics.report(last),
        jobs_total: (workload.jobs.len() + workload.skipped.len()) as u64,
        jobs_skipped: workload.skipped.len() as u64,
        sim_span_s: last.saturating_sub(first) as f64 / 1000.0,
        wall_s,
        placements_per_s: sim.pods_placed as f64 / wall_s.max(1e-9),
        pods_placed: sim.pods_placed,
        preemptions: sim.preemptions,
        nvlink: sim.nvlink,
        never_placed,
        fill: sim.fill.map(|f| f.report),
    })
}

fn progress_bar(len: u64, enabled: bool) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} replay [{bar:40}] {pos}/{len} jobs submitted, {elapsed} elapsed, ~{eta} left",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

struct Simulation<'w, 'e> {
    cluster: Arc<ClusterSpec>,
    workload: &'w Workload,
    events: &'e mut EventLog,
    scheduler: Scheduler,
    metrics: MetricsCollector,
    clock_ms: u64,
    next_arrival: usize,
    /// Completions: (time, job). A job preempted before its completion is no longer in
    /// `running` with that time, and the entry is skipped.
    completions: BinaryHeap<Reverse<(u64, JobId)>>,
    running: HashMap<JobId, u64>,
    /// The next time the scheduler asked to run again although nothing happens then (a
    /// patience period of a gang waiting for a tight placement ends, say).
    wakeup: Option<u64>,
    /// Jobs that have been fully placed at least once (JWTD and JTTED count the first).
    ever_placed: HashSet<JobId>,
    /// Victims not placed again yet: when they were evicted, and for what.
    evicted: HashMap<JobId, (u64, PreemptionKind)>,
    run_milli: u64,
    /// Milli-GPUs of room held for backfill heads, as last written to the event log.
    held_milli: u64,
    pods_placed: u64,
    preemptions: PreemptionStats,
    nvlink: LinkAudit,
    tenant_series: TenantSeries,
    /// The scheduler's tenant of each of the workload's tenants.
    tenant_map: Vec<TenantId>,
    jobs_unknown_tenant: u64,
    /// Set for a fill replay.
    fill: Option<Fill>,
    /// The jobs a fill dropped, with why.
    dropped: Vec<NeverPlaced>,
}

impl<'w, 'e> Simulation<'w, 'e> {
    fn new(
        cluster: Arc<ClusterSpec>,
        workload: &'w Workload,
        profile: Profile,
        tenants: Tenants,
        events: &'e mut EventLog,
    ) -> Self {
        let window_end = workload.jobs.last().map(|j| j.submit_ms);
        let first = workload.jobs.first().map_or(0, |j| j.submit_ms);
        let tenant_series = TenantSeries::new(tenants.len(), first, window_end.unwrap_or(first));
        let tenant_map = workload
            .tenants
            .iter()
            .map(|name| TenantId(tenants.index(name).unwrap_or(0) as u16))
            .collect();
        let metrics = MetricsCollector::new(
            cluster.total_milli(),
            cluster.gpu_nodes() as u32,
            window_end,
        );
        Self {
            scheduler: Scheduler::with_tenants(
                profile,
                Box::new(InstantBinder),
                cluster.clone(),
                tenants,
            ),
            cluster,
            workload,
            events,
            metrics,
            clock_ms: 0,
            next_arrival: 0,
            completions: BinaryHeap::new(),
            running: HashMap::new(),
            wakeup: None,
            ever_placed: HashSet::new(),
            evicted: HashMap::new(),
            run_milli: 0,
            held_milli: 0,
            pods_placed: 0,
            preemptions: PreemptionStats::default(),
            nvlink: LinkAudit::default(),
            tenant_series,
            tenant_map,
            jobs_unknown_tenant: 0,
            fill: None,
            dropped: Vec::new(),
        }
    }

    fn job(&self, id: JobId) -> &'w Job {
        &self.workload.jobs[id.index()]
    }

    fn next_instant(&self) -> Option<u64> {
        let arrival = self
            .workload
            .jobs
            .get(self.next_arrival)
            .map(|j| j.submit_ms);
        let completion = self.completions.peek().map(|Reverse((t, _))| *t);
        // Only while work remains: a wake-up for a job that can never run must not keep an
        // empty replay going.
        let wakeup = self
            .wakeup
            .filter(|_| arrival.is_some() || completion.is_some());
        [arrival, completion, wakeup].into_iter().flatten().min()
    }

    /// Completions, then arrivals, at `now`; then one scheduling round. Returns the number
    /// of jobs submitted.
    fn step(&mut self, now: u64) -> io::Result<u64> {
        self.clock_ms = now;
        while let Some(&Reverse((t, id))) = self.completions.peek() {
            if t != now {
                break;
            }
            self.completions.pop();
            if self.running.get(&id) == Some(&t) {
                self.running.remove(&id);
                self.scheduler.finish(id);
                self.run_milli -= self.job(id).total_milli();
                self.events.finish(now, self.job(id))?;
            }
        }
        let mut submitted = 0;
        while let Some(job) = self.workload.jobs.get(self.next_arrival) {
            if job.submit_ms != now {
                break;
            }
            self.next_arrival += 1;
            submitted += 1;
            let tenant = self
                .tenant_map
                .get(job.tenant.index())
                .copied()
                .unwrap_or_default();
            let unknown = tenant == TenantId(0) && job.tenant != TenantId(0);
            let named = unknown
                .then(|| self.workload.tenants.get(job.tenant.index()))
                .flatten()
                .map(String::as_str);
            let queued_in = self.scheduler.tenants().name(tenant.index());
            (self.events).submit(now, job, queued_in, named, &self.cluster)?;
            self.metrics.job_submitted(now);
            if let Some(fill) = &mut self.fill {
                fill.arrived_milli += job.total_milli();
                fill.report.jobs_without_duration += u64::from(job.duration_ms.is_none());
            }
            self.jobs_unknown_tenant += u64::from(unknown);
            let mut job = job.clone();
            job.tenant = tenant;
            self.scheduler.submit(job);
        }
        // The state each decision of the round met, for the NVLink audit (an O(1) snapshot).
        let mut before = self.scheduler.state().snapshot();
        for decision in self.scheduler.schedule(now) {
            match decision {
                Decision::Placed { job, plan, .. } => {
                    self.nvlink.placed(&mut before, self.job(job), &plan);
                    self.placed(now, job, &plan)?;
                }
                Decision::Preempted { victims, by, kind } => {
                    for victim in victims {
                        for pod in 0..self.job(victim).pods.len() as u32 {
                            let _ = before.forget(PodKey { job: victim, pod });
                        }
                        self.preempted(now, victim, by, kind)?;
                    }
                }
                Decision::Requeued { job, reason, .. } => {
                    self.events.requeue(now, self.job(job), &reason)?;
                }
            }
        }
        if self.fill.is_some() {
            self.drop_waiting(now)?;
        }
        self.wakeup = self.scheduler.next_retry_ms(now).filter(|&t| t > now);
        let total = self.scheduler.state().total();
        // Room held for backfill heads counts as allocated, not as running.
        let held = self.scheduler.held_milli();
        if held != self.held_milli {
            self.held_milli = held;
            self.events.held(now, held)?;
        }
        let alloc = total.used_milli + held;
        self.metrics
            .observe(now, alloc, self.run_milli, total.fragmented_nodes);
        self.tenant_series.observe(now, &self.scheduler);
        if let Some(fill) = &mut self.fill {
            fill.observe(total.used_milli, total.fragmented_nodes);
        }
        Ok(submitted)
    }

    /// In a fill, drops the jobs the round could not place: nothing finishes, so what did
    /// not fit on arrival never will.
    fn drop_waiting(&mut self, now: u64) -> io::Result<()> {
        let waiting: Vec<JobId> = self.scheduler.waiting().map(|w| w.job.id).collect();
        for id in waiting {
            let reason = self.why_waiting(id, now);
            if let Some(job) = self.scheduler.withdraw(id) {
                self.events.drop_job(now, &job, &reason)?;
                if let Some(fill) = &mut self.fill {
                    fill.report.jobs_dropped += 1;
                    fill.report.gpus_dropped += job.total_milli() as f64 / 1000.0;
                }
                self.dropped.push(NeverPlaced {
                    job: job.name.clone(),
                    reason,
                });
            }
        }
        Ok(())
    }

    /// Why a waiting job cannot be placed now, in kube-scheduler's words.
    fn why_waiting(&self, job: JobId, now: u64) -> String {
        (self.scheduler.diagnose(job, now)).map_or_else(String::new, |d| d.message())
    }

    fn placed(&mut self, now: u64, id: JobId, plan: &JobPlan) -> io::Result<()> {
        let job = self.job(id);
        // A timed replay's jobs all have a duration (rows without one were skipped) and end
        // by the clock's last second; a fill's may not, and its jobs never end.
        let end = now.saturating_add(job.duration_ms.unwrap_or(0));
        if self.fill.is_none() && end > MAX_TIME_MS {
            return Err(io::Error::other(PastTheClock(format!(
                "job {}, placed at {} s, would end past the clock's last second ({} s): the \
                 replay cannot go on (its jobs wait too long for their durations)",
                job.name,
                format_seconds(now),
                MAX_TIME_MS / 1000
            ))));
        }
        self.events.place(now, job, plan, &self.cluster)?;
        self.pods_placed += plan.pods.len() as u64;
        self.run_milli += job.total_milli();
        if let Some((evicted_at, kind)) = self.evicted.remove(&id) {
            (self.preemptions).placed_again(kind, now.saturating_sub(evicted_at));
        }
        if self.ever_placed.insert(id) {
            let spread = (job.total_milli() >= u64::from(MILLI_PER_GPU))
                .then(|| plan.spread(&self.cluster, job.total_milli()));
            self.metrics
                .job_first_placed(now, job.submit_ms, job.total_milli(), spread);
        }
        self.running.insert(id, end);
        // In a fill replay nothing finishes.
        if self.fill.is_none() {
            self.completions.push(Reverse((end, id)));
        }
        Ok(())
    }

    fn preempted(
        &mut self,
        now: u64,
        victim: JobId,
        by: JobId,
        kind: PreemptionKind,
    ) -> io::Result<()> {
        let job = self.job(victim);
        if let Some(end) = self.running.remove(&victim) {
            self.run_milli -= job.total_milli();
            let started = end.saturating_sub(job.duration_ms.unwrap_or(0));
            self.preemptions
                .record(kind, job.total_milli(), now.saturating_sub(started));
            self.evicted.insert(victim, (now, kind));
        }
        self.events.preempt(now, job, self.job(by), kind.name())
    }
}

/// A job of the replay would end past [`MAX_TIME_MS`], where event times stop being exact:
/// an error of the input, carried in the replay's `io::Error`.
#[derive(Debug)]
pub struct PastTheClock(String);

impl std::fmt::Display for PastTheClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PastTheClock {}

/// Preemptions by kind, with the GPU-hours of work they threw away (what the victims had
/// run since they started), and how long the victims waited to run again (JWTD counts a
/// job's first placement only, so this wait is in no bucket).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PreemptionStats {
    pub priority: PreemptionCount,
    pub quota_reclaim: PreemptionCount,
    pub backfill: PreemptionCount,
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct PreemptionCount {
    pub count: u64,
    pub gpu_hours_lost: f64,
    /// Victims placed again before the replay ended (a job evicted twice counts twice).
    pub placed_again: u64,
    /// Their mean time from eviction to placed again, in seconds; `None` while none is.
    pub mean_wait_again_s: Option<f64>,
    #[serde(skip)]
    waited_again_ms: u64,
}

impl PreemptionStats {
    fn slot(&mut self, kind: PreemptionKind) -> &mut PreemptionCount {
        match kind {
            PreemptionKind::Priority => &mut self.priority,
            PreemptionKind::QuotaReclaim => &mut self.quota_reclaim,
            PreemptionKind::Backfill => &mut self.backfill,
        }
    }

    fn record(&mut self, kind: PreemptionKind, milli: u64, ran_ms: u64) {
        let slot = self.slot(kind);
        slot.count += 1;
        slot.gpu_hours_lost += milli as f64 / 1000.0 * ran_ms as f64 / 3_600_000.0;
    }

    /// A victim of `kind` placed again `waited_ms` after its eviction.
    fn placed_again(&mut self, kind: PreemptionKind, waited_ms: u64) {
        let slot = self.slot(kind);
        slot.placed_again += 1;
        slot.waited_again_ms += waited_ms;
        slot.mean_wait_again_s =
            Some(slot.waited_again_ms as f64 / slot.placed_again as f64 / 1000.0);
    }

    /// Preemptions of every kind.
    pub fn total(&self) -> u64 {
        self.priority.count + self.quota_reclaim.count + self.backfill.count
    }
}

/// Divides every inter-arrival time by `factor` (> 1 compresses the arrivals, raising the
/// offered load), keeping the first submission where it is. The skipped rows' submissions
/// are scaled alike, so that a written trace keeps one time base; durations are unchanged.
/// Fails, changing nothing, when a job would end past [`MAX_TIME_MS`].
pub fn scale_arrivals(workload: &mut Workload, factor: f64) -> Result<(), String> {
    let rows = || workload.jobs.iter().chain(&workload.skipped);
    let Some(first) = rows().map(|j| j.submit_ms).min() else {
        return Ok(());
    };
    let submits = rows()
        .map(|job| {
            let offset = ((job.submit_ms - first) as f64 / factor).round();
            // Whole numbers, exact up to 2^53, which is past MAX_TIME_MS. A skipped row
            // has no duration: it ends where it is submitted.
            let end = first as f64 + offset + job.duration_ms.unwrap_or(0) as f64;
            if end <= MAX_TIME_MS as f64 {
                Ok(first + offset as u64)
            } else {
                Err(format!(
                    "job {} would end past the clock's last second, {}",
                    job.name,
                    MAX_TIME_MS / 1000
                ))
            }
        })
        .collect::<Result<Vec<u64>, String>>()?;
    let rows = workload.jobs.iter_mut().chain(&mut workload.skipped);
    for (job, submit) in rows.zip(submits) {
        job.submit_ms = submit;
    }
    Ok(())
}

/// The workload of a fill replay: its jobs in submission order, the skipped rows (whose
/// duration is unknown) among them, then again (named `name#2`, `name#3`, …, or
/// `name#2-2` where that name is taken) until the
/// GPU demand submitted reaches `capacity_milli`, one second apart so that each arrives in
/// a round of its own. Fails when the cluster or the workload has no GPUs, or when the
/// repeats would pass [`MAX_TRACE_PODS`] or [`MAX_TRACE_JOBS`].
pub fn fill_workload(workload: &Workload, capacity_milli: u64) -> Result<Workload, String> {
    if capacity_milli == 0 {
        return Err("the cluster has no GPUs".into());
    }
    // Stable: a tie keeps the jobs' order, and the skipped rows' after them.
    let mut rows: Vec<&Job> = workload.jobs.iter().chain(&workload.skipped).collect();
    rows.sort_by_key(|job| job.submit_ms);
    let demand: u64 = rows.iter().map(|job| job.total_milli()).sum();
    if demand == 0 {
        return Err("no job of the workload asks for GPUs".into());
    }
    let too_many = |limit: u64, what: &str| {
        format!(
            "its {} GPUs of demand would be repeated past {limit} {what} before they reach the \
             cluster's {} GPUs",
            thousandths(demand),
            thousandths(capacity_milli)
        )
    };
    // How many arrivals reach the capacity, counted before any is made.
    let (mut arrivals, mut arrived, mut pods) = (0usize, 0u64, 0u64);
    for job in rows.iter().cycle() {
        if arrived >= capacity_milli {
            break;
        }
        pods += job.pods.len() as u64;
        if pods > MAX_TRACE_PODS {
            return Err(too_many(MAX_TRACE_PODS, "pods"));
        }
        arrived += job.total_milli();
        arrivals += 1;
        if arrivals as u64 > MAX_TRACE_JOBS {
            return Err(too_many(MAX_TRACE_JOBS, "jobs"));
        }
    }
    // A copy's name is new: `a#2` may already be a job's (or another copy's) name.
    let mut names: HashSet<String> = rows.iter().map(|job| job.name.clone()).collect();
    let jobs = (0..arrivals)
        .map(|n| {
            let job = rows[n % rows.len()];
            let repeat = n / rows.len() + 1;
            let name = match repeat {
                1 => job.name.clone(),
                _ => (1..)
                    .map(|k| match k {
                        1 => format!("{}#{repeat}", job.name),
                        _ => format!("{}#{repeat}-{k}", job.name),
                    })
                    .find(|name| names.insert(name.clone()))
                    .expect("some name is free"),
            };
            Job {
                id: JobId(n as u32),
                name,
                submit_ms: n as u64 * 1000,
                ..job.clone()
            }
        })
        .collect();
    Ok(Workload {
        jobs,
        tenants: workload.tenants.clone(),
        skipped: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GpuRequest, PodRequest};

    fn workload(gpus: &[GpuRequest]) -> Workload {
        let jobs = (gpus.iter().enumerate())
            .map(|(i, &gpu)| Job::new(JobId(i as u32), vec![PodRequest::gpus(gpu)]))
            .collect();
        Workload {
            jobs,
            tenants: vec!["default".into()],
            skipped: Vec::new(),
        }
    }

    #[test]
    fn a_fill_repeats_the_jobs_until_their_demand_reaches_the_capacity() {
        let filled = fill_workload(&workload(&[GpuRequest::Whole(3)]), 8_000).unwrap();
        let arrivals: Vec<(&str, u64)> = (filled.jobs.iter())
            .map(|j| (j.name.as_str(), j.submit_ms))
            .collect();
        assert_eq!(
            arrivals,
            [("job-0", 0), ("job-0#2", 1000), ("job-0#3", 2000)]
        );
        assert!(
            filled
                .jobs
                .iter()
                .enumerate()
                .all(|(i, j)| j.id.index() == i)
        );
    }

    /// A copy never takes the name of a job of the trace: the fill's events and its
    /// written trace name each job once.
    #[test]
    fn a_fills_copies_take_names_no_job_has() {
        let mut named = workload(&[GpuRequest::Whole(1), GpuRequest::Whole(1)]);
        named.jobs[0].name = "a".into();
        named.jobs[1].name = "a#2".into();
        let filled = fill_workload(&named, 6_000).unwrap();
        let names: Vec<&str> = filled.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["a", "a#2", "a#2-2", "a#2#2", "a#3", "a#2#3"]);
    }

    #[test]
    fn a_fill_that_would_repeat_past_the_pod_or_job_limit_or_has_no_gpus_is_refused() {
        let thousandth = workload(&[GpuRequest::Fraction(1)]);
        let err = fill_workload(&thousandth, 20_000_000_000).unwrap_err();
        assert!(err.contains("its 0.001 GPUs of demand"), "{err}");
        assert!(err.contains("4000000 jobs"), "{err}");
        let gang = Workload {
            jobs: vec![Job::new(
                JobId(0),
                vec![PodRequest::gpus(GpuRequest::Fraction(1)); 100],
            )],
            ..workload(&[])
        };
        let err = fill_workload(&gang, 20_000_000_000).unwrap_err();
        assert!(err.contains("its 0.1 GPUs of demand"), "{err}");
        assert!(err.contains("16000000 pods"), "{err}");
        let cpu_only = workload(&[GpuRequest::NONE]);
        assert!(fill_workload(&cpu_only, 8_000).is_err());
    }
}
