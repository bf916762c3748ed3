//! Tests of the metrics: hand-computed values on tiny scenarios, and a brute-force reference
//! for the time integrals and the time-weighted median.

use super::*;

const S: u64 = 1000;

/// Asserts two floats are equal to within rounding.
fn close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() < 1e-12,
        "expected {expected}, got {actual}"
    );
}

#[test]
fn gar_mean_and_lower_median() {
    let mut m = MetricsCollector::new(16_000, 2, Some(40 * S));
    m.job_submitted(0);
    m.observe(0, 0, 0, 0);
    m.observe(10 * S, 8_000, 8_000, 1);
    m.job_submitted(20 * S);
    m.observe(30 * S, 16_000, 16_000, 0);
    m.job_submitted(40 * S);
    let r = m.report(40 * S);
    close(r.gar_mean.unwrap(), 0.5);
    close(r.gar_p50.unwrap(), 0.5);
    close(r.window_s, 40.0);
    assert_eq!(r.jobs_submitted, 3);
    // A later report, with nothing new, sees the same closed window.
    assert_eq!(m.report(90 * S), r);
}

#[test]
fn median_is_the_lower_one_on_a_tie() {
    let mut m = MetricsCollector::new(16_000, 2, Some(40 * S));
    m.job_submitted(0);
    m.observe(20 * S, 16_000, 16_000, 0);
    let r = m.report(40 * S);
    // time(GAR <= 0) = 20 s = |W| / 2.
    close(r.gar_p50.unwrap(), 0.0);
    close(r.gar_mean.unwrap(), 0.5);
}

#[test]
fn median_merges_the_open_interval() {
    // 0 for 10 s, 1.0 for 10 s (stored), then 0.5 for 20 s (still open at report time).
    let mut m = MetricsCollector::new(16_000, 2, None);
    m.job_submitted(0);
    m.observe(10 * S, 16_000, 0, 0);
    m.observe(20 * S, 8_000, 0, 0);
    let r = m.report(40 * S);
    close(r.gar_p50.unwrap(), 0.5);
    close(
        r.gar_mean.unwrap(),
        (16_000.0 * 10.0 + 8_000.0 * 20.0) / (16_000.0 * 40.0),
    );

    // The open interval at a value already stored.
    let mut m = MetricsCollector::new(16_000, 2, None);
    m.job_submitted(0);
    m.observe(5 * S, 16_000, 0, 0);
    m.observe(10 * S, 0, 0, 0);
    m.observe(15 * S, 16_000, 0, 0);
    // 0: 5 + 5 s, 1.0: 5 + 25 s (open) → time(<= 0) = 10 < 20.
    let r = m.report(40 * S);
    close(r.gar_p50.unwrap(), 1.0);

    // The open interval, below a stored value, reaches exactly half the window.
    let mut m = MetricsCollector::new(16_000, 2, None);
    m.job_submitted(0);
    m.observe(10 * S, 16_000, 0, 0);
    m.observe(30 * S, 8_000, 0, 0);
    // 0: 10 s, 0.5: 10 s (open), 1.0: 20 s → time(<= 0.5) = 20 s = |W| / 2.
    let r = m.report(40 * S);
    close(r.gar_p50.unwrap(), 0.5);
}

#[test]
fn sor_counts_a_gang_only_from_full_placement() {
    let mut m = MetricsCollector::new(16_000, 2, Some(40 * S));
    m.job_submitted(0);
    // Half the gang reserved at 10 s, all of it placed at 20 s.
    m.observe(10 * S, 4_000, 0, 1);
    m.observe(20 * S, 8_000, 8_000, 1);
    m.job_first_placed(
        20 * S,
        0,
        8_000,
        Some(PlacementSpread::new(8_000, 1, 8, None, None)),
    );
    m.job_submitted(40 * S);
    let r = m.report(40 * S);
    close(r.sor.unwrap(), 8_000.0 * 20.0 / (16_000.0 * 40.0));
    close(
        r.gar_mean.unwrap(),
        (4_000.0 * 10.0 + 8_000.0 * 20.0) / (16_000.0 * 40.0),
    );
    close(r.gfr_mean.unwrap(), 30.0 / (2.0 * 40.0));
}

