//! `topology-spread` (PreFilter, Filter): hard topology spread constraints
//! (`whenUnsatisfiable: DoNotSchedule`), as kube-scheduler's `PodTopologySpread` decides.
//!
//! PreFilter counts, once per job and per constraint, the pods the constraint selects in
//! each domain (a value of its node label) over the nodes the pod could use: those with
//! every constraint's label and, by the constraint's policies, matching the pod's node
//! selector and affinity and tolerating the node's taints. Filter lets a pod onto a node
//! only if the node's domain would then hold at most `maxSkew` more selected pods than
//! the emptiest domain. The job's pods placed earlier in the attempt count too, so a
//! gang's pods spread among themselves (over all its candidate groups at once, without
//! waiting for a tight domain). A job without constraints is not asked per node.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::ClusterState;
use crate::framework::{
    AnyGroup, CycleState, Filter, NodeView, Plugin, PodContext, PreFilter, Status,
};
use crate::model::{ClusterSpec, Job, NodeId, NodeSpec, SpreadConstraint, untolerated};

pub struct TopologySpread;

impl Plugin for TopologySpread {
    fn name(&self) -> &'static str {
        "topology-spread"
    }
}

const SKEW_TOO_LARGE: &str = "node(s) didn't match pod topology spread constraints";
const LABEL_MISSING: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// One constraint's count of selected pods per domain.
struct Counted {
    key: String,
    max_skew: u32,
    /// Whether the job's own pods are selected (each counts in the domain it joins).
    selects_itself: bool,
    /// Selected pods per domain of the eligible nodes, every domain listed.
    counts: HashMap<String, u32>,
    /// Per node: whether its pods count.
    counted_on: Vec<bool>,
    /// The smallest count (0 with fewer domains than `minDomains`), and how many domains
    /// have it.
    min: u32,
    at_min: usize,
}

impl Counted {
    /// The smallest count once the job's pods placed in this attempt are added, given as
    /// domains with their number of such pods.
    fn min_with(&self, placed: &HashMap<&str, u32>) -> u32 {
        let emptiest_taken = placed
            .keys()
            .filter(|d| self.counts.get(**d) == Some(&self.min))
            .count();
        if emptiest_taken < self.at_min {
            return self.min;
        }
        self.counts
            .iter()
            .map(|(domain, &n)| n + placed.get(domain.as_str()).copied().unwrap_or(0))
            .min()
            .unwrap_or(0)
    }
}

struct Gathered {
    spec: Arc<ClusterSpec>,
    constraints: Vec<Counted>,
}

/// Whether a node's pods count for a constraint of `job`.
fn eligible(job: &Job, all: &[SpreadConstraint], c: &SpreadConstraint, node: &NodeSpec) -> bool {
    let has_keys = all
        .iter()
        .all(|c| node.labels.contains_key(&c.pods.topology_key));
    let constraints = job.constraints.as_deref();
    let selected =
        !c.honor_node_affinity || constraints.is_none_or(|n| n.selects(&node.name, &node.labels));
    let tolerated = !c.honor_taints || {
        let tolerations = constraints.map_or(&[][..], |n| &n.tolerations);
        untolerated(tolerations, &node.taints).is_none()
    };
    has_keys && selected && tolerated
}

impl PreFilter for TopologySpread {
    fn pre_filter(&self, job: &Job, snapshot: &ClusterState, state: &mut CycleState) -> Status {
        let Some(rules) = job.pod_rules.as_deref().filter(|r| !r.spread.is_empty()) else {
            return Status::SUCCESS;
        };
        let spec = snapshot.spec();
        let mut constraints = Vec::with_capacity(rules.spread.len());
        for c in &rules.spread {
            let key = &c.pods.topology_key;
            let counted_on: Vec<bool> = spec
                .nodes
                .iter()
                .map(|node| eligible(job, &rules.spread, c, node))
                .collect();
            let mut counts: HashMap<String, u32> = HashMap::new();
            for (node, _) in spec.nodes.iter().zip(&counted_on).filter(|(_, on)| **on) {
                counts.entry(node.labels[key].clone()).or_default();
            }
            for (other, pod) in snapshot.pod_rules() {
                if !c.pods.selects(&pod.identity) {
                    continue;
                }
                for node in snapshot.job_nodes(other) {
                    let count = counted_on[node.index()]
                        .then(|| counts.get_mut(&spec.node(node).labels[key]))
                        .flatten();
                    if let Some(count) = count {
                        *count += 1;
                    }
                }
            }
            let too_few = c.min_domains.is_some_and(|m| counts.len() < m as usize);
            let min = if too_few {
                0
            } else {
                counts.values().copied().min().unwrap_or(0)
            };
            let at_min = counts.values().filter(|&&n| n == min).count();
            constraints.push(Counted {
                key: key.clone(),
                max_skew: c.max_skew,
                selects_itself: c.pods.selects(&rules.identity),
                counts,
                counted_on,
                min,
                at_min: if too_few { usize::MAX } else { at_min },
            });
        }
        // A gang that spreads its own pods gains nothing from staying in one group, and
        // must not wait for one.
        if job.is_gang() && constraints.iter().any(|c| c.selects_itself) {
            state.write(AnyGroup);
        }
        state.write(Gathered {
            spec: spec.clone(),
            constraints,
        });
        Status::SUCCESS
    }
}

impl Filter for TopologySpread {
    fn applies(&self, job: &Job) -> bool {
        job.pod_rules.as_ref().is_some_and(|r| !r.spread.is_empty())
    }

    fn filter(&self, pod: &PodContext, state: &CycleState, node: NodeView) -> Status {
        if pod
            .job
            .pod_rules
            .as_ref()
            .is_none_or(|r| r.spread.is_empty())
        {
            return Status::SUCCESS;
        }
        let Some(gathered) = state.read::<Gathered>() else {
            return Status::SUCCESS;
        };
        let domain_of = |node: NodeId, key: &str| gathered.spec.node(node).labels.get(key);
        for c in &gathered.constraints {
            let Some(domain) = node.spec.labels.get(&c.key) else {
                return Status::unresolvable(LABEL_MISSING);
            };
            let mut placed: HashMap<&str, u32> = HashMap::new();
            if c.selects_itself {
                let counted = pod
                    .placed
                    .iter()
                    .filter(|(_, p)| c.counted_on[p.node.index()]);
                for (_, p) in counted {
                    if let Some(d) = domain_of(p.node, &c.key) {
                        *placed.entry(d.as_str()).or_default() += 1;
                    }
                }
            }
            let here = c.counts.get(domain).copied().unwrap_or(0)
                + placed.get(domain.as_str()).copied().unwrap_or(0)
                + u32::from(c.selects_itself);
            if here.saturating_sub(c.min_with(&placed)) > c.max_skew {
                return Status::unschedulable(SKEW_TOO_LARGE);
            }
        }
        Status::SUCCESS
    }
}
