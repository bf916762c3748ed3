//! The replay's output: a readable table with the runs side by side, or one JSON object
//! (the main run, with the baseline run under `baseline`).

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;

use crate::metrics::SizeBucket;

use super::RunReport;
use super::engine::FillPoint;

/// The JSON document: the main run's figures at the top level, the baseline's below.
#[derive(Serialize)]
pub struct JsonReport<'a> {
    /// Nodes whose CPU or memory the trace leaves empty: counted as unlimited.
    pub nodes_unknown_capacity: usize,
    #[serde(flatten)]
    pub main: &'a RunReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<&'a RunReport>,
}

/// A duration in seconds as people read it: `0.4s`, `42s`, `7.5m`, `3.2h`, `2.1d` (a
/// wait under 10 s to a tenth, so that one under a second does not read as none).
pub fn human_duration(seconds: f64) -> String {
    match seconds {
        0.0 => "0s".to_owned(),
        s if s < 9.95 => format!("{s:.1}s"),
        s if s < 60.0 => format!("{s:.0}s"),
        s if s < 3600.0 => format!("{:.1}m", s / 60.0),
        s if s < 86_400.0 => format!("{:.1}h", s / 3600.0),
        s => format!("{:.1}d", s / 86_400.0),
    }
}

fn percent(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn optional(x: Option<f64>, show: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "-".into(), show)
}

