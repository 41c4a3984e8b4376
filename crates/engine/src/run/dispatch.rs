//! Dispatch: the graph hands each ready op to a [`Dispatcher`], which completes a wait op at
//! once and sends an op to run along its route (inline, a CPU block's pool, the priority block,
//! a device executor); and the callbacks of the vars a completion reclaimed, which it calls
//! once its caller is done with the op.
//!
//! A released wait wakes its waiter once the completion has released the op's other vars too
//! (`Dispatcher::wake`, `wake_now`), or before the completion dispatches anything else: a
//! waiter that pushes its next op on those vars as it wakes (a loop of an op and a wait) finds
//! them free, and an `Async` op then runs on its thread (`FnProperty::runs_on_pusher`).

use std::mem::ManuallyDrop;
use std::sync::Arc;

use depengine_graph::{Dispatch, OnDeleted, ReadyOp};

use crate::failure::{FailureCause, OpFailure};
use crate::op::record::{BlockKey, OpRecord, Payload, Route};
use crate::route::block::BlockOp;
use crate::route::naive;
use crate::run::EngineState;
use crate::thread;
use crate::thread::serving::{Served, Serving};
use crate::thread::task::TaskMarker;
use crate::wait::deadlock::WaitOneShot;

/// The graph's dispatcher: routes each ready op.
pub(super) struct Dispatcher<'a> {
    state: &'a Arc<EngineState>,
    /// Called from `push` on the pushing thread (ready `Async` ops may run right here).
    from_push: bool,
    /// Set when completing a sync op on a worker of this block, after its function returned
    /// (so no lock of the op's is held): the first released op routed to the same block is
    /// kept for this worker, which runs it next (`CpuBlock::submit_next`: the pool's slot for
    /// the worker's next task); when the completion releases more ops onto the block than the
    /// worker's queue holds, the rest run here at once (`CpuBlock::submit_or_run_with`) instead of
    /// piling up in the injector.
    keep_for: Option<BlockKey>,
    /// Whether an op was kept for this worker.
    kept: bool,
    /// Who calls the callbacks of the vars this completion, and the ops run nested in it,
    /// reclaimed (a typed value's release, a `delete_var` callback), which wait in the
    /// thread's list (`ThreadState::reclaims`; not here: a dispatcher with a `Vec` to drop
    /// would cost every op an out-of-line drop).
    reclaims: Reclaims,
    /// A released wait's waiter, woken once the completion is done with the graph
    /// (`wake_now`), or before this dispatcher releases another wait, dispatches an op or drops.
    /// `ManuallyDrop`: `Drop` delivers it; the field's drop glue would make every dispatcher's
    /// drop an out-of-line call.
    wake: ManuallyDrop<Option<Wake>>,
}

/// A waiter to wake: its one-shot and the failure it takes.
struct Wake(Arc<WaitOneShot>, Option<OpFailure>);

impl Wake {
    fn wake(self) {
        self.0.set(self.1);
    }
}

/// Who calls the callbacks a completion reclaimed, or those of ops it runs inline (a burst,
/// naive ops), which complete inside it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reclaims {
    /// None so far.
    None,
    /// This completion, when it drops: it opened the thread's list.
    Calls,
    /// An outer completion on this thread, which had opened the list.
    Outer,
}

impl<'a> Dispatcher<'a> {
    #[inline]
    pub(super) fn new(
        state: &'a Arc<EngineState>,
        from_push: bool,
        keep_for: Option<BlockKey>,
    ) -> Self {
        Dispatcher {
            state,
            from_push,
            keep_for,
            kept: false,
            reclaims: Reclaims::None,
            wake: ManuallyDrop::new(None),
        }
    }
}

/// Subtle: a reclaimed var's callback runs user code (a value's `Drop`), which may call the
/// engine: wait for every op, push, take data, drop the engine's last handle. So it runs
///
/// - when the dispatcher drops, which its owners arrange to be after the op is counted done
///   (the dispatcher lives to the end of `finish`), with no lock of the engine held;
/// - after every op this thread is completing: a completion that runs released ops inline
///   (naive ops, `submit_or_run_with`) collects their callbacks, and calls them with its own;
/// - with the op kept for this worker handed back to its block, where a stand-in reaches it
///   if the callback waits (`api/blocking.rs`);
/// - marked as a task of the engine: a last handle dropped here shuts the engine down on a
///   thread of its own (`Handle::close`) rather than wait for this thread's reference.
impl Drop for Dispatcher<'_> {
    #[inline]
    fn drop(&mut self) {
        self.wake_now();
        if self.reclaims == Reclaims::Calls {
            self.call_reclaimed();
        }
    }
}

