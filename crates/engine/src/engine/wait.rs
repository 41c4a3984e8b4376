//! How the handle's waits block: `wait_for_var`'s latch and `wait_for_all`'s idle wait, with the
//! stall warnings of `wait/stall.rs`, and on a worker of a block a stand-in when the block
//! starves (`wait/stand_in.rs`).

use std::fmt::Write as _;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use depengine_graph::Var;

use crate::failure::OpFailure;
use crate::run::Inner;
use crate::thread::serving::Served;
use crate::wait::deadlock::WaitLatch;
use crate::wait::stall::StallClock;
use crate::wait::stand_in::WAIT_SLICE;

/// Ops waiting on a var that a warning names, at most.
const NAMED_OPS: usize = 8;

/// `latch.wait()` for `wait_for_var(var)`, warning while it blocks.
pub(crate) fn wait_watched(inner: &Inner, latch: &WaitLatch, var: Var) -> Option<OpFailure> {
    let mut clock = StallClock::start(inner.stall_warning);
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
            warn_stalled_var(inner, var, waited);
        }
    }
}

/// `idle.wait_idle()` for `what` (`wait_for_all`, the shutdown), warning while it blocks.
pub(crate) fn wait_idle_watched(inner: &Inner, what: &str) {
    let mut clock = StallClock::start(inner.stall_warning);
    while !inner.idle.wait_idle_for(clock.timeout(None)) {
        if let Some(waited) = clock.due() {
            tracing::warn!(
                target: "depengine::stall",
                "{what} has been blocked for {:.2} s: {} op(s) pending",
                waited.as_secs_f64(),
                inner.idle.pending(),
            );
        }
    }
}

/// The warning for a `wait_for_var(var)` blocked for `waited`.
fn warn_stalled_var(inner: &Inner, var: Var, waited: Duration) {
    let mut report = String::new();
    if let Ok(status) = inner.graph.var_status(var) {
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
    if let Ok(pending) = inner.graph.pending_ops(var) {
        let names: Vec<String> = pending
            .iter()
            .take(NAMED_OPS)
            .filter_map(|op| {
                inner
                    .graph
                    .inspect_op(op.id, |record| record.name.to_string())
            })
            .collect();
        let _ = write!(report, " (first: {})", names.join(", "));
    }
    tracing::warn!(
        target: "depengine::stall",
        "wait_for_var({var}) has been blocked for {:.2} s: on the var, {report}",
        waited.as_secs_f64(),
    );
}

/// Waits on `latch` on a worker of `block` (from inside an op's function), starting a
/// stand-in for the block whenever ops are queued on it while the wait lasts (see the
/// module documentation).
pub(crate) fn wait_on_worker(
    inner: &Arc<Inner>,
    latch: &WaitLatch,
    block: Served,
    var: Var,
) -> Option<OpFailure> {
    let mut stand_in: Option<JoinHandle<()>> = None;
    let mut clock = StallClock::start(inner.stall_warning);
    let value = loop {
        let slice = clock.timeout(Some(WAIT_SLICE)).unwrap_or(WAIT_SLICE);
        if let Some(value) = latch.wait_timeout(slice) {
            break value;
        }
        if let Some(waited) = clock.due() {
            warn_stalled_var(inner, var, waited);
        }
        if stand_in
            .as_ref()
            .is_some_and(|thread| !thread.is_finished())
            || !inner.has_queued(block)
            || !inner.stand_ins.reserve()
        {
            continue;
        }
        if let Some(finished) = stand_in.take() {
            inner.stand_ins.keep(finished);
        }
        let engine = Arc::clone(inner);
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
            inner.stand_ins.done();
        }
    };
    if let Some(thread) = stand_in {
        inner.stand_ins.keep(thread);
    }
    value
}

/// A reserved stand-in slot, freed on drop (a stand-in's last act).
struct Slot(Arc<Inner>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.stand_ins.done();
    }
}
