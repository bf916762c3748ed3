//! One tenant's pending jobs in QueueSort order, with what each learned from its past
//! attempts, kept in chunks of a few dozen jobs. Each chunk sums up what its jobs wait for
//! (capacity freed since they failed, a retry time, room in admission, the backfill
//! threshold), and a tree sums up runs of chunks pairwise, so that a round passes by the
//! runs that hold no job worth trying without reading them, and the next wake-up is
//! found without reading every job: a round over a deep backlog costs the logarithm of
//! its chunks per job it tries, not every chunk. A chunk that empties keeps its place
//! (its last job still orders it) until the chunks are packed again, once most of them
//! are empty or small, so that the tree is rebuilt only that often or when a chunk splits
//! in the middle of the queue.
//!
//! This module owns the order and the sums. What to offer, and when, is the round's
//! ([`super::Queues::run`]); a chunk's sums are brought up to date at the end of a round
//! for the chunks the round changed.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use crate::framework::QueueSort;
use crate::model::{Job, JobId};

use super::{Need, Room};

/// A job waiting in its tenant's queue.
#[derive(Debug)]
pub(super) struct Pending {
    pub job: Arc<Job>,
    /// What the job asks for, kept here so that a round need not read the job.
    pub need: Need,
    /// The pools it may use, as a mask (`super::pool_mask`), kept for the same reason.
    pools: u64,
    /// The capacity epoch at which the job last failed to place.
    pub failed_at: Option<u64>,
    /// When to try it again even if no capacity is freed.
    pub retry_at: Option<u64>,
    /// Not tried before this time (a requeue's backoff).
    pub not_before: u64,
    /// Its last failure was unresolvable.
    pub unresolvable: bool,
    /// When it first failed to place.
    pub blocked_since: Option<u64>,
    /// The capacity epoch at which making room for it (backfill) last failed.
    pub backfill_failed_at: Option<u64>,
    /// Placed during the current round (removed at its end).
    pub placed: bool,
}

impl Pending {
    pub fn new(job: Arc<Job>, not_before: u64) -> Self {
        Self {
            need: Need::of(&job),
            pools: super::pool_mask(&job.pools),
            job,
            failed_at: None,
            retry_at: None,
            not_before,
            unresolvable: false,
            blocked_since: None,
            backfill_failed_at: None,
            placed: false,
        }
    }

    /// Whether it asks for GPUs (and so for quota a backfill head may be gathering).
    pub fn asks_gpus(&self) -> bool {
        self.need.milli > 0
    }

    /// Failed before and may yet be placed: admission can refuse it without an attempt.
    fn failed_resolvable(&self) -> bool {
        self.failed_at.is_some() && !self.unresolvable
    }
}

/// Jobs a chunk is split at: large enough that passing by a chunk saves reading many jobs,
/// small enough that a chunk a round must read costs little.
const CHUNK: usize = 32;

/// Where a round is in a queue: a chunk, and a job inside it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Cursor {
    chunk: usize,
    entry: usize,
}

/// What a round must know of a chunk's jobs to pass it by, and the queue of its jobs to
/// find the next wake-up.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Summary {
    /// How many jobs it sums up.
    jobs: usize,
    /// The earliest `not_before` of the jobs never tried (or whose failures were
    /// forgotten); `None`: there are none.
    fresh_not_before: Option<u64>,
    /// Of the jobs that failed and may yet be placed: the earliest epoch they failed at,
    failed_epoch: Option<u64>,
    /// the earliest time one asked to be tried again,
    retry_at: Option<u64>,
    /// and, part by part, the least any asks for (a job asking for no GPU, which admission
    /// never refuses, asks for zero of every part).
    need: Need,
    /// The latest epoch any job failed at, with the earliest retry time among the jobs
    /// that failed then.
    latest_failure: Option<(u64, Option<u64>)>,
    /// When the longest-blocked job first failed,
    blocked_since: Option<u64>,
    /// and the latest any blocked job first failed.
    last_blocked: Option<u64>,
    /// The pools the jobs asking for GPUs name, as a mask (`super::pool_mask`; a job
    /// naming none, which may use any pool, names them all),
    pools: u64,
    /// and whether some job asks for no GPU (it competes with no held pool's quota).
    gpu_free: bool,
    /// The latest time a job is not to be tried before: once it has passed, none of the
    /// jobs is counted in the backoffs.
    latest_not_before: u64,
}

