//! The nodes a job may ever use. Some filters refuse a node by its spec alone (node
//! selectors and affinity, untolerated taints, an inference zone closed to training; see
//! [`Filter::judges_spec`]), and such a refusal stands whatever runs there. Whether a job
//! could ever be placed, in its pools or (a gang) inside one domain of a tier it requires,
//! and for a gang the tightest tier and fewest leaves it holds out for and the room held
//! for it as a backfill head, are judged on the nodes none of them refuses, and for a gang
//! on the pods each node could hold at once: a node's CPU, memory, ephemeral storage or pod
//! limit may let it run fewer of the gang's pods than its GPUs would. A gang with
//! last-resort nodes (an inference zone's, for training it lets in) is judged on its other
//! nodes too: the search's first pass, the tier and leaves it holds out for and the room
//! held for it are theirs where they could ever hold it.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::ClusterState;
use crate::model::{
    ClusterSpec, GpuRequest, GroupId, Job, JobShape, MILLI_PER_GPU, NodeId, NodeSpec, PodRequest,
    PoolId, Tier, TopologyNeed,
};

use super::plugin::{Filter, JobNodes, NodeView, PodContext};
use super::search::{
    FirstPass, LastResort, could_not_hold, fewest_leaves, node_sizes, some_domain_could_hold,
    some_domain_holds, tightest_possible_tier,
};
use super::{CycleState, Diagnosis, Profile, Status, pools_for};

/// What the nodes a job may use could ever hold, all free: judged once per cluster shape.
/// A single pod's is only `never`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// `Some`: they can never hold the job, and why.
    pub never: Option<Status>,
    /// Per pool of a gang, the tightest tier with one domain they could hold it in
    /// (`None`: only the whole pool, or not even that), and the fewest leaves one domain
    /// of that tier could hold it on (`None` with the tier, and where its last-resort nodes
    /// are needed: see [`reach`]).
    tightest: Vec<(PoolId, Option<Tier>, Option<usize>)>,
    /// For a gang, the GPUs of each node it could use at once; `None`: every GPU of every
    /// node of its pools.
    pub usable: Option<UsableGpus>,
    /// For a gang with last-resort nodes ([`LastResort`]), the reach of its other nodes,
    /// which the search's first pass is judged on; where they could ever hold it, the
    /// tightest tiers above are theirs (a domain that holds it only with last-resort nodes
    /// is none it holds out for).
    pub first_pass: Option<Arc<Reach>>,
}

impl Reach {
    /// The tightest tier one domain of one of `pools` (the job's, or some of them) could
    /// ever hold the gang in (`None`: only whole pools).
    pub fn tightest(&self, pools: &[PoolId]) -> Option<Tier> {
        self.tightest
            .iter()
            .filter(|(pool, ..)| pools.contains(pool))
            .filter_map(|&(_, tier, _)| tier)
            .min()
    }

    /// Per pool of `pools` where one domain of that tightest tier could ever hold the
    /// gang, the fewest leaves one could hold it on.
    pub fn fewest_leaves(&self, pools: &[PoolId]) -> Vec<(PoolId, usize)> {
        let tier = self.tightest(pools);
        (self.tightest.iter())
            .filter(|&&(pool, t, _)| pools.contains(&pool) && t == tier)
            .filter_map(|&(pool, _, leaves)| Some((pool, leaves?)))
            .collect()
    }
}

/// Written into the cycle state by the scheduler: what the gang's usable nodes could
/// ever hold. A search without it counts every node of the job's pools.
pub struct ReachOf(pub Arc<Reach>);