impl Dispatcher<'_> {
    /// Wakes the waiter of a wait this completion released, if any: the completion released
    /// every var of its op.
    #[inline]
    pub(super) fn wake_now(&mut self) {
        if self.wake.is_some() {
            self.wake_taken();
        }
    }

    /// The rest of `wake_now` (out of line: most completions release no wait).
    #[cold]
    #[inline(never)]
    fn wake_taken(&mut self) {
        if let Some(wake) = self.wake.take() {
            wake.wake();
        }
    }

    /// A wait op became ready: completes it, and keeps its waiter's wake for `wake_now` (an
    /// earlier one was woken first, by `dispatch`).
    #[cold]
    #[inline(never)]
    fn released_wait(&mut self, wait: ReadyOp<Arc<WaitOneShot>>) {
        debug_assert!(self.wake.is_none(), "a kept wake not woken");
        *self.wake = self.state.release_wait(wait);
    }

    /// The rest of `drop`, for a completion that opened the thread's list: calls its
    /// callbacks.
    #[cold]
    #[inline(never)]
    fn call_reclaimed(&mut self) {
        let callbacks = thread::with(|cx| {
            let mut reclaims = cx.reclaims.borrow_mut();
            reclaims.collecting = false;
            if reclaims.callbacks.is_empty() {
                // Nested ops ran, and reclaimed nothing: the list keeps its capacity.
                return Vec::new();
            }
            std::mem::take(&mut reclaims.callbacks)
        });
        if callbacks.is_empty() {
            return;
        }
        if self.kept
            && let Some(key) = self.keep_for
            && let Some(block) = self.state.workers.block(key)
            && let Some(op) = block.take_kept()
        {
            block.submit(op);
        }
        let _marker = TaskMarker::enter(self.state.id);
        for on_deleted in callbacks {
            on_deleted();
            self.state.releases().end();
        }
    }

    /// Before a callback waits in the thread's list, or an op runs inline, nested in this
    /// completion: makes sure this completion or an outer one calls the callbacks when it
    /// drops. Once per completion: a burst runs many ops.
    #[inline]
    fn collect_reclaims(&mut self) {
        if self.reclaims == Reclaims::None {
            self.reclaims = open_reclaims();
        }
    }
}

impl Dispatcher<'_> {
    /// A naive op released by a completion runs here, nested in it (out of line: the threaded
    /// engines' completions never take this path).
    #[inline(never)]
    fn run_naive_nested(&mut self, op: ReadyOp<OpRecord>) {
        self.collect_reclaims();
        self.state.dispatch(op, false);
    }
}

/// Makes the current completion the one that calls the thread's reclaimed callbacks, unless
/// an outer completion on this thread does.
#[cold]
fn open_reclaims() -> Reclaims {
    thread::with(|cx| {
        let mut reclaims = cx.reclaims.borrow_mut();
        if reclaims.collecting {
            Reclaims::Outer
        } else {
            reclaims.collecting = true;
            Reclaims::Calls
        }
    })
}

impl Dispatch<Payload> for Dispatcher<'_> {
    #[inline]
    fn dispatch(&mut self, op: ReadyOp<Payload>) {
        // The op may run on this thread (or complete a wait, which may run ops here): a
        // waiter kept for the end is not kept waiting for it.
        self.wake_now();
        let op = match op.try_map(Payload::into_op) {
            Ok(op) => op,
            Err(wait) => return self.released_wait(wait),
        };
        if self.keep_for == Some(BlockKey::Priority)
            && !self.kept
            && matches!(op.payload().route, Route::Priority)
            && let Some(block) = self.state.workers.priority_block()
        {
            // A priority worker's completion: the first released priority op's token waits in
            // this worker's slot, as a CPU block keeps the op itself (below).
            self.kept = true;
            let priority = op.payload().priority;
            let state = Arc::clone(self.state);
            block.push_next(priority, Box::new(move || state.execute_priority_task(op)));
            return;
        }
        if let Some(key) = self.keep_for
            && op.payload().block_key() == Some(key)
            && let Some(block) = self.state.workers.block(key)
        {
            let op = BlockOp(op);
            if std::mem::replace(&mut self.kept, true) {
                // Run at once with this state, if it is, as a queued op runs (the successor it
                // keeps included), without `BlockOp::run`'s lookup of the thread's runner.
                block.submit_or_run_with(op, |BlockOp(op)| {
                    self.collect_reclaims();
                    self.state.execute(op, Some(key));
                    while let Some(BlockOp(next)) = block.take_kept() {
                        self.state.execute(next, Some(key));
                    }
                });
            } else {
                block.submit_next(op);
            }
            return;
        }
        if !self.from_push && matches!(op.payload().route, Route::Inline) {
            return self.run_naive_nested(op);
        }
        self.state.dispatch(op, self.from_push);
    }

    fn reclaimed(&mut self, on_deleted: OnDeleted) {
        // Counted before the op is: a `wait_for_all` that sees the op done sees the release.
        self.state.releases().begin();
        self.collect_reclaims();
        thread::with(|cx| cx.reclaims.borrow_mut().callbacks.push(on_deleted));
    }
}

