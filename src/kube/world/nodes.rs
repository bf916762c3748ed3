//! The nodes this replica schedules onto, and the node pools' ids. A node's facts are
//! converted once per change; the cluster spec is rebuilt only when facts that matter to
//! scheduling changed (a kubelet heartbeat changes none), at most once per round. Pool
//! ids are handed out once per GPU model and kept for good, so that pending jobs and
//! quotas keep pointing at the right pool across rebuilds.
//!
//! A node whose device plugin reports more devices unhealthy than `kant.io/unhealthy-gpus`
//! lists gets that many more marked, chosen again every round: the highest-numbered
//! devices no pod holds, then the highest-numbered held ones (they keep their pods). So
//! the node offers what its allocatable leaves free, whichever devices the plugin means.
//!
//! A node that comes to list fewer GPU devices than before (a kubelet restarting before its
//! device plugin registers again lists none for a moment) keeps the devices it no longer
//! lists, as reported unhealthy, for as long as a pod holds one of them, bound or with its
//! binding in flight: they take no new pod, and no pod on them loses its reservation. A
//! reservation dropped there would be given again while its binding could still land.
//!
//! A node deleted while pods are placed on it (bound, or with their bindings in flight)
//! is kept likewise, as kube-scheduler's cache keeps a deleted node's pods: every device
//! unhealthy, cordoned and full, until no pod is placed there. A binding in flight to it
//! is answered as any other (the API server does not check that the node exists), no new
//! binding is sent to it, and a node registering again under its name keeps what is held
//! there.
//!
//! A node whose description comes to be invalid is kept the same way, on its facts as last
//! valid, while pods are placed there: GPU feature discovery drops its labels for a minute
//! when it restarts, and the node would otherwise leave the cluster with its pods, their
//! reservations dropped and given again while a binding could still land. It takes a new
//! pod once its description is valid again; if no pod is placed there first, it is left
//! out of the cluster meanwhile, as any invalid node is.
//!
//! A node refused so, or whose GPUs a GPU annotation that does not parse closes, is logged
//! and told with a Warning event on the node, once per reason (and again each time this
//! replica takes the lead, or for a node created anew), by the replicas of the GPU model its
//! `nvidia.com/gpu.product` label names, or by the `--default-shard` one where it names
//! none; pods that find no node say how many are refused.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::Node;

use crate::model::{
    ClusterSpec, ClusterSpecBuilder, LinkMatrix, MAX_POOLS, PoolId, Taint, TaintEffect,
    UNSCHEDULABLE_TAINT, bits, node_device_mask,
};

use super::super::convert::{GPU_PRODUCT_LABEL, NodeConverter, NodeFacts};
use super::resync::Change;
use super::{Output, Regarding, World, WorldOptions};

/// The reason of the event on a node left out of the cluster (or kept taking no new pod)
/// for an invalid description.
const INVALID_NODE: &str = "InvalidNode";
/// The reason of the event on a node whose GPUs a GPU annotation that does not parse
/// closes.
const INVALID_GPU_ANNOTATION: &str = "InvalidGpuAnnotation";
/// The reason of the event on a usable node with a label that cannot take effect.
const INEFFECTIVE_LABEL: &str = "IneffectiveLabel";

/// What is known of one node.
enum NodeEntry {
    /// Usable by this replica.
    Usable(Box<NodeFacts>),
    /// Deleted, or its description invalid (`closed` says which), and kept while pods are
    /// placed there (see the module documentation): its facts as last listed valid, made
    /// to take no new pod.
    Deleted(Box<NodeFacts>),
    /// Of another shard's GPU model: this one (`None`: labelled with it, but listing no GPU
    /// for now, so carrying none).
    OtherShard(Option<String>),
    /// Its description is invalid: the reason, logged once.
    Invalid(String),
}