/// The job's reach over the nodes of its pools that no spec-judging filter refuses; the
/// cycle state is the one its PreFilters wrote.
pub fn reach(profile: &Profile, job: &Job, snapshot: &ClusterState, cycle: &CycleState) -> Reach {
    let gang = job.pods.len() > 1;
    let pools = pools_for(job, snapshot);
    let shape = JobShape::of(job);
    let spec = snapshot.spec();
    let judged = judged_nodes(profile, job, snapshot, cycle, pools, true);
    let may_use = judged.as_ref().map(|(may_use, _)| may_use.as_slice());
    let usable = UsableGpus::of(spec, pools, may_use, alike_gpu_pods(job));
    let last_resort = cycle.read::<LastResort>().is_some() && cycle.read::<FirstPass>().is_none();
    let first_pass = (gang && last_resort).then(|| {
        let mut first = cycle.clone();
        first.write(FirstPass);
        Arc::new(reach(profile, job, snapshot, &first))
    });
    let first_holds = first_pass.as_ref().filter(|first| first.never.is_none());
    let tightest = match (gang, first_holds) {
        (_, Some(first)) => first.tightest.clone(),
        (true, None) => pools
            .iter()
            .map(|&p| {
                let tier = tightest_possible_tier(&shape, snapshot, &[p], usable.as_ref());
                // A gang with last-resort nodes its other nodes could never hold takes as
                // few of them as it needs, however many leaves that spans.
                let leaves = (tier.filter(|_| !last_resort))
                    .and_then(|t| fewest_leaves(&shape, snapshot, &[p], t, usable.as_ref()));
                (p, tier, leaves)
            })
            .collect(),
        (false, None) => Vec::new(),
    };
    let refusals = judged.as_ref().map(|(_, refusals)| refusals.message());
    let explained = |why: &str| match &refusals {
        Some(refusals) => format!("{why}: {refusals}"),
        None => why.to_owned(),
    };
    let fits_some_pool = |usable: &UsableGpus| {
        pools.iter().any(|&p| {
            let nodes = spec.pool(p).nodes.iter().copied();
            shape.fits(&node_sizes(spec, nodes, Some(usable)))
        })
    };
    // Their GPUs first, then what else each node holds of the pods, then a required tier.
    let gpus_never_fit =
        UsableGpus::of(spec, pools, may_use, None).is_some_and(|gpus| !fits_some_pool(&gpus));
    let never = match gpus_never_fit {
        true if gang => Some(explained(
            "the nodes its pods may use can never hold the whole gang",
        )),
        true => Some(explained("no node it may use can ever hold it")),
        false => None,
    };
    let required = job.topology.filter(|need| need.required);
    let never = never
        .or_else(|| gang.then(|| packing_shortfall(job, spec, pools, may_use)).flatten())
        .or_else(|| {
            let need = required.filter(|_| gang && job.pods.iter().all(|p| p.gpu.is_none()))?;
            gang_without_gpus_short(profile, job, snapshot, cycle, pools, need.tier)
        })
        .or_else(|| {
            let (need, usable) = required.zip(usable.as_ref())?;
            (!some_domain_could_hold(&shape, snapshot, pools, need.tier, Some(usable))).then(|| {
                explained(match gang {
                    true => "no one domain of its required tier, of the nodes its pods may use, can ever hold the gang",
                    false => "no node it may use that is inside a domain of its required tier can ever hold it",
                })
            })
        });
    Reach {
        never: never.map(Status::unresolvable),
        tightest,
        usable: usable.filter(|_| gang),
        first_pass,
    }
}

/// Per node of the cluster, whether some pod of the job with GPUs (`gpu_pods`) or without
/// may use it, and the refusals, as the filters that judge nodes by their spec find;
/// `None` when none of them does.
fn judged_nodes(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    cycle: &CycleState,
    pools: &[PoolId],
    gpu_pods: bool,
) -> Option<(Vec<bool>, Diagnosis)> {
    let judges: Vec<&Arc<dyn Filter>> = profile
        .filters
        .iter()
        .filter(|f| f.judges_spec(job, snapshot.spec(), cycle))
        .collect();
    (!judges.is_empty()).then(|| usable_nodes(job, snapshot, cycle, pools, &judges, gpu_pods))
}

