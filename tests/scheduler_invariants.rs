//! Random sequences of the events a world feeds the scheduler (submissions, rounds,
//! bindings confirmed or failed, jobs finishing, pods released, devices turning unhealthy,
//! nodes coming and going) on small clusters with tenants, checked after every step
//! against what can be recomputed from first principles: device use and every aggregate
//! from the placements, tenants' use from the running jobs, gangs placed whole, no new
//! pod on an unhealthy device, no job lost.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use common::*;
use kant::cache::{ClusterState, GpuAggregate, Placement, PlacementPhase, PodKey};
use kant::framework::{Bind, Code, Decision, JobPlan, Plugin, Scheduler, Status};
use kant::model::{
    ClusterSpec, ClusterSpecBuilder, GpuRequest, GroupId, Job, JobId, LeafPath, LinkProfile,
    MAX_GPUS_PER_NODE, MILLI_PER_GPU, NodeRow, PodRequest, PoolId, TenantId, bits,
};
use kant::queue::{QueueingPolicy, TenantConfig, TenantMode, Tenants};
use proptest::prelude::*;

const MODELS: [&str; 2] = ["H100", "A100"];
const SECOND: u64 = 1_000;

/// How the binder answers, switched by the test between rounds.
const BIND_NOW: u8 = 0;
const BIND_LATER: u8 = 1;
const BIND_REFUSED: u8 = 2;

struct SwitchedBinder(Arc<AtomicU8>);

impl Plugin for SwitchedBinder {
    fn name(&self) -> &'static str {
        "switched-binder"
    }
}

impl Bind for SwitchedBinder {
    fn bind(&self, _job: &Job, _plan: &JobPlan) -> Status {
        match self.0.load(Ordering::Relaxed) {
            BIND_NOW => Status::SUCCESS,
            BIND_LATER => Status::new(Code::Wait, "bound later"),
            _ => Status::new(Code::Error, "binding refused"),
        }
    }
}

/// One node of the test's cluster.
#[derive(Debug, Clone)]
struct Row {
    name: String,
    model: usize,
    gpus: usize,
    leaf: usize,
    unhealthy: u32,
}

#[derive(Debug, Clone)]
enum Shape {
    Whole(u32),
    Fraction(u32),
    Gang {
        pods: usize,
        gpus: u32,
        launcher: bool,
    },
}

#[derive(Debug, Clone)]
enum Op {
    Submit {
        tenant: u16,
        shape: Shape,
        /// 0: H100, 1: A100, 2: either.
        pools: u8,
        priority: i32,
        cpu: u64,
    },
    Schedule {
        advance_s: u64,
    },
    Binder(u8),
    Bound(usize),
    BindFailed(usize),
    Finish(usize),
    ReleasePod(usize, u32),
    Withdraw(usize),
    HoldGoing(usize),
    Health {
        node: usize,
        device: usize,
        healthy: bool,
    },
    RemoveNode(usize),
    AddNode {
        gpus: usize,
        model: usize,
        leaf: usize,
    },
    ChangeModel(usize),
    Resize(usize, u64),
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        3 => (1u32..=8).prop_map(Shape::Whole),
        2 => (1u32..1000).prop_map(Shape::Fraction),
        3 => (2usize..=6, 1u32..=4, any::<bool>())
            .prop_map(|(pods, gpus, launcher)| Shape::Gang { pods, gpus, launcher }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u16..4, shape(), 0u8..3, 0i32..3, prop_oneof![2 => Just(0u64), 2 => 1_000u64..10_000, 1 => 10_000u64..80_000])
            .prop_map(|(tenant, shape, pools, priority, cpu)| Op::Submit { tenant, shape, pools, priority, cpu }),
        8 => prop_oneof![Just(0u64), 1u64..120, 600u64..2400].prop_map(|advance_s| Op::Schedule { advance_s }),
        2 => prop_oneof![3 => Just(BIND_NOW), 2 => Just(BIND_LATER), 1 => Just(BIND_REFUSED)].prop_map(Op::Binder),
        2 => any::<usize>().prop_map(Op::Bound),
        1 => any::<usize>().prop_map(Op::BindFailed),
        3 => any::<usize>().prop_map(Op::Finish),
        2 => (any::<usize>(), 0u32..6).prop_map(|(j, p)| Op::ReleasePod(j, p)),
        1 => any::<usize>().prop_map(Op::Withdraw),
        1 => any::<usize>().prop_map(Op::HoldGoing),
        2 => (any::<usize>(), 0usize..8, any::<bool>())
            .prop_map(|(node, device, healthy)| Op::Health { node, device, healthy }),
        1 => any::<usize>().prop_map(Op::RemoveNode),
        1 => (1usize..=8, 0usize..2, 0usize..3).prop_map(|(gpus, model, leaf)| Op::AddNode { gpus, model, leaf }),
        1 => any::<usize>().prop_map(Op::ChangeModel),
        1 => (any::<usize>(), 0u64..64_000).prop_map(|(pod, cpu)| Op::Resize(pod, cpu)),
    ]
}

