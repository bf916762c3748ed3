//! `preemption` (PostFilter): makes room for a job that did not fit, conservatively;
//! `backfill-preemption` is the same for the backfill kind alone.
//!
//! - Backfill: for a backfill head blocked past the threshold, the jobs placed after it
//!   blocked, of no higher priority, that were never evicted as backfilled before (a
//!   requeued job loses at most one run to backfill preemption; in a live cluster an
//!   evicted pod comes back as a new one, which counts afresh).
//! - Quota reclaim: for a job its tenant's quota on a pool covers (once that tenant's own
//!   victims on the nodes it lands on are gone), jobs of other tenants that borrow on that
//!   pool, whatever their priority, as long as their tenant keeps at least its quota
//!   without them and its other victims. Once the job has been blocked for the backfill
//!   threshold, each victim only while its tenant still borrows there with its other
//!   victims gone, and the tenant left below its quota by no more than the job asks: a
//!   job goes whole, and the last may take its tenant below its quota (a borrower whose
//!   borrowing is part of a larger job would otherwise keep the owner out of its quota
//!   until that job ends). Every reclaim lowers what is borrowed, and the preemptor
//!   borrows nothing its victims' tenant could take back for priority, so the two never
//!   evict each other in turn.
//! - Priority: jobs of strictly lower priority.
//!
//! An isolated tenant's jobs within its quota are evicted for its own jobs only (what it
//! holds past its quota another isolated tenant within its own reclaims, past the
//! threshold a job straddling its quota whole, as above), and a shared tenant's for an
//! isolated tenant's job only when its quota admitted that job.
//!
//! Victims are whole jobs (a gang is evicted whole), never one placed less than the minimum
//! runtime ago, nor one placed this instant whatever the minimum (so a preemptor is not
//! evicted in turn before it has run). A backfill head that finds no set now, where jobs
//! that overtook it in the groups it holds (or would hold) are still protected and all of
//! them, with the whole GPUs free there, could hold it within its quota (and, by the
//! bounds below, in its pools), is told it awaits them until the last may go: the
//! scheduler may hold that room meanwhile, so that newer jobs do not keep it waiting on
//! theirs in turn. A victim that leaves at once (the simulator's) goes back to its queue
//! and is tried again in the same instant, where it may preempt in its turn. For a
//! backfill head, the jobs backfilled past it are taken before any others; then lowest
//! priority first, then least GPU-time lost, then most recently started, until
//! the job fits on the state without them (where a reclaim's budget passed some over and
//! no set was found, they are taken again among those on the nodes the job lands on when
//! the budget is left out, landing after landing); then any victim whose removal is not
//! needed is spared. Nothing is proposed unless the job was checked to fit, within its
//! quota.
//! Nothing is proposed either when that set would leave the preemptor's tenant borrowing
//! more on a pool where another shared tenant is below its quota with a job waiting for
//! the pool (a victim included), or (with `preemption`, where owners reclaim) borrowing
//! at all there, its own victims counted as still its own as far as room is left for
//! them, while it takes a job of a shared tenant it leaves below its quota (one that
//! quota, left, covers again): that owner could reclaim the job as soon as
//! its minimum runtime ends, and the evictions would cycle (a borrowing head evicts its
//! way in, is reclaimed, evicts again; a borrower's job evicts an owner's for priority,
//! its own going too, is reclaimed, evicts again). Where it refuses the set found, and
//! that set takes a job of another shared tenant borrowing nothing where the job may
//! go, a set is searched again among the candidates without such jobs (the preemptor's
//! own tenant's lower-priority jobs, say); failing that, the job waits for room as any
//! other. For a job of one pool whose tenant would borrow more there whichever of its own
//! jobs went, a candidate whose going alone leaves its shared tenant below its quota
//! there is no candidate at all: the rule refuses every set holding it. Where that rule
//! refuses every set the candidates could form (or every subset of the greedy set), no
//! placement is tried (or the set is not made minimal): on a
//! crowded cluster most preemptors end there. Nor is one tried where the devices free
//! and those the candidates hold could not hold the job's pods, node by node in any one
//! of its pools, whichever of them went (a gang of whole nodes among small jobs, mostly),
//! or not inside one domain where its placement is held to one (a required tier; a gang
//! patient for a tight placement, as a backfill head short of room is at each try); nor
//! where what the reclaims' budget lets the candidates free (each borrower's at most what
//! it borrows, or past the threshold what the rule above lets go) is less than the job
//! lacks, on the whole or on a landing; nor, for a job of one pool whose tenant would
//! borrow more there whichever of its own jobs went, where what the owner rule lets them
//! free (of each other shared tenant, what it borrows there) is less, among the
//! candidates or within the greedy set (whose subsets the minimal set is one of). As
//! victims are taken, a placement is tried only once the devices free could hold the
//! job's pods node by node.
//! Jobs alike (tenant, priority, pools, quota standing) that are no backfill heads share
//! their candidates while the running jobs, the tenants' accounts and the time stay as
//! they were ([`crate::framework::CandidateMemo`]). The scheduler may ask twice: once a
//! set is found for a gang whose patience is spent, it asks again with the gang's
//! placement held to one domain of its tightest tier, and takes that set where there is
//! one, though it may cost more (`Scheduler::preempt`). Either way the what-if placement
//! keeps a gang without a required tier to the leaves its patience periods let it span
//! (`search::leaf_limits`): past its patience, one more than its fewest per period, so a
//! gang evicts its way only onto as many leaves as it would take free room on.

use std::sync::Arc;

use crate::cache::{ClusterState, PodKey};
use crate::framework::{
    CandidateClass, Candidates, Landing, Plugin, PostFilter, PostFilterResult, PreemptionContext,
    PreemptionKind, RunningJob, domain_groups, pools_for, some_domain_holds,
};
use crate::model::{GpuRequest, GroupId, Job, MILLI_PER_GPU, NodeId, PoolId, Tier};
use crate::queue::{Admission, TenantMode, Tenants};

/// The most candidates examined for one preemptor beyond the cheapest that could free
/// what it needs: bounds the search's cost, yet lets a gang wider than so many small jobs
/// preempt.
const MAX_CANDIDATES: usize = 256;

/// The most victims tried for removal when the greedy set is made minimal.
const MAX_MINIMIZED: usize = 16;

pub struct Preemption {
    pub min_runtime_ms: u64,
    /// Only backfill preemption (`backfill-preemption`): no priority, no quota reclaim.
    pub backfill_only: bool,
}

impl Plugin for Preemption {
    fn name(&self) -> &'static str {
        if self.backfill_only {
            "backfill-preemption"
        } else {
            "preemption"
        }
    }
}

