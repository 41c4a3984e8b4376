//! `cargo xtask bench`: every system of every group, side by side, in one run.
//!
//! Builds `depengine-bench` (release), then per group the C++ peers it needs (a peer that cannot
//! be built is skipped with the reason), and runs `--runs` rounds; each round invokes every
//! system of the group once, in an order rotated per round so that machine noise hits all of
//! them alike. A progress bar per group shows where the run is (`progress.rs`). At the end, one
//! summary table of medians, ranges and ratios to our own system (`table.rs`, `units.rs`), and
//! the files of `report.rs`: `<target>/bench/<group>.json`, `report.json`, `report.md` and the
//! SVG charts (`charts.rs`). A group with a timeline (`Group::timeline`: the `cholesky` group)
//! has its system write one in the first round, for the timeline chart. The protocol is in
//! `crates/bench/README.md`.

pub(crate) mod ab;
mod charts;
mod cpp;
mod groups;
mod instructions;
mod machine;
mod openblas;
mod progress;
mod protocol;
mod report;
mod results;
mod stats;
mod table;
mod units;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cmd::{Cmd, Result};
use groups::{GROUPS, Group, Harness, System};
use machine::Machine;
use progress::RunProgress;
use report::RunReport;
use results::GroupResults;
use table::{RATIO_MEANING, SummaryTable};

/// Runs for published figures.
const DEFAULT_RUNS: usize = 5;
/// Runs under `--quick`.
const QUICK_RUNS: usize = 3;
/// Worker threads of the published figures.
const DEFAULT_THREADS: usize = 2;
/// How long one invocation of one system may take before it is killed and counted as failed.
const INVOCATION_TIMEOUT: Duration = Duration::from_mins(10);
/// How many lines of a failed system's stderr to show.
const STDERR_TAIL_LINES: usize = 12;

/// What to run and how many times.
#[derive(Debug)]
pub(crate) struct Options {
    groups: Vec<&'static Group>,
    quick: bool,
    runs: usize,
    threads: usize,
    /// `--ops`: run the group once per size, each workload reported as `<workload>@<size>`.
    ops: Option<Vec<OpCount>>,
    /// `--workloads`: only these, for every system.
    workloads: Option<String>,
}

/// One size of `--ops`, as the user wrote it (the label of its rows) and as a number.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OpCount {
    label: String,
    count: u64,
}

impl OpCount {
    /// `200000`, `1e6` or `2.5e5`: a whole positive number of ops.
    fn parse(text: &str) -> Result<Self> {
        let bad = || format!("--ops: `{text}` is not a positive whole number (200000, 1e6)");
        let (mantissa, exponent) = text.split_once(['e', 'E']).unwrap_or((text, "0"));
        let exponent: u32 = exponent.parse().map_err(|_| bad())?;
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = format!("{whole}{fraction}");
        let shift = exponent
            .checked_sub(u32::try_from(fraction.len()).map_err(|_| bad())?)
            .ok_or_else(bad)?;
        let count = digits
            .parse::<u64>()
            .ok()
            .and_then(|digits| digits.checked_mul(10_u64.checked_pow(shift)?))
            .filter(|&count| count > 0)
            .ok_or_else(bad)?;
        Ok(OpCount {
            label: text.to_owned(),
            count,
        })
    }
}

impl Options {
    /// The smoke test CI runs: every group, quick sizes, one run.
    pub(crate) fn smoke() -> Self {
        Options {
            groups: GROUPS.iter().collect(),
            quick: true,
            runs: 1,
            threads: DEFAULT_THREADS,
            ops: None,
            workloads: None,
        }
    }

