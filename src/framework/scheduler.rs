//! The scheduler object both worlds drive: it takes events (a job submitted, finished,
//! bound or failed to bind) and returns decisions, running one scheduling cycle per job
//! the queue offers. It owns the cluster state; the world owns time and I/O.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::{CacheError, ClusterState, PodKey};
use crate::model::{ClusterSpec, Job, JobId};
use crate::queue::{Attempted, JobQueue};

use super::plugin::{Bind, JobPlan, PostFilterResult};
use super::search::{TightWaitSince, diagnose, place_job, tight_wait_ends};
use super::{Code, CycleState, Diagnosis, Profile};

/// What a scheduling round decided, for the world to carry out and report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Every pod of the job is reserved where the plan says and handed to the binder.
    /// `bound` is true when the binder bound it at once.
    Placed {
        job: JobId,
        plan: JobPlan,
        bound: bool,
    },
    /// These jobs were evicted whole to make room for `by`; they are back in the queue.
    Preempted {
        victims: Vec<JobId>,
        by: JobId,
        reason: String,
    },
}

/// The scheduler: one profile, one cluster state, one queue.
pub struct Scheduler {
    profile: Profile,
    binder: Box<dyn Bind>,
    state: ClusterState,
    queue: JobQueue,
    /// Jobs with every pod reserved or bound.
    placed: HashMap<JobId, Arc<Job>>,
    /// Bumped whenever capacity is returned: a job that failed at the current epoch would
    /// fail again and is not retried.
    capacity_epoch: u64,
    /// Gangs waiting only for a tight placement, since when (world clock).
    tight_waits: HashMap<JobId, u64>,
}

impl Scheduler {
    pub fn new(profile: Profile, binder: Box<dyn Bind>, spec: Arc<ClusterSpec>) -> Self {
        let queue = JobQueue::new(profile.queueing, profile.queue_sort.clone());
        Self {
            profile,
            binder,
            state: ClusterState::new(spec),
            queue,
            placed: HashMap::new(),
            capacity_epoch: 0,
            tight_waits: HashMap::new(),
        }
    }

    /// The current cluster state (clone it for an O(1) snapshot).
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// A new job enters its queue.
    pub fn submit(&mut self, job: Job) {
        self.queue.push(Arc::new(job));
    }

    /// Runs cycles at `now_ms` (the world's clock) for the jobs the queueing policy
    /// offers; returns what was decided.
    pub fn schedule(&mut self, now_ms: u64) -> Vec<Decision> {
        let mut decisions = Vec::new();
        let mut queue = std::mem::replace(
            &mut self.queue,
            JobQueue::new(self.profile.queueing, self.profile.queue_sort.clone()),
        );
        queue.run(self.capacity_epoch, now_ms, |job| {
            self.cycle(job, now_ms, &mut decisions)
        });
        // Jobs preempted during the round went back to the (temporary) queue.
        for job in self.queue.jobs() {
            queue.push(job.clone());
        }
        self.queue = queue;
        decisions
    }

    /// One scheduling cycle for one job: PreFilter, search, (PostFilter), Reserve, Permit,
    /// Bind.
    fn cycle(&mut self, job: &Arc<Job>, now_ms: u64, decisions: &mut Vec<Decision>) -> Attempted {
        let mut cycle = CycleState::new(now_ms);
        for plugin in &self.profile.pre_filters {
            let status = plugin.pre_filter(job, &self.state, &mut cycle);
            match status.code {
                Code::Success => {}
                Code::UnschedulableAndUnresolvable => return Attempted::Unresolvable,
                _ => return Attempted::Failed { retry_at: None },
            }
        }
        let since = self.tight_waits.get(&job.id).copied();
        if let Some(since) = since {
            cycle.write(TightWaitSince(since));
        }
        let Some(found) = place_job(&self.profile, job, &self.state, &cycle) else {
            self.post_filter(job, &cycle, decisions);
            let since = since.unwrap_or(now_ms);
            let retry_at = tight_wait_ends(&self.profile, job, &self.state, since);
            match retry_at {
                Some(_) => self.tight_waits.insert(job.id, since),
                None => self.tight_waits.remove(&job.id),
            };
            return Attempted::Failed {
                retry_at: retry_at.filter(|&t| t > now_ms),
            };
        };
        self.tight_waits.remove(&job.id);
        // Reserve: the search's state already holds the job's placements as assumed; it
        // becomes the cache's root (a statement commit), the old root is the rollback.
        let rollback = std::mem::replace(&mut self.state, found.state);
        let plan = found.plan;
        for (index, plugin) in self.profile.reserves.iter().enumerate() {
            if !plugin.reserve(job, &plan, &mut cycle).is_success() {
                for undo in self.profile.reserves[..=index].iter().rev() {
                    undo.unreserve(job, &plan, &mut cycle);
                }
                self.state = rollback;
                return Attempted::Failed { retry_at: None };
            }
        }
        // Permit. A `Wait` is not held in this scheduler: nothing here needs it, since a
        // job's whole gang is known when it is submitted, so any verdict but Success
        // undoes the reservation.
        let permitted = self
            .profile
            .permits
            .iter()
            .all(|p| p.permit(job, &plan, &cycle).is_success());
        if !permitted {
            for undo in self.profile.reserves.iter().rev() {
                undo.unreserve(job, &plan, &mut cycle);
            }
            self.state = rollback;
            return Attempted::Failed { retry_at: None };
        }
        let status = self.binder.bind(job, &plan);
        let bound = match status.code {
            Code::Success => {
                for (key, _) in &plan.pods {
                    // The plan's pods were assumed just above.
                    let _ = self.state.confirm(*key);
                }
                true
            }
            Code::Wait => false,
            _ => {
                self.state = rollback;
                return Attempted::Failed { retry_at: None };
            }
        };
        self.placed.insert(job.id, job.clone());
        decisions.push(Decision::Placed {
            job: job.id,
            plan,
            bound,
        });
        Attempted::Placed
    }

