//! [`PendingOps`]: the engine's pending side, the ops pushed and not yet completed as pushers,
//! completers and waiters see them: the count (`idle.rs`), the pending bound that holds a pusher
//! back (`throttle.rs`), the shut-down flag every push checks, and the period of the warnings
//! of the waits on them (`stall.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::error::{EngineError, Result};
use crate::wait::idle::{IdleCounter, IdleWaiter, PendingBound};
use crate::wait::stall::StallClock;
use crate::wait::throttle;
use crate::warn::{DUMP_HINT, Topic, warn};

/// The ops pushed and not yet completed, and whether more may be pushed.
///
/// Threads: every push (any thread: a user's, or one running an op that pushes) counts its op
/// in ([`admit`](Self::admit), the pushers' line of the counter) and reads the shut-down flag;
/// the thread that completes an op (a worker, a device executor's thread, the thread that
/// completes an async op, a pusher running an op inline) counts it out ([`done`](Self::done),
/// the completers' line); `wait_for_all`'s caller and the last handle's teardown wait on it
/// ([`wait_idle_for`](Self::wait_idle_for), from `api/blocking.rs`), and whoever polls a
/// `wait_for_all_async` future ([`poll_idle`](Self::poll_idle)); `Engine::shutdown` and the
/// last handle's drop set the flag.
pub(crate) struct PendingOps {
    counter: IdleCounter,
    /// Set by `Engine::shutdown` and by the last handle's drop; a push that sees it fails.
    ///
    /// `Relaxed` everywhere: the flag publishes no data (nothing written before the store is
    /// read because of a load that sees it). "Later pushes fail" needs only coherence: a push
    /// that happens-after the store sees it, whatever the ordering. A push concurrent with the
    /// store may see it or not under any ordering short of `SeqCst` on both sides of the
    /// push's add-then-check against the shutdown's store-then-wait, which the engine does
    /// not claim (`shutdown` waits as `wait_for_all` does: for the ops counted before the
    /// idle moment). The last handle's drop does not rely on the flag to stop pushes either:
    /// with no `Engine` left, only running ops can push, and none runs once idle (see
    /// `idle.rs`).
    shut_down: AtomicBool,
    /// `EngineConfig::stall_warning`: how often a blocked wait warns (`stall.rs`).
    stall_warning: Option<Duration>,
}

impl PendingOps {
    /// Nothing pending; pushes held back past `bound` (none: never), waits warning after each
    /// `stall_warning`.
    pub(crate) fn new(bound: Option<PendingBound>, stall_warning: Option<Duration>) -> Self {
        PendingOps {
            counter: IdleCounter::with_bound(bound),
            shut_down: AtomicBool::new(false),
            stall_warning,
        }
    }

    /// Counts one more pending op for a push, first waiting while the bound is exceeded
    /// (unless `runs_engine_work` says this thread must not block; see `throttle.rs`).
    ///
    /// # Errors
    ///
    /// [`EngineError::ShutDown`] (the op is counted out again).
    #[inline]
    pub(crate) fn admit(&self, runs_engine_work: impl Fn() -> bool) -> Result<()> {
        throttle::admit(&self.counter, self.stall_warning, runs_engine_work);
        // Relaxed: see `shut_down`.
        if self.shut_down.load(Ordering::Relaxed) {
            let _ = self.counter.done();
            return Err(EngineError::ShutDown);
        }
        Ok(())
    }

    /// An admitted op completed, or was not pushed after all. Whether this woke threads
    /// waiting for the engine to be idle (`wait_idle`): the engine was idle then.
    #[inline]
    pub(crate) fn done(&self) -> bool {
        self.counter.done()
    }

    /// Ops pushed and not completed (see `IdleCounter::pending`).
    pub(crate) fn count(&self) -> usize {
        self.counter.pending()
    }

    /// Ops completed so far.
    pub(crate) fn completed(&self) -> usize {
        self.counter.completed()
    }

    /// Makes later pushes fail with [`EngineError::ShutDown`].
    pub(crate) fn shut_down(&self) {
        // Relaxed: see `shut_down`.
        self.shut_down.store(true, Ordering::Relaxed);
    }

    /// Whether the engine was shut down.
    pub(crate) fn is_shut_down(&self) -> bool {
        // Relaxed: see `shut_down`.
        self.shut_down.load(Ordering::Relaxed)
    }

    /// The clock of a wait on the engine that warns while it blocks.
    pub(crate) fn stall_clock(&self) -> StallClock {
        StallClock::start(self.stall_warning)
    }

    /// Blocks for about `timeout` at most (`None`: no limit) until every op counted so far has
    /// completed: whether they did.
    pub(crate) fn wait_idle_for(&self, timeout: Option<Duration>) -> bool {
        self.counter.wait_idle_for(timeout)
    }

    /// The warning of a wait for every op (`what`) blocked for `waited`.
    #[cold]
    pub(crate) fn warn_stalled(&self, what: &str, waited: Duration) {
        warn(
            Topic::Stall,
            format_args!(
                "{what} has been blocked for {:.2} s: {} op(s) pending; {DUMP_HINT}",
                waited.as_secs_f64(),
                self.counter.pending(),
            ),
        );
    }

    /// A future's `wait_idle`: `Ready` once every op counted so far has completed, else
    /// `Pending` with `cx`'s waker registered (see "Async waiters" in `idle.rs`). A pending
    /// future does not warn.
    pub(crate) fn poll_idle(&self, waiter: &mut IdleWaiter, cx: &mut Context<'_>) -> Poll<()> {
        self.counter.poll_idle(waiter, cx)
    }

    /// A future waiting in `poll_idle` was dropped: unregisters it.
    pub(crate) fn forget_idle(&self, waiter: &mut IdleWaiter) {
        self.counter.forget_idle(waiter);
    }
}
