//! `e-spread` (PreFilter, GroupFilter, Filter, GroupScore, Score): Kant's inference
//! dedicated zone. Inference pods smaller than a node go to the zone's nodes, spread one
//! replica per node where possible and least allocated first, for availability; replicas
//! beyond the zone's room, and every other job, are placed by E-Binpack in the general
//! pool. Other jobs stay out of the zone unless the zone allows training; those it lets in
//! but is not for (inference pods as wide as a node, and training where allowed) take its
//! nodes only when the general pool has no room. Training's are its last resort
//! ([`LastResort`]): the search places it first without them, at every tier, and a gang
//! holds out only for domains the general pool could ever give it, where it could ever
//! give it one. Without a zone it is E-Binpack.
//!
//! The zone is named in the profile by node names, GPU models and node labels, and
//! resolved once per cluster shape; names that match no node are reported (a warning,
//! given again only when what it says changes) and skipped.

use std::sync::{Arc, Mutex};

use crate::cache::{ClusterState, GpuAggregate};
use crate::framework::{
    AnyGroup, CycleState, Filter, FirstPass, GroupFilter, GroupQuery, GroupScore, LastResort,
    MAX_NODE_SCORE, NodeView, Plugin, PodContext, PreFilter, Score, Status,
};
use crate::model::{ClusterSpec, GroupId, Job, JobKind};

use super::e_binpack::narrower_than_nodes;
use super::{EBinpack, utilization};

/// Which nodes form the inference zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneConfig {
    /// Nodes by name.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Every node of these GPU models.
    #[serde(default)]
    pub gpu_models: Vec<String>,
    /// Every node that carries all these labels (Kubernetes node labels); empty: none.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Whether jobs other than inference may use the zone's nodes.
    #[serde(default)]
    pub allow_training: bool,
}

/// The zone resolved against one cluster shape.
struct Resolved {
    spec: Arc<ClusterSpec>,
    /// Whether some node is in the zone.
    any: bool,
    in_zone: Vec<bool>,
    /// Zone nodes per search group.
    group_zone_nodes: Vec<u32>,
    /// What is wrong with the zone on this shape (logged when it changes).
    warnings: Vec<String>,
}

pub struct ESpread {
    zone: Option<ZoneConfig>,
    resolved: Mutex<Option<Arc<Resolved>>>,
    binpack: EBinpack,
}

impl ESpread {
    pub fn new(zone: Option<ZoneConfig>) -> Self {
        Self {
            zone,
            resolved: Mutex::new(None),
            binpack: EBinpack,
        }
    }

    /// The zone for `spec`, resolved on first use and again when the cluster changes.
    fn zone_for(&self, spec: &Arc<ClusterSpec>) -> Option<Arc<Resolved>> {
        let zone = self.zone.as_ref()?;
        let mut cached = self.resolved.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(resolved) = cached.as_ref().filter(|r| Arc::ptr_eq(&r.spec, spec)) {
            return Some(resolved.clone());
        }
        let resolved = Arc::new(resolve(zone, spec));
        // The cluster changes shape whenever a node changes: a warning is given again
        // only when it says something new.
        let before = cached.as_ref().map_or(&[][..], |r| r.warnings.as_slice());
        for warning in resolved.warnings.iter().filter(|w| !before.contains(w)) {
            tracing::warn!("inference zone: {warning}");
        }
        *cached = Some(resolved.clone());
        Some(resolved)
    }

    /// Whether a job may enter the zone's nodes.
    fn admits(&self, job: &Job) -> bool {
        job.kind == JobKind::Inference || self.zone.as_ref().is_some_and(|z| z.allow_training)
    }

    /// Whether the job's pods may not use the zone's nodes in this cycle: a job the zone
    /// does not admit, or training it admits in the search's first pass.
    fn kept_out(&self, job: &Job, state: &CycleState) -> bool {
        !self.admits(job) || job.kind != JobKind::Inference && state.read::<FirstPass>().is_some()
    }
}

