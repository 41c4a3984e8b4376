//! How the engine's blocking waits block: `wait_for_var`, `wait_for_all` and the data holds
//! (guards, `take`), with the stall warnings of `wait/stall.rs`. On a thread that serves one
//! of the engine's blocks (a worker inside an op, or running a value's release after one), a
//! stand-in runs the block's queued ops while the wait lasts (`wait/stand_in.rs`); on a thread
//! running naive ops, the ops queued on it run first.

use std::fmt::Write as _;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use depengine_graph::{Access, Var};
use depengine_sync::Backoff;

use crate::api::dump;
use crate::config::EngineKind;
use crate::error::VarLabel;
use crate::run::EngineState;
use crate::thread::serving::Served;
use crate::thread::task::TaskMarker;
use crate::wait::one_shot::OneShot;
use crate::wait::stand_in::WAIT_SLICE;
use crate::warn::{DUMP_HINT, Topic, warn};

/// Ops waiting on a var that a warning names, at most.
const NAMED_OPS: usize = 8;

/// `one_shot.wait()` for `wait_for_var(var)` (or a data hold on `var`: `data/hold.rs`), warning
/// while it blocks.
pub(crate) fn wait_watched<T>(state: &Arc<EngineState>, one_shot: &OneShot<T>, var: Var) -> T {
    block_until(
        state,
        |timeout| match timeout {
            None => Some(one_shot.wait()),
            Some(timeout) => one_shot.wait_timeout(timeout),
        },
        |waited| warn_stalled_var(state, own_op(one_shot), var, waited),
    )
}

/// `wait_for_all`'s wait: until every op counted so far completed and, unless this thread runs
/// the engine's work (a value's release among it), no value is being released after its op
/// (`wait/releases.rs`); warning while it blocks.
pub(crate) fn wait_idle(state: &Arc<EngineState>, what: &str) {
    let pending = state.pending();
    let releases = waits_for_releases(state.id()).then(|| state.releases());
    block_until(
        state,
        |timeout| {
            let idle = pending.wait_idle_for(timeout)
                && releases.is_none_or(|releases| {
                    // A release may push ops: idle again once none runs.
                    releases.wait_none_for(timeout) && pending.wait_idle_for(Some(Duration::ZERO))
                });
            idle.then_some(())
        },
        |waited| pending.warn_stalled(what, waited),
    );
}

/// Whether a wait for every op of engine `engine` on this thread also waits for the values'
/// releases: not on a thread running the engine's work, a release perhaps (which would wait
/// for itself).
pub(crate) fn waits_for_releases(engine: u64) -> bool {
    !TaskMarker::active(engine)
}

/// The shutdown's wait for every op, whose stall warnings carry `dump_pending`'s picture.
///
/// It gives up (`Err`) once no op has completed, and no device work was handed over or reported
/// done, for `EngineConfig::device_hang_limit` while the device work of a sync GPU op, whose
/// function returned, is still unreported by its executor (a hung kernel): that work may never end,
/// and every op behind it waits for it. A stall with no such work in flight (a guard not dropped, a
/// function blocked on the host) is waited for as long as it takes.
pub(crate) fn wait_for_shutdown(state: &Arc<EngineState>) -> Result<(), DeviceHung> {
    let pending = state.pending();
    let gpus = state.workers().gpus();
    // The completions and the device work handed and reported, counted last, and since when.
    let counted = || (pending.completed(), gpus.handed(), gpus.reported());
    let mut progress = (counted(), Instant::now());
    block_until(
        state,
        |timeout| {
            let Some(limit) = gpus.hang_limit() else {
                return pending.wait_idle_for(timeout).then_some(Ok(()));
            };
            // Wakes to look at the progress a few times per limit.
            let look = (limit / 4).max(Duration::from_millis(1));
            if pending.wait_idle_for(Some(timeout.map_or(look, |timeout| timeout.min(look)))) {
                return Some(Ok(()));
            }
            let now = counted();
            if now != progress.0 {
                progress = (now, Instant::now());
                return None;
            }
            let in_flight = gpus.in_flight();
            let waited = progress.1.elapsed();
            (in_flight > 0 && waited >= limit).then(|| {
                Err(DeviceHung {
                    pending: pending.count(),
                    in_flight,
                    waited,
                })
            })
        },
        |waited| {
            let mut dot = Vec::new();
            let _ = dump::write_pending(state, &mut dot);
            warn(
                Topic::Stall,
                format_args!(
                    "the engine's shutdown has been blocked for {:.2} s: {} op(s) pending (a \
                     guard, a read future or an async op's Completion not dropped?); what holds \
                     what:\n{}",
                    waited.as_secs_f64(),
                    pending.count(),
                    String::from_utf8_lossy(&dot).trim_end(),
                ),
            );
        },
    )
}

