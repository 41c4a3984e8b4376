//! The report's SVG charts, drawn from the run's records with plotters' SVG backend.
//!
//! - `engine-cost.svg`: the engine group's cost per op, a bar per system in each workload's
//!   group of bars (median, with a whisker from min to max), on a log scale.
//! - `taskbench-efficiency.svg`: Task Bench's efficiency against task granularity for one
//!   pattern (`stencil_1d` when it ran), a line per system, from the `<pattern>.eff.<iterations>`
//!   and `<pattern>.gran.<iterations>` records.
//! - `cholesky-gflops.svg`: the `cholesky` group's GFLOP/s by matrix size, a line per system,
//!   from its `n<size>` records.
//! - `cholesky-timeline.svg`: one factorization on depengine, a row per worker thread and a
//!   slice per op (`timeline.rs`), from the group's timeline file rather than the records.
//!
//! A chart whose records are missing (its group did not run) is skipped with the reason. Text
//! is written as SVG `<text>` in the viewer's sans-serif font: plotters needs no font file.
//! Each system keeps its colour in every chart, and the legend sits in a strip on the right,
//! clear of the data.

use std::collections::BTreeMap;
use std::error::Error;
use std::ops::Range;
use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;

use super::groups::CHOLESKY_TIMELINE;
use super::results::Record;

mod timeline;

/// The pattern the efficiency chart shows when it ran.
const EFFICIENCY_PATTERN: &str = "stencil_1d";

/// Colours, one per charted system: ours first, then the others in the order they first
/// appear in the run (Tableau's 10, then two more).
const PALETTE: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(57, 59, 121),
    RGBColor(255, 187, 120),
];

/// Width of the legend strip.
const LEGEND_WIDTH: u32 = 230;
const FONT: &str = "sans-serif";

/// One chart of the report: drawn into a file of the report's directory, or skipped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Chart {
    Drawn {
        title: String,
        /// The file name, in the report's directory.
        file: &'static str,
    },
    Skipped {
        title: &'static str,
        reason: String,
    },
}

/// The groups charted, whose systems get the colours.
const CHARTED_GROUPS: &[&str] = &["engine", "taskbench", "cholesky"];

/// Draws every chart the records allow into `dir`; an error when a file cannot be written.
pub(crate) fn draw_all(records: &[Record], dir: &Path) -> Result<Vec<Chart>, String> {
    let colours = Colours::new(records);
    let charts: [(&'static str, &'static str, ChartFn); 3] = [
        ("engine-cost.svg", "Engine: cost per op", engine_costs),
        (
            "taskbench-efficiency.svg",
            "Task Bench: efficiency against task granularity",
            efficiency,
        ),
        (
            "cholesky-gflops.svg",
            "Tiled Cholesky: GFLOP/s by matrix size",
            cholesky,
        ),
    ];
    let mut drawn = Vec::new();
    for (file, title, draw) in charts {
        let path = dir.join(file);
        let chart = match draw(records, &colours, &path) {
            Ok(Outcome::Drawn(title)) => Chart::Drawn { title, file },
            Ok(Outcome::NoData(reason)) => Chart::Skipped { title, reason },
            Err(error) => return Err(format!("cannot draw {}: {error}", path.display())),
        };
        drawn.push(chart);
    }
    let (file, title) = (
        "cholesky-timeline.svg",
        "Tiled Cholesky: timeline of one factorization",
    );
    let path = dir.join(file);
    drawn.push(match timeline::draw(&dir.join(CHOLESKY_TIMELINE), &path) {
        Ok(Outcome::Drawn(title)) => Chart::Drawn { title, file },
        Ok(Outcome::NoData(reason)) => Chart::Skipped { title, reason },
        Err(error) => return Err(format!("cannot draw {}: {error}", path.display())),
    });
    Ok(drawn)
}

type ChartFn = fn(&[Record], &Colours, &Path) -> Result<Outcome, Box<dyn Error>>;

/// What a chart function did.
enum Outcome {
    /// Drew the chart, titled so.
    Drawn(String),
    /// Found nothing to draw, for this reason.
    NoData(String),
}

/// A colour per system, the same in every chart.
struct Colours {
    systems: Vec<&'static str>,
}

