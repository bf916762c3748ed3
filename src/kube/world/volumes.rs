//! The persistent volumes pods use, and where they let a pod run, as kube-scheduler's
//! `VolumeBinding` reads them.
//!
//! - A claim bound to a volume keeps its pods on the nodes the volume's node affinity
//!   allows (anywhere, for a volume without one).
//! - An unbound claim whose storage class binds on first use (`WaitForFirstConsumer`) is
//!   bound as its pod is placed, in kube-scheduler's order:
//!   - a claim annotated `volume.kubernetes.io/selected-node` is being provisioned on that
//!     node: its pods go there;
//!   - otherwise an existing volume of its class is bound to it (its `claimRef` set, for
//!     the volume controller to finish): one pre-bound to it if any, else the smallest
//!     available one that fits it (capacity, access modes, volume mode, the claim's
//!     selector) and the pod's node;
//!   - otherwise, where the class has a provisioner and allows the node
//!     (`allowedTopologies`), the claim is annotated with the node and its volume
//!     provisioned there.
//!
//!   A pod may go where one of those can happen, judged claim by claim; the pod is bound
//!   once the claim is (the writer waits for it). A claim being annotated, or a volume
//!   being bound to a claim, by this replica keeps the claim's other pods to it (as
//!   kube-scheduler's assume cache does) until the objects show it or the binding fails,
//!   and keeps the volume from other claims. A claim that finds no volume left on its
//!   pod's node as the pod is bound (the pod's other claims, or its gang's other pods,
//!   took them) keeps that pod off the node for a while.
//! - Any other unbound claim (its class binds at once, or it has none), a claim missing or
//!   being deleted, and one of a class without a provisioner that no available volume fits
//!   keep its pods waiting, each saying why.
//!
//! It keeps only what placement reads of the claims, volumes and classes, and performs no
//! I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::model::{JobId, Labels, Requirement, SelectorOp, SelectorTerm, VolumeTopology};

use super::super::convert::{
    ConvertError, label_selector, no_node, parse_quantity_nano, selector_term,
};
use super::pods::PodRef;
use super::resync::Change;

/// The annotation that asks a class's provisioner for a volume on a node.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// The class of a claim or volume, read before `spec.storageClassName` (deprecated, still
/// honoured).
const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The provisioner of classes whose volumes are made by hand (local volumes).
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// A claim, by namespace and name.
type ClaimKey = (String, String);

/// What placement reads of a PersistentVolumeClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Claim {
    /// The volume it is bound to.
    volume: Option<String>,
    class: Option<String>,
    /// The node a volume is being provisioned for.
    selected_node: Option<String>,
    deleting: bool,
    /// What a volume must offer to be bound to it, or why its spec cannot be read.
    wants: Result<Wants, String>,
}

/// What a claim asks of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wants {
    uid: String,
    /// `resources.requests.storage`, in billionths of a byte.
    storage: u128,
    access_modes: Vec<String>,
    /// `volumeMode: Block` (otherwise `Filesystem`).
    block: bool,
    /// Its `selector` on volumes' labels: every requirement must hold.
    selector: Vec<Requirement>,
}

/// What placement reads of a PersistentVolume.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Volume {
    /// Its required node affinity (none: any node), or why it cannot be read.
    terms: Result<Vec<SelectorTerm>, String>,
    class: Option<String>,
    /// `capacity.storage`, in billionths of a byte; none when it cannot be read.
    capacity: Option<u128>,
    access_modes: Vec<String>,
    block: bool,
    labels: Labels,
    /// `status.phase` is `Available`: bound to no claim.
    available: bool,
    /// The claim it is bound (or pre-bound) to: namespace, name and uid (empty: any).
    claim_ref: Option<(String, String, String)>,
    deleting: bool,
}

impl Volume {
    /// Its class, when it is bound to no claim.
    fn free_class(&self) -> Option<&String> {
        self.class.as_ref().filter(|_| self.claim_ref.is_none())
    }

    /// The claim its `claimRef` names, uid aside.
    fn claim_key(&self) -> Option<ClaimKey> {
        (self.claim_ref.as_ref()).map(|(namespace, name, _)| (namespace.clone(), name.clone()))
    }

