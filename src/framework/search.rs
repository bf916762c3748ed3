//! The search for a job's nodes. Two-level (the default): candidate search groups of the
//! job's pools are filtered and ranked from their aggregates alone, then the job is placed
//! inside the best group that holds it whole, groups evaluated in one parallel pass. A gang
//! that no single group holds goes to the tightest domain that does: one leaf (where a leaf
//! is searched as several groups), else one spine, else one superspine, else anywhere,
//! never past a tier the job requires; a job that asks for a scale-up domain (HBD) is
//! placed inside one. Domains are chosen from aggregates, so no node combination is tried
//! blindly. A job with last-resort nodes ([`LastResort`]) is searched so first without
//! them, and with them only when that finds nothing. Flat (the baseline): every node of
//! the job's pools is scored for every pod.
//!
//! Each attempt plays the job on an O(1) clone of the snapshot (a KAI-style statement): a
//! rollback is dropping the clone.

use std::cell::OnceCell;
use std::sync::Arc;

use rayon::prelude::*;

use crate::cache::{ClusterState, GpuAggregate, Placement, PodKey};
use crate::model::{
    ClusterSpec, GroupId, Job, JobShape, MAX_GPUS_PER_NODE, NodeId, PodRequest, PodWidths, PoolId,
    Tier,
};

use super::plugin::{
    Filter, GroupFilter, GroupQuery, JobNodes, JobPlan, NodeView, PodContext, Score,
};
use super::usable::{ReachOf, UsableGpus};
use super::{CycleState, Diagnosis, Profile, SearchMode, Status};

/// The pools a job may use: the ones it names, or every pool (for a GPU job, every pool
/// with GPUs).
pub fn pools_for<'a>(job: &'a Job, snapshot: &'a ClusterState) -> &'a [PoolId] {
    if !job.pools.is_empty() {
        return &job.pools;
    }
    snapshot.spec().pools_for_any(job.total_milli() > 0)
}

/// A feasible placement of the whole job, with the state it leaves.
pub struct Found {
    pub plan: JobPlan,
    pub state: ClusterState,
}

/// Finds nodes and devices for every pod of `job`, or `None`.
pub fn place_job(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
) -> Option<Found> {
    let pools = pools_for(job, snapshot);
    match profile.search {
        SearchMode::Flat => {
            let spec = snapshot.spec();
            let nodes = |pool: PoolId| spec.pool(pool).nodes.as_slice();
            if job.pods.len() == 1 {
                let all: Vec<&[NodeId]> = pools.iter().map(|&p| nodes(p)).collect();
                try_nodes(profile, job, snapshot, state, &all)
            } else {
                // A gang never mixes GPU models: one pool at a time.
                pools
                    .iter()
                    .find_map(|&p| try_nodes(profile, job, snapshot, state, &[nodes(p)]))
            }
        }
        SearchMode::TwoLevel => match first_pass(state) {
            None => two_level(profile, job, snapshot, state, pools, None),
            // Its other nodes first, where they could ever hold it; then all of them, a
            // domain's other nodes filled first.
            Some(first) => {
                let others_could = (first.read::<ReachOf>()).is_none_or(|r| r.0.never.is_none());
                (others_could)
                    .then(|| two_level(profile, job, snapshot, &first, pools, None))
                    .flatten()
                    .or_else(|| two_level(profile, job, snapshot, state, pools, Some(&first)))
            }
        },
    }
}

/// Written into the cycle state by a PreFilter plugin when some nodes are the job's last
/// resort (an inference zone's, for training it lets in): the two-level search places it
/// first as if they were not there (a first pass, [`FirstPass`]), and on them only when
/// that finds nothing. While it holds out for a tight placement, the tier it holds out for
/// is the tightest its other nodes could ever hold it in, where they could ever hold it
/// ([`super::Reach`]).
pub struct LastResort;

/// Written into the cycle state of the search's first pass for a job with
/// [`LastResort`] nodes: the plugin that named them refuses them, as by their spec, and
/// leaves out the search groups made only of them.
pub struct FirstPass;

/// The cycle state of the first pass for a job with [`LastResort`] nodes, judged on the
/// reach of its other nodes; `None` for other jobs.
fn first_pass(state: &CycleState) -> Option<CycleState> {
    state.read::<LastResort>()?;
    let mut first = state.clone();
    first.write(FirstPass);
    if let Some(reach) = state.read::<ReachOf>().and_then(|r| r.0.first_pass.clone()) {
        first.write(ReachOf(reach));
    }
    Some(first)
}

/// `first`: in the second pass of a job with [`LastResort`] nodes, the first pass's cycle
/// state, under which a domain's groups are filled before they are filled again under
/// `state` (the other nodes of a domain first).
fn two_level(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
    pools: &[PoolId],
    first: Option<&CycleState>,
) -> Option<Found> {
    let query = GroupQuery::of(job, snapshot.spec());
    let widths = &query.widths;
    let mut ranked = rank_groups(profile, &query, snapshot, state, pools);
    let need = job.topology;
    // Spreading never crosses a tier the job requires.
    let required = need.is_some_and(|n| n.required);
    if state.read::<AnyGroup>().is_some() && !required {
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let spec = snapshot.spec();
        let nodes_of = |pool: Option<PoolId>| -> Vec<&[NodeId]> {
            ranked
                .iter()
                .filter(|&&(_, g)| pool.is_none_or(|p| spec.group(g).pool == p))
                .map(|&(_, g)| spec.group(g).nodes.as_slice())
                .collect()
        };
        if job.pods.len() == 1 {
            return try_nodes(profile, job, snapshot, state, &nodes_of(None));
        }
        // A gang never mixes GPU models: one pool at a time, the pool of the best-ranked
        // group first.
        let mut by_rank: Vec<PoolId> = Vec::with_capacity(pools.len());
        for &(_, group) in ranked.iter() {
            let pool = spec.group(group).pool;
            if !by_rank.contains(&pool) {
                by_rank.push(pool);
            }
        }
        return by_rank
            .into_iter()
            .find_map(|p| try_nodes(profile, job, snapshot, state, &nodes_of(Some(p))));
    }
    if let Some(need) = need.filter(|n| n.tier == Tier::Hbd) {
        let found = within_one_hbd(profile, job, widths, snapshot, state, pools);
        if found.is_some() || need.required {
            return found;
        }
    }
    if required {
        // Nodes outside every leaf group are in no domain: they never meet a required tier.
        let spec = snapshot.spec();
        ranked.retain(|&(_, g)| spec.group(g).leaf.is_some());
    }
    if let Some(found) = within_one_group(profile, job, widths, snapshot, state, &mut ranked) {
        return Some(found);
    }
    if job.pods.len() == 1 {
        return None;
    }
    // A gang no single group holds: the tightest domain that does, tier by tier (a leaf
    // only where one is searched as several groups).
    let widest = widest_tier(profile, job, snapshot, pools, state);
    let most_leaves = leaf_limits(profile, job, snapshot, pools, state);
    let spec = snapshot.spec();
    let leaves_in_blocks = pools.iter().any(|&p| spec.pool(p).leaves_in_blocks);
    let leaf = leaves_in_blocks.then_some(Some(Tier::Leaf));
    let tiers = leaf
        .into_iter()
        .chain([Some(Tier::Spine), Some(Tier::Superspine), None]);
    tiers
        .take_while(|&tier| widest.is_none_or(|w| tier.is_some_and(|t| t <= w)))
        .find_map(|tier| {
            within_one_domain(
                profile,
                job,
                widths,
                snapshot,
                (first, state),
                &ranked,
                (tier, &most_leaves),
            )
        })
}

/// The widest tier a gang no single group holds may spread over: never past a tier it
/// requires, nor, while it is within its patience or seeks victims compactly
/// ([`WithinTightestTier`]), past the tightest tier that could ever hold it. `None` is the
/// whole of the job's pools.
fn widest_tier(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    pools: &[PoolId],
    state: &CycleState,
) -> Option<Tier> {
    match job.topology {
        Some(n) if n.required => Some(n.tier),
        _ if is_patient(profile, job, state) || state.read::<WithinTightestTier>().is_some() => {
            tightest_tier(job, snapshot, pools, state)
        }
        _ => None,
    }
}