    fn parse(mut args: impl Iterator<Item = String>) -> Result<Self> {
        let (mut group, mut only) = (None, None);
        let (mut quick, mut runs, mut threads) = (false, None, DEFAULT_THREADS);
        let (mut ops, mut workloads) = (None, None);
        while let Some(arg) = args.next() {
            let mut count = |flag: &str| -> Result<usize> {
                let text = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
                match text.parse() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(format!("{flag}: `{text}` is not a positive number")),
                }
            };
            match arg.as_str() {
                "--quick" => quick = true,
                "--runs" => runs = Some(count("--runs")?),
                "--threads" => threads = count("--threads")?,
                "--ops" => {
                    let list = args.next().ok_or("--ops needs a value")?;
                    let sizes: Vec<OpCount> =
                        list.split(',').map(OpCount::parse).collect::<Result<_>>()?;
                    ops = Some(sizes);
                }
                "--workloads" => {
                    workloads = Some(args.next().ok_or("--workloads needs a value")?);
                }
                "--only" => only = Some(args.next().ok_or("--only needs a group")?),
                name if !name.starts_with('-') && group.is_none() => group = Some(arg),
                other => return Err(format!("bench: unexpected argument `{other}`\n{USAGE}")),
            }
        }
        let groups = match (group, only) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "bench: name the groups once, with --only or as the argument\n{USAGE}"
                ));
            }
            (Some(list), None) | (None, Some(list)) => select_groups(&list)?,
            (None, None) => GROUPS.iter().collect(),
        };
        if ops.is_some()
            && let Some(group) = groups.iter().find(|g| !g.full_sizes.contains(&"--ops"))
        {
            return Err(format!(
                "bench: --ops sizes the graph and engine groups, not `{}`\n{USAGE}",
                group.name
            ));
        }
        let runs = runs.unwrap_or(if quick { QUICK_RUNS } else { DEFAULT_RUNS });
        Ok(Options {
            groups,
            quick,
            runs,
            threads,
            ops,
            workloads,
        })
    }

    /// The group's size flags, one set per run of the group: with `--ops`, one per size (with
    /// its label), `--ops` replaced.
    fn size_runs(&self, group: &Group) -> Vec<(Option<String>, Vec<String>)> {
        let sizes = if self.quick {
            group.quick_sizes
        } else {
            group.full_sizes
        };
        let flags = || {
            sizes
                .iter()
                .map(|&flag| flag.to_owned())
                .collect::<Vec<_>>()
        };
        let Some(ops) = &self.ops else {
            return vec![(None, flags())];
        };
        ops.iter()
            .map(|size| {
                let mut flags = flags();
                if let Some(at) = flags.iter().position(|flag| flag == "--ops") {
                    flags[at + 1] = size.count.to_string();
                }
                (Some(size.label.clone()), flags)
            })
            .collect()
    }
}

/// The groups `list` names (`engine`, `pool,engine` or `all`), in run order.
fn select_groups(list: &str) -> Result<Vec<&'static Group>> {
    if list == "all" {
        return Ok(GROUPS.iter().collect());
    }
    let mut named = Vec::new();
    for name in list.split(',') {
        let group = groups::find(name).ok_or_else(|| {
            let known: Vec<&str> = GROUPS.iter().map(|g| g.name).collect();
            format!(
                "bench: unknown group `{name}` (groups: {})\n{USAGE}",
                known.join(", ")
            )
        })?;
        named.push(group);
    }
    Ok(GROUPS
        .iter()
        .filter(|group| named.iter().any(|named| named.name == group.name))
        .collect())
}

const USAGE: &str = "usage: cargo xtask bench [GROUP|all] [--only GROUP[,GROUP..]] [--quick] [--runs N] \
                     [--threads N] [--ops N,N,..] [--workloads a,b]";

/// `cargo xtask bench [args]`.
pub(crate) fn main(args: impl Iterator<Item = String>) -> Result {
    let args: Vec<String> = args.collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}\n");
        let names: Vec<&str> = GROUPS.iter().map(|g| g.name).collect();
        println!(
            "  GROUP        one of {}; default: all, in that order",
            names.join(", ")
        );
        println!("  --only LIST  these groups only (pool,engine)");
        println!("  --quick      smaller sizes, {QUICK_RUNS} runs unless --runs");
        println!("  --runs N     rounds of invocations (default {DEFAULT_RUNS})");
        println!("  --threads N  worker threads of every system (default {DEFAULT_THREADS})");
        println!(
            "  --ops LIST   graph/engine: run once per size (200000, 1e6, ...), rows <workload>@<size>"
        );
        println!("  --workloads a,b  only these workloads");
        return Ok(());
    }
    let options = Options::parse(args.into_iter())?;
    if options.runs < DEFAULT_RUNS {
        println!(
            "note: {} run(s); published figures need at least {DEFAULT_RUNS}",
            options.runs
        );
    }
    run(&options)
}

