//! [`Profile`]: the ops a [`Profiler`](crate::Profiler) recorded, with a per-name summary and a
//! Chrome trace writer.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::io::{self, Write as _};
use std::sync::Arc;
use std::time::Duration;

use crate::context::{Context, FnProperty};
use crate::name::OpName;

/// How a profiled op ended.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, ProfiledOutcome};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// engine.profiler().start();
/// let (a, b) = (engine.new_var()?, engine.new_var()?);
/// engine.op("fine").writes([a]).push_sync(|_| {})?;
/// engine.op("broken").writes([a]).push_sync(|_| Err("bad input".into()))?;
/// engine.op("dependent").reads([a]).writes([b]).push_sync(|_| {})?;
/// assert!(engine.wait_for_all().is_err()); // reports the failure of `broken`
/// let profile = engine.profiler().take();
/// let outcome = |name: &str| profile.ops().iter().find(|op| op.name() == name).unwrap().outcome();
/// assert_eq!(outcome("fine"), ProfiledOutcome::Completed);
/// assert_eq!(outcome("broken"), ProfiledOutcome::Failed);
/// assert_eq!(outcome("dependent"), ProfiledOutcome::Skipped); // failure rule 2: did not run
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProfiledOutcome {
    /// Its function ran and succeeded.
    Completed,
    /// Its function ran and failed (returned `Err`, panicked, or dropped its completion).
    Failed,
    /// It did not run: one of its vars held a failure (failure rule 2). Start and end are the
    /// moment it was skipped.
    Skipped,
}

impl ProfiledOutcome {
    fn as_str(self) -> &'static str {
        match self {
            ProfiledOutcome::Completed => "completed",
            ProfiledOutcome::Failed => "failed",
            ProfiledOutcome::Skipped => "skipped",
        }
    }
}

/// The thread an op started on: a process-wide index (in order of first profiled op) and the
/// thread's name (`thread-<index>` for an unnamed thread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProfiledThread {
    pub(crate) index: u32,
    pub(crate) name: Arc<str>,
}

/// One profiled op: where and when it ran.
///
/// # Examples
///
/// ```
/// use depengine::{Context, Engine, EngineConfig, FnProperty, ProfiledOutcome};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// engine.profiler().start();
/// let var = engine.new_var()?;
/// engine.op("step").writes([var]).on(Context::cpu(0)).priority(5).push_sync(|_| {})?;
/// engine.wait_for_all()?;
/// let profile = engine.profiler().take();
/// let op = &profile.ops()[0];
/// assert_eq!(op.name(), "step");
/// assert_eq!(op.context(), Context::cpu(0));
/// assert_eq!((op.property(), op.priority()), (FnProperty::Normal, 5));
/// assert_eq!(op.outcome(), ProfiledOutcome::Completed);
/// assert!(op.start() <= op.end());
/// assert_eq!(op.duration(), op.end() - op.start());
/// assert!(!op.thread_name().is_empty());
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[derive(Debug, Clone)]
pub struct OpProfile {
    pub(crate) name: OpName,
    pub(crate) context: Context,
    pub(crate) property: FnProperty,
    pub(crate) priority: i32,
    pub(crate) thread: ProfiledThread,
    pub(crate) start: Duration,
    pub(crate) end: Duration,
    pub(crate) outcome: ProfiledOutcome,
}

impl OpProfile {
    /// The op's name.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The context it was pushed with.
    pub fn context(&self) -> Context {
        self.context
    }

    /// Its property.
    pub fn property(&self) -> FnProperty {
        self.property
    }

    /// Its priority.
    pub fn priority(&self) -> i32 {
        self.priority
    }

    /// The name of the thread its function started on (an async op may complete on another).
    /// Two engines' worker threads may share a name: [`thread_index`](Self::thread_index)
    /// tells threads apart.
    pub fn thread_name(&self) -> &str {
        &self.thread.name
    }

