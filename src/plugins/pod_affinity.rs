//! `pod-affinity` (PreFilter, Filter, Score): required inter-pod affinity and
//! anti-affinity, as kube-scheduler's `InterPodAffinity` plugin decides, and the preferred
//! terms as a score.
//!
//! PreFilter gathers, once per job, the topology domains (a node label and its value)
//! that hold pods its rules select, and the domains whose pods' anti-affinity selects the
//! job, from the placed pods the cluster state knows (those reserved earlier in the same
//! round included). Filter checks a node's labels against them, and against the job's own
//! pods already placed in this attempt, so the replicas of a gang keep their rules among
//! themselves. A job without an identity (the simulator's) costs one branch per node; a
//! pod without rules, in a cluster whose pods carry no anti-affinity, one lookup.
//!
//! Score: the weight of the preferred terms a node meets (an affinity term where pods it
//! selects are in the node's domain, an anti-affinity term where none is), scaled to
//! 0..=100 of the job's total weight. Unlike kube-scheduler, a term counts once however many pods it
//! selects there, and other pods' preferred terms do not score the job: the score needs
//! no other node to be seen.
//!
//! The first of pods drawn to each other may go anywhere (kube-scheduler's rule). For a
//! gang that is the whole gang, so its domain is chosen up front: the one with room for
//! the most of its pods, judged by whole free devices; the search then keeps every pod
//! there.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::cache::ClusterState;
use crate::framework::{
    CycleState, Filter, MAX_NODE_SCORE, NodeView, Plugin, PodContext, PreFilter, Score, Status,
};
use crate::model::{ClusterSpec, Job, Labels, NodeId, PodAffinityTerm, PodRules};

pub struct InterPodAffinity;

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        "pod-affinity"
    }
}

const AFFINITY_NOT_MET: &str = "node(s) didn't match pod affinity rules";
const ANTI_AFFINITY_NOT_MET: &str = "node(s) didn't match pod anti-affinity rules";
const EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";

/// Topology domains: label values per label key.
#[derive(Default)]
struct Domains(HashMap<String, HashSet<String>>);

impl Domains {
    /// Adds the domains of `key` that hold these nodes (a node without the label is in none).
    fn add(&mut self, spec: &ClusterSpec, key: &str, nodes: impl Iterator<Item = NodeId>) {
        for node in nodes {
            if let Some(value) = spec.node(node).labels.get(key) {
                self.0
                    .entry(key.to_owned())
                    .or_default()
                    .insert(value.clone());
            }
        }
    }

    fn holds(&self, key: &str, labels: &Labels) -> bool {
        labels
            .get(key)
            .is_some_and(|v| self.0.get(key).is_some_and(|values| values.contains(v)))
    }

    fn holds_any(&self, labels: &Labels) -> bool {
        self.0
            .iter()
            .any(|(key, values)| labels.get(key).is_some_and(|v| values.contains(v)))
    }
}

/// What PreFilter gathered for one job.
struct Gathered {
    spec: Arc<ClusterSpec>,
    /// Domains holding a pod that every affinity term of the job selects.
    affinity: Domains,
    /// Domains holding a pod that one of the job's anti-affinity terms selects.
    anti_affinity: Domains,
    /// Domains holding a pod whose anti-affinity selects the job.
    existing_anti_affinity: Domains,
    /// No placed pod is selected by every affinity term: the job's pods may be the first.
    first_of_its_kind: bool,
    /// For a gang that is the first of its kind: the domain (label and value) it goes to.
    gang_domain: Option<(String, String)>,
    /// Per preferred affinity term, then per preferred anti-affinity term: the domains
    /// holding pods it selects.
    preferred: Vec<Domains>,
}

