//! The summary table of a run: one row per (workload, system) of every group, with the median,
//! the range over the runs, the unit, and how many times better the group's own system does.
//! Printed on stdout and written into `report.md`.

use std::fmt::Write as _;

use super::report::{align, number};
use super::results::{GroupResults, Record};
use super::units::{Better, advantage};

/// What the ratio column means, for the table's header.
pub(crate) const RATIO_MEANING: &str = "ratio: how many times better the group's own system \
     (`ours`) does than this one: this one's time / ours for a time, our rate / this one's for a \
     rate or an efficiency (GFLOP/s, ratio); above 1, ours is ahead";

/// The ratio cell of a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Ratio {
    /// The row is the group's own system.
    Ours,
    /// How many times better ours does (see `units::advantage`).
    Times(f64),
    /// No ratio means anything: ours did not run the workload, a value is not positive, the
    /// unit's direction is unknown, or the units differ.
    None,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) record: Record,
    pub(crate) ratio: Ratio,
}

/// The rows of every group, in table order, and what was left out of them.
#[derive(Debug)]
pub(crate) struct SummaryTable {
    pub(crate) rows: Vec<Row>,
    /// Per group, how many curve points (see `Group::curve_points`) are in the JSON report and
    /// the charts but not in the table.
    pub(crate) curve_points: Vec<(&'static str, usize)>,
}

impl SummaryTable {
    pub(crate) fn new(results: &[GroupResults]) -> Self {
        let mut rows = Vec::new();
        let mut curve_points = Vec::new();
        for group_results in results {
            let group = group_results.group;
            let records = group_results.records();
            let (points, table): (Vec<Record>, Vec<Record>) = records
                .into_iter()
                .partition(|r| group.is_curve_point(&r.workload));
            if !points.is_empty() {
                curve_points.push((group.name, points.len()));
            }
            for record in &table {
                let ours = table
                    .iter()
                    .find(|r| r.workload == record.workload && r.system == group.ours);
                rows.push(Row {
                    ratio: ratio(record, ours),
                    record: record.clone(),
                });
            }
        }
        SummaryTable { rows, curve_points }
    }

    /// The table as aligned text columns; a group's and a workload's name only on their first
    /// row.
    pub(crate) fn text(&self) -> String {
        let mut lines = vec![HEADER.map(str::to_owned).to_vec()];
        lines.extend(self.cells_without_repeats());
        let mut out = align(&lines);
        out.push_str(&self.curve_point_notes());
        out
    }

    /// The table in Markdown.
    pub(crate) fn markdown(&self) -> String {
        let mut out = format!("| {} |\n", HEADER.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(HEADER.len()));
        for cells in self.cells_without_repeats() {
            let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out.push_str(&self.curve_point_notes());
        out
    }

    fn cells_without_repeats(&self) -> Vec<Vec<String>> {
        let mut previous: Option<&Record> = None;
        let mut lines = Vec::with_capacity(self.rows.len());
        for row in &self.rows {
            let record = &row.record;
            let same_group = previous.is_some_and(|p| p.group == record.group);
            let same_workload =
                same_group && previous.is_some_and(|p| p.workload == record.workload);
            let mut cells = cells(row);
            if same_group {
                cells[0].clear();
            }
            if same_workload {
                cells[1].clear();
            }
            lines.push(cells);
            previous = Some(record);
        }
        lines
    }

    fn curve_point_notes(&self) -> String {
        let mut out = String::new();
        for (group, count) in &self.curve_points {
            let _ = write!(
                out,
                "\n{group}: {count} curve points, in report.json and the charts\n"
            );
        }
        out
    }
}

const HEADER: [&str; 7] = [
    "group",
    "workload",
    "system",
    "median",
    "min–max",
    "unit",
    "ratio",
];

fn cells(row: &Row) -> Vec<String> {
    let record = &row.record;
    let summary = &record.summary;
    let ratio = match row.ratio {
        Ratio::Ours => "ours".to_owned(),
        Ratio::Times(times) => format!("{}x", number(times)),
        Ratio::None => "-".to_owned(),
    };
    vec![
        record.group.to_owned(),
        record.workload.clone(),
        record.system.to_owned(),
        number(summary.median),
        format!("{}–{}", number(summary.min), number(summary.max)),
        record.unit.clone(),
        ratio,
    ]
}

/// The ratio of `record` against `ours`, the group's own system's record of the same workload.
fn ratio(record: &Record, ours: Option<&Record>) -> Ratio {
    let Some(ours) = ours else {
        return Ratio::None;
    };
    if record.system == ours.system {
        return Ratio::Ours;
    }
    if record.unit != ours.unit {
        return Ratio::None;
    }
    Better::of(&record.unit)
        .and_then(|better| advantage(better, ours.summary.median, record.summary.median))
        .map_or(Ratio::None, Ratio::Times)
}

#[cfg(test)]
mod tests {
    use super::super::groups;
    use super::super::protocol::Measurement;
    use super::{GroupResults, Ratio, SummaryTable};

