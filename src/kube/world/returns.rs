//! Preemption victims, until their controllers make them again. In the simulator a victim
//! goes back to its queue as the same job: no backfill head evicts it as backfilled again
//! until it finishes, and its wait to run again is measured from its eviction. Under `kant
//! run` its pods are deleted, and what comes back is new pods, which form a new job. That
//! job is known as the victim's return by what outlives the eviction: the PodGroup its
//! pods name, or, for a lone pod, the controller that owns it (a ReplicaSet, a Job, a
//! StatefulSet), which makes one new pod for each pod evicted. The return of a victim
//! evicted as backfilled is exempt from backfill eviction, as the victim is in the
//! simulator; every return carries its eviction, and the live metrics count the wait from
//! it to the return's first moment placed whole (`kant_victim_wait_again_seconds{kind}`).
//!
//! A return is owed from the eviction's decision (the new pods cannot come before it) and
//! given up if every eviction of the victim is refused. It is forgotten with its PodGroup,
//! or [`RETURN_WINDOW_MS`] after that eviction: a controller deleted with its pods brings
//! nothing back. A job that comes apart to form again (its pods changed, part of its
//! binding failed) while exempt, or while a return not yet placed whole, owes its return
//! anew, so what forms takes the exemption and the eviction back; the part of a gang that
//! runs on where its evictions were refused stays exempt. A new pod of the same PodGroup or
//! controller that is no replacement (a scale-up, a member formed again) may take a return
//! meant for one: it is then exempt, or its wait counted, where the replacement's is not.
//! A Deployment's rollout replaces pods under a new ReplicaSet, which is not known.

use std::collections::{HashMap, VecDeque};

use crate::framework::PreemptionKind;
use crate::model::JobId;

use super::World;
use super::pods::{PodEntry, group_workload};

/// How long a victim's return is waited for. Controllers replace an evicted pod at once (a
/// ReplicaSet), or after a backoff of at most a few minutes (a Job); this is well past
/// both. A return owed longer is dropped, so that a controller deleted with its pods
/// leaves nothing behind.
const RETURN_WINDOW_MS: u64 = 60 * 60 * 1000;

/// Why and when a victim was evicted: what its return's wait to run again counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Eviction {
    pub kind: PreemptionKind,
    pub at_ms: u64,
}

/// One return owed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owed {
    /// When it came to be owed: it expires [`RETURN_WINDOW_MS`] later.
    since_ms: u64,
    /// Whether the job that takes it is exempt from backfill eviction.
    exempt: bool,
    /// The eviction it returns from, while its wait to run again is still to be counted.
    eviction: Option<Eviction>,
}

/// The returns owed, by key (see [`return_key`]), oldest first.
#[derive(Debug, Default)]
pub(super) struct Returns {
    owed: HashMap<String, VecDeque<Owed>>,
}

impl Returns {
    fn owe(&mut self, key: String, owed: Owed) {
        self.owed.entry(key).or_default().push_back(owed);
    }

    /// If a job known by `key` is a victim back, the oldest return of that key, no longer
    /// owed.
    fn take(&mut self, key: &str) -> Option<Owed> {
        self.drop_one(key, VecDeque::pop_front)
    }

    /// The latest return owed under `key` will not come (its evictions were refused).
    fn cancel(&mut self, key: &str) -> Option<Owed> {
        self.drop_one(key, VecDeque::pop_back)
    }

    /// Drops one return owed under `key`, the one `pop` takes.
    fn drop_one(
        &mut self,
        key: &str,
        pop: fn(&mut VecDeque<Owed>) -> Option<Owed>,
    ) -> Option<Owed> {
        let times = self.owed.get_mut(key)?;
        let dropped = pop(times);
        if times.is_empty() {
            self.owed.remove(key);
        }
        dropped
    }

    /// The workload `key` is gone (its PodGroup deleted with no pod left).
    pub fn forget(&mut self, key: &str) {
        self.owed.remove(key);
    }

