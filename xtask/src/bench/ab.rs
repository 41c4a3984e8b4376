//! `cargo xtask bench-ab <rev>`: the working tree's `depengine-bench` against the one built at
//! git revision `<rev>`, interleaved, reported as per-round ratios.
//!
//! # Why per-round ratios
//!
//! The machines this project runs on are small shared VMs whose speed drifts between a fast and
//! a slow state that lasts tens of seconds (`docs/decisions.md`, "Per-round ratios"). Medians
//! taken over separate series compare the states more than the binaries. Here each round runs
//! both binaries back to back, in alternating order (base first in even rounds, current first in odd ones), and
//! each round yields one ratio `current / base` per workload: two neighbouring runs mostly see
//! the same state. The median of those ratios, their range and how many rounds favour the
//! current tree are what a decision rests on.
//!
//! Difference metrics (`*_overhead`: measured minus ideal, which may be near or below zero) are
//! left out: their ratios mean nothing.
//!
//! # How the base is built
//!
//! `<rev>` is checked out in a git worktree kept at `<target>/bench/ab/base-src`
//! (`git worktree add --detach` the first time, `git checkout --detach` later, after a `git
//! worktree prune` that forgets a worktree `cargo clean` deleted), and built from there, so
//! with that revision's own `rust-toolchain.toml`, into `<target>/bench/ab/base-target`. Both
//! kept between invocations, a second comparison rebuilds only what the checkout changed. The
//! two binaries are copied beside them, so a later `cargo build` cannot swap one mid-run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::instructions::{self, Setup};
use super::protocol::{Measurement, parse_output};
use super::report::align;
use super::stats::Summary;
use super::{DEFAULT_THREADS, INVOCATION_TIMEOUT, groups, target_dir};
use crate::cmd::{Cmd, Result};

/// Rounds when `--rounds` is not given: enough for a median and a sign count to mean something
/// on a noisy machine.
/// Even, so that each side goes first equally often.
const DEFAULT_ROUNDS: usize = 12;

const USAGE: &str = "usage: cargo xtask bench-ab <git rev> [pool|graph|engine] [--system NAME] \
                     [--workloads a,b] [--rounds N] [--threads N] [--quick] [--instructions]";

/// What to compare.
#[derive(Debug)]
struct Options {
    base: String,
    group: &'static groups::Group,
    system: String,
    workloads: Option<String>,
    rounds: usize,
    threads: usize,
    quick: bool,
    /// Count instructions per op instead of timing rounds.
    instructions: bool,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Self> {
        let (mut base, mut group, mut system, mut workloads) = (None, None, None, None);
        let (mut rounds, mut threads) = (None, DEFAULT_THREADS);
        let (mut quick, mut instructions) = (false, false);
        while let Some(arg) = args.next() {
            let mut value = |flag: &str| {
                args.next()
                    .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
            };
            let count = |flag: &str, text: String| match text.parse() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{flag}: `{text}` is not a positive number")),
            };
            match arg.as_str() {
                "--system" => system = Some(value("--system")?),
                "--workloads" => workloads = Some(value("--workloads")?),
                "--rounds" => rounds = Some(count("--rounds", value("--rounds")?)?),
                "--threads" => threads = count("--threads", value("--threads")?)?,
                "--quick" => quick = true,
                "--instructions" => instructions = true,
                name if !name.starts_with('-') && base.is_none() => base = Some(arg),
                name if !name.starts_with('-') && group.is_none() => {
                    group = Some(
                        groups::find(name)
                            .ok_or_else(|| format!("bench-ab: unknown group `{name}`"))?,
                    );
                }
                other => return Err(format!("bench-ab: unexpected argument `{other}`\n{USAGE}")),
            }
        }
        let base = base.ok_or_else(|| format!("bench-ab: which revision?\n{USAGE}"))?;
        if instructions && (rounds.is_some() || quick) {
            // Counts do not drift: no rounds; and they run at the quick size and twice it.
            return Err("bench-ab: --rounds and --quick do not apply to --instructions".to_owned());
        }
        let rounds = rounds.unwrap_or(DEFAULT_ROUNDS);
        let group = match group {
            Some(group) => group,
            None => groups::find("engine").ok_or("bench-ab: no `engine` group")?,
        };
        let system = system.unwrap_or_else(|| group.ours.to_owned());
        if !group
            .systems
            .iter()
            .any(|s| s.name == system && matches!(s.harness, groups::Harness::Rust))
        {
            return Err(format!(
                "bench-ab: `{system}` is not one of the {} group's own systems",
                group.name
            ));
        }
        Ok(Options {
            base,
            group,
            system,
            workloads,
            rounds,
            threads,
            quick,
            instructions,
        })
    }

    /// The harness arguments of a run under `--instructions`, but the size and the workload.
    fn counted_args(&self) -> Vec<String> {
        vec![
            self.group.name.to_owned(),
            "--system".to_owned(),
            self.system.clone(),
            "--threads".to_owned(),
            self.threads.to_string(),
        ]
    }

    /// The workloads `--instructions` counts, one run each: those given, or the group's
    /// single-thread ones.
    fn counted_workloads(&self) -> Result<Vec<String>> {
        let workloads: Vec<String> = match &self.workloads {
            Some(list) => list.split(',').map(str::to_owned).collect(),
            None => self
                .group
                .one_thread_workloads
                .iter()
                .map(|&w| w.to_owned())
                .collect(),
        };
        if workloads.is_empty() {
            return Err(format!(
                "bench-ab --instructions: the {} group has no single-thread workload; name some \
                 with --workloads",
                self.group.name
            ));
        }
        Ok(workloads)
    }

    /// The harness arguments both binaries get.
    fn harness_args(&self) -> Vec<String> {
        let mut args = vec![
            self.group.name.to_owned(),
            "--system".to_owned(),
            self.system.clone(),
            "--threads".to_owned(),
            self.threads.to_string(),
        ];
        let sizes = if self.quick {
            self.group.quick_sizes
        } else {
            self.group.full_sizes
        };
        args.extend(sizes.iter().map(|&s| s.to_owned()));
        if let Some(workloads) = &self.workloads {
            args.extend(["--workloads".to_owned(), workloads.clone()]);
        }
        args
    }
}

