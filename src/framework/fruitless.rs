//! Searches not worth repeating. The queue offers a failed job again once capacity has
//! been returned anywhere; this keeps the scheduler from searching it again until room
//! came back where its search could use it: a search group of its pools gained room
//! (pods gone or resized, a device healthy again, room held for a backfill head given
//! back) that the search would not pass by, its quota admits it on a pool it was not
//! searched on (or, for a gang holding out for a tight placement, on other pools at all:
//! fewer may hold it only in a wider tier), or a patience period of its ended (its first
//! lets it out of its tightest tier, each later one over one more leaf). Placements only take
//! room, and a search that found nothing is taken to find nothing on less room (the
//! search's bounded rearrangement of a gang's pods of several widths is not proven to,
//! nor is the fill of the leaves a gang held to a number of them may use, chosen by their GPU room,
//! where node filters keep it off part of that room; random workloads and the standard
//! replays decide the same both ways).
//!
//! The scheduler tells the log where room came back (for a pod with anti-affinity
//! leaving, every group of the domains it kept others out of), and keeps each job's
//! failed search beside what else it remembers of the job. What is not room in a group
//! clears the log, and every search is repeated: the cluster or the tenants changing
//! shape, a pod relabelled. It owns no cluster state and decides nothing but whether a
//! search may be skipped.

use crate::model::{ClusterSpec, GroupId, PoolId};

/// Where room came back: the groups that gained room, in order.
#[derive(Debug, Default)]
pub struct RoomLog {
    /// The groups that gained room, in order, since the log was last cleared.
    gained: Vec<GroupId>,
    /// Per search group, one past where in `gained` it last appears (0: nowhere).
    last_gained: Vec<usize>,
    /// Counts the times the log was cleared: what was marked before means nothing after.
    generation: u64,
}

/// Where a search began: room gained after it counts as new to it.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    generation: u64,
    gained: usize,
}

/// A search that found nothing.
#[derive(Debug, Clone, Copy)]
pub struct FailedSearch {
    /// Where it began.
    since: Mark,
    /// The pools it searched, a bit per pool.
    pools: u64,
    /// The patience periods its gang had held out for a tight placement, if any.
    patience_periods: Option<u64>,
}

/// What a search would cover: the job's pools, and how far it may spread.
pub struct SearchScope<'a> {
    pub pools: &'a [PoolId],
    /// The whole patience periods a gang without a required tier has held out for a tight
    /// placement (`None`: no patience applies): the more, the further it may spread.
    pub patience_periods: Option<u64>,
}

/// The longest log kept: past it, the log is cleared and every search is repeated once
/// more, so the log costs no more than a few searches' worth of memory.
const MAX_LOG: usize = 1 << 16;

impl RoomLog {
    /// Where a search beginning now starts.
    pub fn mark(&self) -> Mark {
        Mark {
            generation: self.generation,
            gained: self.gained.len(),
        }
    }

    /// Room came back in these groups.
    pub fn room_gained(&mut self, groups: impl IntoIterator<Item = GroupId>) {
        for group in groups {
            let index = group.index();
            if index >= self.last_gained.len() {
                self.last_gained.resize(index + 1, 0);
            }
            self.gained.push(group);
            self.last_gained[index] = self.gained.len();
        }
        if self.gained.len() > MAX_LOG {
            self.clear();
        }
    }

    /// Room may have come back anywhere, or the groups were numbered anew: every search
    /// that failed before is repeated.
    pub fn clear(&mut self) {
        self.gained.clear();
        self.last_gained.clear();
        self.generation += 1;
    }

    /// A search over `scope`, begun at `since`, found nothing: what to remember of it,
    /// `None` where nothing can be (the log was cleared meanwhile, or a pool is past 63).
    pub fn failed(&self, since: Mark, scope: &SearchScope) -> Option<FailedSearch> {
        let pools = pool_bits(scope.pools).filter(|_| since.generation == self.generation)?;
        Some(FailedSearch {
            since,
            pools,
            patience_periods: scope.patience_periods,
        })
    }

