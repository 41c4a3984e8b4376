//! `cargo xtask bench-ab <rev> --instructions`: the instructions each thread executes per op,
//! counted by callgrind, for the base and the current tree.
//!
//! # Why count instructions
//!
//! On the small shared VMs this project runs on, two runs of one binary a minute apart differ
//! by up to 1.5x, and a change of a few percent hides in that noise however many rounds
//! `bench-ab` takes. The number of instructions a thread executes does not drift with the
//! machine: run under valgrind's callgrind, a workload whose measured phase runs one thread at
//! a time (the others blocked, not spinning) executes nearly the same instructions on every
//! run, mostly to a fifth of an instruction per op (see `REPEATS` for the exceptions). It is
//! not a time: a cache miss, a stall on a store or a contended line
//! costs no instruction, so a change that adds none can still be slower (and the reverse).
//! It says whether a change shortened the path an op takes through the code; the timed rounds
//! say whether that made it faster.
//!
//! # What is counted
//!
//! Each workload runs alone, at the group's quick size `n` and at `2n`, three times per binary
//! (the report gives the median and the range: see `REPEATS`), under
//! `valgrind --tool=callgrind --separate-threads=yes`. The difference between the two sizes,
//! thread by thread, divided by `n`, is what one more op costs each thread: the start-up, the
//! engine's construction and the harness's set-up cancel out. The report gives the main thread
//! (the harness's, which pushes) apart from the others together (workers, whose numbers in
//! callgrind's files, the order they started in, need not match between two trees). Under
//! valgrind the threads take turns on one core, so a workload in which a thread
//! spins while another works counts the spinning too, which depends on the turns: only the
//! group's single-thread workloads (`Group::one_thread_workloads`) repeat, and they are the
//! default.
//!
//! The callgrind files stay in `<target>/bench/ab/callgrind/` for `callgrind_annotate`.

use std::path::{Path, PathBuf};

use super::report::align;
use super::stats::Summary;
use super::{INVOCATION_TIMEOUT, groups};
use crate::cmd::{Cmd, Result};

/// Runs of each binary at each size. Run `i` at `n` ops and run `i` at `2n` give one count per
/// op; the report gives the median of the `REPEATS` counts and their range. Most counts repeat
/// to a fifth of an instruction per op, but a turn of valgrind's scheduler can change the path
/// a thread takes through the pool (a pusher's path may be shorter in some runs, a worker's
/// batches from the injector differ in size): the range shows when a count moved.
const REPEATS: usize = 3;

/// The other threads' row is left out where they run fewer instructions than this per op
/// on both sides (the wake-ups of waiting threads).
const MIN_PER_OP: f64 = 0.5;

/// Whether valgrind is installed.
pub(crate) fn available() -> bool {
    Cmd::new("valgrind").arg("--version").succeeds()
}

/// The size flag of `group`'s quick run and its count, which `--instructions` runs at once and
/// twice: only groups sized by one count.
pub(crate) fn size(group: &groups::Group) -> Result<(&'static str, u64)> {
    match group.quick_sizes {
        &[flag, count] => count.parse().map(|count| (flag, count)).map_err(|_| {
            format!(
                "bench-ab --instructions: the {} group's size `{count}` is no count",
                group.name
            )
        }),
        _ => Err(format!(
            "bench-ab --instructions: the {} group is not sized by one count",
            group.name
        )),
    }
}

/// One binary's run of one workload at one size: instructions per thread, in start order.
fn run(binary: &Path, args: &[String], out: &Path) -> Result<Vec<u64>> {
    let dir = out
        .parent()
        .ok_or_else(|| format!("{} has no directory", out.display()))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    remove_outputs(out)?;
    let captured = Cmd::new("valgrind")
        .args(["--tool=callgrind", "--separate-threads=yes"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(binary)
        .args(args)
        .capture(INVOCATION_TIMEOUT)?;
    if !captured.status.is_some_and(|status| status.success()) {
        return Err(format!(
            "callgrind run of {} failed{}",
            binary.display(),
            captured
                .stderr
                .lines()
                .last()
                .map_or_else(String::new, |line| format!(": {line}"))
        ));
    }
    outputs(out)?
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            totals(&text)
                .ok_or_else(|| format!("{}: no `totals:` or `summary:` line", path.display()))
        })
        .collect()
}