impl PreFilter for InterPodAffinity {
    fn pre_filter(&self, job: &Job, snapshot: &ClusterState, state: &mut CycleState) -> Status {
        // A job without an identity (the simulator's) has no rules, and no rule selects it.
        let Some(own) = job.pod_rules.as_deref() else {
            return Status::SUCCESS;
        };
        let has_terms = own.has_terms();
        let selectable = snapshot.has_anti_affinities();
        if !has_terms && !selectable && !own.has_preferences() {
            return Status::SUCCESS;
        }
        let spec = snapshot.spec();
        let mut gathered = Gathered {
            spec: spec.clone(),
            affinity: Domains::default(),
            anti_affinity: Domains::default(),
            existing_anti_affinity: Domains::default(),
            first_of_its_kind: false,
            gang_domain: None,
            preferred: Vec::new(),
        };
        if selectable {
            for (other, rules) in snapshot.anti_affinities() {
                for term in rules
                    .anti_affinity
                    .iter()
                    .filter(|t| t.selects(&own.identity))
                {
                    let nodes = snapshot.job_nodes(other);
                    gathered
                        .existing_anti_affinity
                        .add(spec, &term.topology_key, nodes);
                }
            }
        }
        if has_terms {
            for (other, rules) in snapshot.pod_rules() {
                if !own.affinity.is_empty() && own.affinity_selects(&rules.identity) {
                    for term in &own.affinity {
                        let nodes = snapshot.job_nodes(other);
                        gathered.affinity.add(spec, &term.topology_key, nodes);
                    }
                }
                for term in own
                    .anti_affinity
                    .iter()
                    .filter(|t| t.selects(&rules.identity))
                {
                    let nodes = snapshot.job_nodes(other);
                    gathered.anti_affinity.add(spec, &term.topology_key, nodes);
                }
            }
        }
        let preferences = own
            .preferred_affinity
            .iter()
            .chain(&own.preferred_anti_affinity);
        for preference in preferences {
            let mut domains = Domains::default();
            for (other, rules) in snapshot.pod_rules() {
                if preference.term.selects(&rules.identity) {
                    let key = &preference.term.topology_key;
                    domains.add(spec, key, snapshot.job_nodes(other));
                }
            }
            gathered.preferred.push(domains);
        }
        gathered.first_of_its_kind = gathered.affinity.0.is_empty();
        if gathered.first_of_its_kind && job.is_gang() && own.affinity_selects(&own.identity) {
            gathered.gang_domain = roomiest_domain(job, own, snapshot, &gathered);
        }
        state.write(gathered);
        Status::SUCCESS
    }
}

impl Filter for InterPodAffinity {
    fn applies(&self, job: &Job, _cluster: &ClusterSpec) -> bool {
        job.pod_rules.is_some()
    }

    fn filter(&self, pod: &PodContext, state: &CycleState, node: NodeView) -> Status {
        let Some(own) = pod.job.pod_rules.as_deref() else {
            return Status::SUCCESS;
        };
        let Some(gathered) = state.read::<Gathered>() else {
            return Status::SUCCESS;
        };
        let labels = &node.spec.labels;
        // The job's pods placed in this attempt count as placed pods of the same identity.
        let placed_nearby =
            |term: &PodAffinityTerm| own_pod_nearby(pod, &gathered.spec, labels, term);
        if !own.affinity.is_empty()
            && !satisfies_affinity(own, gathered, pod, &placed_nearby, labels)
        {
            return Status::unresolvable(AFFINITY_NOT_MET);
        }
        let repels = |term: &PodAffinityTerm| {
            gathered.anti_affinity.holds(&term.topology_key, labels)
                || (term.selects(&own.identity) && placed_nearby(term))
        };
        if own.anti_affinity.iter().any(repels) {
            return Status::unschedulable(ANTI_AFFINITY_NOT_MET);
        }
        if gathered.existing_anti_affinity.holds_any(labels) {
            return Status::unschedulable(EXISTING_ANTI_AFFINITY);
        }
        Status::SUCCESS
    }
}

impl Score for InterPodAffinity {
    fn applies(&self, job: &Job, _cluster: &ClusterSpec) -> bool {
        job.pod_rules.as_ref().is_some_and(|r| r.has_preferences())
    }

