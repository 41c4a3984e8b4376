//! `cholesky-timeline.svg`: one factorization of the `cholesky` group on depengine, a row per
//! worker thread and a slice per op, coloured by kernel.
//!
//! Drawn from the timeline file that `depengine-bench cholesky --timeline PATH` writes
//! (`crates/bench/src/cholesky/timeline.rs` has its format): the run, and per op its thread,
//! its name in the tile graph and its start and end in microseconds. Time runs from the first
//! op's start; the rows are the threads in name order (`worker-2` before `worker-10`).

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use super::{Categories, FONT, LEGEND_WIDTH, Outcome, draw_swatches};

/// The tile graph's kernels, in legend order, each with its colour.
const KERNELS: &[(&str, RGBColor)] = &[
    ("potrf", RGBColor(214, 39, 40)),
    ("trsm", RGBColor(255, 127, 14)),
    ("syrk", RGBColor(44, 160, 44)),
    ("gemm", RGBColor(31, 119, 180)),
];

/// The colour of an op that is none of `KERNELS`.
const OTHER: RGBColor = RGBColor(127, 127, 127);

/// One op of the timeline.
#[derive(Debug, Clone, PartialEq)]
struct Slice {
    thread: String,
    kernel: String,
    start_us: f64,
    end_us: f64,
}

/// The timeline file: the run and its ops.
#[derive(Debug, Clone, PartialEq)]
struct Timeline {
    system: String,
    n: u64,
    tile: u64,
    threads: u64,
    ops: Vec<Slice>,
}

impl Timeline {
    /// Parses the file's text, or says what is wrong with it.
    fn parse(text: &str) -> Result<Self, String> {
        let json: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let number = |field: &str| {
            json[field]
                .as_u64()
                .ok_or_else(|| format!("no whole number `{field}`"))
        };
        let ops = json["ops"].as_array().ok_or("no list `ops`")?;
        let ops = ops
            .iter()
            .enumerate()
            .map(|(index, op)| {
                let text = |field: &str| {
                    op[field]
                        .as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| format!("op {index}: no string `{field}`"))
                };
                let time = |field: &str| {
                    op[field]
                        .as_f64()
                        .filter(|t| t.is_finite())
                        .ok_or_else(|| format!("op {index}: no number `{field}`"))
                };
                Ok(Slice {
                    thread: text("thread")?,
                    kernel: text("op")?,
                    start_us: time("start_us")?,
                    end_us: time("end_us")?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Timeline {
            system: json["system"]
                .as_str()
                .ok_or("no string `system`")?
                .to_owned(),
            n: number("n")?,
            tile: number("tile")?,
            threads: number("threads")?,
            ops,
        })
    }

    /// The threads that ran ops, in name order.
    fn threads(&self) -> Vec<&str> {
        let mut threads: Vec<&str> = self.ops.iter().map(|op| op.thread.as_str()).collect();
        threads.sort_by(|a, b| thread_order(a).cmp(&thread_order(b)).then(a.cmp(b)));
        threads.dedup();
        threads
    }

    /// Per kernel that ran (the tile graph's first, in their order, then the others by name):
    /// its colour, how many ops and their total time in ms.
    fn kernels(&self) -> Vec<(String, RGBColor, usize, f64)> {
        let mut names: Vec<&str> = self.ops.iter().map(|op| op.kernel.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let rank = |name: &str| KERNELS.iter().position(|&(k, _)| k == name);
        names.sort_by_key(|&name| rank(name).unwrap_or(KERNELS.len()));
        names
            .into_iter()
            .map(|name| {
                let ops = self.ops.iter().filter(|op| op.kernel == name);
                let total_ms: f64 =
                    ops.clone().map(|op| op.end_us - op.start_us).sum::<f64>() / 1e3;
                (name.to_owned(), colour(name), ops.count(), total_ms)
            })
            .collect()
    }
}

/// A thread name's sort key: the name without its trailing number, then the number, so that
/// `worker-2` comes before `worker-10`.
fn thread_order(name: &str) -> (&str, Option<u64>) {
    let prefix = name.trim_end_matches(|c: char| c.is_ascii_digit());
    (prefix, name[prefix.len()..].parse().ok())
}

/// The colour of kernel `name`.
fn colour(name: &str) -> RGBColor {
    KERNELS
        .iter()
        .find(|&&(kernel, _)| kernel == name)
        .map_or(OTHER, |&(_, colour)| colour)
}

/// Draws the timeline in `source` (absent: the `cholesky` group did not run) into `path`.
pub(super) fn draw(source: &Path, path: &Path) -> Result<Outcome, Box<dyn Error>> {
    let file_name = source.file_name().unwrap_or_default().to_string_lossy();
    let text = match std::fs::read_to_string(source) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Outcome::NoData(format!(
                "no {file_name} (the cholesky group did not run)"
            )));
        }
        Err(error) => return Err(format!("cannot read {}: {error}", source.display()).into()),
    };
    let timeline = match Timeline::parse(&text) {
        Ok(timeline) if !timeline.ops.is_empty() => timeline,
        Ok(_) => return Ok(Outcome::NoData(format!("{file_name} has no ops"))),
        Err(error) => {
            return Ok(Outcome::NoData(format!(
                "{file_name} is not a timeline: {error}"
            )));
        }
    };
    let threads = timeline.threads();
    let first = timeline
        .ops
        .iter()
        .map(|op| op.start_us)
        .fold(f64::MAX, f64::min);
    let ms = |us: f64| (us - first) / 1e3;
    let last = timeline
        .ops
        .iter()
        .map(|op| ms(op.end_us))
        .fold(0.0, f64::max);

