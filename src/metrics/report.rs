//! The metrics report: plain values with public fields for table printers, and JSON output
//! whose per-bucket maps keep the bucket order (`0`, `<1`, `1`, `2-8`, ... `>1024`).

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::buckets::SizeBucket;

/// The metrics over one window, as [`super::MetricsCollector::report`] computes them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricsReport {
    /// Time-average of GAR (assigned GPUs / total GPUs) over the window; `None` when the
    /// window has no length (every job submitted at one instant, or none), as are the
    /// three below: an average over no time is undefined, not 0.
    pub gar_mean: Option<f64>,
    /// Lower time-weighted median of GAR over the window.
    pub gar_p50: Option<f64>,
    /// ∫ run dt / (total × |W|): GPUs of fully placed jobs, time-averaged.
    pub sor: Option<f64>,
    /// Time-average of GFR (fragmented GPU nodes / GPU nodes) over the window.
    pub gfr_mean: Option<f64>,
    /// Job wait times per size bucket.
    pub jwtd: Jwtd,
    /// Placement spread (node and leaf-group deviation) per size bucket.
    pub jtted: Jtted,
    /// Jobs submitted (all of them, whatever the window).
    pub jobs_submitted: u64,
    /// Jobs whose pods were all placed at least once.
    pub jobs_placed: u64,
    /// `jobs_submitted - jobs_placed` (saturating): jobs still waiting.
    pub jobs_never_placed: u64,
    /// Length of the window, in seconds.
    pub window_s: f64,
}

/// Wait-time statistics of one bucket, in seconds; `None` when the bucket is empty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct WaitStats {
    /// Placed jobs in the bucket.
    pub count: u64,
    /// Mean wait.
    pub mean: Option<f64>,
    /// Median wait by nearest rank (rank ceil(0.5 × n)).
    pub p50: Option<f64>,
    /// 95th percentile wait by nearest rank (rank ceil(0.95 × n)).
    pub p95: Option<f64>,
}

/// Placement-spread statistics of one bucket; 1.0 is optimal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SpreadStats {
    /// Placed jobs in the bucket that reported a spread.
    pub count: u64,
    /// Mean of nodes used / ideal nodes; `None` when the bucket is empty.
    pub node_dev: Option<f64>,
    /// Mean of leaf groups used / ideal groups over the jobs whose nodes have leaf groups;
    /// `None` when no job of the bucket had any.
    pub group_dev: Option<f64>,
}

/// JWTD: one [`WaitStats`] per bucket, indexed by [`SizeBucket::index`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Jwtd(pub [WaitStats; 8]);

/// JTTED: one [`SpreadStats`] per bucket, indexed by [`SizeBucket::index`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Jtted(pub [SpreadStats; 8]);

impl Jwtd {
    /// The statistics of one bucket.
    pub fn get(&self, bucket: SizeBucket) -> &WaitStats {
        &self.0[bucket.index()]
    }

    /// Every bucket with its statistics, in bucket order.
    pub fn iter(&self) -> impl Iterator<Item = (SizeBucket, &WaitStats)> {
        SizeBucket::ALL.into_iter().zip(self.0.iter())
    }
}

impl Jtted {
    /// The statistics of one bucket.
    pub fn get(&self, bucket: SizeBucket) -> &SpreadStats {
        &self.0[bucket.index()]
    }

    /// Every bucket with its statistics, in bucket order.
    pub fn iter(&self) -> impl Iterator<Item = (SizeBucket, &SpreadStats)> {
        SizeBucket::ALL.into_iter().zip(self.0.iter())
    }
}

/// Serializes every bucket, in bucket order, as a map from its label to its statistics.
fn serialize_buckets<S: Serializer, T: Serialize>(
    serializer: S,
    stats: &[T; 8],
) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(stats.len()))?;
    for (bucket, value) in SizeBucket::ALL.iter().zip(stats.iter()) {
        map.serialize_entry(bucket.label(), value)?;
    }
    map.end()
}

impl Serialize for Jwtd {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_buckets(serializer, &self.0)
    }
}

impl Serialize for Jtted {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_buckets(serializer, &self.0)
    }
}