/// The case's setup: nodes as (GPUs, model, leaf), tenants as (isolated, H100 quota,
/// A100 quota), the queueing policy, preemption, whether victims are held until gone.
#[derive(Debug, Clone)]
struct Setup {
    nodes: Vec<(usize, usize, usize)>,
    tenants: Vec<(bool, i64, i64)>,
    policy: QueueingPolicy,
    preemption: bool,
    hold_victims: bool,
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        proptest::collection::vec((1usize..=8, 0usize..2, 0usize..3), 2..=12),
        proptest::collection::vec((any::<bool>(), 0i64..=16, 0i64..=16), 1..=3),
        prop_oneof![
            Just(QueueingPolicy::Backfill),
            Just(QueueingPolicy::BestEffortFifo),
            Just(QueueingPolicy::StrictFifo),
        ],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(nodes, tenants, policy, preemption, hold_victims)| Setup {
            nodes,
            tenants,
            policy,
            preemption,
            hold_victims,
        })
}

fn spec_of(rows: &[Row]) -> Arc<ClusterSpec> {
    let models: Vec<Option<String>> = MODELS.iter().map(|m| Some(m.to_string())).collect();
    let mut builder = ClusterSpecBuilder::with_pools(&models);
    for row in rows {
        let links = if row.model == 0 {
            LinkProfile::NvlinkAll
        } else {
            LinkProfile::NvlinkPairs
        };
        let node = NodeRow {
            name: row.name.clone(),
            gpu_model: Some(MODELS[row.model].into()),
            gpus: row.gpus,
            cpu_milli: Some(64_000),
            memory_bytes: Some(1 << 40),
            leaf: Some(LeafPath {
                superspine: "ss".into(),
                spine: "spine".into(),
                leaf: format!("leaf-{}", row.leaf),
            }),
            unhealthy: row.unhealthy,
            ..Default::default()
        };
        builder.add(node, links).expect("valid test node");
    }
    Arc::new(builder.build())
}

fn tenant_configs(tenants: &[(bool, i64, i64)]) -> Vec<TenantConfig> {
    tenants
        .iter()
        .enumerate()
        .map(|(i, &(isolated, h100, a100))| TenantConfig {
            name: format!("t{}", i + 1),
            mode: if isolated {
                TenantMode::Isolated
            } else {
                TenantMode::Shared
            },
            weight: 1.0,
            quota: BTreeMap::from([("H100".to_owned(), h100), ("A100".to_owned(), a100)]),
        })
        .collect()
}

fn scheduler_profile(policy: QueueingPolicy, preemption: bool) -> kant::framework::Profile {
    let mut config = profile_config("default", Some(policy), None);
    if preemption {
        let at = config
            .plugins
            .iter()
            .position(|p| p.name() == "gang")
            .map_or(0, |i| i + 1);
        config
            .plugins
            .insert(at, kant::config::PluginConfig::Name("preemption".into()));
    }
    build(&config)
}

/// The scheduler and what the test knows of every job it submitted.
struct World {
    setup: Setup,
    s: Scheduler,
    binder: Arc<AtomicU8>,
    rows: Vec<Row>,
    added: usize,
    now: u64,
    jobs: BTreeMap<JobId, Arc<Job>>,
    /// Finished, withdrawn, or every pod released: no longer the scheduler's.
    gone: HashSet<JobId>,
    /// Running with some pods released (or lost with their node).
    partial: HashSet<JobId>,
    /// Placed with the binder's `Wait`, not yet reported bound or failed.
    awaiting: BTreeSet<JobId>,
    /// Victims held until their pods are gone, with their placements when evicted (and
    /// their nodes' names: node ids change with the cluster's shape).
    terminating: BTreeMap<JobId, Vec<Option<(String, Placement)>>>,
    /// Running jobs whose pods moved to another GPU model's pool (their charge moved
    /// with them, whatever the new pool's quota).
    moved_pools: HashSet<JobId>,
    /// Pods placed after the last step: (node name, devices).
    before: HashMap<PodKey, (String, u32)>,
}