/// Per pool of a gang without a required tier, the most leaves it may span after the
/// patience periods it has held out ([`patience_periods`]): during the first (while
/// patient), the fewest one domain there of the tier it holds out for could ever hold it
/// on (the less of its traffic crosses a spine switch); then one more for each further
/// period, in any domain, so that a gang waiting long spreads by steps rather than over
/// whatever the pool has free. A pool without such a count, or whose leaves the limit
/// would all cover, has none (a block of nodes outside every leaf counts as a leaf, as
/// [`leaves_spanned`] counts it).
fn leaf_limits(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    pools: &[PoolId],
    state: &CycleState,
) -> Vec<(PoolId, usize)> {
    let Some(periods) = patience_periods(profile, job, state) else {
        return Vec::new();
    };
    let fewest = match state.read::<ReachOf>() {
        Some(ReachOf(reach)) => reach.fewest_leaves(pools),
        None => {
            let shape = JobShape::of(job);
            let Some(tier) = tightest_possible_tier(&shape, snapshot, pools, None) else {
                return Vec::new();
            };
            (pools.iter())
                .filter_map(|&p| Some((p, fewest_leaves(&shape, snapshot, &[p], tier, None)?)))
                .collect()
        }
    };
    let more = usize::try_from(periods).unwrap_or(usize::MAX);
    let spec = snapshot.spec();
    (fewest.into_iter())
        .map(|(pool, leaves)| (pool, leaves.saturating_add(more)))
        .filter(|&(pool, most)| most < spec.pool(pool).leaves)
        .collect()
}

/// Per pool of the job, the tier of one domain that [`place_job`] keeps the job's
/// placement there inside, on any state, given the cycle state of its attempt now: a tier
/// it requires, or while a gang is patient (or seeks victims compactly) the tightest one
/// its usable nodes could hold it in. `None`: the whole pool may be needed, as for a
/// single pod, a job that spreads, a preferred scale-up domain (one cuts across groups),
/// the flat search, or a pool with groups outside every leaf (a patient gang may go to
/// one such group whole). A job with spread rules may spread though this cycle says it
/// does not: on another state, quota may admit it on fewer pools, which topology-spread
/// judges anew.
pub fn domain_limits(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
) -> Vec<(PoolId, Option<Tier>)> {
    let spec = snapshot.spec();
    let required = job.topology.is_some_and(|n| n.required);
    let spread_rules = job.pod_rules.as_ref().is_some_and(|r| !r.spread.is_empty());
    let bounded = job.pods.len() > 1
        && profile.search == SearchMode::TwoLevel
        && (required
            || !spread_rules
                && state.read::<AnyGroup>().is_none()
                && job.topology.is_none_or(|n| n.tier != Tier::Hbd));
    let pools = pools_for(job, snapshot);
    (pools.iter())
        .map(|&pool| {
            let all_in_leaves =
                || (spec.pool(pool).groups.iter()).all(|&g| spec.group(g).leaf.is_some());
            let tier = (bounded && (required || all_in_leaves()))
                .then(|| widest_tier(profile, job, snapshot, &[pool], state))
                .flatten();
            (pool, tier)
        })
        .collect()
}

/// Whether room that came back in a group could let [`place_job`] place a job there,
/// judged from aggregates as the search judges groups and domains: the group is not held
/// from the job, passes the group filters, and holds the whole job or, for a gang, some
/// of its pods, inside a domain that could hold them all where the gang may not spread
/// past a tier. A gang's pods asking no GPU (a launcher, which may go to any node) and
/// pods' rules on other pods are not judged here: such jobs are always searched.
pub(super) struct RoomUse<'a> {
    profile: &'a Profile,
    query: GroupQuery<'a>,
    snapshot: &'a ClusterState,
    state: &'a CycleState,
    /// Read at first need; `None`: the gang may spread over its whole pools.
    domains: OnceCell<Option<DomainsHolding>>,
}

/// The widest tier a gang may spread over, and the domains of it (pool, domain) that could
/// hold it all, sorted.
type DomainsHolding = (Tier, Vec<(PoolId, u64)>);

impl<'a> RoomUse<'a> {
    pub(super) fn new(
        profile: &'a Profile,
        job: &'a Job,
        snapshot: &'a ClusterState,
        state: &'a CycleState,
    ) -> Self {
        Self {
            profile,
            query: GroupQuery::of(job, snapshot.spec()),
            snapshot,
            state,
            domains: OnceCell::new(),
        }
    }

    pub(super) fn could_use(&self, group: GroupId) -> bool {
        let (job, widths) = (self.query.job, &self.query.widths);
        let aggregate = self.snapshot.group(group);
        let two_level = self.profile.search == SearchMode::TwoLevel;
        let held = (self.state.read::<HeldGroups>()).map_or(&[][..], |h| h.0.as_slice());
        let passes =
            |f: &Arc<dyn GroupFilter>| f.filter_group(&self.query, self.state, group, aggregate);
        // The flat search reads no group filter and no held room.
        if two_level
            && (held.binary_search(&group).is_ok()
                || !self.profile.group_filters.iter().all(passes))
        {
            return false;
        }
        if may_fit(widths, aggregate) {
            return true;
        }
        if job.pods.len() == 1 {
            return false;
        }
        // A gang searched across groups puts each pod where it fits (a fraction where no
        // whole pod does): the flat search, a scale-up domain (which cuts across groups), a
        // job that gains nothing from one group (`AnyGroup`).
        let required = job.topology.is_some_and(|n| n.required);
        let any_group = self.state.read::<AnyGroup>().is_some() && !required;
        if !two_level || any_group || job.topology.is_some_and(|n| n.tier == Tier::Hbd) {
            return true;
        }
        if pods_held(widths, aggregate) == 0 {
            return false;
        }
        let Some((tier, holding)) = self.domains.get_or_init(|| self.domains_holding()) else {
            return true;
        };
        let spec = self.snapshot.spec();
        (spec.enclosing_domain(group, *tier))
            .is_some_and(|d| holding.binary_search(&(spec.group(group).pool, d)).is_ok())
    }

    /// The widest tier the gang may spread over and the domains of it whose groups, all of
    /// them (held or filtered out: an upper bound), could hold it; `None`: its whole pools.
    fn domains_holding(&self) -> Option<DomainsHolding> {
        let (job, widths) = (self.query.job, &self.query.widths);
        let pools = pools_for(job, self.snapshot);
        let tier = widest_tier(self.profile, job, self.snapshot, pools, self.state)?;
        let spec = self.snapshot.spec();
        let mut members: Vec<((PoolId, u64), &GpuAggregate)> = (pools.iter())
            .flat_map(|&p| spec.pool(p).groups.iter().map(move |&g| (p, g)))
            .filter_map(|(p, g)| {
                Some(((p, spec.enclosing_domain(g, tier)?), self.snapshot.group(g)))
            })
            .collect();
        members.sort_unstable_by_key(|&(domain, _)| domain);
        let holding = (members.chunk_by(|a, b| a.0 == b.0))
            .filter(|groups| {
                let room = (groups.iter())
                    .fold(0u64, |sum, (_, a)| sum.saturating_add(pods_held(widths, a)));
                let free: u64 = groups.iter().map(|(_, a)| u64::from(a.free_gpus)).sum();
                domain_may_hold(widths, room, free)
            })
            .map(|groups| groups[0].0)
            .collect();
        Some((tier, holding))
    }
}

/// Written into the cycle state by the scheduler: since when (world clock) the job would
/// have been waiting only for a tight placement had the stretches its pools held it spread
/// been one (the time it has held out is now less this).
pub struct TightWaitSince(pub u64);

/// Written into the cycle state by the scheduler while a gang seeks victims compactly
/// (see `Scheduler::preempt`): whatever its patience, it may not spread past the tightest
/// tier that could ever hold it, though on as many leaves there as its patience periods
/// let it span ([`leaf_limits`]).
pub struct WithinTightestTier;

/// Whether [`WithinTightestTier`] could bound the gang's placement in this cycle: the
/// two-level search places it domain by domain (not a gang whose pods go to any group),
/// and one domain of some tier could ever hold it.
pub(super) fn bounded_within_tightest_tier(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
) -> bool {
    job.pods.len() > 1
        && profile.search == SearchMode::TwoLevel
        && state.read::<AnyGroup>().is_none()
        && tightest_tier(job, snapshot, pools_for(job, snapshot), state).is_some()
}

/// Written into the cycle state by a PreFilter plugin when the job gains nothing from
/// staying inside one group (replicas that should spread): its pods then go to the best
/// nodes of all candidate groups at once, unless the job requires a topology tier.
pub struct AnyGroup;

/// Whether a gang without a required tier still holds out for a tight placement: its
/// first patience period, which runs while its pools hold it spread ([`TightWaitSince`]).
pub(super) fn is_patient(profile: &Profile, job: &Job, state: &CycleState) -> bool {
    patience_periods(profile, job, state) == Some(0)
}