impl Colours {
    fn new(records: &[Record]) -> Self {
        let mut systems = Vec::new();
        for record in records.iter().filter(|r| CHARTED_GROUPS.contains(&r.group)) {
            if !systems.contains(&record.system) {
                systems.push(record.system);
            }
        }
        // Our own systems take the first colours, so that they stand out in every chart.
        systems.sort_by_key(|system| !system.starts_with("depengine"));
        Colours { systems }
    }

    fn of(&self, system: &str) -> RGBColor {
        let index = self.systems.iter().position(|&s| s == system);
        PALETTE[index.unwrap_or(0) % PALETTE.len()]
    }
}

/// An axis of `count` named categories: category `i` spans `i..i + 1` and is labelled (and
/// ticked) at its centre, `i + 0.5`; the labels come from the chart's label formatter.
struct Categories {
    count: usize,
}

impl Categories {
    /// The category `x` falls in.
    #[allow(clippy::cast_sign_loss)] // clamped to zero first
    fn at(x: f64) -> usize {
        x.max(0.0).floor() as usize
    }
}

impl Ranged for Categories {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let fraction = value / self.count as f64;
        limit.0 + (fraction * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            (0..self.count).map(|i| i as f64 + 0.5).collect()
        }
    }

    fn range(&self) -> Range<f64> {
        0.0..self.count as f64
    }
}