#[test]
fn gfr_is_the_time_average_of_fragmented_nodes() {
    let mut m = MetricsCollector::new(32_000, 4, Some(40 * S));
    m.job_submitted(0);
    m.observe(0, 1_000, 1_000, 2);
    m.observe(10 * S, 2_000, 2_000, 1);
    m.observe(30 * S, 0, 0, 0);
    let r = m.report(40 * S);
    // (2 × 10 + 1 × 20) / (4 × 40)
    close(r.gfr_mean.unwrap(), 0.25);
}

#[test]
fn clips_to_the_window() {
    let mut m = MetricsCollector::new(16_000, 2, Some(30 * S));
    // Observed before the first submission: holds from 0, counts from 10 s.
    m.observe(0, 8_000, 8_000, 1);
    m.job_submitted(10 * S);
    m.observe(20 * S, 16_000, 16_000, 0);
    m.job_submitted(30 * S);
    m.observe(30 * S, 0, 0, 0);
    // The drain after the last submission does not count.
    m.observe(50 * S, 8_000, 8_000, 1);
    m.observe(55 * S, 0, 0, 0);
    let r = m.report(60 * S);
    close(r.window_s, 20.0);
    close(
        r.gar_mean.unwrap(),
        (8_000.0 * 10.0 + 16_000.0 * 10.0) / (16_000.0 * 20.0),
    );
    close(r.sor.unwrap(), r.gar_mean.unwrap());
    close(r.gar_p50.unwrap(), 0.5);
    close(r.gfr_mean.unwrap(), 10.0 / (2.0 * 20.0));
}

#[test]
fn nothing_counts_before_a_submission() {
    let mut m = MetricsCollector::new(16_000, 2, None);
    m.observe(0, 16_000, 16_000, 0);
    m.observe(10 * S, 0, 0, 0);
    let r = m.report(20 * S);
    close(r.window_s, 0.0);
    assert_eq!(r.gar_mean, None);
    m.job_submitted(20 * S);
    let r = m.report(40 * S);
    close(r.window_s, 20.0);
    close(r.gar_mean.unwrap(), 0.0);
}

#[test]
fn live_window_ends_at_now() {
    let mut m = MetricsCollector::new(16_000, 2, None);
    m.job_submitted(0);
    m.observe(0, 16_000, 16_000, 0);
    m.observe(10 * S, 8_000, 8_000, 1);
    let r = m.report(20 * S);
    close(r.window_s, 20.0);
    close(r.gar_mean.unwrap(), 0.75);
    close(r.gfr_mean.unwrap(), 10.0 / (2.0 * 20.0));
    // A report asked before the latest observation counts up to that observation.
    let r = m.report(5 * S);
    close(r.window_s, 10.0);
    close(r.gar_mean.unwrap(), 1.0);
    // The simulator's window ends at its last submission even if asked later.
    let mut m = MetricsCollector::new(16_000, 2, Some(10 * S));
    m.job_submitted(0);
    m.observe(0, 16_000, 16_000, 0);
    close(m.report(5 * S).window_s, 5.0);
    close(m.report(50 * S).window_s, 10.0);
}

#[test]
fn zero_length_window_leaves_the_averages_undefined() {
    let mut m = MetricsCollector::new(16_000, 2, Some(10 * S));
    m.job_submitted(10 * S);
    m.observe(10 * S, 16_000, 16_000, 1);
    let r = m.report(30 * S);
    assert_eq!(
        (r.gar_mean, r.gar_p50, r.sor, r.gfr_mean, r.window_s),
        (None, None, None, None, 0.0)
    );
    // No capacity, no GPU nodes: zeros, not NaN.
    let mut m = MetricsCollector::new(0, 0, None);
    m.job_submitted(0);
    m.observe(0, 0, 0, 0);
    let r = m.report(10 * S);
    assert_eq!(
        (r.gar_mean, r.gar_p50, r.sor, r.gfr_mean),
        (Some(0.0), Some(0.0), Some(0.0), Some(0.0))
    );
}