    /// Drops the returns owed for [`RETURN_WINDOW_MS`] by `now_ms`; how many of them were
    /// exempt.
    fn expire(&mut self, now_ms: u64) -> u64 {
        let mut expired_exempt = 0;
        self.owed.retain(|_, owed| {
            while let Some(oldest) = owed.front()
                && now_ms.saturating_sub(oldest.since_ms) >= RETURN_WINDOW_MS
            {
                expired_exempt += u64::from(oldest.exempt);
                owed.pop_front();
            }
            !owed.is_empty()
        });
        expired_exempt
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

    /// Drops the returns waited for too long, counting the exempt ones.
    fn expire_returns(&mut self, now_ms: u64) {
        let expired = self.pods.returns.expire(now_ms);
        self.metrics.backfill_returns("expired", expired);
    }

    /// `victim` is to be evicted for `kind`: its return is owed, exempt from backfill
    /// eviction if evicted as backfilled.
    pub(super) fn owe_return(&mut self, victim: JobId, kind: PreemptionKind, now_ms: u64) {
        let owed = Owed {
            since_ms: now_ms,
            exempt: kind == PreemptionKind::Backfill,
            eviction: Some(Eviction {
                kind,
                at_ms: now_ms,
            }),
        };
        self.owe(victim, owed, now_ms);
    }

    fn owe(&mut self, job: JobId, owed: Owed, now_ms: u64) {
        self.expire_returns(now_ms);
        if let Some(key) = self.return_key_of(job) {
            self.pods.returns.owe(key, owed);
            self.metrics
                .backfill_returns("owed", u64::from(owed.exempt));
        }
    }

    /// Every eviction of `victim` was refused: it runs on, and nothing comes back.
    pub(super) fn cancel_return(&mut self, victim: JobId) {
        let cancelled = (self.return_key_of(victim)).and_then(|key| self.pods.returns.cancel(&key));
        let exempt = cancelled.is_some_and(|owed| owed.exempt);
        self.metrics
            .backfill_returns("cancelled", u64::from(exempt));
    }

    /// A job just formed: if it is a victim back, it carries its eviction, and the
    /// scheduler exempts it where the victim was evicted as backfilled.
    pub(super) fn take_return(&mut self, job: JobId, now_ms: u64) {
        self.expire_returns(now_ms);
        if self.pods.returns.owed.is_empty() {
            return;
        }
        let Some(owed) = (self.return_key_of(job)).and_then(|key| self.pods.returns.take(&key))
        else {
            return;
        };
        if owed.exempt {
            self.metrics.backfill_returns("taken", 1);
            self.scheduler.exempt_from_backfill_eviction(job);
        }
        if let Some(entry) = self.pods.jobs.get_mut(&job) {
            entry.evicted = owed.eviction;
        }
    }

    /// `job` is placed whole: a victim back has waited from its eviction until now to run
    /// again.
    pub(super) fn placed_whole_again(&mut self, job: JobId, now_ms: u64) {
        let eviction = (self.pods.jobs.get_mut(&job)).and_then(|entry| entry.evicted.take());
        if let Some(Eviction { kind, at_ms }) = eviction {
            (self.metrics).victim_placed_again(kind.name(), now_ms.saturating_sub(at_ms));
        }
    }

    /// Takes `job` out of the scheduler, to form again or to run on in part under a new
    /// id. An exempt job (a victim back, or one placed as an overdue head) or a victim back
    /// not yet placed whole owes its return anew, for what forms again of it. Returns
    /// whether it was exempt.
    pub(super) fn withdraw_keeping_exemption(&mut self, job: JobId, now_ms: u64) -> bool {
        let exempt = self.scheduler.is_exempt_from_backfill_eviction(job);
        let eviction = (self.pods.jobs.get(&job)).and_then(|entry| entry.evicted);
        if exempt || eviction.is_some() {
            let owed = Owed {
                since_ms: now_ms,
                exempt,
                eviction,
            };
            self.owe(job, owed, now_ms);
        }
        self.scheduler.withdraw(job);
        exempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "controller:rs-1";

    fn evicted(kind: PreemptionKind, at_ms: u64) -> Owed {
        Owed {
            since_ms: at_ms,
            exempt: kind == PreemptionKind::Backfill,
            eviction: Some(Eviction { kind, at_ms }),
        }
    }

    #[test]
    fn each_victim_is_returned_once_oldest_first() {
        let mut returns = Returns::default();
        let first = evicted(PreemptionKind::Backfill, 0);
        let second = evicted(PreemptionKind::Priority, 10);
        returns.owe(KEY.into(), first);
        returns.owe(KEY.into(), second);
        assert_eq!(returns.take(KEY), Some(first));
        assert_eq!(returns.take(KEY), Some(second));
        assert_eq!(returns.take(KEY), None, "two victims, two returns");
        let third = evicted(PreemptionKind::QuotaReclaim, 50);
        let fourth = evicted(PreemptionKind::Backfill, 60);
        returns.owe(KEY.into(), third);
        returns.owe(KEY.into(), fourth);
        assert_eq!(returns.cancel(KEY), Some(fourth), "the latest is cancelled");
        assert_eq!(returns.take(KEY), Some(third));
        assert_eq!(returns.take(KEY), None, "one eviction refused");
        assert_eq!(returns.cancel(KEY), None);
        returns.owe(KEY.into(), first);
        returns.forget(KEY);
        assert_eq!(returns.take(KEY), None, "forgotten");
    }

    #[test]
    fn each_return_expires_on_its_own_counting_the_exempt() {
        let mut returns = Returns::default();
        returns.owe(KEY.into(), evicted(PreemptionKind::Backfill, 0));
        returns.owe(KEY.into(), evicted(PreemptionKind::Priority, 1));
        let later = evicted(PreemptionKind::Backfill, RETURN_WINDOW_MS / 2);
        returns.owe(KEY.into(), later);
        assert_eq!(
            returns.expire(RETURN_WINDOW_MS + 1),
            1,
            "two expire, one exempt"
        );
        assert_eq!(returns.take(KEY), Some(later), "the third is still owed");
        returns.owe(
            KEY.into(),
            evicted(PreemptionKind::Priority, RETURN_WINDOW_MS),
        );
        assert_eq!(returns.expire(2 * RETURN_WINDOW_MS), 0);
        assert_eq!(returns.take(KEY), None);
    }
}
