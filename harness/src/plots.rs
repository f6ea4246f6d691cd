//! SVG plots (plotters, SVG backend) linked from `report.md`.
//!
//! - latency percentile curves on HdrHistogram's log `1/(1-p)` axis (x = `log10(1/(1-p))`, so
//!   1 = 90 %, 2 = 99 %, 3 = 99.9 %), latency on a log axis labelled in ns, µs or ms: one plot
//!   per meaning (ping-pong with its calibration floor, open-loop, bursts, pipeline end-to-end,
//!   wake-up, fan-out skew, send stalls under backpressure);
//! - throughput vs senders (`stream/{N}to1/*`, engine and every peer) with min..max bars over
//!   runs;
//! - latency vs offered load (`openloop/rate`, corrected and uncorrected p50/p99);
//! - throughput vs pipeline length (`pipeline/{K}`) and vs partitions (`partitioned/{N}`, the
//!   scaling curve of a pool).
//!
//! A plot whose records are missing (filtered out) is not drawn. Lines use a fixed palette of
//! dark, distinct colours (no pale yellow or light grey on white), and the legend is drawn in a
//! column of its own to the right of the plotting area, so it never covers data.

use crate::record::{RunRecord, Summary};
use crate::stats;
use plotters::prelude::*;
use std::io;
use std::path::Path;

fn err<E: std::fmt::Display>(e: E) -> io::Error {
    io::Error::other(e.to_string())
}

/// A named series of points.
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points.
    pub points: Vec<(f64, f64)>,
    /// Interval bars `(x, low, high)` (min..max over runs), drawn when present.
    pub bars: Vec<(f64, f64, f64)>,
}

/// Line colours: dark and distinct on white (Okabe–Ito without its yellow, then darker tones).
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(0, 0, 0),
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(120, 60, 20),
    RGBColor(90, 90, 200),
    RGBColor(150, 0, 40),
];

/// The colour of series `i`.
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// A latency (ns) axis label in a readable unit.
fn ns_label(y: &f64) -> String {
    crate::record::fmt_value(*y, "ns")
}

/// Width of the legend column, pixels.
const LEGEND_W: u32 = 380;

/// Draws the legend of `series` into its own area (never over the data).
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
) -> io::Result<()>
where
    DB::ErrorType: 'static,
{
    let step = (480 / series.len().max(1) as i32).clamp(12, 22);
    for (i, s) in series.iter().enumerate() {
        let y = 60 + step * i as i32;
        let c = colour(i);
        area.draw(&PathElement::new(vec![(8, y), (36, y)], c.stroke_width(3)))
            .map_err(err)?;
        let mut name = s.name.clone();
        if name.chars().count() > 50 {
            name = name.chars().take(49).collect::<String>() + "…";
        }
        area.draw(&Text::new(name, (42, y - 7), ("sans-serif", 13)))
            .map_err(err)?;
    }
    Ok(())
}

/// The percentile curve of a histogram: `(log10(1/(1-q)), value)` points.
pub fn percentile_curve(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    let mut pts = Vec::new();
    for v in h.iter_quantiles(5) {
        let q = v.quantile_iterated_to();
        if q >= 1.0 {
            break;
        }
        pts.push((
            (1.0 / (1.0 - q)).log10(),
            v.value_iterated_to().max(1) as f64,
        ));
    }
    pts
}

fn pct_label(x: &f64) -> String {
    let p = 100.0 * (1.0 - 10f64.powf(-*x));
    if p < 99.0 {
        format!("{p:.0}%")
    } else {
        let s = format!("{p:.4}");
        format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
    }
}

fn bounds(series: &[Series]) -> Option<(f64, f64, f64, f64)> {
    let pts: Vec<&(f64, f64)> = series.iter().flat_map(|s| &s.points).collect();
    if pts.is_empty() {
        return None;
    }
    let fold = |f: fn(&(f64, f64)) -> f64, init: f64, pick: fn(f64, f64) -> f64| {
        pts.iter().map(|p| f(p)).fold(init, pick)
    };
    Some((
        fold(|p| p.0, f64::INFINITY, f64::min),
        fold(|p| p.0, f64::NEG_INFINITY, f64::max),
        fold(|p| p.1, f64::INFINITY, f64::min),
        fold(|p| p.1, f64::NEG_INFINITY, f64::max),
    ))
}

