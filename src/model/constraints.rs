//! Where a pod may go beyond its resources, in Kubernetes' terms: a node's labels and
//! taints, a job's node selector, required node affinity and tolerations, and the
//! required inter-pod affinity and anti-affinity between pods, and the extended resources
//! (device-plugin resources, hugepages) a node must list for a job's pods, and where a
//! pod's persistent volumes let it run. The simulator's
//! nodes and jobs have none; the Kubernetes world reads them from nodes and pods. Matching
//! follows kube-scheduler's `NodeAffinity`, `TaintToleration` and `InterPodAffinity`
//! plugins, and `NodeResourcesFit` for the extended resources (what placed pods hold of
//! them is accounted by the cluster state).

use std::collections::BTreeMap;

/// A node's labels.
pub type Labels = BTreeMap<String, String>;

/// Amounts of extended resources (`rdma/hca`, `hugepages-2Mi`, ...) by name, each in its
/// base unit (a count, bytes).
pub type ExtendedResources = BTreeMap<String, u64>;

/// What a taint does to pods that do not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    /// No new pod is placed there.
    NoSchedule,
    /// A soft preference; the scheduler may still place pods there.
    PreferNoSchedule,
    /// No new pod is placed there, and running ones are evicted (by the node controller).
    NoExecute,
}

impl TaintEffect {
    pub fn parse(text: &str) -> Option<TaintEffect> {
        match text {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

/// The taint Kubernetes puts on a cordoned (`spec.unschedulable`) node.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

impl Taint {
    /// A cordoned node's taint (`node.kubernetes.io/unschedulable:NoSchedule`).
    pub fn is_cordon(&self) -> bool {
        self.key == UNSCHEDULABLE_TAINT && self.effect == TaintEffect::NoSchedule
    }
}

/// A toleration: `key` `None` with `Exists` tolerates every taint; `effect` `None` matches
/// every effect.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toleration {
    pub key: Option<String>,
    /// `Exists` when true (any value), `Equal` otherwise.
    pub exists: bool,
    pub value: String,
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn tolerates(&self, taint: &Taint) -> bool {
        let key_ok = self.key.as_deref().is_none_or(|k| k == taint.key);
        let effect_ok = self.effect.is_none_or(|e| e == taint.effect);
        let value_ok = self.exists || self.value == taint.value;
        key_ok && effect_ok && value_ok
    }
}

/// The operator of a node selector requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// The label's value, as an integer, is greater than the single value.
    Gt,
    /// The label's value, as an integer, is less than the single value.
    Lt,
}

impl SelectorOp {
    pub fn parse(text: &str) -> Option<SelectorOp> {
        match text {
            "In" => Some(SelectorOp::In),
            "NotIn" => Some(SelectorOp::NotIn),
            "Exists" => Some(SelectorOp::Exists),
            "DoesNotExist" => Some(SelectorOp::DoesNotExist),
            "Gt" => Some(SelectorOp::Gt),
            "Lt" => Some(SelectorOp::Lt),
            _ => None,
        }
    }
}

/// One requirement on a node label (or, in `match_fields`, on the node's name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: String,
    pub op: SelectorOp,
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether a node whose value for the key is `value` (`None`: no such label) meets it.
    pub fn matches(&self, value: Option<&str>) -> bool {
        let number = |text: &str| text.parse::<i64>().ok();
        match self.op {
            SelectorOp::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            SelectorOp::NotIn => value.is_none_or(|v| self.values.iter().all(|x| x != v)),
            SelectorOp::Exists => value.is_some(),
            SelectorOp::DoesNotExist => value.is_none(),
            SelectorOp::Gt | SelectorOp::Lt => {
                let (Some(have), Some(bound)) = (
                    value.and_then(number),
                    self.values.first().and_then(|b| number(b)),
                ) else {
                    return false;
                };
                if self.op == SelectorOp::Gt {
                    have > bound
                } else {
                    have < bound
                }
            }
        }
    }
}

/// One term of a required node affinity: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SelectorTerm {
    /// On the node's labels.
    pub match_expressions: Vec<Requirement>,
    /// On the node's fields; only `metadata.name` exists.
    pub match_fields: Vec<Requirement>,
}

impl SelectorTerm {
    /// Whether the node of this name and labels meets every requirement.
    pub fn matches(&self, name: &str, labels: &Labels) -> bool {
        self.match_expressions
            .iter()
            .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
            && self
                .match_fields
                .iter()
                .all(|r| r.key == "metadata.name" && r.matches(Some(name)))
    }
}

/// Where one of a pod's persistent volumes lets the pod run: on a node that meets one of
/// `terms` (a bound volume's node affinity; for a claim not bound yet, those of the
/// volumes it could be bound to and the topologies its storage class may provision a
/// volume in).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VolumeTopology {
    pub terms: Vec<SelectorTerm>,
    /// Its claim is not bound yet: the terms say where a volume could be bound to it (an
    /// existing one, or one provisioned for the pod's node); otherwise they are those of
    /// the volume bound to it.
    pub unbound: bool,
}