/// Why a gang whose pods all ask no GPU, and that requires `tier`, could never be placed:
/// no one domain of that tier, of the nodes its pods may use, holds all of them at once
/// (kind of pod by kind of pod, as [`packing_shortfall`] counts them). The search keeps
/// such a gang to one domain; without this it would wait for good.
fn gang_without_gpus_short(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    cycle: &CycleState,
    pools: &[PoolId],
    tier: Tier,
) -> Option<String> {
    let spec = snapshot.spec();
    let judged = judged_nodes(profile, job, snapshot, cycle, pools, false);
    let kinds = pod_kinds(job);
    let holds = some_domain_holds(spec, pools, tier, |nodes| {
        let may_use = |n: &NodeId| {
            judged
                .as_ref()
                .is_none_or(|(may_use, _)| may_use[n.index()])
        };
        let usable: Vec<&NodeSpec> = nodes.filter(may_use).map(|n| spec.node(n)).collect();
        (kinds.iter())
            .all(|(pod, wanted)| held_at_once(usable.iter().copied(), pod, *wanted) >= *wanted)
    });
    let why = "no one domain of its required tier, of the nodes its pods may use, can ever hold \
               all of the gang's pods at once";
    (!holds).then(|| match judged {
        Some((_, refusals)) => format!("{why}: {}", refusals.message()),
        None => why.to_owned(),
    })
}

/// The GPUs of each node of its pools a single pod could use, as the filters that judge
/// nodes by their spec allow; `None`: all of them. Judged afresh, for the room held for
/// it, and not kept: a vector over the cluster per waiting pod would cost too much.
pub fn single_pod_usable(
    profile: &Profile,
    job: &Job,
    snapshot: &ClusterState,
    cycle: &CycleState,
) -> Option<UsableGpus> {
    let pools = pools_for(job, snapshot);
    let judged = judged_nodes(profile, job, snapshot, cycle, pools, true)?;
    UsableGpus::of(snapshot.spec(), pools, Some(&judged.0), None)
}

/// Reaches by what decides them, for jobs no filter judges nodes for by their spec: jobs
/// of one tenant alike in pools, topology need and pods (in order) share one.
#[derive(Default)]
pub struct ReachesByShape {
    judged: HashMap<ReachKey, Arc<Reach>>,
}

/// What decides a job's reach when no filter judges nodes for it by their spec.
#[derive(PartialEq, Eq, Hash)]
struct ReachKey {
    tenant: usize,
    pools: Vec<PoolId>,
    topology: Option<TopologyNeed>,
    /// Runs of pods asking alike.
    pods: Vec<(PodRequest, usize)>,
    /// Whether it has last-resort nodes ([`LastResort`]).
    last_resort: bool,
}

/// Shapes remembered at most; past that they are forgotten, and judged again as they come.
const MAX_SHAPES: usize = 4096;

impl ReachesByShape {
    /// The reach of `job` of `tenant`: the one judged for a job alike, or `judge`'s (which
    /// judges it on the pools its tenant's quota could ever admit it on). Whether a filter
    /// judges nodes for it is asked of `job` itself, whose pools include those.
    pub fn get_or_judge(
        &mut self,
        profile: &Profile,
        (job, tenant): (&Job, usize),
        spec: &ClusterSpec,
        cycle: &CycleState,
        judge: impl FnOnce() -> Reach,
    ) -> Arc<Reach> {
        if profile
            .filters
            .iter()
            .any(|f| f.judges_spec(job, spec, cycle))
        {
            return Arc::new(judge());
        }
        let mut pods: Vec<(PodRequest, usize)> = Vec::new();
        for pod in &job.pods {
            match pods.last_mut() {
                Some((last, count)) if last == pod => *count += 1,
                _ => pods.push((*pod, 1)),
            }
        }
        let key = ReachKey {
            tenant,
            pools: job.pools.clone(),
            topology: job.topology,
            pods,
            last_resort: cycle.read::<LastResort>().is_some(),
        };
        if let Some(judged) = self.judged.get(&key) {
            return judged.clone();
        }
        if self.judged.len() >= MAX_SHAPES {
            self.judged.clear();
        }
        (self.judged.entry(key).or_insert_with(|| Arc::new(judge()))).clone()
    }

