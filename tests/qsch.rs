//! The queue side (QSCH) through the public scheduler: tenants and their quotas (shared
//! borrowing, isolated holding, the owner's reclaim, no preemption into borrowing that
//! would be reclaimed), the queueing policies per tenant,
//! backfill, priority preemption and its minimal victim set, gangs evicted and requeued
//! whole, the requeue backoff after a failed binding, and the fair order across tenants.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use common::*;
use kant::cache::PodKey;
use kant::framework::{Bind, Code, Decision, JobPlan, Plugin, PreemptionKind, Profile, Scheduler};
use kant::framework::{SearchMode, Status};
use kant::model::{
    ClusterSpec, ClusterSpecBuilder, GpuRequest, GroupId, Job, JobId, LeafPath, LinkProfile,
    NodeId, NodeRow, PoolId, TenantId, Tier, TopologyNeed,
};
use kant::queue::{QueueingPolicy, TenantConfig, TenantMode, Tenants};
use proptest::prelude::*;

const SECOND: u64 = 1_000;
const MINUTE: u64 = 60 * SECOND;
/// The embedded configuration's queue settings.
const MIN_RUNTIME: u64 = 10 * MINUTE;
const BACKFILL_THRESHOLD: u64 = 30 * MINUTE;
const BACKOFF: u64 = 10 * SECOND;
const BACKOFF_MAX: u64 = 10 * MINUTE;
/// The test clusters have one GPU model, H100: pool 0.
const H100: PoolId = PoolId(0);
/// Milli-GPUs of `n` whole GPUs.
const fn gpus(n: u64) -> u64 {
    n * 1_000
}

fn tenant(name: &str, mode: TenantMode, h100: i64) -> TenantConfig {
    TenantConfig {
        name: name.to_owned(),
        mode,
        weight: 1.0,
        quota: BTreeMap::from([("H100".to_owned(), h100)]),
    }
}

/// A scheduler over `spec` with `configs` as tenants 1, 2, ... (0 is `default`).
fn with_tenants(
    profile: Profile,
    spec: Arc<ClusterSpec>,
    configs: &[TenantConfig],
    binder: Box<dyn Bind>,
) -> Scheduler {
    let tenants = Tenants::resolve(configs, &spec).expect("valid tenants");
    assert_eq!(tenants.len(), configs.len() + 1);
    Scheduler::with_tenants(profile, binder, spec, tenants)
}

/// Tenants a (1) and b (2), shared, 8 H100 each, on two nodes of 8 GPUs.
fn shared_pair(profile: Profile) -> Scheduler {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Shared, 8),
        tenant("b", TenantMode::Shared, 8),
    ];
    with_tenants(profile, spec, &configs, binds())
}

fn binds() -> Box<dyn Bind> {
    Box::new(TestBinder { refuse: false })
}

/// A job of `pods` pods of `gpus` whole H100 each, in tenant `tenant`.
fn tjob(id: u32, tenant: u16, pods: usize, gpus: u32, priority: i32, submit_s: u64) -> Job {
    Job {
        tenant: TenantId(tenant),
        ..job(id, pods, whole(gpus), priority, submit_s)
    }
}

/// Preemptions as (victims sorted, preemptor, kind).
type Preemptions = Vec<(Vec<JobId>, JobId, PreemptionKind)>;

fn preemptions(decisions: &[Decision]) -> Preemptions {
    decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Preempted { victims, by, kind } => {
                let mut victims = victims.clone();
                victims.sort();
                Some((victims, *by, *kind))
            }
            _ => None,
        })
        .collect()
}

fn requeues(decisions: &[Decision]) -> Vec<(JobId, u64)> {
    decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Requeued { job, retry_at, .. } => Some((*job, *retry_at)),
            _ => None,
        })
        .collect()
}

fn ids(ids: &[u32]) -> Vec<JobId> {
    ids.iter().map(|&i| JobId(i)).collect()
}

/// The nodes holding the job's pods, sorted, one entry per pod.
fn nodes_of(s: &Scheduler, job: u32) -> Vec<NodeId> {
    let mut nodes: Vec<NodeId> = s
        .state()
        .placements()
        .filter(|(k, _)| k.job == JobId(job))
        .map(|(_, p)| p.placement.node)
        .collect();
    nodes.sort();
    nodes
}

fn is_running(s: &Scheduler, job: u32) -> bool {
    s.running().contains_key(&JobId(job))
}

/// The tenants' accounting agrees with the pods actually placed, every running job is
/// placed whole (and nothing else is), and no isolated tenant is past its quota.
fn check_accounting(s: &Scheduler) {
    let spec = s.state().spec().clone();
    let tenants = s.tenants();
    let mut used: HashMap<(usize, PoolId), u64> = HashMap::new();
    let mut pods: HashMap<JobId, usize> = HashMap::new();
    for (key, placed) in s.state().placements() {
        let running = s
            .running()
            .get(&key.job)
            .unwrap_or_else(|| panic!("pod {key:?} placed for a job not running"));
        let pool = spec.node(placed.placement.node).pool;
        *used.entry((running.tenant, pool)).or_default() += placed.placement.gpus.total_milli();
        *pods.entry(key.job).or_default() += 1;
    }
    for (id, running) in s.running() {
        assert_eq!(
            pods.get(id).copied().unwrap_or(0),
            running.job.pods.len(),
            "job {id:?} partly placed"
        );
        assert_eq!(running.tenant, running.job.tenant.index(), "job {id:?}");
    }
    for t in 0..tenants.len() {
        for p in 0..spec.pools.len() {
            let pool = PoolId(p as u16);
            let placed = used.get(&(t, pool)).copied().unwrap_or(0);
            assert_eq!(
                tenants.used(t, pool),
                placed,
                "tenant {} on pool {p}: accounted use differs from the placed pods",
                tenants.name(t)
            );
            if tenants.mode(t) == TenantMode::Isolated {
                assert!(
                    placed <= tenants.quota(t, pool),
                    "isolated tenant {} uses {placed} milli-GPUs of pool {p}, quota {}",
                    tenants.name(t),
                    tenants.quota(t, pool)
                );
            }
        }
    }
}

// 1. An isolated tenant never exceeds its quota ------------------------------------------

/// One job of a random workload: (tenant, pods, GPUs per pod, priority, seconds before it
/// arrives, whether a running job finishes after it (0)).
type Arrival = (usize, usize, u32, i32, u64, u8);

fn arrivals(priorities: i32) -> impl Strategy<Value = Vec<Arrival>> {
    proptest::collection::vec(
        (
            0usize..4,
            1usize..4,
            1u32..=8,
            0..priorities,
            0u64..900,
            0u8..3,
        ),
        1..40,
    )
}

fn policies() -> impl Strategy<Value = QueueingPolicy> {
    prop_oneof![
        Just(QueueingPolicy::StrictFifo),
        Just(QueueingPolicy::BestEffortFifo),
        Just(QueueingPolicy::Backfill),
    ]
}

/// What every round must leave true: the accounting (see [`check_accounting`]), and every
/// preemption names victims that are no longer running, unless placed again after it.
fn check_round(s: &Scheduler, decisions: &[Decision]) {
    check_accounting(s);
    for (at, decision) in decisions.iter().enumerate() {
        let Decision::Preempted { victims, by, .. } = decision else {
            continue;
        };
        assert!(
            !victims.is_empty(),
            "{by:?} preempted no one: {decisions:?}"
        );
        for victim in victims {
            let placed_again = placed_jobs(&decisions[at..]).contains(victim);
            assert!(
                placed_again || !s.running().contains_key(victim),
                "{victim:?} still runs"
            );
        }
    }
}

/// The embedded default profile with another queueing policy, with or without its
/// `preemption` plugin.
fn default_profile(policy: QueueingPolicy, preemption: bool) -> Profile {
    let mut profile = profile_config("default", Some(policy), None);
    with_preemption(&mut profile, preemption);
    build(&profile)
}

/// Puts the `preemption` plugin after `gang` in place of the default profile's
/// `backfill-preemption`, or leaves both out.
fn with_preemption(profile: &mut kant::config::ProfileConfig, preemption: bool) {
    (profile.plugins).retain(|p| !matches!(p.name(), "preemption" | "backfill-preemption"));
    if preemption {
        let at = profile
            .plugins
            .iter()
            .position(|p| p.name() == "gang")
            .map_or(0, |i| i + 1);
        profile
            .plugins
            .insert(at, kant::config::PluginConfig::Name("preemption".into()));
    }
}

/// The embedded profile `name` with preemption, another queueing policy or search (these
/// tests are about preemption of every kind: the embedded `default` has backfill
/// preemption alone).
fn profile(name: &str, queueing: Option<QueueingPolicy>, search: Option<SearchMode>) -> Profile {
    let mut profile = profile_config(name, queueing, search);
    with_preemption(&mut profile, true);
    build(&profile)
}

/// The GPU models of a random workload's cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Models {
    /// 4 nodes of 8 H100.
    H100Only,
    /// 2 nodes of 8 H100 and 2 of 8 A100; every tenant's quota is the same on both, and
    /// jobs name H100, A100 or either in turn.
    H100AndA100,
}

/// 2 nodes of 8 H100 (pool 0) and 2 of 8 A100 (pool 1), each model in a leaf of its own.
fn two_model_cluster() -> Arc<ClusterSpec> {
    let mut builder = ClusterSpecBuilder::new();
    for (i, model) in ["H100", "H100", "A100", "A100"].into_iter().enumerate() {
        let row = NodeRow {
            name: format!("node-{i}"),
            gpu_model: Some(model.into()),
            gpus: 8,
            cpu_milli: Some(128_000),
            memory_bytes: Some(1 << 40),
            leaf: Some(LeafPath {
                superspine: "ss".into(),
                spine: "spine".into(),
                leaf: format!("leaf-{model}"),
            }),
            ..Default::default()
        };
        builder
            .add(row, LinkProfile::NvlinkAll)
            .expect("valid node");
    }
    Arc::new(builder.build())
}

/// Runs a random workload with the configured tenants as (isolated, quota per GPU
/// model), checking every round.
fn run_workload(
    models: Models,
    configured: &[(bool, i64)],
    arrivals: &[Arrival],
    policy: QueueingPolicy,
    preemption: bool,
) {
    let configs: Vec<TenantConfig> = configured
        .iter()
        .enumerate()
        .map(|(i, &(isolated, quota))| {
            let mode = if isolated {
                TenantMode::Isolated
            } else {
                TenantMode::Shared
            };
            let mut config = tenant(&format!("t{}", i + 1), mode, quota);
            if models == Models::H100AndA100 {
                config.quota.insert("A100".to_owned(), quota);
            }
            config
        })
        .collect();
    let spec = match models {
        Models::H100Only => cluster(4, 8, 2, LinkProfile::NvlinkAll),
        Models::H100AndA100 => two_model_cluster(),
    };
    let profile = default_profile(policy, preemption);
    assert_eq!(profile.post_filters.len(), usize::from(preemption));
    let mut s = with_tenants(profile, spec, &configs, binds());
    let mut now = 0u64;
    for (i, &(tenant, pods, gpus, priority, wait_s, finish)) in arrivals.iter().enumerate() {
        now += wait_s * SECOND;
        let tenant = (tenant % (configs.len() + 1)) as u16;
        let mut job = tjob(i as u32, tenant, pods, gpus, priority, now / SECOND);
        if models == Models::H100AndA100 {
            job.pools = match i % 3 {
                0 => vec![H100],
                1 => vec![PoolId(1)],
                _ => Vec::new(),
            };
        }
        s.submit(job);
        let decisions = s.schedule(now);
        check_round(&s, &decisions);
        if finish == 0 {
            let first = s.running().keys().min().copied();
            if let Some(done) = first {
                s.finish(done);
                check_accounting(&s);
                let decisions = s.schedule(now);
                check_round(&s, &decisions);
            }
        }
        // A time the scheduler asked to be woken at, if it comes before the next job.
        let wake = s.next_retry_ms(now);
        if let Some(at) = wake.filter(|&t| t > now && t < now + 600 * SECOND) {
            now = at;
            let decisions = s.schedule(now);
            check_round(&s, &decisions);
        }
    }
}

fn models() -> impl Strategy<Value = Models> {
    prop_oneof![Just(Models::H100Only), Just(Models::H100AndA100)]
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(proptest_cases(64))
    })]

    /// Static admission, borrowing and the queueing policies (the default profile
    /// without its preemption plugin).
    #[test]
    fn isolated_tenants_never_exceed_their_quota_and_use_is_accounted_exactly(
        models in models(),
        configured in proptest::collection::vec((any::<bool>(), 0i64..=20), 1..4),
        arrivals in arrivals(3),
        policy in policies(),
    ) {
        run_workload(models, &configured, &arrivals, policy, false);
    }

    /// The same with preemption (priority, quota reclaim, backfill).
    #[test]
    fn isolated_tenants_never_exceed_their_quota_with_preemption(
        models in models(),
        configured in proptest::collection::vec((any::<bool>(), 0i64..=20), 1..4),
        arrivals in arrivals(3),
        policy in policies(),
    ) {
        run_workload(models, &configured, &arrivals, policy, true);
    }
}

/// A deterministic case of the property: an isolated tenant at its quota submits a job of
/// higher priority. It may make room by evicting its own lower-priority job, but evicting
/// another tenant's job would put it past its quota.
#[test]
fn isolated_tenant_at_quota_does_not_preempt_its_way_past_it() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("iso", TenantMode::Isolated, 8),
        tenant("shared", TenantMode::Shared, 0),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 8, 0, 0)); // iso fills its quota
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(tjob(1, 2, 1, 8, 0, 60)); // shared takes the rest, a minute later
    assert_eq!(placed_jobs(&s.schedule(MINUTE)), ids(&[1]));
    // Iso, higher priority, past its quota. Job 1 would lose the least GPU-time, but
    // evicting it does not give iso any quota.
    s.submit(tjob(2, 1, 1, 8, 5, 120));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    check_accounting(&s);
    assert!(is_running(&s, 1), "{decisions:?}");
}

/// Isolated quotas adding up past the pool (8 and 16 of 16 GPUs): `b`, within its quota,
/// has a job of higher priority than `a`'s and of `b`'s own running one, and no room. It
/// waits: evicting `a`'s job, within `a`'s quota too, would take from an isolated tenant
/// what is its alone.
#[test]
fn an_isolated_tenants_job_is_not_evicted_for_another_isolated_tenant() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Isolated, 8),
        tenant("b", TenantMode::Isolated, 16),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 8, 0, 0));
    s.submit(tjob(1, 2, 1, 8, 9, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0, 1]));
    s.submit(tjob(2, 2, 1, 8, 5, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert!(preemptions(&decisions).is_empty(), "{decisions:?}");
    assert!(is_running(&s, 0), "{decisions:?}");
    check_accounting(&s);
    // Its own job of lower priority is still its to evict.
    s.submit(tjob(3, 2, 1, 8, 10, 120));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME + SECOND);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[1]), JobId(3), PreemptionKind::Priority)],
        "{decisions:?}"
    );
}

/// Isolated tenants `a` (1) and `b` (2) on 16 GPUs: `b`, with a quota of 16, runs two jobs
/// of 8 (0 and 1); then the quotas become `a`'s and `b`'s as given, `b` now past its own.
fn b_past_its_quota(a: i64, b: i64) -> Scheduler {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let before = [
        tenant("a", TenantMode::Isolated, 0),
        tenant("b", TenantMode::Isolated, 16),
    ];
    let mut s = with_tenants(
        profile("default", None, None),
        spec.clone(),
        &before,
        binds(),
    );
    s.submit(tjob(0, 2, 1, 8, 0, 0));
    s.submit(tjob(1, 2, 1, 8, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0, 1]));
    let after = [
        tenant("a", TenantMode::Isolated, a),
        tenant("b", TenantMode::Isolated, b),
    ];
    s.set_tenants(Tenants::resolve(&after, &spec).unwrap());
    s
}

/// What an isolated tenant holds past its quota (here its quota was lowered while its jobs
/// ran) its owner reclaims: `a`, within its quota, takes back `b`'s surplus, and only
/// that, as a reclaim.
#[test]
fn an_isolated_tenant_reclaims_what_another_holds_past_its_quota() {
    let mut s = b_past_its_quota(8, 8);
    // Of equal priority: a reclaim, not a priority preemption.
    s.submit(tjob(2, 1, 1, 8, 0, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    let taken = preemptions(&decisions);
    assert_eq!(taken.len(), 1, "{decisions:?}");
    assert_eq!(
        (taken[0].1, taken[0].2),
        (JobId(2), PreemptionKind::QuotaReclaim)
    );
    check_accounting(&s);
}

/// Only the surplus: `a` (quota 16, past the pool with `b`'s 8: misconfigured) has a job
/// of higher priority that needs both of `b`'s. One is `b`'s surplus, the other within its
/// quota: nothing is preempted.
#[test]
fn an_isolated_tenant_reclaims_no_more_than_another_holds_past_its_quota() {
    let mut s = b_past_its_quota(16, 8);
    s.submit(tjob(2, 1, 2, 8, 9, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert!(preemptions(&decisions).is_empty(), "{decisions:?}");
    assert!(is_running(&s, 0) && is_running(&s, 1));
}

// 2. Shared borrowing and the owner's reclaim --------------------------------------------

/// Tenants A (1) and B (2), shared, 8 H100 each, on 16 GPUs. B runs job 10 from t=0 (its
/// own quota) and job 11 from t=60s (borrowing A's idle quota); A then submits job 20.
fn borrowed_cluster() -> Scheduler {
    let mut s = shared_pair(profile("default", None, None));
    s.submit(tjob(10, 2, 1, 8, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[10]));
    s.submit(tjob(11, 2, 1, 8, 0, 60));
    assert_eq!(
        placed_jobs(&s.schedule(MINUTE)),
        ids(&[11]),
        "B borrows A's idle quota"
    );
    assert_eq!(s.tenants().used(2, H100), gpus(16));
    assert_eq!(s.tenants().borrowed(2, H100), gpus(8));
    assert_eq!(s.state().total().free_gpus, 0);
    s.submit(tjob(20, 1, 1, 8, 0, 120));
    s
}

/// Reclaim takes back what the owner is owed, no more: a job of tenant A (quota 8) that
/// needs 16 GPUs may reclaim 8 of them from a borrower, but the other 8 it would borrow
/// itself, so it may not take them from jobs of higher priority.
#[test]
fn a_reclaim_takes_no_more_than_the_owner_is_owed() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Shared, 8),
        tenant("b", TenantMode::Shared, 0),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 2, 1, 8, 10, 0));
    s.submit(tjob(1, 2, 1, 8, 10, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0, 1]));
    s.submit(tjob(2, 1, 2, 8, 0, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert!(preemptions(&decisions).is_empty(), "{decisions:?}");
    assert!(is_running(&s, 0) && is_running(&s, 1));
    // Of lower priority, the second victim is a priority preemption's to take.
    s.submit(tjob(3, 1, 2, 8, 20, 120));
    let decisions = s.schedule(2 * MINUTE + MIN_RUNTIME);
    assert_eq!(placed_jobs(&decisions), ids(&[3]));
    check_accounting(&s);
}

/// A reclaim takes back borrowed GPUs, nothing else: a job holding no GPUs borrows none
/// and is no reclaim's victim, and a job asking for no GPUs reclaims none. Neither may
/// then evict a job of higher priority.
#[test]
fn only_gpus_are_reclaimed_and_only_for_jobs_asking_for_gpus() {
    let one_node = || {
        let configs = [
            tenant("a", TenantMode::Shared, 8),
            tenant("b", TenantMode::Shared, 0),
        ];
        let spec = cluster(1, 8, 1, LinkProfile::NvlinkAll);
        with_tenants(profile("default", None, None), spec, &configs, binds())
    };
    let with_cpu = |mut job: Job, cpu_milli: u64| {
        job.pods[0].cpu_milli = cpu_milli;
        job
    };
    // B's job takes every CPU of the node and no GPU; A's GPU job needs a CPU.
    let mut s = one_node();
    s.submit(with_cpu(tjob(0, 2, 1, 0, 100, 0), 128_000));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    assert_eq!(s.tenants().borrowed(2, H100), 0);
    s.submit(with_cpu(tjob(1, 1, 1, 8, 0, 60), 1_000));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert!(preemptions(&decisions).is_empty(), "{decisions:?}");
    // B borrows 4 GPUs and every CPU; A's job asks for a CPU and no GPU.
    let mut s = one_node();
    s.submit(with_cpu(tjob(0, 2, 1, 4, 100, 0), 128_000));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    assert_eq!(s.tenants().borrowed(2, H100), gpus(4));
    s.submit(with_cpu(tjob(1, 1, 1, 0, 0, 60), 1_000));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert!(preemptions(&decisions).is_empty(), "{decisions:?}");
    check_accounting(&s);
}

#[test]
fn the_owner_reclaims_lent_quota_once_the_borrower_has_run_its_minimum() {
    let mut s = borrowed_cluster();
    // 11 minutes: both of B's jobs are past the minimum runtime (job 11 exactly).
    let now = MINUTE + MIN_RUNTIME;
    let decisions = s.schedule(now);
    // The victim is B's most recent job (least GPU-time lost): one job, no more.
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[11]), JobId(20), PreemptionKind::QuotaReclaim)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[20]));
    assert!(is_running(&s, 10), "B's job within its own quota stays");
    assert!(!is_running(&s, 11));
    assert!(nodes_of(&s, 11).is_empty());
    assert_eq!(s.pending_of(2), 1, "B's evicted job is pending again");
    assert_eq!(s.pending_of(1), 0);
    assert_eq!(s.tenants().used(1, H100), gpus(8));
    assert_eq!(s.tenants().used(2, H100), gpus(8));
    assert_eq!(s.tenants().borrowed(2, H100), 0);
    check_accounting(&s);
    // B's evicted job waits: it cannot take the room back (no cascade), not even later.
    for later in [now, now + MIN_RUNTIME, now + 2 * MIN_RUNTIME] {
        let decisions = s.schedule(later);
        assert!(decisions.is_empty(), "at {later}: {decisions:?}");
    }
    // Once B's own job ends, its evicted job returns within B's quota.
    s.finish(JobId(10));
    assert_eq!(placed_jobs(&s.schedule(now + 3 * MIN_RUNTIME)), ids(&[11]));
    check_accounting(&s);
}

