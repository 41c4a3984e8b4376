//! How `wait_for_var` blocks on its latch, with the stall warnings of `wait/stall.rs`, and on a
//! worker of a block a stand-in when the block starves (`wait/stand_in.rs`). (`wait_for_all`'s
//! idle wait is `PendingOps::wait_idle`.)

use std::fmt::Write as _;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use depengine_graph::Var;

use crate::failure::OpFailure;
use crate::run::EngineState;
use crate::thread::serving::Served;
use crate::wait::deadlock::WaitLatch;
use crate::wait::stand_in::WAIT_SLICE;
use crate::warn::{Topic, warn};

/// Ops waiting on a var that a warning names, at most.
const NAMED_OPS: usize = 8;

/// `latch.wait()` for `wait_for_var(var)`, warning while it blocks.
pub(crate) fn wait_watched(state: &EngineState, latch: &WaitLatch, var: Var) -> Option<OpFailure> {
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
            warn_stalled_var(state, var, waited);
        }
    }
}

/// The warning for a `wait_for_var(var)` blocked for `waited`.
fn warn_stalled_var(state: &EngineState, var: Var, waited: Duration) {
    let graph = state.graph();
    let mut report = String::new();
    if let Ok(status) = graph.var_status(var) {
        let running = if status.write_running {
            "a write".to_owned()
        } else {
            format!("{} read(s)", status.running_reads)
        };
        let _ = write!(
            report,
            "{running} running, {} op(s) waiting",
            status.waiting
        );
    }
    if let Ok(pending) = graph.pending_ops(var) {
        let names: Vec<String> = pending
            .iter()
            .take(NAMED_OPS)
            .filter_map(|op| graph.inspect_op(op.id, |payload| payload.name().to_owned()))
            .collect();
        let _ = write!(report, " (first: {})", names.join(", "));
    }
    warn(
        Topic::Stall,
        format_args!(
            "wait_for_var({var}) has been blocked for {:.2} s: on the var, {report}",
            waited.as_secs_f64(),
        ),
    );
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
            warn_stalled_var(state, var, waited);
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