fn resolve(zone: &ZoneConfig, spec: &Arc<ClusterSpec>) -> Resolved {
    let mut in_zone = vec![false; spec.nodes.len()];
    let mut unknown = Vec::new();
    for name in &zone.nodes {
        match spec.node_id(name) {
            Some(id) => in_zone[id.index()] = true,
            None => unknown.push(name.as_str()),
        }
    }
    for model in &zone.gpu_models {
        match spec.pool_of_model(Some(model)) {
            Some(pool) => spec
                .pool(pool)
                .nodes
                .iter()
                .for_each(|n| in_zone[n.index()] = true),
            None => unknown.push(model.as_str()),
        }
    }
    if !zone.labels.is_empty() {
        for (index, node) in spec.nodes.iter().enumerate() {
            if zone
                .labels
                .iter()
                .all(|(k, v)| node.labels.get(k) == Some(v))
            {
                in_zone[index] = true;
            }
        }
    }
    let mut warnings = Vec::new();
    if !unknown.is_empty() {
        warnings.push(format!(
            "{} match no node (node names and GPU models); the zone is the rest",
            unknown.join(", ")
        ));
    }
    if !in_zone.contains(&true) {
        warnings
            .push("no node matches it; inference pods are E-Binpacked in the general pool".into());
    }
    let mut group_zone_nodes = vec![0u32; spec.groups.len()];
    for (index, &zoned) in in_zone.iter().enumerate() {
        group_zone_nodes[spec.node_group[index].index()] += u32::from(zoned);
    }
    Resolved {
        spec: spec.clone(),
        any: in_zone.contains(&true),
        in_zone,
        group_zone_nodes,
        warnings,
    }
}

/// The resolved zone, shared with Filter and Score through the cycle state.
struct ZoneView(Arc<Resolved>);

/// Whether a pod is one the zone is for: inference, with GPUs, smaller than the node.
fn wants_zone(pod: &PodContext, node_gpus: usize) -> bool {
    pod.job.kind == JobKind::Inference
        && pod.request.gpu.milli() > 0
        && (pod.request.gpu.whole() as usize) < node_gpus
}

impl Plugin for ESpread {
    fn name(&self) -> &'static str {
        "e-spread"
    }
}

impl PreFilter for ESpread {
    fn pre_filter(&self, job: &Job, snapshot: &ClusterState, state: &mut CycleState) -> Status {
        if let Some(zone) = self.zone_for(snapshot.spec()) {
            if job.kind == JobKind::Inference {
                // Replicas spread over the zone and overflow to the general pool: no
                // single group is the goal.
                state.write(AnyGroup);
            } else if zone.any && self.admits(job) {
                state.write(LastResort);
            }
            state.write(ZoneView(zone));
        }
        Status::SUCCESS
    }
}

impl GroupFilter for ESpread {
    /// In the first pass for training the zone admits, a group of zone nodes alone holds
    /// none of it.
    fn filter_group(
        &self,
        query: &GroupQuery,
        state: &CycleState,
        group: GroupId,
        aggregate: &GpuAggregate,
    ) -> bool {
        let Some(ZoneView(resolved)) = state.read::<ZoneView>() else {
            return true;
        };
        !self.kept_out(query.job, state)
            || resolved.group_zone_nodes[group.index()] < aggregate.nodes
    }
}

impl Filter for ESpread {
    fn judges_spec(&self, job: &Job, _cluster: &ClusterSpec, state: &CycleState) -> bool {
        self.kept_out(job, state) && state.read::<ZoneView>().is_some()
    }

    fn filter(&self, pod: &PodContext, state: &CycleState, node: NodeView) -> Status {
        let Some(ZoneView(resolved)) = state.read::<ZoneView>() else {
            return Status::SUCCESS;
        };
        if resolved.in_zone[node.id.index()] && self.kept_out(pod.job, state) {
            Status::unresolvable("node(s) are in the inference zone")
        } else {
            Status::SUCCESS
        }
    }
}

/// Half the score range: the choices a pod is meant for score above it, the others below.
const HALF: i64 = MAX_NODE_SCORE / 2;

/// `score` (0..=MAX_NODE_SCORE) squeezed into the lower half, below every choice a pod is
/// meant for, and above 0: a zone node that already holds a replica of the job stays below
/// every node of the general pool.
fn lower_half(score: i64) -> i64 {
    1 + score * (HALF - 2) / MAX_NODE_SCORE
}