impl Preemption {
    /// Why `victim` may be preempted for `job`, if it may; `may_reclaim`: whether the job
    /// may reclaim quota at all (see `post_filter`).
    fn kind(
        &self,
        job: &Job,
        context: &PreemptionContext,
        may_reclaim: bool,
        victim: &RunningJob,
    ) -> Option<PreemptionKind> {
        if !victim.preemptible {
            return None;
        }
        // Quota: an isolated tenant's jobs within its quota are evicted for its own jobs
        // only: its quota is its alone, even where isolated quotas add up past the pool
        // (a warned-of misconfiguration, or nodes lost). What it holds past its quota (a
        // quota lowered, say) another isolated tenant within its own reclaims. And an
        // isolated tenant at its quota can only make room among its own jobs.
        let tenants = context.tenants;
        let isolated = |t: usize| tenants.mode(t) == TenantMode::Isolated;
        let other_isolated = of_another_isolated_tenant(context, victim);
        let helps_quota = if victim.tenant == context.tenant {
            true
        } else if other_isolated {
            isolated(context.tenant) && context.admitted
        } else {
            !isolated(context.tenant) || context.admitted
        };
        if !helps_quota {
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
        // Backfilled: it overtook the head.
        if let Some(since) = context.backfill_since
            && !other_isolated
            && victim.overtook(job, since)
            && in_reservation(context, victim)
        {
            return Some(PreemptionKind::Backfill);
        }
        if self.backfill_only {
            return None;
        }
        let tenants = context.tenants;
        // Only borrowed GPUs are reclaimed, for a job asking for GPUs: a victim holding
        // more than its tenant borrows only for a job blocked past the threshold. Shared
        // tenants reclaim from shared ones, isolated from isolated ones. Whether the set of
        // victims allows it is the budget's ([`ReclaimBudget`]).
        let whole = reclaims_whole(context);
        let reclaim = victim.tenant != context.tenant
            && may_reclaim
            && isolated(victim.tenant) == isolated(context.tenant)
            && victim.pools.iter().any(|&(pool, milli)| {
                let borrowed = tenants.borrowed(victim.tenant, pool);
                milli > 0
                    && (job.pools.is_empty() || job.pools.contains(&pool))
                    && tenants.under_quota(context.tenant, pool)
                    && borrowed > 0
                    && (whole || borrowed >= milli)
            });
        if reclaim {
            Some(PreemptionKind::QuotaReclaim)
        } else if lower && !other_isolated {
            Some(PreemptionKind::Priority)
        } else {
            None
        }
    }

    /// When the victim may first be preempted: once its minimum runtime has passed, and
    /// never the instant it was placed, even without one (the rounds of one instant end,
    /// see `Scheduler::schedule`).
    fn free_at(&self, victim: &RunningJob) -> u64 {
        (victim.started_ms.saturating_add(self.min_runtime_ms))
            .max(victim.started_ms.saturating_add(1))
    }

    /// When the last of the protected jobs a backfill head that may preempt no set of jobs
    /// now awaits may go, if it awaits any: some of the jobs that overtook it in the
    /// groups it holds (or would hold) are inside their minimum runtime, and all of those
    /// gone, its quota would admit it and they, with the whole GPUs free in those groups,
    /// could hold it (and, by the bounds `post_filter` judges before any placement is
    /// tried, in its pools). Victims of the other kinds are not kept to those groups:
    /// holding them would idle room for jobs elsewhere.
    fn awaits_protected(&self, job: &Job, context: &PreemptionContext) -> Option<u64> {
        let groups = context.reserved.or(context.would_hold)?;
        let within = PreemptionContext {
            reserved: Some(groups),
            ..*context
        };
        let may_reclaim = may_reclaim(job, context);
        let mut until = None;
        let candidates: Vec<(&RunningJob, PreemptionKind)> = (context.running.values())
            .filter_map(|victim| {
                let kind = (self.kind(job, &within, may_reclaim, victim))
                    .filter(|&kind| kind == PreemptionKind::Backfill)?;
                let free_at = self.free_at(victim);
                if context.now_ms < free_at {
                    until = until.max(Some(free_at));
                }
                Some((victim, kind))
            })
            .collect();
        let held: u64 = candidates.iter().map(|(v, _)| held_milli(v)).sum();
        let awaits = until.is_some()
            && context.snapshot.free_whole_milli_in(groups) + held >= job.total_milli()
            && tenants_without(context, &candidates).admit_milli(
                context.tenant,
                job,
                job.total_milli(),
            ) != Admission::Denied
            && !refused_whoever_goes(job, context, &candidates)
            && room_could_suffice(job, context, context.snapshot, &candidates);
        until.filter(|_| awaits)
    }

    /// The running jobs `job` may preempt now (of those it may preempt at all, the
    /// others are protected for their minimum runtime), with why, in the order they are
    /// taken in: jobs backfilled past the head before any others; then lowest priority
    /// first, least GPU-time lost, most recently started.
    fn candidates(&self, job: &Job, context: &PreemptionContext, may_reclaim: bool) -> Candidates {
        let mut found = Candidates::default();
        let mut victims = Vec::new();
        for victim in context.running.values() {
            let Some(kind) = self.kind(job, context, may_reclaim, victim) else {
                continue;
            };
            let free_at = self.free_at(victim);
            if context.now_ms < free_at {
                found.protected_until =
                    Some(found.protected_until.map_or(free_at, |t| t.min(free_at)));
                continue;
            }
            found.held_milli += held_milli(victim);
            // A job only a reclaim may take that holds more than its tenant borrows (for
            // a job blocked past the threshold) goes after every other: it costs its
            // tenant more than it borrows.
            let straddles = kind == PreemptionKind::QuotaReclaim
                && only_reclaim(job, context, victim)
                && (victim.pools.iter())
                    .any(|&(pool, milli)| milli > context.tenants.borrowed(victim.tenant, pool));
            victims.push((victim, kind, straddles));
        }
        let lost = |victim: &RunningJob| {
            let held = u128::from(held_milli(victim));
            held * u128::from(context.now_ms.saturating_sub(victim.started_ms))
        };
        let backfilled = |kind: &PreemptionKind| *kind == PreemptionKind::Backfill;
        victims.sort_by(|(a, a_kind, a_straddles), (b, b_kind, b_straddles)| {
            backfilled(b_kind)
                .cmp(&backfilled(a_kind))
                .then(a_straddles.cmp(b_straddles))
                .then(a.job.priority.cmp(&b.job.priority))
                .then(lost(a).cmp(&lost(b)))
                .then(b.started_ms.cmp(&a.started_ms))
                .then(a.job.id.cmp(&b.job.id))
        });
        found.victims = (victims.iter())
            .map(|(v, kind, _)| (v.job.id, *kind))
            .collect();
        found
    }
}

/// Whether a reclaim for the job may take a victim holding more than its tenant borrows,
/// the job having been blocked past the threshold: a job goes whole, and a borrower whose
/// borrowing is part of a larger job would otherwise keep the owner out of its quota
/// until that job ends.
fn reclaims_whole(context: &PreemptionContext) -> bool {
    context.now_ms >= context.reclaims_whole_from
}

/// Whether the victim is of an isolated tenant other than the preemptor's.
fn of_another_isolated_tenant(context: &PreemptionContext, victim: &RunningJob) -> bool {
    victim.tenant != context.tenant && context.tenants.mode(victim.tenant) == TenantMode::Isolated
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

/// The tenants' accounts once `victims` are gone.
fn tenants_without(
    context: &PreemptionContext,
    victims: &[(&RunningJob, PreemptionKind)],
) -> Tenants {
    let mut tenants = context.tenants.clone();
    for (victim, _) in victims {
        uncharge(&mut tenants, victim);
    }
    tenants
}

fn uncharge(tenants: &mut Tenants, victim: &RunningJob) {
    for &(pool, milli) in &victim.pools {
        tenants.charge(victim.tenant, pool, -(milli as i64));
    }
}

/// The cluster and the tenants' accounts with victims gone, taken one at a time.
struct WhatIf {
    state: ClusterState,
    tenants: Tenants,
}

impl WhatIf {
    fn new(context: &PreemptionContext) -> WhatIf {
        WhatIf {
            state: context.snapshot.snapshot(),
            tenants: context.tenants.clone(),
        }
    }

    fn take(&mut self, victim: &RunningJob) {
        for pod in 0..victim.job.pods.len() as u32 {
            let _ = self.state.forget(PodKey {
                job: victim.job.id,
                pod,
            });
        }
        uncharge(&mut self.tenants, victim);
    }

    /// Where the job, within its quota, lands; `None` if it does not fit.
    fn fits(&self, context: &PreemptionContext) -> Option<Landing> {
        (context.fits)(&self.state, &self.tenants)
    }
}

/// Whether the job's GPU pods could all find whole devices on `snapshot` were every
/// candidate gone, counted node by node on one of its pools, inside one domain where its
/// placement there is held to one: an upper bound on the room any set of them frees (every
/// device a candidate holds counted free, quota and constraints other than GPUs left out),
/// so that a job it refuses fits with no set of them (with none, a placement on `snapshot`
/// need not be tried). A job with a shared (fractional) pod is not judged.
fn room_could_suffice(
    job: &Job,
    context: &PreemptionContext,
    snapshot: &ClusterState,
    candidates: &[(&RunningJob, PreemptionKind)],
) -> bool {
    let mut sizes = Vec::with_capacity(job.pods.len());
    for pod in &job.pods {
        match pod.gpu {
            GpuRequest::Whole(0) => {}
            GpuRequest::Whole(gpus) => sizes.push(gpus),
            GpuRequest::Fraction(_) => return true,
        }
    }
    // Pods of one GPU fit wherever one is free: the totals judged before say as much.
    let Some(&smallest) = sizes.iter().min().filter(|&&gpus| gpus > 1) else {
        return true;
    };
    let spec = snapshot.spec();
    let pools = pools_for(job, snapshot);
    // The devices the candidates hold, by search group and node, on the job's pools.
    let mut held: Vec<(GroupId, NodeId, u32)> = Vec::new();
    for (victim, _) in candidates {
        for pod in 0..victim.job.pods.len() as u32 {
            let key = PodKey {
                job: victim.job.id,
                pod,
            };
            if let Some(placed) = snapshot.placement(key) {
                let node = placed.placement.node;
                if pools.contains(&spec.node(node).pool) {
                    let group = spec.node_group[node.index()];
                    held.push((group, node, placed.placement.gpus.devices));
                }
            }
        }
    }
    held.sort_unstable_by_key(|&(group, node, _)| (group, node));
    let need_gpus: u64 = sizes.iter().map(|&n| u64::from(n)).sum();
    let enough = |(pods, gpus): (u64, u64)| pods >= sizes.len() as u64 && gpus >= need_gpus;
    // What the candidates' devices add to the free ones, node by node: pods of the
    // smallest size, and GPUs.
    let added = |held: &[(GroupId, NodeId, u32)]| {
        (held.chunk_by(|a, b| a.1 == b.1)).fold((0, 0), |(pods, gpus), same_node| {
            let state = snapshot.node(same_node[0].1);
            let devices = same_node.iter().fold(0, |all, &(.., d)| all | d) & !state.unhealthy();
            let free = state.free_whole();
            let room = free | devices;
            let more_pods = room.count_ones() / smallest - free.count_ones() / smallest;
            let more_gpus = (room & !free).count_ones();
            (pods + u64::from(more_pods), gpus + u64::from(more_gpus))
        })
    };
    let held_in = |range: std::ops::Range<(GroupId, NodeId)>| {
        let key = |h: &(GroupId, NodeId, u32)| (h.0, h.1);
        &held[held.partition_point(|h| key(h) < range.start)
            ..held.partition_point(|h| key(h) < range.end)]
    };
    // The free devices read from the groups' histograms, then what the candidates add.
    let in_groups = |groups: &mut dyn Iterator<Item = GroupId>| {
        groups.fold((0, 0), |(pods, gpus), group| {
            let free = snapshot.group(group);
            let held = held_in((group, NodeId(0))..(GroupId(group.0 + 1), NodeId(0)));
            let (more_pods, more_gpus) = added(held);
            (
                pods + free.pods_that_fit(smallest) + more_pods,
                gpus + u64::from(free.free_gpus) + more_gpus,
            )
        })
    };
    // Its GPU pods all land in one pool, and there in one domain where it is held to one.
    context
        .domain_limits
        .iter()
        .any(|&(pool, tier)| match tier {
            None => enough(in_groups(&mut spec.pool(pool).groups.iter().copied())),
            // A scale-up domain cuts across groups: its nodes one by one.
            Some(Tier::Hbd) => some_domain_holds(spec, &[pool], Tier::Hbd, |nodes| {
                enough(nodes.fold((0, 0), |(pods, gpus), node| {
                    let free = snapshot.node(node).free_whole().count_ones();
                    let group = spec.node_group[node.index()];
                    let (more_pods, more_gpus) =
                        added(held_in((group, node)..(group, NodeId(node.0 + 1))));
                    (
                        pods + u64::from(free / smallest) + more_pods,
                        gpus + u64::from(free) + more_gpus,
                    )
                }))
            }),
            Some(tier) => (domain_groups(spec, &[pool], tier).chunk_by(|a, b| a.0 == b.0))
                .any(|domain| enough(in_groups(&mut domain.iter().map(|&(_, group)| group)))),
        })
}

/// Whether `owner` has had a job waiting for GPUs of `pool` since the round began (or a
/// victim of it since).
fn waits_for(context: &PreemptionContext, owner: usize, pool: PoolId) -> bool {
    (context.pools_wanted.get(owner)).is_some_and(|wanted| wanted.may_want(pool))
}

/// Milli-GPUs free on `pool`, on healthy shared devices too.
fn free_milli(snapshot: &ClusterState, pool: PoolId) -> u64 {
    let pool = snapshot.pool(pool);
    u64::from(pool.free_gpus) * u64::from(MILLI_PER_GPU) + pool.shared_room_milli
}

/// Whether the job asks for GPUs and may have them on `pool`.
fn wants(job: &Job, pool: PoolId) -> bool {
    job.total_milli() > 0 && (job.pools.is_empty() || job.pools.contains(&pool))
}

/// Whether the job, placed in `pool` once `victims` are gone, would leave its tenant
/// borrowing there while another shared tenant is below its quota with a job waiting for
/// the pool (one in its queue, or a victim of this set, or one whose pods are still
/// going, which its controller will bring back), where the set makes that so: its
/// tenant borrows more than before, or, where owners reclaim (`reclaims`: not under
/// `backfill-preemption` alone), the set takes a shared tenant's job there and leaves
/// that tenant below its quota. A set of the tenant's own jobs alone, borrowing no more,
/// changes nothing an owner could reclaim; one that also takes an owner's job would be
/// reclaimed at once, and the two would evict each other in turn. An owner's victim
/// counts only where its tenant's quota left would cover it again (one it could reclaim
/// back). For such a set the tenant's own victims count as still its own as far as the
/// pool has room left once the job is placed: placed again there (in the room a reclaim
/// of a job whole freed past its need, say), they would have it borrow again.
fn reclaimable_after(
    job: &Job,
    context: &PreemptionContext,
    victims: &[(&RunningJob, PreemptionKind)],
    pool: PoolId,
    reclaims: bool,
) -> bool {
    let tenants = tenants_without(context, victims);
    let need = job.total_milli();
    let before = context.tenants.used(context.tenant, pool);
    let waiting = |owner: usize| {
        let owned_victim = |victim: &RunningJob| victim.tenant == owner && wants(&victim.job, pool);
        waits_for(context, owner, pool)
            || victims.iter().any(|(victim, _)| owned_victim(victim))
            || (context.running.values())
                .any(|running| running.terminating && owned_victim(running))
    };
    let makes_an_owner = reclaims
        && victims.iter().any(|(victim, _)| {
            let owner = victim.tenant;
            let held = victim.held_on(pool);
            owner != context.tenant
                && tenants.mode(owner) == TenantMode::Shared
                && held > 0
                && held
                    <= tenants
                        .quota(owner, pool)
                        .saturating_sub(tenants.used(owner, pool))
        });
    if makes_an_owner {
        let freed: u64 = victims.iter().map(|(v, _)| v.held_on(pool)).sum();
        let room_left = (free_milli(context.snapshot, pool) + freed).saturating_sub(need);
        let own = own_on_pool(context, victims, pool);
        let mut own_back = tenants;
        own_back.charge(context.tenant, pool, own.min(room_left) as i64);
        return own_back.reclaimable(context.tenant, pool, need, waiting);
    }
    tenants.used(context.tenant, pool) + need > before
        && tenants.reclaimable(context.tenant, pool, need, waiting)
}

/// Whether [`reclaimable_after`] refuses every subset of `victims` wherever the job
/// lands, so that no placement needs trying: on every pool the job may use, its tenant
/// would borrow more even with all of its own jobs among them gone, and another shared
/// tenant with a job waiting for the pool is below its quota there already (evicting
/// jobs only keeps that true).
fn refused_whoever_goes(
    job: &Job,
    context: &PreemptionContext,
    victims: &[(&RunningJob, PreemptionKind)],
) -> bool {
    let need = job.total_milli();
    pools_for(job, context.snapshot).iter().all(|&pool| {
        let own = own_on_pool(context, victims, pool);
        need > own
            && context
                .tenants
                .reclaimable(context.tenant, pool, need - own, |owner| {
                    waits_for(context, owner, pool)
                })
    })
}

/// Milli-GPUs the victim holds, on every pool.
fn held_milli(victim: &RunningJob) -> u64 {
    victim.pools.iter().map(|&(_, milli)| milli).sum()
}

/// Milli-GPUs the preemptor's own tenant's victims hold on `pool`.
fn own_on_pool(
    context: &PreemptionContext,
    victims: &[(&RunningJob, PreemptionKind)],
    pool: PoolId,
) -> u64 {
    (victims.iter())
        .filter(|(v, _)| v.tenant == context.tenant)
        .map(|(v, _)| v.held_on(pool))
        .sum()
}

/// The owner rule ([`reclaimable_after`]) where the job has one pool, and there its
/// tenant would borrow more even with all of its own candidates gone: any set that
/// leaves another shared tenant below its quota there, with a job waiting for the pool
/// (its victim, say), is refused.
struct OwnerRule {
    borrowing_pool: Option<PoolId>,
}

impl OwnerRule {
    fn new(
        job: &Job,
        context: &PreemptionContext,
        candidates: &[(&RunningJob, PreemptionKind)],
    ) -> Self {
        let tenants = context.tenants;
        let need = job.total_milli();
        let borrowing_pool = match pools_for(job, context.snapshot) {
            &[pool] => Some(pool),
            _ => None,
        }
        .filter(|&pool| {
            let own = own_on_pool(context, candidates, pool);
            need > own
                && tenants.used(context.tenant, pool).saturating_sub(own) + need
                    > tenants.quota(context.tenant, pool)
        });
        OwnerRule { borrowing_pool }
    }

    /// Whether the rule bounds what may be taken of the victim's tenant: another shared
    /// tenant, on the pool where the preemptor borrows more.
    fn bounds(&self, context: &PreemptionContext, victim: &RunningJob) -> bool {
        self.borrowing_pool.is_some()
            && victim.tenant != context.tenant
            && context.tenants.mode(victim.tenant) == TenantMode::Shared
    }

    /// Whether it refuses every set holding the victim: its going alone leaves its tenant
    /// below its quota there, with the victim wanting the pool back.
    fn refuses_any_with(&self, context: &PreemptionContext, victim: &RunningJob) -> bool {
        let tenants = context.tenants;
        self.borrowing_pool.is_some_and(|pool| {
            self.bounds(context, victim)
                && wants(&victim.job, pool)
                && tenants
                    .used(victim.tenant, pool)
                    .saturating_sub(victim.held_on(pool))
                    < tenants.quota(victim.tenant, pool)
        })
    }

    /// The most milli-GPUs a set of `bounded` (jobs it bounds) frees that it allows: of
    /// each tenant on the pool where the preemptor borrows more, what that tenant
    /// borrows. A set taking more leaves it below its quota, its victim waiting to come
    /// back: where that leaves too little room no placement need be tried (a gang far
    /// beyond its tenant's quota, among other tenants' jobs within theirs, tries for
    /// victims at each change of capacity).
    fn room_in(&self, context: &PreemptionContext, bounded: &HeldByTenant) -> u64 {
        (bounded.0.iter())
            .map(
                |&((tenant, pool), held)| match self.borrowing_pool == Some(pool) {
                    true => held.sum.min(context.tenants.borrowed(tenant, pool)),
                    false => held.sum,
                },
            )
            .sum()
    }
}

/// Where the job, within its quota, would land with only `victims` gone; `None` also
/// where they could not all be taken ([`settle_reclaims`]), and without a placement tried
/// where they and the room free now (`free_now`, milli-GPUs on the job's pools) hold less
/// than the job asks.
fn fits_with_only(
    job: &Job,
    context: &PreemptionContext,
    free_now: u64,
    victims: &[(&RunningJob, PreemptionKind)],
) -> Option<Landing> {
    let room: u64 = free_now + victims.iter().map(|(v, _)| held_milli(v)).sum::<u64>();
    if room < job.total_milli() {
        return None;
    }
    let mut what_if = WhatIf::new(context);
    for (victim, _) in victims {
        what_if.take(victim);
    }
    let landing = what_if.fits(context)?;
    settle_reclaims(job, context, victims, &landing)?;
    Some(landing)
}

/// Victims that make room for the job.
struct Taken<'v> {
    victims: Vec<(&'v RunningJob, PreemptionKind)>,
    /// Where the job lands without them.
    landing: Landing,
}

/// What taking victims in order until the job fits came to.
enum Greedy<'v> {
    Fits(Taken<'v>),
    /// Every candidate it could take was taken, and the job fits nowhere; `passed_over`:
    /// some were passed over as reclaims past the budget.
    Fails {
        passed_over: bool,
    },
}

/// Takes `candidates` in order until the job fits, on one state they are removed from as
/// they are taken, checking only once they hold enough. A reclaim past the budget may
/// still be a priority preemption's; the victims' reasons are settled once the set is
/// final, and where the job lands known (the search counts the preemptor's own victims
/// wherever they are). One only a reclaim may take is passed over (where `budgeted`).
fn take_until_fit<'v>(
    job: &Job,
    context: &PreemptionContext,
    free_now: u64,
    candidates: &[(&'v RunningJob, PreemptionKind)],
    budgeted: bool,
) -> Greedy<'v> {
    let need = job.total_milli();
    let mut what_if = WhatIf::new(context);
    let mut chosen = Vec::new();
    let mut freed = free_now;
    let mut passed_over = false;
    let mut budget = ReclaimBudget::new(job, context, None);
    for &(victim, kind) in candidates {
        if budgeted
            && kind == PreemptionKind::QuotaReclaim
            && !budget.allows_reclaim(victim, false)
            && only_reclaim(job, context, victim)
        {
            passed_over = true;
            continue;
        }
        budget.remove(victim);
        freed += held_milli(victim);
        what_if.take(victim);
        chosen.push((victim, kind));
        if freed >= need
            && room_could_suffice(job, context, &what_if.state, &[])
            && let Some(landing) = what_if.fits(context)
        {
            return Greedy::Fits(Taken {
                victims: chosen,
                landing,
            });
        }
    }
    Greedy::Fails { passed_over }
}

/// Milli-GPUs some jobs hold, per (tenant, pool) where they hold any.
#[derive(Default)]
struct HeldByTenant(Vec<((usize, PoolId), Held)>);

/// What some jobs hold on one pool: in all, and the most and least one of them holds.
#[derive(Clone, Copy)]
struct Held {
    sum: u64,
    largest: u64,
    smallest: u64,
}

impl Default for Held {
    fn default() -> Self {
        Held {
            sum: 0,
            largest: 0,
            smallest: u64::MAX,
        }
    }
}

impl HeldByTenant {
    fn get(&self, tenant: usize, pool: PoolId) -> Held {
        (self.0.iter())
            .find(|(key, _)| *key == (tenant, pool))
            .map_or_else(Held::default, |&(_, held)| held)
    }

    /// Adds what the job holds, on every pool.
    fn add(&mut self, job: &RunningJob) {
        for &(pool, milli) in job.pools.iter().filter(|&&(_, milli)| milli > 0) {
            let key = (job.tenant, pool);
            let at = match self.0.iter().position(|(k, _)| *k == key) {
                Some(at) => at,
                None => {
                    self.0.push((key, Held::default()));
                    self.0.len() - 1
                }
            };
            let held = &mut self.0[at].1;
            held.sum += milli;
            held.largest = held.largest.max(milli);
            held.smallest = held.smallest.min(milli);
        }
    }
}

/// The most milli-GPUs a budgeted [`take_until_fit`] could take from any subset of the
/// candidates: all of those it never passes over (of each other shared tenant's on a pool
/// where the preemptor borrows more whoever goes, at most what that tenant borrows:
/// [`OwnerRule::room_in`]), and of each other tenant's that only a
/// reclaim may take, pool by pool, at most what that tenant borrows (its budget; where
/// the job [`reclaims_whole`], less than that plus its largest such candidate there, the
/// last victim taking it below its quota, and no more than that plus what the job asks),
/// and only those whose reclaim the preemptor's quota could cover, its own candidates
/// gone.
fn budgeted_room(
    job: &Job,
    context: &PreemptionContext,
    candidates: &[(&RunningJob, PreemptionKind)],
) -> u64 {
    let tenants = context.tenants;
    let preemptor = context.tenant;
    let need = job.total_milli();
    let mut own = HeldByTenant::default();
    for (victim, _) in candidates.iter().filter(|(v, _)| v.tenant == preemptor) {
        own.add(victim);
    }
    // What the budget could owe the preemptor on a pool, were all its own candidates gone.
    let owed_at_most = |pool: PoolId| {
        (tenants.quota(preemptor, pool) + own.get(preemptor, pool).sum)
            .saturating_sub(tenants.used(preemptor, pool))
    };
    let owners = OwnerRule::new(job, context, candidates);
    let mut room = 0;
    let mut owner_bounded = HeldByTenant::default();
    let mut reclaim_only = HeldByTenant::default();
    for &(victim, kind) in candidates {
        if kind != PreemptionKind::QuotaReclaim || !only_reclaim(job, context, victim) {
            match owners.bounds(context, victim) {
                true => owner_bounded.add(victim),
                false => room += held_milli(victim),
            }
            continue;
        }
        let covered = (victim.pools.iter())
            .any(|&(pool, milli)| milli > 0 && wants(job, pool) && need <= owed_at_most(pool));
        if covered {
            reclaim_only.add(victim);
        }
    }
    room + owners.room_in(context, &owner_bounded)
        + (reclaim_only.0.iter())
            .map(
                |&((tenant, pool), held)| match tenants.borrowed(tenant, pool) {
                    0 => 0,
                    borrowed if reclaims_whole(context) => {
                        (held.sum.min(borrowed - 1 + held.largest)).min(borrowed + need)
                    }
                    borrowed => held.sum.min(borrowed),
                },
            )
            .sum::<u64>()
}

/// The most landings a reclaim whose budget passed candidates over is tried on.
const MAX_LANDINGS: usize = 4;

/// For a job whose victims, taken in order within the reclaim's budget, freed no room it
/// fits in: the victims taken again among those on the nodes where the job lands when the
/// budget is left out, and, where none fit there, on the next such landing without those
/// nodes' candidates, up to [`MAX_LANDINGS`]. None is sought for a job of one pod where no
/// node's candidates could free enough within the budget.
fn within_landings<'v>(
    job: &Job,
    context: &PreemptionContext,
    free_now: u64,
    candidates: &[(&'v RunningJob, PreemptionKind)],
) -> Option<Taken<'v>> {
    let need = job.total_milli();
    // The nodes of each candidate's pods, read once: candidate `i`'s are
    // `nodes[starts[i]..starts[i + 1]]`.
    let mut nodes: Vec<NodeId> = Vec::new();
    let mut starts = Vec::with_capacity(candidates.len() + 1);
    starts.push(0);
    for (victim, _) in candidates {
        nodes.extend(context.snapshot.job_nodes(victim.job.id));
        starts.push(nodes.len());
    }
    // A job of one pod lands on one node: where the budget lets no node's candidates free
    // what the job lacks, no landing can do, and no placement need be tried.
    if job.pods.len() == 1 {
        let mut on_node: Vec<(NodeId, usize)> = (0..candidates.len())
            .flat_map(|i| nodes[starts[i]..starts[i + 1]].iter().map(move |&n| (n, i)))
            .collect();
        on_node.sort_unstable();
        on_node.dedup();
        let some_node_may = on_node.chunk_by(|a, b| a.0 == b.0).any(|same_node| {
            let there: Vec<_> = same_node.iter().map(|&(_, i)| candidates[i]).collect();
            free_now + budgeted_room(job, context, &there) >= need
        });
        if !some_node_may {
            return None;
        }
    }
    let mut elsewhere: Vec<usize> = (0..candidates.len()).collect();
    for _ in 0..MAX_LANDINGS {
        let unbudgeted: Vec<_> = elsewhere.iter().map(|&i| candidates[i]).collect();
        let Greedy::Fits(Taken { landing, .. }) =
            take_until_fit(job, context, free_now, &unbudgeted, false)
        else {
            return None;
        };
        let on_landing = |&i: &usize| {
            (nodes[starts[i]..starts[i + 1]].iter()).any(|n| landing.nodes.contains(n))
        };
        let there: Vec<_> = (0..candidates.len())
            .filter(on_landing)
            .map(|i| candidates[i])
            .collect();
        if free_now + budgeted_room(job, context, &there) >= need
            && let Greedy::Fits(found) = take_until_fit(job, context, free_now, &there, true)
        {
            return Some(found);
        }
        elsewhere.retain(|i| !on_landing(i));
    }
    None
}

/// Spares at once every victim that `spared` (given where the job lands) says it may not
/// need, if the job still fits without the others.
fn spare_where(
    job: &Job,
    context: &PreemptionContext,
    free_now: u64,
    chosen: &mut Vec<(&RunningJob, PreemptionKind)>,
    landing: &mut Landing,
    spared: impl Fn(&RunningJob, &Landing) -> bool,
) {
    if !chosen.iter().any(|(victim, _)| spared(victim, landing)) {
        return;
    }
    let fewer: Vec<_> = (chosen.iter())
        .filter(|(victim, _)| !spared(victim, landing))
        .cloned()
        .collect();
    if let Some(found) = fits_with_only(job, context, free_now, &fewer) {
        *chosen = fewer;
        *landing = found;
    }
}

/// Whether only a quota reclaim may take the victim for the job: it is of no lower
/// priority, or of another isolated tenant (never preempted for priority).
fn only_reclaim(job: &Job, context: &PreemptionContext, victim: &RunningJob) -> bool {
    victim.job.priority >= job.priority || of_another_isolated_tenant(context, victim)
}

/// What the victims counted leave of each tenant's account, to judge whether a victim may
/// be a quota reclaim. A reclaim takes only what the victim's tenant borrows once every
/// victim of that tenant counted is gone, whatever their reasons, so that it keeps its
/// quota; for a job blocked past the threshold ([`reclaims_whole`]), a victim while its
/// tenant still borrows once every other victim of it is gone, and that tenant left below
/// its quota by no more than the job asks: a job goes whole, so the last may take its
/// tenant below its quota, but none is taken from a tenant the others already brought
/// down to it, nor a large job for a tenant's sliver of borrowing (a gang of 16 within
/// its quota beside one GPU borrowed, for a job of 8). And only for a job its own
/// tenant's quota covers once that tenant's victims counted are gone (so the preemptor
/// borrows nothing, and the victims' tenant cannot reclaim from it, nor take it back for
/// priority while borrowing: the two cannot evict each other in turn). Where the job
/// lands is known, only the preemptor's own victims on its nodes count for its tenant: one
/// elsewhere would only go back to its queue and to the room it left.
struct ReclaimBudget<'a> {
    job: &'a Job,
    context: &'a PreemptionContext<'a>,
    landing: Option<&'a Landing>,
    /// Milli-GPUs of the victims counted.
    removed: HeldByTenant,
}

impl<'a> ReclaimBudget<'a> {
    fn new(job: &'a Job, context: &'a PreemptionContext<'a>, landing: Option<&'a Landing>) -> Self {
        Self {
            job,
            context,
            landing,
            removed: HeldByTenant::default(),
        }
    }