#[test]
fn same_instant_the_last_observation_wins() {
    let mut m = MetricsCollector::new(16_000, 2, Some(10 * S));
    m.job_submitted(0);
    m.observe(0, 16_000, 16_000, 2);
    m.observe(0, 4_000, 0, 1);
    let r = m.report(10 * S);
    close(r.gar_mean.unwrap(), 0.25);
    close(r.gar_p50.unwrap(), 0.25);
    close(r.sor.unwrap(), 0.0);
    close(r.gfr_mean.unwrap(), 0.5);
}

#[test]
fn bucket_boundaries() {
    let cases = [
        (0, "0"),
        (500, "<1"),
        (999, "<1"),
        (1_000, "1"),
        (1_001, "2-8"),
        (1_500, "2-8"),
        (8_000, "2-8"),
        (8_001, "9-64"),
        (64_000, "9-64"),
        (64_001, "65-256"),
        (256_000, "65-256"),
        (256_001, "257-1024"),
        (1_024_000, "257-1024"),
        (1_024_001, ">1024"),
    ];
    for (milli, label) in cases {
        assert_eq!(SizeBucket::of(milli).label(), label, "{milli} milli");
    }
    for (i, bucket) in SizeBucket::ALL.iter().enumerate() {
        assert_eq!(bucket.index(), i);
    }
}

#[test]
fn jwtd_nearest_rank_percentiles() {
    let mut m = MetricsCollector::new(8_000, 1, None);
    // Placed out of order: the report sorts.
    for wait in (1..=20u64).rev() {
        m.job_submitted(0);
        m.job_first_placed(wait * S, 0, 1_000, None);
    }
    let r = m.report(20 * S);
    let one = r.jwtd.get(SizeBucket::One);
    assert_eq!(one.count, 20);
    assert_eq!(one.mean, Some(10.5));
    assert_eq!(one.p50, Some(10.0));
    assert_eq!(one.p95, Some(19.0));
    assert_eq!(*r.jwtd.get(SizeBucket::UpTo8), WaitStats::default());

    // One sample: every percentile is that sample; sub-second waits keep their millis.
    let mut m = MetricsCollector::new(8_000, 1, None);
    m.job_first_placed(1_250, 1_000, 500, None);
    let r = m.report(0);
    let frac = r.jwtd.get(SizeBucket::Fraction);
    assert_eq!(
        (frac.count, frac.mean, frac.p50, frac.p95),
        (1, Some(0.25), Some(0.25), Some(0.25))
    );
}

proptest::proptest! {
    /// The wait list's two sorted runs give the nearest rank of all its waits sorted, as it
    /// grows past every merge.
    #[test]
    fn wait_list_ranks_as_a_full_sort(waits in proptest::collection::vec(0u64..50, 1..300)) {
        let mut list = WaitList::default();
        let mut sorted = Vec::new();
        for &wait in &waits {
            list.push(wait);
            sorted.insert(sorted.partition_point(|&w| w <= wait), wait);
            for p in [1, 50, 95, 100] {
                let rank = (p * sorted.len()).div_ceil(100).max(1);
                proptest::prop_assert_eq!(list.nearest_rank(p), Some(sorted[rank - 1]));
            }
        }
        proptest::prop_assert_eq!(list.sum_ms, u128::from(waits.iter().sum::<u64>()));
    }
}

#[test]
fn jobs_never_placed_are_counted_apart() {
    let mut m = MetricsCollector::new(8_000, 1, None);
    for t in 0..5 {
        m.job_submitted(t * S);
    }
    m.job_first_placed(6 * S, 0, 0, None);
    m.job_first_placed(7 * S, S, 2_000, None);
    m.job_first_placed(8 * S, 2 * S, 2_000, None);
    let r = m.report(10 * S);
    assert_eq!(
        (r.jobs_submitted, r.jobs_placed, r.jobs_never_placed),
        (5, 3, 2)
    );
    assert_eq!(r.jwtd.get(SizeBucket::Cpu).count, 1);
    assert_eq!(r.jwtd.get(SizeBucket::UpTo8).mean, Some(6.0));
}