    /// Whether it is bound, or pre-bound, to this claim (`IsVolumeBoundToClaim`).
    fn bound_to(&self, (namespace, name): &ClaimKey, uid: &str) -> bool {
        self.claim_ref
            .as_ref()
            .is_some_and(|(ns, n, u)| ns == namespace && n == name && (u.is_empty() || u == uid))
    }

    /// Whether it could hold what a claim asks, bound to it or not: not being deleted,
    /// big enough, of its volume mode (`FindMatchingVolume` checks this of every volume).
    fn could_hold(&self, wants: &Wants) -> bool {
        !self.deleting
            && self.capacity.is_some_and(|c| c >= wants.storage)
            && self.block == wants.block
    }

    /// Whether it is free and fits what a claim asks (`FindMatchingVolume`, the node aside).
    fn fits(&self, wants: &Wants) -> bool {
        self.claim_ref.is_none()
            && self.available
            && self.could_hold(wants)
            && self.terms.is_ok()
            && (wants.access_modes.iter()).all(|m| self.access_modes.contains(m))
            && (wants.selector.iter())
                .all(|r| r.matches(self.labels.get(&r.key).map(String::as_str)))
    }

    /// Whether the node of this name and labels may use it.
    fn allows(&self, name: &str, labels: &Labels) -> bool {
        (self.terms.as_ref()).is_ok_and(|t| t.is_empty() || allowed(t, name, labels))
    }
}

/// What placement reads of a StorageClass.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Class {
    /// `volumeBindingMode: WaitForFirstConsumer`.
    waits_for_first_consumer: bool,
    /// Its volumes are made by hand (`kubernetes.io/no-provisioner`).
    no_provisioner: bool,
    /// Where it may provision a volume (`allowedTopologies`): one of these must hold;
    /// none: anywhere.
    topologies: Vec<SelectorTerm>,
}

/// How a claim not bound yet is bound once its pod's node is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimBinding {
    /// Its volume is provisioned for the node: the claim is annotated with it.
    Provision { claim: String },
    /// It is bound to this existing volume: the volume's `claimRef` is set to it.
    Volume { claim: String, volume: String },
}

impl ClaimBinding {
    /// The claim it binds.
    pub fn claim(&self) -> &str {
        match self {
            ClaimBinding::Provision { claim } | ClaimBinding::Volume { claim, .. } => claim,
        }
    }
}

/// How an unbound claim of a class binding on first use gets its volume.
enum Unbound<'a> {
    /// Being provisioned for this node.
    Selected(&'a str),
    /// Bound, or pre-bound, to this volume, which its binding is to finish.
    PreBound(&'a str, &'a Volume),
    /// Any of these free volumes, or a new one where `provision` allows it (none: the
    /// class has no provisioner).
    Open {
        volumes: Vec<(&'a str, &'a Volume)>,
        provision: Option<&'a [SelectorTerm]>,
    },
}

#[derive(Debug, Default)]
pub(super) struct Volumes {
    claims: HashMap<ClaimKey, Claim>,
    volumes: HashMap<String, Volume>,
    index: VolumeIndex,
    classes: HashMap<String, Class>,
    /// Claims this replica is annotating with a node: the node, and the jobs whose
    /// bindings do it.
    assumed_nodes: Assumed<ClaimKey, String>,
    /// Volumes this replica is binding to a claim: the claim, and the jobs whose bindings
    /// do it.
    assumed_volumes: Assumed<String, ClaimKey>,
    /// Nodes where a claim found no volume left as a pod of it was being bound (the pod's
    /// other claims, or its gang's other pods, took those there), by pod uid: that pod
    /// keeps off each for [`REFUSAL_MS`], or until a volume of the claim's class comes to
    /// be available or an assumption is given up.
    refused: HashMap<ClaimKey, HashMap<String, Refused>>,
}

/// How long a pod is kept off the nodes where its claim found no volume left: long
/// enough to be placed elsewhere, short enough that a placement which needs that node
/// (another claim of the pod is bound there) is tried again.
const REFUSAL_MS: u64 = 60_000;

/// The nodes a claim found no volume left on for one pod, each until when.
type Refused = BTreeMap<String, u64>;

/// The volumes a claim could be bound to, found without reading every volume (most are
/// bound to their claims): the free ones by class, in name order, and those whose
/// `claimRef` names a claim, by that claim.
#[derive(Debug, Default)]
struct VolumeIndex {
    free_by_class: HashMap<String, BTreeSet<String>>,
    by_claim: HashMap<ClaimKey, BTreeSet<String>>,
}

