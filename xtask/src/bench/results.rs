//! What one group's runs measured: the samples per (workload, system), and who failed.

use std::collections::BTreeMap;

use super::groups::Group;
use super::protocol::Measurement;
use super::stats::Summary;

/// The summary of one (workload, system) pair: a row of the reports.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    pub(crate) group: &'static str,
    pub(crate) workload: String,
    pub(crate) system: &'static str,
    pub(crate) unit: String,
    pub(crate) summary: Summary,
}

/// The samples of one (workload, system) pair.
#[derive(Debug)]
pub(crate) struct Series {
    pub(crate) unit: String,
    pub(crate) values: Vec<f64>,
}

/// Everything measured for one group.
#[derive(Debug)]
pub(crate) struct GroupResults {
    pub(crate) group: &'static Group,
    /// Keyed by (workload, system).
    pub(crate) series: BTreeMap<(String, &'static str), Series>,
    /// Workloads in the order the harnesses first printed them.
    seen: Vec<String>,
    /// Systems that failed an invocation (and were not run again), with the reason.
    pub(crate) failed: Vec<(&'static str, String)>,
    /// Systems not run, with the reason: C++ peers that could not be built, and systems that
    /// run none of the workloads `--workloads` selects.
    pub(crate) skipped: Vec<(&'static str, String)>,
}

impl GroupResults {
    pub(crate) fn new(group: &'static Group, skipped: Vec<(&'static str, String)>) -> Self {
        GroupResults {
            group,
            series: BTreeMap::new(),
            seen: Vec::new(),
            failed: Vec::new(),
            skipped,
        }
    }

    /// Whether `system` failed an invocation.
    pub(crate) fn has_failed(&self, system: &str) -> bool {
        self.failed.iter().any(|(name, _)| *name == system)
    }

    /// Whether `system` is still to be invoked: it neither failed nor was skipped.
    pub(crate) fn still_runs(&self, system: &str) -> bool {
        !self.has_failed(system) && !self.skipped.iter().any(|(name, _)| *name == system)
    }

    /// Adds one invocation's outcome; what the caller should tell the user about it (a failure,
    /// a sample ignored). No measurement at all is a system that runs none of the selected
    /// workloads (`Contender::invoke` passes that on only under `--workloads`): it is skipped,
    /// unless it measured something before, when it failed.
    pub(crate) fn record(
        &mut self,
        system: &'static str,
        outcome: Result<Vec<Measurement>, String>,
    ) -> Vec<String> {
        let measurements = match outcome {
            // Nothing now, after measurements before (another round or size): not a system
            // without the workloads, a system that went wrong.
            Ok(measurements)
                if measurements.is_empty()
                    && self.series.keys().any(|(_, measured)| *measured == system) =>
            {
                let reason = "printed no RESULT line, after printing some before";
                return vec![Self::note(
                    &mut self.failed,
                    "failed",
                    system,
                    reason.to_owned(),
                )];
            }
            Ok(measurements) if measurements.is_empty() => {
                let reason = "runs none of the selected workloads".to_owned();
                return vec![Self::note(&mut self.skipped, "skipped", system, reason)];
            }
            Ok(measurements) => measurements,
            Err(reason) => return vec![Self::note(&mut self.failed, "failed", system, reason)],
        };
        let mut notes = Vec::new();
        for m in measurements {
            if !self.seen.contains(&m.workload) {
                self.seen.push(m.workload.clone());
            }
            let series = self
                .series
                .entry((m.workload.clone(), system))
                .or_insert_with(|| Series {
                    unit: m.unit.clone(),
                    values: Vec::new(),
                });
            if series.unit == m.unit {
                series.values.push(m.value);
            } else {
                notes.push(format!(
                    "warning: {system} reported {} in {}, earlier in {}; sample ignored",
                    m.workload, m.unit, series.unit
                ));
            }
        }
        notes
    }

    /// Adds `system` to `list` (`failed` or `skipped`, named by `what`) with `reason`; the
    /// line that tells the user.
    fn note(
        list: &mut Vec<(&'static str, String)>,
        what: &str,
        system: &'static str,
        reason: String,
    ) -> String {
        let note = format!("{system} {what}: {reason}");
        list.push((system, reason));
        note
    }

    /// Workloads in table order: the group's declared order, then the others as first printed.
    pub(crate) fn workloads(&self) -> Vec<&str> {
        let declared = self.group.workloads.iter().copied();
        let mut order: Vec<&str> = declared
            .filter(|w| self.seen.iter().any(|s| s == w))
            .collect();
        let undeclared = self.seen.iter().map(String::as_str);
        order.extend(undeclared.filter(|w| !self.group.workloads.contains(w)));
        order
    }

    /// Systems with at least one sample, in the group's order.
    pub(crate) fn systems(&self) -> Vec<&'static str> {
        let measured = |name: &str| self.series.keys().any(|(_, s)| *s == name);
        let names = self.group.systems.iter().map(|s| s.name);
        names.filter(|name| measured(name)).collect()
    }

    /// A record per (workload, system) pair with samples, in table order: workloads as
    /// `workloads` orders them, and within one the systems in the group's order.
    pub(crate) fn records(&self) -> Vec<Record> {
        let systems = self.systems();
        let mut records = Vec::new();
        for workload in self.workloads() {
            for &system in &systems {
                let Some(series) = self.series.get(&(workload.to_owned(), system)) else {
                    continue;
                };
                if let Some(summary) = Summary::of(&series.values) {
                    records.push(Record {
                        group: self.group.name,
                        workload: workload.to_owned(),
                        system,
                        unit: series.unit.clone(),
                        summary,
                    });
                }
            }
        }
        records
    }
}

#[cfg(test)]
mod tests {
    use super::super::groups;
    use super::{GroupResults, Measurement};

    fn measurement(workload: &str, value: f64) -> Measurement {
        Measurement {
            workload: workload.to_owned(),
            value,
            unit: "ns/task".to_owned(),
        }
    }

    #[test]
    fn rows_follow_the_declared_order_then_the_printed_one() {
        let pool = groups::find("pool").unwrap();
        let mut results = GroupResults::new(pool, Vec::new());
        let printed = ["custom", "idle", "spawn_external"].map(|w| measurement(w, 1.0));
        assert!(results.record("eigen", Ok(printed.to_vec())).is_empty());
        let notes = results.record("rayon", Err("exited with exit status: 1".to_owned()));
        assert_eq!(notes, ["rayon failed: exited with exit status: 1"]);
        assert_eq!(results.workloads(), ["spawn_external", "idle", "custom"]);
        assert_eq!(results.systems(), ["eigen"]);
        assert!(results.has_failed("rayon"));
    }

    #[test]
    fn a_system_with_nothing_selected_is_skipped_not_failed() {
        let engine = groups::find("engine").unwrap();
        let mut results = GroupResults::new(engine, Vec::new());
        let notes = results.record("rayon", Ok(Vec::new()));
        assert_eq!(
            notes,
            ["rayon skipped: runs none of the selected workloads"]
        );
        assert!(!results.has_failed("rayon"));
        assert!(!results.still_runs("rayon"));
        assert!(results.still_runs("depengine-perdevice"));
        assert!(results.records().is_empty());
    }

    #[test]
    fn a_system_that_stops_printing_fails() {
        let engine = groups::find("engine").unwrap();
        let mut results = GroupResults::new(engine, Vec::new());
        let chain = measurement("chain", 1.0);
        assert!(results.record("naive", Ok(vec![chain])).is_empty());
        let notes = results.record("naive", Ok(Vec::new()));
        assert_eq!(
            notes,
            ["naive failed: printed no RESULT line, after printing some before"]
        );
        assert!(results.has_failed("naive"));
    }

    #[test]
    fn records_follow_the_table_and_ignore_a_changed_unit() {
        let pool = groups::find("pool").unwrap();
        let mut results = GroupResults::new(pool, Vec::new());
        results.record("rayon", Ok(vec![measurement("idle", 2.0)]));
        results.record("rayon", Ok(vec![measurement("idle", 4.0)]));
        let in_other_unit = Measurement {
            unit: "us/round".to_owned(),
            ..measurement("idle", 100.0)
        };
        let notes = results.record("rayon", Ok(vec![in_other_unit]));
        assert_eq!(notes.len(), 1, "{notes:?}");
        results.record("depengine-pool", Ok(vec![measurement("idle", 1.0)]));
        let records = results.records();
        let rows: Vec<_> = records
            .iter()
            .map(|r| (r.group, r.workload.as_str(), r.system, r.summary.runs))
            .collect();
        assert_eq!(
            rows,
            [
                ("pool", "idle", "depengine-pool", 1),
                ("pool", "idle", "rayon", 2)
            ]
        );
    }
}