    let width = 1100;
    // 48 pixels a row (squeezed past 64 rows).
    let height = 160 + 48 * u32::try_from(threads.len().min(64)).unwrap_or(64);
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(width - LEGEND_WIDTH);
    let title = format!(
        "Tiled Cholesky on {}: one factorization (n {}, tile {}, {} threads)",
        timeline.system, timeline.n, timeline.tile, timeline.threads
    );
    let mut chart = ChartBuilder::on(&plot)
        .caption(&title, (FONT, 20))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(190)
        .build_cartesian_2d(
            0.0..last.max(1e-3) * 1.01,
            Categories {
                count: threads.len(),
            },
        )?;
    // The first thread on top: row `r` is category `count - 1 - r`.
    let row_of = |thread: &str| {
        let row = threads.iter().position(|&t| t == thread).unwrap_or(0);
        (threads.len() - 1 - row) as f64
    };
    let thread_at = |y: &f64| {
        let row = threads.len().checked_sub(1 + Categories::at(*y));
        row.and_then(|row| threads.get(row))
            .map_or_else(String::new, |&t| t.to_owned())
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_label_formatter(&thread_at)
        .y_label_style((FONT, 13))
        .x_desc("ms since the first op started")
        .axis_desc_style((FONT, 16))
        .draw()?;
    for op in &timeline.ops {
        let row = row_of(&op.thread);
        let corners = [(ms(op.start_us), row + 0.2), (ms(op.end_us), row + 0.8)];
        chart.draw_series([
            Rectangle::new(corners, colour(&op.kernel).filled()),
            // An edge, so that two ops of a kernel back to back stay two slices.
            Rectangle::new(corners, BLACK.mix(0.35).stroke_width(1)),
        ])?;
    }
    let entries: Vec<(String, RGBColor)> = timeline
        .kernels()
        .into_iter()
        .map(|(name, colour, ops, total_ms)| {
            let plural = if ops == 1 { "" } else { "s" };
            (
                format!("{name}: {ops} op{plural}, {total_ms:.1} ms"),
                colour,
            )
        })
        .collect();
    draw_swatches(&legend, &entries)?;
    root.present()?;
    Ok(Outcome::Drawn(title))
}

/// A timeline file of `ops` (thread, kernel, start µs, end µs), as the bench writes one.
#[cfg(test)]
pub(super) fn synthetic(ops: &[(&str, &str, f64, f64)]) -> String {
    let ops: Vec<serde_json::Value> = ops
        .iter()
        .map(|&(thread, op, start_us, end_us)| {
            serde_json::json!({"thread": thread, "op": op, "start_us": start_us, "end_us": end_us})
        })
        .collect();
    serde_json::json!({
        "system": "depengine-perdevice", "n": 512, "tile": 128, "threads": 2, "ops": ops,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::{Outcome, Slice, Timeline, draw, synthetic, thread_order};

    /// One step of a 2 × 2 tile factorization on two workers, and a stray op.
    fn ops() -> Vec<(&'static str, &'static str, f64, f64)> {
        vec![
            ("worker-10", "potrf", 1000.0, 1400.0),
            ("worker-10", "trsm", 1400.0, 2000.0),
            ("worker-2", "syrk", 2000.0, 2500.0),
            ("worker-2", "gemm", 2500.0, 3500.0),
            ("worker-10", "potrf", 2600.0, 3000.0),
            ("worker-2", "copy", 3500.0, 3600.0),
        ]
    }

    #[test]
    fn the_file_parses_into_slices() {
        let timeline = Timeline::parse(&synthetic(&ops())).unwrap();
        assert_eq!((timeline.n, timeline.tile, timeline.threads), (512, 128, 2));
        assert_eq!(timeline.ops.len(), 6);
        let second = Slice {
            thread: "worker-10".to_owned(),
            kernel: "trsm".to_owned(),
            start_us: 1400.0,
            end_us: 2000.0,
        };
        assert_eq!(timeline.ops[1], second);
        assert_eq!(timeline.threads(), ["worker-2", "worker-10"]);
        let kernels: Vec<(String, usize)> = timeline
            .kernels()
            .into_iter()
            .map(|(name, _, ops, _)| (name, ops))
            .collect();
        let expected = [
            ("potrf", 2),
            ("trsm", 1),
            ("syrk", 1),
            ("gemm", 1),
            ("copy", 1),
        ];
        assert_eq!(kernels, expected.map(|(name, ops)| (name.to_owned(), ops)));
        for bad in [
            "{}",
            "[]",
            r#"{"n": 1, "tile": 1, "threads": 1, "ops": [{"op": "x"}]}"#,
        ] {
            assert!(Timeline::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn threads_sort_by_their_number() {
        assert_eq!(thread_order("worker-10"), ("worker-", Some(10)));
        assert_eq!(thread_order("main"), ("main", None));
        assert!(thread_order("worker-2") < thread_order("worker-10"));
    }

    #[test]
    fn the_chart_has_a_row_per_thread_and_the_kernels_in_its_legend() {
        let dir = std::env::temp_dir().join(format!("xtask-timeline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (source, path) = (dir.join("t.json"), dir.join("t.svg"));
        std::fs::write(&source, synthetic(&ops())).unwrap();
        let Outcome::Drawn(title) = draw(&source, &path).unwrap() else {
            panic!("not drawn");
        };
        assert!(title.contains("n 512, tile 128, 2 threads"), "{title}");
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in [
            "worker-2",
            "worker-10",
            "potrf: 2 ops, 0.8 ms",
            "gemm: 1 op, 1.0 ms",
        ] {
            assert!(svg.contains(text), "the chart lacks {text}");
        }
        // A slice per op (and its edge), beside the background and the legend's swatches.
        assert!(svg.matches("<rect").count() >= 2 * 6 + 5, "{svg}");

        std::fs::write(&source, "{\"ops\": 3}").unwrap();
        let Outcome::NoData(reason) = draw(&source, &path).unwrap() else {
            panic!("drawn from a broken file");
        };
        assert!(reason.starts_with("t.json is not a timeline"), "{reason}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