/// Builds everything, runs every selected group, prints the summary and writes the report. An
/// error when one of our own systems failed; failed or missing peers are only reported.
pub(crate) fn run(options: &Options) -> Result {
    Cmd::cargo()
        .args(["build", "--release", "-p", "depengine-bench"])
        .run()?;
    let target = target_dir();
    let rust_binary = target.join("release").join("depengine-bench");
    let bench_dir = target.join("bench");
    remove_timelines(&bench_dir)?;

    let names: Vec<&str> = options.groups.iter().map(|g| g.name).collect();
    let progress = RunProgress::new(&names);
    let mut all_results = Vec::new();
    for (index, &group) in options.groups.iter().enumerate() {
        let (contenders, skipped) =
            progress.suspend(|| prepare(group, options, &rust_binary, &bench_dir));
        let results = run_group(group, options, &contenders, skipped, &progress, index);
        let path = report::write_group_json(&results, &bench_dir)?;
        progress.println(format!("wrote {path}"));
        all_results.push(results);
    }
    if progress.is_drawn() {
        // The cursor is still on the last bar's line.
        println!();
    }
    drop(progress);

    let compilers = compilers_used(&all_results);
    let mut machine = Machine::detect(&compilers);
    machine.openblas = all_results
        .iter()
        .flat_map(|results| results.group.systems)
        .any(|system| system.harness.links_openblas())
        .then(|| openblas::settled(&bench_dir.join("bin")).map(openblas::OpenBlas::describe))
        .flatten();
    let report = RunReport {
        options,
        results: &all_results,
        machine: &machine,
    };
    println!("\nSummary: {}.\n{RATIO_MEANING}.\n", report.settings());
    print!("{}", SummaryTable::new(&all_results).text());
    for note in report.skipped_and_failed() {
        println!("{note}");
    }
    println!();
    for line in report.write(&bench_dir)? {
        println!("{line}");
    }

    let fatal: Vec<String> = all_results
        .iter()
        .flat_map(|results| {
            let group = results.group;
            group
                .systems
                .iter()
                .filter(|system| system.harness.failure_is_fatal())
                .filter(|system| results.has_failed(system.name))
                .map(move |system| format!("{}/{}", group.name, system.name))
        })
        .collect();
    if !fatal.is_empty() {
        return Err(format!("our own systems failed: {}", fatal.join(", ")));
    }
    match &options.workloads {
        Some(list) => unmeasured_workloads(list, &all_results),
        None => Ok(()),
    }
}

/// An error naming the workloads of `--workloads` (`list`) that no system measured: a misspelt
/// name, or one of a group that did not run; every system skipping them is no success.
fn unmeasured_workloads(list: &str, results: &[GroupResults]) -> Result {
    let measured = |name: &str| {
        results.iter().any(|group| {
            group.series.keys().any(|(workload, _)| {
                // Under `--ops`, a row is `<workload>@<size>`.
                workload == name || workload.split_once('@').is_some_and(|(w, _)| w == name)
            })
        })
    };
    let missing: Vec<&str> = list.split(',').filter(|name| !measured(name)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "--workloads: no system measured {} (each group's workloads: \
             xtask/src/bench/groups.rs)",
            missing.join(", ")
        ))
    }
}