/// A tick label of a log axis: `0.1`, `1`, `100` (plotters hands the value by reference).
#[allow(clippy::trivially_copy_pass_by_ref)]
fn log_tick(value: &f64) -> String {
    if *value >= 1.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

/// Items in first-seen order, without repeats.
fn distinct<'a, T: PartialEq + ?Sized>(items: impl Iterator<Item = &'a T>) -> Vec<&'a T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// The engine group's `ns/op` records as grouped bars, log scale.
fn engine_costs(
    records: &[Record],
    colours: &Colours,
    path: &Path,
) -> Result<Outcome, Box<dyn Error>> {
    let costs: Vec<&Record> = records
        .iter()
        .filter(|r| r.group == "engine" && r.unit == "ns/op" && r.summary.min > 0.0)
        .collect();
    if costs.is_empty() {
        return Ok(Outcome::NoData(
            "no engine records in ns/op (the engine group did not run)".to_owned(),
        ));
    }
    let workloads = distinct(costs.iter().map(|r| r.workload.as_str()));
    let systems = distinct(costs.iter().map(|r| r.system));
    let low = costs.iter().map(|r| r.summary.min).fold(f64::MAX, f64::min) / 2.0;
    let high = costs.iter().map(|r| r.summary.max).fold(0.0, f64::max) * 2.0;

    // A workload's bars 16 pixels each, and room for its name under them.
    let category = (16 * (systems.len() + 1)).max(150) as u32;
    let width = 100 + LEGEND_WIDTH + category * workloads.len() as u32;
    let root = SVGBackend::new(path, (width, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(width - LEGEND_WIDTH);
    let title = "Engine: cost per op (median; whiskers: min to max)".to_owned();
    let mut chart = ChartBuilder::on(&plot)
        .caption(&title, (FONT, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(
            Categories {
                count: workloads.len(),
            },
            (low..high).log_scale(),
        )?;
    let workload_at = |x: &f64| {
        let workload = workloads.get(Categories::at(*x));
        workload.map_or_else(String::new, |&w| w.to_owned())
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&workload_at)
        .x_label_style((FONT, 13))
        .y_label_formatter(&log_tick)
        .y_desc("ns per op (log scale)")
        .axis_desc_style((FONT, 16))
        .draw()?;

    let bar_width = 0.8 / systems.len() as f64;
    for (slot, &system) in systems.iter().enumerate() {
        let colour = colours.of(system);
        let bars = costs.iter().filter(|r| r.system == system).filter_map(|r| {
            let index = workloads.iter().position(|&w| w == r.workload)?;
            let left = index as f64 + 0.1 + slot as f64 * bar_width;
            Some((left, r))
        });
        let bars: Vec<(f64, &&Record)> = bars.collect();
        chart.draw_series(bars.iter().map(|&(left, r)| {
            Rectangle::new(
                [(left, low), (left + bar_width, r.summary.median)],
                colour.filled(),
            )
        }))?;
        chart.draw_series(bars.iter().map(|&(left, r)| {
            let centre = left + bar_width / 2.0;
            PathElement::new(
                vec![(centre, r.summary.min), (centre, r.summary.max)],
                BLACK.stroke_width(1),
            )
        }))?;
    }
    draw_legend(&legend, &systems, colours)?;
    root.present()?;
    Ok(Outcome::Drawn(title))
}

/// One efficiency curve: (granularity in µs, efficiency) points in the sweep's order, from the
/// most iterations per task to 1 (the run at 0 iterations does no work: its efficiency is 0 and
/// its granularity is the overhead row of the table).
type Curve = Vec<(f64, f64)>;

/// The curves of `pattern`, per system in first-seen order.
fn efficiency_curves<'r>(records: &'r [Record], pattern: &str) -> Vec<(&'r str, Curve)> {
    let eff_prefix = format!("{pattern}.eff.");
    let gran_prefix = format!("{pattern}.gran.");
    let taskbench = || records.iter().filter(|r| r.group == "taskbench");
    let systems = distinct(taskbench().map(|r| r.system));
    systems
        .into_iter()
        .filter_map(|system| {
            // Keyed by the iterations of the run: its efficiency and granularity pair up.
            let mut points: BTreeMap<u64, (Option<f64>, Option<f64>)> = BTreeMap::new();
            for record in taskbench().filter(|r| r.system == system) {
                let iterations = |prefix: &str| -> Option<u64> {
                    record.workload.strip_prefix(prefix)?.parse().ok()
                };
                if let Some(iterations) = iterations(&eff_prefix) {
                    points.entry(iterations).or_default().1 = Some(record.summary.median);
                } else if let Some(iterations) = iterations(&gran_prefix) {
                    points.entry(iterations).or_default().0 = Some(record.summary.median);
                }
            }
            let curve: Curve = points
                .into_iter()
                .rev()
                .filter(|&(iterations, _)| iterations > 0)
                .filter_map(|(_, (granularity, efficiency))| Some((granularity?, efficiency?)))
                .filter(|&(granularity, _)| granularity > 0.0)
                .collect();
            (!curve.is_empty()).then_some((system, curve))
        })
        .collect()
}

/// Task Bench's efficiency against granularity for `EFFICIENCY_PATTERN`, or else the first
/// pattern with a curve.
fn efficiency(
    records: &[Record],
    colours: &Colours,
    path: &Path,
) -> Result<Outcome, Box<dyn Error>> {
    let patterns = distinct(
        records
            .iter()
            .filter(|r| r.group == "taskbench")
            .filter_map(|r| r.workload.split_once(".eff.").map(|(pattern, _)| pattern)),
    );
    let pattern = if patterns.contains(&EFFICIENCY_PATTERN) {
        EFFICIENCY_PATTERN
    } else if let Some(&first) = patterns.first() {
        first
    } else {
        return Ok(Outcome::NoData(
            "no Task Bench efficiency records (the taskbench group did not run)".to_owned(),
        ));
    };
    let curves = efficiency_curves(records, pattern);
    let points = || curves.iter().flat_map(|(_, curve)| curve.iter());
    let low = points().map(|p| p.0).fold(f64::MAX, f64::min) / 1.5;
    let high = points().map(|p| p.0).fold(0.0, f64::max) * 1.5;
    let top = points().map(|p| p.1).fold(1.0, f64::max) * 1.05;

    let root = SVGBackend::new(path, (1100, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(1100 - LEGEND_WIDTH);
    let title = format!("Task Bench {pattern}: efficiency against task granularity");
    let mut chart = ChartBuilder::on(&plot)
        .caption(&title, (FONT, 22))
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d((low..high).log_scale(), 0.0..top)?;
    chart
        .configure_mesh()
        .x_label_formatter(&log_tick)
        .x_desc("granularity: µs per task per core (log scale)")
        .y_desc("efficiency (rate / peak)")
        .axis_desc_style((FONT, 16))
        .draw()?;
    // METG(50%) is where a curve crosses this line.
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(low, 0.5), (high, 0.5)],
        RGBColor(150, 150, 150).stroke_width(1),
    )))?;
    let systems: Vec<&str> = curves.iter().map(|&(system, _)| system).collect();
    for (system, curve) in &curves {
        let colour = colours.of(system);
        chart.draw_series(LineSeries::new(
            curve.iter().copied(),
            colour.stroke_width(2),
        ))?;
        chart.draw_series(
            curve
                .iter()
                .map(|&point| Circle::new(point, 3, colour.filled())),
        )?;
    }
    draw_legend(&legend, &systems, colours)?;
    root.present()?;
    Ok(Outcome::Drawn(title))
}

/// The `cholesky` group's `n<size>` GFLOP/s records, a line per system.
fn cholesky(records: &[Record], colours: &Colours, path: &Path) -> Result<Outcome, Box<dyn Error>> {
    let rates: Vec<(u64, &Record)> = records
        .iter()
        .filter(|r| r.group == "cholesky" && r.unit == "GFLOP/s")
        .filter_map(|r| Some((r.workload.strip_prefix('n')?.parse().ok()?, r)))
        .filter(|&(size, _)| size > 0)
        .collect();
    if rates.is_empty() {
        return Ok(Outcome::NoData(
            "no cholesky records in GFLOP/s (the cholesky group did not run)".to_owned(),
        ));
    }
    let mut sizes: Vec<u64> = rates.iter().map(|&(size, _)| size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let systems = distinct(rates.iter().map(|(_, r)| r.system));
    let top = rates.iter().map(|(_, r)| r.summary.max).fold(0.0, f64::max) * 1.15;

    let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(1000 - LEGEND_WIDTH);
    let title = "Tiled Cholesky: GFLOP/s by matrix size (median)".to_owned();
    let mut chart = ChartBuilder::on(&plot)
        .caption(&title, (FONT, 22))
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(Categories { count: sizes.len() }, 0.0..top)?;
    let size_at = |x: &f64| {
        sizes
            .get(Categories::at(*x))
            .map_or_else(String::new, u64::to_string)
    };
    // Each size at the centre of its category.
    let position = |size: u64| sizes.iter().position(|&s| s == size).unwrap_or(0) as f64 + 0.5;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&size_at)
        .x_desc("n (an n x n matrix)")
        .y_desc("GFLOP/s")
        .axis_desc_style((FONT, 16))
        .draw()?;
    for &system in &systems {
        let colour = colours.of(system);
        let mut line: Vec<(f64, f64)> = rates
            .iter()
            .filter(|(_, r)| r.system == system)
            .map(|&(size, r)| (position(size), r.summary.median))
            .collect();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart.draw_series(LineSeries::new(
            line.iter().copied(),
            colour.stroke_width(2),
        ))?;
        chart.draw_series(
            line.iter()
                .map(|&point| Circle::new(point, 4, colour.filled())),
        )?;
    }
    draw_legend(&legend, &systems, colours)?;
    root.present()?;
    Ok(Outcome::Drawn(title))
}

/// A swatch and a name per system, top to bottom.
fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    systems: &[&str],
    colours: &Colours,
) -> Result<(), Box<dyn Error>> {
    let entries: Vec<(String, RGBColor)> = systems
        .iter()
        .map(|&system| (system.to_owned(), colours.of(system)))
        .collect();
    draw_swatches(area, &entries)
}

