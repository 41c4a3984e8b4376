//! The results of a group: a table on stdout and `<target>/bench/<group>.json`.

use std::fmt::Write as _;
use std::path::Path;

use super::results::GroupResults;
use super::stats::Summary;
use crate::cmd::Result;

/// Prints one row per workload and one column per system: the median, and for the peers the
/// ratio peer / ours (every unit is lower-is-better, so above 1 means ours is faster).
pub(crate) fn print_table(results: &GroupResults) {
    let group = results.group;
    let sizes = if results.quick { "quick" } else { "full" };
    println!(
        "\n{}: median of {} run(s), --threads {}, {sizes} sizes; (x) = system / {}, above 1 means {} is faster",
        group.name, results.runs, results.threads, group.ours, group.ours
    );
    let systems = results.systems();
    let mut rows = vec![header(&systems)];
    for workload in results.workloads() {
        rows.push(row(results, workload, &systems));
    }
    if systems.is_empty() {
        println!("(no results)");
    } else {
        print!("{}", align(&rows));
    }
    for (system, reason) in &results.failed {
        println!("failed: {system}: {}", reason.lines().next().unwrap_or(""));
    }
    for (system, reason) in &results.skipped {
        println!("skipped: {system}: {reason}");
    }
}

fn header(systems: &[&str]) -> Vec<String> {
    let mut header = vec!["workload".to_owned(), "unit".to_owned()];
    header.extend(systems.iter().map(|&s| s.to_owned()));
    header
}

fn row(results: &GroupResults, workload: &str, systems: &[&'static str]) -> Vec<String> {
    let summary = |system: &'static str| {
        let series = results.series.get(&(workload.to_owned(), system))?;
        Some((Summary::of(&series.values)?, series.unit.as_str()))
    };
    let ours = summary(results.group.ours);
    let unit = systems
        .iter()
        .find_map(|s| summary(s))
        .map_or("", |(_, unit)| unit);
    let mut row = vec![workload.to_owned(), unit.to_owned()];
    for &system in systems {
        let cell = match (summary(system), ours) {
            (None, _) => "-".to_owned(),
            (Some((this, _)), _) if system == results.group.ours => number(this.median),
            (Some((this, this_unit)), Some((base, base_unit)))
                if this_unit == base_unit && base.median > 0.0 =>
            {
                format!(
                    "{} ({:.2}x)",
                    number(this.median),
                    this.median / base.median
                )
            }
            (Some((this, this_unit)), _) if this_unit != unit => {
                format!("{} {this_unit}", number(this.median))
            }
            (Some((this, _)), _) => number(this.median),
        };
        row.push(cell);
    }
    row
}

/// Three significant digits or so: enough for medians of noisy timings.
fn number(value: f64) -> String {
    match value.abs() {
        v if v >= 100.0 => format!("{value:.0}"),
        v if v >= 10.0 => format!("{value:.1}"),
        _ => format!("{value:.2}"),
    }
}

/// Lays the rows out in columns two spaces apart.
pub(super) fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, &width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Writes `<dir>/<group>.json`: a list of `{group, workload, system, value (median), min, max,
/// unit, runs}` records, in table order.
pub(crate) fn write_json(results: &GroupResults, dir: &Path) -> Result {
    let mut records = Vec::new();
    for workload in results.workloads() {
        for system in results.systems() {
            let Some(series) = results.series.get(&(workload.to_owned(), system)) else {
                continue;
            };
            let Some(summary) = Summary::of(&series.values) else {
                continue;
            };
            records.push(record(
                results.group.name,
                workload,
                system,
                &series.unit,
                &summary,
            ));
        }
    }
    let json = if records.is_empty() {
        "[]\n".to_owned()
    } else {
        format!("[\n  {}\n]\n", records.join(",\n  "))
    };
    let path = dir.join(format!("{}.json", results.group.name));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, json))
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

fn record(group: &str, workload: &str, system: &str, unit: &str, summary: &Summary) -> String {
    format!(
        "{{\"group\": {}, \"workload\": {}, \"system\": {}, \"value\": {}, \"min\": {}, \
         \"max\": {}, \"unit\": {}, \"runs\": {}}}",
        string(group),
        string(workload),
        string(system),
        summary.median,
        summary.min,
        summary.max,
        string(unit),
        summary.runs
    )
}

/// A JSON string literal.
fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::{Summary, align, number, record, string};

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(string("ns/task"), "\"ns/task\"");
        assert_eq!(string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }

    #[test]
    fn record_has_every_field() {
        let summary = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(
            record("pool", "spawn_external", "rayon", "ns/task", &summary),
            "{\"group\": \"pool\", \"workload\": \"spawn_external\", \"system\": \"rayon\", \
             \"value\": 2, \"min\": 1, \"max\": 3, \"unit\": \"ns/task\", \"runs\": 3}"
        );
    }

    #[test]
    fn numbers_keep_about_three_digits() {
        assert_eq!(number(319.192), "319");
        assert_eq!(number(16.43), "16.4");
        assert_eq!(number(0.554), "0.55");
    }

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["a".to_owned(), "long".to_owned()],
            vec!["wide".to_owned(), "b".to_owned()],
        ];
        assert_eq!(align(&rows), "a     long\nwide  b\n");
    }
}
