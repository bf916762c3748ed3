//! The persistent volumes pods use, and where they let a pod run, as kube-scheduler's
//! `VolumeBinding` reads them.
//!
//! - A claim bound to a volume keeps its pods on the nodes the volume's node affinity
//!   allows (anywhere, for a volume without one).
//! - An unbound claim whose storage class binds on first use (`WaitForFirstConsumer`) is
//!   provisioned for the node its pod is placed on, within the class's allowed
//!   topologies: the claim is annotated `volume.kubernetes.io/selected-node`, the class's
//!   provisioner makes the volume there, and the pod is bound once the claim is (the
//!   writer waits for it). A claim annotated so and not bound yet keeps its other pods to
//!   that node, and so does one this replica is annotating (as kube-scheduler's assume
//!   cache keeps it), until the claim shows it or the binding fails; their bindings wait
//!   for it too.
//! - Any other unbound claim (its class binds at once, or it has none), a claim missing or
//!   being deleted, and a class without a provisioner (pre-provisioned local volumes,
//!   which only a scheduler choosing one of them binds: Kant does not) keep its pods
//!   waiting, each saying why.
//!
//! It keeps only what placement reads of the claims, volumes and classes, and performs no
//! I/O.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::model::{JobId, Requirement, SelectorOp, SelectorTerm, VolumeTopology};

use super::super::convert::{ConvertError, no_node, selector_term};
use super::resync::Change;

/// The annotation that asks a class's provisioner for a volume on a node.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// The class of a claim, read before `spec.storageClassName` (deprecated, still honoured).
const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The provisioner of classes whose volumes are made by hand (local volumes).
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// What placement reads of a PersistentVolumeClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Claim {
    /// The volume it is bound to.
    volume: Option<String>,
    class: Option<String>,
    /// The node a volume is being provisioned for.
    selected_node: Option<String>,
    deleting: bool,
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

/// Where a pod's claims let it run, and which of them to provision for its node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ClaimsPlan {
    pub topology: Vec<VolumeTopology>,
    /// The claims not bound yet whose volumes are provisioned for the pod's node:
    /// annotated with it (again) and waited for before the pod is bound.
    pub to_provision: Vec<String>,
}

#[derive(Debug, Default)]
pub(super) struct Volumes {
    /// By namespace and name.
    claims: HashMap<(String, String), Claim>,
    /// A volume's required node affinity (none: any node), or why it cannot be read.
    volumes: HashMap<String, Result<Vec<SelectorTerm>, String>>,
    classes: HashMap<String, Class>,
    /// Claims this replica is annotating with a node, by namespace and name: the node, and
    /// the job whose binding does it.
    assumed: HashMap<(String, String), (String, JobId)>,
}

impl Volumes {
    /// Takes in a change to the claims; returns whether anything placement reads changed.
    pub fn apply_claims(&mut self, change: Change<PersistentVolumeClaim>) -> bool {
        let key = |c: &PersistentVolumeClaim| {
            let meta = &c.metadata;
            let namespace = meta.namespace.clone().unwrap_or_default();
            (namespace, meta.name.clone().unwrap_or_default())
        };
        let changed = apply(&mut self.claims, change, key, claim);
        // A claim that shows its node (or is bound, or gone) is assumed no longer.
        let claims = &self.claims;
        (self.assumed).retain(|key, _| {
            claims
                .get(key)
                .is_some_and(|c| c.selected_node.is_none() && c.volume.is_none())
        });
        changed
    }

    /// `job`'s binding annotates the claim with `node`: the claim's other pods follow.
    pub fn assume_selected(&mut self, namespace: &str, claim: &str, node: &str, job: JobId) {
        let key = (namespace.to_owned(), claim.to_owned());
        self.assumed.insert(key, (node.to_owned(), job));
    }

    /// `job`'s binding failed: the claims it was annotating may not show their node.
    pub fn forget_assumed(&mut self, job: JobId) {
        self.assumed.retain(|_, (_, by)| *by != job);
    }

    /// Takes in a change to the volumes; returns whether anything placement reads changed.
    pub fn apply_volumes(&mut self, change: Change<PersistentVolume>) -> bool {
        let key = |v: &PersistentVolume| v.metadata.name.clone().unwrap_or_default();
        apply(&mut self.volumes, change, key, node_affinity)
    }