    fn score(&self, pod: &PodContext, state: &CycleState, node: NodeView) -> i64 {
        let (Some(own), Some(gathered)) = (pod.job.pod_rules.as_deref(), state.read::<Gathered>())
        else {
            return 0;
        };
        let labels = &node.spec.labels;
        // An affinity preference is met where its pods are, an anti-affinity one where
        // they are not.
        let (attracting, repelling) = gathered.preferred.split_at(own.preferred_affinity.len());
        let terms = (own
            .preferred_affinity
            .iter()
            .zip(attracting)
            .map(|t| (t, true)))
        .chain(
            own.preferred_anti_affinity
                .iter()
                .zip(repelling)
                .map(|t| (t, false)),
        );
        let (mut met, mut total) = (0i64, 0i64);
        for ((preference, domains), wanted) in terms {
            let weight = i64::from(preference.weight);
            total += weight;
            let term = &preference.term;
            // The job's own pods placed in this attempt count when the term selects them.
            let near = domains.holds(&term.topology_key, labels)
                || (term.selects(&own.identity)
                    && own_pod_nearby(pod, &gathered.spec, labels, term));
            if near == wanted {
                met += weight;
            }
        }
        if total == 0 {
            return 0;
        }
        met * MAX_NODE_SCORE / total
    }
}

/// Whether a pod of the job placed earlier in this attempt is in the node's domain of the
/// term's key (the node has `labels`).
fn own_pod_nearby(
    pod: &PodContext,
    spec: &ClusterSpec,
    labels: &Labels,
    term: &PodAffinityTerm,
) -> bool {
    let key = &term.topology_key;
    labels.get(key).is_some_and(|value| {
        (pod.placed_nodes.iter()).any(|(node, _)| spec.node(node).labels.get(key) == Some(value))
    })
}

/// Whether the node is, for each affinity term, in a domain that holds a pod every term
/// selects (the job's pods placed in this attempt count when they select themselves), or
/// the pod may be the first of its kind.
fn satisfies_affinity(
    own: &PodRules,
    gathered: &Gathered,
    pod: &PodContext,
    placed_nearby: &dyn Fn(&PodAffinityTerm) -> bool,
    labels: &Labels,
) -> bool {
    if !own
        .affinity
        .iter()
        .all(|t| labels.contains_key(&t.topology_key))
    {
        return false;
    }
    let counts_itself = own.affinity_selects(&own.identity);
    if !gathered.first_of_its_kind {
        return own.affinity.iter().all(|term| {
            gathered.affinity.holds(&term.topology_key, labels)
                || (counts_itself && placed_nearby(term))
        });
    }
    let in_gang_domain = gathered
        .gang_domain
        .as_ref()
        .is_none_or(|(key, value)| labels.get(key) == Some(value));
    counts_itself
        && in_gang_domain
        && (pod.placed_nodes.is_empty() || own.affinity.iter().all(placed_nearby))
}

/// For a gang drawn to itself with none of its kind placed: the domain of its first
/// affinity term with room for the most of its pods, the lowest label value among equals.
/// Room is counted in whole free devices, per its widest pod asking for GPUs, on the nodes
/// one of those pods may use by its own node rules, that carry every term's key, and that
/// no anti-affinity (its own against the pods there, or theirs against it) keeps it from.
fn roomiest_domain(
    job: &Job,
    own: &PodRules,
    snapshot: &ClusterState,
    gathered: &Gathered,
) -> Option<(String, String)> {
    let key = &own.affinity.first()?.topology_key;
    let rules = job.gpu_pod_rules();
    let widest = job.pods.iter().map(|p| p.gpu.whole()).max().unwrap_or(0);
    let devices_per_pod = widest.max(1);
    let spec = snapshot.spec();
    let mut room: HashMap<&str, u32> = HashMap::new();
    for (id, state) in snapshot.nodes() {
        let node = spec.node(id);
        let labels = &node.labels;
        let has_keys = own
            .affinity
            .iter()
            .all(|t| labels.contains_key(&t.topology_key));
        let repelled = own
            .anti_affinity
            .iter()
            .any(|t| gathered.anti_affinity.holds(&t.topology_key, labels))
            || gathered.existing_anti_affinity.holds_any(labels);
        let usable = rules.iter().any(|&r| job.rules_allow(r, node));
        if !has_keys || repelled || !usable {
            continue;
        }
        *room.entry(labels[key].as_str()).or_default() +=
            state.free_whole_count() / devices_per_pod;
    }
    let (value, _) = room
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))?;
    Some((key.clone(), value.to_owned()))
}