impl VolumeIndex {
    /// The volume `name` was `old` and is `new` (`None`: absent).
    fn update(&mut self, name: &str, old: Option<&Volume>, new: Option<&Volume>) {
        if let Some(old) = old {
            if let Some(class) = old.free_class() {
                remove_from(&mut self.free_by_class, class, name);
            }
            if let Some(claim) = old.claim_key() {
                remove_from(&mut self.by_claim, &claim, name);
            }
        }
        if let Some(new) = new {
            if let Some(class) = new.free_class() {
                let names = self.free_by_class.entry(class.clone()).or_default();
                names.insert(name.to_owned());
            }
            if let Some(claim) = new.claim_key() {
                self.by_claim
                    .entry(claim)
                    .or_default()
                    .insert(name.to_owned());
            }
        }
    }
}

/// Takes `name` out of the set at `key`, and the set once empty.
fn remove_from<K: Eq + std::hash::Hash>(
    sets: &mut HashMap<K, BTreeSet<String>>,
    key: &K,
    name: &str,
) {
    if let Some(names) = sets.get_mut(key) {
        names.remove(name);
        if names.is_empty() {
            sets.remove(key);
        }
    }
}

/// What this replica's bindings are binding, as kube-scheduler's assume cache keeps it:
/// by object, what it is bound to, and the jobs whose bindings do it.
type Assumed<K, V> = HashMap<K, (V, BTreeSet<JobId>)>;

/// Records that `job`'s binding binds `key` to `value`.
fn assume<K: Eq + std::hash::Hash, V>(assumed: &mut Assumed<K, V>, key: K, value: V, job: JobId) {
    let (_, jobs) = assumed
        .entry(key)
        .or_insert_with(|| (value, BTreeSet::new()));
    jobs.insert(job);
}

/// `job`'s binding binds nothing more; whether an object was freed of every binding.
fn unassume<K, V>(assumed: &mut Assumed<K, V>, job: JobId) -> bool {
    let before = assumed.len();
    for (_, jobs) in assumed.values_mut() {
        jobs.remove(&job);
    }
    assumed.retain(|_, (_, jobs)| !jobs.is_empty());
    assumed.len() != before
}

impl Volumes {
    /// Takes in a change to the claims; returns whether anything placement reads changed.
    pub fn apply_claims(&mut self, change: Change<PersistentVolumeClaim>) -> bool {
        let key = |c: &PersistentVolumeClaim| {
            let meta = &c.metadata;
            let namespace = meta.namespace.clone().unwrap_or_default();
            (namespace, meta.name.clone().unwrap_or_default())
        };
        let changed = !apply(&mut self.claims, change, (key, claim), |_, _, _| {}).is_empty();
        self.forget_shown();
        changed
    }

    /// Takes in a change to the volumes; returns whether anything placement reads changed.
    pub fn apply_volumes(&mut self, change: Change<PersistentVolume>) -> bool {
        let key = |v: &PersistentVolume| v.metadata.name.clone().unwrap_or_default();
        let index = &mut self.index;
        // Classes a volume came to be available in: their claims may find room where
        // they found none.
        let mut freed: HashSet<String> = HashSet::new();
        let changed = apply(
            &mut self.volumes,
            change,
            (key, volume),
            |name, old, new| {
                index.update(name, old, new);
                let available =
                    |v: Option<&Volume>| v.filter(|v| v.available)?.free_class().cloned();
                if let Some(class) = available(new).filter(|_| available(old).is_none()) {
                    freed.insert(class);
                }
            },
        );
        let claims = &self.claims;
        (self.refused).retain(|key, _| {
            (claims.get(key)).is_some_and(|c| c.class.as_ref().is_none_or(|k| !freed.contains(k)))
        });
        self.forget_shown();
        !changed.is_empty()
    }

    /// Takes in a change to the classes; returns whether anything placement reads changed.
    pub fn apply_classes(&mut self, change: Change<StorageClass>) -> bool {
        let key = |c: &StorageClass| c.metadata.name.clone().unwrap_or_default();
        !apply(&mut self.classes, change, (key, class), |_, _, _| {}).is_empty()
    }