/// A shutdown that gave up on device work making no progress (`wait_for_shutdown`).
pub(crate) struct DeviceHung {
    pending: usize,
    in_flight: usize,
    waited: Duration,
}

impl DeviceHung {
    /// Reports it where no caller can take it (the last clone's drop): as a stall warning.
    pub(crate) fn warn(&self) {
        warn(
            Topic::Stall,
            format_args!(
                "the engine's drop gives up: no op, nor device work, moved for {:.2} s while the \
                 work of {} GPU op(s) was not reported done by its device (a hung kernel?); {} \
                 op(s) stay pending, and the engine's threads and their data are left to the \
                 process (EngineConfig::device_hang_limit)",
                self.waited.as_secs_f64(),
                self.in_flight,
                self.pending,
            ),
        );
    }
}

/// The shutdown's wait, once its blocks are stopped, for the other references to the engine's
/// state to go: a stand-in, a task's epilogue, an async completion or a value's release, each
/// past its op. Backs off (spins, yields), then sleeps, warning if it lasts.
pub(crate) fn wait_for_last_reference(state: &Arc<EngineState>) {
    let mut clock = state.pending().stall_clock();
    let backoff = Backoff::new();
    let mut nap = Duration::from_micros(100);
    while Arc::strong_count(state) > 1 {
        if backoff.is_completed() {
            thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(10));
        } else {
            backoff.snooze();
        }
        if let Some(waited) = clock.due() {
            warn(
                Topic::Stall,
                format_args!(
                    "the engine's shutdown has been waiting {:.2} s for {} other reference(s) \
                     to the engine: a value's Drop, a stand-in or a completing thread still \
                     running",
                    waited.as_secs_f64(),
                    Arc::strong_count(state) - 1,
                ),
            );
        }
    }
}

/// Blocks until `ready` gives a value: called with how long it may block (`None`: as long as
/// it takes), it returns `None` when that time ran out. Every stall period `stalled` warns.
///
/// On a thread serving one of the engine's blocks, ops queued there may be the ones the wait
/// needs, and this thread would never run them: it waits in slices of [`WAIT_SLICE`], and
/// starts a stand-in whenever ops are queued on the block and none of its stand-ins runs.
fn block_until<T>(
    state: &Arc<EngineState>,
    mut ready: impl FnMut(Option<Duration>) -> Option<T>,
    mut stalled: impl FnMut(Duration),
) -> T {
    if state.kind() == EngineKind::Naive && crate::route::naive::is_running() {
        // The ops waited for may be queued behind the one running on this thread.
        let mut value = None;
        crate::route::naive::run_queued_until(|| {
            value = value.take().or_else(|| ready(Some(Duration::ZERO)));
            value.is_some()
        });
        if let Some(value) = value {
            return value;
        }
    }
    let served = Served::by_this_thread(state.id());
    let mut clock = state.pending().stall_clock();
    let mut stand_in: Option<JoinHandle<()>> = None;
    let value = loop {
        let timeout = match served {
            Some(_) => Some(clock.timeout(Some(WAIT_SLICE)).unwrap_or(WAIT_SLICE)),
            None => clock.timeout(None),
        };
        if let Some(value) = ready(timeout) {
            break value;
        }
        if let Some(waited) = clock.due() {
            stalled(waited);
        }
        if let Some(block) = served {
            stand_in = stand_in_if_starved(state, block, stand_in);
        }
    };
    if let Some(thread) = stand_in {
        state.stand_ins().keep(thread);
    }
    value
}

/// The one-shot of a waiting op, as `warn_stalled_var` compares it with a wait op's.
fn own_op<T>(one_shot: &OneShot<T>) -> *const () {
    std::ptr::from_ref(one_shot).cast()
}