/// Places 1-GPU jobs one at a time, job `i` of `jobs[i]` (tenant, priority) submitted at
/// second `i`, E-Binpack filling the first node before the second; returns the first node,
/// which the first eight share.
fn one_gpu_jobs_one_at_a_time(s: &mut Scheduler, jobs: &[(u16, i32)]) -> Vec<NodeId> {
    for (id, &(tenant, priority)) in (0..).zip(jobs) {
        s.submit(tjob(id, tenant, 1, 1, priority, u64::from(id)));
        let placed = placed_jobs(&s.schedule(u64::from(id) * SECOND));
        assert_eq!(placed, ids(&[id]));
    }
    let first = nodes_of(s, 0);
    assert!((0..8).all(|id| nodes_of(s, id) == first));
    first
}

/// Tenant a's job 20 of 8 GPUs tries once the borrowers' minimum runtime is past: the
/// round's decisions, and the preemptions job 20 made.
fn owner_of_eight_tries(s: &mut Scheduler) -> (Vec<Decision>, Preemptions) {
    s.submit(tjob(20, 1, 1, 8, 0, 100));
    let decisions = s.schedule(100 * SECOND + MIN_RUNTIME);
    let by_owner = (preemptions(&decisions).into_iter())
        .filter(|(_, by, _)| *by == JobId(20))
        .collect();
    (decisions, by_owner)
}

/// An owner reclaims where its job can land: the borrower's cheapest jobs, spread over
/// both nodes, spend the reclaim budget where no whole node frees, so the victims are
/// taken again among those on the nodes the job lands on.
#[test]
fn an_owner_reclaims_from_a_borrower_whose_cheapest_jobs_are_spread_over_nodes() {
    let mut s = shared_pair(profile("default", None, None));
    // The even priorities on the first node.
    let priorities = [0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15];
    let jobs: Vec<(u16, i32)> = priorities.iter().map(|&p| (2, p)).collect();
    let first = one_gpu_jobs_one_at_a_time(&mut s, &jobs);
    assert_eq!(s.tenants().borrowed(2, H100), gpus(8));
    let (decisions, reclaims) = owner_of_eight_tries(&mut s);
    assert_eq!(
        reclaims,
        [(
            ids(&[0, 1, 2, 3, 4, 5, 6, 7]),
            JobId(20),
            PreemptionKind::QuotaReclaim
        )],
        "{decisions:?}"
    );
    assert_eq!(nodes_of(&s, 20), first);
    check_accounting(&s);
}

/// Where the victims the budget leaves out land the job on a node whose borrowers could
/// not all be reclaimed (c borrows 2 of the 4 GPUs it holds there), the next landing is
/// tried: b's 8 jobs on the other node, all borrowed.
#[test]
fn an_owner_reclaims_on_the_next_landing_where_the_first_cannot_be_reclaimed() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Shared, 8),
        tenant("b", TenantMode::Shared, 4),
        tenant("c", TenantMode::Shared, 2),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    // The first node: c's 4 jobs (priorities 0 to 3) and b's 4 (4 to 7); the second,
    // b's 8 (8 to 15).
    let jobs: Vec<(u16, i32)> = (0..16).map(|p| (if p < 4 { 3 } else { 2 }, p)).collect();
    one_gpu_jobs_one_at_a_time(&mut s, &jobs);
    assert_eq!(s.tenants().borrowed(2, H100), gpus(8));
    assert_eq!(s.tenants().borrowed(3, H100), gpus(2));
    let (decisions, reclaims) = owner_of_eight_tries(&mut s);
    let second_node = ids(&[8, 9, 10, 11, 12, 13, 14, 15]);
    assert_eq!(
        reclaims,
        [(second_node, JobId(20), PreemptionKind::QuotaReclaim)],
        "{decisions:?}"
    );
    check_accounting(&s);
}

#[test]
fn an_owner_reclaims_on_its_pool_whatever_another_pool_of_its_job_allows() {
    // t owns 8 H100, o 8 A100; the default tenant borrows every GPU, low priority on H100,
    // high on A100. t's job may take either model: it reclaims its H100, though on A100,
    // where t owns nothing and o is below its quota, the rule against borrowing would
    // refuse it.
    let quota = |model: &str| BTreeMap::from([(model.to_owned(), 8)]);
    let configs = [
        TenantConfig {
            quota: quota("H100"),
            ..tenant("t", TenantMode::Shared, 0)
        },
        TenantConfig {
            quota: quota("A100"),
            ..tenant("o", TenantMode::Shared, 0)
        },
    ];
    let a100 = PoolId(1);
    for pools in [vec![H100], vec![H100, a100]] {
        let mut s = with_tenants(
            profile("default", None, None),
            two_model_cluster(),
            &configs,
            binds(),
        );
        s.submit(tjob(0, 0, 1, 8, 0, 0));
        s.submit(tjob(1, 0, 1, 8, 0, 0));
        for id in [2, 3] {
            s.submit(Job {
                pools: vec![a100],
                ..tjob(id, 0, 1, 8, 10, 0)
            });
        }
        assert_eq!(placed_jobs(&s.schedule(0)).len(), 4);
        s.submit(Job {
            pools: pools.clone(),
            ..tjob(10, 1, 1, 8, 5, 60)
        });
        let decisions = s.schedule(MINUTE + MIN_RUNTIME);
        assert_eq!(
            preemptions(&decisions).len(),
            1,
            "pools {pools:?}: {decisions:?}"
        );
        assert_eq!(preemptions(&decisions)[0].2, PreemptionKind::QuotaReclaim);
        assert_eq!(placed_jobs(&decisions), ids(&[10]), "pools {pools:?}");
        check_accounting(&s);
    }
}

/// Each victim is counted under its own reason: a job that takes back its tenant's lent
/// quota from a borrower and evicts a job of its own tenant of lower priority makes one
/// reclaim and one priority preemption (the tenant's own job borrowed nothing).
#[test]
fn each_victim_is_preempted_for_its_own_reason() {
    let configs = [
        tenant("a", TenantMode::Shared, 8),
        tenant("b", TenantMode::Shared, 0),
    ];
    let spec = cluster(1, 8, 1, LinkProfile::NvlinkAll);
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 4, 0, 0));
    s.submit(tjob(1, 2, 1, 4, 1, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0, 1]));
    assert_eq!(s.tenants().borrowed(2, H100), gpus(4));
    s.submit(tjob(2, 1, 1, 8, 1, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [
            (ids(&[1]), JobId(2), PreemptionKind::QuotaReclaim),
            (ids(&[0]), JobId(2), PreemptionKind::Priority),
        ],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[2]));
    check_accounting(&s);
}

/// The reclaim budget (what the victims' tenant borrows, what the preemptor's is owed) is
/// the final victims', not the greedy search's: tenant b borrows 8 GPUs in three jobs and
/// tenant a is owed 8. The search reclaims job 3 (the least work lost) and job 1, takes
/// job 5 past the budget for priority, then spares job 3, on another node: jobs 1 and 5 are
/// both reclaims.
#[test]
fn victims_spared_leave_their_reclaim_budget_to_those_kept() {
    let configs = [
        tenant("a", TenantMode::Shared, 8),
        tenant("b", TenantMode::Shared, 4),
        tenant("c", TenantMode::Shared, 12),
    ];
    let spec = cluster(3, 8, 3, LinkProfile::NvlinkAll);
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    for id in [1, 5] {
        s.submit(tjob(id, 2, 1, 4, 0, 0));
    }
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[1, 5]));
    for id in [2, 6] {
        s.submit(tjob(id, 3, 1, 4, 2, 60));
    }
    assert_eq!(placed_jobs(&s.schedule(MINUTE)), ids(&[2, 6]));
    s.submit(tjob(3, 2, 1, 4, 0, 120));
    s.submit(tjob(4, 3, 1, 4, 2, 120));
    assert_eq!(placed_jobs(&s.schedule(2 * MINUTE)).len(), 2);
    assert_eq!(nodes_of(&s, 1), nodes_of(&s, 5));
    assert_ne!(nodes_of(&s, 1), nodes_of(&s, 3));
    assert_eq!(s.tenants().borrowed(2, H100), gpus(8));
    s.submit(tjob(10, 1, 1, 8, 1, 180));
    let decisions = s.schedule(3 * MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[1, 5]), JobId(10), PreemptionKind::QuotaReclaim)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[10]));
    assert!(
        is_running(&s, 3),
        "not on the node the job lands on: spared"
    );
    check_accounting(&s);
}

#[test]
fn no_reclaim_before_the_borrowers_minimum_runtime() {
    let mut s = borrowed_cluster();
    // Both of B's jobs are protected until 10 min (job 10) and 11 min (job 11).
    let decisions = s.schedule(MIN_RUNTIME - 1);
    assert!(decisions.is_empty(), "{decisions:?}");
    assert!(is_running(&s, 10) && is_running(&s, 11));
    assert_eq!(s.pending_of(1), 1);
    check_accounting(&s);
}

/// The owner first blocked while the borrower was protected; once the protection ends,
/// the reclaim happens without anything else having to finish first.
#[test]
fn a_reclaim_blocked_by_the_minimum_runtime_happens_when_it_ends() {
    let mut s = borrowed_cluster();
    assert!(s.schedule(5 * MINUTE).is_empty());
    // B's jobs become preemptible at 10 min (job 10) and 11 min (job 11): the scheduler
    // should ask to run again by then.
    let at = s.next_retry_ms(5 * MINUTE);
    assert!(
        at.is_some_and(|t| t > 5 * MINUTE && t <= MINUTE + MIN_RUNTIME),
        "next_retry_ms: {at:?}"
    );
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    let reclaims = preemptions(&decisions);
    assert_eq!(reclaims.len(), 1, "{decisions:?}");
    let (victims, by, kind) = &reclaims[0];
    assert_eq!((*by, *kind), (JobId(20), PreemptionKind::QuotaReclaim));
    assert!(
        victims == &ids(&[10]) || victims == &ids(&[11]),
        "{victims:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[20]));
}

/// A (1) borrows from B (2), who is below its quota. A's preemptor, evicting B's job (the
/// first in the victim order), would borrow more, which B could reclaim as soon as the
/// minimum runtime ends: it evicts A's own borrowed job instead. B's preemptor, below
/// B's quota, evicts B's job, which then reclaims what A borrows.
#[test]
fn no_preemption_leaves_its_preemptor_borrowing_what_an_owner_could_reclaim() {
    let mut s = shared_pair(profile("default", None, None));
    s.submit(tjob(10, 1, 1, 8, 0, 0));
    s.submit(tjob(11, 2, 1, 4, 0, 0));
    s.submit(tjob(12, 1, 1, 4, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    assert_eq!(s.tenants().borrowed(1, H100), gpus(4));
    assert!(s.tenants().under_quota(2, H100));
    assert_eq!(s.state().total().free_gpus, 0);
    // Every running job is past its minimum runtime and of lower priority. Job 11 (B's)
    // comes first in the victim order; A's job 12 (borrowed) ties with it but for its id.
    s.submit(tjob(20, 1, 1, 4, 5, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[12]), JobId(20), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[20]));
    assert!(
        is_running(&s, 11),
        "B's job is not evicted for A to borrow more"
    );
    assert_eq!(s.tenants().borrowed(1, H100), gpus(4));
    // B's own preemptor stays within B's quota once job 11 goes: it evicts. Job 11, back
    // in its queue with B below its quota, reclaims A's borrowed job 20, which evicts A's
    // job 10 of lower priority; A's job 12 takes the rest of A's quota.
    s.submit(tjob(21, 2, 1, 4, 5, 120));
    let decisions = s.schedule(MINUTE + 4 * MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [
            (ids(&[11]), JobId(21), PreemptionKind::Priority),
            (ids(&[20]), JobId(11), PreemptionKind::QuotaReclaim),
            (ids(&[10]), JobId(20), PreemptionKind::Priority)
        ],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[21, 11, 20, 12]));
    assert_eq!(s.tenants().borrowed(1, H100), 0);
    assert_eq!(s.tenants().used(2, H100), gpus(8));
    check_accounting(&s);
}

/// Nor one that takes an owner's job, though its preemptor's tenant would borrow no more
/// than before: a (quota 0) runs a gang of two 3-GPU pods, one on each 4-GPU node, and a
/// 1-GPU job at priority 9; b (quota 4) runs 1 GPU beside the gang. a's job of a whole
/// node at priority 5 would evict the gang and b's job (a then borrows 5 GPUs, not 7),
/// leaving b below its quota with its job waiting, free to reclaim what a borrows: where
/// no room is left for b's job, the two evict each other in turn, one for priority, the
/// other to reclaim (a review's replay did so every millisecond, without a minimum
/// runtime).
#[test]
fn no_preemption_takes_an_owners_job_for_a_borrower_even_one_borrowing_no_more() {
    let spec = cluster(2, 4, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Shared, 0),
        tenant("b", TenantMode::Shared, 4),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 1, 2, 3, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(tjob(1, 2, 1, 1, 0, 1));
    s.submit(tjob(2, 1, 1, 1, 9, 1));
    assert_eq!(placed_jobs(&s.schedule(SECOND)).len(), 2);
    assert_ne!(nodes_of(&s, 1), nodes_of(&s, 2));
    s.submit(tjob(3, 1, 1, 4, 5, 60));
    for now in [MINUTE + MIN_RUNTIME, MINUTE + 3 * MIN_RUNTIME] {
        let decisions = s.schedule(now);
        assert!(
            preemptions(&decisions).is_empty(),
            "at {now}: {decisions:?}"
        );
    }
    assert!(is_running(&s, 1), "b's job is not evicted for a to borrow");
    check_accounting(&s);
}

/// Nor where its tenant's own victims, placed again as room frees, would have it borrow:
/// two leaves of three nodes; c (quota 24) runs a gang of three nodes at priority 1 and a
/// node at priority 0, borrowing 8; b (16) runs two nodes; a (16) asks two. Past the
/// threshold, a reclaims c's gang whole. The gang, back in the queue, would evict c's
/// node and b's two, the other leaf, c then at its quota; but c's job, placed again on
/// the node the reclaim freed past a's need, would have c borrow 8 again, and b, below
/// its quota, would reclaim the gang whole past the threshold, and so on every half
/// hour. It waits.
#[test]
fn no_preemption_takes_an_owners_job_where_its_own_victims_coming_back_would_borrow() {
    let spec = cluster(6, 8, 3, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Shared, 16),
        tenant("b", TenantMode::Shared, 16),
        tenant("c", TenantMode::Shared, 24),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 3, 3, 8, 1, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(tjob(1, 3, 1, 8, 0, 1));
    assert_eq!(placed_jobs(&s.schedule(SECOND)), ids(&[1]));
    s.submit(tjob(2, 2, 2, 8, 0, 2));
    assert_eq!(placed_jobs(&s.schedule(2 * SECOND)), ids(&[2]));
    assert_eq!(s.tenants().borrowed(3, H100), gpus(8));
    s.submit(tjob(3, 1, 2, 8, 0, 6));
    let mut preempted = Vec::new();
    for step in 0..=12 {
        let now = 6 * SECOND + BACKFILL_THRESHOLD + step * MIN_RUNTIME;
        preempted.extend(preemptions(&s.schedule(now)));
    }
    assert_eq!(
        preempted,
        [(ids(&[0]), JobId(3), PreemptionKind::QuotaReclaim)]
    );
    assert!(is_running(&s, 1) && is_running(&s, 2));
    check_accounting(&s);
}

/// But own victims with no room left to come back into stop nothing: on three nodes of 8
/// GPUs, c (quota 0) borrows a node at priority 20 and b (quota 8) runs 8 GPUs at
/// priority 0 beside a's (quota 16) 8 at priority 0; a's 16 at priority 10 evicts its own
/// job and b's. No room is left for a's to come back: within its quota, a borrows nothing
/// b could take, and b reclaims c's node.
#[test]
fn own_victims_without_room_to_come_back_stop_no_preemption() {
    let mut s = three_shared([16, 8, 0], 3);
    s.submit(tjob(0, 3, 1, 8, 20, 0));
    s.submit(tjob(1, 1, 1, 8, 0, 0));
    s.submit(tjob(2, 2, 1, 8, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    s.submit(tjob(3, 1, 2, 8, 10, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [
            (ids(&[1, 2]), JobId(3), PreemptionKind::Priority),
            (ids(&[0]), JobId(2), PreemptionKind::QuotaReclaim)
        ],
        "{decisions:?}"
    );
    assert!(is_running(&s, 3) && is_running(&s, 2));
    check_accounting(&s);
}

/// A reclaim counts every victim of the borrower, whatever its reason: tenant a (quota 4)
/// runs 6 GPUs at priority 0 and 2 at priority 10; b (quota 8) asks for the node. Once
/// the first goes, for priority, a borrows nothing: the second, of b's priority 10, is no
/// reclaim's to take, and b waits, past the backfill threshold too. At priority 11, b
/// evicts both, for priority.
#[test]
fn a_reclaim_takes_nothing_that_the_borrowers_other_victims_leave_it_short_of() {
    let configs = [
        tenant("a", TenantMode::Shared, 4),
        tenant("b", TenantMode::Shared, 8),
    ];
    for (priority, evicted) in [(10, vec![]), (11, ids(&[0, 1]))] {
        let spec = cluster(1, 8, 1, LinkProfile::NvlinkAll);
        let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
        s.submit(tjob(0, 1, 1, 6, 0, 0));
        s.submit(tjob(1, 1, 1, 2, 10, 0));
        assert_eq!(placed_jobs(&s.schedule(0)).len(), 2);
        assert_eq!(s.tenants().borrowed(1, H100), gpus(4));
        s.submit(tjob(2, 2, 1, 8, priority, 60));
        let decisions = s.schedule(MINUTE + MIN_RUNTIME);
        let expected: Vec<_> = (!evicted.is_empty())
            .then(|| (evicted.clone(), JobId(2), PreemptionKind::Priority))
            .into_iter()
            .collect();
        assert_eq!(preemptions(&decisions), expected, "priority {priority}");
        // Blocked past the threshold, b may take a job whole, but none from a tenant its
        // other victims already bring down to its quota.
        if expected.is_empty() {
            let late = s.schedule(MINUTE + BACKFILL_THRESHOLD);
            assert!(preemptions(&late).is_empty(), "{late:?}");
        }
        check_accounting(&s);
    }
}

/// A reclaim gives the owner back its quota, for a job that quota covers, no more: tenant
/// a (quota 8) runs 6 GPUs, b (quota 0) borrows a node of 8 at a's priority. a's job of 8
/// would leave a borrowing 6 of b's: it waits, rather than evicting b's job, which would
/// then take its node back for priority once a's job went below a's quota again.
#[test]
fn a_reclaim_is_only_for_a_job_within_the_owners_quota() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Shared, 8),
        tenant("b", TenantMode::Shared, 0),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 6, 100, 0));
    s.submit(tjob(1, 2, 1, 8, 100, 0));
    s.submit(tjob(2, 1, 1, 2, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    assert_eq!(nodes_of(&s, 0), nodes_of(&s, 2));
    s.finish(JobId(2));
    assert!(s.schedule(SECOND).is_empty());
    assert_eq!(
        s.tenants().quota(1, H100) - s.tenants().used(1, H100),
        gpus(2)
    );
    s.submit(tjob(3, 1, 1, 8, 0, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert!(preemptions(&decisions).is_empty(), "{decisions:?}");
    assert!(is_running(&s, 1));
    // A job of the 2 GPUs a is owed needs no reclaim: they are free.
    s.submit(tjob(4, 1, 1, 2, 0, 120));
    assert_eq!(
        placed_jobs(&s.schedule(2 * MINUTE + MIN_RUNTIME)),
        ids(&[4])
    );
    check_accounting(&s);
}

/// An owner below its quota with nothing waiting for the pool reclaims nothing at once:
/// it stops no priority preemption into borrowing. Tenants a and c own 4 GPUs each of a
/// node that b (quota 0) fills at priority 0; a's job of 8 at priority 100 evicts b's
/// job, though it then borrows c's idle quota, unless c has a job waiting for it.
#[test]
fn an_owner_with_nothing_waiting_stops_no_preemption_into_its_idle_quota() {
    let configs = [
        tenant("a", TenantMode::Shared, 4),
        tenant("b", TenantMode::Shared, 0),
        tenant("c", TenantMode::Shared, 4),
    ];
    for c_waits in [false, true] {
        let spec = cluster(1, 8, 1, LinkProfile::NvlinkAll);
        let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
        s.submit(tjob(0, 2, 1, 8, 0, 0));
        assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
        if c_waits {
            s.submit(tjob(2, 3, 1, 8, 0, 30));
        }
        s.submit(tjob(1, 1, 1, 8, 100, 60));
        let decisions = s.schedule(MINUTE + MIN_RUNTIME);
        let expected: Vec<_> = (!c_waits)
            .then(|| (ids(&[0]), JobId(1), PreemptionKind::Priority))
            .into_iter()
            .collect();
        assert_eq!(preemptions(&decisions), expected, "c waits: {c_waits}");
        check_accounting(&s);
    }
}

/// Three nodes of 4 GPUs, one per job: tenant c (quota 4) runs jobs 1 and 2, borrowing
/// 4, and tenant x (quota 4) job 3; tenants p (quota 4) and b (quota 0) have nothing.
fn x_within_quota_beside_a_borrower(hold_victims: bool) -> Scheduler {
    let spec = cluster(3, 4, 3, LinkProfile::NvlinkAll);
    let configs = [
        tenant("p", TenantMode::Shared, 4),
        tenant("b", TenantMode::Shared, 0),
        tenant("x", TenantMode::Shared, 4),
        tenant("c", TenantMode::Shared, 4),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    if hold_victims {
        s.hold_victims_until_gone();
    }
    s.submit(tjob(1, 4, 1, 4, 0, 0));
    s.submit(tjob(2, 4, 1, 4, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 2);
    s.submit(tjob(3, 3, 1, 4, 0, 5));
    assert_eq!(placed_jobs(&s.schedule(5 * SECOND)), ids(&[3]));
    s
}

/// A victim evicted earlier in the round counts as waiting for its pool: tenant x, back
/// below its quota once J evicts its job, wants that room back, so K may not evict
/// another job to borrow beside it (x would reclaim it at once). x's evicted job, tried
/// again in the same instant, reclaims its quota from c, which borrows.
#[test]
fn a_job_evicted_in_the_round_stops_preemption_into_its_tenants_idle_quota() {
    let mut s = x_within_quota_beside_a_borrower(false);
    s.submit(tjob(10, 1, 1, 4, 5, 10)); // J
    s.submit(tjob(11, 2, 1, 4, 5, 10)); // K
    let decisions = s.schedule(10 * SECOND + MIN_RUNTIME);
    let (victims, by, kind) = preemptions(&decisions)[0].clone();
    assert_eq!(
        (victims, by, kind),
        (ids(&[3]), JobId(10), PreemptionKind::Priority)
    );
    assert!(
        (preemptions(&decisions).iter()).all(|(_, by, _)| *by != JobId(11)),
        "{decisions:?}"
    );
    assert!(!is_running(&s, 11));
    assert!(is_running(&s, 3), "x's job reclaimed its room");
    check_accounting(&s);
}

/// Where victims hold their devices until their pods are gone (`kant run`), a victim on
/// its way out counts as waiting for its pool, in the rounds after its eviction too: its
/// controller will bring it back. K may not evict c's job to borrow beside x's idle quota
/// while x's evicted job is still going.
#[test]
fn a_victim_still_going_stops_preemption_into_its_tenants_idle_quota() {
    let mut s = x_within_quota_beside_a_borrower(true);
    s.submit(tjob(10, 1, 1, 4, 5, 10));
    let decisions = s.schedule(10 * SECOND + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[3]), JobId(10), PreemptionKind::Priority)]
    );
    s.submit(tjob(11, 2, 1, 4, 5, 20));
    let decisions = s.schedule(20 * SECOND + MIN_RUNTIME);
    assert!(preemptions(&decisions).is_empty(), "{decisions:?}");
    check_accounting(&s);
}

/// A tenant's own victims free its quota for a reclaim only where its job lands: one
/// elsewhere would go back to free room at once. Tenant t (quota 8) runs 1 GPU on a node
/// of 4; d (quota 0) borrows the node of 8 at the priority of t's job of 8. Evicting t's
/// job of 1 would make t owed 8 on paper only: nothing is preempted.
#[test]
fn a_tenants_own_victim_elsewhere_does_not_make_room_in_its_quota_for_a_reclaim() {
    let mut builder = ClusterSpecBuilder::new();
    for (i, gpus) in [8, 4].into_iter().enumerate() {
        let row = NodeRow {
            name: format!("node-{i}"),
            gpu_model: Some("H100".into()),
            gpus,
            ..Default::default()
        };
        builder
            .add(row, LinkProfile::NvlinkAll)
            .expect("valid node");
    }
    let configs = [
        tenant("t", TenantMode::Shared, 8),
        tenant("d", TenantMode::Shared, 0),
    ];
    let spec = Arc::new(builder.build());
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 2, 1, 8, 10, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(tjob(1, 1, 1, 1, 0, 1));
    assert_eq!(placed_jobs(&s.schedule(SECOND)), ids(&[1]));
    s.submit(tjob(2, 1, 1, 8, 10, 10));
    let decisions = s.schedule(10 * SECOND + MIN_RUNTIME);
    assert!(preemptions(&decisions).is_empty(), "{decisions:?}");
    assert!(is_running(&s, 0) && is_running(&s, 1));
    check_accounting(&s);
}

/// A victim is a reclaim only if its tenant keeps its quota once every victim of it in the
/// set is gone: tenant x (quota 3) runs 4 GPUs in jobs of 2, 1 and 1; p's job evicts the
/// two jobs of 1, of lower priority. That leaves x at 2: both go for priority, neither as
/// a reclaim of the 1 GPU x borrowed.
#[test]
fn no_victim_is_a_reclaim_where_its_tenants_other_victims_leave_it_below_quota() {
    let spec = cluster(1, 6, 1, LinkProfile::NvlinkAll);
    let configs = [
        tenant("p", TenantMode::Shared, 4),
        tenant("x", TenantMode::Shared, 3),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 2, 9, 0));
    s.submit(tjob(3, 2, 1, 2, 1, 0));
    s.submit(tjob(1, 2, 1, 1, 1, 1));
    s.submit(tjob(2, 2, 1, 1, 1, 2));
    assert_eq!(placed_jobs(&s.schedule(2 * SECOND)).len(), 4);
    assert_eq!(s.tenants().borrowed(2, H100), gpus(1));
    s.submit(tjob(10, 1, 1, 2, 5, 10));
    let decisions = s.schedule(10 * SECOND + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[1, 2]), JobId(10), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    check_accounting(&s);
}

/// A victim goes back to its queue and is tried again in the same instant: job 0, which
/// accepts either GPU model, is evicted from an H100 node for job 9, and goes at once to
/// the A100 node left free.
#[test]
fn a_victim_is_placed_again_at_once_where_room_is_free() {
    let mut s = scheduler(profile("default", None, None), two_model_cluster());
    let a100 = PoolId(1);
    for id in [1, 2] {
        s.submit(Job {
            pools: vec![a100],
            ..job(id, 1, whole(8), 0, 0)
        });
    }
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 2);
    s.submit(Job {
        pools: vec![H100, a100],
        ..job(0, 1, whole(8), 0, 1)
    });
    s.submit(Job {
        pools: vec![H100],
        ..job(3, 1, whole(8), 5, 1)
    });
    assert_eq!(placed_jobs(&s.schedule(SECOND)).len(), 2);
    s.finish(JobId(1));
    assert!(s.schedule(2 * SECOND).is_empty());
    s.submit(Job {
        pools: vec![H100],
        ..job(9, 1, whole(8), 5, 60)
    });
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[0]), JobId(9), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[9, 0]));
    assert_eq!(s.state().spec().node(nodes_of(&s, 0)[0]).pool, a100);
    check_accounting(&s);
}