#[test]
fn placement_spread_ideals() {
    let s = PlacementSpread::new(16_000, 3, 8, Some(2), Some(32));
    assert_eq!(
        s,
        PlacementSpread {
            nodes_used: 3,
            ideal_nodes: 2,
            groups: Some((2, 1))
        }
    );
    // 1.5 GPUs on 8-GPU nodes: one node is ideal; no leaf group → no group figure.
    let s = PlacementSpread::new(1_500, 1, 8, None, Some(32));
    assert_eq!((s.ideal_nodes, s.groups), (1, None));
    // 17 GPUs on 8-GPU nodes, 16-GPU leaf groups.
    let s = PlacementSpread::new(17_000, 3, 8, Some(2), Some(16));
    assert_eq!((s.ideal_nodes, s.groups), (3, Some((2, 2))));
    // Degenerate units do not divide by zero.
    assert_eq!(
        PlacementSpread::new(4_000, 1, 0, Some(1), Some(0)).groups,
        Some((1, 1))
    );
}

#[test]
fn jtted_means_per_bucket() {
    let mut m = MetricsCollector::new(64_000, 8, None);
    let spread = |total, nodes, groups| PlacementSpread::new(total, nodes, 8, groups, Some(32));
    m.job_first_placed(1, 0, 16_000, Some(spread(16_000, 3, Some(2))));
    m.job_first_placed(
        1,
        0,
        16_000,
        Some(PlacementSpread::new(16_000, 2, 8, None, None)),
    );
    m.job_first_placed(1, 0, 4_000, Some(spread(4_000, 1, None)));
    // A spread for a job under one GPU is ignored.
    m.job_first_placed(1, 0, 500, Some(spread(500, 1, Some(1))));
    let r = m.report(0);
    let b = r.jtted.get(SizeBucket::UpTo64);
    assert_eq!(
        (b.count, b.node_dev, b.group_dev),
        (2, Some(1.25), Some(2.0))
    );
    let b = r.jtted.get(SizeBucket::UpTo8);
    assert_eq!((b.count, b.node_dev, b.group_dev), (1, Some(1.0), None));
    assert_eq!(*r.jtted.get(SizeBucket::Fraction), SpreadStats::default());
    assert_eq!(r.jwtd.get(SizeBucket::Fraction).count, 1);
}

