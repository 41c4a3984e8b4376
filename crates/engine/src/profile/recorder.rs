//! The engine's profiler (MXNet's `Profiler`): which ops ran where and when.
//!
//! While it runs, every op the engine executes (or, in [`ProfileMode::Marked`], every op pushed
//! with [`OpBuilder::profiled`](crate::OpBuilder::profiled) or built from an operator marked
//! [`profiled`](crate::OperatorBuilder::profiled)) leaves an [`OpProfile`]: its name, context,
//! the thread it started on, when its function started and when the op completed (for an
//! async op, when its [`Completion`](crate::Completion) did), and how it ended. Ops skipped
//! because of a failed var are recorded too, with no duration. [`Profiler::take`] hands the
//! records over as a [`Profile`](crate::Profile), which summarises them per name and writes a
//! Chrome trace.
//!
//! With an output path ([`EngineConfig::profiler_output`](crate::EngineConfig::profiler_output)
//! or `DEPENGINE_PROFILER_OUTPUT`), the engine writes the records nobody took as a Chrome
//! trace when its last clone is dropped, after every op completed (as MXNet dumps its profile
//! at exit); so `DEPENGINE_PROFILER_AUTOSTART=1 DEPENGINE_PROFILER_OUTPUT=trace.json` profiles
//! a program that uses [`Engine::from_env`](crate::Engine::from_env) without changing it.
//!
//! The file is created (or opened, left as it is) when the engine starts ([`ProfileOutput`]):
//! a path in a missing directory or without write permission fails `Engine::new`, rather than
//! a long run's profile being lost at its end. The teardown truncates it and writes the trace;
//! an error there is returned by the last clone's `Engine::shutdown`, or, from a drop, which
//! has no caller, reported as a warning (`warn.rs`).
//!
//! # Cost
//!
//! Stopped (the default), an executed op pays one relaxed load of the running flag. Running,
//! it pays two clock reads and a short lock of the record list when it completes: meant for
//! finding where the time goes, not for leaving on. The list grows until `take` empties it.
//!
//! Independently of the profiler, each executed op's function runs inside a `tracing` span
//! (`TRACE` level, target `depengine::op`, field `name`), and each op that fails on its own is
//! a `DEBUG` event (target `depengine::failure`). On the threaded kinds the spans are created on
//! worker threads: a global subscriber sees them, as root spans.

use depengine_sync::{Mutex, lock};
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::context::{Context, FnProperty};
use crate::name::OpName;
use crate::profile::report::{OpProfile, Profile, ProfiledOutcome, ProfiledThread};
use crate::warn::Topic;

/// Which ops a running profiler records.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, ProfileMode};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let profiler = engine.profiler();
/// assert_eq!(profiler.mode(), ProfileMode::All);
/// profiler.set_mode(ProfileMode::Marked);
/// profiler.start();
/// let var = engine.new_var()?;
/// engine.op("plain").writes([var]).push_sync(|_| {})?;
/// engine.op("marked").writes([var]).profiled().push_sync(|_| {})?;
/// engine.wait_for_all()?;
/// let profile = profiler.take();
/// let names: Vec<&str> = profile.ops().iter().map(|op| op.name()).collect();
/// assert_eq!(names, ["marked"]);
/// assert_eq!(ProfileMode::Marked.as_str(), "marked"); // as `DEPENGINE_PROFILER_MODE` spells it
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ProfileMode {
    /// Every executed op (MXNet's `kAllOperator`).
    #[default]
    All,
    /// Only ops marked for profiling when pushed (MXNet's `Push(.., profiling = true)`).
    Marked,
}

impl ProfileMode {
    /// The name as `DEPENGINE_PROFILER_MODE` spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProfileMode::All => "all",
            ProfileMode::Marked => "marked",
        }
    }
}

/// The profiler's state, one per engine.
///
/// Threads: every thread that executes an op reads `running` (and, for a profiled op, reads
/// the clock and appends to `records` when the op completes, under their lock); the callers of
/// the `Profiler` handle start, stop, set the mode and take the records; the last handle's
/// teardown writes what is left.
pub(crate) struct ProfilerState {
    /// Read (relaxed) by every executed op; written by `start` / `stop`. An op that starts
    /// while another thread starts or stops the profiler may be recorded or not (at most one
    /// such op per worker), as with any race between the two calls.
    running: AtomicBool,
    /// `ProfileMode as u8`.
    mode: AtomicU8,
    /// The zero of every timestamp: the engine's creation.
    epoch: Instant,
    /// Completed ops' records, until `take`.
    records: Mutex<Vec<OpProfile>>,
    /// Where the engine's teardown writes what is left as a Chrome trace.
    output: Option<ProfileOutput>,
}

/// The file the teardown writes the records nobody took to, opened when the engine starts.
///
/// Threads: the engine's constructor opens it; the one teardown takes the file and writes.
pub(crate) struct ProfileOutput {
    /// What set the path (`DEPENGINE_PROFILER_OUTPUT` or the field), for errors.
    setting: &'static str,
    path: PathBuf,
    /// `None` once written.
    file: Mutex<Option<File>>,
}

/// The profiler's output file could not be opened or written.
#[derive(Debug)]
pub(crate) struct OutputFailure {
    pub(crate) setting: &'static str,
    pub(crate) path: PathBuf,
    pub(crate) error: io::Error,
}