    /// The cluster or the tenants changed shape: every reach is judged again.
    pub fn clear(&mut self) {
        self.judged.clear();
    }
}

/// The request every GPU pod of a gang asks alike, if they do.
fn alike_gpu_pods(job: &Job) -> Option<&PodRequest> {
    let mut gpu_pods = job.pods.iter().filter(|p| !p.gpu.is_none());
    let first = gpu_pods.next().filter(|_| job.pods.len() > 1)?;
    gpu_pods.all(|p| p == first).then_some(first)
}

/// Per node of the cluster, how many of its GPUs a job could ever use at once: none on a
/// node outside its pools or that a spec-judging filter refuses its GPU pods, and for a
/// gang whose GPU pods ask alike, no more than the pods the node holds at once (its CPU,
/// memory, ephemeral storage and pod limit allowing) could use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsableGpus {
    /// Per node.
    gpus: Vec<u8>,
    /// Per search group, whether a node of it has any.
    in_group: Vec<bool>,
}

impl UsableGpus {
    /// `None` where the job could use every GPU of every node of its pools. `alike`: the
    /// request every GPU pod of a gang asks alike, by which the nodes are narrowed.
    fn of(
        spec: &ClusterSpec,
        pools: &[PoolId],
        may_use: Option<&[bool]>,
        alike: Option<&PodRequest>,
    ) -> Option<Self> {
        if may_use.is_none() && alike.is_none() {
            return None;
        }
        let mut usable = vec![0u8; spec.nodes.len()];
        let mut narrowed = may_use.is_some();
        for id in pools.iter().flat_map(|&p| &spec.pool(p).nodes) {
            if may_use.is_some_and(|may_use| !may_use[id.index()]) {
                continue;
            }
            let node = spec.node(*id);
            let all = node.gpus() as u64;
            let gpus = alike.map_or(all, |pod| {
                let pods = node.holds_at_once(pod);
                let used = match pod.gpu {
                    GpuRequest::Whole(w) => pods.saturating_mul(u64::from(w)),
                    GpuRequest::Fraction(milli) => pods.div_ceil(u64::from(MILLI_PER_GPU / milli)),
                };
                used.min(all)
            });
            narrowed |= gpus < all;
            usable[id.index()] = gpus as u8;
        }
        let in_group = (spec.groups.iter())
            .map(|group| group.nodes.iter().any(|n| usable[n.index()] > 0))
            .collect();
        narrowed.then_some(Self {
            gpus: usable,
            in_group,
        })
    }

    /// The GPUs of `node` the job could use at once.
    pub fn of_node(&self, node: NodeId) -> usize {
        usize::from(self.gpus[node.index()])
    }

    /// Whether the job could use a GPU of some node of `group`.
    pub fn in_group(&self, group: GroupId) -> bool {
        self.in_group[group.index()]
    }
}