/// `cargo xtask bench-ab [args]`.
pub(crate) fn main(args: impl Iterator<Item = String>) -> Result {
    let args: Vec<String> = args.collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}\n");
        println!("  <git rev>        the base: a commit, branch or tag (HEAD~1, main, ...)");
        println!("  group            default: engine");
        println!("  --system NAME    default: the group's own system (depengine-perdevice, ...)");
        println!("  --workloads a,b  default: every workload of the group");
        println!("  --rounds N       rounds of (base, current) pairs (default {DEFAULT_ROUNDS})");
        println!("  --threads N      worker threads (default {DEFAULT_THREADS})");
        println!("  --quick          the group's quick sizes");
        println!(
            "  --instructions   instructions per op and thread, counted by callgrind, instead \
             of timed rounds (default workloads: the group's single-thread ones)"
        );
        return Ok(());
    }
    let options = Options::parse(args.into_iter())?;
    let dir = std::path::absolute(target_dir().join("bench").join("ab"))
        .map_err(|e| format!("bench-ab: cannot resolve the target directory: {e}"))?;
    let commit = rev_parse(&options.base)?;
    if options.instructions {
        // Checked before the builds, which take minutes.
        let (size_flag, ops) = instructions::size(options.group)?;
        let workloads = options.counted_workloads()?;
        if !instructions::available() {
            return Err(
                "bench-ab --instructions needs valgrind (Debian: `apt-get install \
                        valgrind`)"
                    .to_owned(),
            );
        }
        let (base, current) = build(&commit, &dir)?;
        let setup = Setup {
            base: &base,
            current: &current,
            args: options.counted_args(),
            size_flag,
            ops,
            dir: &dir.join("callgrind"),
        };
        let counted = workloads
            .iter()
            .map(|workload| instructions::count(&setup, workload))
            .collect::<Result<Vec<_>>>()?;
        println!(
            "\n{} / {}: instructions per op and thread (callgrind: {ops} ops more, {} against \
             {}), current tree vs {} ({commit}); ratio = current / base; callgrind files in {}",
            options.group.name,
            options.system,
            2 * ops,
            ops,
            options.base,
            setup.dir.display()
        );
        print!("{}", instructions::table(&counted));
        return Ok(());
    }
    let (base, current) = build(&commit, &dir)?;
    let harness_args = options.harness_args();
    let mut rounds = Vec::with_capacity(options.rounds);
    let mut failure = None;
    for round in 0..options.rounds {
        println!("== bench-ab round {}/{}", round + 1, options.rounds);
        let run = |binary: &Path| invoke(&Cmd::new(binary).args(&harness_args));
        let pair = if round % 2 == 0 {
            run(&base).and_then(|base| Ok((base, run(&current)?)))
        } else {
            run(&current).and_then(|current| Ok((run(&base)?, current)))
        };
        match pair {
            Ok(pair) => rounds.push(pair),
            Err(error) => {
                failure = Some(error);
                break;
            }
        }
    }
    println!(
        "\n{} / {}: current tree vs {} ({commit}), {} round(s); ratio = current / base, below \
         1 means the current tree is faster",
        options.group.name,
        options.system,
        options.base,
        rounds.len()
    );
    print!("{}", table(&compare(&rounds)));
    // The rounds completed are reported even when one failed.
    failure.map_or(Ok(()), Err)
}