impl OutputFailure {
    /// Reports the failure where no caller can take it (a drop): as a warning.
    pub(crate) fn warn(&self) {
        crate::warn::warn(
            Topic::Profiler,
            format_args!(
                "cannot write the profile to \"{}\" ({}): {}",
                self.path.display(),
                self.setting,
                self.error
            ),
        );
    }
}

impl ProfileOutput {
    /// Creates (or opens, leaving its contents until the write) the file at `path`, set by
    /// `setting`.
    pub(crate) fn open(path: PathBuf, setting: &'static str) -> Result<Self, OutputFailure> {
        // Not `File::create`: an engine that fails later, or never writes, leaves an existing
        // file as it was.
        let opened = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path);
        match opened {
            Ok(file) => Ok(ProfileOutput {
                setting,
                path,
                file: Mutex::new(Some(file)),
            }),
            Err(error) => Err(OutputFailure {
                setting,
                path,
                error,
            }),
        }
    }

    /// Replaces the file's contents with `profile`, as a Chrome trace (once: later calls do
    /// nothing).
    fn write(&self, profile: &Profile) -> Result<(), OutputFailure> {
        let Some(mut file) = lock(&self.file).take() else {
            return Ok(());
        };
        let written = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| profile.write_chrome_trace(&mut file));
        written.map_err(|error| OutputFailure {
            setting: self.setting,
            path: self.path.clone(),
            error,
        })
    }
}

impl Drop for ProfilerState {
    /// Writes the profile if the teardown did not (the naive engine dropped inside one of its
    /// own ops has no teardown): with no caller to report to, a failure is a warning.
    fn drop(&mut self) {
        if let Err(failure) = self.write_output() {
            failure.warn();
        }
    }
}

/// What the profiler records of an op besides its times.
pub(crate) struct ProfiledOp<'a> {
    pub(crate) name: &'a OpName,
    pub(crate) context: Context,
    pub(crate) property: FnProperty,
    pub(crate) priority: i32,
}

/// When and where a profiled op started: taken before its function runs, turned into an
/// [`OpProfile`] when it completes.
pub(crate) struct Started {
    at: Duration,
    thread: ProfiledThread,
}

impl ProfilerState {
    pub(crate) fn new(autostart: bool, mode: ProfileMode, output: Option<ProfileOutput>) -> Self {
        ProfilerState {
            running: AtomicBool::new(autostart),
            mode: AtomicU8::new(mode as u8),
            epoch: Instant::now(),
            records: Mutex::new(Vec::new()),
            output,
        }
    }

    /// Starts (`true`) or stops recording: ops whose function starts from now on are recorded
    /// or not; ops already started are recorded when they complete.
    pub(crate) fn set_running(&self, running: bool) {
        self.running.store(running, Ordering::Relaxed);
    }

    /// Whether it records.
    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }

    /// Sets which ops it records.
    pub(crate) fn set_mode(&self, mode: ProfileMode) {
        self.mode.store(mode as u8, Ordering::Relaxed);
    }

    /// The ops recorded since the last `take`, in completion order.
    pub(crate) fn take(&self) -> Profile {
        let ops = std::mem::take(&mut *lock(&self.records));
        Profile { ops }
    }

    /// At the engine's teardown (every op completed): writes the ops not taken yet to the
    /// configured output, if any (once).
    pub(crate) fn write_output(&self) -> Result<(), OutputFailure> {
        let Some(output) = &self.output else {
            return Ok(());
        };
        output.write(&self.take())
    }

    /// Whether an op is to be profiled (`marked`: it was marked for the profiler): the profiler
    /// runs and its mode takes the op.
    #[inline]
    pub(crate) fn wants(&self, marked: bool) -> bool {
        self.running.load(Ordering::Relaxed) && (marked || self.mode() == ProfileMode::All)
    }

    /// Which ops it records.
    pub(crate) fn mode(&self) -> ProfileMode {
        if self.mode.load(Ordering::Relaxed) == ProfileMode::Marked as u8 {
            ProfileMode::Marked
        } else {
            ProfileMode::All
        }
    }

    /// Now, on `thread` (the current one): the start of a profiled op.
    pub(crate) fn start(&self, thread: ProfiledThread) -> Started {
        Started {
            at: self.epoch.elapsed(),
            thread,
        }
    }

    /// Records an op skipped now on `thread` (it did not run: no duration).
    pub(crate) fn record_skipped(&self, op: &ProfiledOp<'_>, thread: ProfiledThread) {
        let now = self.epoch.elapsed();
        self.record_at(op, thread, now, now, ProfiledOutcome::Skipped);
    }

    /// Records an op that started at `started` and completes now.
    pub(crate) fn record(&self, op: &ProfiledOp<'_>, started: Started, outcome: ProfiledOutcome) {
        let end = self.epoch.elapsed();
        let Started { at: start, thread } = started;
        self.record_at(op, thread, start, end, outcome);
    }

    fn record_at(
        &self,
        op: &ProfiledOp<'_>,
        thread: ProfiledThread,
        start: Duration,
        end: Duration,
        outcome: ProfiledOutcome,
    ) {
        let profile = OpProfile {
            name: op.name.clone(),
            context: op.context,
            property: op.property,
            priority: op.priority,
            thread,
            start: start.min(end),
            end,
            outcome,
        };
        lock(&self.records).push(profile);
    }
}