impl VolumeTopology {
    /// Whether the node of this name and labels meets one of the terms.
    pub fn allows(&self, name: &str, labels: &Labels) -> bool {
        self.terms.iter().any(|t| t.matches(name, labels))
    }
}

/// A preference: a term and its weight (1 to 100).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Weighted<T> {
    pub weight: u32,
    pub term: T,
}

/// Scales the weight of the preferences that hold to 0..=100 of their total: the same
/// order of nodes as kube-scheduler's sum of weights, normalised per pod so that no other
/// node needs to be seen.
pub fn preference_score<T>(preferences: &[Weighted<T>], holds: impl Fn(&T) -> bool) -> i64 {
    let total: u64 = preferences.iter().map(|p| u64::from(p.weight)).sum();
    if total == 0 {
        return 0;
    }
    let met: u64 = preferences
        .iter()
        .filter(|p| holds(&p.term))
        .map(|p| u64::from(p.weight))
        .sum();
    (met * 100 / total) as i64
}

/// A pod's placement constraints (see [`crate::model::Job::constraints`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NodeConstraints {
    /// Labels a node must carry with exactly these values.
    pub node_selector: Vec<(String, String)>,
    /// Required node affinity: at least one term must hold (none: no constraint).
    pub affinity: Vec<SelectorTerm>,
    pub tolerations: Vec<Toleration>,
    /// Preferred node affinity: nodes matching more weight score higher.
    pub preferred: Vec<Weighted<SelectorTerm>>,
    /// What each pod asks of extended resources: a node must list at least this much of
    /// each in its allocatable (a node that does not list one has none), less what the
    /// pods placed there hold.
    pub extended: ExtendedResources,
    /// Where its persistent volumes let it run: a node must meet each.
    pub volumes: Vec<VolumeTopology>,
}

impl NodeConstraints {
    /// Whether the node's name and labels satisfy the selector, the affinity and the
    /// volumes.
    pub fn selects(&self, name: &str, labels: &Labels) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && (self.affinity.is_empty() || self.affinity.iter().any(|t| t.matches(name, labels)))
            && self.volume_refusing(name, labels).is_none()
    }

    /// The first of the pod's volumes that keeps it off the node.
    pub fn volume_refusing(&self, name: &str, labels: &Labels) -> Option<&VolumeTopology> {
        self.volumes.iter().find(|v| !v.allows(name, labels))
    }

    /// How well the node meets the preferred node affinity, 0 to 100.
    pub fn preference(&self, name: &str, labels: &Labels) -> i64 {
        preference_score(&self.preferred, |term| term.matches(name, labels))
    }

    /// The first extended resource the node's `allocatable` lists less of than a pod
    /// asks.
    pub fn lacking(&self, allocatable: &ExtendedResources) -> Option<&str> {
        self.extended
            .iter()
            .find(|&(name, &asked)| allocatable.get(name).copied().unwrap_or(0) < asked)
            .map(|(name, _)| name.as_str())
    }

    /// The first of `taints` that keeps new pods away and that no toleration covers.
    pub fn untolerated<'a>(&self, taints: &'a [Taint]) -> Option<&'a Taint> {
        untolerated(&self.tolerations, taints)
    }
}

/// The first taint that keeps new pods away (`NoSchedule`, `NoExecute`) and that none of
/// `tolerations` covers.
pub fn untolerated<'a>(tolerations: &[Toleration], taints: &'a [Taint]) -> Option<&'a Taint> {
    taints.iter().find(|taint| {
        taint.effect != TaintEffect::PreferNoSchedule
            && !tolerations.iter().any(|t| t.tolerates(taint))
    })
}

/// How many of `taints` ask new pods to stay away where they can (`PreferNoSchedule`)
/// without one of `tolerations` covering them: what kube-scheduler's `TaintToleration`
/// score counts against a node.
pub fn untolerated_preferences(tolerations: &[Toleration], taints: &[Taint]) -> usize {
    taints
        .iter()
        .filter(|taint| {
            taint.effect == TaintEffect::PreferNoSchedule
                && !tolerations.iter().any(|t| t.tolerates(taint))
        })
        .count()
}

/// Who a pod is, as other pods' affinity terms see it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodIdentity {
    pub namespace: String,
    pub labels: Labels,
}

/// The namespaces an affinity term looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Namespaces {
    /// Every namespace (an empty `namespaceSelector`).
    All,
    /// These namespaces (the term's list, or else the pod's own namespace).
    Only(Vec<String>),
}

/// One required term of inter-pod affinity or anti-affinity: the pods it selects, and the
/// node label whose value makes a topology domain (`kubernetes.io/hostname`: one node).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    /// Every requirement must hold on the pod's labels; `None` (a null selector) selects
    /// no pod, an empty list selects every pod.
    pub selector: Option<Vec<Requirement>>,
    pub namespaces: Namespaces,
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// Whether the term selects the pod.
    pub fn selects(&self, pod: &PodIdentity) -> bool {
        let in_namespace = match &self.namespaces {
            Namespaces::All => true,
            Namespaces::Only(names) => names.contains(&pod.namespace),
        };
        in_namespace
            && self.selector.as_ref().is_some_and(|requirements| {
                requirements
                    .iter()
                    .all(|r| r.matches(pod.labels.get(&r.key).map(String::as_str)))
            })
    }
}