impl World {
    fn new(setup: Setup) -> World {
        let rows: Vec<Row> = setup
            .nodes
            .iter()
            .enumerate()
            .map(|(i, &(gpus, model, leaf))| Row {
                name: format!("n{i}"),
                model,
                gpus,
                leaf,
                unhealthy: 0,
            })
            .collect();
        let spec = spec_of(&rows);
        let tenants =
            Tenants::resolve(&tenant_configs(&setup.tenants), &spec).expect("valid tenants");
        let binder = Arc::new(AtomicU8::new(BIND_NOW));
        let mut s = Scheduler::with_tenants(
            scheduler_profile(setup.policy, setup.preemption),
            Box::new(SwitchedBinder(binder.clone())),
            spec,
            tenants,
        );
        if setup.hold_victims {
            s.hold_victims_until_gone();
        }
        World {
            added: rows.len(),
            setup,
            s,
            binder,
            rows,
            now: 0,
            jobs: BTreeMap::new(),
            gone: HashSet::new(),
            partial: HashSet::new(),
            awaiting: BTreeSet::new(),
            terminating: BTreeMap::new(),
            moved_pools: HashSet::new(),
            before: HashMap::new(),
        }
    }

    fn running_ids(&self) -> Vec<JobId> {
        let mut ids: Vec<JobId> = self.s.running().keys().copied().collect();
        ids.sort();
        ids
    }

    fn pending_ids(&self) -> BTreeSet<JobId> {
        self.s.waiting().map(|w| w.job.id).collect()
    }

    fn pick<T: Copy>(items: &[T], at: usize) -> Option<T> {
        (!items.is_empty()).then(|| items[at % items.len()])
    }

    /// Jobs that stopped running without the test finishing them: once their last pod
    /// went (released, or its node removed) they are gone, unless requeued.
    fn settle_released(&mut self, touched: &[JobId]) {
        let pending = self.pending_ids();
        for &job in touched {
            if !self.s.running().contains_key(&job) && !pending.contains(&job) {
                self.gone.insert(job);
            }
        }
    }

    fn forget_if_stopped(&mut self) {
        let running = self.s.running();
        self.partial.retain(|j| running.contains_key(j));
        self.awaiting.retain(|j| running.contains_key(j));
        self.terminating.retain(|j, _| running.contains_key(j));
        self.moved_pools.retain(|j| running.contains_key(j));
    }

