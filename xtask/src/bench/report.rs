//! What a run leaves behind in `<target>/bench/`: per group `<group>.json`; for the whole run
//! `report.json` (every record, the settings and the machine), `report.md` (the summary table,
//! the machine and the charts) and the charts' SVG files (`charts.rs`).

use std::fmt::Write as _;
use std::path::Path;

use super::Options;
use super::charts::{self, Chart};
use super::machine::Machine;
use super::results::{GroupResults, Record};
use super::stats::Summary;
use super::table::{RATIO_MEANING, SummaryTable};
use super::units::Better;
use crate::cmd::Result;

/// Three significant digits or so: enough for medians of noisy timings.
pub(super) fn number(value: f64) -> String {
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
                .map(|cell| cell.chars().count())
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
/// unit, runs}` records, in table order; its path.
pub(crate) fn write_group_json(results: &GroupResults, dir: &Path) -> Result<String> {
    let records: Vec<String> = results
        .records()
        .iter()
        .map(|r| record(r.group, &r.workload, r.system, &r.unit, &r.summary))
        .collect();
    let json = if records.is_empty() {
        "[]\n".to_owned()
    } else {
        format!("[\n  {}\n]\n", records.join(",\n  "))
    };
    write(&dir.join(format!("{}.json", results.group.name)), &json)
}

/// Writes `content` to `path`, creating its directory; the path, for the "wrote" line.
fn write(path: &Path, content: &str) -> Result<String> {
    path.parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(path, content))
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    Ok(path.display().to_string())
}

/// Everything a run measured, and where.
pub(crate) struct RunReport<'a> {
    pub(crate) options: &'a Options,
    pub(crate) results: &'a [GroupResults],
    pub(crate) machine: &'a Machine,
}

impl RunReport<'_> {
    /// Writes `report.json`, the charts and `report.md` into `dir`; the lines to tell the
    /// user (what was written, which charts were skipped and why).
    pub(crate) fn write(&self, dir: &Path) -> Result<Vec<String>> {
        let records: Vec<Record> = self
            .results
            .iter()
            .flat_map(GroupResults::records)
            .collect();
        let json = serde_json::to_string_pretty(&self.json(&records))
            .map_err(|error| format!("cannot format report.json: {error}"))?;
        let mut lines = vec![format!(
            "wrote {}",
            write(&dir.join("report.json"), &(json + "\n"))?
        )];
        let charts = charts::draw_all(&records, dir)?;
        for chart in &charts {
            lines.push(match chart {
                Chart::Drawn { file, .. } => format!("wrote {}", dir.join(file).display()),
                Chart::Skipped { title, reason } => format!("no chart \"{title}\": {reason}"),
            });
        }
        let table = SummaryTable::new(self.results);
        let markdown = self.markdown(&table, &charts);
        lines.insert(
            1,
            format!("wrote {}", write(&dir.join("report.md"), &markdown)?),
        );
        Ok(lines)
    }

    /// One line on what was run: groups, runs, threads, sizes.
    pub(crate) fn settings(&self) -> String {
        let options = self.options;
        let groups: Vec<&str> = self.results.iter().map(|r| r.group.name).collect();
        format!(
            "groups {}; median of {} run(s) of each system; {} worker thread(s); {}",
            groups.join(", "),
            options.runs,
            options.threads,
            if options.quick {
                "quick sizes (--quick: a smoke run, not figures to publish)"
            } else {
                "full sizes"
            }
        )
    }

    /// `report.json`: the settings, the machine, every record (curve points included), and
    /// the systems skipped or failed.
    pub(crate) fn json(&self, records: &[Record]) -> serde_json::Value {
        let records: Vec<serde_json::Value> = records.iter().map(record_json).collect();
        let mut skipped = Vec::new();
        let mut failed = Vec::new();
        for results in self.results {
            let group = results.group.name;
            let entry = |system: &str, reason: &str| serde_json::json!({ "group": group, "system": system, "reason": reason });
            skipped.extend(results.skipped.iter().map(|(s, reason)| entry(s, reason)));
            failed.extend(results.failed.iter().map(|(s, reason)| entry(s, reason)));
        }
        serde_json::json!({
            "settings": {
                "groups": self.results.iter().map(|r| r.group.name).collect::<Vec<_>>(),
                "runs": self.options.runs,
                "threads": self.options.threads,
                "quick": self.options.quick,
            },
            "machine": self.machine.to_json(),
            "records": records,
            "skipped": skipped,
            "failed": failed,
        })
    }

    /// `report.md`: settings, machine, charts, the summary table, skipped and failed systems.
    pub(crate) fn markdown(&self, table: &SummaryTable, charts: &[Chart]) -> String {
        let mut out = String::from("# depengine benchmark report\n\n");
        let _ = writeln!(out, "`cargo xtask bench`: {}.\n", self.settings());
        let _ = writeln!(out, "## Machine\n\n{}", self.machine.markdown());
        out.push_str("## Charts\n\n");
        for chart in charts {
            let _ = match chart {
                Chart::Drawn { title, file } => writeln!(out, "[![{title}]({file})]({file})\n"),
                Chart::Skipped { title, reason } => writeln!(out, "- {title}: none, {reason}.\n"),
            };
        }
        let _ = writeln!(out, "## Results\n\n{RATIO_MEANING}; `-`: no ratio.\n");
        out.push_str(&table.markdown());
        let notes = self.skipped_and_failed();
        if !notes.is_empty() {
            out.push_str("\n## Systems that did not run\n\n");
            for note in notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out
    }

    /// A line per system skipped (could not be built, or runs none of the selected workloads) or
    /// failed, with the first line of why.
    pub(crate) fn skipped_and_failed(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for results in self.results {
            let group = results.group.name;
            let first_line = |reason: &str| reason.lines().next().unwrap_or("").to_owned();
            notes.extend(results.skipped.iter().map(|(system, reason)| {
                format!("{group}/{system}: skipped: {}", first_line(reason))
            }));
            notes.extend(results.failed.iter().map(|(system, reason)| {
                format!("{group}/{system}: failed: {}", first_line(reason))
            }));
        }
        notes
    }
}