/// Builds the current tree's and `commit`'s bench binaries; their copies in `dir`.
fn build(commit: &str, dir: &Path) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let copy = |from: &Path, name: &str| -> Result<PathBuf> {
        let to = dir.join(name);
        std::fs::copy(from, &to)
            .map(|_| to)
            .map_err(|e| format!("cannot copy {} to {name}: {e}", from.display()))
    };

    Cmd::cargo()
        .args(["build", "--release", "-p", "depengine-bench"])
        .run()?;
    let current = copy(
        &target_dir().join("release").join("depengine-bench"),
        "depengine-bench-current",
    )?;

    let source = dir.join("base-src");
    let base_target = dir.join("base-target");
    checkout(commit, &source)?;
    Cmd::cargo()
        .current_dir(&source)
        .args([
            "build",
            "--release",
            "-p",
            "depengine-bench",
            "--target-dir",
        ])
        .arg(&base_target)
        .run()?;
    let base = copy(
        &base_target.join("release").join("depengine-bench"),
        "depengine-bench-base",
    )?;
    Ok((base, current))
}

/// Checks `commit` out in the worktree at `source`, creating the worktree if needed.
fn checkout(commit: &str, source: &Path) -> Result {
    // Forgets worktrees whose directory is gone (`cargo clean`).
    Cmd::new("git").args(["worktree", "prune"]).run()?;
    if source.join(".git").is_file() {
        return Cmd::new("git")
            .arg("-C")
            .arg(source)
            .args(["checkout", "--detach", "--force", commit])
            .run();
    }
    if source.exists() {
        // Left over, and not a worktree git knows any more.
        std::fs::remove_dir_all(source)
            .map_err(|e| format!("cannot remove {}: {e}", source.display()))?;
    }
    Cmd::new("git")
        .args(["worktree", "add", "--detach"])
        .arg(source)
        .arg(commit)
        .run()
}

/// The commit `rev` names.
fn rev_parse(rev: &str) -> Result<String> {
    let captured = Cmd::new("git")
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("{rev}^{{commit}}"))
        .capture(Duration::from_secs(30))?;
    match captured.status {
        Some(status) if status.success() => Ok(captured.stdout.trim().to_owned()),
        _ => Err(format!("bench-ab: `{rev}` names no commit")),
    }
}

/// One run of one binary: its measurements; an error if it failed (both binaries are ours).
fn invoke(command: &Cmd) -> Result<Vec<Measurement>> {
    let captured = command.capture(INVOCATION_TIMEOUT)?;
    let (measurements, malformed) = parse_output(&captured.stdout);
    match captured.status {
        Some(status) if status.success() && malformed.is_empty() && !measurements.is_empty() => {
            Ok(measurements)
        }
        status => Err(format!(
            "`{command}` failed ({}){}{}",
            status.map_or_else(|| "killed".to_owned(), |s| s.to_string()),
            malformed
                .iter()
                .fold(String::new(), |out, m| out + "\n    " + m),
            captured
                .stderr
                .lines()
                .last()
                .map_or_else(String::new, |line| format!("\n    | {line}"))
        )),
    }
}