    fn measured(workload: &str, value: f64, unit: &str) -> Measurement {
        Measurement {
            workload: workload.to_owned(),
            value,
            unit: unit.to_owned(),
        }
    }

    /// A taskbench group: a METG (a time), a peak (a rate) and a point of a curve.
    fn taskbench() -> GroupResults {
        let group = groups::find("taskbench").unwrap();
        let mut results = GroupResults::new(group, Vec::new());
        let ours = [
            measured("stencil_1d.metg", 10.0, "us"),
            measured("stencil_1d.peak", 4.0, "GFLOP/s"),
            measured("stencil_1d.eff.64", 0.9, "ratio"),
        ];
        let rayon = [
            measured("stencil_1d.metg", 25.0, "us"),
            measured("stencil_1d.peak", 8.0, "GFLOP/s"),
            measured("stencil_1d.eff.64", 0.3, "ratio"),
        ];
        results.record("depengine-perdevice", Ok(ours.to_vec()));
        results.record("rayon", Ok(rayon.to_vec()));
        results
    }

    #[test]
    fn ratios_follow_each_units_direction() {
        let table = SummaryTable::new(&[taskbench()]);
        let ratios: Vec<_> = table
            .rows
            .iter()
            .map(|row| (row.record.workload.as_str(), row.record.system, row.ratio))
            .collect();
        assert_eq!(
            ratios,
            [
                ("stencil_1d.metg", "depengine-perdevice", Ratio::Ours),
                // rayon's METG is 2.5 times ours: ours is 2.5 times better.
                ("stencil_1d.metg", "rayon", Ratio::Times(2.5)),
                ("stencil_1d.peak", "depengine-perdevice", Ratio::Ours),
                // rayon's peak is twice ours: ours does half as well.
                ("stencil_1d.peak", "rayon", Ratio::Times(0.5)),
            ]
        );
        assert_eq!(table.curve_points, [("taskbench", 2)]);
    }

    #[test]
    fn text_and_markdown_tables_carry_every_row() {
        let table = SummaryTable::new(&[taskbench()]);
        let text = table.text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("group"), "{text}");
        assert!(lines[2].ends_with("2.50x"), "{text}");
        assert!(
            lines[3].starts_with(' '),
            "a repeated group is left blank:\n{text}"
        );
        assert!(text.contains("taskbench: 2 curve points"), "{text}");

        let markdown = table.markdown();
        let rows: Vec<&str> = markdown.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(
            rows[0],
            "| group | workload | system | median | min–max | unit | ratio |"
        );
        assert_eq!(rows[1], "|---|---|---|---|---|---|---|");
        assert_eq!(
            rows[2],
            "| taskbench | stencil_1d.metg | depengine-perdevice | 10.0 | 10.0–10.0 | us | ours |"
        );
        assert_eq!(
            rows[5],
            "|  |  | rayon | 8.00 | 8.00–8.00 | GFLOP/s | 0.50x |"
        );
        assert_eq!(rows.len(), 6);
    }

    #[test]
    fn a_workload_ours_did_not_run_has_no_ratio() {
        let group = groups::find("pool").unwrap();
        let mut results = GroupResults::new(group, Vec::new());
        results.record("rayon", Ok(vec![measured("idle", 1.0, "ms_cpu_per_s")]));
        let table = SummaryTable::new(&[results]);
        assert_eq!(table.rows[0].ratio, Ratio::None);
    }
}