    fn set_cluster(&mut self) {
        let running_before: Vec<JobId> = self.running_ids();
        let reshaped = self.s.set_cluster(spec_of(&self.rows), self.now);
        for key in &reshaped.lost_bound {
            self.partial.insert(key.job);
        }
        for job in &reshaped.requeued {
            assert!(
                running_before.contains(job),
                "{job:?} requeued but was not running"
            );
        }
        self.settle_released(&running_before);
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Submit {
                tenant,
                ref shape,
                pools,
                priority,
                cpu,
            } => {
                let id = JobId(self.jobs.len() as u32);
                // Nodes allocate 64 CPUs: a lone pod may ask more than any node has, a
                // gang's pods more than the nodes hold together.
                let pod = |gpu| PodRequest {
                    cpu_milli: cpu,
                    ..PodRequest::gpus(gpu)
                };
                let pods = match *shape {
                    Shape::Whole(n) => vec![pod(GpuRequest::Whole(n))],
                    Shape::Fraction(m) => vec![pod(GpuRequest::Fraction(m))],
                    Shape::Gang {
                        pods,
                        gpus,
                        launcher,
                    } => {
                        let mut all = vec![pod(GpuRequest::Whole(gpus)); pods];
                        if launcher {
                            all[0] = pod(GpuRequest::NONE);
                        }
                        all
                    }
                };
                let tenants = self.setup.tenants.len() as u16 + 1;
                let job = Job {
                    tenant: TenantId(tenant % tenants),
                    priority,
                    pools: match pools {
                        0 => vec![PoolId(0)],
                        1 => vec![PoolId(1)],
                        _ => Vec::new(),
                    },
                    submit_ms: self.now,
                    duration_ms: Some(3_600 * SECOND),
                    ..Job::new(id, pods)
                };
                self.jobs.insert(id, Arc::new(job.clone()));
                self.s.submit(job);
            }
            Op::Schedule { advance_s } => {
                self.now += advance_s * SECOND;
                self.round();
            }
            Op::Binder(mode) => self.binder.store(mode, Ordering::Relaxed),
            Op::Bound(at) => {
                let awaiting: Vec<JobId> = self.awaiting.iter().copied().collect();
                if let Some(job) = Self::pick(&awaiting, at) {
                    self.s.bound(job).expect("an awaiting job is running");
                    self.awaiting.remove(&job);
                }
            }
            Op::BindFailed(at) => {
                let awaiting: Vec<JobId> = self.awaiting.iter().copied().collect();
                if let Some(job) = Self::pick(&awaiting, at) {
                    let retry = self.s.bind_failed(job, self.now);
                    assert!(retry.is_some(), "{job:?} awaiting its binding is running");
                    self.awaiting.remove(&job);
                }
            }
            Op::Finish(at) => {
                if let Some(job) = Self::pick(&self.running_ids(), at) {
                    assert!(self.s.finish(job).is_some());
                    self.gone.insert(job);
                }
            }
            Op::ReleasePod(at, pod) => {
                if let Some(job) = Self::pick(&self.running_ids(), at) {
                    let pods = self.jobs[&job].pods.len() as u32;
                    let key = PodKey {
                        job,
                        pod: pod % pods,
                    };
                    if self.s.release_pod(key).is_some() {
                        self.partial.insert(job);
                    }
                    self.settle_released(&[job]);
                }
            }
            Op::Withdraw(at) => {
                let pending: Vec<JobId> = self.pending_ids().into_iter().collect();
                if let Some(job) = Self::pick(&pending, at) {
                    assert!(self.s.withdraw(job).is_some());
                    self.gone.insert(job);
                }
            }
            Op::HoldGoing(at) => {
                let terminating: Vec<JobId> = self.terminating.keys().copied().collect();
                if let Some(job) = Self::pick(&terminating, at) {
                    // Its live pods: those it still holds a placement for, as evicted, on
                    // their nodes as the cluster numbers them now.
                    let spec = self.s.state().spec().clone();
                    let live: Vec<_> = self.terminating[&job]
                        .iter()
                        .enumerate()
                        .map(|(pod, p)| {
                            let key = PodKey {
                                job,
                                pod: pod as u32,
                            };
                            self.s.state().placement(key)?;
                            let (name, placement) = p.as_ref()?;
                            let node = spec.node_id(name)?;
                            Some(Placement { node, ..*placement })
                        })
                        .collect();
                    self.s.hold_going(job, live);
                    self.settle_released(&[job]);
                }
            }
            Op::Health {
                node,
                device,
                healthy,
            } => {
                let index = node % self.rows.len();
                let row = &mut self.rows[index];
                let device = device % row.gpus;
                let id = self
                    .s
                    .state()
                    .spec()
                    .node_id(&row.name)
                    .expect("node known");
                self.s
                    .set_device_health(id, device, healthy)
                    .expect("known device");
                if healthy {
                    row.unhealthy &= !(1 << device);
                } else {
                    row.unhealthy |= 1 << device;
                }
            }
            Op::RemoveNode(at) => {
                if self.rows.len() > 1 {
                    self.rows.remove(at % self.rows.len());
                    self.set_cluster();
                }
            }
            Op::AddNode { gpus, model, leaf } => {
                self.rows.push(Row {
                    name: format!("n{}", self.added),
                    model,
                    gpus,
                    leaf,
                    unhealthy: 0,
                });
                self.added += 1;
                self.set_cluster();
            }
            Op::ChangeModel(at) => {
                let index = at % self.rows.len();
                self.rows[index].model = 1 - self.rows[index].model;
                let name = self.rows[index].name.clone();
                let spec = self.s.state().spec().clone();
                for (key, _) in self
                    .s
                    .state()
                    .placements()
                    .filter(|(_, p)| spec.node(p.placement.node).name == name)
                {
                    self.moved_pools.insert(key.job);
                }
                self.set_cluster();
            }
            Op::Resize(at, cpu) => {
                let keys: Vec<PodKey> = self.s.state().placements().map(|(k, _)| *k).collect();
                if let Some(key) = Self::pick(&keys, at) {
                    let memory = self
                        .s
                        .state()
                        .placement(key)
                        .unwrap()
                        .placement
                        .memory_bytes;
                    self.s.resize_pod(key, cpu, memory).expect("placed pod");
                }
            }
        }
        self.forget_if_stopped();
    }

    /// A round at the current time, checking its decisions.
    fn round(&mut self) {
        let pending_before = self.pending_ids();
        let running_before: HashSet<JobId> = self.s.running().keys().copied().collect();
        let placements_before: HashMap<PodKey, Placement> = self
            .s
            .state()
            .placements()
            .map(|(k, p)| (*k, p.placement))
            .collect();
        let decisions = self.s.schedule(self.now);
        let mut placed_now = HashSet::new();
        // Victims not held are back in their queues, and may be placed again at once.
        let mut evicted = HashSet::new();
        for decision in &decisions {
            match decision {
                Decision::Placed { job, plan, bound } => {
                    assert!(
                        pending_before.contains(job) || evicted.remove(job),
                        "{job:?} placed but was not pending: {decisions:?}"
                    );
                    assert!(placed_now.insert(*job), "{job:?} placed twice in a round");
                    let pods = self.jobs[job].pods.len();
                    let mut keys: Vec<u32> = plan.pods.iter().map(|(k, _)| k.pod).collect();
                    keys.sort();
                    assert_eq!(
                        keys,
                        (0..pods as u32).collect::<Vec<_>>(),
                        "{job:?}: a plan must place every pod once"
                    );
                    assert!(plan.pods.iter().all(|(k, _)| k.job == *job));
                    if !*bound {
                        self.awaiting.insert(*job);
                    }
                }
                Decision::Preempted { victims, by, .. } => {
                    assert!(!victims.is_empty(), "{by:?} preempted no one");
                    for victim in victims {
                        assert!(
                            running_before.contains(victim) || placed_now.contains(victim),
                            "{victim:?} preempted but was not running"
                        );
                        assert!(
                            !self.awaiting.contains(victim),
                            "{victim:?} preempted before it was bound"
                        );
                        assert!(
                            !self.terminating.contains_key(victim),
                            "{victim:?} preempted while terminating"
                        );
                        if self.setup.hold_victims {
                            let pods = self.jobs[victim].pods.len() as u32;
                            let spec = self.s.state().spec().clone();
                            let placements = (0..pods)
                                .map(|pod| {
                                    let key = PodKey { job: *victim, pod };
                                    let placement =
                                        placements_before.get(&key).copied().or_else(|| {
                                            self.s.state().placement(key).map(|p| p.placement)
                                        })?;
                                    Some((spec.node(placement.node).name.clone(), placement))
                                })
                                .collect();
                            self.terminating.insert(*victim, placements);
                        } else {
                            evicted.insert(*victim);
                        }
                        self.partial.remove(victim);
                    }
                }
                Decision::Requeued { job, .. } => {
                    assert!(
                        pending_before.contains(job) || evicted.contains(job),
                        "{job:?} requeued, not pending"
                    );
                }
            }
        }
        // Held victims stay running (terminating); others are back in their queues, or
        // placed again after their eviction.
        let pending = self.pending_ids();
        for (at, decision) in decisions.iter().enumerate() {
            if let Decision::Placed { job, plan, .. } = decision
                && self.s.running().contains_key(job)
                && !self.terminating.contains_key(job)
            {
                for (key, placement) in &plan.pods {
                    let placed = self.s.state().placement(*key).map(|p| p.placement);
                    assert_eq!(placed, Some(*placement), "{key:?} not where its plan says");
                }
            }
            if let Decision::Preempted { victims, .. } = decision {
                for victim in victims {
                    if self.setup.hold_victims {
                        assert!(!pending.contains(victim), "a held victim is not requeued");
                    } else {
                        let placed_again = decisions[at..]
                            .iter()
                            .any(|d| matches!(d, Decision::Placed { job, .. } if job == victim));
                        assert!(
                            placed_again || !self.s.running().contains_key(victim),
                            "{victim:?} still runs"
                        );
                    }
                }
            }
        }
        // A held victim whose every device its preemptor took holds nothing: it is gone.
        let terminating: Vec<JobId> = self.terminating.keys().copied().collect();
        self.settle_released(&terminating);
    }

    /// Every invariant, after any step.
    fn check(&mut self, step: &str) {
        let state = self.s.state();
        let spec = state.spec().clone();
        // The test's cluster is the scheduler's.
        assert_eq!(spec.nodes.len(), self.rows.len(), "{step}");
        check_devices_and_aggregates(state, &self.rows, step);
        // Every placement is a running job's; a running job is placed whole unless some
        // of its pods went; placements are assumed exactly while the binding is awaited.
        let mut pods_of: HashMap<JobId, usize> = HashMap::new();
        for (key, placed) in state.placements() {
            assert!(
                self.s.running().contains_key(&key.job),
                "{step}: pod {key:?} placed for a job not running"
            );
            *pods_of.entry(key.job).or_default() += 1;
            let awaiting = self.awaiting.contains(&key.job);
            let expected = if awaiting {
                PlacementPhase::Assumed
            } else {
                PlacementPhase::Bound
            };
            assert_eq!(placed.phase, expected, "{step}: pod {key:?}");
        }
        for (id, running) in self.s.running() {
            let placed = pods_of.get(id).copied().unwrap_or(0);
            assert!(placed > 0, "{step}: {id:?} runs with no pod placed");
            if !self.partial.contains(id) && !self.terminating.contains_key(id) {
                assert_eq!(
                    placed,
                    running.job.pods.len(),
                    "{step}: gang {id:?} partly placed"
                );
            }
            assert_eq!(
                running.tenant,
                running.job.tenant.index(),
                "{step}: {id:?}'s tenant"
            );
        }
        // Tenants' use is what their running jobs hold, per pool; a held victim is
        // charged nothing.
        let tenants = self.s.tenants();
        let mut used: HashMap<(usize, PoolId), u64> = HashMap::new();
        let mut held_by_job: HashMap<(JobId, PoolId), u64> = HashMap::new();
        for (key, placed) in state.placements() {
            let running = &self.s.running()[&key.job];
            if self.terminating.contains_key(&key.job) {
                continue;
            }
            let pool = spec.node(placed.placement.node).pool;
            let milli = placed.placement.gpus.total_milli();
            *used.entry((running.tenant, pool)).or_default() += milli;
            *held_by_job.entry((key.job, pool)).or_default() += milli;
        }
        for (id, running) in self.s.running() {
            for &(pool, milli) in &running.pools {
                let expected = if self.terminating.contains_key(id) {
                    0
                } else {
                    held_by_job.get(&(*id, pool)).copied().unwrap_or(0)
                };
                assert_eq!(milli, expected, "{step}: {id:?} holds on {pool:?}");
            }
            for (&(job, pool), &milli) in &held_by_job {
                if job == *id && milli > 0 {
                    assert!(
                        running.pools.iter().any(|&(p, _)| p == pool),
                        "{step}: {id:?} uncharged on {pool:?}"
                    );
                }
            }
        }
        for t in 0..tenants.len() {
            let moved = self
                .moved_pools
                .iter()
                .any(|j| self.s.running().get(j).is_some_and(|r| r.tenant == t));
            for p in 0..MODELS.len() {
                let pool = PoolId(p as u16);
                let placed = used.get(&(t, pool)).copied().unwrap_or(0);
                assert_eq!(
                    tenants.used(t, pool),
                    placed,
                    "{step}: tenant {t} on pool {p}: accounted use differs from its pods"
                );
                if tenants.mode(t) == TenantMode::Isolated && !moved {
                    assert!(
                        placed <= tenants.quota(t, pool),
                        "{step}: isolated tenant {t} uses {placed} of pool {p}, quota {}",
                        tenants.quota(t, pool)
                    );
                }
            }
        }
        // No pod newly placed on an unhealthy device.
        let mut now_placed = HashMap::new();
        for (key, placed) in state.placements() {
            let p = placed.placement;
            let name = spec.node(p.node).name.clone();
            let was_there = self
                .before
                .get(key)
                .is_some_and(|(n, devices)| *n == name && p.gpus.devices & !devices == 0);
            // A held victim takes again what its preemptor took of its devices.
            let held_again = self.terminating.get(&key.job).is_some_and(|placements| {
                placements[key.pod as usize]
                    .as_ref()
                    .is_some_and(|(n, evicted)| {
                        *n == name && p.gpus.devices & !evicted.gpus.devices == 0
                    })
            });
            if !was_there && !held_again {
                let row = self.rows.iter().find(|r| r.name == name).unwrap();
                assert_eq!(
                    p.gpus.devices & row.unhealthy,
                    0,
                    "{step}: {key:?} newly placed on an unhealthy device of {name}"
                );
            }
            now_placed.insert(*key, (name, p.gpus.devices));
        }
        self.before = now_placed;
        // No job lost: each is pending or running, once, unless the test saw it go.
        let waiting: Vec<JobId> = self.s.waiting().map(|w| w.job.id).collect();
        let pending: HashSet<JobId> = waiting.iter().copied().collect();
        assert_eq!(waiting.len(), pending.len(), "{step}: a job queued twice");
        assert_eq!(self.s.pending(), waiting.len(), "{step}: pending count");
        for &id in self.jobs.keys() {
            let running = self.s.running().contains_key(&id);
            let queued = pending.contains(&id);
            let gone = self.gone.contains(&id);
            assert!(
                !(running && queued),
                "{step}: {id:?} both running and pending"
            );
            assert!(
                running || queued || gone,
                "{step}: {id:?} vanished (neither running nor pending)"
            );
            assert!(
                !(gone && (running || queued)),
                "{step}: {id:?} came back after it went"
            );
        }
        // Room held for backfill heads is held for pending jobs, in groups that exist.
        for r in self.s.reservations() {
            assert!(
                pending.contains(&r.head.id),
                "{step}: hold for {:?}",
                r.head.id
            );
            for g in &r.groups {
                assert!(g.index() < spec.groups.len());
            }
        }
    }

    /// Every job still pending that the emptied cluster could hold alone is placed once
    /// everything else has finished.
    fn check_drained(&mut self) {
        for row in &mut self.rows {
            row.unhealthy = 0;
        }
        self.binder.store(BIND_NOW, Ordering::Relaxed);
        self.set_cluster();
        for _ in 0..(self.jobs.len() + 4) {
            for job in self.running_ids() {
                self.s.finish(job);
                self.gone.insert(job);
            }
            self.forget_if_stopped();
            self.now += 11 * 60 * SECOND;
            self.round();
            self.check("drain");
        }
        for job in self.running_ids() {
            self.s.finish(job);
            self.gone.insert(job);
        }
        self.forget_if_stopped();
        for id in self.pending_ids() {
            // The job alone, on the same empty cluster with the same tenants.
            let spec = spec_of(&self.rows);
            let tenants = Tenants::resolve(&tenant_configs(&self.setup.tenants), &spec)
                .expect("valid tenants");
            let mut alone = Scheduler::with_tenants(
                scheduler_profile(self.setup.policy, self.setup.preemption),
                Box::new(SwitchedBinder(Arc::new(AtomicU8::new(BIND_NOW)))),
                spec,
                tenants,
            );
            alone.submit((*self.jobs[&id]).clone());
            let mut now = self.now;
            let mut placed = false;
            for _ in 0..4 {
                placed |= !placed_jobs(&alone.schedule(now)).is_empty();
                now += 11 * 60 * SECOND;
            }
            assert!(
                !placed,
                "{id:?} stays pending on the emptied cluster, which holds it alone"
            );
        }
    }
}