    /// Takes in a change to the classes; returns whether anything placement reads changed.
    pub fn apply_classes(&mut self, change: Change<StorageClass>) -> bool {
        let key = |c: &StorageClass| c.metadata.name.clone().unwrap_or_default();
        apply(&mut self.classes, change, key, class)
    }

    /// Where the claims of a pod of `namespace` let it run, or why it must wait.
    pub fn plan(&self, namespace: &str, claims: &[String]) -> Result<ClaimsPlan, String> {
        let mut plan = ClaimsPlan::default();
        for name in claims {
            let key = (namespace.to_owned(), name.clone());
            let claim = (self.claims.get(&key))
                .ok_or_else(|| format!("persistentvolumeclaim \"{name}\" not found"))?;
            if claim.deleting {
                return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
            }
            if let Some(volume) = &claim.volume {
                let terms = match self.volumes.get(volume) {
                    None => {
                        return Err(format!(
                            "persistentvolumeclaim \"{name}\" is bound to persistentvolume \
                             \"{volume}\", which does not exist"
                        ));
                    }
                    Some(read) => read.clone()?,
                };
                if !terms.is_empty() {
                    let bound = VolumeTopology {
                        terms,
                        to_provision: false,
                    };
                    plan.topology.push(bound);
                }
                continue;
            }
            let Some(class_name) = &claim.class else {
                return Err("pod has unbound immediate PersistentVolumeClaims".into());
            };
            let class = (self.classes.get(class_name))
                .ok_or_else(|| format!("storageclass.storage.k8s.io \"{class_name}\" not found"))?;
            if !class.waits_for_first_consumer {
                return Err("pod has unbound immediate PersistentVolumeClaims".into());
            }
            let assumed = self.assumed.get(&key).map(|(node, _)| node);
            if let Some(node) = claim.selected_node.as_ref().or(assumed) {
                // Being provisioned there: its other pods follow it, and wait for it.
                plan.topology.push(VolumeTopology {
                    terms: vec![named_node(node)],
                    to_provision: true,
                });
                plan.to_provision.push(name.clone());
                continue;
            }
            if class.no_provisioner {
                return Err(format!(
                    "persistentvolumeclaim \"{name}\" waits for a volume of storage class \
                     {class_name}, which has no provisioner: Kant does not bind pre-made \
                     volumes; bind the claim to one beforehand"
                ));
            }
            if !class.topologies.is_empty() {
                plan.topology.push(VolumeTopology {
                    terms: class.topologies.clone(),
                    to_provision: true,
                });
            }
            plan.to_provision.push(name.clone());
        }
        Ok(plan)
    }
}

/// Applies a change to one kind's store, each object read by `read`; whether what the
/// store holds changed.
fn apply<K, Key: Ord + Clone + std::hash::Hash, V: PartialEq>(
    store: &mut HashMap<Key, V>,
    change: Change<K>,
    key: impl Fn(&K) -> Key,
    read: impl Fn(&K) -> V,
) -> bool {
    let (applied, gone) = change.split(&key, store.keys().cloned());
    let mut changed = false;
    for key in gone {
        changed |= store.remove(&key).is_some();
    }
    for object in applied {
        let (key, value) = (key(&object), read(&object));
        if store.get(&key) != Some(&value) {
            store.insert(key, value);
            changed = true;
        }
    }
    changed
}

fn claim(c: &PersistentVolumeClaim) -> Claim {
    let spec = c.spec.as_ref();
    let non_empty = |s: Option<&String>| s.filter(|s| !s.is_empty()).cloned();
    let annotations = c.metadata.annotations.as_ref();
    // As Kubernetes reads it (`GetPersistentVolumeClaimClass`): the beta annotation first.
    let class = match annotations.and_then(|a| a.get(BETA_CLASS_ANNOTATION)) {
        Some(class) => non_empty(Some(class)),
        None => non_empty(spec.and_then(|s| s.storage_class_name.as_ref())),
    };
    Claim {
        volume: non_empty(spec.and_then(|s| s.volume_name.as_ref())),
        class,
        selected_node: non_empty(annotations.and_then(|a| a.get(SELECTED_NODE_ANNOTATION))),
        deleting: c.metadata.deletion_timestamp.is_some(),
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

/// The term that holds on the node of this name alone.
fn named_node(node: &str) -> SelectorTerm {
    SelectorTerm {
        match_expressions: Vec::new(),
        match_fields: vec![Requirement {
            key: "metadata.name".into(),
            op: SelectorOp::In,
            values: vec![node.to_owned()],
        }],
    }
}