/// Why a gang's pods, each of which fits a node alone, could never all run at once on the
/// nodes they may use (for its GPU pods, those of one of its pools that `may_use` marks,
/// as a gang never mixes GPU models; for a launcher, any node, or any of its pools for a
/// gang of no GPUs): judged per kind of pod
/// (pods asking alike), by how many of that kind those nodes, all empty, hold at once, and
/// for a gang of one launcher and workers asking alike, by how many workers they hold
/// beside the launcher wherever it goes. Exact for those gangs; other kinds of pod that
/// only crowd each other out are not caught.
fn packing_shortfall(
    job: &Job,
    spec: &ClusterSpec,
    pools: &[PoolId],
    may_use: Option<&[bool]>,
) -> Option<String> {
    let kinds = pod_kinds(job);
    let (launchers, workers): (Vec<_>, Vec<_>) =
        kinds.iter().partition(|(pod, _)| pod.gpu.is_none());
    let one_launcher_beside_workers = match (&launchers[..], &workers[..]) {
        ([(launcher, 1)], [(worker, wanted)]) => Some((launcher, worker, *wanted)),
        _ => None,
    };
    // A launcher beside GPU pods may go to any node; a gang of no GPUs keeps to its pools.
    let launcher_may_go = |node: &&NodeSpec| !workers.is_empty() || pools.contains(&node.pool);
    let launchers_short = first_short(&kinds, false, || spec.nodes.iter().filter(launcher_may_go));
    let shortfall = launchers_short.or_else(|| {
        let in_pool = |pool: PoolId| {
            let may_go = |node: &NodeSpec, id: NodeId| {
                node.pool == pool && may_use.is_none_or(|may_use| may_use[id.index()])
            };
            let nodes = spec.pool(pool).nodes.iter();
            let usable = nodes.filter(|&&n| may_go(spec.node(n), n));
            first_short(&kinds, true, || usable.clone().map(|&n| spec.node(n))).or_else(|| {
                let (launcher, worker, wanted) = one_launcher_beside_workers?;
                let elsewhere = (spec.nodes.iter().enumerate()).any(|(i, node)| {
                    !may_go(node, NodeId(i as u32)) && node.holds_at_once(launcher) > 0
                });
                let held = match elsewhere {
                    true => wanted,
                    false => held_beside(usable.clone().map(|&n| spec.node(n)), worker, launcher),
                };
                (held < wanted).then_some(Shortfall {
                    held,
                    wanted,
                    pod: *worker,
                    beside_launcher: true,
                })
            })
        };
        let per_pool: Vec<_> = pools.iter().map(|&p| in_pool(p)).collect::<Option<_>>()?;
        per_pool.into_iter().max_by_key(|short| short.held)
    })?;
    let Shortfall {
        held,
        wanted,
        pod,
        beside_launcher,
    } = shortfall;
    let gpus = match pod.gpu {
        GpuRequest::Whole(0) => "without GPUs".to_owned(),
        gpu => format!("of {gpu} GPUs"),
    };
    let beside = match beside_launcher {
        true => " beside its launcher",
        false => "",
    };
    let one_pool = match pools.len() > 1 && !pod.gpu.is_none() {
        true => " in any one pool (a gang never mixes GPU models)",
        false => "",
    };
    Some(format!(
        "the nodes its pods may use hold at most {held} of its {wanted} pods {gpus}{beside} at once{one_pool}, \
         for the CPU, memory, ephemeral storage or pods each node allocates"
    ))
}

/// The job's pods by kind (pods asking alike), each with how many ask it, in order.
fn pod_kinds(job: &Job) -> Vec<(PodRequest, u64)> {
    let mut kinds: Vec<(PodRequest, u64)> = Vec::new();
    let mut kind_of: HashMap<PodRequest, usize> = HashMap::new();
    for pod in &job.pods {
        let kind = *kind_of.entry(*pod).or_insert_with(|| {
            kinds.push((*pod, 0));
            kinds.len() - 1
        });
        kinds[kind].1 += 1;
    }
    kinds
}

/// Of a gang's pods, `held` of the `wanted` asking `pod` fit at once, too few.
struct Shortfall {
    held: u64,
    wanted: u64,
    pod: PodRequest,
    /// Counted with the gang's launcher on one of the nodes.
    beside_launcher: bool,
}