/// The whole patience periods (`topology_patience_s` each) a gang without a required tier
/// has held out for a tight placement, counted while its pools held it spread
/// ([`TightWaitSince`]); `None` where patience does not apply to it.
pub(super) fn patience_periods(profile: &Profile, job: &Job, state: &CycleState) -> Option<u64> {
    if !patience_applies(profile, job) {
        return None;
    }
    Some(state.now_ms().saturating_sub(held_out_since(state)) / patience_ms(profile))
}

/// Since when the job would have been waiting only for a tight placement
/// ([`TightWaitSince`]; now where it was not).
fn held_out_since(state: &CycleState) -> u64 {
    (state.read::<TightWaitSince>()).map_or(state.now_ms(), |s| s.0)
}

fn patience_applies(profile: &Profile, job: &Job) -> bool {
    let required = job.topology.is_some_and(|n| n.required);
    job.pods.len() > 1
        && !required
        && profile.search == SearchMode::TwoLevel
        && profile.search_options.topology_patience_s > 0
}

fn patience_ms(profile: &Profile) -> u64 {
    (profile.search_options.topology_patience_s).saturating_mul(1000)
}

/// After a failed search on `state`: whether the job is now waiting only for a tight
/// placement (its pools hold it spread, from their aggregates) and, if so, when the
/// patience period it is in ends (its first: its patience; each later one: one more leaf
/// it may span), counted from its [`TightWaitSince`]. A gang that the leaf limits of
/// later periods hold back no more, its pools' leaves all within them, waits for room.
pub fn tight_wait_ends(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
) -> Option<u64> {
    let periods = patience_periods(profile, job, state)?;
    let pools = pools_for(job, snapshot);
    // A gang whose pods go to any group (replicas that should spread) has no leaf limit.
    let held_back = periods == 0
        || state.read::<AnyGroup>().is_none()
            && !leaf_limits(profile, job, snapshot, pools, state).is_empty();
    let widths = PodWidths::of(job);
    let ends = held_out_since(state).saturating_add(
        periods
            .saturating_add(1)
            .saturating_mul(patience_ms(profile)),
    );
    (held_back && pools_hold_spread(&widths, pools, snapshot)).then_some(ends)
}

/// Whether `pools` hold, from their aggregates, a job of `widths` spread over them.
pub fn pools_hold_spread(widths: &PodWidths, pools: &[PoolId], snapshot: &ClusterState) -> bool {
    let room = (pools.iter()).fold(0u64, |sum, &p| {
        sum.saturating_add(pods_held(widths, snapshot.pool(p)))
    });
    room >= widths.whole_pods
}

/// The tightest tier one domain of the job's usable nodes could ever hold it in, as the
/// scheduler judged it ([`ReachOf`]), or else counting every node of its pools.
fn tightest_tier(
    job: &Job,
    snapshot: &ClusterState,
    pools: &[PoolId],
    state: &CycleState,
) -> Option<Tier> {
    match state.read::<ReachOf>() {
        Some(ReachOf(reach)) => reach.tightest(pools),
        None => tightest_possible_tier(&JobShape::of(job), snapshot, pools, None),
    }
}

/// The tightest tier with one domain that could, all free, hold the job (`None`: only the
/// whole pools could), counting on each node the GPUs `usable` gives it (`None`: all).
pub(super) fn tightest_possible_tier(
    shape: &JobShape,
    snapshot: &ClusterState,
    pools: &[PoolId],
    usable: Option<&UsableGpus>,
) -> Option<Tier> {
    [Tier::Leaf, Tier::Spine, Tier::Superspine]
        .into_iter()
        .find(|&tier| some_domain_could_hold(shape, snapshot, pools, tier, usable))
}

/// The fewest leaves one domain of `tier` of one of `pools` could, all free, hold the job
/// on, its leaves taken the most GPUs first (with nodes of several sizes, a bound above
/// the fewest), counting on each node the GPUs `usable` gives it (`None`: all); `None`
/// where no domain could hold it. Nodes outside every leaf are in no domain.
pub(super) fn fewest_leaves(
    shape: &JobShape,
    snapshot: &ClusterState,
    pools: &[PoolId],
    tier: Tier,
    usable: Option<&UsableGpus>,
) -> Option<usize> {
    let spec = snapshot.spec();
    let leaves_needed = |domain: &[((PoolId, u64), GroupId)]| {
        let mut leaves: Vec<(u64, NodeSizes)> = (domain.iter())
            .map(|&(_, g)| {
                (
                    leaf_key(spec, g),
                    group_node_sizes(spec, [g].into_iter(), usable),
                )
            })
            .collect();
        leaves.sort_unstable_by_key(|&(leaf, _)| leaf);
        let mut merged: Vec<NodeSizes> = (leaves.chunk_by(|a, b| a.0 == b.0))
            .map(|same| {
                let mut sizes = [0; MAX_GPUS_PER_NODE + 1];
                same.iter().for_each(|(_, s)| add_sizes(&mut sizes, s));
                sizes
            })
            .collect();
        let gpus = |sizes: &NodeSizes| -> u64 {
            (sizes.iter().enumerate())
                .map(|(g, &n)| g as u64 * u64::from(n))
                .sum()
        };
        merged.sort_unstable_by_key(|sizes| std::cmp::Reverse(gpus(sizes)));
        let mut sizes = [0; MAX_GPUS_PER_NODE + 1];
        merged
            .iter()
            .position(|leaf| {
                add_sizes(&mut sizes, leaf);
                shape.fits(&sizes)
            })
            .map(|last| last + 1)
    };
    domain_groups(spec, pools, tier)
        .chunk_by(|a, b| a.0 == b.0)
        .filter_map(leaves_needed)
        .min()
}

/// The leaf of a search group, as a key: the blocks of one leaf share it, a leafless block
/// is one of its own.
fn leaf_key(spec: &ClusterSpec, group: GroupId) -> u64 {
    (spec.group(group).leaf).map_or(1 << 32 | u64::from(group.0), |l| u64::from(l.0))
}

/// Whether one domain of `tier` of one of the job's pools could, all free, hold the job
/// (its devices, and each whole-GPU pod inside one node), counting on each node the GPUs
/// `usable` gives it (`None`: all). Nodes outside every leaf group are in no domain of any tier; a
/// leaf under no spine is a domain of its own at the tiers above it.
pub fn some_domain_could_hold(
    shape: &JobShape,
    snapshot: &ClusterState,
    pools: &[PoolId],
    tier: Tier,
    usable: Option<&UsableGpus>,
) -> bool {
    let spec = snapshot.spec();
    if tier == Tier::Hbd {
        // A domain without a node of the pool holds nothing, a job asking no GPU included
        // (whose shape any set of nodes fits).
        return (0..spec.hbds.len() as u32).any(|h| {
            pools.iter().any(|&pool| {
                let mut nodes = hbd_nodes_in(spec, h, pool).peekable();
                nodes.peek().is_some() && shape.fits(&node_sizes(spec, nodes, usable))
            })
        });
    }
    domain_groups(spec, pools, tier)
        .chunk_by(|a, b| a.0 == b.0)
        .any(|domain| shape.fits(&group_node_sizes(spec, domain.iter().map(|m| m.1), usable)))
}

/// Whether `holds` says yes of the nodes of some domain of `tier` in `pools` (each domain
/// one pool's part of it).
pub fn some_domain_holds(
    spec: &ClusterSpec,
    pools: &[PoolId],
    tier: Tier,
    mut holds: impl FnMut(&mut dyn Iterator<Item = NodeId>) -> bool,
) -> bool {
    if tier == Tier::Hbd {
        return (0..spec.hbds.len() as u32).any(|h| {
            pools
                .iter()
                .any(|&pool| holds(&mut hbd_nodes_in(spec, h, pool)))
        });
    }
    domain_groups(spec, pools, tier)
        .chunk_by(|a, b| a.0 == b.0)
        .any(|domain| {
            let nodes = domain.iter().flat_map(|m| &spec.group(m.1).nodes);
            holds(&mut nodes.copied())
        })
}

/// The search groups of `pools` inside a domain of `tier` (a leaf, spine or superspine;
/// groups outside every leaf are in none), each with its domain, one pool's part of it,
/// sorted by domain.
pub fn domain_groups(
    spec: &ClusterSpec,
    pools: &[PoolId],
    tier: Tier,
) -> Vec<((PoolId, u64), GroupId)> {
    let mut members: Vec<((PoolId, u64), GroupId)> = pools
        .iter()
        .flat_map(|&p| spec.pool(p).groups.iter().map(move |&g| (p, g)))
        .filter_map(|(p, g)| Some(((p, spec.enclosing_domain(g, tier)?), g)))
        .collect();
    members.sort_unstable();
    members
}