#[test]
fn json_keeps_bucket_order_and_nulls() {
    let mut m = MetricsCollector::new(8_000, 1, None);
    m.job_submitted(0);
    m.job_first_placed(
        2 * S,
        0,
        1_000,
        Some(PlacementSpread::new(1_000, 1, 8, Some(1), Some(8))),
    );
    let json = serde_json::to_string(&m.report(4 * S)).unwrap_or_default();
    let labels = ["0", "<1", "1", "2-8", "9-64", "65-256", "257-1024", ">1024"];
    for section in ["\"jwtd\":{", "\"jtted\":{"] {
        let mut at = json
            .find(section)
            .unwrap_or_else(|| panic!("no {section} in {json}"));
        for label in labels {
            let key = format!("\"{label}\":{{");
            let found = json[at..]
                .find(&key)
                .unwrap_or_else(|| panic!("{key} after {at}"));
            at += found + key.len();
        }
    }
    assert!(
        json.contains(r#""0":{"count":0,"mean":null,"p50":null,"p95":null}"#),
        "{json}"
    );
    assert!(
        json.contains(r#""1":{"count":1,"mean":2.0,"p50":2.0,"p95":2.0}"#),
        "{json}"
    );
    assert!(
        json.contains(r#""1":{"count":1,"node_dev":1.0,"group_dev":1.0}"#),
        "{json}"
    );
    assert!(
        json.contains(r#"">1024":{"count":0,"node_dev":null,"group_dev":null}"#),
        "{json}"
    );
    let value: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
    for field in [
        "gar_mean",
        "gar_p50",
        "sor",
        "gfr_mean",
        "jwtd",
        "jtted",
        "jobs_submitted",
        "jobs_placed",
        "jobs_never_placed",
        "window_s",
    ] {
        assert!(value.get(field).is_some(), "{field} missing in {json}");
    }
    assert_eq!(value["window_s"], serde_json::json!(4.0));
}

/// A tiny deterministic generator (an LCG), so the brute-force test needs no dependency.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// One piece of the series inside the window: (alloc, run, fragmented, duration).
type Piece = (u64, u64, u32, u64);

/// Integrals and the median by the definition, from the full list of observations.
fn reference(
    obs: &[(u64, u64, u64, u32)],
    start: u64,
    end: u64,
    total: u64,
    nodes: u32,
) -> Option<(f64, f64, f64, f64)> {
    let w = end.saturating_sub(start);
    if w == 0 {
        return None;
    }
    // Pieces (value, duration) over [start, end), from 0 at time 0.
    let mut pieces = Vec::new();
    let mut level = (0u64, 0u64, 0u64, 0u32);
    for &o in obs.iter().chain(std::iter::once(&(u64::MAX, 0, 0, 0))) {
        let (lo, hi) = (level.0.max(start), o.0.min(end));
        if hi > lo {
            pieces.push((level.1, level.2, level.3, hi - lo));
        }
        level = o;
    }
    let sum = |f: &dyn Fn(&Piece) -> u128| pieces.iter().map(f).sum::<u128>();
    let alloc = sum(&|p| u128::from(p.0) * u128::from(p.3));
    let run = sum(&|p| u128::from(p.1) * u128::from(p.3));
    let frag = sum(&|p| u128::from(p.2) * u128::from(p.3));
    assert_eq!(sum(&|p| u128::from(p.3)), u128::from(w));
    let mut values: Vec<u64> = pieces.iter().map(|p| p.0).collect();
    values.sort_unstable();
    let median = values
        .into_iter()
        .find(|&v| 2 * sum(&|p| if p.0 <= v { u128::from(p.3) } else { 0 }) >= u128::from(w))
        .unwrap_or(0);
    let cap = u128::from(total) * u128::from(w);
    Some((
        alloc as f64 / cap as f64,
        median as f64 / total as f64,
        run as f64 / cap as f64,
        frag as f64 / (u128::from(nodes) * u128::from(w)) as f64,
    ))
}

#[test]
fn matches_a_brute_force_reference() {
    let mut rng = Lcg(7);
    let mut open_windows = 0;
    for case in 0..500 {
        let total = 8_000 * (1 + rng.below(4));
        let nodes = 1 + rng.below(4) as u32;
        let first = rng.below(50);
        let last = first + rng.below(200);
        let known_end = rng.below(2) == 0;
        let mut m = MetricsCollector::new(total, nodes, known_end.then_some(last));
        let mut obs = Vec::new();
        let mut t = 0;
        let mut submitted = false;
        for _ in 0..rng.below(30) {
            t += rng.below(20);
            if !submitted && t >= first {
                m.job_submitted(first);
                submitted = true;
            }
            let alloc = rng.below(5) * total / 4;
            let o = (
                t,
                alloc,
                rng.below(alloc + 1),
                rng.below(u64::from(nodes) + 1) as u32,
            );
            m.observe(o.0, o.1, o.2, o.3);
            obs.push(o);
        }
        if !submitted {
            m.job_submitted(first);
        }
        let now = t + rng.below(100);
        let end = if known_end {
            last.min(now.max(t))
        } else {
            now.max(t)
        };
        open_windows += usize::from(end > first);
        let r = m.report(now);
        let want = reference(&obs, first, end, total, nodes);
        let got = (r.gar_mean, r.gar_p50, r.sor, r.gfr_mean);
        assert_eq!(
            got,
            (
                want.map(|w| w.0),
                want.map(|w| w.1),
                want.map(|w| w.2),
                want.map(|w| w.3)
            ),
            "case {case}: {obs:?} first {first} end {end}"
        );
        assert_eq!(
            r.window_s,
            end.saturating_sub(first) as f64 / 1000.0,
            "case {case}"
        );
    }
    // Most cases have a window of positive length to check.
    assert!(open_windows > 300, "{open_windows} open windows");
}