/// The per-thread files callgrind wrote for `out` (`<out>-01`, `<out>-02`, ...), in thread
/// order.
fn outputs(out: &Path) -> Result<Vec<PathBuf>> {
    let mut found = numbered(out)?;
    found.sort();
    if found.iter().enumerate().any(|(i, (n, _))| *n != i + 1) {
        return Err(format!("{}-NN: thread files missing", out.display()));
    }
    Ok(found.into_iter().map(|(_, path)| path).collect())
}

/// Files `<out>-<number>` in `out`'s directory, after their numbers.
fn numbered(out: &Path) -> Result<Vec<(usize, PathBuf)>> {
    let (Some(dir), Some(name)) = (out.parent(), out.file_name()) else {
        return Err(format!("{}: not a file path", out.display()));
    };
    let prefix = format!("{}-", name.to_string_lossy());
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    Ok(entries
        .filter_map(std::result::Result::ok)
        .filter_map(|entry| {
            let file = entry.file_name().to_string_lossy().into_owned();
            let number = file.strip_prefix(&prefix)?.parse().ok()?;
            Some((number, entry.path()))
        })
        .collect())
}

/// Removes what an earlier run left for `out`, so that a thread it had and this run lacks is
/// not read back.
fn remove_outputs(out: &Path) -> Result {
    for (_, path) in numbered(out)? {
        std::fs::remove_file(&path)
            .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
    }
    Ok(())
}

/// The instruction count of one callgrind output file: its `totals:` line (`summary:` in
/// older formats).
fn totals(text: &str) -> Option<u64> {
    let line = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
    };
    line("totals:").or_else(|| line("summary:"))
}

/// What one more op costs each thread: `(large - small) / ops`, thread by thread (a thread
/// missing on one side counts 0 there).
fn per_op(small: &[u64], large: &[u64], ops: u64) -> Vec<f64> {
    (0..small.len().max(large.len()))
        .map(|i| {
            let at = |runs: &[u64]| runs.get(i).copied().unwrap_or(0) as f64;
            (at(large) - at(small)) / ops as f64
        })
        .collect()
}

/// One workload's counts: per run, instructions per op of each thread, on each side.
#[derive(Debug, PartialEq)]
pub(crate) struct Counted {
    pub(crate) workload: String,
    pub(crate) base: Vec<Vec<f64>>,
    pub(crate) current: Vec<Vec<f64>>,
}

/// The two binaries, what they run, and where the counts go.
pub(crate) struct Setup<'a> {
    pub(crate) base: &'a Path,
    pub(crate) current: &'a Path,
    /// The harness arguments but the size and the workload.
    pub(crate) args: Vec<String>,
    pub(crate) size_flag: &'a str,
    pub(crate) ops: u64,
    pub(crate) dir: &'a Path,
}

/// Counts `workload` on both binaries.
pub(crate) fn count(setup: &Setup<'_>, workload: &str) -> Result<Counted> {
    let side = |binary: &Path, name: &str| -> Result<Vec<Vec<f64>>> {
        (1..=REPEATS)
            .map(|repeat| {
                let mut runs = Vec::new();
                for ops in [setup.ops, 2 * setup.ops] {
                    let mut args = setup.args.clone();
                    args.extend([
                        setup.size_flag.to_owned(),
                        ops.to_string(),
                        "--workloads".to_owned(),
                        workload.to_owned(),
                    ]);
                    let out = setup
                        .dir
                        .join(format!("{name}-{workload}-{ops}-{repeat}.out"));
                    runs.push(run(binary, &args, &out)?);
                }
                Ok(per_op(&runs[0], &runs[1], setup.ops))
            })
            .collect()
    };
    Ok(Counted {
        workload: workload.to_owned(),
        base: side(setup.base, "base")?,
        current: side(setup.current, "current")?,
    })
}

