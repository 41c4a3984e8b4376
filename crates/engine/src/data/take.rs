//! `Engine::take`: the value moved out of the engine, from inside a write hold of its last
//! handle.

use std::sync::Arc;

use depengine_graph::GraphError;

use crate::api::{Engine, blocking, var_outcome};
use crate::data::TakeError;
use crate::data::handle::LastHandle;
use crate::data::hold::{self, Handed, HoldKind, HoldOneShot};
use crate::error::{EngineError, Result};

/// Takes the value of `last` out of `engine` (which it belongs to; checked by the caller).
pub(crate) fn take<T: Send + 'static>(
    engine: &Engine,
    last: LastHandle<T>,
) -> Result<T, TakeError<T>> {
    let state = engine.state();
    let var = last.var();
    let one_shot = Arc::new(HoldOneShot::new());
    match hold::push_hold(state, var, HoldKind::Take, &one_shot) {
        Ok(()) => {}
        Err(EngineError::ShutDown) => return take_after_shutdown(engine, last),
        Err(error) => return Err(refused(error, last)),
    }
    let handed = blocking::wait_watched(state, &one_shot, var);
    let (granted, failure) = match handed {
        Handed::Granted(completion) => (Some(completion), Ok(())),
        // `Failed` is for the data's failure alone: the wait's own errors leave the value in.
        Handed::Skipped => match engine.wait_for_var(var) {
            Err(EngineError::ShutDown) => return take_after_shutdown(engine, last),
            Err(error) if !matches!(error, EngineError::OpFailed(_)) => {
                return Err(refused(error, last));
            }
            failure => (None, failure),
        },
    };
    let cell = last.into_cell();
    // SAFETY: role 4 of `cell.rs`: the hold, a write, was granted (a skipped one was granted
    // too, before it was skipped), so every op pushed on the var before it completed; `last`
    // was the last handle, so no op that reaches the cell was pushed after it.
    let value = unsafe { cell.into_inner() };
    if let Some(completion) = granted {
        completion.ok();
    }
    // Nothing reaches the var any more: its deletion frees the slot once the hold completed.
    if state.graph().delete_var(var, || {}).is_ok() {
        state.entered_graph();
    }
    outcome(value, failure)
}

/// `take` on a shut-down engine, which takes no hold: it waits for every op pushed before
/// the shutdown instead.
fn take_after_shutdown<T: Send + 'static>(
    engine: &Engine,
    last: LastHandle<T>,
) -> Result<T, TakeError<T>> {
    let state = engine.state();
    let var = last.var();
    blocking::wait_idle(state, "taking data back after the shutdown");
    let graph = state.graph();
    // Read before the deletion, which drops it; a var deleted by hand refuses the take, as a
    // live engine's hold does.
    let named = |error: GraphError| state.named(error.into(), Some(HoldKind::Take.op_name()));
    let failure = match graph.var_failure(var) {
        Ok(failure) => failure,
        Err(error) => return Err(refused(named(error), last)),
    };
    if let Err(error) = graph.delete_var(var, || {}) {
        return Err(refused(named(error), last));
    }
    state.entered_graph();
    let cell = last.into_cell();
    // SAFETY: role 4 of `cell.rs`: every op pushed on the var completed (the engine is idle and
    // takes no new op), and `last` was the last handle.
    let value = unsafe { cell.into_inner() };
    outcome(value, var_outcome(failure))
}

/// The take of `last` refused: the handle comes back.
fn refused<T: Send + 'static>(error: EngineError, last: LastHandle<T>) -> TakeError<T> {
    TakeError::Refused {
        error,
        data: last.into_data(),
    }
}

/// The take's result: the value, with the failure the data held, if any.
fn outcome<T: Send + 'static>(value: T, failure: Result<()>) -> Result<T, TakeError<T>> {
    match failure {
        Ok(()) => Ok(value),
        Err(error) => Err(TakeError::Failed { error, value }),
    }
}