    /// A process-wide index of the thread its function started on, in the order threads first
    /// started a profiled op.
    pub fn thread_index(&self) -> u32 {
        self.thread.index
    }

    /// When its function started, since the engine was created.
    pub fn start(&self) -> Duration {
        self.start
    }

    /// When it completed (an async op: when its [`Completion`](crate::Completion) did), since
    /// the engine was created.
    pub fn end(&self) -> Duration {
        self.end
    }

    /// `end - start`.
    pub fn duration(&self) -> Duration {
        self.end.saturating_sub(self.start)
    }

    /// How it ended.
    pub fn outcome(&self) -> ProfiledOutcome {
        self.outcome
    }
}

/// The time spent in the ops of one name, from [`Profile::summary`]. The durations cover the
/// ops that ran; skipped ops (which did not) are only counted.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// engine.profiler().start();
/// let (a, b) = (engine.new_var()?, engine.new_var()?);
/// for step in 0..3_u32 {
///     engine.op("step").writes([a]).push_sync(move |_| {
///         if step == 2 { Err("diverged".into()) } else { Ok(()) }
///     })?;
/// }
/// engine.op("after").reads([a]).writes([b]).push_sync(|_| {})?;
/// assert!(engine.wait_for_all().is_err());
/// let summary = engine.profiler().take().summary();
/// let step = summary.iter().find(|s| s.name == "step").unwrap();
/// assert_eq!((step.runs, step.failed, step.skipped), (3, 1, 0));
/// assert!(step.min <= step.mean() && step.mean() <= step.max && step.max <= step.total);
/// let after = summary.iter().find(|s| s.name == "after").unwrap();
/// assert_eq!((after.runs, after.skipped, after.total), (0, 1, std::time::Duration::ZERO));
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpSummary {
    /// The ops' name.
    pub name: String,
    /// How many ran (completed or failed).
    pub runs: usize,
    /// How many of those failed.
    pub failed: usize,
    /// How many were skipped (failure rule 2).
    pub skipped: usize,
    /// The sum of the durations of those that ran.
    pub total: Duration,
    /// The shortest run (zero if none ran).
    pub min: Duration,
    /// The longest run.
    pub max: Duration,
}

impl OpSummary {
    /// `total / runs` (zero if none ran).
    pub fn mean(&self) -> Duration {
        let runs = u128::try_from(self.runs).unwrap_or(u128::MAX).max(1);
        let nanos = self.total.as_nanos() / runs;
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    fn new(name: &str) -> Self {
        OpSummary {
            name: name.to_owned(),
            runs: 0,
            failed: 0,
            skipped: 0,
            total: Duration::ZERO,
            min: Duration::MAX,
            max: Duration::ZERO,
        }
    }

    fn add(&mut self, op: &OpProfile) {
        if op.outcome == ProfiledOutcome::Skipped {
            self.skipped += 1;
            return;
        }
        let duration = op.duration();
        self.runs += 1;
        self.failed += usize::from(op.outcome == ProfiledOutcome::Failed);
        self.total += duration;
        self.min = self.min.min(duration);
        self.max = self.max.max(duration);
    }
}

/// The ops a profiler recorded, in completion order (from [`Profiler::take`]).
///
/// `Display` prints [`summary`](Self::summary) as a table;
/// [`write_chrome_trace`](Self::write_chrome_trace) writes every op for `chrome://tracing` or
/// Perfetto.
///
/// [`Profiler::take`]: crate::Profiler::take
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let var = engine.new_var()?;
/// engine.profiler().start();
/// engine.op("load").writes([var]).push_sync(|_| {})?;
/// engine.op("train").writes([var]).push_sync(|_| {})?;
/// engine.wait_for_all()?;
/// let profile = engine.profiler().take();
/// assert_eq!(profile.len(), 2);
/// assert!(engine.profiler().take().is_empty()); // `take` emptied the records
///
/// let table = profile.to_string(); // one row per name
/// assert!(table.starts_with("name") && table.contains("load") && table.contains("train"));
///
/// let mut trace = Vec::new(); // or a `File`, for `chrome://tracing` or Perfetto
/// profile.write_chrome_trace(&mut trace)?;
/// let trace: serde_json::Value = serde_json::from_slice(&trace)?;
/// let events = trace["traceEvents"].as_array().unwrap();
/// assert!(events.iter().any(|e| e["name"] == "train" && e["ph"] == "X"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub(crate) ops: Vec<OpProfile>,
}