/// A topology spread constraint: the pods it selects in the pod's namespace may differ by
/// at most `max_skew` between the domains of its key, counted over the nodes the pod
/// could use (`DoNotSchedule`); or, as a preference (`ScheduleAnyway`), the domains
/// holding fewer of them are better.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SpreadConstraint {
    /// The selected pods (namespace: the pod's own) and the topology key.
    pub pods: PodAffinityTerm,
    pub max_skew: u32,
    /// Fewer eligible domains than this count as a minimum of zero pods.
    pub min_domains: Option<u32>,
    /// Only nodes that match the pod's node selector and affinity count (`Honor`, the
    /// default).
    pub honor_node_affinity: bool,
    /// Only nodes whose taints the pod tolerates count (`Ignore` is the default).
    pub honor_taints: bool,
}

/// A pod's identity with its required inter-pod rules; every pod of a job shares them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodRules {
    pub identity: PodIdentity,
    /// Each term needs a selected pod in the node's domain.
    pub affinity: Vec<PodAffinityTerm>,
    /// No term may have a selected pod in the node's domain, and this pod keeps the pods
    /// its terms select out of its own domains.
    pub anti_affinity: Vec<PodAffinityTerm>,
    /// Hard topology spread constraints.
    pub spread: Vec<SpreadConstraint>,
    /// Soft topology spread constraints (a score).
    pub preferred_spread: Vec<SpreadConstraint>,
    /// Preferred affinity: a domain holding pods a term selects is better by its weight.
    pub preferred_affinity: Vec<Weighted<PodAffinityTerm>>,
    /// Preferred anti-affinity: a domain holding pods a term selects is worse by its
    /// weight.
    pub preferred_anti_affinity: Vec<Weighted<PodAffinityTerm>>,
}

impl PodRules {
    /// Whether it has required affinity or anti-affinity terms.
    pub fn has_terms(&self) -> bool {
        !self.affinity.is_empty() || !self.anti_affinity.is_empty()
    }

    /// Whether it has preferred affinity or anti-affinity terms.
    pub fn has_preferences(&self) -> bool {
        !self.preferred_affinity.is_empty() || !self.preferred_anti_affinity.is_empty()
    }

    /// Whether every affinity term selects `pod` (kube-scheduler counts a pod towards a
    /// pod's affinity only then).
    pub fn affinity_selects(&self, pod: &PodIdentity) -> bool {
        self.affinity.iter().all(|t| t.selects(pod))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            op,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn selector_and_affinity_terms() {
        let node = labels(&[("zone", "a"), ("gpus", "8")]);
        let mut c = NodeConstraints {
            node_selector: vec![("zone".into(), "a".into())],
            ..NodeConstraints::default()
        };
        assert!(c.selects("n1", &node));
        c.affinity = vec![
            SelectorTerm {
                match_expressions: vec![req("gpus", SelectorOp::Gt, &["8"])],
                ..SelectorTerm::default()
            },
            SelectorTerm {
                match_fields: vec![req("metadata.name", SelectorOp::In, &["n1"])],
                ..SelectorTerm::default()
            },
        ];
        assert!(c.selects("n1", &node), "the second term holds");
        assert!(!c.selects("n2", &node), "neither term holds");
        c.node_selector = vec![("zone".into(), "b".into())];
        assert!(!c.selects("n1", &node));
    }

    #[test]
    fn requirement_operators() {
        assert!(req("k", SelectorOp::NotIn, &["x"]).matches(None));
        assert!(!req("k", SelectorOp::NotIn, &["x"]).matches(Some("x")));
        assert!(req("k", SelectorOp::DoesNotExist, &[]).matches(None));
        assert!(req("k", SelectorOp::Lt, &["10"]).matches(Some("9")));
        assert!(!req("k", SelectorOp::Lt, &["10"]).matches(Some("nine")));
        assert!(!req("k", SelectorOp::In, &["x"]).matches(None));
    }

    #[test]
    fn tolerations_cover_taints() {
        let taint = |key: &str, value: &str, effect| Taint {
            key: key.into(),
            value: value.into(),
            effect,
        };
        let taints = vec![
            taint("soft", "", TaintEffect::PreferNoSchedule),
            taint("gpu", "reserved", TaintEffect::NoSchedule),
        ];
        assert_eq!(untolerated(&[], &taints), Some(&taints[1]));
        let equal = Toleration {
            key: Some("gpu".into()),
            exists: false,
            value: "reserved".into(),
            effect: Some(TaintEffect::NoSchedule),
        };
        assert_eq!(untolerated(std::slice::from_ref(&equal), &taints), None);
        let wrong_value = Toleration {
            value: "other".into(),
            ..equal.clone()
        };
        assert!(untolerated(&[wrong_value], &taints).is_some());
        let everything = Toleration {
            key: None,
            exists: true,
            value: String::new(),
            effect: None,
        };
        assert_eq!(untolerated(&[everything], &taints), None);
    }
}
