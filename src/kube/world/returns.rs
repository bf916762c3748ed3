//! Jobs evicted as backfilled, until their controllers make them again. In the simulator a
//! victim goes back to its queue as the same job, and no backfill head evicts it as
//! backfilled again until it finishes. Under `kant run` its pods are deleted, and what
//! comes back is new pods, which form a new job. That job is known as the victim's return
//! by what outlives the eviction: the PodGroup its pods name, or, for a lone pod, the
//! controller that owns it (a ReplicaSet, a Job, a StatefulSet), which makes one new pod
//! for each pod evicted. The scheduler is told, so the rule holds for it as for the victim.
//!
//! A return is owed from the eviction's decision (the new pods cannot come before it) and
//! given up if every eviction of the victim is refused. It is forgotten with its PodGroup,
//! or [`RETURN_WINDOW_MS`] after that eviction: a controller deleted with its pods brings
//! nothing back. An exempt job that comes apart to form again (its pods changed, part of
//! its binding failed) owes its return anew, so what forms takes the exemption back; the
//! part of a gang that runs on where its evictions were refused stays exempt. A new pod of
//! the same PodGroup or controller that is no replacement (a scale-up, a member formed
//! again) may take a return meant for one: it is then exempt where the replacement is
//! not. A Deployment's rollout replaces pods under a new ReplicaSet, which is not known.

use std::collections::{HashMap, VecDeque};

use crate::model::JobId;

use super::World;
use super::pods::{PodEntry, group_workload};

/// How long a victim's return is waited for. Controllers replace an evicted pod at once (a
/// ReplicaSet), or after a backoff of at most a few minutes (a Job); this is well past
/// both. A return owed longer is dropped, so that a controller deleted with its pods
/// leaves nothing behind.
const RETURN_WINDOW_MS: u64 = 60 * 60 * 1000;

/// The returns owed, by key (see [`return_key`]): when each victim was evicted, oldest
/// first.
#[derive(Debug, Default)]
pub(super) struct BackfillReturns {
    owed: HashMap<String, VecDeque<u64>>,
}

impl BackfillReturns {
    /// A victim known by `key` was evicted as backfilled at `now_ms`.
    fn owe(&mut self, key: String, now_ms: u64) {
        self.owed.entry(key).or_default().push_back(now_ms);
    }

    /// Whether a job known by `key` is a victim back: if so, the oldest return of that key
    /// is no longer owed.
    fn take(&mut self, key: &str) -> bool {
        self.drop_one(key, VecDeque::pop_front)
    }

    /// The latest return owed under `key` will not come (its evictions were refused).
    /// Whether one was owed.
    fn cancel(&mut self, key: &str) -> bool {
        self.drop_one(key, VecDeque::pop_back)
    }

    /// Drops one return owed under `key`, the one `pop` takes; whether there was one.
    fn drop_one(&mut self, key: &str, pop: fn(&mut VecDeque<u64>) -> Option<u64>) -> bool {
        let Some(times) = self.owed.get_mut(key) else {
            return false;
        };
        pop(times);
        if times.is_empty() {
            self.owed.remove(key);
        }
        true
    }

    /// The workload `key` is gone (its PodGroup deleted with no pod left).
    pub fn forget(&mut self, key: &str) {
        self.owed.remove(key);
    }

    /// Drops the returns owed for [`RETURN_WINDOW_MS`] by `now_ms`; how many.
    fn expire(&mut self, now_ms: u64) -> u64 {
        let mut expired = 0;
        self.owed.retain(|_, times| {
            while times
                .front()
                .is_some_and(|&t| now_ms.saturating_sub(t) >= RETURN_WINDOW_MS)
            {
                times.pop_front();
                expired += 1;
            }
            !times.is_empty()
        });
        expired
    }
}

