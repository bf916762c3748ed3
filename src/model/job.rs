//! Jobs and pods. The unit of scheduling is the job: a gang whose pods are placed all or
//! none (a lone pod is a job of one).

use std::sync::Arc;

use super::{
    GpuRequest, JobId, MAX_GPUS_PER_NODE, MILLI_PER_GPU, NodeConstraints, NodeSpec, PodRules,
    PoolId, TenantId, pods_that_fit, untolerated,
};

/// What one pod asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PodRequest {
    pub gpu: GpuRequest,
    pub cpu_milli: u64,
    pub memory_bytes: u64,
    pub ephemeral_bytes: u64,
}

impl PodRequest {
    pub fn gpus(gpu: GpuRequest) -> Self {
        Self {
            gpu,
            cpu_milli: 0,
            memory_bytes: 0,
            ephemeral_bytes: 0,
        }
    }

    /// What the pod takes of a node besides GPUs, in [`NodeSpec::allocatable`]'s order:
    /// a pod slot, CPU, memory, ephemeral storage.
    #[inline]
    pub fn node_asks(&self) -> [u64; 4] {
        [1, self.cpu_milli, self.memory_bytes, self.ephemeral_bytes]
    }
}

/// What a job is for; inference and training are placed differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    Train,
    Inference,
    Dev,
    Unknown,
}

impl JobKind {
    pub fn parse(text: &str) -> Option<JobKind> {
        match text {
            "train" => Some(JobKind::Train),
            "inference" => Some(JobKind::Inference),
            "dev" => Some(JobKind::Dev),
            "unknown" | "" => Some(JobKind::Unknown),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            JobKind::Train => "train",
            JobKind::Inference => "inference",
            JobKind::Dev => "dev",
            JobKind::Unknown => "unknown",
        }
    }
}

/// A level of the network that a job's pods can be asked to stay within.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    /// One scale-up domain (HBD): the nodes of one NVLink fabric.
    Hbd,
    /// One leaf switch group (NodeNetGroup).
    Leaf,
    /// One spine.
    Spine,
    /// One superspine.
    Superspine,
}

impl Tier {
    pub fn name(self) -> &'static str {
        match self {
            Tier::Hbd => "hbd",
            Tier::Leaf => "leaf",
            Tier::Spine => "spine",
            Tier::Superspine => "superspine",
        }
    }
}

/// A job's topology need: `required` never crosses the tier (the job waits instead);
/// preferred is best effort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TopologyNeed {
    pub tier: Tier,
    pub required: bool,
}

impl TopologyNeed {
    /// Parses `required:TIER` or `preferred:TIER` (TIER: hbd, leaf, spine, superspine);
    /// an empty text is no need.
    pub fn parse(text: &str) -> Result<Option<TopologyNeed>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let (mode, tier) = text
            .split_once(':')
            .ok_or_else(|| format!("`{text}` is not `required:TIER` or `preferred:TIER`"))?;
        let required = match mode {
            "required" => true,
            "preferred" => false,
            _ => return Err(format!("`{mode}` is neither `required` nor `preferred`")),
        };
        let tier = [Tier::Hbd, Tier::Leaf, Tier::Spine, Tier::Superspine]
            .into_iter()
            .find(|t| t.name() == tier)
            .ok_or_else(|| {
                format!("unknown tier `{tier}` (known: hbd, leaf, spine, superspine)")
            })?;
        Ok(Some(TopologyNeed { tier, required }))
    }
}

impl std::fmt::Display for TopologyNeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = if self.required {
            "required"
        } else {
            "preferred"
        };
        write!(f, "{mode}:{}", self.tier.name())
    }
}

