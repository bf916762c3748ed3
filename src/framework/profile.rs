//! A profile: the plugins enabled at each extension point, their score weights and the
//! search settings. Built by `plugins::build_profile` from the configuration file.

use std::sync::Arc;

use crate::config::QueueSettings;
use crate::queue::QueueingPolicy;

use super::plugin::{
    Allocate, Filter, GroupFilter, GroupScore, Permit, PostFilter, PreFilter, QueueSort, Reserve,
    Score,
};

/// How the nodes for a job are searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SearchMode {
    /// Search groups preselected from their aggregates, nodes chosen inside the chosen
    /// groups, groups evaluated in parallel.
    TwoLevel,
    /// Every node of the job's pools for every pod: the baseline.
    Flat,
}

/// Settings of the two-level search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchOptions {
    /// Evaluate candidate groups in parallel (rayon).
    pub parallel: bool,
    /// Candidate groups evaluated together when the search is parallel; the first
    /// feasible in rank order wins. 0: all of them, in one parallel pass.
    pub groups_per_batch: usize,
    /// Jobs with fewer pods than this evaluate their groups one at a time: for them the
    /// cost of a parallel fork exceeds the work.
    pub parallel_min_pods: usize,
    /// How long a gang without a required tier waits for room in the tightest domain that
    /// could ever hold it (one leaf group if one is large enough), on the fewest leaves one
    /// such domain could hold it on, before it accepts a wider spread, counted only while
    /// its pools hold it spread (a placement there that leaves them short of it pauses
    /// the count). 0: never waits.
    #[serde(deserialize_with = "crate::config::whole_seconds")]
    pub topology_patience_s: u64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            parallel: true,
            groups_per_batch: 0,
            parallel_min_pods: 4,
            topology_patience_s: 600,
        }
    }
}

/// The enabled plugins of one profile, in configuration order.
#[derive(Clone)]
pub struct Profile {
    pub name: String,
    pub queueing: QueueingPolicy,
    pub queue_settings: QueueSettings,
    pub search: SearchMode,
    pub search_options: SearchOptions,
    pub queue_sort: Arc<dyn QueueSort>,
    pub pre_filters: Vec<Arc<dyn PreFilter>>,
    pub group_filters: Vec<Arc<dyn GroupFilter>>,
    /// Group score plugins with their weights.
    pub group_scores: Vec<(Arc<dyn GroupScore>, i64)>,
    pub filters: Vec<Arc<dyn Filter>>,
    /// Score plugins with their weights.
    pub scores: Vec<(Arc<dyn Score>, i64)>,
    pub allocate: Arc<dyn Allocate>,
    pub reserves: Vec<Arc<dyn Reserve>>,
    pub permits: Vec<Arc<dyn Permit>>,
    pub post_filters: Vec<Arc<dyn PostFilter>>,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |v: &mut dyn Iterator<Item = &'static str>| v.collect::<Vec<_>>();
        f.debug_struct("Profile")
            .field("name", &self.name)
            .field("queueing", &self.queueing)
            .field("search", &self.search)
            .field("queue_sort", &self.queue_sort.name())
            .field(
                "filters",
                &names(&mut self.filters.iter().map(|p| p.name())),
            )
            .field(
                "scores",
                &self
                    .scores
                    .iter()
                    .map(|(p, w)| (p.name(), *w))
                    .collect::<Vec<_>>(),
            )
            .field("allocate", &self.allocate.name())
            .finish_non_exhaustive()
    }
}