/// What a pod's return is known by: the PodGroup it names, else the controller that owns
/// it (by uid). `None` for a lone pod no controller owns: nothing brings it back.
fn return_key(pod: &PodEntry) -> Option<String> {
    match (&pod.group, &pod.controller) {
        (Some(group), _) => Some(group_workload(group)),
        (None, Some(uid)) => Some(format!("controller:{uid}")),
        (None, None) => None,
    }
}

impl World {
    /// What `job`'s pods come back as: its first live pod's [`return_key`].
    fn return_key_of(&self, job: JobId) -> Option<String> {
        let entry = self.pods.jobs.get(&job)?;
        let (_, uid) = entry.alive().next()?;
        return_key(self.pods.entries.get(uid)?)
    }

    /// Drops the returns waited for too long, counting them.
    fn expire_returns(&mut self, now_ms: u64) {
        let expired = self.pods.backfill_returns.expire(now_ms);
        self.metrics.backfill_returns("expired", expired);
    }

    /// `victim` is to be evicted as backfilled: its return is owed.
    pub(super) fn owe_return(&mut self, victim: JobId, now_ms: u64) {
        self.expire_returns(now_ms);
        if let Some(key) = self.return_key_of(victim) {
            self.pods.backfill_returns.owe(key, now_ms);
            self.metrics.backfill_returns("owed", 1);
        }
    }

    /// Every eviction of `victim`, evicted as backfilled, was refused: it runs on, and
    /// nothing comes back.
    pub(super) fn cancel_return(&mut self, victim: JobId) {
        let cancelled =
            (self.return_key_of(victim)).is_some_and(|key| self.pods.backfill_returns.cancel(&key));
        self.metrics
            .backfill_returns("cancelled", u64::from(cancelled));
    }

    /// A job just formed: if it is a victim back, the scheduler exempts it.
    pub(super) fn take_return(&mut self, job: JobId, now_ms: u64) {
        self.expire_returns(now_ms);
        if self.pods.backfill_returns.owed.is_empty() {
            return;
        }
        let returned =
            (self.return_key_of(job)).is_some_and(|key| self.pods.backfill_returns.take(&key));
        if returned {
            self.metrics.backfill_returns("taken", 1);
            self.scheduler.exempt_from_backfill_eviction(job);
        }
    }

    /// Takes `job` out of the scheduler, to form again or to run on in part under a new
    /// id. An exempt job (a victim back, or one placed as an overdue head) owes its return
    /// anew, for what forms again of it. Returns whether it was exempt.
    pub(super) fn withdraw_keeping_exemption(&mut self, job: JobId, now_ms: u64) -> bool {
        let exempt = self.scheduler.is_exempt_from_backfill_eviction(job);
        if exempt {
            self.owe_return(job, now_ms);
        }
        self.scheduler.withdraw(job);
        exempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "controller:rs-1";

    #[test]
    fn each_victim_is_returned_once() {
        let mut returns = BackfillReturns::default();
        returns.owe(KEY.into(), 0);
        returns.owe(KEY.into(), 10);
        assert!(returns.take(KEY));
        assert!(returns.take(KEY));
        assert!(!returns.take(KEY), "two victims, two returns");
        returns.owe(KEY.into(), 50);
        returns.owe(KEY.into(), 60);
        assert!(returns.cancel(KEY));
        assert!(returns.take(KEY));
        assert!(!returns.take(KEY), "one eviction refused");
        assert!(!returns.cancel(KEY));
        returns.owe(KEY.into(), 100);
        returns.forget(KEY);
        assert!(!returns.take(KEY), "forgotten");
    }

    #[test]
    fn each_return_expires_on_its_own() {
        let mut returns = BackfillReturns::default();
        returns.owe(KEY.into(), 0);
        returns.owe(KEY.into(), RETURN_WINDOW_MS / 2);
        assert_eq!(returns.expire(RETURN_WINDOW_MS), 1);
        assert!(returns.take(KEY), "the second is still owed");
        returns.owe(KEY.into(), RETURN_WINDOW_MS);
        assert_eq!(returns.expire(2 * RETURN_WINDOW_MS), 1);
        assert!(!returns.take(KEY));
    }
}