/// A job accepting either GPU model lands in one pool: it is admitted, and searched, only
/// on a pool where its tenant's quota covers it whole, never on the sum of two quotas.
#[test]
fn a_job_accepting_two_gpu_models_is_admitted_on_one_pool_at_a_time() {
    let mut iso = tenant("iso", TenantMode::Isolated, 8);
    iso.quota.insert("A100".to_owned(), 8);
    let mut s = with_tenants(
        profile("default", None, None),
        two_model_cluster(),
        &[iso],
        binds(),
    );
    let a100 = PoolId(1);
    // 4 of its 8 H100 in use: 6 GPUs on either model fit only its A100 quota (though
    // the 4 + 8 idle together would cover them), and then 4 more only its H100 quota.
    s.submit(tjob(0, 1, 1, 4, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    let either = |id: u32, gpus: u32| Job {
        pools: Vec::new(),
        ..tjob(id, 1, 1, gpus, 0, 1)
    };
    s.submit(either(1, 6));
    assert_eq!(placed_jobs(&s.schedule(SECOND)), ids(&[1]));
    s.submit(either(2, 4));
    assert_eq!(placed_jobs(&s.schedule(2 * SECOND)), ids(&[2]));
    assert_eq!(s.tenants().used(1, a100), gpus(6));
    assert_eq!(s.tenants().used(1, H100), gpus(8));
    check_accounting(&s);
}

// 3. An isolated tenant never lends ------------------------------------------------------

#[test]
fn an_isolated_tenants_idle_quota_is_not_lent() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("iso", TenantMode::Isolated, 8),
        tenant("shared", TenantMode::Shared, 8),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 2, 1, 8, 0, 0));
    s.submit(tjob(1, 2, 1, 8, 0, 1)); // would need the isolated tenant's idle quota
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    assert_eq!(
        s.state().total().free_gpus,
        8,
        "the isolated quota's room stays free"
    );
    // Neither the default tenant (shared, no quota) nor a small job of the shared tenant
    // gets it.
    s.submit(tjob(2, 0, 1, 8, 0, 60));
    assert!(s.schedule(MINUTE).is_empty());
    s.submit(tjob(3, 2, 1, 2, 0, 120));
    assert!(s.schedule(2 * MINUTE).is_empty());
    assert_eq!(s.state().total().free_gpus, 8);
    assert_eq!((s.pending_of(0), s.pending_of(2)), (1, 2));
    // The owner gets its quota at once.
    s.submit(tjob(4, 1, 1, 8, 0, 200));
    assert_eq!(placed_jobs(&s.schedule(3 * BACKFILL_THRESHOLD)), ids(&[4]));
    assert_eq!(s.tenants().used(1, H100), gpus(8));
    assert_eq!(s.tenants().used(2, H100), gpus(8));
    assert_eq!(s.tenants().used(0, H100), 0);
    check_accounting(&s);
}

/// The default tenant (no quota) has a 1-GPU job of high priority; static admission denies
/// it (the only free room is the isolated tenant's). Preemption must not serve as a way
/// around admission: evicting a lower-priority job that frees nothing it may use, then
/// placing it in the isolated room.
#[test]
fn preemption_does_not_bypass_static_quota_admission() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("iso", TenantMode::Isolated, 8),
        tenant("shared", TenantMode::Shared, 8),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 2, 1, 8, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(tjob(5, 0, 1, 1, 9, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    for (victims, ..) in preemptions(&decisions) {
        assert!(
            !victims.is_empty(),
            "a preemption without victims: {decisions:?}"
        );
    }
    // Evicting job 0 and placing job 5 would be fair; taking the isolated room is not.
    assert!(
        s.state().total().free_gpus >= 8,
        "placed in the isolated tenant's room: {decisions:?}"
    );
    check_accounting(&s);
}

/// The default tenant borrows the shared tenant's idle quota; the shared tenant then asks
/// for its own quota while only the isolated tenant's room is free. It must not get that
/// room (it may reclaim from the borrower instead): the isolated tenant's quota is held
/// for it alone, and an isolated tenant cannot reclaim.
#[test]
fn an_isolated_quota_stays_held_when_a_lender_wants_its_own_back() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("iso", TenantMode::Isolated, 8),
        tenant("shared", TenantMode::Shared, 8),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 0, 1, 8, 0, 0)); // default: borrows shared's idle quota
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(tjob(1, 2, 1, 8, 0, 60)); // shared: its own quota, but only iso's room is free
    let decisions = s.schedule(MINUTE);
    assert!(placed_jobs(&decisions).is_empty(), "{decisions:?}");
    s.submit(tjob(2, 1, 1, 8, 0, 120)); // iso, within its quota
    assert_eq!(placed_jobs(&s.schedule(2 * MINUTE)), ids(&[2]));
}

#[test]
fn a_shared_job_larger_than_what_isolated_quotas_leave_is_never_tried() {
    // Its own quota does not matter: a shared tenant is admitted only within the room the
    // isolated quotas leave, however large its quota (quotas may exceed the cluster).
    for quota in [0, 16] {
        let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
        let configs = [
            tenant("iso", TenantMode::Isolated, 8),
            tenant("shared", TenantMode::Shared, quota),
        ];
        // Strict FIFO: an unresolvable head must not block the queue behind it.
        for preemption in [false, true] {
            let mut config = profile_config("default", Some(QueueingPolicy::StrictFifo), None);
            with_preemption(&mut config, preemption);
            let mut s = with_tenants(build(&config), spec.clone(), &configs, binds());
            s.submit(tjob(0, 2, 2, 8, 0, 0)); // 16 GPUs: only 8 are not held by "iso"
            s.submit(tjob(1, 2, 1, 8, 0, 1));
            assert_eq!(placed_jobs(&s.schedule(0)), ids(&[1]), "quota {quota}");
            assert_eq!(s.pending_of(2), 1);
            assert_eq!(
                s.diagnose(JobId(0), 0).expect("pending").message(),
                "the job needs 16 GPUs: more than tenant shared can ever have (shared, it is \
                 granted at most what the isolated tenants' quotas leave: 8 H100)"
            );
        }
    }
}

/// An isolated tenant with no quota on a model is told so, model by model, rather than
/// that its quota is short.
#[test]
fn a_job_no_quota_can_admit_names_each_pools_ceiling() {
    let spec = models_cluster(&[("H100", 8), ("H100", 8), ("A100", 8), ("A100", 8)]);
    let configs = [tenant("iso", TenantMode::Isolated, 8)];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    let a100 = PoolId(1);
    s.submit(Job {
        pools: vec![a100],
        ..tjob(0, 1, 1, 4, 0, 0)
    });
    s.submit(Job {
        pools: vec![H100, a100],
        ..tjob(1, 1, 2, 8, 0, 0)
    });
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    let told = |job| s.diagnose(JobId(job), 0).expect("pending").message();
    assert_eq!(
        told(0),
        "the job needs 4 GPUs: more than tenant iso can ever have (isolated, its quota is 0 A100)"
    );
    assert_eq!(
        told(1),
        "the job needs 16 GPUs: more than tenant iso can ever have (isolated, its quota is 8 \
         H100, 0 A100)"
    );
}

#[test]
fn a_job_only_the_busy_pool_can_hold_waits_for_it_rather_than_being_given_up() {
    // An 8-GPU pod that names no model: the H100 node is busy, so only the A100 pool
    // admits it now, and its nodes of 4 GPUs could never hold it. It waits for the H100.
    for strict in [false, true] {
        let queueing = strict.then_some(QueueingPolicy::StrictFifo);
        let spec = models_cluster(&[("H100", 8), ("A100", 4), ("A100", 4)]);
        let mut s = scheduler(profile("default", queueing, None), spec);
        s.submit(Job {
            pools: vec![H100],
            ..job(0, 1, whole(8), 0, 0)
        });
        assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
        let mut anywhere = job(1, 1, whole(8), 0, 1);
        anywhere.pools.clear();
        s.submit(anywhere);
        assert!(placed_jobs(&s.schedule(SECOND)).is_empty());
        s.finish(JobId(0));
        assert_eq!(
            placed_jobs(&s.schedule(MINUTE)),
            ids(&[1]),
            "strict: {strict}"
        );
    }
    // Of higher priority, it makes room where it could go, as one naming that model does.
    for name_it in [true, false] {
        let spec = models_cluster(&[("H100", 8), ("A100", 4), ("A100", 4)]);
        let mut s = scheduler(profile("default", None, None), spec);
        s.submit(Job {
            pools: vec![H100],
            ..job(0, 1, whole(8), 0, 0)
        });
        assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
        let mut urgent = job(1, 1, whole(8), 100, 1);
        urgent.pools = if name_it { vec![H100] } else { Vec::new() };
        s.submit(urgent);
        let decisions = s.schedule(MIN_RUNTIME + MINUTE);
        assert_eq!(
            preemptions(&decisions),
            [(ids(&[0]), JobId(1), PreemptionKind::Priority)],
            "naming H100: {name_it}"
        );
        assert_eq!(placed_jobs(&decisions), ids(&[1]));
    }
}

// 4. Strict FIFO per tenant ---------------------------------------------------------------

#[test]
fn strict_fifo_blocks_a_tenants_queue_behind_its_head_but_not_other_tenants() {
    for (policy, expected, pending) in [
        (QueueingPolicy::StrictFifo, ids(&[0, 10]), 2),
        (QueueingPolicy::BestEffortFifo, ids(&[0, 10, 2]), 1),
    ] {
        let mut s = shared_pair(profile("native", Some(policy), None));
        s.submit(tjob(0, 1, 1, 8, 0, 0));
        s.submit(tjob(1, 1, 2, 8, 0, 1)); // 16 GPUs: blocked
        s.submit(tjob(2, 1, 1, 4, 0, 2)); // fits, behind the blocked head
        s.submit(tjob(10, 2, 1, 4, 0, 10)); // B's job, submitted after all of A's
        let decisions = s.schedule(0);
        assert_eq!(placed_jobs(&decisions), expected, "{policy:?}");
        assert_eq!(s.pending_of(1), pending, "{policy:?}");
        assert_eq!(s.pending_of(2), 0, "{policy:?}");
        // Once A's first job ends, strict FIFO places A's head first.
        s.finish(JobId(0));
        s.finish(JobId(10));
        let next = placed_jobs(&s.schedule(MINUTE));
        match policy {
            QueueingPolicy::StrictFifo => assert_eq!(next, ids(&[1])),
            // Job 2 holds half a node: the 16-GPU head still waits.
            _ => assert!(next.is_empty(), "{next:?}"),
        }
        check_accounting(&s);
    }
}

#[test]
fn strict_fifo_blocks_behind_a_head_that_waits_for_quota() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [tenant("iso", TenantMode::Isolated, 8)];
    let native = profile("native", Some(QueueingPolicy::StrictFifo), None);
    let mut s = with_tenants(native, spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 4, 0, 0));
    s.submit(tjob(1, 1, 1, 8, 0, 1)); // room, but only 4 GPUs of quota left
    s.submit(tjob(2, 1, 1, 2, 0, 2)); // within the quota, behind the head
    s.submit(tjob(3, 0, 1, 4, 0, 3)); // another tenant is not blocked
    // The default tenant (index 0) is served first at equal shares.
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[3, 0]));
    assert_eq!(
        s.diagnose(JobId(1), 0).expect("pending").message(),
        "the job needs 8 GPUs: more than is free now of isolated tenant iso's quota"
    );
    s.finish(JobId(0));
    assert_eq!(placed_jobs(&s.schedule(MINUTE)), ids(&[1]));
}