    /// Assumed no longer, as the watches show it: a claim that shows its node, is bound or
    /// gone; a volume that shows a claim, or is gone, or whose claim is gone or bound to
    /// another (the claim's and the volume's watches are apart: a claim may show itself
    /// bound to the volume before the volume shows it).
    fn forget_shown(&mut self) {
        let (claims, volumes) = (&self.claims, &self.volumes);
        (self.assumed_nodes).retain(|key, _| {
            (claims.get(key)).is_some_and(|c| c.volume.is_none() && c.selected_node.is_none())
        });
        (self.assumed_volumes).retain(|volume, (key, _)| {
            let claim = claims.get(key);
            claim.is_some_and(|c| c.volume.as_ref().is_none_or(|v| v == volume))
                && volumes.get(volume).is_some_and(|v| v.claim_ref.is_none())
        });
        self.refused
            .retain(|key, _| claims.get(key).is_some_and(|c| c.volume.is_none()));
    }

    /// `job`'s binding failed, or was given up: the claims it was binding may not show it.
    /// Whether an object was freed of every binding.
    pub fn forget_assumed(&mut self, job: JobId) -> bool {
        let nodes = unassume(&mut self.assumed_nodes, job);
        let volumes = unassume(&mut self.assumed_volumes, job);
        nodes || volumes
    }

    /// Volumes were freed of a binding: claims may find room where they found none.
    pub fn forget_refused(&mut self) {
        self.refused.clear();
    }

    /// Refusals past their time are forgotten; whether any was.
    pub fn expire_refused(&mut self, now_ms: u64) -> bool {
        let mut expired = false;
        for by_pod in self.refused.values_mut() {
            for nodes in by_pod.values_mut() {
                let before = nodes.len();
                nodes.retain(|_, until_ms| *until_ms > now_ms);
                expired |= nodes.len() != before;
            }
            by_pod.retain(|_, nodes| !nodes.is_empty());
        }
        self.refused.retain(|_, by_pod| !by_pod.is_empty());
        expired
    }

    /// When the first refusal ends.
    pub fn next_refusal_end(&self) -> Option<u64> {
        let by_pod = self.refused.values().flat_map(HashMap::values);
        by_pod.flat_map(BTreeMap::values).copied().min()
    }

    /// Where the claims of the pod let it run, or why it must wait.
    pub fn plan(&self, pod: &PodRef, claims: &[String]) -> Result<Vec<VolumeTopology>, String> {
        let mut topology = Vec::new();
        for name in claims {
            let key = (pod.namespace.clone(), name.clone());
            let claim = self.usable(&key)?;
            if let Some(volume) = &claim.volume {
                let terms = match self.volumes.get(volume) {
                    None => {
                        return Err(format!(
                            "persistentvolumeclaim \"{name}\" is bound to persistentvolume \
                             \"{volume}\", which does not exist"
                        ));
                    }
                    Some(v) => v.terms.clone()?,
                };
                if !terms.is_empty() {
                    let unbound = false;
                    topology.push(VolumeTopology { terms, unbound });
                }
                continue;
            }
            let terms = match self.unbound(&key, claim)? {
                Unbound::Selected(node) => vec![named_node([node], SelectorOp::In)],
                Unbound::PreBound(_, volume) => volume.terms.clone()?,
                Unbound::Open { volumes, provision } => {
                    let refused = self.refused.get(&key).and_then(|by| by.get(&pod.uid));
                    if let Some(nodes) = refused {
                        let refused = named_node(nodes.keys().cloned(), SelectorOp::NotIn);
                        let (terms, unbound) = (vec![refused], true);
                        topology.push(VolumeTopology { terms, unbound });
                    }
                    open_terms(&volumes, provision).ok_or_else(|| {
                        let class = claim.class.as_deref().unwrap_or_default();
                        format!(
                            "persistentvolumeclaim \"{name}\" waits for a persistentvolume of \
                             storage class {class} that fits it: none is available, and the \
                             class has no provisioner"
                        )
                    })?
                }
            };
            if !terms.is_empty() {
                let unbound = true;
                topology.push(VolumeTopology { terms, unbound });
            }
        }
        Ok(topology)
    }