/// Draws percentile curves (log latency axis).
pub fn draw_percentiles(path: &Path, title: &str, series: &[Series]) -> io::Result<bool> {
    let Some((_, x1, y0, y1)) = bounds(series) else {
        return Ok(false);
    };
    let root = SVGBackend::new(path, (960 + LEGEND_W, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (plot, legend) = root.split_horizontally(960);
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(
            0f64..x1.max(1.0).ceil(),
            ((y0 * 0.8).max(1.0)..y1 * 1.25).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("percentile (log 1/(1-p) axis)")
        .y_desc("latency (log axis)")
        .y_label_formatter(&ns_label)
        .x_labels(8)
        .x_label_formatter(&pct_label)
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                colour(i).stroke_width(2),
            ))
            .map_err(err)?;
    }
    draw_legend(&legend, series)?;
    root.present().map_err(err)?;
    Ok(true)
}

/// Draws an x/y line chart with points (linear x, linear y from 0).
pub fn draw_xy(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    log_y: bool,
) -> io::Result<bool> {
    // A log y axis here carries latencies (ns): label it in readable units.
    let latency_axis = log_y;
    let Some((x0, x1, y0, y1)) = bounds(series) else {
        return Ok(false);
    };
    let y1 = series
        .iter()
        .flat_map(|s| s.bars.iter().map(|b| b.2))
        .fold(y1, f64::max);
    let root = SVGBackend::new(path, (960 + LEGEND_W, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (plot, legend) = root.split_horizontally(960);
    let pad = ((x1 - x0) * 0.05).max(0.5);
    let mut builder = ChartBuilder::on(&plot);
    builder
        .caption(title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(80);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                // Integer axes (senders, K, load %): label whole numbers only.
                .x_label_formatter(&|x| {
                    if (x - x.round()).abs() < 1e-6 {
                        format!("{x:.0}")
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y| {
                    if latency_axis {
                        ns_label(y)
                    } else if *y >= 10.0 {
                        format!("{y:.0}")
                    } else {
                        format!("{y:.1}")
                    }
                })
                .draw()
                .map_err(err)?;
            for (i, s) in series.iter().enumerate() {
                let color = colour(i);
                chart
                    .draw_series(LineSeries::new(
                        s.points.iter().copied(),
                        color.stroke_width(2),
                    ))
                    .map_err(err)?;
                chart
                    .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, color.filled())))
                    .map_err(err)?;
                // Interval bars (min..max over runs), slightly offset per series so that
                // series at the same x stay apart.
                let dx = (i as f64 - series.len() as f64 / 2.0) * 0.03;
                chart
                    .draw_series(s.bars.iter().map(|&(x, lo, hi)| {
                        PathElement::new(vec![(x + dx, lo), (x + dx, hi)], color.stroke_width(1))
                    }))
                    .map_err(err)?;
            }
            draw_legend(&legend, series)?;
        }};
    }
    if log_y {
        body!(builder
            .build_cartesian_2d(
                (x0 - pad)..(x1 + pad),
                ((y0 * 0.8).max(1e-3)..y1 * 1.25).log_scale()
            )
            .map_err(err)?);
    } else {
        body!(builder
            .build_cartesian_2d((x0 - pad)..(x1 + pad), 0f64..y1 * 1.15)
            .map_err(err)?);
    }
    root.present().map_err(err)?;
    Ok(true)
}

/// The throughput of `{prefix}{N}` against N, medians with min..max bars over runs: one series,
/// or none when no such record passed its checks.
fn curve_over_n(s: &Summary, prefix: &str, name: &str) -> Vec<Series> {
    let mut rows: Vec<(f64, f64, f64, f64)> = s
        .records
        .iter()
        .filter(|r| r.metric == "throughput" && r.checks == "ok")
        .filter_map(|r| {
            Some((
                r.id.strip_prefix(prefix)?.parse().ok()?,
                r.median / 1e6,
                r.min / 1e6,
                r.max / 1e6,
            ))
        })
        .collect();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    if rows.is_empty() {
        return Vec::new();
    }
    vec![Series {
        name: name.into(),
        points: rows.iter().map(|r| (r.0, r.1)).collect(),
        bars: rows.iter().map(|r| (r.0, r.2, r.3)).collect(),
    }]
}