/// What a round knows when it reaches a chunk.
pub(super) struct RoundView {
    pub epoch: u64,
    pub now_ms: u64,
    /// Jobs blocked since this time or earlier are past the backfill threshold; `None`:
    /// the queue's backfill head is taken (or the policy has none).
    pub head_blocked_by: Option<u64>,
    /// The pools the queue's backfill head holds, as a mask that may leave some out
    /// (pools past 63): a job that could use one is not tried. `None`: none held.
    pub held: Option<u64>,
}

impl Summary {
    fn of(entries: &[Pending]) -> Self {
        let mut sum = Summary {
            jobs: entries.len(),
            ..Summary::default()
        };
        let mut resolvable_need: Option<Need> = None;
        for p in entries {
            match p.asks_gpus() {
                true => sum.pools |= p.pools,
                false => sum.gpu_free = true,
            }
            sum.latest_not_before = sum.latest_not_before.max(p.not_before);
            sum.blocked_since = min_some(sum.blocked_since, p.blocked_since);
            sum.last_blocked = sum.last_blocked.max(p.blocked_since);
            match p.failed_at {
                None => sum.fresh_not_before = min_some(sum.fresh_not_before, Some(p.not_before)),
                Some(epoch) => {
                    sum.latest_failure = match sum.latest_failure {
                        Some((latest, retry)) if latest > epoch => Some((latest, retry)),
                        Some((latest, retry)) if latest == epoch => {
                            Some((latest, min_some(retry, p.retry_at)))
                        }
                        _ => Some((epoch, p.retry_at)),
                    };
                }
            }
            if p.failed_resolvable() {
                sum.failed_epoch = min_some(sum.failed_epoch, p.failed_at);
                sum.retry_at = min_some(sum.retry_at, p.retry_at);
                resolvable_need = Some(resolvable_need.map_or(p.need, |n| n.least(&p.need)));
            }
        }
        sum.need = resolvable_need.unwrap_or_default();
        sum
    }

    /// The sum of two runs of chunks: what a round reads of it says no job of either is
    /// worth a look only where it says so of both.
    fn merge(&self, other: &Summary) -> Summary {
        Summary {
            jobs: self.jobs + other.jobs,
            fresh_not_before: min_some(self.fresh_not_before, other.fresh_not_before),
            failed_epoch: min_some(self.failed_epoch, other.failed_epoch),
            retry_at: min_some(self.retry_at, other.retry_at),
            // `need` counts where some job failed and may yet be placed.
            need: match (self.failed_epoch, other.failed_epoch) {
                (Some(_), Some(_)) => self.need.least(&other.need),
                (Some(_), None) => self.need,
                _ => other.need,
            },
            latest_failure: match (self.latest_failure, other.latest_failure) {
                (Some((a, retry_a)), Some((b, retry_b))) => Some(match a.cmp(&b) {
                    std::cmp::Ordering::Greater => (a, retry_a),
                    std::cmp::Ordering::Less => (b, retry_b),
                    std::cmp::Ordering::Equal => (a, min_some(retry_a, retry_b)),
                }),
                (a, b) => a.or(b),
            },
            blocked_since: min_some(self.blocked_since, other.blocked_since),
            last_blocked: self.last_blocked.max(other.last_blocked),
            pools: self.pools | other.pools,
            gpu_free: self.gpu_free || other.gpu_free,
            latest_not_before: self.latest_not_before.max(other.latest_not_before),
        }
    }

    /// Whether some job of the chunk could be worth a look in this round: a backfill head
    /// candidate, a job never tried and out of its backoff, one whose retry time came, or
    /// one that failed before capacity was last freed and that admission (`room`, `None`
    /// when it cannot tell) would not refuse outright, were no room held for backfill
    /// heads (a job kept out of that room alone is read, to be told so as it would be if
    /// it tried; the round refuses it). It may say yes for a chunk whose jobs all turn out
    /// not worth trying; it never says no for one that holds such a job.
    pub fn worth_a_look(&self, round: &RoundView, room: Option<&Room>) -> bool {
        // Every job asks for GPUs of a held pool: none is tried.
        if round
            .held
            .is_some_and(|held| !self.gpu_free && self.pools & !held == 0)
        {
            return false;
        }
        let head = round
            .head_blocked_by
            .is_some_and(|by| self.blocked_since.is_some_and(|since| since <= by));
        let fresh = self.fresh_not_before.is_some_and(|t| t <= round.now_ms);
        let due = self.retry_at.is_some_and(|t| t <= round.now_ms);
        let freed = self.failed_epoch.is_some_and(|e| e < round.epoch)
            && room.is_none_or(|room| !room.refuses_ignoring_holds(&self.need, false));
        head || fresh || due || freed
    }
}