/// One workload's comparison.
#[derive(Debug, PartialEq)]
struct Row {
    workload: String,
    unit: String,
    base: Summary,
    current: Summary,
    /// `current / base`, one per round in which both printed the workload.
    ratios: Summary,
    /// Rounds whose ratio is below 1.
    current_faster: usize,
}

/// One row per workload that both binaries printed in at least one common round, in the order
/// the base printed them; rounds are `(base, current)` pairs.
fn compare(rounds: &[(Vec<Measurement>, Vec<Measurement>)]) -> Vec<Row> {
    let mut workloads: Vec<(&str, &str)> = Vec::new();
    for (base, _) in rounds {
        for m in base {
            // Differences (measured - ideal) have no meaningful ratio.
            let difference = m.workload.ends_with("_overhead");
            if !difference && !workloads.iter().any(|&(w, _)| w == m.workload) {
                workloads.push((&m.workload, &m.unit));
            }
        }
    }
    let find = |run: &[Measurement], workload: &str, unit: &str| {
        run.iter()
            .find(|m| m.workload == workload && m.unit == unit)
            .map(|m| m.value)
    };
    workloads
        .into_iter()
        .filter_map(|(workload, unit)| {
            let pairs: Vec<(f64, f64)> = rounds
                .iter()
                .filter_map(|(base, current)| {
                    Some((find(base, workload, unit)?, find(current, workload, unit)?))
                })
                .filter(|&(base, _)| base > 0.0)
                .collect();
            let ratios: Vec<f64> = pairs
                .iter()
                .map(|&(base, current)| current / base)
                .collect();
            let (bases, currents): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
            Some(Row {
                workload: workload.to_owned(),
                unit: unit.to_owned(),
                base: Summary::of(&bases)?,
                current: Summary::of(&currents)?,
                ratios: Summary::of(&ratios)?,
                current_faster: ratios.iter().filter(|&&r| r < 1.0).count(),
            })
        })
        .collect()
}