fn runs_of<'a>(runs: &'a [(String, Vec<RunRecord>)], id: &str) -> Option<&'a [RunRecord]> {
    runs.iter()
        .find(|(i, _)| i == id)
        .map(|(_, r)| r.as_slice())
}

/// Writes every plot that has data; returns `(file name, title)` of each.
///
/// # Errors
/// Any I/O error while writing an SVG.
pub fn write_all(
    dir: &Path,
    s: &Summary,
    runs: &[(String, Vec<RunRecord>)],
) -> io::Result<Vec<(String, String)>> {
    let mut written = Vec::new();
    let mut emit = |file: &str, title: &str, ok: bool| {
        if ok {
            written.push((file.to_string(), title.to_string()));
        }
    };
    let lat_rows: Vec<_> = s
        .records
        .iter()
        .filter(|r| r.percentiles.is_some() && r.checks == "ok")
        .collect();
    let curve = |id: &str, metric: &str| -> Option<Series> {
        let h = stats::merged_hist(runs_of(runs, id)?, metric)?;
        Some(Series {
            name: format!("{id} {metric}"),
            points: percentile_curve(&h),
            bars: Vec::new(),
        })
    };
    // 1. Latency percentile curves, one plot per meaning.
    type Pick = fn(&str) -> bool;
    fn other(id: &str) -> bool {
        ![
            "pingpong/",
            "calibration/",
            "openloop/",
            "burst/",
            "pipeline/",
            "idle/",
            "fanout/",
            "backpressure/",
        ]
        .iter()
        .any(|p| id.starts_with(p))
    }
    let groups: [(&str, &str, Pick); 10] = [
        (
            "latency-pingpong.svg",
            "One-way latency: ping-pong vs the cache-line and ring floors",
            |id| {
                id.starts_with("pingpong/")
                    || id == "calibration/cacheline-pingpong"
                    || id == "calibration/ring-pingpong"
            },
        ),
        (
            "latency-openloop.svg",
            "Open-loop latency: corrected (intended send time) and uncorrected",
            |id| id == "openloop/rate",
        ),
        (
            "latency-bursts-1.svg",
            "Latency per event, bursts of 1 (disruptor crate's shape)",
            |id| id.starts_with("burst/1/"),
        ),
        (
            "latency-bursts-10.svg",
            "Latency per event, bursts of 10 (disruptor crate's shape)",
            |id| id.starts_with("burst/10/"),
        ),
        (
            "latency-bursts-100.svg",
            "Latency per event, bursts of 100 (disruptor crate's shape)",
            |id| id.starts_with("burst/100/"),
        ),
        (
            "latency-pipeline.svg",
            "Pipeline end-to-end latency (K contexts in a chain)",
            |id| id.starts_with("pipeline/"),
        ),
        (
            "latency-wakeup.svg",
            "Wake-up latency after an idle gap, per wait strategy",
            |id| id.starts_with("idle/"),
        ),
        (
            "latency-fanout.svg",
            "Fan-out: first-to-last delivery skew",
            |id| id.starts_with("fanout/"),
        ),
        (
            "latency-backpressure.svg",
            "Send latency under backpressure (senders faster than the receiver)",
            |id| id.starts_with("backpressure/"),
        ),
        ("latency-other.svg", "Other latencies", other),
    ];
    for (file, title, pick) in groups {
        let series: Vec<Series> = lat_rows
            .iter()
            .filter(|r| pick(&r.id))
            .filter_map(|r| curve(&r.id, &r.metric))
            .filter(|c| !c.points.is_empty())
            .collect();
        let ok = draw_percentiles(&dir.join(file), title, &series)?;
        emit(file, title, ok);
    }
    // 2. Throughput vs senders, every stream scenario, min..max bars over runs.
    let mut names: Vec<String> = vec!["engine".into()];
    for r in &s.records {
        if let Some(who) =
            r.id.strip_prefix("stream/")
                .and_then(|x| x.split_once("to1/"))
        {
            if !names.iter().any(|n| n == who.1) {
                names.push(who.1.to_string());
            }
        }
    }
    let mut series = Vec::new();
    for name in names {
        let mut rows: Vec<(f64, f64, f64, f64)> = s
            .records
            .iter()
            .filter(|r| r.metric == "throughput" && r.checks == "ok")
            .filter_map(|r| {
                let rest = r.id.strip_prefix("stream/")?;
                let (n, who) = rest.split_once("to1/")?;
                (who == name).then(|| {
                    Some((
                        n.parse::<f64>().ok()?,
                        r.median / 1e6,
                        r.min / 1e6,
                        r.max / 1e6,
                    ))
                })?
            })
            .collect();
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !rows.is_empty() {
            series.push(Series {
                name: name.to_string(),
                points: rows.iter().map(|r| (r.0, r.1)).collect(),
                bars: rows.iter().map(|r| (r.0, r.2, r.3)).collect(),
            });
        }
    }
    let ok = draw_xy(
        &dir.join("throughput-vs-senders.svg"),
        "Stream throughput vs senders (N to 1)",
        "senders",
        "M events/s",
        &series,
        false,
    )?;
    emit("throughput-vs-senders.svg", "Throughput vs senders", ok);
    // 3. Latency vs offered load.
    let mut series = Vec::new();
    for view in ["corrected", "uncorrected"] {
        for (pname, pick) in [
            (
                "p50",
                (|p: &crate::record::Percentiles| p.p50) as fn(&_) -> f64,
            ),
            ("p99", |p: &crate::record::Percentiles| p.p99),
        ] {
            let mut pts: Vec<(f64, f64)> = s
                .records
                .iter()
                .filter(|r| r.id == "openloop/rate" && r.checks == "ok")
                .filter_map(|r| {
                    let load = r.metric.strip_prefix(&format!("latency_{view}@"))?;
                    let load: f64 = load.strip_suffix('%')?.parse().ok()?;
                    Some((load, pick(r.percentiles.as_ref()?)))
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            if !pts.is_empty() {
                series.push(Series {
                    name: format!("{view} {pname}"),
                    points: pts,
                    bars: Vec::new(),
                });
            }
        }
    }
    let ok = draw_xy(
        &dir.join("latency-vs-load.svg"),
        "Open-loop latency vs offered load",
        "offered load, % of measured maximum",
        "latency (log axis)",
        &series,
        true,
    )?;
    emit("latency-vs-load.svg", "Latency vs offered load", ok);
    // 4. Throughput vs pipeline length; 5. vs partitions (the scaling curve of `partitioned/{N}`).
    for (prefix, file, title, x_label, name) in [
        (
            "pipeline/",
            "throughput-vs-pipeline.svg",
            "Throughput vs pipeline length (K contexts in a chain)",
            "K (contexts)",
            "pipeline/K engine",
        ),
        (
            "partitioned/",
            "throughput-vs-partitions.svg",
            "Throughput vs partitions (N contexts, one sender each)",
            "N (partitions)",
            "partitioned/N engine",
        ),
    ] {
        let series = curve_over_n(s, prefix, name);
        let ok = draw_xy(
            &dir.join(file),
            title,
            x_label,
            "M events/s",
            &series,
            false,
        )?;
        emit(file, title.split(" (").next().unwrap_or(title), ok);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_axis_labels() {
        assert_eq!(pct_label(&0.0), "0%");
        assert_eq!(pct_label(&1.0), "90%");
        assert_eq!(pct_label(&2.0), "99%");
        assert_eq!(pct_label(&3.0), "99.9%");
        assert_eq!(pct_label(&4.0), "99.99%");
    }

    #[test]
    fn curve_is_monotonic_and_draws() {
        let mut h = stats::new_hist();
        for v in 1..=100_000u64 {
            h.record(v).unwrap();
        }
        let c = percentile_curve(&h);
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        let dir = std::env::temp_dir().join(format!("harness-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.svg");
        assert!(draw_percentiles(
            &p,
            "t",
            &[Series {
                name: "x".into(),
                points: c,
                bars: Vec::new(),
            }]
        )
        .unwrap());
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("polyline"));
        assert!(!draw_percentiles(&p, "t", &[]).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