    /// How each claim of the pod placed on the node `node` (with `labels`) not bound yet
    /// is bound, each assumed so for `job`; or why it cannot be, there (at `now_ms`). A
    /// volume is bound to one claim only, among these and those assumed before.
    pub fn bind(
        &mut self,
        pod: &PodRef,
        claims: &[String],
        (node, labels): (&str, &Labels),
        (job, now_ms): (JobId, u64),
    ) -> Result<Vec<ClaimBinding>, String> {
        let mut bindings = Vec::new();
        for name in claims {
            let key = (pod.namespace.clone(), name.clone());
            let claim = self.usable(&key)?;
            if claim.volume.is_some() {
                continue;
            }
            let claim_name = name.clone();
            let binding = match self.unbound(&key, claim)? {
                Unbound::Selected(selected) if selected == node => {
                    ClaimBinding::Provision { claim: claim_name }
                }
                Unbound::PreBound(volume, v) if v.allows(node, labels) => ClaimBinding::Volume {
                    claim: claim_name,
                    volume: volume.to_owned(),
                },
                Unbound::Open { volumes, provision } => {
                    let smallest = (volumes.iter())
                        .filter(|(_, v)| v.allows(node, labels))
                        .min_by_key(|(name, v)| (v.capacity, *name));
                    match (smallest, provision) {
                        (Some((volume, _)), _) => ClaimBinding::Volume {
                            claim: claim_name,
                            volume: (*volume).to_owned(),
                        },
                        (None, Some(terms)) if terms.is_empty() || allowed(terms, node, labels) => {
                            ClaimBinding::Provision { claim: claim_name }
                        }
                        (None, _) => {
                            let by_pod = self.refused.entry(key).or_default();
                            let nodes = by_pod.entry(pod.uid.clone()).or_default();
                            nodes.insert(node.to_owned(), now_ms.saturating_add(REFUSAL_MS));
                            return Err(format!(
                                "persistentvolumeclaim \"{name}\": node {node} has no \
                                 persistentvolume left to bind it to"
                            ));
                        }
                    }
                }
                Unbound::Selected(_) | Unbound::PreBound(..) => {
                    return Err(format!(
                        "persistentvolumeclaim \"{name}\" may no longer go to node {node}"
                    ));
                }
            };
            match &binding {
                ClaimBinding::Provision { .. } => {
                    assume(&mut self.assumed_nodes, key, node.to_owned(), job);
                }
                ClaimBinding::Volume { volume, .. } => {
                    assume(&mut self.assumed_volumes, volume.clone(), key, job);
                }
            }
            bindings.push(binding);
        }
        Ok(bindings)
    }

    /// A claim that exists and is not being deleted.
    fn usable(&self, key: &ClaimKey) -> Result<&Claim, String> {
        let name = &key.1;
        let claim = (self.claims.get(key))
            .ok_or_else(|| format!("persistentvolumeclaim \"{name}\" not found"))?;
        if claim.deleting {
            return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
        }
        Ok(claim)
    }

    /// How an unbound claim gets its volume, or why it cannot yet.
    fn unbound<'a>(&'a self, key: &ClaimKey, claim: &'a Claim) -> Result<Unbound<'a>, String> {
        let Some(class_name) = &claim.class else {
            return Err("pod has unbound immediate PersistentVolumeClaims".into());
        };
        let class = (self.classes.get(class_name))
            .ok_or_else(|| format!("storageclass.storage.k8s.io \"{class_name}\" not found"))?;
        if !class.waits_for_first_consumer {
            return Err("pod has unbound immediate PersistentVolumeClaims".into());
        }
        let assumed = self.assumed_nodes.get(key).map(|(node, _)| node);
        if let Some(node) = claim.selected_node.as_ref().or(assumed) {
            return Ok(Unbound::Selected(node));
        }
        let wants = (claim.wants.as_ref())
            .map_err(|e| format!("persistentvolumeclaim \"{}\": {e}", key.1))?;
        let assumed_for = |volume: &str| self.assumed_volumes.get(volume).map(|(k, _)| k);
        let of_class = |name: &'a String| {
            let volume = self.volumes.get(name)?;
            let usable = volume.class.as_ref() == Some(class_name) && volume.could_hold(wants);
            usable.then_some((name.as_str(), volume))
        };
        // Pre-bound: a volume naming the claim, or one this replica is binding to it.
        let named = self.index.by_claim.get(key).into_iter().flatten();
        let assumed = (self.assumed_volumes.iter())
            .filter(|(_, (claim, _))| claim == key)
            .map(|(name, _)| name);
        let mut pre_bound: Vec<(&str, &Volume)> =
            named.chain(assumed).filter_map(of_class).collect();
        pre_bound.sort_unstable_by_key(|(name, _)| *name);
        let pre_bound = (pre_bound.into_iter())
            .find(|(name, v)| v.bound_to(key, &wants.uid) || assumed_for(name) == Some(key));
        if let Some((name, volume)) = pre_bound {
            return Ok(Unbound::PreBound(name, volume));
        }
        let free_of_class = self
            .index
            .free_by_class
            .get(class_name)
            .into_iter()
            .flatten();
        let free = (free_of_class.filter_map(of_class))
            .filter(|(name, volume)| assumed_for(name).is_none() && volume.fits(wants))
            .collect();
        let provision = (!class.no_provisioner).then_some(&class.topologies[..]);
        Ok(Unbound::Open {
            volumes: free,
            provision,
        })
    }
}