pub(super) struct Nodes {
    converter: NodeConverter,
    known: BTreeMap<String, NodeEntry>,
    /// The GPU model of each pool id, in id order.
    models: Vec<Option<String>>,
    /// The pool id of each model in `models`.
    pool_of: HashMap<Option<String>, PoolId>,
    /// How many valid nodes of the cluster, this shard's or another's, carry each GPU
    /// model.
    carried: HashMap<String, u32>,
    /// Whether a model came to be carried, or stopped being, since last asked.
    carried_changed: bool,
    /// The models the configuration's links name that were warned of as misnamed.
    misnamed_warned: HashSet<String>,
    /// The nodes kept with devices they no longer list (see the module documentation),
    /// with their facts as listed, taken up once no pod holds a device beyond them.
    shrunk: HashMap<String, NodeFacts>,
    /// The nodes kept after their deletion (`None`) or while their description is invalid
    /// (why), see the module documentation.
    deleted: HashMap<String, Option<String>>,
    /// Whether a node came to be kept so since last asked.
    newly_deleted: bool,
    /// Each node's uid and the GPU model its label names, as last listed: who is to tell
    /// of it, and the events' object.
    identities: HashMap<String, NodeIdentity>,
    /// The nodes whose warning (see [`Nodes::warning`]) is yet to be told in an event,
    /// with it: taken by the leader's rounds, kept while a standby.
    untold: BTreeMap<String, (&'static str, String)>,
    dirty: bool,
}

/// Who a node is, whatever its description.
struct NodeIdentity {
    uid: String,
    /// Its `nvidia.com/gpu.product` label, if not empty.
    labelled_model: Option<String>,
}

impl NodeIdentity {
    fn of(node: &Node) -> Self {
        let labels = node.metadata.labels.as_ref();
        Self {
            uid: node.metadata.uid.clone().unwrap_or_default(),
            labelled_model: (labels.and_then(|l| l.get(GPU_PRODUCT_LABEL)))
                .filter(|m| !m.is_empty())
                .cloned(),
        }
    }

    /// Whether the node may be this replica's: its label names a model of this shard, or
    /// none.
    fn may_be_ours(&self, options: &WorldOptions) -> bool {
        (self.labelled_model.as_deref()).is_none_or(|m| options.owns_model(m))
    }

    /// Whether this replica tells of the node: it takes the node's labelled model, or,
    /// where the label names none, it is the default shard (one replica in all where the
    /// shards' models do not overlap and one takes the rest).
    fn told_here(&self, options: &WorldOptions) -> bool {
        match &self.labelled_model {
            Some(model) => options.owns_model(model),
            None => options.default_shard,
        }
    }
}

impl Nodes {
    pub fn new(converter: NodeConverter) -> Self {
        Self {
            converter,
            known: BTreeMap::new(),
            models: Vec::new(),
            pool_of: HashMap::new(),
            carried: HashMap::new(),
            carried_changed: false,
            misnamed_warned: HashSet::new(),
            shrunk: HashMap::new(),
            deleted: HashMap::new(),
            newly_deleted: false,
            identities: HashMap::new(),
            untold: BTreeMap::new(),
            dirty: false,
        }
    }

    /// Takes in a change to the nodes; returns those that were another shard's and no
    /// longer are (this replica's now, invalid, or gone).
    pub fn apply(&mut self, change: Change<Node>, options: &WorldOptions) -> Vec<String> {
        let name = |n: &Node| n.metadata.name.clone().unwrap_or_default();
        let (applied, gone) = change.split(name, self.known.keys().cloned());
        let mut left_other_shards = Vec::new();
        for key in gone {
            self.identities.remove(&key);
            self.untold.remove(&key);
            self.shrunk.remove(&key);
            let entry = self.known.remove(&key);
            self.count_model(entry.as_ref(), -1);
            match entry {
                Some(NodeEntry::Usable(facts)) => {
                    self.dirty = true;
                    let kept = NodeEntry::Deleted(Box::new(taking_no_pod(*facts)));
                    self.known.insert(key.clone(), kept);
                    self.deleted.insert(key, None);
                    self.newly_deleted = true;
                }
                // A relist does not show it, as it did not before (or it was kept while
                // invalid, and is now deleted).
                Some(deleted @ NodeEntry::Deleted(_)) => {
                    self.known.insert(key.clone(), deleted);
                    self.deleted.insert(key, None);
                }
                Some(NodeEntry::OtherShard(_)) => left_other_shards.push(key),
                _ => {}
            }
        }
        for node in applied {
            let key = name(&node);
            let identity = NodeIdentity::of(&node);
            let created_anew = (self.identities.get(&key)).is_some_and(|i| i.uid != identity.uid);
            self.identities.insert(key.clone(), identity);
            let before = if created_anew {
                None
            } else {
                self.warning(&key)
            };
            self.shrunk.remove(&key);
            let entry = match self.converter.node(&node) {
                Ok(listed) => {
                    self.deleted.remove(&key);
                    let facts = self.keeping_unlisted_devices(&key, listed);
                    entry_of(facts, self.known.get(&key), options)
                }
                Err(e) => self.invalid(&key, e.to_string()),
            };
            self.settle(key.clone(), entry, &mut left_other_shards);
            self.follow_warning(&key, before);
        }
        left_other_shards
    }

