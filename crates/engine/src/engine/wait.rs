//! How `wait_for_var` blocks on its latch, with the stall warnings of `wait/stall.rs`, and on a
//! worker of a block a stand-in when the block starves (`wait/stand_in.rs`). (`wait_for_all`'s
//! idle wait is `PendingOps::wait_idle`.)

use std::fmt::Write as _;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use depengine_graph::{Access, Var};

use crate::error::VarLabel;
use crate::failure::OpFailure;
use crate::run::EngineState;
use crate::thread::serving::Served;
use crate::wait::deadlock::WaitLatch;
use crate::wait::latch::Latch;
use crate::wait::stand_in::WAIT_SLICE;
use crate::warn::{DUMP_HINT, Topic, warn};

/// Ops waiting on a var that a warning names, at most.
const NAMED_OPS: usize = 8;

/// `latch.wait()` for `wait_for_var(var)` (or a data hold on `var`: `data/hold.rs`), warning
/// while it blocks.
pub(crate) fn wait_watched<T>(state: &EngineState, latch: &Latch<T>, var: Var) -> T {
    let mut clock = state.pending().stall_clock();
    loop {
        match clock.timeout(None) {
            None => return latch.wait(),
            Some(timeout) => {
                if let Some(value) = latch.wait_timeout(timeout) {
                    return value;
                }
            }
        }
        if let Some(waited) = clock.due() {
            warn_stalled_var(state, own_op(latch), var, waited);
        }
    }
}

/// The latch of a waiting op, as `warn_stalled_var` compares it with a wait op's.
fn own_op<T>(latch: &Latch<T>) -> *const () {
    std::ptr::from_ref(latch).cast()
}

/// The warning for a `wait_for_var(var)` (or a data hold) whose latch is `own`, blocked for
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
            let seen = graph.inspect_op(op.id, |payload| match payload.wait_latch() {
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

/// Waits on `latch` on a worker of `block` (from inside an op's function), starting a
/// stand-in for the block whenever ops are queued on it while the wait lasts (see the
/// module documentation).
pub(crate) fn wait_on_worker(
    state: &Arc<EngineState>,
    latch: &WaitLatch,
    block: Served,
    var: Var,
) -> Option<OpFailure> {
    let stand_ins = state.stand_ins();
    let mut stand_in: Option<JoinHandle<()>> = None;
    let mut clock = state.pending().stall_clock();
    let value = loop {
        let slice = clock.timeout(Some(WAIT_SLICE)).unwrap_or(WAIT_SLICE);
        if let Some(value) = latch.wait_timeout(slice) {
            break value;
        }
        if let Some(waited) = clock.due() {
            warn_stalled_var(state, own_op(latch), var, waited);
        }
        if stand_in
            .as_ref()
            .is_some_and(|thread| !thread.is_finished())
            || !state.workers().has_queued(block)
            || !stand_ins.reserve()
        {
            continue;
        }
        if let Some(finished) = stand_in.take() {
            stand_ins.keep(finished);
        }
        let engine = Arc::clone(state);
        stand_in = thread::Builder::new()
            .name("depengine-stand-in".to_owned())
            .spawn(move || {
                // Frees the slot however the stand-in ends, then drops its reference.
                let slot = Slot(Arc::clone(&engine));
                engine.stand_in(block);
                drop(slot);
            })
            .ok();
        if stand_in.is_none() {
            // No thread could start: the wait goes on as before, up to the other workers
            // or a later attempt.
            stand_ins.done();
        }
    };
    if let Some(thread) = stand_in {
        stand_ins.keep(thread);
    }
    value
}

/// A reserved stand-in slot, freed on drop (a stand-in's last act).
struct Slot(Arc<EngineState>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.stand_ins().done();
    }
}