/// One record of `report.json`.
fn record_json(record: &Record) -> serde_json::Value {
    let summary = &record.summary;
    serde_json::json!({
        "group": record.group,
        "workload": record.workload,
        "system": record.system,
        "value": summary.median,
        "unit": record.unit,
        "better": Better::of(&record.unit).map(Better::as_str),
        "runs": summary.runs,
        "min": summary.min,
        "max": summary.max,
    })
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
    use super::super::protocol::Measurement;
    use super::super::{Options, groups};
    use super::{
        GroupResults, Machine, RunReport, Summary, SummaryTable, align, number, record, string,
    };

    /// A pool group in which rayon ran and tbb could not be built.
    fn pool_results() -> GroupResults {
        let pool = groups::find("pool").unwrap();
        let skipped = vec![("tbb", "cannot find -ltbb".to_owned())];
        let mut results = GroupResults::new(pool, skipped);
        for value in [150.0, 160.0, 140.0] {
            let measurement = Measurement {
                workload: "spawn_external".to_owned(),
                value,
                unit: "ns/task".to_owned(),
            };
            results.record("depengine-pool", Ok(vec![measurement.clone()]));
            let rayon = Measurement {
                value: value * 3.0,
                ..measurement
            };
            results.record("rayon", Ok(vec![rayon]));
        }
        results
    }

    /// The machine the report tests describe.
    fn test_machine() -> Machine {
        Machine {
            cpu: Some("Test CPU".to_owned()),
            cores: 2,
            ..Machine::default()
        }
    }

    #[test]
    fn the_json_report_parses_back_with_every_field() {
        let options = Options::smoke();
        let results = [pool_results()];
        let machine = test_machine();
        let report = RunReport {
            options: &options,
            results: &results,
            machine: &machine,
        };
        let records = results[0].records();
        let text = serde_json::to_string_pretty(&report.json(&records)).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["settings"]["groups"], serde_json::json!(["pool"]));
        assert_eq!(json["settings"]["runs"], 1);
        assert_eq!(json["machine"]["cpu"], "Test CPU");
        assert_eq!(json["machine"]["cores"], 2);
        let records = json["records"].as_array().unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(
            records[1],
            serde_json::json!({
                "group": "pool",
                "workload": "spawn_external",
                "system": "rayon",
                "value": 450.0,
                "unit": "ns/task",
                "better": "lower",
                "runs": 3,
                "min": 420.0,
                "max": 480.0,
            })
        );
        assert_eq!(
            json["skipped"],
            serde_json::json!([{"group": "pool", "system": "tbb", "reason": "cannot find -ltbb"}])
        );
        assert_eq!(json["failed"], serde_json::json!([]));
    }

    #[test]
    fn the_group_json_parses_back_too() {
        let results = pool_results();
        let dir = std::env::temp_dir().join(format!("xtask-group-json-{}", std::process::id()));
        let path = super::write_group_json(&results, &dir).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(json[0]["system"], "depengine-pool");
        assert_eq!(json[0]["value"], 150.0);
        assert_eq!(json[1]["min"], 420.0);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_markdown_report_has_the_machine_the_charts_and_the_table() {
        let options = Options::smoke();
        let results = [pool_results()];
        let machine = test_machine();
        let report = RunReport {
            options: &options,
            results: &results,
            machine: &machine,
        };
        let dir = std::env::temp_dir().join(format!("xtask-report-{}", std::process::id()));
        let lines = report.write(&dir).unwrap();
        assert!(lines.iter().any(|l| l.ends_with("report.md")), "{lines:?}");
        assert!(lines.iter().any(|l| l.starts_with("no chart")), "{lines:?}");
        let markdown = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(markdown.contains("- CPU: Test CPU, 2 cores"), "{markdown}");
        assert!(markdown.contains("| pool | spawn_external | depengine-pool | 150 |"));
        assert!(markdown.contains("| rayon | 450 | 420–480 | ns/task | 3.00x |"));
        assert!(markdown.contains("- pool/tbb: skipped: cannot find -ltbb"));
        assert!(markdown.contains("Engine: cost per op: none, no engine records"));
        let table = SummaryTable::new(&results);
        assert!(markdown.contains(&table.markdown()));
        std::fs::remove_dir_all(dir).unwrap();
    }

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
