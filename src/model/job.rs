//! Jobs and pods. The unit of scheduling is the job: a gang whose pods are placed all or
//! none (a lone pod is a job of one).

use std::sync::Arc;

use super::{
    GpuRequest, JobId, MILLI_PER_GPU, NodeConstraints, NodeSpec, PodRules, PoolId, TenantId,
    pods_that_fit, untolerated,
};

/// What one pod asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PodRequest {
    pub gpu: GpuRequest,
    pub cpu_milli: u64,
    pub memory_mib: u64,
}

impl PodRequest {
    pub fn gpus(gpu: GpuRequest) -> Self {
        Self {
            gpu,
            cpu_milli: 0,
            memory_mib: 0,
        }
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
    /// Node selector, required node affinity and tolerations; `None`: any node.
    pub constraints: Option<Arc<NodeConstraints>>,
    /// Who its pods are, with their required inter-pod affinity and anti-affinity and
    /// their hard topology spread; `None` (the simulator's jobs): no rules, and no other
    /// pod's rules select it.
    pub pod_rules: Option<Arc<PodRules>>,
}

impl Job {
    /// Milli-GPUs of the whole job.
    pub fn total_milli(&self) -> u64 {
        self.pods.iter().map(|p| p.gpu.milli()).sum()
    }

    /// The fewest devices that could ever hold the job: its whole GPUs, and for its
    /// fractional pods the most that any size forces (pods of at least `m` milli-GPUs share
    /// a device at most `1000 / m` at a time), or their total, whichever is more.
    pub fn fewest_devices(&self) -> u64 {
        let whole: u64 = self.pods.iter().map(|p| u64::from(p.gpu.whole())).sum();
        let mut fractions: Vec<u32> = self
            .pods
            .iter()
            .filter_map(|p| match p.gpu {
                GpuRequest::Fraction(milli) => Some(milli),
                GpuRequest::Whole(_) => None,
            })
            .collect();
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
        whole + by_size.chain([total]).max().unwrap_or(0)
    }

    /// Whether nodes of these sizes (`node_sizes[k]`: nodes of `k` GPUs), all free, could
    /// hold the whole job: its devices in all, and each whole-GPU pod inside one node (for
    /// every size, the pods at least that wide against the slots that wide).
    pub fn could_fit_nodes(&self, node_sizes: &[u32]) -> bool {
        let devices: u64 = node_sizes
            .iter()
            .enumerate()
            .map(|(gpus, &nodes)| gpus as u64 * u64::from(nodes))
            .sum();
        if devices < self.fewest_devices() {
            return false;
        }
        let mut widths: Vec<u32> = self.pods.iter().map(|p| p.gpu.whole()).collect();
        widths.sort_unstable_by(|a, b| b.cmp(a));
        // `widths[..=i]` are the pods at least `widths[i]` wide.
        widths
            .iter()
            .enumerate()
            .all(|(i, &width)| width == 0 || pods_that_fit(node_sizes, width) > i as u64)
    }

    pub fn accepts_pool(&self, pool: PoolId) -> bool {
        self.pools.is_empty() || self.pools.contains(&pool)
    }

    /// Whether its pods may go on the node at all, room aside: its pool, its node
    /// selector and required affinity, and the taints it must tolerate.
    pub fn may_use(&self, node: &NodeSpec) -> bool {
        let tolerations = self
            .constraints
            .as_ref()
            .map_or(&[][..], |c| &c.tolerations);
        self.accepts_pool(node.pool)
            && self
                .constraints
                .as_ref()
                .is_none_or(|c| c.selects(&node.name, &node.labels))
            && untolerated(tolerations, &node.taints).is_none()
    }

    pub fn is_gang(&self) -> bool {
        self.pods.len() > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