#[test]
fn a_job_no_node_could_ever_hold_blocks_no_queue_though_it_came_while_its_pool_was_busy() {
    // One node of two is busy when a pod of 16 GPUs comes: it is not admitted (its pool
    // lacks the room), cannot make room (no preemption), and no node could ever hold it.
    for name in ["native", "default"] {
        let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
        let configs = [tenant("team", TenantMode::Shared, 16)];
        let mut strict = profile_config(name, Some(QueueingPolicy::StrictFifo), None);
        with_preemption(&mut strict, false);
        let mut s = with_tenants(build(&strict), spec, &configs, binds());
        s.submit(tjob(0, 1, 1, 8, 0, 0));
        assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]), "{name}");
        s.submit(tjob(1, 1, 1, 16, 0, 1));
        s.submit(tjob(2, 1, 1, 1, 0, 2));
        assert_eq!(placed_jobs(&s.schedule(MINUTE)), ids(&[2]), "{name}");
        let message = s.diagnose(JobId(1), MINUTE).expect("pending").message();
        assert!(message.contains("can ever hold"), "{name}: {message}");
    }
}

#[test]
fn a_pod_asking_more_cpu_than_any_node_allocates_blocks_no_queue_and_holds_no_room() {
    // Nodes of 128 CPUs; the pod asks 200. Under strict FIFO it would block its tenant's
    // queue for good; under backfill, past the threshold, hold a leaf group for good.
    for policy in [QueueingPolicy::StrictFifo, QueueingPolicy::Backfill] {
        let spec = cluster(2, 8, 1, LinkProfile::NvlinkAll);
        let mut s = scheduler(profile("default", Some(policy), None), spec);
        let mut too_big = job(0, 1, whole(1), 0, 0);
        too_big.pods[0].cpu_milli = 200_000;
        s.submit(too_big);
        assert!(placed_jobs(&s.schedule(0)).is_empty(), "{policy:?}");
        let later = BACKFILL_THRESHOLD + MINUTE;
        assert!(placed_jobs(&s.schedule(later)).is_empty(), "{policy:?}");
        assert!(s.reservations().is_empty(), "{policy:?}: room held");
        for id in 1..=16 {
            s.submit(job(id, 1, whole(1), 0, later / SECOND));
        }
        assert_eq!(placed_jobs(&s.schedule(later)).len(), 16, "{policy:?}");
        let message = s.diagnose(JobId(0), later).expect("pending").message();
        assert!(message.contains("cpu"), "{policy:?}: {message}");
    }
}

#[test]
fn a_gang_whose_cpu_no_set_of_nodes_holds_together_blocks_no_queue_and_holds_no_room() {
    // Two nodes of 128 CPUs and 8 GPUs. Each pod of 1 GPU and 100 CPUs fits a node, but a
    // node holds only one: three such pods never run at once, two do.
    for policy in [QueueingPolicy::StrictFifo, QueueingPolicy::Backfill] {
        let spec = cluster(2, 8, 1, LinkProfile::NvlinkAll);
        let mut s = scheduler(profile("default", Some(policy), None), spec);
        let cpu_bound =
            |id, pods, submit_s| asking_cpu(job(id, pods, whole(1), 0, submit_s), 100_000);
        s.submit(cpu_bound(0, 3, 0));
        assert!(placed_jobs(&s.schedule(0)).is_empty(), "{policy:?}");
        let later = BACKFILL_THRESHOLD + MINUTE;
        assert!(placed_jobs(&s.schedule(later)).is_empty(), "{policy:?}");
        assert!(s.reservations().is_empty(), "{policy:?}: room held");
        s.submit(cpu_bound(1, 2, later / SECOND));
        assert_eq!(placed_jobs(&s.schedule(later)), ids(&[1]), "{policy:?}");
        let message = s.diagnose(JobId(0), later).expect("pending").message();
        assert!(
            message.contains("hold at most 2 of its 3 pods of 1 GPUs at once"),
            "{policy:?}: {message}"
        );
    }
}

#[test]
fn a_gang_without_gpus_no_domain_of_its_required_tier_holds_blocks_no_queue() {
    // Two leaves of one node of 128 CPUs. Two pods without GPUs of 100 CPUs each never
    // share a node, so no one leaf holds them both: a gang of them that requires a leaf
    // can never run. The same gang requiring no tier spreads over both leaves.
    let spec = cluster(2, 8, 1, LinkProfile::NvlinkAll);
    let mut s = scheduler(
        profile("default", Some(QueueingPolicy::StrictFifo), None),
        spec,
    );
    let cpu_bound = |id, submit_s| asking_cpu(job(id, 2, GpuRequest::NONE, 0, submit_s), 100_000);
    s.submit(Job {
        topology: Some(TopologyNeed {
            tier: Tier::Leaf,
            required: true,
        }),
        ..cpu_bound(0, 0)
    });
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    s.submit(cpu_bound(1, 1));
    assert_eq!(placed_jobs(&s.schedule(SECOND)), ids(&[1]));
    let message = s.diagnose(JobId(0), SECOND).expect("pending").message();
    assert!(
        message.contains("no one domain of its required tier"),
        "{message}"
    );
}

#[test]
fn a_gang_is_judged_on_the_cpu_of_the_pools_its_quota_could_ever_admit_it_on() {
    // The isolated tenant holds 5 of the 8 A100 GPUs: the default tenant could never have
    // the 6 a gang of two pods of 3 GPUs asks there. On the H100 node, 64 CPUs hold only
    // one of its pods of 32.001 CPUs.
    let spec = models_cluster_with_cpu(&[("H100", 8), ("A100", 4), ("A100", 4)], Some(64_000));
    let configs = [TenantConfig {
        quota: BTreeMap::from([("A100".to_owned(), 5)]),
        ..tenant("iso", TenantMode::Isolated, 0)
    }];
    let strict = profile("default", Some(QueueingPolicy::StrictFifo), None);
    let mut s = with_tenants(strict, spec, &configs, binds());
    let mut gang = asking_cpu(job(0, 2, whole(3), 0, 0), 32_001);
    gang.pools = Vec::new();
    s.submit(gang);
    s.submit(job(1, 1, whole(1), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[1]), "behind job 0");
    let message = s.diagnose(JobId(0), 0).expect("pending").message();
    assert!(
        message.ends_with("(of the pools tenant default's quota could ever admit it on: H100)"),
        "{message}"
    );
}

// 5. Backfill preempts after the threshold and only then --------------------------------

#[test]
fn backfill_makes_room_for_the_head_after_the_threshold_and_only_then() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let backfill = profile("default", Some(QueueingPolicy::Backfill), None);
    let mut s = scheduler(backfill, spec);
    s.submit(job(0, 1, whole(8), 0, 0)); // a whole node
    s.submit(job(1, 1, whole(4), 0, 0)); // half of the other
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[1, 0])); // smaller first
    // The head: a whole node; it blocks at 60 s.
    s.submit(job(2, 1, whole(8), 0, 60));
    assert!(s.schedule(MINUTE).is_empty());
    // Backfilled after it blocked.
    s.submit(job(3, 1, whole(4), 0, 120));
    assert_eq!(placed_jobs(&s.schedule(2 * MINUTE)), ids(&[3]));
    s.finish(JobId(1));
    assert!(placed_jobs(&s.schedule(3 * MINUTE + 20 * SECOND)).is_empty()); // 4 free: not enough
    s.submit(job(4, 1, whole(4), 0, 300));
    assert_eq!(placed_jobs(&s.schedule(5 * MINUTE)), ids(&[4]));
    assert_eq!(
        nodes_of(&s, 3),
        nodes_of(&s, 4),
        "both backfilled on one node"
    );
    let deadline = MINUTE + BACKFILL_THRESHOLD;
    assert_eq!(s.next_retry_ms(5 * MINUTE), Some(deadline));
    // Before the threshold: nothing, though every backfilled job is past its minimum.
    for now in [deadline - MINUTE, deadline - 1] {
        let decisions = s.schedule(now);
        assert!(decisions.is_empty(), "at {now}: {decisions:?}");
    }
    let decisions = s.schedule(deadline);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[3, 4]), JobId(2), PreemptionKind::Backfill)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[2]));
    assert!(
        is_running(&s, 0),
        "placed before the head blocked: not a victim"
    );
    assert_eq!(s.pending(), 2, "the victims are pending again");
    assert!(nodes_of(&s, 3).is_empty() && nodes_of(&s, 4).is_empty());
    check_accounting(&s);
}

/// The default profile's backfill makes room for an overdue head that lacks it, though
/// smaller jobs keep taking each GPU that frees (a head short of room holds none): the
/// jobs that overtook it are evicted. It preempts for nothing else.
#[test]
fn the_default_profile_evicts_the_jobs_that_overtook_an_overdue_head() {
    let mut s = scheduler(backfill_only(), cluster(2, 8, 2, LinkProfile::NvlinkAll));
    s.submit(job(0, 1, whole(4), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    // The head needs both nodes whole; two jobs of 4 GPUs overtake it.
    s.submit(job(1, 2, whole(8), 0, 60));
    assert!(placed_jobs(&s.schedule(MINUTE)).is_empty());
    s.submit(job(2, 1, whole(4), 0, 120));
    s.submit(job(3, 1, whole(4), 0, 120));
    assert_eq!(placed_jobs(&s.schedule(2 * MINUTE)), ids(&[2, 3]));
    // The first job ends; another overtakes the head in the room it left.
    s.finish(JobId(0));
    s.submit(job(4, 1, whole(4), 0, 20 * 60));
    assert_eq!(placed_jobs(&s.schedule(20 * MINUTE)), ids(&[4]));
    // A job of higher priority finds no room, and evicts no one for it.
    s.submit(job(5, 1, whole(8), 9, 21 * 60));
    assert!(s.schedule(21 * MINUTE).is_empty());
    let overdue = MINUTE + BACKFILL_THRESHOLD;
    let decisions = s.schedule(overdue);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[2, 3, 4]), JobId(1), PreemptionKind::Backfill)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[1]));
    check_accounting(&s);
}

#[test]
fn backfill_never_evicts_a_job_placed_before_the_head_blocked() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let backfill = profile("default", Some(QueueingPolicy::Backfill), None);
    let mut s = scheduler(backfill, spec);
    s.submit(job(0, 1, whole(8), 0, 0));
    s.submit(job(1, 1, whole(4), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[1, 0]));
    s.submit(job(2, 1, whole(8), 0, 60)); // the head
    assert!(s.schedule(MINUTE).is_empty());
    s.submit(job(3, 1, whole(4), 0, 120)); // backfilled next to job 1
    assert_eq!(placed_jobs(&s.schedule(2 * MINUTE)), ids(&[3]));
    // Past the threshold: evicting job 3 alone would not make room, and jobs 0 and 1
    // were placed before the head blocked.
    let decisions = s.schedule(MINUTE + BACKFILL_THRESHOLD);
    assert!(decisions.is_empty(), "{decisions:?}");
    for running in [0, 1, 3] {
        assert!(is_running(&s, running), "job {running}");
    }
    // Once room returns, the head is placed without evicting anyone.
    s.finish(JobId(0));
    let decisions = s.schedule(MINUTE + BACKFILL_THRESHOLD + MINUTE);
    assert_eq!(placed_jobs(&decisions), ids(&[2]), "{decisions:?}");
    assert!(preemptions(&decisions).is_empty());
    assert!(is_running(&s, 1) && is_running(&s, 3));
}

/// The head needs 8 GPUs on one node: 4 are free there, the other 4 are held by a job
/// backfilled after it blocked. Evicting that one job makes room.
#[test]
fn backfill_counts_the_room_already_free() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let backfill = profile("default", Some(QueueingPolicy::Backfill), None);
    let mut s = scheduler(backfill, spec);
    s.submit(job(0, 1, whole(8), 0, 0));
    s.submit(job(1, 1, whole(4), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[1, 0]));
    s.submit(job(2, 1, whole(8), 0, 60)); // the head
    assert!(s.schedule(MINUTE).is_empty());
    s.submit(job(3, 1, whole(4), 0, 120));
    assert_eq!(placed_jobs(&s.schedule(2 * MINUTE)), ids(&[3]));
    assert_eq!(nodes_of(&s, 1), nodes_of(&s, 3));
    s.finish(JobId(1)); // 4 GPUs free next to job 3
    let decisions = s.schedule(MINUTE + BACKFILL_THRESHOLD);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[3]), JobId(2), PreemptionKind::Backfill)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[2]));
}

/// Past the threshold, a job backfilled after the head blocked is evicted before any
/// other, even beside one of lower priority that was not backfilled (it was submitted
/// before the head) and whose protection ends at the same moment: either would make room.
#[test]
fn backfilled_jobs_are_evicted_before_any_others() {
    let spec = cluster(3, 8, 3, LinkProfile::NvlinkAll);
    let backfill = profile("default", Some(QueueingPolicy::Backfill), None);
    let mut s = scheduler(backfill, spec);
    for id in [10, 12, 13] {
        s.submit(job(id, 1, whole(8), 1, 0));
    }
    s.submit(job(0, 1, whole(8), 0, 0)); // low priority: waits for a node
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    s.submit(job(2, 2, whole(8), 1, 60)); // the head: two nodes
    assert!(s.schedule(MINUTE).is_empty());
    s.submit(job(3, 1, whole(8), 1, 120));
    assert!(s.schedule(2 * MINUTE).is_empty());
    s.finish(JobId(10));
    assert_eq!(
        placed_jobs(&s.schedule(5 * MINUTE)),
        ids(&[3]),
        "backfilled"
    );
    // Job 0 starts when its protection will end at the head's deadline.
    let deadline = MINUTE + BACKFILL_THRESHOLD;
    s.finish(JobId(13));
    assert_eq!(placed_jobs(&s.schedule(deadline - MIN_RUNTIME)), ids(&[0]));
    s.finish(JobId(12));
    let decisions = s.schedule(deadline);
    // The head spares job 0, not backfilled. Job 3, back in its queue, is tried again at
    // once and outranks it.
    assert_eq!(
        preemptions(&decisions),
        [
            (ids(&[3]), JobId(2), PreemptionKind::Backfill),
            (ids(&[0]), JobId(3), PreemptionKind::Priority)
        ],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[2, 3]));
}

/// Two tenants' heads blocked past the threshold: the younger one, placed first in its
/// turn, was not backfilled past the older one, which therefore may not evict it (heads
/// evicting each other was a cascade).
#[test]
fn a_head_served_past_the_threshold_is_not_evicted_as_backfilled() {
    let mut s = shared_pair(profile("default", Some(QueueingPolicy::Backfill), None));
    s.submit(tjob(0, 1, 1, 8, 0, 0));
    s.submit(tjob(1, 2, 1, 8, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 2);
    s.submit(tjob(2, 1, 2, 8, 0, 1)); // a's head: both nodes
    s.submit(tjob(3, 2, 1, 8, 0, 2)); // b's head: one node
    assert!(s.schedule(2 * SECOND).is_empty());
    // Both overdue; a node frees and b's head, which fits, takes it.
    let overdue = 2 * SECOND + BACKFILL_THRESHOLD;
    s.finish(JobId(1));
    assert_eq!(placed_jobs(&s.schedule(overdue)), ids(&[3]));
    // Past job 3's minimum runtime the other node frees: a's head would fit without job 3,
    // which started after it blocked, but job 3 was served in its turn.
    s.finish(JobId(0));
    let decisions = s.schedule(overdue + MIN_RUNTIME + MINUTE);
    assert!(decisions.is_empty(), "{decisions:?}");
    assert!(is_running(&s, 3));
    s.finish(JobId(3));
    let later = overdue + MIN_RUNTIME + 2 * MINUTE;
    assert_eq!(placed_jobs(&s.schedule(later)), ids(&[2]));
}

/// A job evicted as backfilled past one head, then backfilled past another (it fits where
/// that head does not), is not evicted as backfilled a second time: a job loses at most
/// one run to backfill preemption.
#[test]
fn a_job_evicted_as_backfilled_is_not_evicted_as_backfilled_again() {
    let mut s = scheduler(backfill_only(), cluster(3, 8, 3, LinkProfile::NvlinkAll));
    s.submit(job(0, 1, whole(8), 0, 0));
    s.submit(job(1, 1, whole(8), 0, 0));
    s.submit(job(2, 1, whole(4), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    s.submit(job(10, 1, whole(8), 0, 60)); // the first head: a whole node
    s.submit(job(11, 2, whole(8), 0, 61)); // the next: two whole nodes
    assert!(s.schedule(61 * SECOND).is_empty());
    s.submit(job(20, 1, whole(4), 0, 120)); // backfilled past both
    assert_eq!(placed_jobs(&s.schedule(2 * MINUTE)), ids(&[20]));
    s.finish(JobId(2));
    assert!(s.schedule(10 * MINUTE).is_empty());
    let overdue = 61 * SECOND + BACKFILL_THRESHOLD;
    let decisions = s.schedule(overdue);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[20]), JobId(10), PreemptionKind::Backfill)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[10]));
    // A node frees: the second head needs two, and job 20 is backfilled past it.
    s.finish(JobId(0));
    assert_eq!(placed_jobs(&s.schedule(overdue + MINUTE)), ids(&[20]));
    // Past job 20's minimum runtime another node frees: the head would fit without job
    // 20, which overtook it, but job 20 lost a run to backfill preemption already.
    s.finish(JobId(1));
    let decisions = s.schedule(overdue + MIN_RUNTIME + 2 * MINUTE);
    assert!(decisions.is_empty(), "{decisions:?}");
    assert!(is_running(&s, 20));
    s.finish(JobId(20));
    let later = overdue + MIN_RUNTIME + 3 * MINUTE;
    assert_eq!(placed_jobs(&s.schedule(later)), ids(&[11]));
    check_accounting(&s);
}

/// The same, where the job is evicted for priority in between: it stays exempt from
/// backfill preemption until it finishes, not only for its next run.
#[test]
fn a_job_evicted_as_backfilled_stays_exempt_after_a_priority_eviction() {
    let backfill = profile("default", Some(QueueingPolicy::Backfill), None);
    let mut s = scheduler(backfill, cluster(3, 8, 3, LinkProfile::NvlinkAll));
    s.submit(job(0, 1, whole(8), 0, 0));
    s.submit(job(1, 1, whole(8), 0, 0));
    s.submit(job(2, 1, whole(4), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    s.submit(job(10, 1, whole(8), 0, 60));
    s.submit(job(11, 2, whole(8), 0, 61));
    assert!(s.schedule(61 * SECOND).is_empty());
    s.submit(job(20, 1, whole(4), 0, 120));
    assert_eq!(placed_jobs(&s.schedule(2 * MINUTE)), ids(&[20]));
    s.finish(JobId(2));
    let overdue = 61 * SECOND + BACKFILL_THRESHOLD;
    let decisions = s.schedule(overdue);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[20]), JobId(10), PreemptionKind::Backfill)]
    );
    s.finish(JobId(0));
    assert_eq!(placed_jobs(&s.schedule(overdue + MINUTE)), ids(&[20]));
    // A job of higher priority takes job 20's node past its minimum runtime.
    let urgent_at = overdue + MINUTE + MIN_RUNTIME + MINUTE;
    s.submit(job(30, 1, whole(8), 1, urgent_at / 1000));
    let decisions = s.schedule(urgent_at);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[20]), JobId(30), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    s.finish(JobId(30));
    let again = urgent_at + MIN_RUNTIME + MINUTE;
    assert_eq!(placed_jobs(&s.schedule(again)), ids(&[20]));
    // Job 20, backfilled past the head once more, is still not evicted as backfilled.
    s.finish(JobId(1));
    let decisions = s.schedule(again + MIN_RUNTIME + MINUTE);
    assert!(decisions.is_empty(), "{decisions:?}");
    assert!(is_running(&s, 20));
    check_accounting(&s);
}