/// A job: a gang of pods with one owner, priority and GPU-model choice.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: JobId,
    pub name: String,
    pub tenant: TenantId,
    pub priority: i32,
    pub kind: JobKind,
    /// The pools (GPU models) the job accepts; empty means any pool.
    pub pools: Vec<PoolId>,
    pub pods: Vec<PodRequest>,
    /// Submission time, milliseconds on the world's clock.
    pub submit_ms: u64,
    /// Run time once every pod is placed; `None` when unknown.
    pub duration_ms: Option<u64>,
    /// Where its pods must or should stay; `None`: as close as the search can.
    pub topology: Option<TopologyNeed>,
    /// Each pod's node selector, node affinity, tolerations and extended resources, by pod
    /// index (the members of a gang may differ: a launcher and its workers); a pod past
    /// the end, or `None`, may go to any node.
    pub constraints: Vec<Option<Arc<NodeConstraints>>>,
    /// Who its pods are, with their required inter-pod affinity and anti-affinity and
    /// their hard topology spread; `None` (the simulator's jobs): no rules, and no other
    /// pod's rules select it.
    pub pod_rules: Option<Arc<PodRules>>,
    /// Whether it may make room by preemption (of any kind) when the profile preempts;
    /// `false` for Kubernetes pods with `preemptionPolicy: Never`, which wait for room.
    pub may_preempt: bool,
}

impl Job {
    /// A job of these pods named `job-{id}`, with everything else plain: the default
    /// tenant, priority 0, training, any GPU model, submitted at time 0, its run time
    /// unknown, no topology need, no rules, free to preempt.
    pub fn new(id: JobId, pods: Vec<PodRequest>) -> Self {
        Self {
            id,
            name: format!("job-{}", id.0),
            tenant: TenantId(0),
            priority: 0,
            kind: JobKind::Train,
            pools: Vec::new(),
            pods,
            submit_ms: 0,
            duration_ms: None,
            topology: None,
            constraints: Vec::new(),
            pod_rules: None,
            may_preempt: true,
        }
    }

    /// Milli-GPUs of the whole job.
    pub fn total_milli(&self) -> u64 {
        self.pods.iter().map(|p| p.gpu.milli()).sum()
    }

    pub fn accepts_pool(&self, pool: PoolId) -> bool {
        self.pools.is_empty() || self.pools.contains(&pool)
    }

    /// The node rules of pod `pod` (`None`: any node).
    pub fn constraints_of(&self, pod: u32) -> Option<&NodeConstraints> {
        self.constraints.get(pod as usize)?.as_deref()
    }

    /// The node rules of the pods that have some, each distinct set once where pods next
    /// to each other share it (as the members of a gang built alike do).
    pub fn all_constraints(&self) -> impl Iterator<Item = &NodeConstraints> {
        let mut previous: Option<&Arc<NodeConstraints>> = None;
        self.constraints.iter().flatten().filter_map(move |c| {
            let repeated = previous.is_some_and(|p| Arc::ptr_eq(p, c));
            previous = Some(c);
            (!repeated).then_some(&**c)
        })
    }

    /// Whether some pod's node rules (`None`: none) pass `test`.
    pub fn some_pod(&self, test: impl Fn(Option<&NodeConstraints>) -> bool) -> bool {
        let unconstrained = self.constraints.len() < self.pods.len()
            || self.constraints.iter().any(Option::is_none);
        (unconstrained && test(None)) || self.all_constraints().any(|c| test(Some(c)))
    }

    /// Gives every pod the same node rules.
    pub fn set_constraints(&mut self, constraints: NodeConstraints) {
        self.constraints = vec![Some(Arc::new(constraints)); self.pods.len()];
    }

    /// Whether pod `pod` may go on the node at all, room aside (see [`Job::rules_allow`]).
    pub fn may_use(&self, pod: u32, node: &NodeSpec) -> bool {
        self.rules_allow(self.constraints_of(pod), node)
    }

    /// Whether a pod of the job with node rules `rules` (`None`: none) may go on the node
    /// at all, room aside: the job's pool, the node selector and required affinity, the
    /// extended resources the node must list, and the taints it must tolerate.
    pub fn rules_allow(&self, rules: Option<&NodeConstraints>, node: &NodeSpec) -> bool {
        let tolerations = rules.map_or(&[][..], |c| &c.tolerations);
        self.accepts_pool(node.pool)
            && rules.is_none_or(|c| {
                c.selects(&node.name, &node.labels) && c.lacking(&node.extended).is_none()
            })
            && untolerated(tolerations, &node.taints).is_none()
    }