/// Device use recomputed from the placements, against the nodes' states, and every
/// aggregate recomputed from that and the test's own record of device health.
fn check_devices_and_aggregates(state: &ClusterState, rows: &[Row], step: &str) {
    let spec = state.spec();
    let mut used = vec![[0u32; MAX_GPUS_PER_NODE]; spec.nodes.len()];
    let mut whole = vec![0u32; spec.nodes.len()];
    let mut sharing = vec![0u64; spec.nodes.len()];
    let mut cpu = vec![0u64; spec.nodes.len()];
    let mut pods = vec![0u32; spec.nodes.len()];
    for (key, placed) in state.placements() {
        let p = placed.placement;
        let n = p.node.index();
        assert!(p.gpus.devices == 0 || (1..=MILLI_PER_GPU).contains(&p.gpus.milli_each));
        assert_eq!(
            p.gpus.devices & !spec.node(p.node).all_devices(),
            0,
            "{step}: {key:?} on a device the node lacks"
        );
        for d in bits(p.gpus.devices) {
            if p.gpus.milli_each == MILLI_PER_GPU {
                assert!(
                    used[n][d] == 0,
                    "{step}: a whole device given twice ({key:?})"
                );
                whole[n] |= 1 << d;
            } else {
                assert!(
                    whole[n] & 1 << d == 0,
                    "{step}: a whole device shared ({key:?})"
                );
            }
            used[n][d] += p.gpus.milli_each;
            assert!(
                used[n][d] <= MILLI_PER_GPU,
                "{step}: device {d} of node {n} past capacity"
            );
        }
        if p.gpus.devices != spec.node(p.node).all_devices() || p.gpus.milli_each < MILLI_PER_GPU {
            sharing[n] += p.gpus.total_milli();
        }
        cpu[n] += p.cpu_milli;
        pods[n] += 1;
    }
    let mut groups = vec![GpuAggregate::default(); spec.groups.len()];
    let mut pools = vec![GpuAggregate::default(); spec.pools.len()];
    let mut total = GpuAggregate::default();
    for (id, node) in state.nodes() {
        let n = id.index();
        let node_spec = spec.node(id);
        let row = rows.iter().find(|r| r.name == node_spec.name).unwrap();
        assert_eq!(
            node.unhealthy(),
            row.unhealthy,
            "{step}: health of {}",
            row.name
        );
        let devices = node_spec.gpus();
        let mut free_mask = 0u32;
        let mut node_used = 0u64;
        let (mut roomiest, mut room_milli) = (0u32, 0u64);
        for (d, &device_used) in used[n].iter().enumerate().take(devices) {
            assert_eq!(
                node.device_used(d),
                device_used,
                "{step}: node {n} device {d}"
            );
            node_used += u64::from(device_used);
            let healthy = row.unhealthy & 1 << d == 0;
            if device_used == 0 && healthy {
                free_mask |= 1 << d;
            }
            if device_used > 0 && healthy {
                let room = MILLI_PER_GPU - device_used;
                roomiest = roomiest.max(room);
                room_milli += u64::from(room);
            }
        }
        assert_eq!(
            node.free_whole(),
            free_mask,
            "{step}: node {n} free devices"
        );
        assert_eq!(node.cpu_used, cpu[n], "{step}: node {n} CPU");
        assert_eq!(node.pods, pods[n], "{step}: node {n} pods");
        let free = free_mask.count_ones();
        let island = node_spec.links.largest_nvlink_island(free_mask);
        let group = spec.node_group[n].index();
        for aggregate in [
            &mut groups[group],
            &mut pools[node_spec.pool.index()],
            &mut total,
        ] {
            aggregate.nodes += 1;
            aggregate.gpus += devices as u32;
            aggregate.free_gpus += free;
            aggregate.free_nodes += u32::from(devices > 0 && free == devices as u32);
            aggregate.free_histogram[free as usize] += 1;
            aggregate.free_levels |= 1 << free;
            aggregate.used_milli += node_used;
            aggregate.sharing_milli += sharing[n];
            // Room left on healthy devices, free or shared.
            let room = free > 0 || room_milli > 0;
            aggregate.fragmented_nodes += u32::from(node_used > 0 && room);
            aggregate.nvlink_histogram[island as usize] += 1;
            aggregate.nvlink_levels |= 1 << island;
            if roomiest > 0 && roomiest > aggregate.shared_room_max {
                aggregate.shared_room_max = roomiest;
                aggregate.shared_room_at_max = 0;
            }
            if roomiest > 0 && roomiest == aggregate.shared_room_max {
                aggregate.shared_room_at_max += 1;
            }
            aggregate.shared_room_milli += room_milli;
        }
    }
    for (g, expected) in groups.iter().enumerate() {
        assert_eq!(
            state.group(GroupId(g as u32)),
            expected,
            "{step}: group {g}"
        );
    }
    for (p, expected) in pools.iter().enumerate() {
        assert_eq!(state.pool(PoolId(p as u16)), expected, "{step}: pool {p}");
    }
    assert_eq!(state.total(), &total, "{step}: cluster");
    let assumed: u64 = state
        .placements()
        .filter(|(_, p)| p.phase == PlacementPhase::Assumed)
        .map(|(_, p)| p.placement.gpus.total_milli())
        .sum();
    assert_eq!(state.assumed_milli(), assumed, "{step}: assumed milli-GPUs");
}

fn run_case(setup: Setup, ops: &[Op]) {
    let mut world = World::new(setup);
    world.check("start");
    for (i, op) in ops.iter().enumerate() {
        world.apply(op);
        world.check(&format!("step {i} ({op:?})"));
    }
    world.check_drained();
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(proptest_cases(256))
    })]

    #[test]
    fn the_scheduler_keeps_its_invariants_under_random_events(
        setup in setup(),
        ops in proptest::collection::vec(op(), 20..80),
    ) {
        run_case(setup, &ops);
    }
}