    /// Counts the victim gone, whatever its reason (one of the preemptor's own only where
    /// the job lands, once that is known).
    fn remove(&mut self, victim: &RunningJob) {
        let snapshot = self.context.snapshot;
        let elsewhere = |landing: &Landing| {
            !(snapshot.job_nodes(victim.job.id)).any(|n| landing.nodes.contains(&n))
        };
        if victim.tenant == self.context.tenant && self.landing.is_some_and(elsewhere) {
            return;
        }
        self.removed.add(victim);
    }

    /// Whether the victim may be a reclaim once it and the victims counted are gone
    /// (`counted`: it is one of them; if not, as the search takes it, judged on every
    /// victim of its tenant so far, so that a set it grows stays one whose every victim
    /// may be a reclaim, as [`settle_reclaims`] then judges each).
    fn allows_reclaim(&self, victim: &RunningJob, counted: bool) -> bool {
        let tenants = self.context.tenants;
        let preemptor = self.context.tenant;
        let need = self.job.total_milli();
        let whole = reclaims_whole(self.context);
        let borrowed = victim.pools.iter().all(|&(pool, milli)| {
            if milli == 0 {
                return true;
            }
            let so_far = self.removed.get(victim.tenant, pool);
            let borrowed = tenants.borrowed(victim.tenant, pool);
            // The milli-GPUs of the tenant's victims with this one, and of the one that
            // may go last: the victim judged, or the smallest while the set grows.
            let (all, last) = if counted {
                (so_far.sum, milli)
            } else {
                (so_far.sum + milli, so_far.smallest.min(milli))
            };
            if whole {
                // Every victim but the last taken while the tenant still borrows, and the
                // tenant left below its quota by no more than the job asks.
                all.saturating_sub(last) < borrowed && all <= borrowed + need
            } else {
                all <= borrowed
            }
        });
        let owed = |pool: PoolId| {
            (tenants.quota(preemptor, pool) + self.removed.get(preemptor, pool).sum)
                .saturating_sub(tenants.used(preemptor, pool))
        };
        let covered = victim
            .pools
            .iter()
            .any(|&(pool, milli)| milli > 0 && wants(self.job, pool) && need <= owed(pool));
        borrowed && covered
    }
}

/// The reasons of a final set of victims, the job landing at `landing`, judged on the
/// whole set (the search may have counted victims it then spared, and counts a reclaim
/// before the victims after it): `None` if a victim only a reclaim may take cannot be one;
/// a victim that may be a reclaim or a priority preemption is a reclaim if it may be.
fn settle_reclaims<'v>(
    job: &Job,
    context: &PreemptionContext,
    chosen: &[(&'v RunningJob, PreemptionKind)],
    landing: &Landing,
) -> Option<Vec<(&'v RunningJob, PreemptionKind)>> {
    let mut budget = ReclaimBudget::new(job, context, Some(landing));
    for (victim, _) in chosen {
        budget.remove(victim);
    }
    let mut settled = chosen.to_vec();
    for (victim, kind) in &mut settled {
        if *kind == PreemptionKind::QuotaReclaim && !budget.allows_reclaim(victim, true) {
            if only_reclaim(job, context, victim) {
                return None;
            }
            *kind = PreemptionKind::Priority;
        }
    }
    Some(settled)
}

impl PostFilter for Preemption {
    fn for_backfill_heads_only(&self) -> bool {
        self.backfill_only
    }

    fn post_filter(&self, job: &Job, context: &PreemptionContext) -> PostFilterResult {
        match self.propose(job, context) {
            PostFilterResult::RetryAt(retry_at) if context.backfill_since.is_some() => {
                match self.awaits_protected(job, context) {
                    Some(until) => PostFilterResult::AwaitsVictims { retry_at, until },
                    None => PostFilterResult::RetryAt(retry_at),
                }
            }
            proposed => proposed,
        }
    }
}

/// Whether the job may reclaim quota at all: it asks for GPUs, and its tenant is below its
/// quota on one of its pools.
fn may_reclaim(job: &Job, context: &PreemptionContext) -> bool {
    job.total_milli() > 0
        && context.running.values().len() > 0
        && pools_for(job, context.snapshot)
            .iter()
            .any(|&pool| context.tenants.under_quota(context.tenant, pool))
}

/// The milli-GPUs free on the job's pools, on healthy shared devices as well.
fn free_in_pools(job: &Job, context: &PreemptionContext) -> u64 {
    pools_for(job, context.snapshot)
        .iter()
        .map(|&p| free_milli(context.snapshot, p))
        .sum()
}

impl Preemption {
    /// The victims to evict for `job`, or when to try again (see `post_filter`).
    fn propose(&self, job: &Job, context: &PreemptionContext) -> PostFilterResult {
        // Cheap gates first: this runs for every waiting job whenever capacity frees.
        // Only GPUs are reclaimed, for a job asking for some.
        let may_reclaim = may_reclaim(job, context);
        let outranks = context
            .lowest_running_priority
            .is_some_and(|p| p < job.priority);
        if context.backfill_since.is_none() && (self.backfill_only || !may_reclaim && !outranks) {
            return PostFilterResult::None;
        }
        // Jobs alike find the same candidates (a backfill head's are its own).
        let found = if context.backfill_since.is_some() {
            Arc::new(self.candidates(job, context, may_reclaim))
        } else {
            let class = CandidateClass {
                plugin: self.name(),
                min_runtime_ms: self.min_runtime_ms,
                tenant: context.tenant,
                priority: job.priority,
                pools: job.pools.clone(),
                admitted: context.admitted,
                may_reclaim,
                reclaims_whole: reclaims_whole(context),
            };
            let known = (context.candidates)
                .get_or_find(class, || self.candidates(job, context, may_reclaim));
            // Every test that preempts checks that what was kept is what a scan finds now.
            debug_assert_eq!(
                *known,
                self.candidates(job, context, may_reclaim),
                "candidates kept past a change"
            );
            known
        };
        // The earliest end of a protection is when trying again may help, or the time the
        // job may reclaim jobs whole.
        let whole_at = (!self.backfill_only && may_reclaim && !reclaims_whole(context))
            .then_some(context.reclaims_whole_from);
        let nothing_now = match found.protected_until.into_iter().chain(whole_at).min() {
            Some(at) => PostFilterResult::RetryAt(at),
            None => PostFilterResult::None,
        };
        if found.victims.is_empty() {
            return nothing_now;
        }
        // Room already free counts too, on healthy shared devices as well: a victim may
        // only complete it (half a GPU going beside half a GPU free frees a whole one).
        let need = job.total_milli();
        let free_now = free_in_pools(job, context);
        // Nothing is tried where, whichever of them went, all of them free too little,
        if free_now + found.held_milli < need {
            return nothing_now;
        }
        // In the order they are taken in (see `candidates`).
        let candidates: Vec<(&RunningJob, PreemptionKind)> = (found.victims.iter())
            .filter_map(|(id, kind)| Some((context.running.get(id)?, *kind)))
            .collect();
        // or the owner rule refuses every set of them. A candidate it refuses every set
        // holding is none.
        if refused_whoever_goes(job, context, &candidates) {
            return nothing_now;
        }
        let owner_rule = OwnerRule::new(job, context, &candidates);
        let candidates: Vec<(&RunningJob, PreemptionKind)> = (candidates.into_iter())
            .filter(|(victim, _)| !owner_rule.refuses_any_with(context, victim))
            .collect();
        // A set the owner rule refuses for another shared tenant's job within its quota
        // (the cheapest victims, lowest priority first across tenants) is searched again
        // among the other candidates: a set of the preemptor's own jobs, say, may do.
        let searched = match self.search_set(job, context, free_now, &candidates) {
            Search::Refused(set)
                if set
                    .iter()
                    .any(|(v, _)| of_owner_within_quota(job, context, v)) =>
            {
                let sparing: Vec<(&RunningJob, PreemptionKind)> = (candidates.iter())
                    .filter(|(v, _)| !of_owner_within_quota(job, context, v))
                    .copied()
                    .collect();
                self.search_set(job, context, free_now, &sparing)
            }
            searched => searched,
        };
        match searched {
            Search::Set(settled) => PostFilterResult::Preempt {
                victims: settled.iter().map(|&(v, kind)| (v.job.id, kind)).collect(),
            },
            Search::NoneNeeded => PostFilterResult::None,
            Search::Refused(_) | Search::Nothing => nothing_now,
        }
    }

    /// The minimal set of `candidates` (in the order they are taken in) whose going lets
    /// the job fit, within the owner rule; `free_now`: the milli-GPUs free on its pools.
    fn search_set<'v>(
        &self,
        job: &Job,
        context: &PreemptionContext,
        free_now: u64,
        candidates: &[(&'v RunningJob, PreemptionKind)],
    ) -> Search<'v> {
        let need = job.total_milli();
        // Nothing is tried either where (none being left out below) no set of them frees
        // whole devices enough, node by node: the greedy search below would take them all
        // and find no placement.
        let none_left_out = candidates.len() <= MAX_CANDIDATES + 1;
        if none_left_out && !room_could_suffice(job, context, context.snapshot, candidates) {
            return Search::Nothing;
        }
        // Take victims in order until the job fits, on one state they are removed from as
        // they are taken, checking only once they hold enough: the cheapest candidates that
        // free what the job lacks, and as many again as MAX_CANDIDATES for a choice of
        // where.
        let mut freeable = 0;
        let enough = candidates
            .iter()
            .position(|(v, _)| {
                freeable += held_milli(v);
                free_now + freeable >= need
            })
            .map_or(candidates.len(), |last| last + 1);
        let kept = enough.saturating_add(MAX_CANDIDATES).min(candidates.len());
        let candidates = &candidates[..kept];
        if !none_left_out && !room_could_suffice(job, context, context.snapshot, candidates) {
            return Search::Nothing;
        }
        // Nor where the reclaims' budget leaves them too little: no set of them the search
        // below may take frees what the job lacks.
        if free_now + budgeted_room(job, context, candidates) < need {
            return Search::Nothing;
        }
        let greedy = match take_until_fit(job, context, free_now, candidates, true) {
            Greedy::Fits(found) => found,
            Greedy::Fails { passed_over: false } => return Search::Nothing,
            // The budget was spent on victims where the job does not land (the borrower's
            // cheapest jobs spread over nodes) and passed over others.
            Greedy::Fails { passed_over: true } => {
                match within_landings(job, context, free_now, candidates) {
                    Some(found) => found,
                    None => return Search::Nothing,
                }
            }
        };
        let Taken {
            victims: mut chosen,
            mut landing,
        } = greedy;
        if refused_whoever_goes(job, context, &chosen) {
            return Search::Refused(chosen);
        }
        // Every smaller set is a subset of this one: one whose subsets the owner rule lets
        // free too little room leaves nothing to make minimal, unless a victim is of an
        // owner within its quota (`propose` searches again without such victims where the
        // minimal set holds one, so that set is needed).
        if free_now + budgeted_room(job, context, &chosen) < need
            && !(chosen.iter()).any(|(victim, _)| of_owner_within_quota(job, context, victim))
        {
            return Search::Refused(chosen);
        }
        // Minimal: spare every victim the job fits without. Those with nothing on the pool
        // it lands in all at once (taken while it might have landed elsewhere: a job
        // accepting several GPU models), then those with nothing on the nodes it lands on
        // (cheaper ones taken first, beside what it cannot go near), then the others one
        // by one, latest taken first (a few checks at most: the greedy set is small when
        // it is found early).
        spare_where(
            job,
            context,
            free_now,
            &mut chosen,
            &mut landing,
            |victim, landing| !victim.pools.iter().any(|&(pool, _)| pool == landing.pool),
        );
        spare_where(
            job,
            context,
            free_now,
            &mut chosen,
            &mut landing,
            |victim, landing| {
                !(context.snapshot.job_nodes(victim.job.id)).any(|n| landing.nodes.contains(&n))
            },
        );
        let mut index = chosen.len();
        let mut checks = 0;
        while index > 0 && checks < MAX_MINIMIZED {
            checks += 1;
            index -= 1;
            let mut fewer = chosen.clone();
            fewer.remove(index);
            if let Some(found) = fits_with_only(job, context, free_now, &fewer) {
                chosen = fewer;
                landing = found;
            }
        }
        if chosen.is_empty() {
            // The job fits without anyone going: nothing to preempt.
            return Search::NoneNeeded;
        }
        if reclaimable_after(job, context, &chosen, landing.pool, !self.backfill_only) {
            return Search::Refused(chosen);
        }
        let Some(settled) = settle_reclaims(job, context, &chosen, &landing) else {
            return Search::Nothing;
        };
        Search::Set(settled)
    }
}

/// What the search for a set of victims among some candidates came to.
enum Search<'v> {
    /// Evict these.
    Set(Vec<(&'v RunningJob, PreemptionKind)>),
    /// The job fits without anyone going.
    NoneNeeded,
    /// The owner rule refuses the set found (or every set within it).
    Refused(Vec<(&'v RunningJob, PreemptionKind)>),
    Nothing,
}

/// Whether the victim is another shared tenant's that borrows nothing on a pool the job
/// may use where the victim holds GPUs: taking it leaves that tenant below its quota
/// there, which the owner rule refuses wherever the preemptor's tenant borrows.
fn of_owner_within_quota(job: &Job, context: &PreemptionContext, victim: &RunningJob) -> bool {
    let owner = victim.tenant;
    let tenants = context.tenants;
    owner != context.tenant
        && tenants.mode(owner) == TenantMode::Shared
        && (victim.pools.iter()).any(|&(pool, milli)| {
            milli > 0 && wants(job, pool) && tenants.borrowed(owner, pool) == 0
        })
}