/// Of the kinds of pod (`(pod, how many)`) with GPUs (`gpu_pods`) or without, the first
/// the nodes hold too few of at once.
fn first_short<'a, I: Iterator<Item = &'a NodeSpec>>(
    kinds: &[(PodRequest, u64)],
    gpu_pods: bool,
    nodes: impl Fn() -> I,
) -> Option<Shortfall> {
    kinds
        .iter()
        .filter(|(pod, _)| pod.gpu.is_none() != gpu_pods)
        .map(|&(pod, wanted)| Shortfall {
            held: held_at_once(nodes(), &pod, wanted),
            wanted,
            pod,
            beside_launcher: false,
        })
        .find(|short| short.held < short.wanted)
}

/// How many pods asking `worker` the nodes, all empty, hold at once with `launcher` on one
/// of them, placed where it takes the fewest.
fn held_beside<'a>(
    nodes: impl Iterator<Item = &'a NodeSpec>,
    worker: &PodRequest,
    launcher: &PodRequest,
) -> u64 {
    let mut all = 0u64;
    let mut least_lost: Option<u64> = None;
    for node in nodes {
        let alone = node.holds_at_once(worker);
        all = all.saturating_add(alone);
        if let Some(beside) = node.holds_beside(worker, Some(launcher)) {
            let lost = alone.saturating_sub(beside);
            least_lost = Some(least_lost.map_or(lost, |least| least.min(lost)));
        }
    }
    // A launcher no node holds was told as such already.
    least_lost.map_or(0, |lost| all.saturating_sub(lost))
}

/// How many pods asking `pod` the nodes, all empty, hold at once, counted up to `wanted`.
fn held_at_once<'a>(
    nodes: impl Iterator<Item = &'a NodeSpec>,
    pod: &PodRequest,
    wanted: u64,
) -> u64 {
    let mut held = 0u64;
    for node in nodes {
        held = held.saturating_add(node.holds_at_once(pod));
        if held >= wanted {
            break;
        }
    }
    held
}

/// Per node of the cluster, whether some pod of the job with GPUs (`gpu_pods`) or without
/// may use it; and the refusals, counted per reason over the nodes of its pools.
fn usable_nodes(
    job: &Job,
    snapshot: &ClusterState,
    cycle: &CycleState,
    pools: &[PoolId],
    judges: &[&Arc<dyn Filter>],
    gpu_pods: bool,
) -> (Vec<bool>, Diagnosis) {
    let spec = snapshot.spec();
    // Pods next to each other with the same node rules are judged once.
    let mut pods: Vec<u32> = Vec::new();
    for (index, request) in job.pods.iter().enumerate() {
        let index = index as u32;
        let same_rules = |p: &u32| match (job.constraints_of(*p), job.constraints_of(index)) {
            (Some(a), Some(b)) => std::ptr::eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        if request.gpu.is_none() != gpu_pods && !pods.last().is_some_and(same_rules) {
            pods.push(index);
        }
    }
    let mut usable = vec![false; spec.nodes.len()];
    let mut usable_count = 0;
    let mut refusals = Diagnosis::default();
    for &pool in pools {
        for &id in &spec.pool(pool).nodes {
            let view = NodeView::of(snapshot, id);
            let mut refused = None;
            let may_use = |index: &u32| {
                let pod = PodContext {
                    job,
                    index: *index,
                    request: &job.pods[*index as usize],
                    placed: &[],
                    placed_nodes: &JobNodes::default(),
                    alike_left: 1,
                };
                let status = judges
                    .iter()
                    .map(|f| f.filter(&pod, cycle, view))
                    .find(|s| !s.is_success());
                let passes = status.is_none();
                refused = refused.take().or(status);
                passes
            };
            if pods.iter().any(may_use) {
                usable[id.index()] = true;
                usable_count += 1;
            } else if let Some(status) = refused {
                refusals.add(status.reason, 1);
            }
            refusals.nodes += 1;
        }
    }
    if usable_count > 0 {
        refusals.add(could_not_hold(job).into(), usable_count);
    }
    (usable, refusals)
}