/// The report: medians of each side, and the ratios' median, range and sign count.
fn table(rows: &[Row]) -> String {
    let mut lines = vec![vec![
        "workload".to_owned(),
        "unit".to_owned(),
        "base".to_owned(),
        "current".to_owned(),
        "ratio".to_owned(),
        "range".to_owned(),
        "current faster".to_owned(),
    ]];
    for row in rows {
        lines.push(vec![
            row.workload.clone(),
            row.unit.clone(),
            format!("{:.1}", row.base.median),
            format!("{:.1}", row.current.median),
            format!("{:.3}", row.ratios.median),
            format!("{:.2}-{:.2}", row.ratios.min, row.ratios.max),
            format!("{}/{}", row.current_faster, row.ratios.runs),
        ]);
    }
    align(&lines)
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // ratios of small integers are exact
mod tests {
    use super::{Measurement, Options, compare, table};

    fn parse(args: &[&str]) -> Result<Options, String> {
        Options::parse(args.iter().map(|&a| a.to_owned()))
    }

    fn run(values: &[(&str, f64)]) -> Vec<Measurement> {
        values
            .iter()
            .map(|&(workload, value)| Measurement {
                workload: workload.to_owned(),
                value,
                unit: "ns/op".to_owned(),
            })
            .collect()
    }

    #[test]
    fn options_default_to_the_engine_group_and_its_own_system() {
        let options = parse(&["HEAD~1"]).unwrap();
        assert_eq!(options.base, "HEAD~1");
        assert_eq!(
            (options.group.name, options.system.as_str()),
            ("engine", "depengine-perdevice")
        );
        assert_eq!(
            (options.rounds, options.threads, options.quick),
            (12, 2, false)
        );
        assert!(options.harness_args().contains(&"200000".to_owned()));
    }

    #[test]
    fn options_pass_the_workloads_and_sizes_on() {
        let options = parse(&[
            "main",
            "graph",
            "--workloads",
            "push_complete_1var",
            "--quick",
            "--rounds",
            "3",
        ])
        .unwrap();
        assert_eq!(options.rounds, 3);
        assert_eq!(
            options.harness_args(),
            [
                "graph",
                "--system",
                "depengine-graph",
                "--threads",
                "2",
                "--ops",
                "20000",
                "--workloads",
                "push_complete_1var"
            ]
        );
    }

    #[test]
    fn instructions_count_the_single_thread_workloads_unless_told_otherwise() {
        let options = parse(&["main", "--instructions"]).unwrap();
        assert!(options.instructions);
        let workloads = options.counted_workloads().unwrap();
        assert!(workloads.iter().any(|w| w == "chain_backlog"));
        assert!(!workloads.iter().any(|w| w == "independent"));
        assert_eq!(
            options.counted_args(),
            [
                "engine",
                "--system",
                "depengine-perdevice",
                "--threads",
                "2"
            ]
        );
        let named = parse(&["main", "--instructions", "--workloads", "chain,drain"]).unwrap();
        assert_eq!(named.counted_workloads().unwrap(), ["chain", "drain"]);
        assert!(parse(&["main", "--instructions", "--rounds", "3"]).is_err());
        assert!(parse(&["main", "--instructions", "--quick"]).is_err());
        // The pool group has none of its own, and is not sized by one count.
        let pool = parse(&["main", "pool", "--instructions"]).unwrap();
        assert!(pool.counted_workloads().is_err());
        assert!(super::instructions::size(pool.group).is_err());
        assert_eq!(
            super::instructions::size(options.group).unwrap(),
            ("--ops", 20000)
        );
    }

    #[test]
    fn options_reject_nonsense() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["HEAD", "nope"]).is_err());
        assert!(parse(&["HEAD", "--rounds", "0"]).is_err());
        assert!(parse(&["HEAD", "--system"]).is_err());
        assert!(parse(&["HEAD", "engine", "extra"]).is_err());
        // Only the group's own (Rust) systems: a C++ peer is not built at a revision.
        assert!(parse(&["HEAD", "--system", "libgomp"]).is_err());
        assert!(parse(&["HEAD", "graph", "--system", "naive"]).is_err());
        assert_eq!(
            parse(&["HEAD", "--system", "naive"]).unwrap().system,
            "naive"
        );
    }

    #[test]
    fn ratios_are_taken_per_round() {
        // Round 2 runs in a slow state: both sides are 3x slower there, the ratio is not.
        let rounds = vec![
            (
                run(&[("a", 100.0), ("b", 10.0)]),
                run(&[("a", 80.0), ("b", 10.0)]),
            ),
            (
                run(&[("a", 300.0), ("b", 30.0)]),
                run(&[("a", 240.0), ("b", 60.0)]),
            ),
            (
                run(&[("a", 100.0), ("b", 10.0)]),
                run(&[("a", 90.0), ("b", 5.0)]),
            ),
        ];
        let rows = compare(&rounds);
        assert_eq!(rows.len(), 2);
        let a = &rows[0];
        assert_eq!(a.workload, "a");
        assert_eq!(
            (a.ratios.median, a.ratios.min, a.ratios.max),
            (0.8, 0.8, 0.9)
        );
        assert_eq!((a.base.median, a.current.median), (100.0, 90.0));
        assert_eq!(a.current_faster, 3);
        let b = &rows[1];
        assert_eq!(
            (b.ratios.median, b.ratios.min, b.ratios.max),
            (1.0, 0.5, 2.0)
        );
        assert_eq!((b.current_faster, b.ratios.runs), (1, 3));
    }

    #[test]
    fn differences_get_no_ratio() {
        let rounds = vec![(
            run(&[("random_1us", 600.0), ("random_1us_overhead", 100.0)]),
            run(&[("random_1us", 550.0), ("random_1us_overhead", 50.0)]),
        )];
        let rows = compare(&rounds);
        let names: Vec<&str> = rows.iter().map(|r| r.workload.as_str()).collect();
        assert_eq!(names, ["random_1us"]);
    }

    #[test]
    fn workloads_missing_on_one_side_are_skipped_per_round() {
        let rounds = vec![
            (
                run(&[("a", 100.0), ("old", 1.0)]),
                run(&[("a", 50.0), ("new", 1.0)]),
            ),
            (run(&[("a", 100.0)]), run(&[])),
        ];
        let rows = compare(&rounds);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].ratios.median, rows[0].ratios.runs), (0.5, 1));
        let report = table(&rows);
        assert!(report.starts_with("workload  unit   base   current  ratio"));
        assert!(report.contains("a         ns/op  100.0  50.0     0.500  0.50-0.50  1/1"));
    }
}