/// The nodes of one pool inside a scale-up domain.
fn hbd_nodes_in(spec: &ClusterSpec, hbd: u32, pool: PoolId) -> impl Iterator<Item = NodeId> + '_ {
    spec.hbd_nodes[hbd as usize]
        .iter()
        .copied()
        .filter(move |&n| spec.node(n).pool == pool)
}

/// How many nodes of each GPU count the nodes are; with `usable`, counting on each node the
/// GPUs it gives it, and only the nodes it gives some.
pub(super) fn node_sizes(
    spec: &ClusterSpec,
    nodes: impl Iterator<Item = NodeId>,
    usable: Option<&UsableGpus>,
) -> NodeSizes {
    let mut sizes = [0; MAX_GPUS_PER_NODE + 1];
    for node in nodes {
        match usable {
            None => sizes[spec.node(node).gpus()] += 1,
            Some(usable) => match usable.of_node(node) {
                0 => {}
                gpus => sizes[gpus] += 1,
            },
        }
    }
    sizes
}

/// How many nodes of each GPU count the groups hold together, counting on each node the
/// GPUs `usable` gives it (`None`: all).
fn group_node_sizes(
    spec: &ClusterSpec,
    groups: impl Iterator<Item = GroupId>,
    usable: Option<&UsableGpus>,
) -> NodeSizes {
    let mut sizes = [0; MAX_GPUS_PER_NODE + 1];
    for group in groups {
        match usable {
            None => add_sizes(&mut sizes, &spec.group(group).node_sizes),
            Some(_) => {
                let nodes = spec.group(group).nodes.iter().copied();
                add_sizes(&mut sizes, &node_sizes(spec, nodes, usable));
            }
        }
    }
    sizes
}

/// The free whole GPUs of `nodes`, no more on each than `usable` gives it (`None`: all).
fn usable_free(
    snapshot: &ClusterState,
    nodes: impl Iterator<Item = NodeId>,
    usable: Option<&UsableGpus>,
) -> u64 {
    nodes
        .map(|n| {
            let free = snapshot.node(n).free_whole_count() as usize;
            free.min(usable.map_or(free, |u| u.of_node(n))) as u64
        })
        .sum()
}

fn add_sizes(total: &mut NodeSizes, more: &NodeSizes) {
    for (total, count) in total.iter_mut().zip(more) {
        *total += count;
    }
}

type NodeSizes = [u32; MAX_GPUS_PER_NODE + 1];

/// Written into the cycle state by the scheduler: search groups held for another job (a
/// backfill head's reservation) that this job must leave alone. Sorted.
pub struct HeldGroups(pub Vec<GroupId>);

/// Written into the cycle state by the scheduler, in place of [`HeldGroups`], for a job
/// asking no GPU under the two-level search: the groups held for backfill heads, each with
/// its head's GPU pods (each kind once). Such a job takes nothing a head waits for but CPU,
/// memory, ephemeral storage and pod slots, so it may use a node of them where those stay
/// enough for the head (`leaves_room_for_head`). Sorted by group.
pub struct HeldForGpuPods(pub Vec<(GroupId, Arc<[PodRequest]>)>);

impl HeldForGpuPods {
    /// The kinds of GPU pods of `head`, each once.
    pub fn kinds_of(head: &Job) -> Arc<[PodRequest]> {
        let mut kinds: Vec<PodRequest> = Vec::new();
        for pod in head.pods.iter().filter(|p| !p.gpu.is_none()) {
            if !kinds.contains(pod) {
                kinds.push(*pod);
            }
        }
        kinds.into()
    }
}

/// Whether `pod` (asking no GPU) on `node` leaves room for the head its group is held for,
/// if any: once it is there, the node's free CPU, memory, ephemeral storage and pod slots
/// must still hold, for each kind of the head's GPU pods, as many of them as the node's
/// healthy GPUs could (what GPU pods there now hold is not counted as coming back, so this
/// never takes what the head's pods would need, wherever they land on the node).
fn leaves_room_for_head(
    held: &[(GroupId, Arc<[PodRequest]>)],
    spec: &ClusterSpec,
    pod: &PodRequest,
    node: NodeView,
) -> bool {
    let group = spec.node_group[node.id.index()];
    let Ok(at) = held.binary_search_by_key(&group, |(g, _)| *g) else {
        return true;
    };
    let state = node.state;
    let healthy = u64::from(
        state
            .device_count()
            .saturating_sub(state.unhealthy().count_ones()),
    );
    held[at].1.iter().all(|head_pod| {
        let pods = head_pod.gpu.pods_on(healthy);
        (node.spec.allocatable().into_iter())
            .zip(state.in_use())
            .zip(pod.node_asks())
            .zip(head_pod.node_asks())
            // Unknown allocatable: no limit.
            .all(|(((allocatable, used), asked), each)| {
                allocatable.is_none_or(|a| {
                    a.saturating_sub(used.saturating_add(asked)) >= pods.saturating_mul(each)
                })
            })
    })
}

/// The groups to hold for a job that waits too long: in the tightest domain that could
/// ever hold it, of one of its pools, the one with the most free GPUs now (so it fills
/// first), as few of its groups as hold the job, the freest first; only the nodes the job
/// may use count (the GPUs `usable` gives each; `None`: all).
pub fn reservation_groups(
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
    usable: Option<&UsableGpus>,
) -> Vec<GroupId> {
    let pools = pools_for(job, snapshot);
    let spec = snapshot.spec();
    // A gang with last-resort nodes that its other nodes could ever hold has room held on
    // those, where its first pass looks.
    let first = (state.read::<ReachOf>())
        .and_then(|ReachOf(reach)| reach.first_pass.as_ref())
        .filter(|first| first.never.is_none());
    let usable = first.map_or(usable, |first| first.usable.as_ref());
    let tier = match state.read::<ReachOf>() {
        Some(ReachOf(reach)) => reach.tightest(pools),
        None => tightest_possible_tier(&JobShape::of(job), snapshot, pools, usable),
    };
    if job
        .topology
        .is_some_and(|need| need.tier == Tier::Hbd && need.required)
    {
        return hbd_reservation(job, snapshot, pools, usable);
    }
    // (pool, domain, group, free)
    let mut members: Vec<(PoolId, u64, GroupId, u64)> = pools
        .iter()
        .flat_map(|&pool| snapshot.pool_groups(pool).map(move |(g, a)| (pool, g, a)))
        .filter_map(|(pool, group, aggregate)| {
            let domain = match tier {
                Some(t) => spec.enclosing_domain(group, t)?,
                None => 0,
            };
            let free = match usable {
                None => u64::from(aggregate.free_gpus),
                Some(_) => usable_free(snapshot, spec.group(group).nodes.iter().copied(), usable),
            };
            Some((pool, domain, group, free))
        })
        .collect();
    // Inside a domain, the groups with the most free GPUs first.
    members.sort_unstable_by_key(|&(pool, domain, group, free)| {
        (pool, domain, std::cmp::Reverse(free), group)
    });
    let shape = JobShape::of(job);
    let Some(domain) = members
        .chunk_by(|a, b| (a.0, a.1) == (b.0, b.1))
        .filter(|domain| {
            let groups = domain.iter().map(|m| m.2);
            shape.fits(&group_node_sizes(spec, groups, usable))
        })
        .max_by_key(|domain| domain.iter().map(|m| m.3).sum::<u64>())
    else {
        return Vec::new();
    };
    // Only as many of its groups as could hold the job.
    let mut held = Vec::new();
    let mut sizes = [0; MAX_GPUS_PER_NODE + 1];
    for member in domain {
        if shape.fits(&sizes) {
            break;
        }
        let usable_here = group_node_sizes(spec, [member.2].into_iter(), usable);
        if usable_here.iter().any(|&nodes| nodes > 0) {
            held.push(member.2);
            add_sizes(&mut sizes, &usable_here);
        }
    }
    held
}

