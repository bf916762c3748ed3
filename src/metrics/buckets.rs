//! Job-size buckets (shared by JWTD and JTTED) and the spread of a job's first complete
//! placement (the input of JTTED).

use std::fmt;

/// Milli-GPUs in one whole GPU, as a `u64` for the arithmetic of this module.
pub(crate) const MILLI: u64 = 1000;

/// The sizes of the JWTD / JTTED buckets, by a job's total milli-GPUs T:
/// `0` (T = 0), `<1` (T < 1000), `1` (T = 1000), `2-8` (T <= 8000), `9-64` (T <= 64000),
/// `65-256` (<= 256000), `257-1024` (<= 1024000), `>1024`. So 1.5 GPUs falls in `2-8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SizeBucket {
    /// `0`: no GPU at all (CPU-only jobs).
    Cpu,
    /// `<1`: a fraction of one GPU.
    Fraction,
    /// `1`: exactly one GPU.
    One,
    /// `2-8`: above one GPU, up to 8.
    UpTo8,
    /// `9-64`: above 8 GPUs, up to 64.
    UpTo64,
    /// `65-256`: above 64 GPUs, up to 256.
    UpTo256,
    /// `257-1024`: above 256 GPUs, up to 1024.
    UpTo1024,
    /// `>1024`: above 1024 GPUs.
    Above1024,
}

impl SizeBucket {
    /// Every bucket, in report order (smallest jobs first).
    pub const ALL: [SizeBucket; 8] = [
        SizeBucket::Cpu,
        SizeBucket::Fraction,
        SizeBucket::One,
        SizeBucket::UpTo8,
        SizeBucket::UpTo64,
        SizeBucket::UpTo256,
        SizeBucket::UpTo1024,
        SizeBucket::Above1024,
    ];

    /// The bucket of a job asking for `total_milli` milli-GPUs in all.
    pub fn of(total_milli: u64) -> SizeBucket {
        match total_milli {
            0 => SizeBucket::Cpu,
            t if t < MILLI => SizeBucket::Fraction,
            t if t == MILLI => SizeBucket::One,
            t if t <= 8 * MILLI => SizeBucket::UpTo8,
            t if t <= 64 * MILLI => SizeBucket::UpTo64,
            t if t <= 256 * MILLI => SizeBucket::UpTo256,
            t if t <= 1024 * MILLI => SizeBucket::UpTo1024,
            _ => SizeBucket::Above1024,
        }
    }

    /// The bucket's label in reports and JSON keys (`0`, `<1`, `1`, `2-8`, ...).
    pub fn label(self) -> &'static str {
        match self {
            SizeBucket::Cpu => "0",
            SizeBucket::Fraction => "<1",
            SizeBucket::One => "1",
            SizeBucket::UpTo8 => "2-8",
            SizeBucket::UpTo64 => "9-64",
            SizeBucket::UpTo256 => "65-256",
            SizeBucket::UpTo1024 => "257-1024",
            SizeBucket::Above1024 => ">1024",
        }
    }

    /// The bucket's position in [`SizeBucket::ALL`] (0..8), for indexing per-bucket arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for SizeBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Where a job's first complete placement landed, for JTTED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacementSpread {
    /// Distinct nodes the job's pods landed on.
    pub nodes_used: u32,
    /// ceil(job GPUs / GPUs per node of its pool), at least 1.
    pub ideal_nodes: u32,
    /// (leaf groups used, ceil(job GPUs / GPUs of the pool's largest leaf group)); None when
    /// the nodes have no leaf group.
    pub groups: Option<(u32, u32)>,
}

impl PlacementSpread {
    /// Computes the ideal counts: ideal = ceil(total_milli / (unit_gpus × 1000)), at least 1,
    /// where the unit is a node (`gpus_per_node`) or the largest leaf group
    /// (`largest_leaf_gpus`). A unit of 0 GPUs gives an ideal of 1. `groups` is set only when
    /// both `groups_used` and `largest_leaf_gpus` are given.
    pub fn new(
        total_milli: u64,
        nodes_used: u32,
        gpus_per_node: u32,
        groups_used: Option<u32>,
        largest_leaf_gpus: Option<u32>,
    ) -> PlacementSpread {
        let groups = match (groups_used, largest_leaf_gpus) {
            (Some(used), Some(leaf_gpus)) => Some((used, ideal_units(total_milli, leaf_gpus))),
            _ => None,
        };
        PlacementSpread {
            nodes_used,
            ideal_nodes: ideal_units(total_milli, gpus_per_node),
            groups,
        }
    }
}

/// ceil(total_milli / (unit_gpus × 1000)), at least 1 (and 1 for an empty unit), saturated
/// to `u32::MAX`.
fn ideal_units(total_milli: u64, unit_gpus: u32) -> u32 {
    let unit_milli = u64::from(unit_gpus) * MILLI;
    if unit_milli == 0 {
        return 1;
    }
    let ideal = total_milli.div_ceil(unit_milli).max(1);
    u32::try_from(ideal).unwrap_or(u32::MAX)
}