/// A backfill head past its threshold that could make room only by evicting jobs still
/// inside their minimum runtime holds its room meanwhile: the jobs arriving after it are
/// kept out, and it makes its room once those it waits on may go, rather than waiting for
/// each newcomer's minimum runtime in turn while newcomers keep taking what frees. Two
/// nodes of 8 GPUs; a head of both nodes whole, overdue at 1,801 s; 1-GPU jobs of 2,000 s
/// every 300 s, the last to overtake it (at 1,800 s) protected until 2,400 s.
#[test]
fn an_overdue_head_holds_its_room_while_the_jobs_that_overtook_it_are_protected() {
    const RUN_S: u64 = 2_000;
    let mut s = scheduler(backfill_only(), cluster(2, 8, 2, LinkProfile::NvlinkAll));
    let mut ends: BTreeMap<u64, Vec<JobId>> = BTreeMap::new();
    s.submit(job(0, 1, whole(1), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    ends.entry(1_000 * SECOND).or_default().push(JobId(0));
    s.submit(job(1, 2, whole(8), 0, 1)); // the head: it blocks at 1 s
    assert!(s.schedule(SECOND).is_empty());
    let overdue = SECOND + BACKFILL_THRESHOLD;
    let (mut now, mut next_id) = (SECOND, 2);
    let head_placed_at = loop {
        let arrival = u64::from(next_id - 1) * 300 * SECOND;
        let end = ends.keys().next().copied().unwrap_or(u64::MAX);
        let retry = s.next_retry_ms(now).unwrap_or(u64::MAX);
        now = arrival.min(end).min(retry);
        assert!(now <= 6_000 * SECOND, "the head still waits at {now} ms");
        if now == arrival {
            s.submit(job(next_id, 1, whole(1), 0, arrival / SECOND));
            next_id += 1;
        }
        for finished in ends.remove(&now).unwrap_or_default() {
            s.finish(finished);
        }
        let decisions = s.schedule(now);
        check_accounting(&s);
        let placed = placed_jobs(&decisions);
        if placed.contains(&JobId(1)) {
            break now;
        }
        if now > overdue {
            assert!(
                placed.is_empty(),
                "kept out of the held room at {now}: {placed:?}"
            );
        }
        for small in placed {
            ends.entry(now + RUN_S * SECOND).or_default().push(small);
        }
    };
    assert_eq!(head_placed_at, 1_800 * SECOND + MIN_RUNTIME);
}

/// Room held for a head short of room that awaited protected victims is given back once
/// those it could evict no longer make its room (a job of higher priority took what one of
/// them left), rather than idle until enough drained, and such a head holds so only once:
/// one node of 8 GPUs, a head of 8.
#[test]
fn a_head_that_no_longer_awaits_protected_victims_gives_its_room_back_for_good() {
    let mut s = scheduler(backfill_only(), cluster(1, 8, 1, LinkProfile::NvlinkAll));
    s.submit(job(0, 1, whole(4), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(job(1, 1, whole(8), 0, 1)); // the head: it blocks at 1 s
    assert!(s.schedule(SECOND).is_empty());
    s.submit(job(2, 1, whole(4), 0, 1_700));
    assert_eq!(placed_jobs(&s.schedule(1_700 * SECOND)), ids(&[2]));
    s.finish(JobId(0));
    s.submit(job(3, 1, whole(4), 0, 1_750));
    assert_eq!(placed_jobs(&s.schedule(1_750 * SECOND)), ids(&[3]));
    // Overdue: jobs 2 and 3 overtook it, both protected; their going would make its room.
    let overdue = SECOND + BACKFILL_THRESHOLD;
    assert!(s.schedule(overdue).is_empty());
    assert_eq!(groups_held_for(&s, 1).len(), 1);
    // Job 2 ends; a job of higher priority is not kept out, and takes its room.
    s.finish(JobId(2));
    s.submit(job(4, 1, whole(4), 9, 1_900));
    let decisions = s.schedule(2_000 * SECOND);
    assert_eq!(placed_jobs(&decisions), ids(&[4]), "{decisions:?}");
    assert!(s.reservations().is_empty(), "{:?}", s.reservations());
    // Job 4 ends: the head awaits job 3 again, but holds nothing for it, and a job of no
    // higher priority overtakes it in the room job 4 left.
    s.finish(JobId(4));
    s.submit(job(5, 1, whole(4), 0, 2_100));
    assert_eq!(placed_jobs(&s.schedule(2_100 * SECOND)), ids(&[5]));
    assert!(s.reservations().is_empty(), "{:?}", s.reservations());
    // Once job 3 may go, evicting it alone would not make the room; once job 5 may too,
    // both go.
    let decisions = s.schedule(1_750 * SECOND + MIN_RUNTIME);
    assert!(decisions.is_empty(), "{decisions:?}");
    let decisions = s.schedule(2_100 * SECOND + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[3, 5]), JobId(1), PreemptionKind::Backfill)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[1]));
    check_accounting(&s);
}

/// Room held for a head awaiting the jobs that overtook it is given back once they all
/// may go, though the head is no longer the one tried as head: a job of higher priority,
/// blocked longer, became the head meanwhile, and cannot use the room (a job of higher
/// priority still holds the rest of what it needs). Two nodes of 8 GPUs in one group.
#[test]
fn room_held_for_awaited_jobs_is_given_back_once_they_may_go_whoever_is_head() {
    let mut s = scheduler(backfill_only(), cluster(2, 8, 2, LinkProfile::NvlinkAll));
    s.submit(job(9, 1, whole(8), 9, 0)); // runs on for good, on one node
    s.submit(job(0, 1, whole(4), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[9, 0]));
    s.submit(job(1, 1, whole(8), 0, 1)); // the first head: it blocks at 1 s
    assert!(s.schedule(SECOND).is_empty());
    s.submit(job(4, 2, whole(8), 5, 100)); // sorted before it: it blocks at 100 s
    assert!(s.schedule(100 * SECOND).is_empty());
    s.submit(job(2, 1, whole(4), 0, 1_700));
    assert_eq!(placed_jobs(&s.schedule(1_700 * SECOND)), ids(&[2]));
    s.finish(JobId(0));
    s.submit(job(3, 1, whole(4), 0, 1_750));
    assert_eq!(placed_jobs(&s.schedule(1_750 * SECOND)), ids(&[3]));
    // Job 1 is overdue first, and holds the group awaiting jobs 2 and 3.
    assert!(s.schedule(SECOND + BACKFILL_THRESHOLD).is_empty());
    assert_eq!(groups_held_for(&s, 1).len(), 1);
    // Job 4, overdue at 1,900 s, is the head from then on; job 1 is tried as no head.
    assert!(s.schedule(100 * SECOND + BACKFILL_THRESHOLD).is_empty());
    let may_go = 1_750 * SECOND + MIN_RUNTIME;
    for now in [may_go - MINUTE, may_go] {
        assert!(s.schedule(now).is_empty());
        assert_eq!(groups_held_for(&s, 1).len(), 1, "at {now}");
    }
    // Once the time it awaited has passed, the hold goes.
    s.schedule(may_go + SECOND);
    assert!(s.reservations().is_empty(), "{:?}", s.reservations());
    check_accounting(&s);
}

/// The embedded default: backfill with backfill preemption alone.
fn backfill_only() -> Profile {
    build(&profile_config(
        "default",
        Some(QueueingPolicy::Backfill),
        None,
    ))
}

/// Without preemption, an isolated tenant's quota gathers for its overdue head at once
/// (what overtook the head would keep it until it ends): its later jobs asking for GPUs
/// wait. A shared tenant's later jobs compete with its head only for room, as every
/// tenant's do, so its overdue head (short of room) holds nothing back.
#[test]
fn an_overdue_head_holds_back_its_isolated_tenants_later_jobs_only() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("iso", TenantMode::Isolated, 8),
        tenant("shared", TenantMode::Shared, 8),
    ];
    let without_preemption = default_profile(QueueingPolicy::Backfill, false);
    let mut s = with_tenants(without_preemption, spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 4, 0, 0));
    s.submit(tjob(1, 2, 1, 4, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0, 1]));
    // Heads: iso's is past its quota (4 + 5 > 8), shared's past the room it may use
    // (16 - 8 held by iso - 4 = 4 < 6).
    s.submit(tjob(2, 1, 1, 5, 0, 1));
    s.submit(tjob(3, 2, 1, 6, 0, 1));
    assert!(s.schedule(SECOND).is_empty());
    // Before the threshold both tenants backfill behind their heads.
    s.submit(tjob(4, 1, 1, 1, 0, 60));
    s.submit(tjob(5, 2, 1, 1, 0, 60));
    assert_eq!(placed_jobs(&s.schedule(MINUTE)), ids(&[4, 5]));
    // Past it, iso's next job waits for its head though its quota has room for it; one
    // asking for no GPU takes none of that quota and goes.
    let overdue = SECOND + BACKFILL_THRESHOLD;
    s.submit(tjob(6, 1, 1, 1, 0, 120));
    s.submit(tjob(7, 2, 1, 1, 0, 120));
    s.submit(tjob(8, 1, 1, 0, 0, 121));
    assert_eq!(placed_jobs(&s.schedule(overdue)), ids(&[8, 7]));
    assert!(
        s.reservations().is_empty(),
        "no head is admitted: nothing held"
    );
    // Iso's quota returns: its head goes first, and the job behind it follows.
    s.finish(JobId(0));
    s.finish(JobId(4));
    assert_eq!(placed_jobs(&s.schedule(overdue + MINUTE)), ids(&[2, 6]));
    check_accounting(&s);
}

/// With backfill preemption, an isolated tenant's later jobs take what its overdue head
/// could not have yet, while jobs older than the head keep it out of its quota; once only
/// jobs that overtook the head do, the quota gathers for it (later jobs wait, though it
/// has room for them), and the head evicts those jobs as their minimum runtime ends.
#[test]
fn an_isolated_quota_gathers_for_the_head_once_only_jobs_that_overtook_it_keep_it_out() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [tenant("iso", TenantMode::Isolated, 8)];
    let mut s = with_tenants(backfill_only(), spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 4, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(tjob(1, 1, 1, 8, 0, 1)); // the head: 4 + 8 > 8
    assert!(s.schedule(SECOND).is_empty());
    s.submit(tjob(2, 1, 1, 1, 0, 60));
    assert_eq!(placed_jobs(&s.schedule(MINUTE)), ids(&[2]));
    let overdue = SECOND + BACKFILL_THRESHOLD;
    s.submit(tjob(3, 1, 1, 1, 0, overdue / SECOND));
    assert_eq!(
        placed_jobs(&s.schedule(overdue)),
        ids(&[3]),
        "job 0 keeps the head out"
    );
    // Job 0 ends: jobs 2 and 3, which overtook the head, alone keep it out, and job 3 is
    // within its minimum runtime.
    s.finish(JobId(0));
    s.submit(tjob(4, 1, 1, 1, 0, (overdue + MINUTE) / SECOND));
    let decisions = s.schedule(overdue + MINUTE);
    assert!(decisions.is_empty(), "{decisions:?}");
    let decisions = s.schedule(overdue + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[2, 3]), JobId(1), PreemptionKind::Backfill)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[1]));
    assert!(!is_running(&s, 4));
    check_accounting(&s);
}

/// A job of tenant 1 on pool `pool` alone: one pod of `gpus` GPUs, priority 0.
fn tenant_1_on(pool: u16, id: u32, gpus: u32, submit_s: u64) -> Job {
    Job {
        pools: vec![PoolId(pool)],
        ..tjob(id, 1, 1, gpus, 0, submit_s)
    }
}

/// An isolated tenant's quota gathers for its overdue head only on the pools it could ever
/// admit the head on: a head accepting either model, larger than the tenant's A100 quota,
/// holds none of that quota back from the tenant's later jobs (without preemption, where
/// its H100 quota gathers at once).
#[test]
fn an_isolated_quota_gathers_for_the_head_only_on_pools_it_could_ever_admit_it_on() {
    either_model_head_leaves_the_a100_quota(two_model_cluster(), 4, 1);
}

/// Tenant 1, isolated with 8 `H100` and `a100_quota` `A100`, runs `first_gpus` on `H100`;
/// its head of one 8-GPU pod accepting either model, past the `H100` quota beside that
/// job, becomes overdue without preemption: its later `H100` job waits, its `A100` job
/// goes (the `A100` quota cannot hold the head on `spec`).
fn either_model_head_leaves_the_a100_quota(
    spec: Arc<ClusterSpec>,
    a100_quota: i64,
    first_gpus: u32,
) {
    let mut iso = tenant("iso", TenantMode::Isolated, 8);
    iso.quota.insert("A100".to_owned(), a100_quota);
    let without_preemption = default_profile(QueueingPolicy::Backfill, false);
    let mut s = with_tenants(without_preemption, spec, &[iso], binds());
    s.submit(tenant_1_on(0, 0, first_gpus, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(Job {
        pools: Vec::new(),
        ..tjob(1, 1, 1, 8, 0, 1)
    });
    assert!(s.schedule(SECOND).is_empty());
    let overdue = SECOND + BACKFILL_THRESHOLD;
    s.submit(tenant_1_on(0, 2, 1, overdue / SECOND));
    s.submit(tenant_1_on(1, 3, 1, overdue / SECOND));
    assert_eq!(placed_jobs(&s.schedule(overdue)), ids(&[3]));
    check_accounting(&s);
}

/// An isolated tenant's quota that covers its overdue head keeps only the head's share of
/// it: the head waits for room in its shape (held for it), and the tenant's later job that
/// leaves the head covered goes elsewhere; one that would not waits (the room held would
/// then be given back, to another tenant).
#[test]
fn an_isolated_quota_that_covers_its_head_keeps_only_the_heads_share() {
    let spec = cluster(4, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("iso", TenantMode::Isolated, 15),
        tenant("shared", TenantMode::Shared, 16),
    ];
    let mut s = with_tenants(backfill_only(), spec, &configs, binds());
    // A node each: 3, 3, 3 and 4 GPUs left, none 8 on one node.
    s.submit(tjob(0, 1, 1, 4, 0, 0));
    for id in 1..4 {
        s.submit(tjob(id, 2, 1, 5, 0, 0));
    }
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 4);
    s.submit(tjob(4, 1, 1, 8, 0, 1)); // the head: 4 + 8 within iso's quota of 15
    assert!(s.schedule(SECOND).is_empty());
    let overdue = SECOND + BACKFILL_THRESHOLD;
    s.submit(tjob(5, 1, 1, 1, 0, overdue / SECOND));
    s.submit(tjob(6, 1, 1, 3, 0, overdue / SECOND)); // 5 + 3 + 8 > 15
    assert_eq!(placed_jobs(&s.schedule(overdue)), ids(&[5]));
    let held = groups_held_for(&s, 4);
    let job_5_on = s.state().spec().node_group[nodes_of(&s, 5)[0].index()];
    assert!(!held.contains(&job_5_on), "job 5 kept out of the room held");
    check_accounting(&s);
}

/// Where the jobs older than an isolated tenant's overdue head keep it out of its quota,
/// the later jobs that the head could not evict as backfilled wait: here one submitted
/// before the head, at a lower priority, so behind it in the queue.
#[test]
fn an_isolated_quota_lends_only_to_jobs_its_head_could_evict() {
    let spec = cluster(1, 8, 1, LinkProfile::NvlinkAll);
    let configs = [tenant("iso", TenantMode::Isolated, 8)];
    let mut s = with_tenants(backfill_only(), spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 4, 1, 0));
    s.submit(tjob(1, 1, 1, 4, 1, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0, 1]));
    s.submit(tjob(2, 1, 1, 4, 0, 1));
    assert!(s.schedule(SECOND).is_empty());
    s.submit(tjob(3, 1, 1, 8, 1, 2)); // the head, ahead of job 2 by priority
    assert!(s.schedule(2 * SECOND).is_empty());
    let overdue = 2 * SECOND + BACKFILL_THRESHOLD;
    assert!(s.schedule(overdue).is_empty());
    // Job 1, older than the head, keeps it out of its quota; job 2 would keep it out too.
    s.finish(JobId(0));
    let decisions = s.schedule(overdue + MINUTE);
    assert!(decisions.is_empty(), "{decisions:?}");
    s.finish(JobId(1));
    assert_eq!(placed_jobs(&s.schedule(overdue + 2 * MINUTE)), ids(&[3]));
    check_accounting(&s);
}

/// A pool whose nodes are too small for the head's pods covers it with no quota: a head of
/// one 8-GPU pod accepting either model, on `A100` nodes of 4 GPUs, has its `H100` quota
/// gather (without preemption, at once), and the tenant's later `A100` job goes.
#[test]
fn an_isolated_quota_gathers_only_on_pools_whose_nodes_could_hold_the_head() {
    let spec = models_cluster(&[("H100", 8), ("A100", 4), ("A100", 4)]);
    either_model_head_leaves_the_a100_quota(spec, 8, 4);
}