/// The groups to hold for a gang that requires a scale-up domain: those of the nodes, in
/// one of its pools, of the domain that could ever hold it (of the nodes it may use) with
/// the most free GPUs on those nodes now.
fn hbd_reservation(
    job: &Job,
    snapshot: &ClusterState,
    pools: &[PoolId],
    usable: Option<&UsableGpus>,
) -> Vec<GroupId> {
    let spec = snapshot.spec();
    let shape = JobShape::of(job);
    let counts = |n: &NodeId| usable.is_none_or(|u| u.of_node(*n) > 0);
    let best = (0..spec.hbds.len() as u32)
        .flat_map(|hbd| pools.iter().map(move |&pool| (hbd, pool)))
        .filter(|&(hbd, pool)| shape.fits(&node_sizes(spec, hbd_nodes_in(spec, hbd, pool), usable)))
        .max_by_key(|&(hbd, pool)| usable_free(snapshot, hbd_nodes_in(spec, hbd, pool), usable));
    let Some((hbd, pool)) = best else {
        return Vec::new();
    };
    let mut groups: Vec<GroupId> = hbd_nodes_in(spec, hbd, pool)
        .filter(counts)
        .map(|n| spec.node_group[n.index()])
        .collect();
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// The search groups of the job's pools that pass every group filter, with their weighted
/// group scores (unsorted).
fn rank_groups(
    profile: &Profile,
    query: &GroupQuery,
    snapshot: &ClusterState,
    state: &CycleState,
    pools: &[PoolId],
) -> Vec<(i64, GroupId)> {
    let mut ranked = Vec::new();
    let held = state
        .read::<HeldGroups>()
        .map_or(&[][..], |h| h.0.as_slice());
    for &pool in pools {
        for (group, aggregate) in snapshot.pool_groups(pool) {
            if !held.is_empty() && held.binary_search(&group).is_ok() {
                continue;
            }
            let passes = (profile.group_filters.iter())
                .all(|f| f.filter_group(query, state, group, aggregate));
            if passes {
                let score = (profile.group_scores.iter())
                    .map(|(s, w)| w * s.score_group(query, state, group, aggregate))
                    .sum();
                ranked.push((score, group));
            }
        }
    }
    ranked
}

/// The whole job inside the best-ranked group that holds it. Candidate groups are tried in
/// rank order, in one parallel pass for large jobs.
fn within_one_group(
    profile: &Profile,
    job: &Job,
    widths: &PodWidths,
    snapshot: &ClusterState,
    state: &CycleState,
    ranked: &mut [(i64, GroupId)],
) -> Option<Found> {
    let spec = snapshot.spec();
    let options = profile.search_options;
    // A pool of one thread has nothing to share the groups with.
    let parallel = options.parallel
        && job.pods.len() >= options.parallel_min_pods
        && rayon::current_num_threads() > 1;
    let by_rank = |a: &(i64, GroupId), b: &(i64, GroupId)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
    let usable = gpu_pods_usable(job, state);
    let may_hold = |&(_, group): &(i64, GroupId)| {
        usable.is_none_or(|usable| usable.in_group(group)) && may_fit(widths, snapshot.group(group))
    };
    let attempt = |&group: &GroupId| {
        let nodes = [spec.group(group).nodes.as_slice()];
        try_nodes(profile, job, snapshot, state, &nodes)
    };
    // Most jobs fit the best group that may hold them: it is tried alone, and the rest are
    // ranked, and tried (in parallel) only if it fails. That group is nearly always
    // the best-ranked one (the group filters passed it), so it is looked for by rank first:
    // a rank comparison costs less than asking an aggregate.
    let top = (0..ranked.len()).min_by(|&a, &b| by_rank(&ranked[a], &ranked[b]))?;
    let (best, sorted) = if may_hold(&ranked[top]) {
        ranked.swap(0, top);
        (0, false)
    } else {
        ranked.sort_unstable_by(by_rank);
        (ranked.iter().position(may_hold)?, true)
    };
    if let Some(found) = attempt(&ranked[best].1) {
        return Some(found);
    }
    let rest = &mut ranked[best + 1..];
    if !sorted {
        rest.sort_unstable_by(by_rank);
    }
    let candidates: Vec<GroupId> = rest.iter().filter(|m| may_hold(m)).map(|m| m.1).collect();
    if !parallel {
        return candidates.iter().find_map(attempt);
    }
    // Speculative: the first feasible group in rank order wins, whichever thread finds one
    // first, so the result is the same as trying them one by one. One parallel pass over
    // a batch (rayon splits it as threads come free, and skips what lies past a group
    // found) costs one fork, where a fork per handful of groups cost more than a group's
    // attempt.
    let batch = match options.groups_per_batch {
        0 => candidates.len().max(1),
        n => n,
    };
    (candidates.chunks(batch)).find_map(|batch| batch.par_iter().find_map_first(attempt))
}

/// The GPUs of each node the job's GPU pods could ever use (judged once per job, see
/// [`super::Reach`]): a group where no node may take them (a node selector, a taint, nodes
/// too small for them) never holds them, and is passed by unattempted. `None`: any.
fn gpu_pods_usable<'a>(job: &Job, state: &'a CycleState) -> Option<&'a UsableGpus> {
    let asks_gpus = job.pods.iter().any(|pod| !pod.gpu.is_none());
    (state.read::<ReachOf>())
        .and_then(|ReachOf(reach)| reach.usable.as_ref())
        .filter(|_| asks_gpus)
}

/// Of the job's pods that ask for whole GPUs, how many an aggregate can hold at once:
/// exact for alike pods, for pods of several widths a bound (each takes at least the
/// narrowest width on one node). `u64::MAX` when no pod asks for whole GPUs: it cannot
/// say. Pods without whole GPUs (a launcher, fractions) are left to the node filters, as
/// a launcher may go to any node.
fn pods_held(widths: &PodWidths, aggregate: &GpuAggregate) -> u64 {
    match widths.uniform_whole {
        Some(per_pod) => aggregate.pods_that_fit(per_pod),
        None if widths.whole_pods == 0 => u64::MAX,
        None => aggregate.pods_that_fit(widths.narrowest_of_whole),
    }
}

/// Whether the aggregate may hold the whole job (exact for alike whole-GPU pods;
/// fractions, CPU and memory are left to the node filters).
fn may_fit(widths: &PodWidths, aggregate: &GpuAggregate) -> bool {
    widths.whole_gpus <= u64::from(aggregate.free_gpus)
        && pods_held(widths, aggregate) >= widths.whole_pods
}

/// A gang inside one domain of `tier` of one pool (`None`: anywhere in one of the job's
/// pools), since a gang never mixes GPU models, on at most as many leaves of a pool as
/// `most_leaves` gives it (a gang's without a required tier, [`leaf_limits`]). The
/// domains that hold the job are read from the group aggregates and taken the fewest
/// leaves spanned first, then best fit (the least room left over, so larger domains stay
/// whole); inside one, the leaves that hold the most of the job are filled first (the
/// blocks of a leaf searched as several groups together), and inside a leaf its groups
/// that hold the most, so it spans the fewest leaves and groups, under the first pass's
/// cycle state when one is given (`first`, see [`two_level`]) and then under the
/// search's. No node combination is tried blindly.
fn within_one_domain(
    profile: &Profile,
    job: &Job,
    widths: &PodWidths,
    snapshot: &ClusterState,
    (first, state): (Option<&CycleState>, &CycleState),
    ranked: &[(i64, GroupId)],
    (tier, most_leaves): (Option<Tier>, &[(PoolId, usize)]),
) -> Option<Found> {
    let spec = snapshot.spec();
    let usable = gpu_pods_usable(job, state);
    let mut members: Vec<DomainMember> = ranked
        .iter()
        .filter(|&&(_, group)| usable.is_none_or(|usable| usable.in_group(group)))
        .filter_map(|&(score, group)| {
            // A gang never mixes GPU models: a domain is one pool's part of it.
            let pool = spec.group(group).pool;
            let domain = match tier {
                Some(t) => spec.enclosing_domain(group, t)?,
                None => 0,
            };
            let room = pods_held(widths, snapshot.group(group));
            let leaf = leaf_key(spec, group);
            (room > 0).then_some(DomainMember {
                domain: (pool, domain),
                leaf,
                leaf_room: 0,
                leaf_score: 0,
                leaf_first: group,
                room,
                score,
                group,
            })
        })
        .collect();
    members.sort_unstable_by_key(|m| (m.domain, m.leaf));
    for same_leaf in members.chunk_by_mut(|a, b| (a.domain, a.leaf) == (b.domain, b.leaf)) {
        let room = same_leaf
            .iter()
            .fold(0u64, |sum, m| sum.saturating_add(m.room));
        let score = same_leaf.iter().map(|m| m.score).max().unwrap_or(0);
        let first = same_leaf
            .iter()
            .map(|m| m.group)
            .min()
            .unwrap_or(GroupId(0));
        for m in same_leaf.iter_mut() {
            (m.leaf_room, m.leaf_score, m.leaf_first) = (room, score, first);
        }
    }
    members.sort_unstable_by(|a, b| {
        a.domain
            .cmp(&b.domain)
            .then(b.leaf_room.cmp(&a.leaf_room))
            .then(b.leaf_score.cmp(&a.leaf_score))
            .then(a.leaf_first.cmp(&b.leaf_first))
            .then(b.room.cmp(&a.room))
            .then(b.score.cmp(&a.score))
            .then(a.group.cmp(&b.group))
    });
    // (leaves spanned, room, its groups)
    let mut domains: Vec<(usize, u64, &[DomainMember])> = members
        .chunk_by(|a, b| a.domain == b.domain)
        .map(|groups| {
            let room = groups
                .iter()
                .fold(0u64, |sum, m| sum.saturating_add(m.room));
            (leaves_spanned(widths, groups), room, groups)
        })
        .filter(|&(leaves, room, groups)| {
            let free: u64 = groups
                .iter()
                .map(|m| u64::from(snapshot.group(m.group).free_gpus))
                .sum();
            let pool = groups[0].domain.0;
            domain_may_hold(widths, room, free)
                && (most_leaves.iter()).all(|&(p, most)| p != pool || leaves <= most)
        })
        .collect();
    domains.sort_by_key(|&(leaves, room, groups)| {
        (leaves, room - widths.whole_pods, groups[0].domain)
    });
    domains.into_iter().find_map(|(.., groups)| {
        // Held to a number of leaves, it is placed on the roomiest of them only.
        let pool = groups[0].domain.0;
        let groups = match most_leaves.iter().find(|&&(p, _)| p == pool) {
            Some(&(_, most)) => first_leaves(groups, most),
            None => groups,
        };
        let mut attempt = Attempt::new(snapshot, job);
        let nodes_of = |member: &DomainMember| spec.group(member.group).nodes.as_slice();
        let sweeps = first.into_iter().chain([state]);
        for (cycle, member) in sweeps.flat_map(|c| groups.iter().map(move |m| (c, m))) {
            attempt.fill(profile, job, cycle, &[nodes_of(member)]);
            if attempt.is_complete(job) {
                return Some(attempt.finish(job));
            }
        }
        let widths = attempt.rearrangeable_widths(job)?;
        let nodes: Vec<&[NodeId]> = groups.iter().map(nodes_of).collect();
        rearranged(profile, job, snapshot, state, &nodes, &widths)
    })
}

