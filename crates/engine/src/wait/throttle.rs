//! Backpressure: a pusher that runs too far ahead of the workers waits (`admit`).
//!
//! Without it, a thread that pushes faster than the workers run parks every op it pushes: the
//! parked ops (and their vars' queues) grow without bound, a burst of `10^7` ops holds
//! gigabytes, and the workers' ops slow down as that state outgrows the caches. With
//! `EngineConfig::max_pending` (4096 by default), a push that finds more than that many ops
//! pending waits until at most half of them are (the counter and its wake-ups are the pending
//! count of `idle.rs`, which `wait_for_all` waits on too; OpenMP runtimes throttle task
//! creation in the same spirit).
//!
//! The held-back push waits rather than running ready ops itself: the workers already run
//! them, and on a machine with as many workers as cores a pusher that joined in would take a
//! core from one of them; waiting leaves the pusher's core to the workers, and a pusher that
//! sleeps is woken once per `max / 2` ops.
//!
//! # Who is never held back
//!
//! A thread that runs engine work: inside an op's function (of any engine), a task of a worker
//! block or of a device executor (an async op's completion run there included), or naive ops.
//! Holding it back would wait for ops that may need it to return first (its own op's
//! completion, or the worker it occupies): a deadlock. Its pushes are admitted over the bound
//! (the bound holds up to the ops that running ops push). The naive engine has no bound at all:
//! it runs each op on the thread that makes it ready, so its pusher does the work itself.
//!
//! # A pusher that holds what its ops need
//!
//! A pusher held back waits for pending ops to complete; if it holds something they wait for
//! (a lock their functions take, the `Completion` of an async op they depend on, a gate it
//! opens only after pushing), they never do. The engine cannot see such a dependency, but it
//! sees its symptom: the ops pending stop falling. A held-back push that sees no new low of
//! the pending count for the bound's patience ([`EngineConfig::max_pending_wait`], 1 ms by
//! default) goes on with an *allowance*: the next `max` pushes are admitted whatever is
//! pending (`idle.rs`). Past them, the bound holds again, so such a pusher waits one patience
//! per `max` pushes instead of forever, and its stalled ops grow by at most `max` per
//! patience. Ops that are merely slow (the pending count not falling for a patience: every
//! worker inside an op longer than that, or the workers held off the cores) get the same
//! allowance.
//!
//! With no patience (`max_pending_wait` set to `None`) the bound is strict: the push waits as
//! long as it takes. Either way, a push held back for [`EngineConfig::stall_warning`] warns
//! (`warn.rs`: a `WARN` event, target `depengine::stall`, or stderr; again after each
//! further period), naming the held-back push, the pending count and the bound, and what to
//! change.
//!
//! [`EngineConfig::max_pending_wait`]: crate::EngineConfig::max_pending_wait
//! [`EngineConfig::stall_warning`]: crate::EngineConfig::stall_warning

use std::time::{Duration, Instant};

use crate::config::MAX_PENDING;
use crate::wait::idle::{Admission, IdleCounter};
use crate::wait::stall::StallClock;
use crate::warn::{DUMP_HINT, Topic, warn};

/// Counts one more pending op for a push; first waits, if more than the bound are pending and
/// this thread may block (`runs_engine_work` says it may not: see the module documentation;
/// asked only over the bound). `stall_warning`: the engine's period for stall warnings.
#[inline]
pub(crate) fn admit(
    pending: &IdleCounter,
    stall_warning: Option<Duration>,
    runs_engine_work: impl Fn() -> bool,
) {
    while pending.add() == Admission::OverBound && !runs_engine_work() {
        // Withdrawn while it waits: a held-back push does not count itself.
        let _ = pending.done();
        wait_below(pending, stall_warning);
    }
}

/// Waits until few enough ops are pending or, with a patience, until the pending count made
/// no progress (no new low) for that long, then gives the pusher its allowance; warns while it
/// blocks.
#[cold]
fn wait_below(pending: &IdleCounter, stall_warning: Option<Duration>) {
    let patience = pending.patience();
    let mut clock = StallClock::start(stall_warning);
    let mut lowest = pending.pending();
    let mut progress_at = Instant::now();
    while !pending.wait_below_for(clock.timeout(patience)) {
        let left = pending.pending();
        if left < lowest {
            lowest = left;
            progress_at = Instant::now();
        } else if patience.is_some_and(|patience| progress_at.elapsed() >= patience) {
            pending.allow_more();
            return;
        }
        if let Some(waited) = clock.due() {
            let advice = if patience.is_some() {
                "the ops are completing slowly"
            } else {
                "the bound is strict (EngineConfig::max_pending_wait is None): if the pushing \
                 thread holds something those ops wait for (a lock their functions take, a \
                 Completion, a var it writes later), it waits forever; raise the bound, turn it \
                 off, or give the wait a patience"
            };
            warn(
                Topic::Stall,
                format_args!(
                    "a push has been throttled for {:.2} s: {} op(s) pending, over the bound of \
                     {} (EngineConfig::max_pending, {MAX_PENDING}); {advice}; {DUMP_HINT}",
                    waited.as_secs_f64(),
                    pending.pending(),
                    pending.bound().unwrap_or(0),
                ),
            );
        }
    }
}
