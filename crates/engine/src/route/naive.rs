//! `Naive`: every op runs on the thread that makes it ready, one at a time.
//!
//! With one pusher of sync ops, every op is ready when pushed (the ones before it completed
//! inline), so it runs before `push` returns, in push order: the debugging engine. An op
//! released by another thread (an async completion, a second pusher) runs on that thread. Ops
//! that become ready while the thread is already running one (a push from inside an op, a
//! successor released by a completion) are queued in the thread's state and run after it, so
//! the stack never grows with the length of a dependency chain. The exception: an op that waits
//! for a var (`wait_for_var`) runs the queued ops while it waits, since the ops it waits for
//! may be queued behind it.

use std::collections::VecDeque;
use std::sync::Arc;

use depengine_graph::ReadyOp;

use crate::op::record::OpRecord;
use crate::thread::{self, RunQueuedOp};

/// Whether this thread is running naive ops (of any engine): ops of a naive engine may be
/// queued on it.
pub(crate) fn is_running() -> bool {
    thread::with(|cx| cx.naive.borrow().is_some())
}

/// The next naive op queued on this thread.
fn next_queued() -> Option<thread::NaiveOp> {
    thread::with(|cx| cx.naive.borrow_mut().as_mut().and_then(VecDeque::pop_front))
}

/// Runs `op` now (with `execute`), or after the op this thread is already running (`engine`
/// runs it then).
pub(crate) fn run<E: RunQueuedOp + 'static>(
    engine: &Arc<E>,
    op: ReadyOp<OpRecord>,
    execute: impl FnOnce(ReadyOp<OpRecord>),
) {
    let first = thread::with(|cx| {
        let mut queue = cx.naive.borrow_mut();
        if let Some(queued) = queue.as_mut() {
            queued.push_back((Arc::clone(engine) as Arc<dyn RunQueuedOp>, op));
            None
        } else {
            *queue = Some(VecDeque::new());
            Some(op)
        }
    });
    let Some(op) = first else { return };
    // The first op runs through the caller's reference: no reference count touched.
    execute(op);
    while let Some((engine, op)) = next_queued() {
        engine.run_queued_op(op);
    }
    thread::with(|cx| *cx.naive.borrow_mut() = None);
}

/// On a thread running naive ops, inside an op that waits: runs the queued ops until `done`
/// says the wait is over, or none is left (the wait then blocks: what it waits for runs on
/// another thread, or never, if it depends on the waiting op).
pub(crate) fn run_queued_until(mut done: impl FnMut() -> bool) {
    while !done() {
        let Some((engine, op)) = next_queued() else {
            return;
        };
        engine.run_queued_op(op);
    }
}