    /// The node rules (`None`: none) of the pods that ask for GPUs, or of every pod of a
    /// job asking for none: a gang's inter-pod rules are those of its member asking for the
    /// most GPUs, and its workers are made alike, while a launcher without GPUs (and
    /// perhaps without node rules) follows them. Each distinct set once.
    pub fn gpu_pod_rules(&self) -> Vec<Option<&NodeConstraints>> {
        let asks_for_gpus = self.pods.iter().any(|p| !p.gpu.is_none());
        let mut rules: Vec<Option<&NodeConstraints>> = Vec::new();
        for (index, pod) in self.pods.iter().enumerate() {
            if asks_for_gpus && pod.gpu.is_none() {
                continue;
            }
            let own = self.constraints_of(index as u32);
            let seen = |r: &Option<&NodeConstraints>| match (r, own) {
                (Some(a), Some(b)) => std::ptr::eq(*a, b),
                (a, b) => a.is_none() && b.is_none(),
            };
            if !rules.iter().any(seen) {
                rules.push(own);
            }
        }
        rules
    }

    pub fn is_gang(&self) -> bool {
        self.pods.len() > 1
    }
}

/// How wide a job's pods are, read once for what judges the job from aggregates alone:
/// the queue's admission bound, the search's groups and domains, the group filters and
/// scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodWidths {
    pub pods: u64,
    /// Whole GPUs in all.
    pub whole_gpus: u64,
    /// The fewest whole GPUs any pod asks for (0 when some pod asks for a fraction or none).
    pub narrowest_whole: u32,
    /// The most whole GPUs any pod asks for.
    pub widest_whole: u32,
    /// The smallest GPU request of the pods that ask for GPUs; `None` when none does.
    pub narrowest_gpu: Option<GpuRequest>,
    /// Whole GPUs of every pod, when all pods ask for the same whole GPUs.
    pub uniform_whole: Option<u32>,
    /// The pods that ask for whole GPUs.
    pub whole_pods: u64,
    /// The fewest whole GPUs any of those asks for (0 when there are none).
    pub narrowest_of_whole: u32,
}

impl PodWidths {
    pub fn of(job: &Job) -> Self {
        let gpus = || job.pods.iter().map(|p| p.gpu);
        let first = job.pods.first().map(|p| p.gpu);
        let uniform = gpus().all(|g| Some(g) == first);
        Self {
            pods: job.pods.len() as u64,
            whole_gpus: gpus().map(|g| u64::from(g.whole())).sum(),
            narrowest_whole: gpus().map(GpuRequest::whole).min().unwrap_or(0),
            widest_whole: gpus().map(GpuRequest::whole).max().unwrap_or(0),
            narrowest_gpu: gpus().filter(|g| !g.is_none()).min_by_key(|g| g.milli()),
            uniform_whole: first.map(|g| g.whole()).filter(|&w| uniform && w > 0),
            whole_pods: gpus().filter(|g| g.whole() > 0).count() as u64,
            narrowest_of_whole: gpus()
                .map(GpuRequest::whole)
                .filter(|&w| w > 0)
                .min()
                .unwrap_or(0),
        }
    }
}

/// What a job needs of nodes that are all free, read once, to judge sets of nodes by their
/// sizes alone: whether they could ever hold it.
pub struct JobShape {
    /// The fewest devices that could hold the job: its whole GPUs, and for its fractional
    /// pods the most that any size forces (pods of at least `m` milli-GPUs share a device
    /// at most `1000 / m` at a time), or their total, whichever is more.
    fewest_devices: u64,
    /// `at_least[w]`: the pods of at least `w` whole GPUs (`w` from 1).
    at_least: [u64; MAX_GPUS_PER_NODE + 1],
    /// A pod wider than any node can be.
    too_wide: bool,
}

