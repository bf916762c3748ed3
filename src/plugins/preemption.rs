//! `preemption` (PostFilter): makes room for a job that did not fit, conservatively.
//!
//! - Backfill: for a backfill head blocked past the threshold, the jobs placed after it
//!   blocked, of no higher priority.
//! - Quota reclaim: for a tenant below its quota on a pool, jobs of other tenants that
//!   borrow on that pool, whatever their priority, as long as their tenant keeps at least
//!   its quota without them (only borrowed room is taken back, so reclaims never cascade).
//! - Priority: jobs of strictly lower priority.
//!
//! Victims are whole jobs (a gang is evicted whole), never one placed less than the minimum
//! runtime ago (so preemption cannot cascade), taken lowest priority first, then least
//! GPU-time lost, then most recently started, until the job fits on the state without
//! them; then any victim whose removal is not needed is spared. Nothing is proposed unless
//! the job was checked to fit.

use crate::cache::{ClusterState, PodKey};
use crate::framework::{
    Plugin, PostFilter, PostFilterResult, PreemptionContext, PreemptionKind, RunningJob,
};
use crate::model::{Job, JobId};
use crate::queue::TenantMode;

/// The most candidates examined for one preemptor: bounds the search's cost.
const MAX_CANDIDATES: usize = 256;

pub struct Preemption {
    pub min_runtime_ms: u64,
}

impl Plugin for Preemption {
    fn name(&self) -> &'static str {
        "preemption"
    }
}

impl Preemption {
    /// Why `victim` may be preempted for `job`, if it may.
    fn kind(
        &self,
        job: &Job,
        context: &PreemptionContext,
        victim: &RunningJob,
    ) -> Option<PreemptionKind> {
        if context.now_ms < victim.started_ms.saturating_add(self.min_runtime_ms) {
            return None;
        }
        let shares_a_pool = victim
            .pools
            .iter()
            .any(|(p, _)| job.pools.is_empty() || job.pools.contains(p));
        if !shares_a_pool {
            return None;
        }
        let lower = victim.job.priority < job.priority;
        if let Some(since) = context.backfill_since
            && victim.started_ms >= since
            && victim.job.priority <= job.priority
            && in_reservation(context, victim)
        {
            return Some(PreemptionKind::Backfill);
        }
        let tenants = context.tenants;
        // Only what is borrowed is reclaimed: the victim's tenant stays at or above its
        // quota once the victim is gone, so a reclaim never starts another.
        let reclaim = victim.tenant != context.tenant
            && tenants.mode(context.tenant) == TenantMode::Shared
            && victim.pools.iter().any(|&(pool, milli)| {
                (job.pools.is_empty() || job.pools.contains(&pool))
                    && tenants.under_quota(context.tenant, pool)
                    && tenants.borrowed(victim.tenant, pool) >= milli
            });
        if reclaim {
            Some(PreemptionKind::QuotaReclaim)
        } else if lower {
            Some(PreemptionKind::Priority)
        } else {
            None
        }
    }
}

/// Whether the victim holds a pod in the preemptor's reservation (anywhere, without one).
fn in_reservation(context: &PreemptionContext, victim: &RunningJob) -> bool {
    let Some(groups) = context.reserved else {
        return true;
    };
    let spec = context.snapshot.spec();
    (0..victim.job.pods.len() as u32).any(|pod| {
        let key = PodKey {
            job: victim.job.id,
            pod,
        };
        context.snapshot.placement(key).is_some_and(|p| {
            groups
                .binary_search(&spec.node_group[p.placement.node.index()])
                .is_ok()
        })
    })
}

/// The snapshot with the pods of `victims` removed.
fn without(snapshot: &ClusterState, running: &[&RunningJob]) -> ClusterState {
    let mut state = snapshot.snapshot();
    for victim in running {
        for pod in 0..victim.job.pods.len() as u32 {
            let _ = state.forget(PodKey {
                job: victim.job.id,
                pod,
            });
        }
    }
    state
}

impl PostFilter for Preemption {
    fn post_filter(&self, job: &Job, context: &PreemptionContext) -> PostFilterResult {
        let mut candidates: Vec<(&RunningJob, PreemptionKind)> = context
            .running
            .values()
            .filter_map(|victim| Some((victim, self.kind(job, context, victim)?)))
            .collect();
        if candidates.is_empty() {
            return PostFilterResult::None;
        }
        let lost = |victim: &RunningJob| {
            let held: u64 = victim.pools.iter().map(|(_, milli)| milli).sum();
            u128::from(held) * u128::from(context.now_ms.saturating_sub(victim.started_ms))
        };
        candidates.sort_by(|(a, _), (b, _)| {
            a.job
                .priority
                .cmp(&b.job.priority)
                .then(lost(a).cmp(&lost(b)))
                .then(b.started_ms.cmp(&a.started_ms))
                .then(a.job.id.cmp(&b.job.id))
        });
        candidates.truncate(MAX_CANDIDATES);

        // Take victims in order until the job fits, checking only once they hold enough.
        let need = job.total_milli();
        let mut chosen: Vec<(&RunningJob, PreemptionKind)> = Vec::new();
        let mut freed = 0u64;
        let fitted = candidates.into_iter().any(|candidate| {
            freed += candidate.0.pools.iter().map(|(_, m)| m).sum::<u64>();
            chosen.push(candidate);
            freed >= need && (context.fits)(&without(context.snapshot, &victims(&chosen)))
        });
        if !fitted {
            return PostFilterResult::None;
        }
        // Minimal: spare every victim the job fits without, latest taken first.
        let mut index = chosen.len();
        while index > 0 {
            index -= 1;
            let mut fewer = chosen.clone();
            fewer.remove(index);
            if (context.fits)(&without(context.snapshot, &victims(&fewer))) {
                chosen = fewer;
            }
        }
        // The strongest reason among the victims names the preemption.
        let kind = chosen
            .iter()
            .map(|&(_, kind)| kind)
            .max_by_key(|kind| match kind {
                PreemptionKind::Backfill => 2,
                PreemptionKind::QuotaReclaim => 1,
                PreemptionKind::Priority => 0,
            })
            .unwrap_or(PreemptionKind::Priority);
        PostFilterResult::Preempt {
            victims: chosen.iter().map(|(v, _)| v.job.id).collect::<Vec<JobId>>(),
            kind,
        }
    }
}

fn victims<'a>(chosen: &[(&'a RunningJob, PreemptionKind)]) -> Vec<&'a RunningJob> {
    chosen.iter().map(|&(victim, _)| victim).collect()
}
