//! What preemption found among the running jobs, kept while nothing it read changed.
//!
//! On a crowded cluster every waiting job that may preempt is offered whenever capacity
//! frees, and each offer reads every running job to find its candidates. Jobs alike (one
//! tenant, one priority, the same pools, the same quota standing) find the same ones, so
//! the scheduler keeps each class's list while the running jobs, the tenants' accounts and
//! the clock stay as they were. [`Stamped`] tells it when they may not have: each mutable
//! borrow of a stamped value takes a stamp never used before.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::{JobId, PoolId};

use super::PreemptionKind;

static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

fn next_stamp() -> u64 {
    NEXT_STAMP.fetch_add(1, Ordering::Relaxed)
}

/// A value and a stamp that changes at every mutable borrow of it (stamps are unique
/// across values, so equal stamps mean an unchanged value).
#[derive(Debug, Clone)]
pub struct Stamped<T> {
    value: T,
    stamp: u64,
}

impl<T> Stamped<T> {
    pub fn new(value: T) -> Self {
        Self {
            value,
            stamp: next_stamp(),
        }
    }

    pub fn stamp(&self) -> u64 {
        self.stamp
    }
}

impl<T> Deref for Stamped<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for Stamped<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.stamp = next_stamp();
        &mut self.value
    }
}

/// Which jobs find the same candidates: everything a candidate's judgement reads of the
/// preemptor, for a preemptor that is no backfill head.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CandidateClass {
    /// The PostFilter plugin that judged them, and its minimum runtime.
    pub plugin: &'static str,
    pub min_runtime_ms: u64,
    pub tenant: usize,
    pub priority: i32,
    /// The job's pools (empty: any).
    pub pools: Vec<PoolId>,
    /// Whether static quota admission let the job in.
    pub admitted: bool,
    /// Whether the job may reclaim quota at all.
    pub may_reclaim: bool,
    /// Whether it has waited long enough to reclaim a job whole that holds more than its
    /// tenant borrows.
    pub reclaims_whole: bool,
}

/// The candidates of one class, in the order they are taken in.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Candidates {
    pub victims: Vec<(JobId, PreemptionKind)>,
    /// The milli-GPUs they hold together.
    pub held_milli: u64,
    /// The earliest end of a protection among the others that qualified.
    pub protected_until: Option<u64>,
}

/// The candidates found per class, valid for one state of what they were judged on
/// (the running jobs' and the tenants' stamps, and the time).
#[derive(Debug, Default)]
pub struct CandidateMemo {
    inner: RefCell<MemoState>,
}

#[derive(Debug, Default)]
struct MemoState {
    judged_on: (u64, u64, u64),
    classes: HashMap<CandidateClass, Arc<Candidates>>,
}

impl CandidateMemo {
    /// Forgets every class unless `judged_on` is what they were judged on.
    pub fn keep_for(&self, judged_on: (u64, u64, u64)) {
        let mut inner = self.inner.borrow_mut();
        if inner.judged_on != judged_on {
            inner.judged_on = judged_on;
            inner.classes.clear();
        }
    }

    /// The class's candidates, found by `find` if not known yet.
    pub fn get_or_find(
        &self,
        class: CandidateClass,
        find: impl FnOnce() -> Candidates,
    ) -> Arc<Candidates> {
        if let Some(known) = self.inner.borrow().classes.get(&class) {
            return Arc::clone(known);
        }
        let found = Arc::new(find());
        (self.inner.borrow_mut().classes).insert(class, Arc::clone(&found));
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutable_borrow_takes_a_new_stamp_and_a_shared_one_does_not() {
        let mut value = Stamped::new(vec![1]);
        let first = value.stamp();
        assert_eq!(value.len(), 1);
        assert_eq!(value.stamp(), first);
        value.push(2);
        assert_ne!(value.stamp(), first);
        assert_ne!(Stamped::new(0).stamp(), value.stamp());
    }

    #[test]
    fn the_memo_forgets_its_classes_when_what_they_were_judged_on_changes() {
        let memo = CandidateMemo::default();
        let class = CandidateClass {
            plugin: "preemption",
            min_runtime_ms: 0,
            tenant: 0,
            priority: 1,
            pools: Vec::new(),
            admitted: true,
            may_reclaim: false,
            reclaims_whole: false,
        };
        let found = |held_milli| {
            move || Candidates {
                held_milli,
                ..Candidates::default()
            }
        };
        memo.keep_for((1, 1, 0));
        assert_eq!(memo.get_or_find(class.clone(), found(5)).held_milli, 5);
        assert_eq!(memo.get_or_find(class.clone(), found(7)).held_milli, 5);
        memo.keep_for((1, 1, 0));
        assert_eq!(memo.get_or_find(class.clone(), found(7)).held_milli, 5);
        memo.keep_for((1, 2, 0));
        assert_eq!(memo.get_or_find(class, found(7)).held_milli, 7);
    }
}