/// Runs `group`'s rounds, its bar (`index`) counting invocations.
fn run_group(
    group: &'static Group,
    options: &Options,
    contenders: &[Vec<Contender>],
    skipped: Vec<(&'static str, String)>,
    progress: &RunProgress,
    index: usize,
) -> GroupResults {
    let mut results = GroupResults::new(group, skipped);
    let per_round: usize = contenders.iter().map(Vec::len).sum();
    let bar = progress.start(index, options.runs * per_round);
    for round in 0..options.runs {
        if !progress.is_drawn() {
            println!("== {} round {}/{}", group.name, round + 1, options.runs);
        }
        for sized in contenders {
            for offset in 0..sized.len() {
                let contender = &sized[(round + offset) % sized.len()];
                let system = contender.system.name;
                if results.still_runs(system) {
                    bar.set_message(format!("round {}/{}: {system}", round + 1, options.runs));
                    let command = contender.command_in(round);
                    progress.println(format!("$ {command}"));
                    let (outcome, warnings) = contender.invoke(&command);
                    let outcome = outcome.map(|measurements| contender.label_rows(measurements));
                    for note in warnings.into_iter().chain(results.record(system, outcome)) {
                        progress.println(note);
                    }
                }
                bar.inc(1);
            }
        }
    }
    let (failed, skipped) = (results.failed.len(), results.skipped.len());
    let mut message = format!("{} records", results.records().len());
    if skipped > 0 {
        let _ = write!(message, ", {skipped} system(s) skipped");
    }
    if failed > 0 {
        let _ = write!(message, ", {failed} system(s) failed");
    }
    progress.finish(index, message);
    results
}

/// The C++ compilers of the peers that ran, for the report's machine block (a peer skipped,
/// whether it could not be built or runs none of the selected workloads, is left out).
fn compilers_used(results: &[GroupResults]) -> Vec<&'static str> {
    let mut compilers = Vec::new();
    for group_results in results {
        for system in group_results.group.systems {
            let Harness::Cpp(harness) = system.harness else {
                continue;
            };
            let built = !group_results
                .skipped
                .iter()
                .any(|(name, _)| *name == system.name);
            if built && !compilers.contains(&harness.compiler) {
                compilers.push(harness.compiler);
            }
        }
    }
    compilers
}

/// Creates `bench_dir` and removes the timelines a previous run left there (`Group::timeline`):
/// the timeline chart is drawn only from this run's.
fn remove_timelines(bench_dir: &Path) -> Result {
    std::fs::create_dir_all(bench_dir)
        .map_err(|error| format!("cannot create {}: {error}", bench_dir.display()))?;
    for timeline in GROUPS.iter().filter_map(|group| group.timeline.as_ref()) {
        let path = bench_dir.join(timeline.file);
        if let Err(error) = std::fs::remove_file(&path)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            return Err(format!("cannot remove {}: {error}", path.display()));
        }
    }
    Ok(())
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set, else `target` in the workspace root.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from)
}

/// One runnable system: its command line for this group and size.
struct Contender {
    system: &'static System,
    command: Cmd,
    /// The size's label under `--ops` (appended to each workload's name).
    label: Option<String>,
    /// Where its first invocation writes the group's timeline (`Group::timeline`).
    timeline: Option<PathBuf>,
    /// Whether `--workloads` chose what it runs: then printing no `RESULT` line means it runs
    /// none of them, not that it failed.
    selective: bool,
}