/// The terms of the nodes where one of the free volumes, or a volume provisioned within
/// `provision`, could be bound (empty: any node); none when no node could.
fn open_terms(
    volumes: &[(&str, &Volume)],
    provision: Option<&[SelectorTerm]>,
) -> Option<Vec<SelectorTerm>> {
    if provision.is_some_and(<[_]>::is_empty) {
        return Some(Vec::new());
    }
    let mut seen = HashSet::new();
    let mut terms = Vec::new();
    for (_, volume) in volumes {
        let Ok(volume_terms) = &volume.terms else {
            continue;
        };
        if volume_terms.is_empty() {
            return Some(Vec::new());
        }
        for term in volume_terms {
            if seen.insert(term) {
                terms.push(term.clone());
            }
        }
    }
    terms.extend(provision.into_iter().flatten().cloned());
    (!terms.is_empty()).then_some(terms)
}

/// Whether the node of this name and labels meets one of the terms.
fn allowed(terms: &[SelectorTerm], node: &str, labels: &Labels) -> bool {
    terms.iter().any(|t| t.matches(node, labels))
}

/// Applies a change to one kind's store, each object keyed by `key` and read by `read`;
/// `changed` is told each reading that changed (before, after). Returns the keys of the
/// objects whose reading changed (or that are gone).
fn apply<K, Key: Ord + Clone + std::hash::Hash, V: PartialEq>(
    store: &mut HashMap<Key, V>,
    change: Change<K>,
    (key, read): (impl Fn(&K) -> Key, impl Fn(&K) -> V),
    mut changed: impl FnMut(&Key, Option<&V>, Option<&V>),
) -> Vec<Key> {
    let (applied, gone) = change.split(&key, store.keys().cloned());
    let mut keys = Vec::new();
    for key in gone {
        if let Some(old) = store.remove(&key) {
            changed(&key, Some(&old), None);
            keys.push(key);
        }
    }
    for object in applied {
        let (key, value) = (key(&object), read(&object));
        if store.get(&key) != Some(&value) {
            let old = store.insert(key.clone(), value);
            changed(&key, old.as_ref(), store.get(&key));
            keys.push(key);
        }
    }
    keys
}

fn claim(c: &PersistentVolumeClaim) -> Claim {
    let spec = c.spec.as_ref();
    let annotations = c.metadata.annotations.as_ref();
    Claim {
        volume: non_empty(spec.and_then(|s| s.volume_name.as_ref())),
        class: class_of(
            annotations,
            spec.and_then(|s| s.storage_class_name.as_ref()),
        ),
        selected_node: non_empty(annotations.and_then(|a| a.get(SELECTED_NODE_ANNOTATION))),
        deleting: c.metadata.deletion_timestamp.is_some(),
        wants: wants(c),
    }
}

fn non_empty(s: Option<&String>) -> Option<String> {
    s.filter(|s| !s.is_empty()).cloned()
}

/// The class of a claim or volume, as Kubernetes reads it (`GetPersistentVolumeClass`):
/// the beta annotation first.
fn class_of(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    spec_class: Option<&String>,
) -> Option<String> {
    match annotations.and_then(|a| a.get(BETA_CLASS_ANNOTATION)) {
        Some(class) => non_empty(Some(class)),
        None => non_empty(spec_class),
    }
}