    /// Whether searching the job over `scope` would surely find nothing: its last search
    /// found nothing over as much, and no group of its pools that gained room since is one
    /// the job `could_use` (the search would pass it by). If so, the failure as of now,
    /// over `scope`: what came back since was of no use to it, and stays so until the
    /// group gains again. Costs the fewer of the gains since and the groups of its pools.
    pub fn still_fails(
        &self,
        failed: &FailedSearch,
        spec: &ClusterSpec,
        scope: &SearchScope,
        could_use: impl Fn(GroupId) -> bool,
    ) -> Option<FailedSearch> {
        let pools = pool_bits(scope.pools)?;
        // A gang holding out spreads further at each patience period; while patient, it
        // holds out for the tightest tier any of its pools could ever hold it in: over
        // other pools, even fewer, it may spread further.
        let held_further = match (failed.patience_periods, scope.patience_periods) {
            (Some(then), Some(now)) => now > then || (then == 0 && pools != failed.pools),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let reaches_further = held_further
            || pools & !failed.pools != 0
            || failed.since.generation != self.generation;
        if reaches_further {
            return None;
        }
        let since = failed.since.gained;
        let pool_groups: usize = scope.pools.iter().map(|&p| spec.pool(p).groups.len()).sum();
        let useful = if self.gained.len() - since <= pool_groups {
            // Each group once, where it last appears.
            let last =
                |(i, group): &(usize, &GroupId)| self.last_gained[group.index()] == since + i + 1;
            let in_pools = |group: GroupId| {
                pool_bits(&[spec.group(group).pool]).is_some_and(|bit| pools & bit != 0)
            };
            (self.gained[since..].iter().enumerate().filter(last))
                .any(|(_, &group)| in_pools(group) && could_use(group))
        } else {
            let gained = |group: &GroupId| {
                (self.last_gained.get(group.index())).is_some_and(|&end| end > since)
            };
            (scope.pools.iter())
                .flat_map(|&pool| spec.pool(pool).groups.iter().filter(|g| gained(g)))
                .any(|&group| could_use(group))
        };
        // As of now, over the scope just judged (it may be narrower than the last).
        let now = FailedSearch {
            since: self.mark(),
            pools,
            patience_periods: scope.patience_periods,
        };
        (!useful).then_some(now)
    }
}

/// The pools as a bit mask, `None` with a pool past 63.
fn pool_bits(pools: &[PoolId]) -> Option<u64> {
    (pools.iter()).try_fold(0u64, |bits, p| {
        (p.index() < 64).then(|| bits | 1 << p.index())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClusterSpecBuilder, LeafPath, LinkProfile, NodeRow};

    /// An `H100` pool of four leaf groups of one node each, and an `A100` pool of one.
    fn spec() -> ClusterSpec {
        let mut builder = ClusterSpecBuilder::new();
        for leaf in 0..5 {
            let row = NodeRow {
                name: format!("n{leaf}"),
                gpu_model: Some(if leaf < 4 { "H100" } else { "A100" }.into()),
                gpus: 8,
                leaf: Some(LeafPath {
                    superspine: "s".into(),
                    spine: "p".into(),
                    leaf: format!("leaf-{leaf}"),
                }),
                ..Default::default()
            };
            builder
                .add(row, LinkProfile::NvlinkAll)
                .expect("a valid node");
        }
        builder.build()
    }

    /// The H100 pool's id and groups, and the A100 pool's id.
    fn pools(spec: &ClusterSpec) -> (PoolId, Vec<GroupId>, PoolId) {
        let h100 = spec.pool_of_model(Some("H100")).expect("the H100 pool");
        let a100 = spec.pool_of_model(Some("A100")).expect("the A100 pool");
        (h100, spec.pool(h100).groups.clone(), a100)
    }

    fn any(_: GroupId) -> bool {
        true
    }

    #[test]
    fn a_failed_search_is_repeated_only_once_room_comes_back_where_it_could_go() {
        let spec = spec();
        let (pool, groups, a100) = pools(&spec);
        assert_eq!(groups.len(), 4);
        let mut log = RoomLog::default();
        let scope = SearchScope {
            pools: &[pool],
            patience_periods: Some(0),
        };
        let failed = log.failed(log.mark(), &scope).expect("a pool below 64");
        assert!(log.still_fails(&failed, &spec, &scope, any).is_some());
        log.room_gained(spec.pool(a100).groups.clone());
        assert!(
            log.still_fails(&failed, &spec, &scope, any).is_some(),
            "room came back only in a pool it does not use"
        );
        log.room_gained([groups[3]]);
        let renewed = log.still_fails(&failed, &spec, &scope, |g| g != groups[3]);
        let renewed = renewed.expect("room came back only where the job could not use it");
        assert!(log.still_fails(&failed, &spec, &scope, any).is_none());
        assert!(
            log.still_fails(&renewed, &spec, &scope, any).is_some(),
            "what came back before the last check is not read again"
        );
        let failed = log.failed(log.mark(), &scope).expect("a pool below 64");
        let a_leaf_more = SearchScope {
            patience_periods: Some(1),
            ..scope
        };
        let failed_later = log.still_fails(&failed, &spec, &a_leaf_more, any);
        assert!(
            failed_later.is_none(),
            "its patience ended: it may spread over one more leaf"
        );
        let failed_later = log
            .failed(log.mark(), &a_leaf_more)
            .expect("a pool below 64");
        assert!(
            log.still_fails(&failed_later, &spec, &a_leaf_more, any)
                .is_some()
        );
        let unbounded = SearchScope {
            patience_periods: None,
            ..scope
        };
        assert!(
            log.still_fails(&failed_later, &spec, &unbounded, any)
                .is_none()
        );
        let either = SearchScope {
            pools: &[pool, a100],
            ..scope
        };
        assert!(
            log.still_fails(&failed, &spec, &either, any).is_none(),
            "its quota came to admit it on another pool"
        );
        log.room_gained([groups[1]]);
        assert!(log.still_fails(&failed, &spec, &scope, any).is_none());
    }

    #[test]
    fn a_check_over_a_narrower_scope_speaks_for_that_scope_alone() {
        let spec = spec();
        let (pool, groups, a100) = pools(&spec);
        let mut log = RoomLog::default();
        let spread = SearchScope {
            pools: &[pool, a100],
            patience_periods: None,
        };
        let failed = log.failed(log.mark(), &spread).expect("pools below 64");
        log.room_gained([groups[0]]);
        let patient = SearchScope {
            pools: &[pool],
            patience_periods: Some(0),
        };
        // Of no use to a gang holding out for a tight placement in one pool...
        let renewed = log.still_fails(&failed, &spec, &patient, |g| g != groups[0]);
        let renewed = renewed.expect("nothing it could use came back");
        // ...which says nothing of a search spreading, or over both pools.
        let spread_one_pool = SearchScope {
            pools: &[pool],
            patience_periods: None,
        };
        assert!(
            log.still_fails(&renewed, &spec, &spread_one_pool, any)
                .is_none()
        );
        let patient_both = SearchScope {
            pools: &[pool, a100],
            patience_periods: Some(0),
        };
        assert!(
            log.still_fails(&renewed, &spec, &patient_both, any)
                .is_none()
        );
    }

    #[test]
    fn a_search_begun_before_room_came_back_is_repeated() {
        let spec = spec();
        let (pool, groups, _) = pools(&spec);
        let mut log = RoomLog::default();
        let scope = SearchScope {
            pools: &[pool],
            patience_periods: None,
        };
        let mark = log.mark();
        // Victims evicted during the attempt gave room back before it ended.
        log.room_gained([groups[0]]);
        let failed = log.failed(mark, &scope).expect("a pool below 64");
        assert!(log.still_fails(&failed, &spec, &scope, any).is_none());
        // The log was cleared during the attempt: nothing is known of what came back.
        let mark = log.mark();
        log.clear();
        assert!(log.failed(mark, &scope).is_none());
        let failed = log.failed(log.mark(), &scope).expect("a pool below 64");
        log.clear();
        assert!(log.still_fails(&failed, &spec, &scope, any).is_none());
        let beyond = SearchScope {
            pools: &[PoolId(64)],
            patience_periods: None,
        };
        assert!(log.failed(log.mark(), &beyond).is_none());
    }

    #[test]
    fn many_gains_are_read_group_by_group() {
        let spec = spec();
        let (pool, groups, a100) = pools(&spec);
        let mut log = RoomLog::default();
        let scope = SearchScope {
            pools: &[pool],
            patience_periods: None,
        };
        log.room_gained([groups[2]]);
        let failed = log.failed(log.mark(), &scope).expect("a pool below 64");
        // More gains than the pool has groups, none where the job could go.
        let elsewhere = spec.pool(a100).groups[0];
        log.room_gained(std::iter::repeat_n(elsewhere, 2 * groups.len()));
        assert!(log.still_fails(&failed, &spec, &scope, any).is_some());
        log.room_gained([groups[1]]);
        assert!(log.still_fails(&failed, &spec, &scope, any).is_none());
        assert!(
            log.still_fails(&failed, &spec, &scope, |g| g != groups[1])
                .is_some(),
            "groups[2] gained before the failure"
        );
    }
}
