//! The harness protocol's output: `RESULT <workload> <value> <unit>` lines on stdout
//! (see `crates/bench/README.md`).

/// One measurement printed by a harness.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Measurement {
    pub(crate) workload: String,
    pub(crate) value: f64,
    pub(crate) unit: String,
}

/// Parses one stdout line: `Ok(None)` for lines that are not `RESULT` lines (free-form logs),
/// an error for a `RESULT` line that breaks the format.
pub(crate) fn parse_line(line: &str) -> Result<Option<Measurement>, String> {
    let mut words = line.split_whitespace();
    if words.next() != Some("RESULT") {
        return Ok(None);
    }
    let malformed = || format!("malformed result line `{}`", line.trim());
    let (Some(workload), Some(value), Some(unit), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(malformed());
    };
    let value: f64 = value.parse().map_err(|_| malformed())?;
    if !value.is_finite() {
        return Err(malformed());
    }
    Ok(Some(Measurement {
        workload: workload.to_owned(),
        value,
        unit: unit.to_owned(),
    }))
}

/// Every measurement in a harness's stdout, and a message per malformed `RESULT` line.
pub(crate) fn parse_output(stdout: &str) -> (Vec<Measurement>, Vec<String>) {
    let mut measurements = Vec::new();
    let mut errors = Vec::new();
    for line in stdout.lines() {
        match parse_line(line) {
            Ok(Some(measurement)) => measurements.push(measurement),
            Ok(None) => {}
            Err(error) => errors.push(error),
        }
    }
    (measurements, errors)
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // the samples come back unchanged: exact comparison is right
mod tests {
    use super::{Measurement, parse_line, parse_output};

    #[test]
    fn parses_a_result_line() {
        assert_eq!(
            parse_line("RESULT spawn_external 43.001 ns/task"),
            Ok(Some(Measurement {
                workload: "spawn_external".to_owned(),
                value: 43.001,
                unit: "ns/task".to_owned(),
            }))
        );
    }

    #[test]
    fn tolerates_extra_whitespace() {
        let parsed = parse_line("  RESULT  idle\t0.5  ms_cpu_per_s \r")
            .unwrap()
            .unwrap();
        assert_eq!((parsed.workload.as_str(), parsed.value), ("idle", 0.5));
        assert_eq!(parsed.unit, "ms_cpu_per_s");
    }

    #[test]
    fn other_lines_are_logs() {
        assert_eq!(parse_line("parallel_for checksum 42"), Ok(None));
        assert_eq!(parse_line(""), Ok(None));
        assert_eq!(parse_line("RESULTS are in"), Ok(None));
    }

    #[test]
    fn rejects_malformed_result_lines() {
        assert!(parse_line("RESULT tree_spawn").is_err());
        assert!(parse_line("RESULT tree_spawn fast ns/task").is_err());
        assert!(parse_line("RESULT tree_spawn 1.0 ns/task extra").is_err());
        assert!(parse_line("RESULT tree_spawn NaN ns/task").is_err());
        assert!(parse_line("RESULT tree_spawn inf ns/task").is_err());
    }

    #[test]
    fn collects_results_among_logs() {
        let stdout = "warming up\nRESULT a 1 ns/op\nRESULT b x ns/op\nRESULT c 2.5 us/round\n";
        let (measurements, errors) = parse_output(stdout);
        let names: Vec<_> = measurements.iter().map(|m| m.workload.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(errors.len(), 1);
    }
}