/// A swatch of its colour and a label per entry, top to bottom.
fn draw_swatches(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[(String, RGBColor)],
) -> Result<(), Box<dyn Error>> {
    let style = (FONT, 15).into_font().color(&BLACK);
    for ((label, colour), y) in entries.iter().zip((60..).step_by(24)) {
        area.draw(&Rectangle::new([(8, y - 6), (24, y + 6)], colour.filled()))?;
        area.draw(&Text::new(label.clone(), (32, y - 8), style.clone()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::groups::CHOLESKY_TIMELINE;
    use super::super::results::Record;
    use super::super::stats::Summary;
    use super::{Chart, draw_all, efficiency_curves, timeline};

    fn record(
        group: &'static str,
        workload: &str,
        system: &'static str,
        unit: &str,
        value: f64,
    ) -> Record {
        Record {
            group,
            workload: workload.to_owned(),
            system,
            unit: unit.to_owned(),
            summary: Summary::of(&[value * 0.9, value, value * 1.2]).unwrap(),
        }
    }

    /// Records of every charted group, as a run of all of them would leave.
    fn synthetic() -> Vec<Record> {
        let mut records = Vec::new();
        for (system, scale) in [
            ("depengine-perdevice", 1.0),
            ("rayon", 2.5),
            ("libgomp", 4.0),
        ] {
            for (workload, cost) in [("push_deps0", 40.0), ("chain", 300.0), ("latency", 9.0)] {
                let unit = if workload == "latency" { "us" } else { "ns/op" };
                records.push(record("engine", workload, system, unit, cost * scale));
            }
            for iterations in [0_u32, 1, 16, 256, 4096] {
                let granularity = 0.2 * scale + f64::from(iterations) * 0.01;
                let efficiency = granularity / (granularity + 0.5 * scale);
                records.push(record(
                    "taskbench",
                    &format!("stencil_1d.gran.{iterations}"),
                    system,
                    "us",
                    granularity,
                ));
                records.push(record(
                    "taskbench",
                    &format!("stencil_1d.eff.{iterations}"),
                    system,
                    "ratio",
                    efficiency,
                ));
            }
            for size in [1024, 2048, 4096] {
                let rate = f64::from(size) / 100.0 / scale;
                records.push(record(
                    "cholesky",
                    &format!("n{size}"),
                    system,
                    "GFLOP/s",
                    rate,
                ));
            }
        }
        records
    }

    fn chart_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-charts-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn every_chart_is_drawn_with_every_system_in_it() {
        let dir = chart_dir("all");
        let ops = [
            ("depengine-cpu-priority-0", "potrf", 10.0, 20.0),
            ("depengine-cpu-priority-1", "gemm", 20.0, 40.0),
        ];
        std::fs::write(dir.join(CHOLESKY_TIMELINE), timeline::synthetic(&ops)).unwrap();
        let charts = draw_all(&synthetic(), &dir).unwrap();
        assert_eq!(charts.len(), 4);
        for chart in charts {
            let Chart::Drawn { file, .. } = chart else {
                panic!("not drawn: {chart:?}");
            };
            let svg = std::fs::read_to_string(dir.join(file)).unwrap();
            assert!(svg.starts_with("<svg"), "{file}");
            if file == "cholesky-timeline.svg" {
                // One system: its threads and kernels instead (`timeline.rs` tests them).
                assert!(svg.contains("depengine-cpu-priority-1"), "{svg}");
                continue;
            }
            for system in ["depengine-perdevice", "rayon", "libgomp"] {
                assert!(svg.contains(system), "{file} lacks {system}");
            }
        }
        let engine = std::fs::read_to_string(dir.join("engine-cost.svg")).unwrap();
        assert!(engine.contains("push_deps0"), "workloads label the bars");
        assert!(!engine.contains("latency"), "µs rows are not costs per op");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn charts_without_records_are_skipped_with_a_reason() {
        let dir = chart_dir("pool-only");
        let pool_only = [record("pool", "idle", "rayon", "ms_cpu_per_s", 1.0)];
        let charts = draw_all(&pool_only, &dir).unwrap();
        for chart in &charts {
            let Chart::Skipped { reason, .. } = chart else {
                panic!("drawn from nothing: {chart:?}");
            };
            assert!(reason.contains("did not run"), "{reason}");
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn efficiency_points_pair_granularity_with_efficiency_by_iterations() {
        let records = synthetic();
        let curves = efficiency_curves(&records, "stencil_1d");
        let (system, curve) = &curves[0];
        assert_eq!(*system, "depengine-perdevice");
        // The sweep from 4096 iterations down to 1; not the run at 0.
        assert_eq!(curve.len(), 4);
        assert!(curve.windows(2).all(|pair| pair[0].0 > pair[1].0));
        // 1 iteration: granularity 0.21, efficiency 0.21 / 0.71.
        let (granularity, efficiency) = curve[3];
        assert!((granularity - 0.21).abs() < 1e-9);
        assert!((efficiency - 0.21 / 0.71).abs() < 1e-9);
        assert!(efficiency_curves(&records, "fft").is_empty());
    }
}
