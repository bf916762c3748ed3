//! QSCH, the queue side: which pending job may try for resources, and when. Holds the
//! pending jobs in QueueSort order and applies the queueing policy; it never looks at
//! nodes (that is the framework's search).
//!
//! A job that failed is not tried again until capacity has been freed since (feasibility
//! only grows when resources are returned), which keeps a long backlog cheap.

use std::sync::Arc;

use crate::framework::QueueSort;
use crate::model::Job;

/// What happens behind a job that cannot be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueingPolicy {
    /// Nothing behind a blocked head is placed.
    StrictFifo,
    /// Later jobs that fit go ahead of a blocked head.
    BestEffortFifo,
}

impl QueueingPolicy {
    pub fn name(self) -> &'static str {
        match self {
            QueueingPolicy::StrictFifo => "strict-fifo",
            QueueingPolicy::BestEffortFifo => "best-effort-fifo",
        }
    }
}

struct Pending {
    job: Arc<Job>,
    /// The capacity epoch at which the job last failed to place.
    failed_at: Option<u64>,
    /// When to try it again even if no capacity is freed.
    retry_at: Option<u64>,
    /// Its last failure was unresolvable.
    unresolvable: bool,
}

/// The pending jobs, in QueueSort order.
pub struct JobQueue {
    policy: QueueingPolicy,
    sort: Arc<dyn QueueSort>,
    pending: Vec<Pending>,
}

/// What the scheduler did with the job the queue offered.
pub enum Attempted {
    Placed,
    /// Not now; under strict FIFO it blocks the jobs behind it. It is tried again when
    /// capacity is freed, or at `retry_at` on the world's clock.
    Failed {
        retry_at: Option<u64>,
    },
    /// Can never be placed as the cluster is (no pool could hold it): it waits, but blocks
    /// no one.
    Unresolvable,
}

impl JobQueue {
    pub fn new(policy: QueueingPolicy, sort: Arc<dyn QueueSort>) -> Self {
        Self {
            policy,
            sort,
            pending: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Adds a job in QueueSort order (after the jobs it compares equal to).
    pub fn push(&mut self, job: Arc<Job>) {
        let at = self
            .pending
            .partition_point(|p| self.sort.compare(&p.job, &job).is_le());
        self.pending.insert(
            at,
            Pending {
                job,
                failed_at: None,
                retry_at: None,
                unresolvable: false,
            },
        );
    }

    pub fn jobs(&self) -> impl Iterator<Item = &Arc<Job>> {
        self.pending.iter().map(|p| &p.job)
    }

    /// The earliest retry time of a job that failed at capacity `epoch`.
    pub fn next_retry_ms(&self, epoch: u64) -> Option<u64> {
        self.pending
            .iter()
            .filter(|p| p.failed_at == Some(epoch))
            .filter_map(|p| p.retry_at)
            .min()
    }

    /// Offers the jobs worth trying at capacity `epoch` and time `now_ms` to `attempt`, in
    /// order and as the policy allows. Placed jobs leave the queue (in one pass:
    /// O(pending) per round).
    pub fn run(
        &mut self,
        epoch: u64,
        now_ms: u64,
        mut attempt: impl FnMut(&Arc<Job>) -> Attempted,
    ) {
        let strict = self.policy == QueueingPolicy::StrictFifo;
        let mut blocked = false;
        self.pending.retain_mut(|entry| {
            if blocked {
                return true;
            }
            let due = entry.retry_at.is_some_and(|t| t <= now_ms);
            if entry.failed_at == Some(epoch) && !due {
                // Nothing was freed since it failed: it would fail again.
                blocked = strict && !entry.unresolvable;
                return true;
            }
            match attempt(&entry.job) {
                Attempted::Placed => false,
                Attempted::Failed { retry_at } => {
                    entry.failed_at = Some(epoch);
                    entry.retry_at = retry_at;
                    blocked = strict;
                    true
                }
                Attempted::Unresolvable => {
                    entry.failed_at = Some(epoch);
                    entry.retry_at = None;
                    entry.unresolvable = true;
                    true
                }
            }
        });
    }
}