/// The group's runnable systems, one list per size (see `Options::size_runs`), and the C++
/// peers that could not be built, with the reason. The peers' binaries go to `bench_dir/bin`,
/// the group's timeline to `bench_dir`.
fn prepare(
    group: &'static Group,
    options: &Options,
    rust_binary: &Path,
    bench_dir: &Path,
) -> (Vec<Vec<Contender>>, Vec<(&'static str, String)>) {
    let bin_dir = bench_dir.join("bin");
    let threads = options.threads.to_string();
    let mut binaries = Vec::new();
    let mut skipped = Vec::new();
    if let Some(reason) = group
        .probed
        .then(|| cannot_run(group, rust_binary))
        .flatten()
        .or_else(|| unbuilt_example(group))
    {
        println!("skipping the {} group: {reason}", group.name);
        let skipped = group
            .systems
            .iter()
            .map(|system| (system.name, reason.clone()))
            .collect();
        return (Vec::new(), skipped);
    }
    for system in group.systems {
        match system.harness {
            Harness::Rust => binaries.push((system, None)),
            Harness::Cpp(harness) => match harness.build(&bin_dir) {
                Ok(binary) => binaries.push((system, Some(binary))),
                Err(reason) => {
                    println!("skipping {}: {reason}", system.name);
                    skipped.push((system.name, reason));
                }
            },
        }
    }
    let size_runs = options.size_runs(group);
    let contenders = size_runs
        .into_iter()
        .enumerate()
        .map(|(size_run, (label, sizes))| {
            binaries
                .iter()
                .map(|(system, binary)| {
                    let mut command = match binary {
                        None => Cmd::new(rust_binary).args([group.name, "--system", system.name]),
                        Some(binary) => Cmd::new(binary),
                    };
                    if system.harness.links_openblas()
                        && let Some(core) = openblas::settled(&bin_dir).and_then(|o| o.coretype())
                    {
                        command = command.env(openblas::CORETYPE, core);
                    }
                    let mut command = command.args(["--threads", &threads]).args(&sizes);
                    if let Some(workloads) = &options.workloads {
                        command = command.args(["--workloads", workloads]);
                    }
                    // One timeline per run: in the first size run (there are more only under --ops).
                    let timeline = group
                        .timeline
                        .as_ref()
                        .filter(|timeline| size_run == 0 && timeline.system == system.name)
                        .map(|timeline| bench_dir.join(timeline.file));
                    Contender {
                        system,
                        command,
                        label: label.clone(),
                        timeline,
                        selective: options.workloads.is_some(),
                    }
                })
                .collect()
        })
        .collect();
    (contenders, skipped)
}

/// Why a probed group (`Group::probed`) cannot run here, if it cannot: the reason its probe
/// prints after `SKIP`, or why the probe itself failed.
fn cannot_run(group: &Group, rust_binary: &Path) -> Option<String> {
    let probe = Cmd::new(rust_binary).args([group.name, "--probe"]);
    match probe.capture_without_echo(INVOCATION_TIMEOUT) {
        Ok(captured) if captured.status.is_some_and(|status| status.success()) => captured
            .stdout
            .lines()
            .find_map(|line| line.strip_prefix("SKIP "))
            .map(str::to_owned),
        Ok(captured) => Some(format!("its probe failed{}", stderr_tail(&captured.stderr))),
        Err(error) => Some(format!("its probe did not run: {error}")),
    }
}

/// Builds the examples `group` runs (release); the first that does not build is the reason the
/// group cannot run.
fn unbuilt_example(group: &Group) -> Option<String> {
    group.examples.iter().find_map(|&(package, example)| {
        Cmd::cargo()
            .args(["build", "--release", "-p", package, "--example", example])
            .run()
            .err()
            .map(|error| format!("its example {package}/{example} did not build: {error}"))
    })
}

impl Contender {
    /// Its command line in round `round` (from 0): with `--timeline` in the first round when it
    /// records the group's timeline, as it is otherwise. The bench profiles one more
    /// factorization after the timed one of its size (`crates/bench/README.md`), so the round's
    /// figures are those of unprofiled runs.
    fn command_in(&self, round: usize) -> Cmd {
        match &self.timeline {
            Some(path) if round == 0 => self.command.clone().arg("--timeline").arg(path),
            _ => self.command.clone(),
        }
    }

    /// Names each measurement's row after the size it ran at (under `--ops`).
    fn label_rows(
        &self,
        mut measurements: Vec<protocol::Measurement>,
    ) -> Vec<protocol::Measurement> {
        if let Some(label) = &self.label {
            for measurement in &mut measurements {
                measurement.workload = format!("{}@{label}", measurement.workload);
            }
        }
        measurements
    }

    /// Runs `command`, the system's command line in this round (the caller has printed it),
    /// once: its measurements, or why it failed; and a warning per malformed `RESULT` line.
    fn invoke(
        &self,
        command: &Cmd,
    ) -> (
        std::result::Result<Vec<protocol::Measurement>, String>,
        Vec<String>,
    ) {
        let captured = match command.capture_without_echo(INVOCATION_TIMEOUT) {
            Ok(captured) => captured,
            Err(error) => return (Err(error), Vec::new()),
        };
        let (measurements, malformed) = protocol::parse_output(&captured.stdout);
        let warnings = malformed
            .into_iter()
            .map(|message| format!("warning: {}: {message}", self.system.name))
            .collect();
        let problem = match captured.status {
            None => format!("killed after {} s", INVOCATION_TIMEOUT.as_secs()),
            Some(status) if !status.success() => format!("exited with {status}"),
            // Under `--workloads`, a system may implement none of those selected.
            Some(_) if measurements.is_empty() && !self.selective => {
                "printed no RESULT line".to_owned()
            }
            Some(_) => return (Ok(measurements), warnings),
        };
        (
            Err(format!("{problem}{}", stderr_tail(&captured.stderr))),
            warnings,
        )
    }
}

/// The last lines of a failed system's stderr, indented, for the report.
fn stderr_tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    let tail = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
    tail.iter().fold(String::new(), |mut out, line| {
        out.push_str("\n    | ");
        out.push_str(line);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::results::GroupResults;
    use super::{Options, groups, protocol, unmeasured_workloads};

    fn parse(args: &[&str]) -> Result<Options, String> {
        Options::parse(args.iter().map(|&a| a.to_owned()))
    }

    #[test]
    fn options_default_to_all_groups_and_five_runs() {
        let options = parse(&[]).unwrap();
        assert_eq!(options.groups.len(), groups::GROUPS.len());
        assert_eq!(
            (options.runs, options.threads, options.quick),
            (5, 2, false)
        );
    }

    #[test]
    fn quick_runs_fewer_rounds_unless_told() {
        let options = parse(&["pool", "--quick"]).unwrap();
        assert_eq!(options.groups[0].name, "pool");
        assert_eq!(options.runs, 3);
        assert_eq!(parse(&["--quick", "--runs", "7"]).unwrap().runs, 7);
    }

    #[test]
    fn ops_lists_one_run_of_the_group_per_size() {
        let options = parse(&["engine", "--ops", "1e3,20000,2.5e5"]).unwrap();
        let engine = groups::find("engine").unwrap();
        let runs = options.size_runs(engine);
        let labels: Vec<_> = runs.iter().map(|(label, _)| label.clone()).collect();
        assert_eq!(
            labels,
            [
                Some("1e3".into()),
                Some("20000".into()),
                Some("2.5e5".into())
            ]
        );
        assert_eq!(runs[0].1, ["--ops", "1000"]);
        assert_eq!(runs[2].1, ["--ops", "250000"]);
        assert_eq!(parse(&["engine"]).unwrap().size_runs(engine).len(), 1);
        for bad in ["0", "1.5", "-3", "lots", "1e3,"] {
            assert!(parse(&["engine", "--ops", bad]).is_err(), "{bad}");
        }
        assert!(
            parse(&["pool", "--ops", "1e3"]).is_err(),
            "pool has no --ops"
        );
    }

    #[test]
    fn only_and_the_positional_group_select_the_same_groups() {
        let names =
            |options: Options| -> Vec<&str> { options.groups.iter().map(|g| g.name).collect() };
        assert_eq!(names(parse(&["--only", "engine"]).unwrap()), ["engine"]);
        assert_eq!(names(parse(&["engine", "--quick"]).unwrap()), ["engine"]);
        // Run order, whatever the order named.
        assert_eq!(
            names(parse(&["--only", "taskbench,pool"]).unwrap()),
            ["pool", "taskbench"]
        );
        assert_eq!(names(parse(&["all"]).unwrap()).len(), groups::GROUPS.len());
        assert!(parse(&["--only", "nope"]).is_err());
        assert!(parse(&["--only"]).is_err());
        assert!(parse(&["pool", "--only", "engine"]).is_err());
    }

    #[test]
    fn a_selected_workload_nobody_measured_is_an_error() {
        let engine = groups::find("engine").unwrap();
        let mut results = GroupResults::new(engine, Vec::new());
        let row = protocol::Measurement {
            workload: "random_empty@1e3".to_owned(),
            value: 1.0,
            unit: "ns/op".to_owned(),
        };
        results.record("naive", Ok(vec![row]));
        let results = [results];
        assert!(unmeasured_workloads("random_empty", &results).is_ok());
        let error = unmeasured_workloads("random_empty,random_emtpy", &results).unwrap_err();
        assert!(error.contains("random_emtpy"), "{error}");
        assert!(!error.contains("random_empty,"), "{error}");
    }

    #[test]
    fn options_reject_nonsense() {
        assert!(parse(&["nope"]).is_err());
        assert!(parse(&["--runs", "0"]).is_err());
        assert!(parse(&["--threads"]).is_err());
        assert!(parse(&["pool", "graph"]).is_err());
    }
}