/// The warning for a `wait_for_var(var)` (or a data hold) whose one-shot is `own`, blocked for
/// `waited`: what holds the var,
/// and the ops queued on it ahead of the wait, by name.
///
/// The graph knows the ops waiting on the var (parked, with their records), not the ones that
/// hold it: a granted op has left the graph for a worker's stack or an async op's
/// `Completion`, and tracking it there would cost every op. So the holder is named only where
/// the engine knows it for free, an op blocked in a `wait_for_var` inside its function (the
/// blocked-waits registry); otherwise the warning says what kind of op holds the var and where
/// its name is (its `tracing` span).
fn warn_stalled_var(state: &EngineState, own: *const (), var: Var, waited: Duration) {
    let graph = state.graph();
    let label = |var| VarLabel(var, &state.var_names().get(var)).to_string();
    let mut report = String::new();
    match graph.var_status(var) {
        Ok(status) => {
            let holder = if status.write_running {
                "a running write".to_owned()
            } else if status.running_reads > 0 {
                format!("{} running read(s)", status.running_reads)
            } else if status.launched > 0 {
                format!(
                    "{} launched device op(s) whose work is not done",
                    status.launched
                )
            } else {
                "no running op (it is being released)".to_owned()
            };
            let _ = write!(report, "it is held by {holder}");
            if let Some(waited_for) = state.blocked_waits().holder_waits_for(var) {
                let _ = write!(
                    report,
                    ", an op blocked in wait_for_var({}) inside its function",
                    label(waited_for)
                );
            } else if status.write_running || status.running_reads > 0 {
                report.push_str(
                    " (an op whose function has not returned, named by its `tracing` span, \
                     TRACE `depengine::op`; or an async op whose Completion was not completed)",
                );
            }
        }
        Err(error) => {
            let _ = write!(report, "{error}");
        }
    }
    if let Ok(pending) = graph.pending_ops(var) {
        // The ops queued ahead of this wait (the graph lists them in push order; one released
        // since is left out).
        let mut ahead: Vec<String> = Vec::new();
        for op in &pending {
            let seen = graph.inspect_op(op.id, |payload| match payload.wait_one_shot() {
                Some(waiting) if Arc::as_ptr(waiting).cast::<()>() == own => None,
                _ => Some(format!("`{}` ({})", payload.name(), access(op.access))),
            });
            match seen {
                Some(Some(named)) => ahead.push(named),
                Some(None) => break,
                None => {}
            }
        }
        if !ahead.is_empty() {
            let _ = write!(report, "; queued ahead of this wait: ");
            let named = ahead.iter().take(NAMED_OPS).cloned().collect::<Vec<_>>();
            report.push_str(&named.join(", "));
            if ahead.len() > NAMED_OPS {
                let _ = write!(report, " and {} more", ahead.len() - NAMED_OPS);
            }
        }
    }
    warn(
        Topic::Stall,
        format_args!(
            "wait_for_var({}) has been blocked for {:.2} s: {report}; {DUMP_HINT}",
            label(var),
            waited.as_secs_f64(),
        ),
    );
}

/// How a waiting op uses the var, in a warning.
fn access(access: Access) -> &'static str {
    match access {
        Access::Read => "read",
        Access::Write => "write",
    }
}

/// Starts a stand-in for `block`, whose worker (this thread) waits, if ops are queued there
/// and `running`, the stand-in this wait started last, has finished; returns the one running.
fn stand_in_if_starved(
    state: &Arc<EngineState>,
    block: Served,
    running: Option<JoinHandle<()>>,
) -> Option<JoinHandle<()>> {
    let stand_ins = state.stand_ins();
    if running.as_ref().is_some_and(|thread| !thread.is_finished())
        || !state.workers().has_queued(block)
        || !stand_ins.reserve()
    {
        return running;
    }
    if let Some(finished) = running {
        stand_ins.keep(finished);
    }
    let engine = Arc::clone(state);
    let started = thread::Builder::new()
        .name("depengine-stand-in".to_owned())
        .spawn(move || {
            // Frees the slot however the stand-in ends, then drops its reference.
            let slot = Slot(Arc::clone(&engine));
            engine.stand_in(block);
            drop(slot);
        })
        .ok();
    if started.is_none() {
        // No thread could start: the wait goes on as before, up to the other workers or a
        // later attempt.
        stand_ins.done();
    }
    started
}

/// A reserved stand-in slot, freed on drop (a stand-in's last act).
struct Slot(Arc<EngineState>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.stand_ins().done();
    }
}
