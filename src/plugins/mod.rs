//! The plugins, one file each, and the registry that builds a profile from its
//! configuration. A plugin owns one judgement (fit, pool, devices, packing); the framework
//! decides how they combine.

mod binpack;
mod e_binpack;
mod e_spread;
mod first_fit_devices;
mod gang;
mod gpu_devices;
mod gpu_topology;
mod node_affinity;
mod node_pool;
mod pod_affinity;
mod preemption;
mod priority_sort;
mod resource_fit;
mod spread;
mod taint_toleration;
mod topology_spread;
mod utilization;

use std::sync::Arc;

pub use binpack::Binpack;
pub use e_binpack::EBinpack;
pub use e_spread::{ESpread, ZoneConfig};
pub use first_fit_devices::FirstFitDevices;
pub use gang::Gang;
pub use gpu_devices::GpuDevices;
pub use gpu_topology::GpuTopology;
pub use node_affinity::NodeAffinity;
pub use node_pool::NodePool;
pub use pod_affinity::InterPodAffinity;
pub use preemption::Preemption;
pub use priority_sort::PrioritySort;
pub use resource_fit::ResourceFit;
pub use spread::Spread;
pub use taint_toleration::TaintToleration;
pub use topology_spread::TopologySpread;

use crate::config::{Config, ProfileConfig};
use crate::framework::{GroupScore, Profile, QueueSort, Score};

/// Every plugin name the configuration may use.
pub const PLUGIN_NAMES: [&str; 17] = [
    "priority-sort",
    "node-pool",
    "node-affinity",
    "taint-toleration",
    "pod-affinity",
    "topology-spread",
    "resource-fit",
    "gpu-devices",
    "first-fit-devices",
    "gpu-topology",
    "gang",
    "preemption",
    "backfill-preemption",
    "binpack",
    "e-binpack",
    "e-spread",
    "spread",
];

/// The largest score weight, as in kube-scheduler: weighted sums stay far from overflow.
pub const MAX_WEIGHT: i64 = 100;

/// Registers a plugin that ranks search groups as well as nodes, under one weight (1 when
/// the configuration gives none).
fn both_scores<T: GroupScore + Score + 'static>(
    profile: &mut Profile,
    plugin: T,
    weight: Option<i64>,
) -> Arc<T> {
    let plugin = Arc::new(plugin);
    let weight = weight.unwrap_or(1);
    profile.group_scores.push((plugin.clone(), weight));
    profile.scores.push((plugin.clone(), weight));
    plugin
}

