//! Per-tenant figures of a replay: quota in use, borrowed GPUs and pending jobs, each a
//! time-average over the metrics window (first to last submission), exact integrals of
//! the piecewise-constant series like the cluster metrics.

use serde::Serialize;

use crate::framework::Scheduler;
use crate::model::{MILLI_PER_GPU, PoolId};
use crate::queue::TenantMode;

/// One tenant's figures.
#[derive(Debug, Clone, Serialize)]
pub struct TenantReport {
    pub name: String,
    pub mode: TenantMode,
    /// Quota over all GPU models, GPUs.
    pub quota_gpus: f64,
    /// Time-average GPUs in use by its jobs; `None` over a window of no length (every
    /// job submitted at one instant), as the cluster's averages.
    pub used_gpus_mean: Option<f64>,
    /// Time-average GPUs in use beyond its quota; `None` likewise.
    pub borrowed_gpus_mean: Option<f64>,
    /// Time-average jobs waiting in its queue; `None` likewise.
    pub pending_mean: Option<f64>,
    /// The most jobs waiting in its queue at once, within the window.
    pub pending_max: usize,
}

/// The integrals, fed after every step of the replay.
pub struct TenantSeries {
    window: (u64, u64),
    since: u64,
    /// Per tenant, the current (used, borrowed, pending).
    current: Vec<(u64, u64, u64)>,
    /// Per tenant, the integrals of the three over the window so far.
    sums: Vec<(u128, u128, u128)>,
    pending_max: Vec<usize>,
}

impl TenantSeries {
    /// For `tenants` tenants over the window `[first, last]` (milliseconds).
    pub fn new(tenants: usize, first: u64, last: u64) -> Self {
        Self {
            window: (first, last),
            since: first,
            current: vec![(0, 0, 0); tenants],
            sums: vec![(0, 0, 0); tenants],
            pending_max: vec![0; tenants],
        }
    }

    /// The values from `now` on, read off the scheduler.
    pub fn observe(&mut self, now: u64, scheduler: &Scheduler) {
        self.integrate_to(now);
        let in_window = now <= self.window.1;
        let tenants = scheduler.tenants();
        for (t, slot) in self.current.iter_mut().enumerate() {
            let (used, borrowed) = tenants.totals(t);
            let pending = scheduler.pending_of(t);
            *slot = (used, borrowed, pending as u64);
            if in_window {
                self.pending_max[t] = self.pending_max[t].max(pending);
            }
        }
    }

    fn integrate_to(&mut self, now: u64) {
        let (first, last) = self.window;
        let end = now.clamp(first, last);
        if end > self.since {
            let dt = u128::from(end - self.since);
            for (sum, &(used, borrowed, pending)) in self.sums.iter_mut().zip(&self.current) {
                sum.0 += u128::from(used) * dt;
                sum.1 += u128::from(borrowed) * dt;
                sum.2 += u128::from(pending) * dt;
            }
            self.since = end;
        }
    }

    /// The figures at the end of the replay.
    pub fn report(mut self, scheduler: &Scheduler) -> Vec<TenantReport> {
        self.integrate_to(self.window.1);
        let span = self.window.1 - self.window.0;
        let mean =
            |integral: u128, unit: f64| (span > 0).then(|| integral as f64 / span as f64 / unit);
        let milli = f64::from(MILLI_PER_GPU);
        let tenants = scheduler.tenants();
        let pools = scheduler.state().spec().pools.len();
        (0..tenants.len())
            .map(|t| {
                let quota: u64 = (0..pools).map(|p| tenants.quota(t, PoolId(p as u16))).sum();
                let (used, borrowed, pending) = self.sums[t];
                TenantReport {
                    name: tenants.name(t).to_owned(),
                    mode: tenants.mode(t),
                    quota_gpus: quota as f64 / milli,
                    used_gpus_mean: mean(used, milli),
                    borrowed_gpus_mean: mean(borrowed, milli),
                    pending_mean: mean(pending, 1.0),
                    pending_max: self.pending_max[t],
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::Config;
    use crate::model::{
        ClusterSpecBuilder, GpuRequest, Job, JobId, LinkProfile, NodeRow, PodRequest,
    };
    use crate::sim::engine::InstantBinder;

    /// A scheduler of the default profile on one node of 8 GPUs, and a submitter of
    /// jobs that take the whole node.
    fn one_node_of_8_gpus() -> (Scheduler, fn(&mut Scheduler, u32)) {
        let mut cluster = ClusterSpecBuilder::new();
        let row = NodeRow {
            name: "n".into(),
            gpu_model: Some("H100".into()),
            gpus: 8,
            ..Default::default()
        };
        cluster.add(row, LinkProfile::NvlinkAll).unwrap();
        let config = Config::embedded();
        let profile = config.profile("default").unwrap();
        let profile = crate::plugins::build_profile(profile, &config).unwrap();
        let spec = Arc::new(cluster.build());
        let scheduler = Scheduler::new(profile, Box::new(InstantBinder), spec);
        let submit = |scheduler: &mut Scheduler, id: u32| {
            let pods = vec![PodRequest::gpus(GpuRequest::Whole(8))];
            scheduler.submit(Job::new(JobId(id), pods));
        };
        (scheduler, submit)
    }

    /// Jobs waiting are counted within the window, the most at once as the mean: a queue
    /// that grows after the last submission (victims sent back) counts in neither.
    #[test]
    fn pending_jobs_are_counted_within_the_window() {
        let (mut scheduler, submit) = one_node_of_8_gpus();
        submit(&mut scheduler, 0);
        let mut series = TenantSeries::new(1, 0, 10_000);
        series.observe(0, &scheduler);
        submit(&mut scheduler, 1);
        submit(&mut scheduler, 2);
        series.observe(20_000, &scheduler);
        let report = &series.report(&scheduler)[0];
        assert_eq!((report.pending_mean, report.pending_max), (Some(1.0), 1));
    }

    /// Over a window of no length (every job submitted at one instant) there is no
    /// average: undefined, not 0, as the cluster's GAR, SOR and GFR.
    #[test]
    fn a_window_of_no_length_leaves_the_tenants_averages_undefined() {
        let (mut scheduler, submit) = one_node_of_8_gpus();
        submit(&mut scheduler, 0);
        submit(&mut scheduler, 1);
        let mut series = TenantSeries::new(1, 5_000, 5_000);
        scheduler.schedule(5_000);
        series.observe(5_000, &scheduler);
        let report = &series.report(&scheduler)[0];
        let means = (
            report.used_gpus_mean,
            report.borrowed_gpus_mean,
            report.pending_mean,
        );
        assert_eq!(means, (None, None, None));
        assert_eq!(report.pending_max, 1);
    }
}
