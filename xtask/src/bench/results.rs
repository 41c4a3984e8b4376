//! What one group's runs measured: the samples per (workload, system), and who failed.

use std::collections::BTreeMap;

use super::Options;
use super::groups::Group;
use super::protocol::Measurement;

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
    pub(crate) runs: usize,
    pub(crate) threads: usize,
    pub(crate) quick: bool,
    /// Keyed by (workload, system).
    pub(crate) series: BTreeMap<(String, &'static str), Series>,
    /// Workloads in the order the harnesses first printed them.
    seen: Vec<String>,
    /// Systems that failed an invocation (and were not run again), with the reason.
    pub(crate) failed: Vec<(&'static str, String)>,
    /// C++ peers that could not be built, with the reason.
    pub(crate) skipped: Vec<(&'static str, String)>,
}

impl GroupResults {
    pub(crate) fn new(
        group: &'static Group,
        options: &Options,
        skipped: Vec<(&'static str, String)>,
    ) -> Self {
        GroupResults {
            group,
            runs: options.runs,
            threads: options.threads,
            quick: options.quick,
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

    /// Adds one invocation's outcome.
    pub(crate) fn record(
        &mut self,
        system: &'static str,
        outcome: Result<Vec<Measurement>, String>,
    ) {
        let measurements = match outcome {
            Ok(measurements) => measurements,
            Err(reason) => {
                eprintln!("{system} failed: {reason}");
                self.failed.push((system, reason));
                return;
            }
        };
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
                eprintln!(
                    "warning: {system} reported {} in {}, earlier in {}; sample ignored",
                    m.workload, m.unit, series.unit
                );
            }
        }
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
}

#[cfg(test)]
mod tests {
    use super::super::{Options, groups};
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
        let options = Options::smoke();
        let pool = groups::find("pool").unwrap();
        let mut results = GroupResults::new(pool, &options, Vec::new());
        let printed = ["custom", "idle", "spawn_external"].map(|w| measurement(w, 1.0));
        results.record("eigen", Ok(printed.to_vec()));
        results.record("rayon", Err("exited with exit status: 1".to_owned()));
        assert_eq!(results.workloads(), ["spawn_external", "idle", "custom"]);
        assert_eq!(results.systems(), ["eigen"]);
        assert!(results.has_failed("rayon"));
    }
}