/// Builds a profile's plugin objects. The error names the profile and what is wrong.
pub fn build_profile(config: &ProfileConfig, settings: &Config) -> Result<Profile, String> {
    let error = |m: String| format!("profile {}: {m}", config.name);
    let search = settings.search;
    let mut queue_sort: Option<Arc<dyn QueueSort>> = None;
    let mut profile = Profile {
        name: config.name.clone(),
        queueing: config.queueing,
        queue_settings: settings.queueing,
        search: config.search,
        search_options: search,
        queue_sort: Arc::new(PrioritySort {
            size_order: settings.queueing.size_order,
        }),
        pre_filters: Vec::new(),
        group_filters: Vec::new(),
        group_scores: Vec::new(),
        filters: Vec::new(),
        scores: Vec::new(),
        allocate: Arc::new(GpuDevices),
        reserves: Vec::new(),
        permits: Vec::new(),
        post_filters: Vec::new(),
    };
    let mut has_allocator = false;
    let mut listed: Vec<&str> = Vec::new();
    for plugin in &config.plugins {
        let name = plugin.name();
        let weight = plugin.weight();
        if listed.contains(&name) {
            return Err(error(format!("`{name}` is listed twice")));
        }
        listed.push(name);
        if let Some(w) = weight.filter(|w| *w < 0) {
            return Err(error(format!("weight {w} of `{name}` is negative")));
        }
        if let Some(w) = weight.filter(|w| *w > MAX_WEIGHT) {
            return Err(error(format!(
                "weight {w} of `{name}` is above {MAX_WEIGHT}"
            )));
        }
        let scorer = |score: Arc<dyn Score>| (score, weight.unwrap_or(1));
        match name {
            "priority-sort" => {
                queue_sort = Some(Arc::new(PrioritySort {
                    size_order: settings.queueing.size_order,
                }))
            }
            // One PostFilter for both (below).
            "preemption" | "backfill-preemption" => {}
            "node-pool" => {
                let p = Arc::new(NodePool);
                profile.pre_filters.push(p.clone());
                profile.filters.push(p);
            }
            "node-affinity" => {
                let p = Arc::new(NodeAffinity);
                profile.filters.push(p.clone());
                profile.scores.push(scorer(p));
            }
            "taint-toleration" => {
                let p = Arc::new(TaintToleration);
                profile.filters.push(p.clone());
                profile.scores.push(scorer(p));
            }
            "pod-affinity" => {
                let p = Arc::new(InterPodAffinity);
                profile.pre_filters.push(p.clone());
                profile.filters.push(p.clone());
                profile.scores.push(scorer(p));
            }
            "topology-spread" => {
                let p = Arc::new(TopologySpread);
                profile.pre_filters.push(p.clone());
                profile.filters.push(p.clone());
                profile.scores.push(scorer(p));
            }
            "resource-fit" => {
                let p = Arc::new(ResourceFit);
                profile.pre_filters.push(p.clone());
                profile.group_filters.push(p.clone());
                profile.filters.push(p);
            }
            "gpu-devices" | "first-fit-devices" if has_allocator => {
                return Err(error(
                    "`gpu-devices` and `first-fit-devices` both assign GPU devices: keep one"
                        .into(),
                ));
            }
            "gpu-devices" => {
                let p = Arc::new(GpuDevices);
                profile.filters.push(p.clone());
                profile.allocate = p;
                has_allocator = true;
            }
            "first-fit-devices" => {
                let p = Arc::new(FirstFitDevices);
                profile.filters.push(p.clone());
                profile.allocate = p;
                has_allocator = true;
            }
            "gang" => profile.permits.push(Arc::new(Gang)),
            "gpu-topology" => {
                both_scores(&mut profile, GpuTopology, weight);
            }
            "binpack" => {
                both_scores(&mut profile, Binpack, weight);
            }
            "e-binpack" => {
                both_scores(&mut profile, EBinpack, weight);
            }
            "e-spread" => {
                let p = both_scores(
                    &mut profile,
                    ESpread::new(config.inference_zone.clone()),
                    weight,
                );
                profile.pre_filters.push(p.clone());
                // Without a zone it has nothing to say of a group.
                if config.inference_zone.is_some() {
                    profile.group_filters.push(p.clone());
                }
                profile.filters.push(p);
            }
            "spread" => {
                both_scores(&mut profile, Spread, weight);
            }
            _ => {
                return Err(error(format!(
                    "unknown plugin `{name}` (known: {})",
                    PLUGIN_NAMES.join(", ")
                )));
            }
        }
        let scores = [
            "binpack",
            "e-binpack",
            "e-spread",
            "spread",
            "gpu-topology",
            "node-affinity",
            "taint-toleration",
            "pod-affinity",
            "topology-spread",
        ];
        if weight.is_some() && !scores.contains(&name) {
            return Err(error(format!(
                "`{name}` is not a score plugin and takes no weight"
            )));
        }
    }
    // `preemption` makes room of all three kinds, `backfill-preemption` only for overdue
    // backfill heads: listed together, the first takes in the second.
    let all_kinds = listed.contains(&"preemption");
    if all_kinds || listed.contains(&"backfill-preemption") {
        profile.post_filters.push(Arc::new(Preemption {
            min_runtime_ms: settings.queueing.min_runtime,
            backfill_only: !all_kinds,
        }));
    }
    if !has_allocator {
        return Err(error(
            "no plugin assigns GPU devices: enable `gpu-devices` or `first-fit-devices`".into(),
        ));
    }
    if config.inference_zone.is_some() && !listed.contains(&"e-spread") {
        return Err(error(
            "`inference_zone` is set but the profile has no `e-spread` plugin to use it".into(),
        ));
    }
    if config.inference_zone.as_ref().is_some_and(|zone| {
        zone.nodes.is_empty() && zone.gpu_models.is_empty() && zone.labels.is_empty()
    }) {
        return Err(error(
            "`inference_zone` names no `nodes`, `gpu_models` or `labels`: it would hold no node"
                .into(),
        ));
    }
    profile.queue_sort =
        queue_sort.ok_or_else(|| error("no queue-sort plugin: enable `priority-sort`".into()))?;
    Ok(profile)
}