/// How many leaves a domain's members (sorted the roomiest leaf first) span when the
/// gang fills them in order, judged from what each leaf holds of it: the fewer, the less
/// of its traffic crosses a spine switch.
fn leaves_spanned(widths: &PodWidths, members: &[DomainMember]) -> usize {
    let mut held = 0u64;
    let leaves = members.chunk_by(|a, b| a.leaf == b.leaf);
    let short = leaves.take_while(|leaf| {
        let short = held < widths.whole_pods;
        held = held.saturating_add(leaf[0].leaf_room);
        short
    });
    short.count().max(1)
}

/// The members of a domain's first `leaves` leaves (its members sorted the roomiest leaf
/// first).
fn first_leaves(members: &[DomainMember], leaves: usize) -> &[DomainMember] {
    let end = (members.chunk_by(|a, b| a.leaf == b.leaf))
        .take(leaves)
        .map(<[DomainMember]>::len)
        .sum();
    &members[..end]
}

/// Whether a domain whose groups hold `room` of the job's pods and `free` whole GPUs may
/// hold the whole job: the search tries only such domains.
fn domain_may_hold(widths: &PodWidths, room: u64, free: u64) -> bool {
    room >= widths.whole_pods && free >= widths.whole_gpus
}

/// A search group as a member of a domain, with the pods of the job it can hold.
struct DomainMember {
    domain: (PoolId, u64),
    /// Its leaf (a leafless block: its own), and what the domain's groups of it hold.
    leaf: u64,
    leaf_room: u64,
    leaf_score: i64,
    leaf_first: GroupId,
    room: u64,
    score: i64,
    group: GroupId,
}

/// A job inside one scale-up domain of its pools, on the nodes of one pool (a gang never
/// mixes GPU models), best fit first.
fn within_one_hbd(
    profile: &Profile,
    job: &Job,
    widths: &PodWidths,
    snapshot: &ClusterState,
    state: &CycleState,
    pools: &[PoolId],
) -> Option<Found> {
    let spec = snapshot.spec();
    let held = state
        .read::<HeldGroups>()
        .map_or(&[][..], |h| h.0.as_slice());
    // The domain's aggregate counts every pool's nodes: an upper bound for each pool's.
    let mut domains: Vec<(u64, u32)> = (0..spec.hbds.len() as u32)
        .filter(|&h| may_fit(widths, snapshot.hbd(h)))
        .map(|h| {
            (
                pods_held(widths, snapshot.hbd(h)).saturating_sub(widths.whole_pods),
                h,
            )
        })
        .collect();
    domains.sort_unstable();
    domains.into_iter().find_map(|(_, h)| {
        pools.iter().find_map(|&pool| {
            let nodes: Vec<NodeId> = hbd_nodes_in(spec, h, pool).collect();
            // A domain whose nodes of this pool are partly in room held for a backfill
            // head is left alone (held room of another pool takes nothing from it).
            let in_held = |n: &NodeId| held.binary_search(&spec.node_group[n.index()]).is_ok();
            (!nodes.is_empty() && !nodes.iter().any(in_held))
                .then(|| try_nodes(profile, job, snapshot, state, &[nodes.as_slice()]))
                .flatten()
        })
    })
}

fn try_nodes(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
    nodes: &[&[NodeId]],
) -> Option<Found> {
    let mut attempt = Attempt::new(snapshot, job);
    attempt.fill(profile, job, state, nodes);
    if attempt.is_complete(job) {
        return Some(attempt.finish(job));
    }
    let widths = attempt.rearrangeable_widths(job)?;
    rearranged(profile, job, snapshot, state, nodes, &widths)
}

/// Pods of several widths, each placed on its best node, can leave no node for the last
/// ones where another arrangement holds them all (3 + 2 + 2 + 2 GPUs on nodes with 4 and 5
/// free): after an attempt failed, the job's pods are arranged again on `nodes`, within a
/// budget, where the nodes' free GPUs could hold `widths` (its whole-GPU pods' widths,
/// widest first, from [`Attempt::rearrangeable_widths`]) in some arrangement.
fn rearranged(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
    nodes: &[&[NodeId]],
    widths: &[u32],
) -> Option<Found> {
    let mut free = [0u32; MAX_GPUS_PER_NODE + 1];
    for &node in nodes.iter().flat_map(|s| s.iter()) {
        free[snapshot.node(node).free_whole_count() as usize] += 1;
    }
    let mut steps = COUNT_STEPS;
    if counts_hold(widths, &mut free, &mut steps) == Some(false) {
        return None;
    }
    let mut again = Attempt::new(snapshot, job);
    let mut tries = REARRANGE_TRIES;
    again
        .arrange(profile, job, state, nodes, &mut tries)
        .then(|| again.finish(job))
}

/// The most pods a rearranging search tries to place, each judging every node it may use:
/// its cost is at most this many passes over them.
const REARRANGE_TRIES: u32 = 64;

/// The most steps the check on free GPU counts takes before it says it cannot tell.
const COUNT_STEPS: u64 = 1 << 16;

/// Whether pods of these whole-GPU widths (widest first) fit nodes with these counts of
/// free GPUs (`free[n]`: nodes with `n` free), each pod inside one node, counting GPUs
/// alone: each pod tries the narrowest nodes that hold it first. `None`: undecided
/// within `steps`.
fn counts_hold(widths: &[u32], free: &mut NodeSizes, steps: &mut u64) -> Option<bool> {
    let Some((&width, rest)) = widths.split_first() else {
        return Some(true);
    };
    let mut decided = true;
    for size in width as usize..free.len() {
        if free[size] == 0 {
            continue;
        }
        if *steps == 0 {
            return None;
        }
        *steps -= 1;
        free[size] -= 1;
        free[size - width as usize] += 1;
        let held = counts_hold(rest, free, steps);
        free[size - width as usize] -= 1;
        free[size] += 1;
        match held {
            Some(true) => return Some(true),
            Some(false) => {}
            None => decided = false,
        }
    }
    decided.then_some(false)
}

/// A job being placed pod by pod on its own copy of the state.
struct Attempt {
    state: ClusterState,
    plan: Vec<(PodKey, Placement)>,
    /// The nodes of `plan`.
    nodes: JobNodes,
    /// The order its pods are placed in when they differ: the most GPUs first, so that
    /// narrower pods fill what wider ones leave across the groups filled one after the
    /// other. Empty: pod order, the pods being alike.
    order: Vec<u32>,
}

impl Attempt {
    fn new(snapshot: &ClusterState, job: &Job) -> Self {
        let alike = job.pods.windows(2).all(|w| w[0].gpu == w[1].gpu);
        let mut order: Vec<u32> = Vec::new();
        if !alike {
            order.extend(0..job.pods.len() as u32);
            order.sort_by_key(|&pod| std::cmp::Reverse(job.pods[pod as usize].gpu.milli()));
        }
        Self {
            state: snapshot.snapshot(),
            plan: Vec::new(),
            nodes: JobNodes::default(),
            order,
        }
    }