/// Behind a deep queue, without preemption: the chunk of later jobs a round passes by while
/// the head holds its pools is read for a job asking for no GPU.
#[test]
fn a_job_asking_for_no_gpu_passes_an_isolated_head_in_a_deep_queue() {
    let spec = cluster(4, 8, 2, LinkProfile::NvlinkAll);
    let configs = [tenant("iso", TenantMode::Isolated, 8)];
    let without_preemption = default_profile(QueueingPolicy::Backfill, false);
    let mut s = with_tenants(without_preemption, spec, &configs, binds());
    let any_model = |id: u32, gpus: u32, priority: i32, submit_s: u64| Job {
        pools: Vec::new(),
        ..tjob(id, 1, 1, gpus, priority, submit_s)
    };
    s.submit(any_model(0, 8, 9, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(any_model(1, 8, 2, 0));
    for i in 0..70 {
        s.submit(any_model(10 + i, 1, 1, 0));
    }
    assert!(placed_jobs(&s.schedule(SECOND)).is_empty());
    let overdue = SECOND + BACKFILL_THRESHOLD;
    assert!(placed_jobs(&s.schedule(overdue)).is_empty());
    let mut cpu = any_model(1000, 0, 0, overdue / SECOND);
    cpu.pods[0].cpu_milli = 1_000;
    s.submit(cpu);
    assert_eq!(placed_jobs(&s.schedule(overdue + SECOND)), ids(&[1000]));
}

/// The groups of the one reservation there is, which must be `head`'s.
fn groups_held_for(s: &Scheduler, head: u32) -> Vec<GroupId> {
    match s.reservations() {
        [reservation] if reservation.head.id == JobId(head) => reservation.groups.clone(),
        other => panic!("one reservation, for job {head}, expected: {other:?}"),
    }
}

/// Two leaf groups of two nodes, each node with 3 GPUs free, and a head past the threshold
/// that needs 8 on one node: enough free room, not in its shape, so one group is held for
/// it. Returns the scheduler, the held group and the time the head became overdue.
fn a_head_with_room_held(spec: &Arc<ClusterSpec>) -> (Scheduler, GroupId, u64) {
    let mut s = scheduler(backfill_only(), spec.clone());
    for id in 0..4 {
        s.submit(job(id, 1, whole(5), 0, 0)); // 3 GPUs left on each node
    }
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 4);
    s.submit(job(4, 1, whole(8), 0, 1)); // the head: 12 GPUs free, none 8 on a node
    assert!(s.schedule(SECOND).is_empty());
    s.submit(job(5, 1, whole(1), 0, 60));
    assert_eq!(placed_jobs(&s.schedule(MINUTE)), ids(&[5]), "backfilled");
    assert!(
        s.reservations().is_empty(),
        "nothing held before the threshold"
    );
    let overdue = SECOND + BACKFILL_THRESHOLD;
    assert!(s.schedule(overdue).is_empty());
    let held = groups_held_for(&s, 4);
    assert_eq!(held.len(), 1, "one group holds an 8-GPU pod");
    (s, held[0], overdue)
}

/// A head with enough free room, but not in the shape it needs (an 8-GPU pod, no node
/// with 8 free), gets room held past the threshold: jobs of its priority go elsewhere,
/// and it is placed once the held group frees a node.
#[test]
fn an_admitted_overdue_head_has_room_held_in_the_shape_it_needs() {
    let spec = cluster(4, 8, 2, LinkProfile::NvlinkAll);
    let (mut s, held, overdue) = a_head_with_room_held(&spec);
    let in_held = |node: NodeId| spec.node_group[node.index()] == held;
    // The other group has 5 GPUs free (3 + 3, less job 5's): six more jobs of the head's
    // priority, and the sixth waits rather than take held room.
    for id in 6..12 {
        s.submit(job(id, 1, whole(1), 0, 1_900 + u64::from(id)));
    }
    assert_eq!(
        placed_jobs(&s.schedule(overdue + MINUTE)),
        ids(&[6, 7, 8, 9, 10])
    );
    for id in 5..11 {
        assert!(
            nodes_of(&s, id).iter().all(|&n| !in_held(n)),
            "job {id} of the head's priority was placed in its held group"
        );
    }
    // A job of higher priority is not held out.
    s.submit(job(12, 1, whole(1), 10, 2_000));
    assert_eq!(placed_jobs(&s.schedule(overdue + 2 * MINUTE)), ids(&[12]));
    assert!(in_held(nodes_of(&s, 12)[0]));
    // The held group's other node frees: the head takes it, and, the hold released, the
    // waiting job follows.
    let freed = (0..4)
        .find(|&id| in_held(nodes_of(&s, id)[0]) && nodes_of(&s, id) != nodes_of(&s, 12))
        .expect("a job in the held group");
    s.finish(JobId(freed));
    assert_eq!(
        placed_jobs(&s.schedule(overdue + 3 * MINUTE)),
        ids(&[4, 11])
    );
    assert!(in_held(nodes_of(&s, 4)[0]));
    assert!(s.reservations().is_empty(), "released once placed");
}

/// Room held for a head that goes away (its pods deleted) is everyone's again at once: a
/// job it kept out is placed in the next round, though no capacity was freed.
#[test]
fn room_held_for_a_head_that_is_withdrawn_is_used_at_once() {
    let spec = cluster(4, 8, 2, LinkProfile::NvlinkAll);
    let (mut s, held, overdue) = a_head_with_room_held(&spec);
    // The other group's nodes have 3 and 2 GPUs free: one job of 3 fits there, the next
    // waits rather than take held room.
    s.submit(job(6, 1, whole(3), 0, 1_900));
    s.submit(job(7, 1, whole(3), 0, 1_901));
    assert_eq!(placed_jobs(&s.schedule(overdue + MINUTE)), ids(&[6]));
    assert!(s.withdraw(JobId(4)).is_some());
    assert!(s.reservations().is_empty());
    assert_eq!(placed_jobs(&s.schedule(overdue + 2 * MINUTE)), ids(&[7]));
    assert_eq!(spec.node_group[nodes_of(&s, 7)[0].index()], held);
}

/// A job asking no GPU takes nothing a backfill head waits for but CPU, memory and pod
/// slots: it may use room held for the head where those stay enough for the head's pods.
/// Three nodes of 8 GPUs and 128 CPUs, one group each: two with 3 GPUs and 4 CPUs free, one
/// with 4 GPUs and 112 CPUs free, which is held for a head of 8 GPUs and 64 CPUs.
#[test]
fn a_job_asking_no_gpu_uses_held_room_that_leaves_the_head_what_it_needs() {
    let spec = cluster(3, 8, 1, LinkProfile::NvlinkAll);
    let mut s = scheduler(backfill_only(), spec.clone());
    s.submit(asking_cpu(job(0, 1, whole(5), 0, 0), 124_000));
    s.submit(asking_cpu(job(1, 1, whole(5), 0, 0), 124_000));
    s.submit(asking_cpu(job(2, 1, whole(4), 0, 0), 16_000));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    s.submit(asking_cpu(job(3, 1, whole(8), 0, 1), 64_000));
    assert!(s.schedule(SECOND).is_empty());
    let overdue = SECOND + BACKFILL_THRESHOLD;
    assert!(s.schedule(overdue).is_empty());
    let held = groups_held_for(&s, 3);
    assert_eq!(held, vec![spec.node_group[nodes_of(&s, 2)[0].index()]]);
    // 8 CPUs leave the head its 64 there; 60 more would leave it 44, and nowhere else has
    // room: that job waits.
    let now_s = overdue / SECOND;
    let cpu_only = |id, cpu_milli| asking_cpu(job(id, 1, GpuRequest::NONE, 0, now_s), cpu_milli);
    s.submit(cpu_only(4, 8_000));
    s.submit(cpu_only(5, 60_000));
    assert_eq!(placed_jobs(&s.schedule(overdue + SECOND)), ids(&[4]));
    assert_eq!(nodes_of(&s, 4), nodes_of(&s, 2));
    // The held node frees: the head takes it beside the job asking no GPU.
    s.finish(JobId(2));
    assert_eq!(placed_jobs(&s.schedule(overdue + MINUTE)), ids(&[3]));
    assert_eq!(nodes_of(&s, 3), nodes_of(&s, 4));
    assert!(!is_running(&s, 5));
}

/// Three nodes of 8 GPUs, one group each; the isolated tenant (1) keeps 15 GPUs, and
/// shared tenants a (2) and b (3) use nothing. Each node runs an isolated job of 5 GPUs,
/// and `head_tenant`'s head of 8 GPUs, past the threshold, has one group held: 9 GPUs are
/// free for shared tenants, none 8 on a node. Returns the scheduler, the cluster, the held
/// group and the time the head became overdue.
fn a_shared_head_with_room_held(head_tenant: u16) -> (Scheduler, Arc<ClusterSpec>, GroupId, u64) {
    let spec = cluster(3, 8, 1, LinkProfile::NvlinkAll);
    let configs = [
        tenant("iso", TenantMode::Isolated, 15),
        tenant("a", TenantMode::Shared, 0),
        tenant("b", TenantMode::Shared, 0),
    ];
    let mut s = with_tenants(backfill_only(), spec.clone(), &configs, binds());
    for id in 0..3 {
        s.submit(tjob(id, 1, 1, 5, 0, 0)); // one per node: 3 GPUs left on each
    }
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    s.submit(tjob(3, head_tenant, 1, 8, 0, 1));
    assert!(s.schedule(SECOND).is_empty());
    let overdue = SECOND + BACKFILL_THRESHOLD;
    assert!(s.schedule(overdue).is_empty());
    let held = groups_held_for(&s, 3)[0];
    (s, spec, held, overdue)
}

/// A head's room is held only while its quota admits it: once others took the room
/// outside the hold that a shared head needed, the hold is given back, and a job that fits
/// only there is placed rather than wait beside idle GPUs.
#[test]
fn room_held_for_a_head_no_longer_admitted_is_given_back() {
    let (mut s, spec, held, overdue) = a_shared_head_with_room_held(2);
    // Another shared tenant takes 3 GPUs outside the hold: 6 are left for shared
    // tenants, and the head is no longer admitted.
    s.submit(tjob(4, 3, 1, 3, 0, 1_900));
    assert_eq!(placed_jobs(&s.schedule(overdue + MINUTE)), ids(&[4]));
    // The isolated job on the held node ends; the tenant's next one fits only there.
    let on_held = (0..3)
        .find(|&id| spec.node_group[nodes_of(&s, id)[0].index()] == held)
        .expect("an isolated job on the held node");
    s.finish(JobId(on_held));
    s.submit(tjob(5, 1, 1, 5, 0, 2_000));
    assert_eq!(placed_jobs(&s.schedule(overdue + 2 * MINUTE)), ids(&[5]));
    assert!(s.reservations().is_empty());
    check_accounting(&s);
}

/// Room held for a head that is placed during a round is everyone's again in that same
/// round, also for a job of another tenant that was tried, and kept out, before the head.
#[test]
fn room_held_for_a_head_placed_mid_round_goes_to_a_job_tried_before_it() {
    // Two groups of two nodes of 8 GPUs.
    let spec = cluster(4, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Shared, 16),
        tenant("b", TenantMode::Shared, 16),
    ];
    let mut s = with_tenants(backfill_only(), spec.clone(), &configs, binds());
    // Tenant b fills the nodes with 5, 5, 6 and 8 GPUs: 3, 3, 2 and 0 left.
    for (id, gpus) in [(0, 5), (1, 5), (2, 6), (3, 8)] {
        s.submit(tjob(id, 2, 1, gpus, 0, 0));
    }
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 4);
    // b's head needs 8 on one node: 8 GPUs are free, none on one node.
    s.submit(tjob(4, 2, 1, 8, 0, 1));
    assert!(s.schedule(SECOND).is_empty());
    let overdue = SECOND + BACKFILL_THRESHOLD;
    assert!(s.schedule(overdue).is_empty());
    let held = groups_held_for(&s, 4);
    let in_held = |s: &Scheduler, id: u32| {
        nodes_of(s, id)
            .iter()
            .all(|n| held.contains(&spec.node_group[n.index()]))
    };
    assert!(
        in_held(&s, 0) && in_held(&s, 1),
        "the group with 3 + 3 free is held"
    );
    // Tenant a's job of 3 GPUs fits only in the held group: it waits.
    s.submit(tjob(5, 1, 1, 3, 0, 2_000));
    assert!(s.schedule(overdue + MINUTE).is_empty());
    // A job of the held group ends: in the next round tenant a (using nothing) is served
    // first and is still kept out; then b's head takes the freed node, and the room it
    // held is a's in the same call.
    s.finish(JobId(0));
    let mut placed = placed_jobs(&s.schedule(overdue + 2 * MINUTE));
    placed.sort();
    assert_eq!(placed, ids(&[4, 5]));
    assert!(s.reservations().is_empty());
    assert!(in_held(&s, 5));
    check_accounting(&s);
}

/// Room held for a head that its quota stopped admitting between rounds (pods it did not
/// place took the shared room) is given back before anyone is tried: the head is passed
/// over unread, and the first job tried, which fits only in the held group, is placed
/// rather than kept out while a job tried after it takes that room.
#[test]
fn room_held_for_a_head_unadmitted_between_rounds_is_given_back_before_the_next_attempt() {
    // Tenant a (2) is served before b (3), whose head holds room, while both use nothing.
    let (mut s, spec, held, overdue) = a_shared_head_with_room_held(3);
    let in_held = |node: u32| spec.node_group[node as usize] == held;
    // Between rounds the isolated job in the held group ends, and pods placed by someone
    // else take 2 GPUs on each node outside it: the held node is free, but only 5 GPUs
    // are left for shared tenants, so the head is no longer admitted.
    let on_held = (0..3)
        .find(|&id| in_held(nodes_of(&s, id)[0].0))
        .expect("an isolated job on the held node");
    s.finish(JobId(on_held));
    for (id, node) in (4..).zip((0..3).filter(|&n| !in_held(n))) {
        let free = s.state().node(NodeId(node)).free_whole();
        let lowest = free & free.wrapping_neg();
        let rest = free & !lowest;
        let two = lowest | (rest & rest.wrapping_neg());
        let running = kant::framework::Adopted::Running { preemptible: true };
        s.adopt(
            tjob(id, 0, 1, 2, 0, 0),
            &[Some(placement(node, two, 1000))],
            0,
            running,
        )
        .expect("free devices");
    }
    // a's job and b's later job of 5 GPUs each fit only in the held group, one of them.
    s.submit(tjob(6, 2, 1, 5, 0, 1_900));
    s.submit(tjob(7, 3, 1, 5, 0, 1_901));
    assert_eq!(placed_jobs(&s.schedule(overdue + MINUTE)), ids(&[6]));
    assert!(s.reservations().is_empty());
    check_accounting(&s);
}

#[test]
fn every_blocked_jobs_backfill_threshold_wakes_the_scheduler() {
    // R (long) and F hold the node; X blocks first and can never make room (R outranks
    // it); Y, of higher priority than X, blocks later and B backfills past it. At Y's
    // threshold, with nothing else happening, Y makes its room.
    let spec = cluster(1, 8, 1, LinkProfile::NvlinkAll);
    let mut s = scheduler(
        profile("default", Some(QueueingPolicy::Backfill), None),
        spec,
    );
    s.submit(job(0, 1, whole(4), 9, 0)); // R
    s.submit(job(1, 1, whole(2), 9, 0)); // F
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 2);
    s.submit(job(2, 1, whole(8), 0, 1)); // X
    s.schedule(SECOND);
    s.submit(job(3, 1, whole(4), 1, 60)); // Y
    s.schedule(MINUTE);
    s.submit(job(4, 1, whole(2), 1, 90)); // B
    assert_eq!(placed_jobs(&s.schedule(90 * SECOND)), ids(&[4]));
    s.finish(JobId(1));
    assert!(placed_jobs(&s.schedule(2 * MINUTE)).is_empty());
    let x_due = SECOND + BACKFILL_THRESHOLD;
    assert_eq!(s.next_retry_ms(2 * MINUTE), Some(x_due));
    assert!(placed_jobs(&s.schedule(x_due)).is_empty());
    let y_due = MINUTE + BACKFILL_THRESHOLD;
    assert_eq!(
        s.next_retry_ms(x_due),
        Some(y_due),
        "Y's threshold is a wake-up too"
    );
    let decisions = s.schedule(y_due);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[4]), JobId(3), PreemptionKind::Backfill)]
    );
    assert_eq!(placed_jobs(&decisions), ids(&[3]));
}

#[test]
fn an_overdue_gang_holds_only_groups_of_nodes_it_may_use() {
    // Four 8-GPU nodes under one spine: leaf 0 holds nodes 0 and 1, leaves 1 and 2 one
    // node each. The head, a gang of two 8-GPU pods, is selected onto nodes 2 and 3.
    let spec = uneven_leaves(|i| {
        let pool = (i >= 2).then_some(("pool", "a"));
        let host = (i == 2).then_some(("host", "two"));
        (pool.into_iter().chain(host).collect(), vec![])
    });
    let mut s = scheduler(backfill_only(), spec.clone());
    let selecting = |mut job: Job, key: &str, value: &str| {
        job.set_constraints(kant::model::NodeConstraints {
            node_selector: vec![(key.into(), value.into())],
            ..Default::default()
        });
        job
    };
    // One GPU in use on node 2.
    s.submit(selecting(job(0, 1, whole(1), 0, 0), "host", "two"));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(selecting(job(1, 2, whole(8), 0, 1), "pool", "a"));
    assert!(s.schedule(SECOND).is_empty());
    let overdue = SECOND + BACKFILL_THRESHOLD;
    assert!(s.schedule(overdue).is_empty());
    let held: Vec<GroupId> = s
        .reservations()
        .iter()
        .flat_map(|r| r.groups.clone())
        .collect();
    let usable = [spec.node_group[2], spec.node_group[3]];
    assert!(
        !held.is_empty() && held.iter().all(|g| usable.contains(g)),
        "held {held:?}"
    );
    // A job of the head's priority goes to leaf 0, not to node 3, which the head needs.
    s.submit(job(2, 1, whole(8), 0, 1_900));
    assert_eq!(placed_jobs(&s.schedule(overdue + MINUTE)), ids(&[2]));
    assert_ne!(nodes_of(&s, 2), vec![NodeId(3)]);
}

// 6. Priority preemption: the minimal victim set -----------------------------------------

/// A round of lone jobs placed at once: (seconds, [(id, GPUs, priority)]).
type Round<'a> = (u64, &'a [(u32, u32, i32)]);

/// Runs lone jobs, placed in rounds at the given times, in the default tenant, on two
/// nodes of 8 GPUs; returns the scheduler and each job's node.
fn running_jobs(rounds: &[Round]) -> (Scheduler, HashMap<u32, NodeId>) {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    let mut nodes = HashMap::new();
    for &(at_s, jobs) in rounds {
        for &(id, gpus, priority) in jobs {
            s.submit(job(id, 1, whole(gpus), priority, at_s));
        }
        let mut expected: Vec<JobId> = jobs.iter().map(|j| JobId(j.0)).collect();
        expected.sort();
        let mut got = placed_jobs(&s.schedule(at_s * SECOND));
        got.sort();
        assert_eq!(got, expected);
        for &(id, ..) in jobs {
            nodes.insert(id, nodes_of(&s, id)[0]);
        }
    }
    (s, nodes)
}

#[test]
fn priority_preemption_evicts_the_minimal_set() {
    // Node X: jobs 1 (prio 0, t=0) and 2 (prio 1, t=0); node Y: jobs 3 (prio 0, t=60s)
    // and 4 (prio 5). Job 9 (prio 5) needs a whole node.
    let (mut s, nodes) =
        running_jobs(&[(0, &[(1, 4, 0), (2, 4, 1)]), (60, &[(3, 4, 0), (4, 4, 5)])]);
    assert_eq!(nodes[&1], nodes[&2], "layout: jobs 1 and 2 share a node");
    assert_eq!(nodes[&3], nodes[&4], "layout: jobs 3 and 4 share a node");
    assert_ne!(nodes[&1], nodes[&3]);
    s.submit(job(9, 1, whole(8), 5, 600));
    // Taken in order: 3 (prio 0, least GPU-time lost), 1 (prio 0), 2 (prio 1); job 4 has
    // the preemptor's priority. Job 9 fits once 1 and 2 are gone: job 3 is spared. Job 2,
    // back in its queue, is tried again at once: it outranks job 3, and takes its room.
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [
            (ids(&[1, 2]), JobId(9), PreemptionKind::Priority),
            (ids(&[3]), JobId(2), PreemptionKind::Priority)
        ],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[9, 2]));
    assert_eq!(nodes_of(&s, 9), [nodes[&1]]);
    assert_eq!(nodes_of(&s, 2), [nodes[&3]]);
    assert!(is_running(&s, 4));
    assert_eq!(s.pending(), 2);
    check_accounting(&s);
}

/// Where the owner rule refuses the cheapest set (it takes another shared tenant's job,
/// which would leave that tenant below its quota while the preemptor's borrows), a set
/// without that tenant's jobs is tried: a's job of priority 10 evicts a's own job of
/// priority 5, not b's of priority 0 (b at its quota), and a borrows nothing.
#[test]
fn priority_preemption_tries_a_set_the_owner_rule_allows_when_it_refuses_the_cheapest() {
    let mut s = shared_pair(profile("default", None, None));
    s.submit(tjob(0, 1, 1, 8, 5, 0));
    s.submit(tjob(1, 2, 1, 8, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 2);
    s.submit(tjob(2, 1, 1, 8, 10, 60));
    assert!(s.schedule(MINUTE).is_empty());
    let decisions = s.schedule(MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[0]), JobId(2), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[2]));
    assert!(is_running(&s, 1));
    assert_eq!(s.tenants().borrowed(1, H100), 0);
    check_accounting(&s);
}

/// A borrowing preemptor may take of another shared tenant what that tenant borrows, and
/// no more: b (quota 12) runs two 4-GPU jobs beside a node of 8, borrowing 4. a (quota 0)
/// evicts one of b's 4-GPU jobs for priority (b left at its quota); a second job of a's
/// then finds b borrowing nothing, and waits rather than leave b below its quota with its
/// job waiting.
#[test]
fn a_borrowing_preemptor_takes_of_another_tenant_no_more_than_it_borrows() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Shared, 0),
        tenant("b", TenantMode::Shared, 12),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 2, 1, 8, 0, 0));
    s.submit(tjob(1, 2, 1, 4, 0, 0));
    s.submit(tjob(2, 2, 1, 4, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    assert_eq!(s.tenants().borrowed(2, H100), gpus(4));
    s.submit(tjob(10, 1, 1, 4, 5, 60));
    let decisions = s.schedule(MIN_RUNTIME);
    let taken = preemptions(&decisions);
    assert_eq!(taken.len(), 1, "{decisions:?}");
    let (victims, by, kind) = &taken[0];
    assert!(
        victims == &ids(&[1]) || victims == &ids(&[2]),
        "{victims:?}"
    );
    assert_eq!((*by, *kind), (JobId(10), PreemptionKind::Priority));
    assert_eq!(placed_jobs(&decisions), ids(&[10]));
    assert_eq!(s.tenants().used(2, H100), gpus(12));
    s.submit(tjob(11, 1, 1, 4, 5, 2 * MIN_RUNTIME / SECOND));
    for now in [2 * MIN_RUNTIME, 4 * MIN_RUNTIME] {
        let decisions = s.schedule(now);
        assert!(
            preemptions(&decisions).is_empty(),
            "at {now}: {decisions:?}"
        );
    }
    assert!(
        is_running(&s, 0),
        "b's node is not evicted for a to borrow more"
    );
    assert_eq!(s.tenants().used(2, H100), gpus(12));
    check_accounting(&s);
}

/// A job accepting any of three GPU models, one node of each full of 1-GPU jobs of
/// priorities 0 to 7: taken lowest priority first, the victims alternate between the
/// pools until one node is free (22 of them). It lands on that node: only its 8 go.
#[test]
fn priority_preemption_spares_every_victim_of_the_pools_it_does_not_land_in() {
    let spec = models_cluster(&[("H100", 8), ("A100", 8), ("L40S", 8)]);
    let mut s = scheduler(profile("default", None, None), spec);
    for pool in 0..3u16 {
        for priority in 0..8 {
            let mut lone = job(
                u32::from(pool) * 8 + priority as u32,
                1,
                whole(1),
                priority,
                0,
            );
            lone.pools = vec![PoolId(pool)];
            s.submit(lone);
        }
    }
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 24);
    let mut any_model = job(100, 1, whole(8), 50, 1);
    any_model.pools = Vec::new();
    s.submit(any_model);
    let decisions = s.schedule(MIN_RUNTIME);
    assert_eq!(placed_jobs(&decisions), ids(&[100]));
    let victims = &preemptions(&decisions)[0].0;
    assert_eq!(victims.len(), 8, "{victims:?}");
    let landed = nodes_of(&s, 100)[0];
    assert!(
        victims.iter().all(|v| v.0 / 8 == landed.0),
        "{victims:?} for node {landed:?}"
    );
    check_accounting(&s);
}