    /// Asks the PostFilter plugins (preemption) for room; evicts the first proposal.
    fn post_filter(&mut self, job: &Arc<Job>, cycle: &CycleState, decisions: &mut Vec<Decision>) {
        if self.profile.post_filters.is_empty() {
            return;
        }
        let diagnosis = Diagnosis::default();
        for plugin in &self.profile.post_filters {
            if let PostFilterResult::Preempt { victims, reason } =
                plugin.post_filter(job, &self.state, &diagnosis, cycle)
            {
                let mut jobs: Vec<JobId> = victims.iter().map(|k| k.job).collect();
                jobs.sort_unstable();
                jobs.dedup();
                for &victim in &jobs {
                    if let Some(evicted) = self.release(victim) {
                        self.queue.push(evicted);
                    }
                }
                decisions.push(Decision::Preempted {
                    victims: jobs,
                    by: job.id,
                    reason,
                });
                return;
            }
        }
    }

    /// The world reports a job's pods bound (after a binder answered `Wait`).
    pub fn bound(&mut self, job: JobId) -> Result<(), CacheError> {
        let pods = self.placed.get(&job).map_or(0, |j| j.pods.len());
        for pod in 0..pods as u32 {
            self.state.confirm(PodKey { job, pod })?;
        }
        Ok(())
    }

    /// The job ran to completion: its resources return to the cluster.
    pub fn finish(&mut self, job: JobId) -> Option<Arc<Job>> {
        self.release(job)
    }

    /// Binding failed: every reservation of the job is forgotten and it re-enters its
    /// queue.
    pub fn bind_failed(&mut self, job: JobId) {
        if let Some(job) = self.release(job) {
            self.queue.push(job);
        }
    }

    /// Forgets every pod of a placed job and returns its capacity.
    fn release(&mut self, job: JobId) -> Option<Arc<Job>> {
        let released = self.placed.remove(&job)?;
        for pod in 0..released.pods.len() as u32 {
            // A pod may already be gone (its node vanished); the rest are still released.
            let _ = self.state.forget(PodKey { job, pod });
        }
        self.capacity_epoch += 1;
        Some(released)
    }

    /// When a job that failed only for want of time should be tried again although no
    /// capacity was freed (the earliest, in the world's clock).
    pub fn next_retry_ms(&self) -> Option<u64> {
        self.queue.next_retry_ms(self.capacity_epoch)
    }

    /// Why a pending job cannot be placed now, in kube-scheduler's words: node by node,
    /// unless a PreFilter found the job unresolvable as a whole.
    pub fn diagnose(&self, job: JobId, now_ms: u64) -> Option<Diagnosis> {
        let job = self.queue.jobs().find(|j| j.id == job)?;
        let mut cycle = CycleState::new(now_ms);
        for plugin in &self.profile.pre_filters {
            let status = plugin.pre_filter(job, &self.state, &mut cycle);
            if status.code == Code::UnschedulableAndUnresolvable {
                return Some(Diagnosis::job_level(status));
            }
        }
        Some(diagnose(&self.profile, job, &self.state, &cycle))
    }
}