impl Profile {
    /// Every recorded op, in the order they completed.
    pub fn ops(&self) -> &[OpProfile] {
        &self.ops
    }

    /// Whether no op was recorded.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// How many ops were recorded.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Per op name: runs, failures, skips, total, min and max time; the most total time first
    /// (ties by name).
    pub fn summary(&self) -> Vec<OpSummary> {
        let mut by_name: HashMap<&str, OpSummary> = HashMap::new();
        for op in &self.ops {
            by_name
                .entry(op.name())
                .or_insert_with(|| OpSummary::new(op.name()))
                .add(op);
        }
        let mut summary: Vec<OpSummary> = by_name
            .into_values()
            .map(|mut s| {
                // No run: no shortest one.
                s.min = s.min.min(s.max);
                s
            })
            .collect();
        summary.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
        summary
    }

    /// Writes every op as a Chrome trace event (JSON, the `traceEvents` format that
    /// `chrome://tracing` and Perfetto load): one process per context (`cpu(0)`, `gpu(1)`, ...),
    /// one row per thread, an op's outcome, property and priority in its `args`.
    ///
    /// # Errors
    ///
    /// The writer's.
    pub fn write_chrome_trace(&self, out: impl io::Write) -> io::Result<()> {
        let mut out = io::BufWriter::new(out);
        // Processes (contexts) and their threads, numbered in order of appearance.
        let mut processes: Vec<Context> = Vec::new();
        let mut threads: Vec<(usize, &ProfiledThread)> = Vec::new();
        let pids: Vec<usize> = self
            .ops
            .iter()
            .map(|op| {
                let pid = processes
                    .iter()
                    .position(|&c| c == op.context)
                    .unwrap_or_else(|| {
                        processes.push(op.context);
                        processes.len() - 1
                    });
                if !threads
                    .iter()
                    .any(|&(p, t)| p == pid && t.index == op.thread.index)
                {
                    threads.push((pid, &op.thread));
                }
                pid
            })
            .collect();
        write!(out, "{{\"traceEvents\":[")?;
        let mut separator = "\n";
        for (pid, context) in processes.iter().enumerate() {
            write!(
                out,
                "{separator}{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"args\":\
                 {{\"name\":{}}}}}",
                json_string(&context.to_string())
            )?;
            separator = ",\n";
        }
        for (pid, thread) in &threads {
            write!(
                out,
                "{separator}{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{},\
                 \"args\":{{\"name\":{}}}}}",
                thread.index,
                json_string(&thread.name)
            )?;
            separator = ",\n";
        }
        for (op, pid) in self.ops.iter().zip(pids) {
            write!(
                out,
                "{separator}{{\"name\":{},\"cat\":\"op\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\
                 \"pid\":{pid},\"tid\":{},\"args\":{{\"outcome\":\"{}\",\"property\":{},\
                 \"priority\":{}}}}}",
                json_string(op.name()),
                micros(op.start),
                micros(op.duration()),
                op.thread.index,
                op.outcome.as_str(),
                json_string(&format!("{:?}", op.property)),
                op.priority,
            )?;
            separator = ",\n";
        }
        writeln!(out, "\n],\"displayTimeUnit\":\"ns\"}}")?;
        out.flush()
    }
}