fn min_some(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

struct Chunk {
    entries: Vec<Pending>,
    summary: Summary,
    /// Its last job, or the last it held once empty: where it stands in the order.
    last: Option<Arc<Job>>,
}

impl Chunk {
    fn new(entries: Vec<Pending>) -> Self {
        Self {
            summary: Summary::of(&entries),
            last: entries.last().map(|p| p.job.clone()),
            entries,
        }
    }

    /// Sums its jobs up again.
    fn sum_up(&mut self) {
        self.summary = Summary::of(&self.entries);
        if let Some(last) = self.entries.last()
            && !self
                .last
                .as_ref()
                .is_some_and(|job| Arc::ptr_eq(job, &last.job))
        {
            self.last = Some(last.job.clone());
        }
    }
}

/// The chunks' summaries summed up pairwise: `sums[1]` is the whole queue's, `sums[i]`
/// sums up `sums[2i]` and `sums[2i + 1]`, and chunk `c`'s own is at `leaves + c` (past the
/// last chunk, nothing).
#[derive(Default)]
struct SummaryTree {
    sums: Vec<Summary>,
    leaves: usize,
}

impl SummaryTree {
    fn of(chunks: &[Chunk]) -> Self {
        let leaves = chunks.len().next_power_of_two();
        let mut sums = vec![Summary::default(); 2 * leaves];
        for (sum, chunk) in sums[leaves..].iter_mut().zip(chunks) {
            *sum = chunk.summary;
        }
        for i in (1..leaves).rev() {
            sums[i] = sums[2 * i].merge(&sums[2 * i + 1]);
        }
        Self { sums, leaves }
    }

    /// Chunk `chunk`'s summary changed to `summary`.
    fn set(&mut self, chunk: usize, summary: Summary) {
        let mut i = self.leaves + chunk;
        self.sums[i] = summary;
        while i > 1 {
            i /= 2;
            self.sums[i] = self.sums[2 * i].merge(&self.sums[2 * i + 1]);
        }
    }

    /// The first chunk at or after `from` that holds jobs and whose summary `look`
    /// accepts; `look` is asked of whole runs first, and passes by a run it refuses.
    fn first(&self, from: usize, look: &mut impl FnMut(&Summary) -> bool) -> Option<usize> {
        self.first_in(1, (0, self.leaves), from, look)
    }

    fn first_in(
        &self,
        node: usize,
        (lo, hi): (usize, usize),
        from: usize,
        look: &mut impl FnMut(&Summary) -> bool,
    ) -> Option<usize> {
        let sum = self.sums.get(node)?;
        if hi <= from || sum.jobs == 0 || (lo >= from && !look(sum)) {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = (lo + hi) / 2;
        (self.first_in(2 * node, (lo, mid), from, look))
            .or_else(|| self.first_in(2 * node + 1, (mid, hi), from, look))
    }

    /// The least of `of(chunk)` over the chunks of the runs `read` does not settle:
    /// `read(sum)` is `Ok(answer)` for a run whose sum tells its answer, `Err(())` for one
    /// whose chunks must be looked into (a chunk's, by `of`).
    fn least(
        &self,
        node: usize,
        read: &impl Fn(&Summary) -> Result<Option<u64>, ()>,
        of: &impl Fn(usize) -> Option<u64>,
    ) -> Option<u64> {
        let sum = self.sums.get(node)?;
        match read(sum) {
            Ok(answer) => answer,
            Err(()) if node >= self.leaves => of(node - self.leaves),
            Err(()) => min_some(
                self.least(2 * node, read, of),
                self.least(2 * node + 1, read, of),
            ),
        }
    }
}

/// One tenant's queue.
#[derive(Default)]
pub(super) struct TenantQueue {
    /// Never empty chunks, in QueueSort order.
    chunks: Vec<Chunk>,
    len: usize,
    /// How many jobs of unchanged chunks are not to be tried before each time still to
    /// come, for the next wake-up.
    backoffs: Backoffs,
    /// The chunks changed since they were last summed up: their sums, and their part of
    /// the backoffs, wait for [`TenantQueue::settle`]. Sorted.
    changed: Vec<usize>,
    /// The chunks' sums, summed up.
    tree: SummaryTree,
}

impl TenantQueue {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn iter(&self) -> impl Iterator<Item = &Pending> {
        self.chunks.iter().flat_map(|c| c.entries.iter())
    }

    /// The pools its jobs asking for GPUs may use, as a mask (`super::pool_mask`).
    pub fn gpu_pools(&self) -> u64 {
        self.tree.sums.get(1).map_or(0, |whole| whole.pools)
    }

    /// Adds a job after every job QueueSort puts before it or level with it.
    pub fn push(&mut self, pending: Pending, sort: &dyn QueueSort) {
        let after = |job: &Arc<Job>| sort.compare(job, &pending.job).is_le();
        let chunk = self
            .chunks
            .partition_point(|c| c.last.as_ref().is_some_and(after))
            .min(self.chunks.len().saturating_sub(1));
        if self.chunks.is_empty() {
            self.chunks.push(Chunk::new(Vec::new()));
            self.tree = SummaryTree::of(&self.chunks);
        }
        self.change(chunk);
        let entries = &mut self.chunks[chunk].entries;
        let at = entries.partition_point(|p| after(&p.job));
        entries.insert(at, pending);
        self.len += 1;
        self.settle();
    }

    /// Takes a job out.
    pub fn remove(&mut self, job: JobId) -> Option<Pending> {
        let (chunk, entry) = self.chunks.iter().enumerate().find_map(|(c, chunk)| {
            let at = chunk.entries.iter().position(|p| p.job.id == job)?;
            Some((c, at))
        })?;
        self.change(chunk);
        let pending = self.chunks[chunk].entries.remove(entry);
        self.len -= 1;
        self.settle();
        Some(pending)
    }

    /// Every job is offered in full again, as if never tried.
    pub fn forget_failures(&mut self) {
        for chunk in &mut self.chunks {
            for pending in &mut chunk.entries {
                pending.failed_at = None;
                pending.backfill_failed_at = None;
                pending.unresolvable = false;
            }
            chunk.sum_up();
        }
        self.tree = SummaryTree::of(&self.chunks);
    }

    /// Every job, in order, leaving the queue empty.
    pub fn take_all(&mut self) -> impl Iterator<Item = Pending> {
        self.len = 0;
        self.backoffs.counts.clear();
        self.changed.clear();
        self.tree = SummaryTree::default();
        std::mem::take(&mut self.chunks)
            .into_iter()
            .flat_map(|c| c.entries)
    }

    /// The first job at or after `at` not placed in this round, passing by the chunks
    /// that `look` says hold nothing worth trying (asked of each chunk entered at its first
    /// job, never of one `at` resumes inside).
    pub fn next(&self, mut at: Cursor, mut look: impl FnMut(&Summary) -> bool) -> Option<Cursor> {
        loop {
            if at.entry == 0 {
                at.chunk = self.tree.first(at.chunk, &mut look)?;
            }
            let entries = &self.chunks.get(at.chunk)?.entries;
            if let Some(offset) =
                (entries.get(at.entry..).unwrap_or_default().iter()).position(|p| !p.placed)
            {
                return Some(Cursor {
                    chunk: at.chunk,
                    entry: at.entry + offset,
                });
            }
            at = Cursor {
                chunk: at.chunk + 1,
                entry: 0,
            };
        }
    }

    /// The cursor just past `at`.
    pub fn after(&self, at: Cursor) -> Cursor {
        Cursor {
            entry: at.entry + 1,
            ..at
        }
    }

    pub fn entry(&self, at: Cursor) -> &Pending {
        &self.chunks[at.chunk].entries[at.entry]
    }

    /// The job at `at`, to be changed; its chunk is summed up again at the end of the
    /// round.
    pub fn entry_mut(&mut self, at: Cursor) -> &mut Pending {
        self.change(at.chunk);
        &mut self.chunks[at.chunk].entries[at.entry]
    }

    /// Ends a round at `now_ms`: placed jobs leave, the changed chunks are summed up again,
    /// and backoffs ended by then are no longer counted.
    pub fn end_round(&mut self, now_ms: u64) {
        self.backoffs.pass(now_ms);
        for &changed in &self.changed {
            let entries = &mut self.chunks[changed].entries;
            let before = entries.len();
            entries.retain(|p| !p.placed);
            self.len -= before - entries.len();
        }
        self.settle();
    }

    /// The earliest time a job asked to be tried again although nothing was freed since
    /// it failed at capacity `epoch`: a retry time or the end of a backoff, after `now_ms`.
    pub fn next_wakeup(&self, epoch: u64, now_ms: u64) -> Option<u64> {
        let read = |sum: &Summary| match sum.latest_failure {
            Some((latest, Some(retry))) if latest == epoch && retry > now_ms => Ok(Some(retry)),
            // A retry time that came while its job was not reached (behind a strict head)
            // may hide a later one: the run's chunks are looked into, and a chunk's jobs read.
            Some((latest, Some(_))) if latest == epoch => Err(()),
            _ => Ok(None),
        };
        let of_chunk = |chunk: usize| {
            (self.chunks[chunk].entries.iter())
                .filter(|p| p.failed_at == Some(epoch))
                .filter_map(|p| p.retry_at)
                .filter(|&t| t > now_ms)
                .min()
        };
        let retry = self.tree.least(1, &read, &of_chunk);
        min_some(retry, self.backoffs.first_after(now_ms))
    }

    /// The earliest time after `now_ms` when a blocked job has waited `threshold_ms`
    /// since it first failed (its backfill threshold). Only chunks whose blocked jobs
    /// straddle that point are read.
    pub fn next_backfill_deadline(&self, threshold_ms: u64, now_ms: u64) -> Option<u64> {
        let deadline = |since: u64| since.saturating_add(threshold_ms);
        let read = |sum: &Summary| match (sum.blocked_since, sum.last_blocked) {
            (Some(first), _) if deadline(first) > now_ms => Ok(Some(deadline(first))),
            (_, Some(last)) if deadline(last) > now_ms => Err(()),
            _ => Ok(None),
        };
        let of_chunk = |chunk: usize| {
            (self.chunks[chunk].entries.iter())
                .filter_map(|p| p.blocked_since.map(deadline))
                .filter(|&t| t > now_ms)
                .min()
        };
        self.tree.least(1, &read, &of_chunk)
    }

    /// Marks a chunk changed, taking its jobs out of the backoffs until it is settled.
    fn change(&mut self, chunk: usize) {
        let Err(at) = self.changed.binary_search(&chunk) else {
            return;
        };
        self.changed.insert(at, chunk);
        let chunk = &self.chunks[chunk];
        if chunk.summary.latest_not_before > self.backoffs.past {
            for p in &chunk.entries {
                self.backoffs.count(p.not_before, -1);
            }
        }
    }

    /// Brings the changed chunks up to date: a large one splits, a small one takes in the
    /// next if both fit one chunk (which stays, empty, in its place), and their sums and
    /// backoffs are made again. Chunks mostly empty or small are packed again.
    fn settle(&mut self) {
        let mut moved = false;
        // From the last, so that a split moves no chunk still to settle.
        for chunk in std::mem::take(&mut self.changed).into_iter().rev() {
            for p in &self.chunks[chunk].entries {
                self.backoffs.count(p.not_before, 1);
            }
            let len = self.chunks[chunk].entries.len();
            let next_len = self.chunks.get(chunk + 1).map(|c| c.entries.len());
            if len > 2 * CHUNK {
                let entries = &mut self.chunks[chunk].entries;
                let second = entries.split_off(len / 2);
                self.chunks[chunk] = Chunk::new(std::mem::take(entries));
                self.chunks.insert(chunk + 1, Chunk::new(second));
                // Split at the end of the queue, where jobs arrive, it moves no chunk.
                let appended = chunk + 2 == self.chunks.len();
                if appended && self.chunks.len() <= self.tree.leaves && !moved {
                    self.tree.set(chunk, self.chunks[chunk].summary);
                    self.tree.set(chunk + 1, self.chunks[chunk + 1].summary);
                } else {
                    moved = true;
                }
            } else {
                // The next chunk's jobs are already counted in the backoffs.
                if next_len.is_some_and(|next| next > 0 && len + next <= CHUNK) {
                    let next = std::mem::take(&mut self.chunks[chunk + 1].entries);
                    self.chunks[chunk].entries.extend(next);
                    self.chunks[chunk + 1].sum_up();
                    self.tree.set(chunk + 1, self.chunks[chunk + 1].summary);
                }
                self.chunks[chunk].sum_up();
                self.tree.set(chunk, self.chunks[chunk].summary);
            }
        }
        // Packed again once there are four times the chunks the jobs need: after as many
        // changes as there are jobs, or chunks, since the last packing.
        if self.chunks.len() > 4 * (self.len / CHUNK + 1) {
            let entries: Vec<Pending> = std::mem::take(&mut self.chunks)
                .into_iter()
                .flat_map(|c| c.entries)
                .collect();
            let mut entries = entries.into_iter().peekable();
            while entries.peek().is_some() {
                self.chunks
                    .push(Chunk::new(entries.by_ref().take(CHUNK).collect()));
            }
            moved = true;
        }
        if moved {
            self.tree = SummaryTree::of(&self.chunks);
        }
    }
}

/// How many jobs are not to be tried before each time (a multiset), counting only times
/// after the latest round's: a job whose time has passed (as a job's arrival has, most
/// often) is never a wake-up again, and changing its chunk then costs no count.
#[derive(Default)]
struct Backoffs {
    counts: BTreeMap<u64, u32>,
    /// The latest round's time: times up to it are not counted.
    past: u64,
}

impl Backoffs {
    /// Adds `by` to how many jobs wait until `until`.
    fn count(&mut self, until: u64, by: i32) {
        if until <= self.past {
            return;
        }
        let n = self.counts.entry(until).or_insert(0);
        *n = n.saturating_add_signed(by);
        if *n == 0 {
            self.counts.remove(&until);
        }
    }

    /// Time came to `now_ms`: what waited until then is no longer counted, here or after.
    fn pass(&mut self, now_ms: u64) {
        if now_ms > self.past {
            self.past = now_ms;
            self.counts = self.counts.split_off(&now_ms.saturating_add(1));
        }
    }

    /// The earliest time counted after `now_ms`.
    fn first_after(&self, now_ms: u64) -> Option<u64> {
        (self
            .counts
            .range((Bound::Excluded(now_ms), Bound::Unbounded))
            .next())
        .map(|(&t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::config::SizeOrder;
    use crate::model::{GpuRequest, PodRequest, PoolId};
    use crate::plugins::PrioritySort;

    fn job(id: u32, priority: i32, gpus: u32) -> Arc<Job> {
        gang(id, priority, 1, gpus)
    }

    fn gang(id: u32, priority: i32, pods: usize, gpus: u32) -> Arc<Job> {
        let pods = vec![PodRequest::gpus(GpuRequest::Whole(gpus)); pods];
        Arc::new(Job {
            priority,
            ..Job::new(JobId(id), pods)
        })
    }

    fn sort() -> PrioritySort {
        PrioritySort {
            size_order: SizeOrder::SmallerFirst,
        }
    }

    fn ids(queue: &TenantQueue) -> Vec<u32> {
        queue.iter().map(|p| p.job.id.0).collect()
    }

    #[test]
    fn chunks_keep_queue_sort_order_and_equals_in_arrival_order() {
        let mut queue = TenantQueue::default();
        // Priorities 0..5 in a scrambled order, many alike, over several chunks.
        let jobs: Vec<(u32, i32)> = (0..300).map(|id| (id, ((id * 7) % 5) as i32)).collect();
        for &(id, priority) in &jobs {
            queue.push(Pending::new(job(id, priority, 1), 0), &sort());
        }
        let mut expected = jobs.clone();
        expected.sort_by_key(|&(id, priority)| (-priority, id));
        let expected: Vec<u32> = expected.iter().map(|&(id, _)| id).collect();
        assert_eq!(ids(&queue), expected);
        assert_eq!(queue.len(), 300);
        assert!(queue.chunks.len() > 300 / (2 * CHUNK));
        assert!(queue.chunks.iter().all(|c| c.entries.len() <= 2 * CHUNK));
        assert_eq!(queue.remove(JobId(150)).map(|p| p.job.id), Some(JobId(150)));
        assert_eq!(queue.len(), 299);
        // Drained to one job in ten, the queue keeps its order in fewer, fuller chunks.
        for (id, _) in &jobs {
            if id % 10 != 0 && *id != 150 {
                queue.remove(JobId(*id));
            }
        }
        let kept: Vec<u32> = expected
            .into_iter()
            .filter(|id| id % 10 == 0 && *id != 150)
            .collect();
        assert_eq!(ids(&queue), kept);
        assert_eq!(queue.len(), 29);
        assert_eq!(queue.chunks.len(), 1, "29 jobs fit one chunk");
    }

    #[test]
    fn a_round_passes_by_chunks_and_placed_jobs_leave_at_its_end() {
        let mut queue = TenantQueue::default();
        for id in 0..100 {
            queue.push(Pending::new(job(id, 0, 1), 0), &sort());
        }
        assert_eq!(queue.next(Cursor::default(), |_| false), None);
        let first = queue.next(Cursor::default(), |_| true).expect("a job");
        queue.entry_mut(first).placed = true;
        let second = queue.next(first, |_| true).expect("another job");
        assert_eq!(queue.entry_mut(second).job.id, JobId(1));
        queue.end_round(0);
        assert_eq!(queue.len(), 99);
        assert_eq!(ids(&queue)[0], 1);
    }

    #[test]
    fn backoffs_are_counted_through_changes() {
        let mut queue = TenantQueue::default();
        for id in 0..80 {
            queue.push(
                Pending::new(job(id, 0, 1), u64::from(id % 3) * 100),
                &sort(),
            );
        }
        assert_eq!(queue.next_wakeup(0, 0), Some(100));
        assert_eq!(queue.next_wakeup(0, 100), Some(200));
        // Every job waiting until 100 is pushed back to 500.
        let mut at = queue.next(Cursor::default(), |_| true);
        while let Some(cursor) = at {
            let pending = queue.entry_mut(cursor);
            if pending.not_before == 100 {
                pending.not_before = 500;
            }
            at = queue.next(queue.after(cursor), |_| true);
        }
        queue.end_round(0);
        assert_eq!(queue.next_wakeup(0, 0), Some(200));
        assert_eq!(queue.next_wakeup(0, 200), Some(500));
        assert_eq!(queue.next_wakeup(0, 500), None);
    }

    /// What the round (`super::Queues::run`, policies other than strict FIFO) would do
    /// with one job: read it as its queue's backfill head, or try it.
    fn worth_trying(
        p: &Pending,
        round: &RoundView,
        held: Option<&[PoolId]>,
        room: Option<Room>,
    ) -> bool {
        let competes = held.is_some_and(|held| {
            p.asks_gpus()
                && (held.is_empty()
                    || p.job.pools.is_empty()
                    || p.job.pools.iter().any(|p| held.contains(p)))
        });
        if competes {
            return false;
        }
        let head = round
            .head_blocked_by
            .is_some_and(|by| p.blocked_since.is_some_and(|since| since <= by));
        let due = p.retry_at.is_some_and(|t| t <= round.now_ms);
        let waiting = round.now_ms < p.not_before
            || (p.unresolvable && p.failed_at.is_some())
            || (p.failed_at == Some(round.epoch) && !due);
        let refused = p.failed_at.is_some()
            && !p.unresolvable
            && room.is_some_and(|room| room.refuses(&p.need, false));
        head || (!waiting && !refused)
    }

    /// No pool (any), one of two, or both.
    fn pools() -> impl Strategy<Value = Vec<PoolId>> {
        prop_oneof![
            Just(vec![]),
            Just(vec![PoolId(0)]),
            Just(vec![PoolId(1)]),
            Just(vec![PoolId(0), PoolId(1)])
        ]
    }

    /// A job as a round at epoch 3 may find it: failed at that epoch, one before, or never.
    fn pending() -> impl Strategy<Value = Pending> {
        (
            (
                prop_oneof![Just(0u32), 1u32..=8],
                1usize..4,
                prop::option::of(2u64..=3),
                pools(),
            ),
            (prop::option::of(0u64..20), 0u64..20, any::<bool>()),
            prop::option::of(0u64..20),
        )
            .prop_map(
                |(
                    (gpus, pods, failed_at, pools),
                    (retry_at, not_before, unresolvable),
                    blocked,
                )| {
                    let job = Job {
                        pools,
                        ..(*gang(0, 0, pods, gpus)).clone()
                    };
                    let mut p = Pending::new(Arc::new(job), not_before);
                    p.failed_at = failed_at;
                    p.retry_at = retry_at;
                    p.unresolvable = unresolvable;
                    p.blocked_since = blocked;
                    p
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// The tree finds the chunks, the wake-up and the backfill deadline that reading
        /// every chunk and job finds, over a queue that grew and shrank.
        #[test]
        fn the_tree_finds_what_reading_every_chunk_finds(
            entries in proptest::collection::vec(pending(), 1..400),
            removed in proptest::collection::vec(any::<prop::sample::Index>(), 0..300),
            now_ms in 0u64..20,
            threshold_ms in 0u64..10,
        ) {
            let mut queue = TenantQueue::default();
            for (id, mut p) in entries.into_iter().enumerate() {
                p.job = Arc::new(Job { id: JobId(id as u32), ..(*p.job).clone() });
                queue.push(p, &sort());
            }
            // Time passes while the queue shrinks.
            queue.end_round(now_ms / 2);
            for index in &removed {
                let left = ids(&queue);
                if left.is_empty() {
                    break;
                }
                queue.remove(JobId(left[index.index(left.len())]));
            }
            // Backoffs that ended by `now_ms` are no longer counted.
            queue.end_round(now_ms);
            let retry = (queue.iter().filter(|p| p.failed_at == Some(3)))
                .filter_map(|p| p.retry_at)
                .filter(|&t| t > now_ms)
                .min();
            let backoff = queue.iter().map(|p| p.not_before).filter(|&t| t > now_ms).min();
            prop_assert_eq!(queue.next_wakeup(3, now_ms), min_some(retry, backoff));
            let deadline = (queue.iter())
                .filter_map(|p| p.blocked_since.map(|since| since + threshold_ms))
                .filter(|&t| t > now_ms)
                .min();
            prop_assert_eq!(queue.next_backfill_deadline(threshold_ms, now_ms), deadline);
            let round = RoundView { epoch: 3, now_ms, head_blocked_by: None, held: None };
            let look = |sum: &Summary| sum.worth_a_look(&round, None);
            let expected: Vec<usize> = (queue.chunks.iter().enumerate())
                .filter(|(_, c)| !c.entries.is_empty() && look(&c.summary))
                .map(|(chunk, _)| chunk)
                .collect();
            let mut found = Vec::new();
            let mut at = Cursor::default();
            while let Some(cursor) = queue.next(at, look) {
                prop_assert_eq!(cursor.entry, 0);
                found.push(cursor.chunk);
                at = Cursor { chunk: cursor.chunk + 1, entry: 0 };
            }
            prop_assert_eq!(found, expected);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn a_chunk_passed_by_holds_no_job_worth_trying(
            entries in proptest::collection::vec(pending(), 1..4),
            now_ms in 0u64..20,
            head_blocked_by in prop::option::of(0u64..20),
            held in prop::option::of(pools()),
            room in prop::option::of((0u64..30_000, proptest::collection::vec(0u32..=8, 0..4))),
        ) {
            // Pools are held only once the backfill head is taken.
            let head_blocked_by = head_blocked_by.filter(|_| held.is_none());
            let round = RoundView {
                epoch: 3,
                now_ms,
                head_blocked_by,
                held: held.as_deref().map(super::super::held_pool_mask),
            };
            let room = room.map(|(quota_milli, free)| Room::of_nodes(quota_milli, &free));
            let any_worth = entries
                .iter()
                .any(|p| worth_trying(p, &round, held.as_deref(), room));
            if any_worth {
                prop_assert!(Summary::of(&entries).worth_a_look(&round, room.as_ref()));
            }
        }
    }
}