    /// The next pod to place, if any is left.
    fn next_pod(&self, job: &Job) -> Option<u32> {
        let placed = self.plan.len();
        if self.order.is_empty() {
            (placed < job.pods.len()).then_some(placed as u32)
        } else {
            self.order.get(placed).copied()
        }
    }

    fn is_complete(&self, job: &Job) -> bool {
        self.plan.len() == job.pods.len()
    }

    /// The complete placement, on a state that also knows who the job's pods are and what
    /// extended resources they hold.
    fn finish(mut self, job: &Job) -> Found {
        if !self.plan.is_empty() {
            self.state.record_job(job);
        }
        // A plan lists the pods in pod order, however they were placed.
        self.plan.sort_unstable_by_key(|(key, _)| key.pod);
        Found {
            plan: JobPlan { pods: self.plan },
            state: self.state,
        }
    }

    /// Places the job's remaining pods on `nodes`, in order, until one does not fit. A
    /// gang's pod without GPUs that fits none of them (a launcher) may go to any node of
    /// the cluster its own rules allow: it is bound neither to the domain of the job's
    /// GPUs nor to their models. A gang of no GPUs at all may go to any node of the pools
    /// it accepts, and has no launcher where it requires a tier: its pods keep to one
    /// domain of that tier.
    fn fill(&mut self, profile: &Profile, job: &Job, cycle: &CycleState, nodes: &[&[NodeId]]) {
        let plugins = JobPlugins::of(profile, job, self.state.spec());
        let asks_gpus = job.pods.iter().any(|p| !p.gpu.is_none());
        let has_launchers =
            job.is_gang() && (asks_gpus || !job.topology.is_some_and(|need| need.required));
        while let Some(index) = self.next_pod(job) {
            let pod = self.pod_context(job, index);
            let placement =
                place_pod(profile, &plugins, &pod, cycle, &self.state, nodes).or_else(|| {
                    // A lone pod's search already covered every node it may use.
                    if !pod.request.gpu.is_none() || !has_launchers {
                        return None;
                    }
                    let spec = self.state.spec();
                    let everywhere: Vec<&[NodeId]> = (spec.pools.iter().zip(0..))
                        .filter(|&(_, id)| asks_gpus || job.accepts_pool(PoolId(id)))
                        .map(|(p, _)| p.nodes.as_slice())
                        .collect();
                    place_pod(profile, &plugins, &pod, cycle, &self.state, &everywhere)
                });
            let Some(placement) = placement else {
                return;
            };
            if !self.assume(job, index, placement) {
                return;
            }
        }
    }

    /// Places the job's remaining pods on `nodes` depth first: each pod of whole GPUs
    /// tries, best first, the nodes that pass the filters, but only the first that takes it
    /// of each count of free GPUs (others with as many free are much alike to the pods
    /// still to place, so trying them would mostly repeat the search), and the others as
    /// `fill` places them. Gives up once `tries` pods of whole GPUs were tried, or those
    /// others fit nowhere. Whether it placed them all; on failure the attempt is left as
    /// it was.
    fn arrange(
        &mut self,
        profile: &Profile,
        job: &Job,
        cycle: &CycleState,
        nodes: &[&[NodeId]],
        tries: &mut u32,
    ) -> bool {
        let Some(index) = self.next_pod(job) else {
            return true;
        };
        let request = &job.pods[index as usize];
        if request.gpu.whole() == 0 {
            let (state, placed) = (self.state.clone(), self.plan.len());
            self.fill(profile, job, cycle, nodes);
            if self.is_complete(job) {
                return true;
            }
            // Pods without whole GPUs that fit nowhere after the others end the search:
            // how those are arranged seldom decides it, and each time costs a pass over
            // every node (a launcher may go to any).
            *tries = 0;
            self.state = state;
            self.take_back_to(placed);
            return false;
        }
        if *tries == 0 {
            return false;
        }
        *tries -= 1;
        let plugins = JobPlugins::of(profile, job, self.state.spec());
        let pod = self.pod_context(job, index);
        let candidates = ranked_nodes(&plugins, &pod, cycle, &self.state, nodes);
        // Counts of free GPUs already tried (bit n: n free).
        let mut tried = 0u64;
        for node in candidates {
            let free = self.state.node(node).free_whole_count();
            if tried >> free & 1 == 1 {
                continue;
            }
            let pod = self.pod_context(job, index);
            let Some(placement) = placement_on(profile, &pod, &self.state, node) else {
                continue;
            };
            let state = self.state.clone();
            if self.assume(job, index, placement) {
                tried |= 1 << free;
                // A branch whose free GPU counts cannot hold the pods left is not entered.
                if self.counts_may_hold_the_rest(job, nodes)
                    && self.arrange(profile, job, cycle, nodes, tries)
                {
                    return true;
                }
                self.take_back_to(self.plan.len() - 1);
            }
            self.state = state;
            if *tries == 0 {
                return false;
            }
        }
        false
    }

    /// Whether the free GPU counts of `nodes` may hold the job's whole-GPU pods not yet
    /// placed ([`counts_hold`]; undecided counts as may).
    fn counts_may_hold_the_rest(&self, job: &Job, nodes: &[&[NodeId]]) -> bool {
        let rest: Vec<u32> = (self.order[self.plan.len()..].iter())
            .map(|&pod| job.pods[pod as usize].gpu.whole())
            .filter(|&w| w > 0)
            .collect();
        let mut free = [0u32; MAX_GPUS_PER_NODE + 1];
        for &node in nodes.iter().flat_map(|s| s.iter()) {
            free[self.state.node(node).free_whole_count() as usize] += 1;
        }
        let mut steps = COUNT_STEPS;
        counts_hold(&rest, &mut free, &mut steps) != Some(false)
    }

    /// After this attempt failed: the widths of the job's whole-GPU pods, widest first,
    /// when arranging them again could help. It could not for pods of one width (a
    /// launcher beside them or not: any order fits as many per node), when the pod that
    /// found no node asks for no whole GPU, or past [`REARRANGE_TRIES`] such pods.
    fn rearrangeable_widths(&self, job: &Job) -> Option<Vec<u32>> {
        let stuck = self.next_pod(job)?;
        if job.pods[stuck as usize].gpu.whole() == 0 {
            return None;
        }
        let widths: Vec<u32> = (self.order.iter())
            .map(|&pod| job.pods[pod as usize].gpu.whole())
            .filter(|&w| w > 0)
            .collect();
        let several = widths.first() != widths.last();
        (several && widths.len() <= REARRANGE_TRIES as usize).then_some(widths)
    }

    /// What the plugins see of the job's pod `index`, to be placed next.
    fn pod_context<'j>(&'j self, job: &'j Job, index: u32) -> PodContext<'j> {
        let request = &job.pods[index as usize];
        // Pods to place as wide as this one: the rest of the job when its pods are alike,
        // else the rest of this width's run in the widest-first order.
        let alike_left = match self.order.is_empty() {
            true => job.pods.len() - self.plan.len(),
            false => (self.order[self.plan.len()..].iter())
                .take_while(|&&p| job.pods[p as usize].gpu == request.gpu)
                .count(),
        };
        PodContext {
            job,
            index,
            request,
            placed: &self.plan,
            placed_nodes: &self.nodes,
            alike_left: alike_left as u32,
        }
    }

    /// Records the pod's placement on the attempt's state; whether it fitted.
    fn assume(&mut self, job: &Job, index: u32, placement: Placement) -> bool {
        let key = PodKey {
            job: job.id,
            pod: index,
        };
        let fits = self.state.assume(key, placement).is_ok();
        if fits {
            self.plan.push((key, placement));
            self.nodes.add(placement.node);
        }
        fits
    }

    /// Forgets the plan's pods past the first `placed` (the state is restored apart).
    fn take_back_to(&mut self, placed: usize) {
        for (_, placement) in self.plan.drain(placed..) {
            self.nodes.remove(placement.node);
        }
    }
}

/// The profile's filters and scorers that have something to say about one job's pods,
/// chosen once per attempt.
struct JobPlugins<'a> {
    filters: Applying<'a, Arc<dyn Filter>>,
    scorers: Applying<'a, (Arc<dyn Score>, i64)>,
}

impl<'a> JobPlugins<'a> {
    fn of(profile: &'a Profile, job: &Job, spec: &ClusterSpec) -> Self {
        Self {
            filters: Applying::of(&profile.filters, |f| f.applies(job, spec)),
            scorers: Applying::of(&profile.scores, |(s, _)| s.applies(job, spec)),
        }
    }
}