/// The report: per workload, the main thread's instructions per op, the other threads'
/// together (their numbers need not match between the two trees: one may start a thread the
/// other does not), and all threads' (the other threads' row left out where neither side
/// runs `MIN_PER_OP` there); each side's median over its runs and their range, and the
/// ratio of the medians.
pub(crate) fn table(counted: &[Counted]) -> String {
    let mut lines = vec![vec![
        "workload".to_owned(),
        "threads".to_owned(),
        "base".to_owned(),
        "range".to_owned(),
        "current".to_owned(),
        "range".to_owned(),
        "ratio".to_owned(),
    ]];
    let mut row = |workload: &str, threads: &str, base: &[f64], current: &[f64]| {
        // Every side has `REPEATS` runs, so neither summary is missing.
        let (Some(base), Some(current)) = (Summary::of(base), Summary::of(current)) else {
            return;
        };
        let ratio = if base.median > 0.0 {
            format!("{:.3}", current.median / base.median)
        } else {
            "-".to_owned()
        };
        lines.push(vec![
            workload.to_owned(),
            threads.to_owned(),
            format!("{:.1}", base.median),
            format!("{:.1}-{:.1}", base.min, base.max),
            format!("{:.1}", current.median),
            format!("{:.1}-{:.1}", current.min, current.max),
            ratio,
        ]);
    };
    let main = |runs: &[Vec<f64>]| -> Vec<f64> {
        runs.iter()
            .map(|run| run.first().copied().unwrap_or(0.0))
            .collect()
    };
    let others = |runs: &[Vec<f64>]| -> Vec<f64> {
        runs.iter().map(|run| run.iter().skip(1).sum()).collect()
    };
    let all = |runs: &[Vec<f64>]| -> Vec<f64> { runs.iter().map(|run| run.iter().sum()).collect() };
    for c in counted {
        row(&c.workload, "main", &main(&c.base), &main(&c.current));
        let (base, current) = (others(&c.base), others(&c.current));
        if base.iter().chain(&current).any(|n| n.abs() >= MIN_PER_OP) {
            row(&c.workload, "others", &base, &current);
        }
        row(&c.workload, "all", &all(&c.base), &all(&c.current));
    }
    align(&lines)
}

#[cfg(test)]
mod tests {
    use super::{Counted, per_op, table, totals};

    #[test]
    fn totals_come_from_the_totals_or_summary_line() {
        let file =
            "version: 1\nevents: Ir\nsummary: 107708403\nfn=(1) main\n0 3\n\ntotals: 107708403\n";
        assert_eq!(totals(file), Some(107_708_403));
        assert_eq!(totals("events: Ir\nsummary: 42\n"), Some(42));
        assert_eq!(totals("events: Ir\n"), None);
    }

    #[test]
    fn an_op_costs_the_difference_between_the_two_sizes() {
        // Thread 1 pushes (300 per op after a set-up of 1000); thread 2 starts only in the
        // larger run (a worker started late): 0 in the small one.
        let small = [1000 + 300 * 10, 50 + 700 * 10];
        let large = [1000 + 300 * 20, 50 + 700 * 20, 15];
        assert_eq!(per_op(&small, &large, 10), [300.0, 700.0, 1.5]);
    }

    #[test]
    fn the_table_splits_the_main_thread_from_the_others_with_the_runs_range() {
        // The other threads' numbers differ between the sides (a thread started by one tree
        // only); their sum is what compares. The second run of `drain`'s base took a
        // shorter path on its main thread.
        let counted = [
            Counted {
                workload: "drain".to_owned(),
                base: vec![
                    vec![800.0, 1000.0],
                    vec![700.0, 1000.0],
                    vec![800.0, 1010.0],
                ],
                current: vec![vec![780.0, 0.25, 0.0, 900.0]; 3],
            },
            Counted {
                workload: "push".to_owned(),
                base: vec![vec![500.0, 0.25]; 3],
                current: vec![vec![400.0]; 3],
            },
        ];
        let report = table(&counted);
        let rows: Vec<Vec<&str>> = report
            .lines()
            .map(|line| line.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            [
                "workload", "threads", "base", "range", "current", "range", "ratio"
            ]
        );
        assert_eq!(
            rows[1],
            [
                "drain",
                "main",
                "800.0",
                "700.0-800.0",
                "780.0",
                "780.0-780.0",
                "0.975"
            ]
        );
        assert_eq!(
            rows[2],
            [
                "drain",
                "others",
                "1000.0",
                "1000.0-1010.0",
                "900.2",
                "900.2-900.2",
                "0.900"
            ]
        );
        assert_eq!(
            rows[3],
            [
                "drain",
                "all",
                "1800.0",
                "1700.0-1810.0",
                "1680.2",
                "1680.2-1680.2",
                "0.933"
            ]
        );
        assert_eq!(
            rows[4],
            [
                "push",
                "main",
                "500.0",
                "500.0-500.0",
                "400.0",
                "400.0-400.0",
                "0.800"
            ]
        );
        assert_eq!(rows[5][..3], ["push", "all", "500.2"]);
        assert_eq!(rows.len(), 6);
    }
}