#[test]
fn priority_preemption_takes_the_lowest_priority_first() {
    // Job 1 (prio 2) ran least, job 2 (prio 1) longest: priority decides.
    let (mut s, _) = running_jobs(&[(0, &[(2, 8, 1)]), (60, &[(1, 8, 2)])]);
    s.submit(job(9, 1, whole(8), 5, 600));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[2]), JobId(9), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[9]));
}

/// Preemptors alike in one round (one tenant, one priority, one pool) each find the
/// victims as the ones before left them: the first evicts the job that lost least, the
/// second the other, and the third finds none (the first two were just placed).
#[test]
fn preemptors_alike_in_one_round_each_find_what_the_others_left() {
    let (mut s, nodes) = running_jobs(&[(0, &[(1, 8, 0)]), (60, &[(2, 8, 0)])]);
    for id in [9, 10, 11] {
        s.submit(job(id, 1, whole(8), 5, 600));
    }
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [
            (ids(&[2]), JobId(9), PreemptionKind::Priority),
            (ids(&[1]), JobId(10), PreemptionKind::Priority)
        ],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[9, 10]));
    assert_eq!(nodes_of(&s, 10), [nodes[&1]]);
    assert_eq!(s.pending(), 3);
    check_accounting(&s);
}

/// A job that must never preempt (a pod with `preemptionPolicy: Never`) waits for room
/// however high its priority; once room frees it goes first, ahead of lower priorities.
#[test]
fn a_job_that_never_preempts_waits_for_room() {
    let (mut s, _) = running_jobs(&[(0, &[(1, 8, 0)]), (60, &[(2, 8, 0)])]);
    s.submit(Job {
        may_preempt: false,
        ..job(9, 1, whole(8), 5, 600)
    });
    s.submit(job(10, 1, whole(8), 0, 601));
    assert!(s.schedule(MINUTE + MIN_RUNTIME).is_empty());
    assert!(is_running(&s, 1) && is_running(&s, 2));
    s.release_pod(PodKey {
        job: JobId(1),
        pod: 0,
    });
    let decisions = s.schedule(MINUTE + 2 * MIN_RUNTIME);
    assert_eq!(placed_jobs(&decisions), ids(&[9]));
    assert!(preemptions(&decisions).is_empty());
}

#[test]
fn priority_preemption_takes_the_least_gpu_time_lost_then_the_most_recent() {
    // Equal priority. Job 1: 4 GPUs from t=0; job 2: 8 GPUs from t=600s; job 3 (prio 9)
    // beside job 1. At t=1200s jobs 1 and 2 would lose the same GPU-time (4 x 1200 =
    // 8 x 600): the more recent, job 2, goes.
    let (mut s, nodes) = running_jobs(&[(0, &[(1, 4, 0), (3, 4, 9)]), (600, &[(2, 8, 0)])]);
    assert_eq!(nodes[&1], nodes[&3]);
    s.submit(job(9, 1, whole(4), 5, 1000));
    let decisions = s.schedule(20 * MINUTE);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[2]), JobId(9), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    // A minute later job 2 would lose more than job 1: job 1 goes.
    let (mut s, _) = running_jobs(&[(0, &[(1, 4, 0), (3, 4, 9)]), (600, &[(2, 8, 0)])]);
    s.submit(job(9, 1, whole(4), 5, 1000));
    let decisions = s.schedule(21 * MINUTE);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[1]), JobId(9), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    assert_eq!(nodes_of(&s, 9), [nodes[&1]]);
}

#[test]
fn a_job_never_preempts_one_of_equal_or_higher_priority() {
    let (mut s, _) = running_jobs(&[(0, &[(1, 8, 5), (2, 4, 7), (3, 4, 5)])]);
    s.submit(job(9, 1, whole(4), 5, 60));
    for now in [MIN_RUNTIME + MINUTE, 10 * BACKFILL_THRESHOLD] {
        let decisions = s.schedule(now);
        assert!(decisions.is_empty(), "{decisions:?}");
    }
    assert_eq!(s.running().len(), 3);
    assert_eq!(s.pending(), 1);
}

/// Job 9 needs a whole node: one node has 4 GPUs free and a low-priority 4-GPU job.
#[test]
fn priority_preemption_counts_the_room_already_free() {
    let (mut s, nodes) = running_jobs(&[(0, &[(1, 8, 9), (2, 4, 0)])]);
    assert_ne!(nodes[&1], nodes[&2]);
    s.submit(job(9, 1, whole(8), 5, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[2]), JobId(9), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[9]));
}

/// Room free on a shared device counts too: a 0.5-GPU job of low priority beside 0.5 GPU
/// free on the only GPU gives way to a 0.7-GPU job and to a whole-GPU one.
#[test]
fn priority_preemption_counts_the_room_free_on_a_shared_device() {
    for gpu in [GpuRequest::Fraction(700), whole(1)] {
        let mut s = scheduler(
            profile("default", None, None),
            cluster(1, 1, 1, LinkProfile::NvlinkAll),
        );
        s.submit(job(1, 1, GpuRequest::Fraction(500), 0, 0));
        assert_eq!(placed_jobs(&s.schedule(0)), ids(&[1]));
        s.submit(job(2, 1, gpu, 5, 60));
        let decisions = s.schedule(MINUTE + MIN_RUNTIME);
        assert_eq!(
            preemptions(&decisions),
            [(ids(&[1]), JobId(2), PreemptionKind::Priority)],
            "{gpu:?}: {decisions:?}"
        );
        assert_eq!(placed_jobs(&decisions), ids(&[2]));
    }
}

/// More victims taken than the one-by-one sparing checks: the cheapest ones (priority 0),
/// beside a job of priority 10 the preemptor cannot move, are all spared at once, as the
/// preemptor lands on none of their nodes.
#[test]
fn priority_preemption_spares_every_victim_off_the_nodes_it_lands_on() {
    let mut s = scheduler(
        profile("default", Some(QueueingPolicy::BestEffortFifo), None),
        cluster(3, 8, 3, LinkProfile::NvlinkAll),
    );
    s.submit(job(1, 1, whole(1), 10, 0));
    for id in 10..17 {
        s.submit(job(id, 1, whole(1), 0, 0));
    }
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 8);
    for id in 20..36 {
        s.submit(job(id, 1, whole(1), 1, 1));
    }
    assert_eq!(placed_jobs(&s.schedule(SECOND)).len(), 16);
    for id in 10..17 {
        assert_eq!(nodes_of(&s, id), nodes_of(&s, 1), "beside job 1");
    }
    s.submit(job(9, 2, whole(8), 5, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    let victims: Vec<u32> = (20..36).collect();
    // The victims, tried again at once, go on to evict jobs 10 to 16 for their priority.
    assert_eq!(
        preemptions(&decisions).first(),
        Some(&(ids(&victims), JobId(9), PreemptionKind::Priority))
    );
    assert_eq!(placed_jobs(&decisions).first(), Some(&JobId(9)));
}

/// A gang that requires one scale-up domain evicts the job of lower priority in the one
/// whose other node is free, though the other domain holds nothing it may evict: the
/// victim search judges room domain by domain, and finds it there.
#[test]
fn a_gang_held_to_one_hbd_makes_room_inside_one() {
    let mut s = scheduler(
        profile("default", Some(QueueingPolicy::BestEffortFifo), None),
        fabric(4, 8, 2, 2, 2, LinkProfile::NvlinkAll),
    );
    let in_one_hbd = |id, priority, submit_s| Job {
        topology: Some(TopologyNeed {
            tier: Tier::Hbd,
            required: true,
        }),
        ..job(id, 2, whole(8), priority, submit_s)
    };
    s.submit(in_one_hbd(1, 9, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[1]));
    s.submit(job(2, 1, whole(8), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(SECOND)), ids(&[2]));
    s.submit(in_one_hbd(3, 5, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[2]), JobId(3), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[3]));
    assert!(nodes_of(&s, 3).iter().all(|n| !nodes_of(&s, 1).contains(n)));
}

/// A gang waiting for a tight placement (its patience) may take a block of nodes outside
/// every leaf whole: where its pool has such nodes, the victim search does not hold it to
/// the leaves' domains. Here the labelled nodes are two leaves apart, both busy with jobs
/// it may not evict, and the unlabelled pair holds one it may.
#[test]
fn a_patient_gang_makes_room_on_nodes_outside_every_leaf() {
    let mut builder = ClusterSpecBuilder::new();
    for (i, leaf) in ["leaf-0", "leaf-1", "", ""].into_iter().enumerate() {
        let row = NodeRow {
            name: format!("node-{i}"),
            gpu_model: Some("H100".into()),
            gpus: 8,
            cpu_milli: Some(128_000),
            memory_bytes: Some(1 << 40),
            leaf: (!leaf.is_empty()).then(|| LeafPath {
                superspine: "ss".into(),
                spine: format!("spine-{i}"),
                leaf: leaf.into(),
            }),
            ..Default::default()
        };
        builder
            .add(row, LinkProfile::NvlinkAll)
            .expect("valid node");
    }
    let mut s = scheduler(
        profile("default", Some(QueueingPolicy::BestEffortFifo), None),
        Arc::new(builder.build()),
    );
    s.submit(job(1, 1, whole(8), 9, 0));
    s.submit(job(2, 1, whole(8), 9, 0));
    s.submit(job(3, 2, whole(8), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    let unlabelled = [NodeId(2), NodeId(3)];
    assert_eq!(
        nodes_of(&s, 3),
        unlabelled,
        "the gang took the unlabelled pair"
    );
    s.submit(job(4, 2, whole(8), 5, 60));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[3]), JobId(4), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    assert_eq!(nodes_of(&s, 4), unlabelled);
}

#[test]
fn preemption_cannot_cascade_within_the_minimum_runtime() {
    // Job 1 (prio 0) is evicted for job 2 (prio 5); job 3 (prio 9) arrives a minute later:
    // job 2 is protected, so job 3 waits though it outranks everyone.
    let (mut s, _) = running_jobs(&[(0, &[(1, 8, 0), (4, 8, 9)])]);
    s.submit(job(2, 1, whole(8), 5, 600));
    let decisions = s.schedule(MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[1]), JobId(2), PreemptionKind::Priority)]
    );
    s.submit(job(3, 1, whole(8), 9, 660));
    let decisions = s.schedule(MIN_RUNTIME + MINUTE);
    assert!(decisions.is_empty(), "{decisions:?}");
    assert!(is_running(&s, 2));
    // Room returns elsewhere: job 3 takes it, and job 2 is left alone.
    s.finish(JobId(4));
    let decisions = s.schedule(2 * MIN_RUNTIME);
    assert_eq!(placed_jobs(&decisions), ids(&[3]), "{decisions:?}");
    assert!(preemptions(&decisions).is_empty());
    assert!(is_running(&s, 2));
}

// 7. A gang is preempted whole and requeued whole ----------------------------------------

#[test]
fn a_gang_is_preempted_whole_and_placed_whole_again() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(1, 2, whole(8), 0, 0)); // a gang over both nodes
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[1]));
    assert_eq!(nodes_of(&s, 1).len(), 2);
    s.submit(job(9, 1, whole(4), 5, 60)); // needs half a node
    let decisions = s.schedule(MIN_RUNTIME);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[1]), JobId(9), PreemptionKind::Priority)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[9]));
    assert!(nodes_of(&s, 1).is_empty(), "no pod of the gang is left");
    assert!(!is_running(&s, 1));
    assert_eq!(s.pending(), 1);
    assert_eq!(s.state().total().free_gpus, 12);
    assert_eq!(s.tenants().used(0, H100), gpus(4));
    // It cannot come back partly.
    assert!(placed_jobs(&s.schedule(MIN_RUNTIME + MINUTE)).is_empty());
    assert!(nodes_of(&s, 1).is_empty());
    // Room returns: the gang is placed whole.
    s.finish(JobId(9));
    let decisions = s.schedule(MIN_RUNTIME + 2 * MINUTE);
    assert_eq!(placed_jobs(&decisions), ids(&[1]));
    let plan_pods = decisions.iter().find_map(|d| match d {
        Decision::Placed { job, plan, .. } if *job == JobId(1) => Some(plan.pods.len()),
        _ => None,
    });
    assert_eq!(plan_pods, Some(2));
    assert_eq!(nodes_of(&s, 1).len(), 2);
    check_accounting(&s);
}

/// A gang wider than so many small jobs: 40 nodes full of 320 lone 1-GPU jobs, and a gang
/// of higher priority that needs every node. It preempts them all, though that is more
/// victims than the candidates examined beyond those it needs.
#[test]
fn a_gang_preempts_more_small_jobs_than_the_candidates_examined_for_a_choice() {
    let mut s = scheduler(
        profile("default", None, None),
        cluster(40, 8, 8, LinkProfile::NvlinkAll),
    );
    for id in 0..320 {
        s.submit(job(id, 1, whole(1), 0, 0));
    }
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 320);
    s.submit(job(1000, 40, whole(8), 5, 1));
    let decisions = s.schedule(MIN_RUNTIME + SECOND);
    let evicted: usize = preemptions(&decisions)
        .iter()
        .map(|(v, _, _)| v.len())
        .sum();
    assert_eq!(evicted, 320, "{:?}", placed_jobs(&decisions));
    assert_eq!(placed_jobs(&decisions), ids(&[1000]));
    check_accounting(&s);
}

#[test]
fn a_gang_preemptor_evicts_lone_jobs_one_by_one_only_as_needed() {
    // Four lone 4-GPU jobs; a 2 x 4 gang of higher priority takes exactly two of them.
    let (mut s, _) = running_jobs(&[(0, &[(1, 4, 0), (2, 4, 0)]), (60, &[(3, 4, 0), (4, 4, 0)])]);
    s.submit(job(9, 2, whole(4), 5, 120));
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    let evicted = preemptions(&decisions);
    assert_eq!(evicted.len(), 1, "{decisions:?}");
    // The two most recent (least GPU-time lost).
    assert_eq!(
        evicted[0],
        (ids(&[3, 4]), JobId(9), PreemptionKind::Priority)
    );
    assert_eq!(placed_jobs(&decisions), ids(&[9]));
    assert_eq!(nodes_of(&s, 9).len(), 2);
    check_accounting(&s);
}

// 8. A bind failure requeues the whole job with backoff ----------------------------------

/// Refuses to bind the listed jobs, binds the others.
struct RefuseJobs(Vec<JobId>);

impl Plugin for RefuseJobs {
    fn name(&self) -> &'static str {
        "refuse-jobs"
    }
}

impl Bind for RefuseJobs {
    fn bind(&self, job: &Job, _plan: &JobPlan) -> Status {
        if self.0.contains(&job.id) {
            Status::new(Code::Error, "node went away")
        } else {
            Status::SUCCESS
        }
    }
}

/// Answers `Wait`: the world binds (or fails) later.
struct Later;

impl Plugin for Later {
    fn name(&self) -> &'static str {
        "later"
    }
}

impl Bind for Later {
    fn bind(&self, _job: &Job, _plan: &JobPlan) -> Status {
        Status::new(Code::Wait, "binding")
    }
}

#[test]
fn a_bind_failure_requeues_the_whole_job_with_doubling_capped_backoff() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [tenant("a", TenantMode::Shared, 16)];
    let refuse = Box::new(TestBinder { refuse: true });
    let mut s = with_tenants(profile("default", None, None), spec, &configs, refuse);
    s.submit(tjob(0, 1, 2, 8, 0, 0)); // a gang over both nodes
    let mut now = 0;
    let mut waits = Vec::new();
    for attempt in 0..9 {
        let decisions = s.schedule(now);
        let requeued = requeues(&decisions);
        assert_eq!(requeued.len(), 1, "attempt {attempt}: {decisions:?}");
        let (job, retry_at) = requeued[0];
        assert_eq!(job, JobId(0));
        assert!(placed_jobs(&decisions).is_empty());
        assert_eq!(s.state().placed_pods(), 0, "every pod forgotten");
        assert_eq!(s.state().total().free_gpus, 16);
        assert_eq!(s.tenants().used(1, H100), 0, "tenant usage back to 0");
        assert!(s.running().is_empty());
        assert_eq!(s.pending_of(1), 1, "back in its tenant's queue");
        assert_eq!(s.next_retry_ms(now), Some(retry_at));
        // Not tried before its retry time.
        let early = s.schedule(retry_at - 1);
        assert!(early.is_empty(), "attempt {attempt}: {early:?}");
        waits.push(retry_at - now);
        now = retry_at;
    }
    let expected: Vec<u64> = [10, 20, 40, 80, 160, 320]
        .iter()
        .map(|s| s * SECOND)
        .chain([BACKOFF_MAX; 3])
        .collect();
    assert_eq!(waits, expected);
    assert_eq!(waits[0], BACKOFF);
}

#[test]
fn a_requeued_job_waits_out_its_backoff_even_when_capacity_is_freed() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let binder = Box::new(RefuseJobs(vec![JobId(1)]));
    let mut s = with_tenants(profile("default", None, None), spec, &[], binder);
    s.submit(job(0, 1, whole(8), 0, 0));
    s.submit(job(1, 1, whole(4), 0, 1));
    let decisions = s.schedule(0);
    assert_eq!(placed_jobs(&decisions), ids(&[0]));
    assert_eq!(requeues(&decisions), [(JobId(1), BACKOFF)]);
    // Capacity is freed during the backoff: the job still waits for its retry time.
    s.finish(JobId(0));
    let decisions = s.schedule(SECOND);
    assert!(
        requeues(&decisions).is_empty(),
        "retried during its backoff: {decisions:?}"
    );
    assert_eq!(s.next_retry_ms(SECOND), Some(BACKOFF));
    let decisions = s.schedule(BACKOFF);
    assert_eq!(requeues(&decisions), [(JobId(1), BACKOFF + 2 * BACKOFF)]);
}

/// Refuses job 0's bindings whose number (from 1) is listed, binds every other.
struct RefuseCalls {
    refused: Vec<u32>,
    calls: std::sync::atomic::AtomicU32,
}

impl Plugin for RefuseCalls {
    fn name(&self) -> &'static str {
        "refuse-calls"
    }
}

impl Bind for RefuseCalls {
    fn bind(&self, job: &Job, _plan: &JobPlan) -> Status {
        if job.id != JobId(0) {
            return Status::SUCCESS;
        }
        let call = 1 + self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.refused.contains(&call) {
            true => Status::new(Code::Error, "node went away"),
            false => Status::SUCCESS,
        }
    }
}

/// A job bound at last starts its backoff afresh: preempted and refused again, it waits
/// the first backoff, not the next of the failures before it ran.
#[test]
fn the_backoff_starts_afresh_once_a_job_is_bound() {
    let binder = RefuseCalls {
        refused: vec![1, 2, 4],
        calls: 0.into(),
    };
    let spec = cluster(1, 8, 1, LinkProfile::NvlinkAll);
    let mut s = with_tenants(profile("default", None, None), spec, &[], Box::new(binder));
    s.submit(job(0, 1, whole(8), 0, 0));
    assert_eq!(requeues(&s.schedule(0)), [(JobId(0), BACKOFF)]);
    assert_eq!(requeues(&s.schedule(BACKOFF)), [(JobId(0), 3 * BACKOFF)]);
    assert_eq!(placed_jobs(&s.schedule(3 * BACKOFF)), ids(&[0]));
    let now = 3 * BACKOFF + MIN_RUNTIME;
    s.submit(job(2, 1, whole(8), 5, now / SECOND));
    let decisions = s.schedule(now);
    assert_eq!(preemptions(&decisions).len(), 1, "{decisions:?}");
    s.finish(JobId(2));
    assert_eq!(
        requeues(&s.schedule(now + 1)),
        [(JobId(0), now + 1 + BACKOFF)]
    );
}