impl fmt::Display for Profile {
    /// The summary as a table, times in microseconds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let summary = self.summary();
        let width = summary
            .iter()
            .map(|s| s.name.chars().count())
            .chain([4])
            .max()
            .unwrap_or(4);
        writeln!(
            f,
            "{:<width$}  {:>8}  {:>12}  {:>10}  {:>10}  {:>10}  {:>7}  {:>7}",
            "name", "runs", "total (us)", "mean (us)", "min (us)", "max (us)", "failed", "skipped"
        )?;
        for s in &summary {
            writeln!(
                f,
                "{:<width$}  {:>8}  {:>12.1}  {:>10.2}  {:>10.2}  {:>10.2}  {:>7}  {:>7}",
                s.name,
                s.runs,
                micros_f64(s.total),
                micros_f64(s.mean()),
                micros_f64(s.min),
                micros_f64(s.max),
                s.failed,
                s.skipped
            )?;
        }
        Ok(())
    }
}

fn micros_f64(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// Microseconds with nanosecond precision, as the trace format wants them.
fn micros(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    format!("{}.{:03}", nanos / 1000, nanos % 1000)
}

/// A JSON string literal.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An op record built by hand, for the unit tests.
#[cfg(test)]
pub(crate) fn op(
    name: &'static str,
    start_us: u64,
    end_us: u64,
    outcome: ProfiledOutcome,
) -> OpProfile {
    OpProfile {
        name: OpName::from(std::borrow::Cow::Borrowed(name)),
        context: Context::cpu(0),
        property: FnProperty::Normal,
        priority: 0,
        thread: ProfiledThread {
            index: 0,
            name: Arc::from("main"),
        },
        start: Duration::from_micros(start_us),
        end: Duration::from_micros(end_us),
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::{Profile, ProfiledOutcome, json_string, micros, op};
    use std::time::Duration;

    #[test]
    fn summary_groups_by_name_most_time_first() {
        let profile = Profile {
            ops: vec![
                op("a", 0, 10, ProfiledOutcome::Completed),
                op("b", 0, 100, ProfiledOutcome::Completed),
                op("a", 20, 50, ProfiledOutcome::Failed),
                op("c", 60, 60, ProfiledOutcome::Skipped),
            ],
        };
        let summary = profile.summary();
        let names: Vec<&str> = summary.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["b", "a", "c"]);
        let a = &summary[1];
        assert_eq!((a.runs, a.failed, a.skipped), (2, 1, 0));
        assert_eq!(a.total, Duration::from_micros(40));
        assert_eq!(
            (a.min, a.max),
            (Duration::from_micros(10), Duration::from_micros(30))
        );
        assert_eq!(a.mean(), Duration::from_micros(20));
        // A skipped op is counted, not timed.
        let c = &summary[2];
        assert_eq!((c.runs, c.failed, c.skipped), (0, 0, 1));
        assert_eq!(
            (c.min, c.max, c.mean()),
            (Duration::ZERO, Duration::ZERO, Duration::ZERO)
        );
        let table = profile.to_string();
        assert!(table.starts_with("name"), "{table}");
        assert_eq!(table.lines().count(), 4, "{table}");
    }

    #[test]
    fn chrome_trace_names_processes_and_threads() {
        let profile = Profile {
            ops: vec![op("say \"hi\"", 1, 3, ProfiledOutcome::Completed)],
        };
        let mut out = Vec::new();
        profile.write_chrome_trace(&mut out).unwrap();
        let trace = String::from_utf8(out).unwrap();
        assert!(
            trace
                .contains("\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"cpu(0)\"}")
        );
        assert!(trace.contains(
            "\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"main\"}"
        ));
        assert!(trace.contains(
            "\"name\":\"say \\\"hi\\\"\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":1.000,\"dur\":2.000"
        ));
    }

    #[test]
    fn micros_keep_nanoseconds() {
        assert_eq!(micros(Duration::from_nanos(1_234_567)), "1234.567");
        assert_eq!(micros(Duration::from_nanos(5)), "0.005");
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