/// What a claim asks of a volume, or why its spec cannot be read.
fn wants(c: &PersistentVolumeClaim) -> Result<Wants, String> {
    let spec = c.spec.as_ref();
    let storage = (spec.and_then(|s| s.resources.as_ref()))
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .ok_or("spec.resources.requests.storage is missing")?;
    let storage = parse_quantity_nano(&storage.0)
        .and_then(|n| u128::try_from(n).map_err(|_| format!("{:?} is negative", storage.0)))
        .map_err(|e| format!("spec.resources.requests.storage: {e}"))?;
    let selector = match spec.and_then(|s| s.selector.as_ref()) {
        Some(selector) => label_selector("", "spec.selector", selector)
            .map_err(|e| format!("{}: {}", e.field, e.message))?,
        None => Vec::new(),
    };
    Ok(Wants {
        uid: c.metadata.uid.clone().unwrap_or_default(),
        storage,
        access_modes: spec
            .and_then(|s| s.access_modes.clone())
            .unwrap_or_default(),
        block: spec.and_then(|s| s.volume_mode.as_deref()) == Some("Block"),
        selector,
    })
}

fn volume(v: &PersistentVolume) -> Volume {
    let spec = v.spec.as_ref();
    let capacity = (spec.and_then(|s| s.capacity.as_ref()))
        .and_then(|c| c.get("storage"))
        .and_then(|q| u128::try_from(parse_quantity_nano(&q.0).ok()?).ok());
    let claim_ref = spec.and_then(|s| s.claim_ref.as_ref()).map(|r| {
        let field = |f: &Option<String>| f.clone().unwrap_or_default();
        (field(&r.namespace), field(&r.name), field(&r.uid))
    });
    let phase = v.status.as_ref().and_then(|s| s.phase.as_deref());
    Volume {
        terms: node_affinity(v),
        class: class_of(
            v.metadata.annotations.as_ref(),
            spec.and_then(|s| s.storage_class_name.as_ref()),
        ),
        capacity,
        access_modes: spec
            .and_then(|s| s.access_modes.clone())
            .unwrap_or_default(),
        block: spec.and_then(|s| s.volume_mode.as_deref()) == Some("Block"),
        labels: v.metadata.labels.clone().unwrap_or_default(),
        available: phase == Some("Available"),
        claim_ref,
        deleting: v.metadata.deletion_timestamp.is_some(),
    }
}

/// A volume's required node affinity, or why it cannot be read.
fn node_affinity(v: &PersistentVolume) -> Result<Vec<SelectorTerm>, String> {
    let name = v.metadata.name.as_deref().unwrap_or_default();
    let object = format!("persistentvolume {name}");
    let required = (v.spec.as_ref())
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref());
    let Some(required) = required else {
        return Ok(Vec::new());
    };
    let path = "spec.nodeAffinity.required.nodeSelectorTerms";
    let terms = (required.node_selector_terms.iter().enumerate())
        .map(|(i, term)| {
            let mut term = selector_term(&object, &format!("{path}[{i}]"), term)?;
            if term.match_expressions.is_empty() && term.match_fields.is_empty() {
                // Kubernetes: an empty term matches no node (the model's, every node).
                term.match_fields.push(no_node());
            }
            Ok::<_, ConvertError>(term)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if terms.is_empty() {
        // No term matches no node, as for a pod's required node affinity.
        return Err(format!("{object}: {path} is empty: no node may use it"));
    }
    Ok(terms)
}

fn class(c: &StorageClass) -> Class {
    let topologies = c.allowed_topologies.iter().flatten().map(|term| {
        let expressions = term.match_label_expressions.iter().flatten();
        SelectorTerm {
            match_expressions: expressions
                .map(|e| Requirement {
                    key: e.key.clone(),
                    op: SelectorOp::In,
                    values: e.values.clone(),
                })
                .collect(),
            match_fields: Vec::new(),
        }
    });
    Class {
        waits_for_first_consumer: c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"),
        no_provisioner: c.provisioner == NO_PROVISIONER,
        topologies: topologies.collect(),
    }
}

/// The term on the names of nodes: `In` holds on the nodes named alone, `NotIn` on every
/// other.
fn named_node<N: Into<String>>(nodes: impl IntoIterator<Item = N>, op: SelectorOp) -> SelectorTerm {
    SelectorTerm {
        match_expressions: Vec::new(),
        match_fields: vec![Requirement {
            key: "metadata.name".into(),
            op,
            values: nodes.into_iter().map(Into::into).collect(),
        }],
    }
}