/// `score` (0..=MAX_NODE_SCORE) squeezed into the upper half.
fn upper_half(score: i64) -> i64 {
    HALF + score * HALF / MAX_NODE_SCORE
}

/// The least used first, in the upper half.
fn in_zone_by_free(used: i64) -> i64 {
    upper_half(MAX_NODE_SCORE - used)
}

/// What a job that may enter the zone, but is not what it is for (an inference pod as
/// wide as a node, training where the zone allows it), scores: E-Binpack, the general
/// pool before the zone, which it takes only when the general pool has no room.
fn zone_last(in_zone: bool, binpack: i64) -> i64 {
    if in_zone {
        lower_half(binpack)
    } else {
        upper_half(binpack)
    }
}

impl GroupScore for ESpread {
    fn score_group(
        &self,
        query: &GroupQuery,
        state: &CycleState,
        group: GroupId,
        aggregate: &GpuAggregate,
    ) -> i64 {
        let binpack = self.binpack.score_group(query, state, group, aggregate);
        let Some(ZoneView(resolved)) = state.read::<ZoneView>() else {
            return binpack;
        };
        if !self.admits(query.job) {
            return binpack;
        }
        let zone_nodes = resolved.group_zone_nodes[group.index()];
        let narrow =
            (query.widths.narrowest_gpu).is_some_and(|gpu| narrower_than_nodes(gpu, aggregate));
        if query.job.kind == JobKind::Inference && narrow {
            if zone_nodes > 0 {
                in_zone_by_free(utilization::group_used(aggregate))
            } else {
                lower_half(binpack)
            }
        } else {
            zone_last(zone_nodes == aggregate.nodes, binpack)
        }
    }
}

impl Score for ESpread {
    fn score(&self, pod: &PodContext, state: &CycleState, node: NodeView) -> i64 {
        let binpack = self.binpack.score(pod, state, node);
        let Some(ZoneView(resolved)) = state.read::<ZoneView>() else {
            return binpack;
        };
        if !self.admits(pod.job) {
            return binpack;
        }
        let in_zone = resolved.in_zone[node.id.index()];
        if !wants_zone(pod, node.spec.gpus()) {
            return zone_last(in_zone, binpack);
        }
        match in_zone {
            // The zone's room is one replica per node: another replica of the job goes to
            // the general pool, and back here only when that is full.
            true if pod.shares_node(node.id) => 0,
            true => in_zone_by_free(utilization::node_after(pod, node)),
            false => lower_half(binpack),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::captured_log::CapturedLog;
    use crate::model::{ClusterSpecBuilder, LinkProfile, NodeRow};

    fn spec(names: &[&str]) -> Arc<ClusterSpec> {
        let mut builder = ClusterSpecBuilder::new();
        for name in names {
            let row = NodeRow {
                name: name.to_string(),
                gpu_model: Some("H100".into()),
                gpus: 8,
                ..Default::default()
            };
            builder.add(row, LinkProfile::NvlinkAll).unwrap();
        }
        Arc::new(builder.build())
    }

    /// The cluster takes a new shape on every node change: a zone's warning is logged
    /// again only when it says something new.
    #[test]
    fn a_zone_warning_is_logged_once_per_change() {
        let log = CapturedLog::default();
        let subscriber = log.subscriber();
        let plugin = ESpread::new(Some(ZoneConfig {
            nodes: vec!["infer-0".into(), "infer-1".into()],
            ..Default::default()
        }));
        tracing::subscriber::with_default(subscriber, || {
            for names in [
                &["a", "infer-0"][..],
                &["a", "b", "infer-0"],
                &["a", "b"],
                &["a", "b", "c"],
                &["infer-0", "infer-1"],
            ] {
                plugin.zone_for(&spec(names));
            }
        });
        let text = log.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].ends_with("inference zone: infer-1 match no node (node names and GPU models); the zone is the rest"), "{text}");
        assert!(lines[1].ends_with("inference zone: infer-0, infer-1 match no node (node names and GPU models); the zone is the rest"), "{text}");
        assert!(lines[2].ends_with("inference zone: no node matches it; inference pods are E-Binpacked in the general pool"), "{text}");
    }
}