impl EngineState {
    /// Sends a ready op where it runs.
    fn dispatch(self: &Arc<Self>, op: ReadyOp<OpRecord>, from_push: bool) {
        let record = op.payload();
        // A GPU op goes to its device executor whatever its property: only a worker there has
        // the stream its function launches on, and completes it when the device is done.
        if from_push
            && record.property.runs_on_pusher()
            && !matches!(record.route, Route::Device { .. })
            && self.workers.runs_ready_async_on_pusher()
        {
            self.execute(op, None);
            return;
        }
        match record.route {
            Route::Inline => naive::run(self, op, |op| self.execute(op, None)),
            Route::Pooled | Route::PooledCopy | Route::Cpu => {
                let key = record.block_key();
                match key.and_then(|key| self.workers.block(key)) {
                    // The op is queued once, unboxed, in the block's pool; the worker that
                    // runs it has the engine (`thread/serving.rs`).
                    Some(block) => block.submit(BlockOp(op)),
                    None => self.execute(op, None),
                }
            }
            Route::Priority => match self.workers.priority_block() {
                Some(block) => {
                    let priority = record.priority;
                    let state = Arc::clone(self);
                    block.push(priority, Box::new(move || state.execute_priority_task(op)));
                }
                None => self.execute(op, None),
            },
            Route::Device { copy } => match self.workers.executor(record.context, copy) {
                Ok(executor) => self.hand_to_device(&**executor, op),
                // Resolving the route created the executor, so it is found; were it created
                // here and the backend failed, the op would fail with the backend's error.
                Err(error) => {
                    let failure = record.failure(FailureCause::Error(Box::new(error)));
                    self.fail_unrun(op, failure);
                }
            },
        }
    }

    /// A task of the priority block: executes the op, marked as serving that block (for a
    /// wait inside the op, see `stand_in.rs`), and drops this reference to the engine while
    /// still marked as an engine task (see `Engine`'s shutdown). The first priority op that
    /// the op's completion releases is kept for this worker (`Dispatcher`,
    /// `BlockKey::Priority`).
    fn execute_priority_task(self: Arc<Self>, op: ReadyOp<OpRecord>) {
        let serving = Serving::enter(self.id, Served::Priority);
        let marker = TaskMarker::enter(self.id);
        self.execute(op, Some(BlockKey::Priority));
        drop(self);
        drop(marker);
        drop(serving);
    }

    /// `wait_for_var`'s wait op became ready: every op pushed on the var before it completed.
    /// Takes (clears) the var's failure while the write still holds the var alone, so every op
    /// pushed before the wait saw the failure and every op pushed after sees the var cleared.
    /// A wait its waiter abandoned (`deadlock.rs`) takes nothing: the var keeps its failure.
    /// The waiter's wake goes back to the caller (`Dispatcher::wake`), unless the wait's own
    /// completion woke it: before an op it released (which may run here), or before the
    /// callbacks of the vars it reclaimed (user code), or while unwinding.
    fn release_wait(self: &Arc<Self>, op: ReadyOp<Arc<WaitOneShot>>) -> Option<Wake> {
        // The payload goes back to the graph with the op; waits are rare enough that a count
        // update is the simplest way to keep the one-shot.
        let one_shot = Arc::clone(op.payload());
        let var = op.writes().next();
        let (failure, outcome) = if one_shot.claim() {
            // Completing the write with `Ok` leaves the var clear.
            let failure = var.and_then(|var| self.graph.clear_failure(var).ok().flatten());
            (failure, Ok(()))
        } else {
            // Completing it with the var's own failure (if any) leaves that in place.
            let kept = var.and_then(|var| self.graph.var_failure(var).ok().flatten());
            (None, kept.map_or(Ok(()), Err))
        };
        let mut dispatcher = Dispatcher::new(self, false, None);
        *dispatcher.wake = Some(Wake(one_shot, failure));
        // Our own op, so `complete` cannot fail.
        let _ = self
            .graph
            .complete(op.map(Payload::Wait), outcome, &mut dispatcher);
        if dispatcher.reclaims == Reclaims::Calls {
            // Its drop wakes the waiter, then calls the reclaimed vars' callbacks.
            return None;
        }
        dispatcher.wake.take()
    }
}