#[test]
fn a_binding_that_fails_later_forgets_the_job_and_backs_off() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [tenant("a", TenantMode::Shared, 8)];
    let mut s = with_tenants(
        profile("default", None, None),
        spec,
        &configs,
        Box::new(Later),
    );
    s.submit(tjob(0, 1, 2, 4, 0, 0));
    let decisions = s.schedule(0);
    assert!(
        matches!(
            &decisions[..],
            [Decision::Placed {
                job: JobId(0),
                bound: false,
                ..
            }]
        ),
        "{decisions:?}"
    );
    assert_eq!(s.tenants().used(1, H100), gpus(8));
    assert_eq!(
        s.bind_failed(JobId(0), 5 * SECOND),
        Some(5 * SECOND + BACKOFF)
    );
    assert_eq!(s.state().placed_pods(), 0);
    assert_eq!(s.tenants().used(1, H100), 0);
    assert_eq!(s.pending_of(1), 1);
    assert_eq!(s.next_retry_ms(5 * SECOND), Some(5 * SECOND + BACKOFF));
    assert!(s.schedule(5 * SECOND + BACKOFF - 1).is_empty());
    assert_eq!(placed_jobs(&s.schedule(5 * SECOND + BACKOFF)), ids(&[0]));
    // A second failure waits twice as long.
    assert_eq!(s.bind_failed(JobId(0), MINUTE), Some(MINUTE + 2 * BACKOFF));
    check_accounting(&s);
}

// 9. Fairness across tenants --------------------------------------------------------------

#[test]
fn a_burst_from_one_tenant_does_not_starve_another() {
    let mut s = shared_pair(profile(
        "native",
        Some(QueueingPolicy::BestEffortFifo),
        None,
    ));
    for i in 0..8 {
        s.submit(tjob(i, 1, 1, 4, 0, u64::from(i)));
    }
    // A borrows B's idle quota: the cluster is A's.
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0, 1, 2, 3]));
    for i in 0..4 {
        s.submit(tjob(10 + i, 2, 1, 4, 0, 100 + u64::from(i)));
    }
    assert!(s.schedule(100 * SECOND).is_empty());
    // Two of A's jobs end: B, furthest below its share, goes first, though A's waiting
    // jobs were submitted earlier and could borrow the room.
    s.finish(JobId(0));
    s.finish(JobId(1));
    assert_eq!(placed_jobs(&s.schedule(200 * SECOND)), ids(&[10, 11]));
    // Each is at its quota: the next room goes to whoever is below it.
    s.finish(JobId(10));
    assert_eq!(placed_jobs(&s.schedule(300 * SECOND)), ids(&[12]));
    s.finish(JobId(2));
    assert_eq!(placed_jobs(&s.schedule(400 * SECOND)), ids(&[4]));
    assert_eq!(s.tenants().used(1, H100), gpus(8));
    assert_eq!(s.tenants().used(2, H100), gpus(8));
    check_accounting(&s);
}

#[test]
fn the_weighted_share_orders_tenants() {
    // Equal quotas, B weighs 3. With A at 4 of 8 GPUs (share 0.5) and B at 8 of 8 (share
    // 1/3), B is served first and borrows the free room, though A's job was submitted
    // earlier and is within A's quota. Unweighted, A (0.5 < 1) would go first.
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let mut b = tenant("b", TenantMode::Shared, 8);
    b.weight = 3.0;
    let configs = [tenant("a", TenantMode::Shared, 8), b];
    // Binpacking (jobs 0 and 11 share a node); all within the minimum runtime, so no
    // preemption.
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 4, 0, 0));
    s.submit(tjob(10, 2, 1, 8, 0, 0));
    s.submit(tjob(11, 2, 1, 4, 0, 0));
    // A first (lower index at equal shares); B's smaller job first (smaller-first), then
    // its 8-GPU job, borrowing 4 of A's idle quota.
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0, 11, 10]));
    s.submit(tjob(1, 1, 1, 4, 0, 10));
    s.submit(tjob(12, 2, 1, 4, 0, 20));
    s.finish(JobId(11));
    assert_eq!(placed_jobs(&s.schedule(MINUTE)), ids(&[12]));
    assert_eq!(s.pending_of(1), 1);
    assert_eq!(s.tenants().borrowed(2, H100), gpus(4));
}

#[test]
fn a_shared_tenant_without_quota_borrows_the_idle_cluster() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [tenant("a", TenantMode::Shared, 0)];
    let flat = profile("default", None, Some(SearchMode::Flat));
    let mut s = with_tenants(flat, spec, &configs, binds());
    s.submit(Job {
        tenant: TenantId(1),
        ..job(0, 2, GpuRequest::Whole(8), 0, 0)
    });
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    assert_eq!(s.tenants().borrowed(1, H100), gpus(16));
    assert_eq!(s.tenants().totals(1), (gpus(16), gpus(16)));
}

/// A job admission refused is not offered again while its tenant's room stays below its
/// need; a quota lowered since must still find it impossible rather than leave it waiting
/// as a backfill head that holds its tenant's quota for good.
#[test]
fn a_job_a_lowered_quota_makes_impossible_is_found_so_and_holds_nothing() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let mut s = with_tenants(
        backfill_only(),
        spec.clone(),
        &[tenant("iso", TenantMode::Isolated, 16)],
        binds(),
    );
    s.submit(tjob(0, 1, 1, 8, 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(tjob(1, 1, 2, 8, 0, 1)); // 16 GPUs: its quota has 8 left
    assert!(s.schedule(SECOND).is_empty());
    let lowered = Tenants::resolve(&[tenant("iso", TenantMode::Isolated, 8)], &spec).unwrap();
    s.set_tenants(lowered);
    s.finish(JobId(0));
    assert!(s.schedule(2 * SECOND).is_empty());
    let waiting = s.waiting().find(|w| w.job.id == JobId(1)).unwrap();
    assert!(waiting.unresolvable, "16 GPUs never fit a quota of 8");
    // Long past the threshold, the impossible job holds nothing back.
    s.submit(tjob(2, 1, 1, 1, 0, 60));
    let overdue = SECOND + 2 * BACKFILL_THRESHOLD;
    assert_eq!(placed_jobs(&s.schedule(overdue)), ids(&[2]));
    check_accounting(&s);
}

/// As above when the cluster shrinks: a job refused for room is tried in full again, and
/// found impossible.
#[test]
fn a_job_a_shrunk_cluster_makes_impossible_is_found_so() {
    let mut s = scheduler(backfill_only(), cluster(2, 8, 2, LinkProfile::NvlinkAll));
    s.submit(job(0, 1, whole(8), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(job(1, 2, whole(8), 0, 1)); // 16 GPUs: 8 are free
    assert!(s.schedule(SECOND).is_empty());
    s.set_cluster(cluster(1, 8, 2, LinkProfile::NvlinkAll), 2 * SECOND);
    assert!(s.schedule(2 * SECOND).is_empty());
    let waiting = s.waiting().find(|w| w.job.id == JobId(1)).unwrap();
    assert!(waiting.unresolvable, "16 GPUs never fit on one node of 8");
}

/// An isolated tenant's overdue head asking for no GPU (it waits for CPU) gathers none of
/// its quota: the tenant's later jobs asking for GPUs are not held back behind it.
#[test]
fn an_isolated_head_asking_for_no_gpu_holds_back_none_of_its_tenants_gpu_jobs() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let configs = [
        tenant("iso", TenantMode::Isolated, 8),
        tenant("shared", TenantMode::Shared, 0),
    ];
    let mut s = with_tenants(backfill_only(), spec, &configs, binds());
    // The shared tenant takes every CPU of both nodes, and two GPUs.
    s.submit(asking_cpu(tjob(0, 2, 2, 1, 0, 0), 128_000));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    let mut cpu_only = tjob(1, 1, 1, 0, 0, 1);
    cpu_only.pods[0].cpu_milli = 1_000;
    s.submit(cpu_only);
    assert!(placed_jobs(&s.schedule(SECOND)).is_empty());
    // Past the threshold, iso's job asking for one GPU (and no CPU) has its quota free.
    let overdue = SECOND + BACKFILL_THRESHOLD;
    s.submit(tjob(2, 1, 1, 1, 0, overdue / SECOND));
    assert_eq!(placed_jobs(&s.schedule(overdue)), ids(&[2]));
    check_accounting(&s);
}

/// A backfill head whose room waits on a backfilled job's minimum runtime is a head again
/// when that runtime ends: it makes its room then, not once something finishes.
#[test]
fn a_backfill_head_makes_room_when_a_victims_minimum_runtime_ends() {
    let spec = cluster(1, 8, 1, LinkProfile::NvlinkAll);
    let mut s = scheduler(
        profile("default", Some(QueueingPolicy::Backfill), None),
        spec,
    );
    s.submit(job(0, 1, whole(4), 0, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(job(1, 1, whole(8), 0, 1)); // the head: the whole node; it blocks at 1 s
    assert!(s.schedule(SECOND).is_empty());
    s.submit(job(2, 1, whole(4), 0, 2)); // backfilled after it blocked
    assert_eq!(placed_jobs(&s.schedule(2 * SECOND)), ids(&[2]));
    s.finish(JobId(0));
    assert!(placed_jobs(&s.schedule(100 * SECOND)).is_empty());
    // Backfilled too, just before the threshold: protected until 1,700 s + 10 min.
    s.submit(job(3, 1, whole(4), 0, 1_700));
    assert_eq!(placed_jobs(&s.schedule(1_700 * SECOND)), ids(&[3]));
    let overdue = SECOND + BACKFILL_THRESHOLD;
    assert!(preemptions(&s.schedule(overdue)).is_empty());
    let protected_until = 1_700 * SECOND + MIN_RUNTIME;
    assert_eq!(s.next_retry_ms(overdue), Some(protected_until));
    let decisions = s.schedule(protected_until);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[2, 3]), JobId(1), PreemptionKind::Backfill)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[1]));
    check_accounting(&s);
}

/// A borrower whose borrowing is part of a larger job loses that job whole to the owner,
/// once the owner's job has been blocked past the backfill threshold: b (quota 8) runs a
/// gang of 16 GPUs, 8 of them a's idle quota, at priority 10. a's job of 8 (priority 0),
/// within its quota, waits while the gang runs, and the scheduler wakes at its threshold
/// with nothing else happening: the gang is reclaimed, and b, below its quota now, takes
/// nothing back.
#[test]
fn an_owner_blocked_past_the_threshold_reclaims_a_job_its_borrower_borrows_part_of() {
    let mut s = shared_pair(profile("default", None, None));
    s.submit(tjob(0, 2, 2, 8, 10, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    assert_eq!(s.tenants().borrowed(2, H100), gpus(8));
    s.submit(tjob(1, 1, 1, 8, 0, 60));
    assert!(s.schedule(MINUTE).is_empty());
    let decisions = s.schedule(MINUTE + MIN_RUNTIME);
    assert!(
        decisions.is_empty(),
        "only the borrowed part: {decisions:?}"
    );
    let due = MINUTE + BACKFILL_THRESHOLD;
    assert_eq!(s.next_retry_ms(MINUTE + MIN_RUNTIME), Some(due));
    let decisions = s.schedule(due);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[0]), JobId(1), PreemptionKind::QuotaReclaim)],
        "{decisions:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[1]));
    assert_eq!(s.tenants().used(2, H100), 0);
    let later = s.schedule(due + MIN_RUNTIME);
    assert!(later.is_empty(), "{later:?}");
    assert!(is_running(&s, 1) && !is_running(&s, 0));
    check_accounting(&s);
}

/// Shared tenants `a`, `b`, `c` with these quotas (tenants 1 to 3), on `nodes` nodes of
/// 8 H100 (one leaf each), the default profile.
fn three_shared(quotas: [i64; 3], nodes: usize) -> Scheduler {
    let spec = cluster(nodes, 8, nodes, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Shared, quotas[0]),
        tenant("b", TenantMode::Shared, quotas[1]),
        tenant("c", TenantMode::Shared, quotas[2]),
    ];
    with_tenants(profile("default", None, None), spec, &configs, binds())
}

/// Submits `job` (submitted at 60 s) and schedules it when submitted, where it fails, and
/// once it has been blocked for the backfill threshold: the preemptions made then.
fn preempted_past_the_threshold(s: &mut Scheduler, job: Job) -> Preemptions {
    s.submit(job);
    assert!(s.schedule(MINUTE).is_empty());
    let decisions = s.schedule(MINUTE + BACKFILL_THRESHOLD);
    check_accounting(s);
    preemptions(&decisions)
}

/// The same under best-effort FIFO, where the owner's job is no backfill head: its
/// candidates are shared through the memo, and its try asks for a retry at the time it
/// may reclaim a job whole, which wakes a quiet cluster.
#[test]
fn past_the_threshold_a_job_that_is_no_backfill_head_reclaims_whole_too() {
    let mut s = shared_pair(profile(
        "default",
        Some(QueueingPolicy::BestEffortFifo),
        None,
    ));
    s.submit(tjob(0, 2, 2, 8, 10, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(tjob(1, 1, 1, 8, 0, 60));
    s.submit(tjob(2, 1, 1, 8, 0, 61));
    assert!(s.schedule(MINUTE + SECOND).is_empty());
    assert!(s.schedule(MINUTE + MIN_RUNTIME).is_empty());
    let due = MINUTE + SECOND + BACKFILL_THRESHOLD;
    assert_eq!(s.next_retry_ms(MINUTE + MIN_RUNTIME), Some(due));
    let decisions = s.schedule(due);
    assert_eq!(
        preemptions(&decisions),
        [(ids(&[0]), JobId(1), PreemptionKind::QuotaReclaim)],
        "{decisions:?}"
    );
    check_accounting(&s);
}

/// A gang whose launcher asks for no GPU, on a CPU-only node, is reclaimed whole as well:
/// what it holds on the CPU-only pool (no GPU) says nothing of its tenant's borrowing.
#[test]
fn past_the_threshold_a_gang_with_a_launcher_on_a_cpu_node_is_reclaimed_whole() {
    let mut builder = ClusterSpecBuilder::new();
    for (i, gpus) in [8, 8, 0].into_iter().enumerate() {
        let row = NodeRow {
            name: format!("node-{i}"),
            gpu_model: (gpus > 0).then(|| "H100".into()),
            gpus,
            cpu_milli: Some(if gpus > 0 { 4_000 } else { 64_000 }),
            ..Default::default()
        };
        builder
            .add(row, LinkProfile::NvlinkAll)
            .expect("valid node");
    }
    let configs = [
        tenant("a", TenantMode::Shared, 8),
        tenant("b", TenantMode::Shared, 8),
    ];
    let spec = Arc::new(builder.build());
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    let mut gang = tjob(0, 2, 3, 8, 10, 0);
    gang.pods[0].gpu = GpuRequest::NONE;
    gang.pods[0].cpu_milli = 8_000;
    s.submit(gang);
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    assert_eq!(s.tenants().borrowed(2, H100), gpus(8));
    assert_eq!(
        preempted_past_the_threshold(&mut s, tjob(1, 1, 1, 8, 0, 60)),
        [(ids(&[0]), JobId(1), PreemptionKind::QuotaReclaim)]
    );
}

/// The search keeps its set one whose every victim may be a reclaim: b (quota 4) runs
/// jobs of 2 and 6 GPUs on one node, borrowing 4; c (quota 4) runs a job of 8 on the
/// other, borrowing 4. a's job of 8 may not take both of b's (once the 6 goes, b borrows
/// nothing: the 2 would be taken from b's quota), so it passes b's second by and takes
/// c's job, alone.
#[test]
fn past_the_threshold_no_victim_is_taken_from_a_tenant_its_others_bring_to_its_quota() {
    let mut s = three_shared([8, 4, 4], 2);
    s.submit(tjob(0, 2, 1, 2, 10, 0));
    s.submit(tjob(1, 2, 1, 6, 10, 0));
    s.submit(tjob(2, 3, 1, 8, 11, 0));
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 3);
    assert_eq!(nodes_of(&s, 0), nodes_of(&s, 1));
    assert_eq!(s.tenants().borrowed(2, H100), gpus(4));
    assert_eq!(s.tenants().borrowed(3, H100), gpus(4));
    assert_eq!(
        preempted_past_the_threshold(&mut s, tjob(3, 1, 1, 8, 0, 60)),
        [(ids(&[2]), JobId(3), PreemptionKind::QuotaReclaim)]
    );
}

/// A reclaim leaves its victims' tenant below its quota by no more than the job asks: b
/// (quota 16) runs a gang of 16 within its quota and borrows 1 GPU beside c's 7 (c is at
/// its quota). For a's job of 8, the gang would leave b 15 below its quota: a waits.
#[test]
fn past_the_threshold_a_reclaim_takes_no_more_below_quota_than_the_job_asks() {
    let mut s = three_shared([8, 16, 7], 3);
    s.submit(tjob(0, 2, 2, 8, 10, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    s.submit(tjob(1, 3, 1, 7, 10, 1));
    assert_eq!(placed_jobs(&s.schedule(SECOND)), ids(&[1]));
    s.submit(tjob(2, 2, 1, 1, 10, 2));
    assert_eq!(placed_jobs(&s.schedule(2 * SECOND)), ids(&[2]));
    assert_eq!(s.tenants().borrowed(2, H100), gpus(1));
    assert!(preempted_past_the_threshold(&mut s, tjob(3, 1, 1, 8, 0, 60)).is_empty());
    assert!(is_running(&s, 0));
}

/// Isolated tenants alike: b's quota lowered from 16 to 8 (a's raised from 0 to 8) while
/// b runs a gang of 16. Past the threshold a's job of 8 takes the gang whole, b's 8 within
/// its quota with it, as it would from a shared borrower.
#[test]
fn past_the_threshold_an_isolated_tenant_loses_a_job_straddling_its_quota_whole() {
    let spec = cluster(2, 8, 2, LinkProfile::NvlinkAll);
    let before = [
        tenant("a", TenantMode::Isolated, 0),
        tenant("b", TenantMode::Isolated, 16),
    ];
    let mut s = with_tenants(
        profile("default", None, None),
        spec.clone(),
        &before,
        binds(),
    );
    s.submit(tjob(0, 2, 2, 8, 10, 0));
    assert_eq!(placed_jobs(&s.schedule(0)), ids(&[0]));
    let after = [
        tenant("a", TenantMode::Isolated, 8),
        tenant("b", TenantMode::Isolated, 8),
    ];
    s.set_tenants(Tenants::resolve(&after, &spec).unwrap());
    assert_eq!(
        preempted_past_the_threshold(&mut s, tjob(1, 1, 1, 8, 0, 60)),
        [(ids(&[0]), JobId(1), PreemptionKind::QuotaReclaim)]
    );
}

/// An owner below its quota reclaims from a borrower whose jobs are all larger than what
/// the owner is owed, as long as the owner's job fits its quota: a job goes whole.
#[test]
fn an_owner_reclaims_a_borrowers_job_larger_than_what_it_is_owed() {
    let spec = cluster(3, 8, 3, LinkProfile::NvlinkAll);
    let configs = [
        tenant("a", TenantMode::Shared, 8),
        tenant("b", TenantMode::Shared, 0),
        tenant("c", TenantMode::Shared, 8),
    ];
    let mut s = with_tenants(profile("default", None, None), spec, &configs, binds());
    s.submit(tjob(0, 1, 1, 4, 0, 0)); // A: 4 of its 8
    s.submit(tjob(1, 3, 1, 4, 0, 0)); // C: 4 of its 8
    s.submit(tjob(2, 2, 1, 8, 0, 0)); // B: borrowed
    s.submit(tjob(3, 2, 1, 8, 0, 0)); // B: borrowed
    assert_eq!(placed_jobs(&s.schedule(0)).len(), 4);
    assert_eq!(s.state().total().free_gpus, 0);
    // A asks for 4 more, within its quota; it is owed 4, and B's jobs have 8 each.
    s.submit(tjob(4, 1, 1, 4, 0, 60));
    let decisions = s.schedule(MIN_RUNTIME);
    let reclaims = preemptions(&decisions);
    assert_eq!(reclaims.len(), 1, "{decisions:?}");
    let (victims, by, kind) = &reclaims[0];
    assert_eq!((*by, *kind), (JobId(4), PreemptionKind::QuotaReclaim));
    assert!(
        victims == &ids(&[2]) || victims == &ids(&[3]),
        "{victims:?}"
    );
    assert_eq!(placed_jobs(&decisions), ids(&[4]));
    check_accounting(&s);
}
