//! Jobs evicted as backfilled, until their controllers make them again. In the simulator a
//! victim goes back to its queue as the same job, and no backfill head evicts it as
//! backfilled again until it finishes. Under `kant run` its pods are deleted, and what
//! comes back is new pods, which form a new job. That job is known as the victim's return
//! by what outlives the eviction: the victim's PodGroup, or, for a lone pod, the controller
//! that owns it (a ReplicaSet, a Job, a StatefulSet), which makes one new pod for each pod
//! evicted. The scheduler is told, so the rule holds for it as for the victim.
//!
//! A return owed is forgotten with its PodGroup, or after [`RETURN_WINDOW_MS`]: a
//! controller deleted with its pods brings nothing back. A new pod of the controller that
//! is not a replacement (a scale-up) may take a return meant for one: it is then exempt
//! once where the replacement is not, the same count either way.

use std::collections::HashMap;

use super::pods::{GroupKey, group_workload};

/// How long a victim's return is waited for. Controllers replace an evicted pod at once (a
/// ReplicaSet), or after a backoff of at most a few minutes (a Job); this is well past
/// both. Anything owed longer is dropped, so that a controller deleted with its pods
/// leaves nothing behind.
pub(super) const RETURN_WINDOW_MS: u64 = 60 * 60 * 1000;

/// The returns owed, by key (see [`return_key`]).
#[derive(Debug, Default)]
pub(super) struct BackfillReturns {
    owed: HashMap<String, Owed>,
}

/// Victims of one key not yet back, and when the last of them was evicted.
#[derive(Debug)]
struct Owed {
    count: u32,
    since_ms: u64,
}

impl BackfillReturns {
    /// A victim known by `key` was evicted as backfilled at `now_ms`.
    pub fn owe(&mut self, key: String, now_ms: u64) {
        self.expire(now_ms);
        let owed = self.owed.entry(key).or_insert(Owed {
            count: 0,
            since_ms: now_ms,
        });
        owed.count += 1;
        owed.since_ms = now_ms;
    }

    /// Whether a job known by `key`, formed at `now_ms`, is a victim back: if so, that
    /// return is no longer owed.
    pub fn take(&mut self, key: &str, now_ms: u64) -> bool {
        self.expire(now_ms);
        let Some(owed) = self.owed.get_mut(key) else {
            return false;
        };
        owed.count -= 1;
        if owed.count == 0 {
            self.owed.remove(key);
        }
        true
    }

    /// The workload `key` is gone (its PodGroup deleted with no pod left).
    pub fn forget(&mut self, key: &str) {
        self.owed.remove(key);
    }

    fn expire(&mut self, now_ms: u64) {
        self.owed
            .retain(|_, owed| now_ms.saturating_sub(owed.since_ms) < RETURN_WINDOW_MS);
    }
}

/// What a job's return is known by: its PodGroup's workload, else its lone pod's
/// controller (by uid). `None` for a lone pod no controller owns: nothing brings it back.
pub(super) fn return_key(group: Option<&GroupKey>, controller: Option<&str>) -> Option<String> {
    match (group, controller) {
        (Some(group), _) => Some(group_workload(group)),
        (None, Some(uid)) => Some(format!("controller:{uid}")),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_victim_is_returned_once_within_the_window() {
        let mut returns = BackfillReturns::default();
        let key = || "controller:rs-1".to_owned();
        returns.owe(key(), 0);
        returns.owe(key(), 10);
        assert!(returns.take(&key(), 20));
        assert!(returns.take(&key(), 30));
        assert!(!returns.take(&key(), 40), "two victims, two returns");
        returns.owe(key(), 50);
        assert!(
            !returns.take(&key(), 50 + RETURN_WINDOW_MS),
            "past the window"
        );
        returns.owe(key(), 60);
        returns.forget(&key());
        assert!(!returns.take(&key(), 70), "forgotten");
    }

    #[test]
    fn a_pod_group_outranks_the_controller() {
        let group = ("ml".to_owned(), "train".to_owned());
        assert_eq!(
            return_key(Some(&group), Some("uid")).as_deref(),
            Some("group:ml/train")
        );
        assert_eq!(
            return_key(None, Some("uid")).as_deref(),
            Some("controller:uid")
        );
        assert_eq!(return_key(None, None), None);
    }
}