impl JobShape {
    pub fn of(job: &Job) -> Self {
        let mut at_least = [0u64; MAX_GPUS_PER_NODE + 1];
        let mut too_wide = false;
        let mut fractions: Vec<u32> = Vec::new();
        for pod in &job.pods {
            match pod.gpu {
                GpuRequest::Whole(w) if w as usize > MAX_GPUS_PER_NODE => too_wide = true,
                GpuRequest::Whole(w) => at_least[w as usize] += 1,
                GpuRequest::Fraction(milli) => fractions.push(milli),
            }
        }
        for w in (1..MAX_GPUS_PER_NODE).rev() {
            at_least[w] += at_least[w + 1];
        }
        let whole: u64 = job.pods.iter().map(|p| u64::from(p.gpu.whole())).sum();
        fractions.sort_unstable_by(|a, b| b.cmp(a));
        let by_size = fractions
            .iter()
            .enumerate()
            .map(|(larger, &milli)| (larger as u64 + 1).div_ceil(u64::from(MILLI_PER_GPU / milli)));
        let total = fractions
            .iter()
            .map(|&m| u64::from(m))
            .sum::<u64>()
            .div_ceil(u64::from(MILLI_PER_GPU));
        Self {
            fewest_devices: whole + by_size.chain([total]).max().unwrap_or(0),
            at_least,
            too_wide,
        }
    }

    /// Whether nodes of these sizes (`node_sizes[k]`: nodes of `k` GPUs), all free, could
    /// hold the whole job: its devices in all, and each whole-GPU pod inside one node (for
    /// every pod width, the pods at least that wide against the slots that wide).
    pub fn fits(&self, node_sizes: &[u32]) -> bool {
        let devices: u64 = node_sizes
            .iter()
            .enumerate()
            .map(|(gpus, &nodes)| gpus as u64 * u64::from(nodes))
            .sum();
        !self.too_wide
            && devices >= self.fewest_devices
            && (1..=MAX_GPUS_PER_NODE).all(|w| {
                let next = self.at_least.get(w + 1).copied().unwrap_or(0);
                // Only a width some pod has can bind.
                self.at_least[w] == next || pods_that_fit(node_sizes, w as u32) >= self.at_least[w]
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job_of(pods: &[GpuRequest]) -> Job {
        Job::new(
            JobId(0),
            pods.iter().map(|&g| PodRequest::gpus(g)).collect(),
        )
    }

    /// Node sizes from `(gpus, nodes)` pairs.
    fn sizes(nodes: &[(usize, u32)]) -> [u32; MAX_GPUS_PER_NODE + 1] {
        let mut sizes = [0; MAX_GPUS_PER_NODE + 1];
        for &(gpus, count) in nodes {
            sizes[gpus] = count;
        }
        sizes
    }

    #[test]
    fn a_job_shape_counts_devices_and_each_pod_width_against_node_sizes() {
        use GpuRequest::{Fraction, Whole};
        let mixed = JobShape::of(&job_of(&[Whole(8), Whole(4), Whole(4), Whole(0)]));
        assert!(mixed.fits(&sizes(&[(8, 2)])));
        assert!(
            !mixed.fits(&sizes(&[(8, 1), (4, 1)])),
            "12 devices for 16 GPUs"
        );
        assert!(
            !mixed.fits(&sizes(&[(4, 4)])),
            "no node holds the 8-GPU pod"
        );
        let threes = JobShape::of(&job_of(&[Whole(3); 5]));
        assert!(
            !threes.fits(&sizes(&[(8, 2)])),
            "two pods of 3 per 8-GPU node"
        );
        assert!(threes.fits(&sizes(&[(8, 3)])));
        let shares = |n| JobShape::of(&job_of(&vec![Fraction(600); n]));
        assert!(shares(3).fits(&sizes(&[(3, 1)])));
        assert!(
            !shares(4).fits(&sizes(&[(3, 1)])),
            "one 0.6 share per device"
        );
        assert!(!JobShape::of(&job_of(&[Whole(40)])).fits(&sizes(&[(32, 8)])));
    }

    #[test]
    fn topology_needs_parse_and_print() {
        for text in [
            "required:leaf",
            "preferred:spine",
            "required:hbd",
            "preferred:superspine",
        ] {
            let need = TopologyNeed::parse(text).unwrap().unwrap();
            assert_eq!(need.to_string(), text);
        }
        assert_eq!(TopologyNeed::parse(""), Ok(None));
        assert!(
            TopologyNeed::parse("leaf")
                .unwrap_err()
                .contains("required:TIER")
        );
        assert!(
            TopologyNeed::parse("must:leaf")
                .unwrap_err()
                .contains("must")
        );
        assert!(
            TopologyNeed::parse("required:rack")
                .unwrap_err()
                .contains("rack")
        );
    }
}
