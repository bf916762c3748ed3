//! `topology-spread` (PreFilter, Filter, Score): topology spread constraints, as
//! kube-scheduler's `PodTopologySpread` decides: the hard ones (`DoNotSchedule`) filter,
//! the soft ones (`ScheduleAnyway`) score.
//!
//! PreFilter counts, once per job and per constraint, the pods the constraint selects in
//! each domain (a value of its node label) over the nodes the pod could use: those with
//! every constraint's label and, by the constraint's policies, matching the node selector
//! and affinity of one of the job's pods asking for GPUs and tolerating the node's
//! taints. Filter lets a pod onto a node
//! only if the node's domain would then hold at most `maxSkew` more selected pods than
//! the emptiest domain. The job's pods placed earlier in the attempt count too, so a
//! gang's pods spread among themselves (over all its candidate groups at once, without
//! waiting for a tight domain, when its domains are wider than a search group). Score
//! ranks the feasible nodes by how few selected pods their domains hold, weighted and
//! normalised as kube-scheduler does (the emptiest scores 100); a node without a soft
//! constraint's label scores 0. A job without constraints is not asked per
//! node.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::ClusterState;
use crate::framework::{
    AnyGroup, CycleState, Filter, MAX_NODE_SCORE, NodeView, Plugin, PodContext, PreFilter, Score,
    Status, pools_for,
};
use crate::model::{
    ClusterSpec, Job, NodeConstraints, NodeSpec, PodIdentity, SpreadConstraint, untolerated,
};

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

impl Counted {
    /// Counts, for `c` (one of `kind`, the job's hard or soft constraints), the pods it
    /// selects per domain of the nodes that count.
    fn of(
        job: &Job,
        snapshot: &ClusterState,
        kind: &[SpreadConstraint],
        c: &SpreadConstraint,
        identity: &PodIdentity,
    ) -> Counted {
        let spec = snapshot.spec();
        let key = &c.pods.topology_key;
        let rules = job.gpu_pod_rules();
        let counted_on: Vec<bool> = spec
            .nodes
            .iter()
            .map(|node| eligible(&rules, kind, c, node))
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
        Counted {
            key: key.clone(),
            max_skew: c.max_skew,
            selects_itself: c.pods.selects(identity),
            counts,
            counted_on,
            min,
            at_min: if too_few { usize::MAX } else { at_min },
        }
    }

    /// The job's pods placed earlier in this attempt, per domain, where they count.
    fn placed<'a>(&self, pod: &PodContext, spec: &'a ClusterSpec) -> HashMap<&'a str, u32> {
        let mut placed = HashMap::new();
        if !self.selects_itself {
            return placed;
        }
        for (node, pods) in (pod.placed_nodes.iter()).filter(|&(n, _)| self.counted_on[n.index()]) {
            if let Some(domain) = spec.node(node).labels.get(&self.key) {
                *placed.entry(domain.as_str()).or_default() += pods;
            }
        }
        placed
    }
}

struct Gathered {
    spec: Arc<ClusterSpec>,
    /// The hard constraints' counts.
    constraints: Vec<Counted>,
    /// The soft constraints' counts.
    preferred: Vec<Counted>,
}

/// Whether a node's pods count for a constraint (`kind`: the job's hard or soft ones): it
/// carries the label of every constraint of that kind and passes the constraint's
/// inclusion policies for one of `rules` (see [`Job::gpu_pod_rules`]).
fn eligible(
    rules: &[Option<&NodeConstraints>],
    kind: &[SpreadConstraint],
    c: &SpreadConstraint,
    node: &NodeSpec,
) -> bool {
    let has_keys = kind
        .iter()
        .all(|c| node.labels.contains_key(&c.pods.topology_key));
    let counts_for = |rules: &Option<&NodeConstraints>| {
        let selected =
            !c.honor_node_affinity || rules.is_none_or(|n| n.selects(&node.name, &node.labels));
        let tolerations = rules.map_or(&[][..], |n| &n.tolerations);
        let tolerated = !c.honor_taints || untolerated(tolerations, &node.taints).is_none();
        selected && tolerated
    };
    has_keys && rules.iter().any(counts_for)
}