/// The runs side by side, one column each.
pub fn table(title: &str, runs: &[&RunReport]) -> String {
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    let mut header = vec![Cell::new("metric")];
    header.extend(
        runs.iter()
            .map(|r| Cell::new(format!("profile {}", r.profile))),
    );
    table.set_header(header);
    let mut row = |label: String, value: &dyn Fn(&RunReport) -> String| {
        let mut cells = vec![Cell::new(label)];
        cells.extend(
            runs.iter()
                .map(|r| Cell::new(value(r)).set_alignment(CellAlignment::Right)),
        );
        table.add_row(cells);
    };
    row("GAR mean (GPUs assigned or held)".into(), &|r| {
        optional(r.metrics.gar_mean, percent)
    });
    row("GAR p50".into(), &|r| optional(r.metrics.gar_p50, percent));
    row("SOR (GPUs of running jobs)".into(), &|r| {
        optional(r.metrics.sor, percent)
    });
    row("GFR mean (fragmented nodes)".into(), &|r| {
        optional(r.metrics.gfr_mean, percent)
    });
    if runs.iter().any(|r| r.fill.is_some()) {
        // The points past the knee, where placements differ.
        const SHOWN: [usize; 4] = [5, 8, 9, 10];
        let at = |r: &RunReport, value: fn(&FillPoint) -> f64| {
            let Some(fill) = &r.fill else {
                return "-".to_owned();
            };
            let shown: Vec<String> = SHOWN
                .iter()
                .map(|&n| optional(fill.points.get(n - 1).map(value), percent))
                .collect();
            shown.join(" / ")
        };
        row(
            "fill: GPUs allocated at 50 / 80 / 90 / 100% arrived".into(),
            &|r| at(r, |p| p.allocated),
        );
        row(
            "fill: nodes fragmented at 50 / 80 / 90 / 100% arrived".into(),
            &|r| at(r, |p| p.fragmented),
        );
        row("fill: jobs dropped (their GPUs)".into(), &|r| {
            r.fill.as_ref().map_or_else(
                || "-".to_owned(),
                |f| format!("{} ({:.1})", f.jobs_dropped, f.gpus_dropped),
            )
        });
        row("fill: arrivals of rows without a duration".into(), &|r| {
            r.fill
                .as_ref()
                .map_or_else(|| "-".to_owned(), |f| f.jobs_without_duration.to_string())
        });
    }
    row("jobs placed / total".into(), &|r| {
        format!("{} / {}", r.metrics.jobs_placed, r.jobs_total)
    });
    row("jobs never placed".into(), &|r| {
        r.metrics.jobs_never_placed.to_string()
    });
    row("jobs skipped (no duration)".into(), &|r| {
        r.jobs_skipped.to_string()
    });
    if runs.iter().any(|r| r.jobs_unknown_tenant > 0) {
        row("jobs of undeclared tenants (run as default)".into(), &|r| {
            r.jobs_unknown_tenant.to_string()
        });
    }
    row("preemptions: priority / reclaim / backfill".into(), &|r| {
        let p = &r.preemptions;
        format!(
            "{} / {} / {}",
            p.priority.count, p.quota_reclaim.count, p.backfill.count
        )
    });
    row("GPU-hours lost to preemption".into(), &|r| {
        let p = &r.preemptions;
        let lost =
            p.priority.gpu_hours_lost + p.quota_reclaim.gpu_hours_lost + p.backfill.gpu_hours_lost;
        format!("{lost:.2}")
    });
    row(
        "victims' wait to run again: priority / reclaim / backfill".into(),
        &|r| {
            let p = &r.preemptions;
            // Of how many victims, so that those never placed again show.
            let [priority, reclaim, backfill] =
                [p.priority, p.quota_reclaim, p.backfill].map(|kind| match kind.count {
                    0 => "-".to_owned(),
                    n => format!(
                        "{} ({} of {n})",
                        optional(kind.mean_wait_again_s, human_duration),
                        kind.placed_again
                    ),
                });
            format!("{priority} / {reclaim} / {backfill}")
        },
    );
    row("multi-GPU pods off NVLink, NVLink free".into(), &|r| {
        format!("{} of {}", r.nvlink.exceptions, r.nvlink.multi_gpu_pods)
    });
    for bucket in SizeBucket::ALL {
        if runs.iter().all(|r| r.metrics.jwtd.get(bucket).count == 0) {
            continue;
        }
        row(
            format!("wait {} GPUs: mean / p50 / p95", bucket.label()),
            &|r| {
                let w = r.metrics.jwtd.get(bucket);
                format!(
                    "{} / {} / {} (n={})",
                    optional(w.mean, human_duration),
                    optional(w.p50, human_duration),
                    optional(w.p95, human_duration),
                    w.count
                )
            },
        );
    }
    for bucket in SizeBucket::ALL {
        if runs.iter().all(|r| r.metrics.jtted.get(bucket).count == 0) {
            continue;
        }
        row(
            format!("spread {} GPUs: node / leaf dev", bucket.label()),
            &|r| {
                let s = r.metrics.jtted.get(bucket);
                format!(
                    "{} / {}",
                    optional(s.node_dev, |x| format!("{x:.2}")),
                    optional(s.group_dev, |x| format!("{x:.2}"))
                )
            },
        );
    }
    let names: Vec<String> = runs
        .first()
        .map(|r| r.tenants.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_default();
    for name in names {
        let label = format!("tenant {name}: GPUs used / borrowed of quota, pending");
        row(label, &|r| {
            let Some(t) = r.tenants.iter().find(|t| t.name == name) else {
                return "-".into();
            };
            let tenth = |x: f64| format!("{x:.1}");
            format!(
                "{} / {} of {:.0}, {} (max {})",
                optional(t.used_gpus_mean, tenth),
                optional(t.borrowed_gpus_mean, tenth),
                t.quota_gpus,
                optional(t.pending_mean, tenth),
                t.pending_max
            )
        });
    }
    row("window (first to last submit)".into(), &|r| {
        human_duration(r.metrics.window_s)
    });
    row("simulated span".into(), &|r| human_duration(r.sim_span_s));
    row("wall time".into(), &|r| format!("{:.2}s", r.wall_s));
    row("pods placed per second".into(), &|r| {
        format!("{:.0}", r.placements_per_s)
    });
    format!("{title}\n{table}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(0.0), "0s");
        assert_eq!(human_duration(0.4), "0.4s");
        assert_eq!(human_duration(9.96), "10s");
        assert_eq!(human_duration(42.0), "42s");
        assert_eq!(human_duration(450.0), "7.5m");
        assert_eq!(human_duration(3.0 * 3600.0), "3.0h");
        assert_eq!(human_duration(2.0 * 86_400.0), "2.0d");
    }
}