    /// Why Kant refuses the node, closes its GPUs, or ignores a label of it, if it does: the
    /// reason of the event on it, and its note.
    fn warning(&self, node: &str) -> Option<(&'static str, String)> {
        let refused = |reason: &String| {
            let message = format!(
                "{reason}; Kant places no new pod on the node until it is fixed (pods already \
                 there keep what they hold)"
            );
            (INVALID_NODE, message)
        };
        match self.known.get(node)? {
            NodeEntry::Invalid(reason) => Some(refused(reason)),
            NodeEntry::Deleted(_) => self.deleted.get(node)?.as_ref().map(refused),
            NodeEntry::Usable(facts) => match (&facts.problem, &facts.notice) {
                (Some(problem), _) => {
                    let message = format!(
                        "{problem}; Kant places no new GPU pod on the node until it is fixed \
                         (pods already there keep their GPUs)"
                    );
                    Some((INVALID_GPU_ANNOTATION, message))
                }
                (None, Some(notice)) => Some((INEFFECTIVE_LABEL, notice.clone())),
                (None, None) => None,
            },
            NodeEntry::OtherShard(_) => None,
        }
    }

    /// Logs the node's warning, and keeps it to be told, when it differs from `before`;
    /// forgets one untold that no longer holds.
    fn follow_warning(&mut self, node: &str, before: Option<(&'static str, String)>) {
        let now = self.warning(node);
        if now == before {
            return;
        }
        match now {
            Some(warning) => {
                tracing::warn!("{}", warning.1);
                self.untold.insert(node.to_owned(), warning);
            }
            None => {
                self.untold.remove(node);
            }
        }
    }

    /// Every node's warning is to be told again.
    pub fn tell_again(&mut self) {
        self.untold = (self.known.keys())
            .filter_map(|node| Some((node.clone(), self.warning(node)?)))
            .collect();
    }

    /// The events to write on the nodes this replica tells of (see the module
    /// documentation): what is untold, as it stands now.
    pub fn take_events(&mut self, options: &WorldOptions) -> Vec<Output> {
        let untold = std::mem::take(&mut self.untold);
        (untold.into_iter())
            .filter_map(|(node, (reason, message))| {
                let identity = self.identities.get(&node)?;
                identity.told_here(options).then(|| Output::Event {
                    target: Regarding::node(&node, &identity.uid),
                    warning: true,
                    reason,
                    message,
                })
            })
            .collect()
    }

    /// How many nodes that may be this replica's are left out of the cluster, their
    /// descriptions invalid.
    pub fn refused(&self, options: &WorldOptions) -> u32 {
        let refused = self.known.iter().filter(|(name, entry)| {
            matches!(entry, NodeEntry::Invalid(_))
                && (self.identities.get(*name)).is_some_and(|i| i.may_be_ours(options))
        });
        refused.count() as u32
    }

    /// What a node whose description is invalid becomes: kept on its facts as last valid,
    /// taking no new pod, when it was usable (see the module documentation), else invalid.
    fn invalid(&mut self, key: &str, reason: String) -> NodeEntry {
        let (Some(NodeEntry::Usable(facts)) | Some(NodeEntry::Deleted(facts))) =
            self.known.get(key)
        else {
            self.deleted.remove(key);
            return NodeEntry::Invalid(reason);
        };
        let kept = NodeEntry::Deleted(Box::new(taking_no_pod((**facts).clone())));
        let was = self.deleted.insert(key.to_owned(), Some(reason.clone()));
        if was.flatten().as_ref() != Some(&reason) {
            self.newly_deleted = true;
        }
        kept
    }

    /// Nodes kept with devices they no longer list go back to their facts as listed once
    /// `holds_unlisted(node, listed GPUs)` says no pod holds a device beyond those, and
    /// deleted nodes kept go once `holds_pods(node)` says no pod is placed there; returns
    /// the nodes that were another shard's and no longer are, as [`Nodes::apply`] does.
    pub fn take_up_listed(
        &mut self,
        options: &WorldOptions,
        holds_unlisted: impl Fn(&str, usize) -> bool,
        holds_pods: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let deleted: Vec<String> = (self.deleted.keys())
            .filter(|name| !holds_pods(name))
            .cloned()
            .collect();
        for name in deleted {
            match self.deleted.remove(&name).flatten() {
                Some(reason) => self.known.insert(name, NodeEntry::Invalid(reason)),
                None => self.known.remove(&name),
            };
            self.dirty = true;
        }
        let released: Vec<String> = (self.shrunk.iter())
            .filter(|(name, listed)| !holds_unlisted(name, listed.row.gpus))
            .map(|(name, _)| name.clone())
            .collect();
        let mut left_other_shards = Vec::new();
        for name in released {
            if let Some(listed) = self.shrunk.remove(&name) {
                let before = self.warning(&name);
                let entry = entry_of(listed, self.known.get(&name), options);
                self.settle(name.clone(), entry, &mut left_other_shards);
                self.follow_warning(&name, before);
            }
        }
        left_other_shards
    }

    /// The node's facts as listed, or, where it lists fewer GPU devices than it is known
    /// with, of the same GPU model or none, the known devices kept (see the module
    /// documentation): the listing is then remembered in `shrunk`.
    fn keeping_unlisted_devices(&mut self, name: &str, listed: NodeFacts) -> NodeFacts {
        let (Some(NodeEntry::Usable(known)) | Some(NodeEntry::Deleted(known))) =
            self.known.get(name)
        else {
            return listed;
        };
        let model = &known.row.gpu_model;
        let same_model = listed.row.gpu_model.is_none() || listed.row.gpu_model == *model;
        if listed.row.gpus >= known.row.gpus || model.is_none() || !same_model {
            return listed;
        }
        let mut kept = listed.clone();
        kept.row.gpus = known.row.gpus;
        kept.row.gpu_model = model.clone();
        kept.links = known.links.clone();
        kept.nics = known.nics.clone();
        // The devices no longer listed count among those reported unhealthy.
        kept.unlisted_unhealthy += known.row.gpus - listed.row.gpus;
        self.shrunk.insert(name.to_owned(), listed);
        kept
    }

    /// Records what a node now is; adds it to `left_other_shards` when it was another
    /// shard's and no longer is.
    fn settle(&mut self, key: String, entry: NodeEntry, left_other_shards: &mut Vec<String>) {
        let changed = match (self.known.get(&key), &entry) {
            (Some(NodeEntry::Usable(old)), NodeEntry::Usable(new)) => old != new,
            (Some(NodeEntry::Invalid(old)), NodeEntry::Invalid(new)) => old != new,
            (Some(NodeEntry::OtherShard(old)), NodeEntry::OtherShard(new)) => old != new,
            (Some(NodeEntry::Deleted(old)), NodeEntry::Deleted(new)) => old != new,
            _ => true,
        };
        if !changed {
            return;
        }
        let was_usable = matches!(
            self.known.get(&key),
            Some(NodeEntry::Usable(_) | NodeEntry::Deleted(_))
        );
        self.dirty |= was_usable || matches!(entry, NodeEntry::Usable(_));
        let was_other_shards = matches!(self.known.get(&key), Some(NodeEntry::OtherShard(_)));
        if was_other_shards && !matches!(entry, NodeEntry::OtherShard(_)) {
            left_other_shards.push(key.clone());
        }
        self.count_model(Some(&entry), 1);
        let old = self.known.insert(key, entry);
        self.count_model(old.as_ref(), -1);
    }

    /// Counts (`by` 1) or uncounts (`by` -1) a node's GPU model in `carried`.
    fn count_model(&mut self, entry: Option<&NodeEntry>, by: i32) {
        let model = match entry {
            Some(NodeEntry::Usable(facts)) => facts.row.gpu_model.as_ref(),
            Some(NodeEntry::OtherShard(model)) => model.as_ref(),
            _ => None,
        };
        let Some(model) = model else {
            return;
        };
        let count = self.carried.entry(model.clone()).or_insert(0);
        let was = *count;
        *count = count.saturating_add_signed(by);
        self.carried_changed |= (was == 0) != (*count == 0);
        if *count == 0 {
            self.carried.remove(model);
        }
    }

    /// Whether a node was deleted, and kept, since the last call.
    pub fn take_newly_deleted(&mut self) -> bool {
        std::mem::take(&mut self.newly_deleted)
    }

    /// Why the node is kept taking no pod (deleted, or its description invalid), if it
    /// is: no binding goes there.
    pub fn closed(&self, node: &str) -> Option<String> {
        match self.deleted.get(node)? {
            None => Some(format!("node {node} was deleted")),
            Some(reason) => Some(format!("{reason} (Kant places no new pod on the node)")),
        }
    }

    /// Whether a GPU model came to be carried by some node, or stopped being, since the
    /// last call.
    pub fn take_carried_changed(&mut self) -> bool {
        std::mem::take(&mut self.carried_changed)
    }

    /// Warns, once each, of the GPU models the configuration's links name that no node
    /// carries but that name part of one a node carries (`L40S` for `NVIDIA-L40S`): a
    /// node's model is its `nvidia.com/gpu.product` value, whole, and a misnamed layout
    /// leaves its nodes on the default one.
    pub fn warn_misnamed_link_models(&mut self) {
        let mut misnamed = Vec::new();
        for named in self.converter.link_models() {
            if self.carried.contains_key(named) || self.misnamed_warned.contains(named) {
                continue;
            }
            let part = named.to_ascii_lowercase();
            let carried = (self.carried.keys()).find(|m| m.to_ascii_lowercase().contains(&part));
            if let Some(carried) = carried {
                misnamed.push((named.clone(), carried.clone()));
            }
        }
        for (named, carried) in misnamed {
            tracing::warn!(
                "the configuration's links name GPU model {named}, which no node carries; \
                 nodes carry {carried} (models are whole nvidia.com/gpu.product values), \
                 which take the default layout unless annotated"
            );
            self.misnamed_warned.insert(named);
        }
    }

    /// Whether some valid node of the cluster, this shard's or another's, carries `model`.
    pub fn carries(&self, model: &str) -> bool {
        self.carried.contains_key(model)
    }

    /// The pool of a GPU model (`None`: CPU-only), registered if new: a pool with no node
    /// yet is empty, and a rebuild is due to give it an id in the spec. `None` once
    /// [`MAX_POOLS`] models are registered.
    pub fn register_model(&mut self, model: Option<&str>) -> Option<PoolId> {
        let model = model.map(str::to_owned);
        if let Some(&pool) = self.pool_of.get(&model) {
            return Some(pool);
        }
        if self.models.len() >= MAX_POOLS {
            return None;
        }
        let pool = PoolId(self.models.len() as u16);
        self.models.push(model.clone());
        self.pool_of.insert(model, pool);
        self.dirty = true;
        Some(pool)
    }

    /// A new spec when something changed since the last one.
    pub fn take_rebuilt(&mut self) -> Option<ClusterSpec> {
        std::mem::take(&mut self.dirty).then(|| self.build_spec())
    }

    /// The spec of the usable nodes, pools in registration order (nodes' models are
    /// registered as they come).
    pub fn build_spec(&mut self) -> ClusterSpec {
        let models: Vec<Option<String>> = (self.in_spec())
            .map(|(_, facts)| facts.row.gpu_model.clone())
            .collect();
        for model in &models {
            self.register_model(model.as_deref());
        }
        self.dirty = false;
        let mut builder = ClusterSpecBuilder::with_pools(&self.models);
        for (name, facts) in self.in_spec() {
            if let Err(e) = builder.add_with_links(facts.row.clone(), facts.links.clone()) {
                tracing::warn!("node {name}: {e}; left out of the cluster");
            }
        }
        builder.build()
    }

    /// The nodes of the cluster spec: those usable, and those deleted kept.
    fn in_spec(&self) -> impl Iterator<Item = (&String, &NodeFacts)> {
        self.known.iter().filter_map(|(name, entry)| match entry {
            NodeEntry::Usable(facts) | NodeEntry::Deleted(facts) => Some((name, &**facts)),
            _ => None,
        })
    }

    /// The RDMA NIC names and the link matrix of a usable node.
    pub fn devices_of(&self, node: &str) -> Option<(&[String], &LinkMatrix)> {
        match self.known.get(node)? {
            NodeEntry::Usable(facts) => Some((&facts.nics, &facts.links)),
            _ => None,
        }
    }

    /// The usable nodes with devices reported unhealthy beyond those their annotation
    /// lists, with how many.
    fn unlisted_unhealthy(&self) -> impl Iterator<Item = (&str, usize)> {
        self.known.iter().filter_map(|(name, entry)| match entry {
            NodeEntry::Usable(facts) if facts.unlisted_unhealthy > 0 => {
                Some((name.as_str(), facts.unlisted_unhealthy))
            }
            _ => None,
        })
    }

    /// Whether the node is a usable one without GPUs (every shard uses those), or was one
    /// and is kept after its deletion.
    pub fn is_cpu_only(&self, node: &str) -> bool {
        matches!(
            self.known.get(node),
            Some(NodeEntry::Usable(facts) | NodeEntry::Deleted(facts)) if facts.row.gpu_model.is_none()
        )
    }

    /// Whether the node is this replica's (`Some(true)`), another shard's
    /// (`Some(false)`), or not known to be either (`None`: unknown, or its description is
    /// invalid for now).
    pub fn is_ours(&self, node: &str) -> Option<bool> {
        match self.known.get(node)? {
            NodeEntry::Usable(_) | NodeEntry::Deleted(_) => Some(true),
            NodeEntry::OtherShard(_) => Some(false),
            NodeEntry::Invalid(_) => None,
        }
    }
}

impl World {
    /// Marks the devices reported unhealthy beyond those listed (see the module
    /// documentation) on the cluster state as it is now.
    pub(super) fn mark_unlisted_unhealthy(&mut self) {
        for (name, more) in self.nodes.unlisted_unhealthy() {
            let state = self.scheduler.state();
            let Some(node) = state.spec().node_id(name) else {
                continue;
            };
            let spec = state.spec().node(node);
            let now = state.node(node);
            let wanted = unhealthy_devices(spec.all_devices(), spec.unhealthy, now.busy(), more);
            let changed = wanted ^ now.unhealthy();
            for device in bits(changed) {
                let healthy = wanted & (1 << device) == 0;
                if let Err(e) = self.scheduler.set_device_health(node, device, healthy) {
                    tracing::warn!("node {name}: device {device}: {e}");
                }
            }
        }
    }
}

/// What a node of these facts is to this replica (`known`: what it was): a CPU-only node
/// is every shard's, for the launchers of its gangs (a node selector may keep them off GPU
/// nodes). A node of another shard that comes to list no GPU (a kubelet restarting before
/// its device plugin registers again) stays that shard's while its label still names a
/// model of another shard: its GPU pods could not be counted here, and this shard's pods
/// would be placed beside them.
fn entry_of(facts: NodeFacts, known: Option<&NodeEntry>, options: &WorldOptions) -> NodeEntry {
    let labelled = (facts.row.labels.get(GPU_PRODUCT_LABEL)).filter(|m| !m.is_empty());
    match facts.row.gpu_model {
        Some(model) if !options.owns_model(&model) => NodeEntry::OtherShard(Some(model)),
        None if matches!(known, Some(NodeEntry::OtherShard(_)))
            && labelled.is_some_and(|m| !options.owns_model(m)) =>
        {
            NodeEntry::OtherShard(None)
        }
        _ => NodeEntry::Usable(Box::new(facts)),
    }
}

/// The devices to mark unhealthy on a node of `all` devices: the `listed` ones, and `more`
/// of the others, the highest-numbered free ones first, then the highest-numbered busy ones.
fn unhealthy_devices(all: u32, listed: u32, busy: u32, more: usize) -> u32 {
    let free = highest(all & !listed & !busy, more);
    let held = highest(all & !listed & busy, more - free.count_ones() as usize);
    listed | free | held
}

/// The `count` highest devices of `mask` (all of them when it has fewer).
fn highest(mut mask: u32, count: usize) -> u32 {
    let mut chosen = 0u32;
    while mask != 0 && (chosen.count_ones() as usize) < count {
        let top = 1 << (31 - mask.leading_zeros());
        chosen |= top;
        mask &= !top;
    }
    chosen
}

/// A deleted node's facts, made to take no new pod (see the module documentation): every
/// device unhealthy, cordoned, and room for no pod. What its pods hold stays theirs.
fn taking_no_pod(mut facts: NodeFacts) -> NodeFacts {
    facts.row.unhealthy = node_device_mask(facts.row.gpus);
    facts.unlisted_unhealthy = 0;
    facts.row.max_pods = Some(0);
    if !facts.row.taints.iter().any(Taint::is_cordon) {
        facts.row.taints.push(Taint {
            key: UNSCHEDULABLE_TAINT.to_owned(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        });
    }
    facts
}