impl PreFilter for TopologySpread {
    fn pre_filter(&self, job: &Job, snapshot: &ClusterState, state: &mut CycleState) -> Status {
        let Some(rules) = job
            .pod_rules
            .as_deref()
            .filter(|r| !r.spread.is_empty() || !r.preferred_spread.is_empty())
        else {
            return Status::SUCCESS;
        };
        let count = |kind: &[SpreadConstraint]| -> Vec<Counted> {
            kind.iter()
                .map(|c| Counted::of(job, snapshot, kind, c, &rules.identity))
                .collect()
        };
        let constraints = count(&rules.spread);
        // A gang that spreads its own pods over domains wider than a search group (zones
        // made of leaves) cannot stay in one group, and must not wait for one; unless it
        // asked to stay within a tier.
        let wider_than_groups = |c: &Counted| {
            c.selects_itself && within_groups(job, snapshot, &c.key).is_none_or(|one| one)
        };
        let required_tier = job.topology.is_some_and(|t| t.required);
        if job.is_gang() && !required_tier && constraints.iter().any(wider_than_groups) {
            state.write(AnyGroup);
        }
        state.write(Gathered {
            spec: snapshot.spec().clone(),
            constraints,
            preferred: count(&rules.preferred_spread),
        });
        Status::SUCCESS
    }
}

/// Whether every search group of the job's pools lies inside one domain of `key` (its
/// nodes carry at most one value); `None` without groups.
fn within_groups(job: &Job, snapshot: &ClusterState, key: &str) -> Option<bool> {
    let spec = snapshot.spec();
    let pools = pools_for(job, snapshot);
    let mut groups = pools
        .iter()
        .flat_map(|&pool| spec.pool(pool).groups.iter())
        .map(|&g| {
            let mut values = spec
                .group(g)
                .nodes
                .iter()
                .filter_map(|&n| spec.node(n).labels.get(key));
            let first = values.next();
            values.all(|v| Some(v) == first)
        })
        .peekable();
    groups.peek()?;
    Some(groups.all(|one| one))
}

impl Filter for TopologySpread {
    fn applies(&self, job: &Job, _cluster: &ClusterSpec) -> bool {
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
        for c in &gathered.constraints {
            let Some(domain) = node.spec.labels.get(&c.key) else {
                return Status::unresolvable(LABEL_MISSING);
            };
            let placed = c.placed(pod, &gathered.spec);
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

/// What a node lacking a soft constraint's label scores before normalising (0 after).
const UNLABELLED: i64 = -1;

impl Score for TopologySpread {
    fn applies(&self, job: &Job, _cluster: &ClusterSpec) -> bool {
        job.pod_rules
            .as_ref()
            .is_some_and(|r| !r.preferred_spread.is_empty())
    }

    /// The selected pods in the node's domains (the job's pods placed in this attempt
    /// included), as kube-scheduler weighs them: per soft constraint, the count times the
    /// log of its number of domains plus two, plus `maxSkew - 1`, summed and rounded;
    /// fewer is better once normalised.
    fn score(&self, pod: &PodContext, state: &CycleState, node: NodeView) -> i64 {
        let Some(gathered) = state.read::<Gathered>() else {
            return 0;
        };
        let mut score = 0.0;
        for c in &gathered.preferred {
            let Some(domain) = node.spec.labels.get(&c.key) else {
                return UNLABELLED;
            };
            let placed = c.placed(pod, &gathered.spec);
            let here = c.counts.get(domain).copied().unwrap_or(0)
                + placed.get(domain.as_str()).copied().unwrap_or(0);
            let weight = ((c.counts.len() + 2) as f64).ln();
            score += f64::from(here) * weight + f64::from(c.max_skew.saturating_sub(1));
        }
        score.round() as i64
    }

    fn normalizes(&self) -> bool {
        true
    }

    /// As kube-scheduler normalises: `100 * (max + min - score) / max` over the feasible
    /// nodes, so the emptiest scores 100; every node 100 when none has a selected pod; an
    /// unlabelled node 0.
    fn normalize(&self, scores: &mut [i64]) {
        let labelled = scores.iter().copied().filter(|&s| s != UNLABELLED);
        let (Some(min), Some(max)) = (labelled.clone().min(), labelled.max()) else {
            scores.fill(0);
            return;
        };
        for score in scores.iter_mut() {
            *score = match *score {
                UNLABELLED => 0,
                _ if max == 0 => MAX_NODE_SCORE,
                s => MAX_NODE_SCORE * (max + min - s) / max,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_scores_normalise_as_kube_schedulers() {
        // Zones holding 2, 0 and 1 selected pods, of 3 domains, maxSkew 1: raw scores
        // round(2 ln 5) = 3, 0 and round(ln 5) = 2; then an unlabelled node.
        let mut scores = [3, 0, 2, UNLABELLED];
        TopologySpread.normalize(&mut scores);
        assert_eq!(scores, [0, 100, 33, 0]);
        // No selected pod anywhere: every labelled node alike.
        let mut scores = [0, 0, UNLABELLED];
        TopologySpread.normalize(&mut scores);
        assert_eq!(scores, [100, 100, 0]);
    }
}
