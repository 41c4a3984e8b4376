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
//! # Cost
//!
//! Stopped (the default), an executed op pays one relaxed load of the running flag. Running,
//! it pays two clock reads and a short lock of the record list when it completes: meant for
//! finding where the time goes, not for leaving on. The list grows until `take` empties it.
//!
//! Independently of the profiler, each executed op's function runs inside a `tracing` span
//! (`TRACE` level, target `depengine::op`, field `name`), and each failed op is logged as a
//! `DEBUG` event (target `depengine::failure`), so a `tracing` subscriber sees the engine's
//! work alongside the application's.

use std::cell::OnceCell;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::inner::Inner;
use crate::profile::{OpProfile, Profile, ProfiledOutcome, ProfiledThread};
use crate::record::OpRecord;

/// Which ops a running profiler records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
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

/// Hands out thread indices for profiles (process-wide, so two engines agree).
static NEXT_THREAD: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// This thread's index and name in profiles, assigned on its first profiled op.
    static THREAD: OnceCell<ProfiledThread> = const { OnceCell::new() };
}

fn current_thread() -> ProfiledThread {
    THREAD.with(|cell| {
        cell.get_or_init(|| {
            let index = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            let name = std::thread::current()
                .name()
                .map_or_else(|| Arc::from(format!("thread-{index}")), Arc::from);
            ProfiledThread { index, name }
        })
        .clone()
    })
}

/// The profiler's state, one per engine.
pub(crate) struct ProfilerState {
    /// Read (relaxed) by every executed op; written by `start` / `stop`. A stale value only
    /// moves the first or last recorded op by one, which no caller can tell from a race.
    running: AtomicBool,
    /// `ProfileMode as u8`.
    mode: AtomicU8,
    /// The zero of every timestamp: the engine's creation.
    epoch: Instant,
    /// Completed ops' records, until `take`.
    records: Mutex<Vec<OpProfile>>,
}

/// When and where a profiled op started: taken before its function runs, turned into an
/// [`OpProfile`] when it completes.
pub(crate) struct Started {
    at: Duration,
    thread: ProfiledThread,
}

impl ProfilerState {
    pub(crate) fn new(autostart: bool, mode: ProfileMode) -> Self {
        ProfilerState {
            running: AtomicBool::new(autostart),
            mode: AtomicU8::new(mode as u8),
            epoch: Instant::now(),
            records: Mutex::new(Vec::new()),
        }
    }

    /// Whether `record` is to be profiled: the profiler runs and its mode takes the op.
    #[inline]
    pub(crate) fn wants(&self, record: &OpRecord) -> bool {
        self.running.load(Ordering::Relaxed) && (record.profiled || self.mode() == ProfileMode::All)
    }

    fn mode(&self) -> ProfileMode {
        if self.mode.load(Ordering::Relaxed) == ProfileMode::Marked as u8 {
            ProfileMode::Marked
        } else {
            ProfileMode::All
        }
    }

    /// Now, on this thread: the start of a profiled op.
    pub(crate) fn start(&self) -> Started {
        Started {
            at: self.epoch.elapsed(),
            thread: current_thread(),
        }
    }

    /// Records an op that started at `started` (or now, for a skipped op) and completes now.
    pub(crate) fn record(
        &self,
        record: &OpRecord,
        started: Option<Started>,
        outcome: ProfiledOutcome,
    ) {
        let end = self.epoch.elapsed();
        let Started { at: start, thread } = started.unwrap_or_else(|| self.start());
        let profile = OpProfile {
            name: record.name.clone(),
            context: record.context,
            property: record.property,
            priority: record.priority,
            thread,
            start: start.min(end),
            end,
            outcome,
        };
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(profile);
    }
}

/// The profiler of an [`Engine`](crate::Engine), from [`Engine::profiler`](crate::Engine::profiler).
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let var = engine.new_var()?;
/// engine.profiler().start();
/// for step in 0..3 {
///     engine.op("step").writes(&[var]).push_sync(move |_| {
///         std::thread::sleep(std::time::Duration::from_millis(step));
///         Ok::<_, std::convert::Infallible>(())
///     })?;
/// }
/// engine.wait_for_all()?;
/// let profile = engine.profiler().take();
/// assert_eq!(profile.summary()[0].calls, 3);
/// println!("{profile}"); // per-name table: calls, total, mean, min, max
/// // profile.write_chrome_trace(std::fs::File::create("trace.json")?)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct Profiler<'e> {
    state: &'e ProfilerState,
}

impl<'e> Profiler<'e> {
    pub(crate) fn new(inner: &'e Inner) -> Self {
        Profiler {
            state: &inner.profiler,
        }
    }

    /// Starts recording (ops whose function starts from now on; a running profiler stays on).
    pub fn start(&self) {
        self.state.running.store(true, Ordering::Relaxed);
    }

    /// Stops recording; ops already started are still recorded when they complete. What was
    /// recorded stays until [`take`](Self::take).
    pub fn stop(&self) {
        self.state.running.store(false, Ordering::Relaxed);
    }

    /// Whether it records.
    pub fn is_running(&self) -> bool {
        self.state.running.load(Ordering::Relaxed)
    }

    /// Which ops it records.
    pub fn mode(&self) -> ProfileMode {
        self.state.mode()
    }

    /// Sets which ops it records.
    pub fn set_mode(&self, mode: ProfileMode) {
        self.state.mode.store(mode as u8, Ordering::Relaxed);
    }

    /// The ops recorded since the last `take` (those completed by now), in completion order.
    /// Call [`Engine::wait_for_all`](crate::Engine::wait_for_all) first to include every op
    /// pushed so far.
    pub fn take(&self) -> Profile {
        let ops = std::mem::take(
            &mut *self
                .state
                .records
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        Profile { ops }
    }
}

impl std::fmt::Debug for Profiler<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("running", &self.is_running())
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}