/// The best node for one pod and the devices it gets there.
fn place_pod(
    profile: &Profile,
    plugins: &JobPlugins,
    pod: &PodContext,
    cycle: &CycleState,
    state: &ClusterState,
    nodes: &[&[NodeId]],
) -> Option<Placement> {
    let node = best_node(plugins, pod, cycle, state, nodes)?;
    placement_on(profile, pod, state, node)
}

/// The pod on `node`, with the devices the profile's allocator gives it there.
fn placement_on(
    profile: &Profile,
    pod: &PodContext,
    state: &ClusterState,
    node: NodeId,
) -> Option<Placement> {
    let view = NodeView::of(state, node);
    let gpus = profile.allocate.allocate(pod, view)?;
    Some(Placement {
        node,
        gpus,
        cpu_milli: pod.request.cpu_milli,
        memory_bytes: pod.request.memory_bytes,
        ephemeral_bytes: pod.request.ephemeral_bytes,
    })
}

/// The feasible node with the highest weighted score (the first in `nodes` among equals).
fn best_node(
    plugins: &JobPlugins,
    pod: &PodContext,
    cycle: &CycleState,
    state: &ClusterState,
    nodes: &[&[NodeId]],
) -> Option<NodeId> {
    let feasible = feasible_nodes(plugins, pod, cycle, state, nodes);
    let scorers = &plugins.scorers;
    if scorers.iter().any(|(s, _)| s.normalizes()) {
        let feasible: Vec<NodeView> = feasible.collect();
        let totals = weighted_scores(scorers, pod, cycle, &feasible);
        let best =
            (0..feasible.len()).max_by(|&a, &b| totals[a].cmp(&totals[b]).then(b.cmp(&a)))?;
        return Some(feasible[best].id);
    }
    let mut best: Option<(i64, NodeId)> = None;
    for view in feasible {
        let score: i64 = scorers
            .iter()
            .map(|(s, w)| w * s.score(pod, cycle, view))
            .sum();
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, view.id));
        }
    }
    best.map(|(_, id)| id)
}

/// The plugins of a list that have something to say about a job, chosen once per pod
/// without allocating: a bit per plugin (a profile has far fewer than 64; any beyond always
/// take part).
struct Applying<'a, T> {
    all: &'a [T],
    bits: u64,
}

impl<'a, T> Applying<'a, T> {
    fn of(all: &'a [T], applies: impl Fn(&T) -> bool) -> Self {
        let bits = all
            .iter()
            .enumerate()
            .filter(|(i, plugin)| *i >= 64 || applies(plugin))
            .fold(0u64, |bits, (i, _)| {
                bits | 1u64.checked_shl(i as u32).unwrap_or(0)
            });
        Self { all, bits }
    }

    fn iter(&self) -> impl Iterator<Item = &'a T> + '_ {
        self.all
            .iter()
            .enumerate()
            .filter(|(i, _)| *i >= 64 || self.bits >> i & 1 == 1)
            .map(|(_, plugin)| plugin)
    }
}

/// The nodes that pass every filter for the pod.
fn feasible_nodes<'s>(
    plugins: &'s JobPlugins,
    pod: &'s PodContext,
    cycle: &'s CycleState,
    state: &'s ClusterState,
    nodes: &'s [&[NodeId]],
) -> impl Iterator<Item = NodeView<'s>> + 's {
    let held = cycle.read::<HeldForGpuPods>().map(|h| h.0.as_slice());
    nodes.iter().flat_map(|s| s.iter()).filter_map(move |&id| {
        let view = NodeView::of(state, id);
        ((plugins.filters.iter()).all(|f| f.filter(pod, cycle, view).is_success())
            && held.is_none_or(|held| leaves_room_for_head(held, state.spec(), pod.request, view)))
        .then_some(view)
    })
}

/// Each feasible node's weighted score, every plugin's scores normalized where it
/// normalizes: the slow path, for jobs a normalizing scorer applies to and for the
/// rearranging search.
fn weighted_scores(
    scorers: &Applying<(Arc<dyn Score>, i64)>,
    pod: &PodContext,
    cycle: &CycleState,
    feasible: &[NodeView],
) -> Vec<i64> {
    let mut totals = vec![0i64; feasible.len()];
    let mut scores = vec![0i64; feasible.len()];
    for (plugin, weight) in scorers.iter() {
        for (slot, view) in scores.iter_mut().zip(feasible) {
            *slot = plugin.score(pod, cycle, *view);
        }
        if plugin.normalizes() {
            plugin.normalize(&mut scores);
        }
        for (total, score) in totals.iter_mut().zip(&scores) {
            *total += weight * score;
        }
    }
    totals
}

/// The feasible nodes for the pod, best first (in `nodes` order among equals), as
/// [`best_node`] ranks them.
fn ranked_nodes(
    plugins: &JobPlugins,
    pod: &PodContext,
    cycle: &CycleState,
    state: &ClusterState,
    nodes: &[&[NodeId]],
) -> Vec<NodeId> {
    let feasible: Vec<NodeView> = feasible_nodes(plugins, pod, cycle, state, nodes).collect();
    let totals = weighted_scores(&plugins.scorers, pod, cycle, &feasible);
    let mut order: Vec<usize> = (0..feasible.len()).collect();
    order.sort_by(|&a, &b| totals[b].cmp(&totals[a]).then(a.cmp(&b)));
    order.into_iter().map(|i| feasible[i].id).collect()
}

/// Why a job cannot be placed now, node by node, in kube-scheduler's words. Only called
/// when a world wants the message: the search itself never pays for it.
pub fn diagnose(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    state: &CycleState,
) -> Diagnosis {
    let spec = snapshot.spec();
    let mut diagnosis = Diagnosis {
        nodes: spec.nodes.len() as u32,
        ..Diagnosis::default()
    };
    let Some(request) = job.pods.first() else {
        return Diagnosis::job_level(Status::unresolvable("job has no pods"));
    };
    let pod = PodContext {
        job,
        index: 0,
        request,
        placed: &[],
        placed_nodes: &JobNodes::default(),
        alike_left: 1,
    };
    let pools = pools_for(job, snapshot);
    let outside_pools = spec
        .nodes
        .iter()
        .filter(|n| !pools.contains(&n.pool))
        .count() as u32;
    if outside_pools > 0 {
        diagnosis.add(
            "node(s) didn't match the job's GPU model".into(),
            outside_pools,
        );
    }
    for &pool in pools.iter() {
        for &id in &spec.pool(pool).nodes {
            let view = NodeView::of(snapshot, id);
            match profile
                .filters
                .iter()
                .map(|f| f.filter(&pod, state, view))
                .find(|s| !s.is_success())
            {
                Some(status) => diagnosis.add(status.reason, 1),
                None => diagnosis.add(could_not_hold(job).into(), 1),
            }
        }
    }
    diagnosis
}

/// Why a node that passes every filter did not take the job, in a diagnosis.
pub(super) fn could_not_hold(job: &Job) -> &'static str {
    match (
        job.is_gang(),
        job.topology.is_some_and(|need| need.required),
    ) {
        (true, _) => "node(s) could not hold the whole gang",
        (false, true) => "node(s) could not hold it inside a domain of its required tier",
        (false, false) => "node(s) could not hold it",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes with these free GPUs, as counts per free size.
    fn free(nodes: &[usize]) -> NodeSizes {
        let mut sizes = [0; MAX_GPUS_PER_NODE + 1];
        for &n in nodes {
            sizes[n] += 1;
        }
        sizes
    }

    #[test]
    fn free_gpu_counts_hold_pods_in_any_arrangement_or_say_they_cannot() {
        let mut steps = COUNT_STEPS;
        // 3 + 2 + 2 + 2 on 4 and 5: only the 3 on the 5 holds them.
        assert_eq!(
            counts_hold(&[3, 2, 2, 2], &mut free(&[4, 5]), &mut steps),
            Some(true)
        );
        // Enough GPUs, but no node holds a pod of 3.
        assert_eq!(
            counts_hold(&[3, 3], &mut free(&[2, 2, 2]), &mut steps),
            Some(false)
        );
        assert_eq!(
            counts_hold(&[4, 3, 3], &mut free(&[5, 5]), &mut steps),
            Some(false)
        );
        // Out of steps: undecided, never a wrong answer.
        let mut none = 0;
        assert_eq!(counts_hold(&[2, 2], &mut free(&[2, 2]), &mut none), None);
        assert_eq!(counts_hold(&[], &mut free(&[]), &mut none), Some(true));
    }
}
