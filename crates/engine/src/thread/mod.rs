//! The engine's per-thread state: everything the engine remembers about the current thread,
//! in one thread-local ([`ThreadState`], as rayon's `WorkerThread` and tokio's `Context`).
//!
//! Any thread can run engine code: a pusher, a worker of a block, a stand-in, a device
//! executor's thread, a thread that completes an async op. Only the thread itself touches its
//! state, so every field is a plain `Cell`/`RefCell`; each field belongs to one mechanism,
//! which alone changes it:
//!
//! | field | owner | what it says |
//! |---|---|---|
//! | `tasks` | [`task::TaskMarker`] | the engines whose tasks run on this thread, when it serves none of their blocks |
//! | `frames` | [`frame::within`], [`frame::OpFrame`] | the ops whose functions run here, with their vars |
//! | `serving` | [`serving::Serving`] | the worker block this thread serves |
//! | `runner` | `serving.rs` | on a CPU block's threads: the engine that runs its ops |
//! | `naive` | `route/naive.rs` | the naive ops made ready while this thread runs one |
//! | `profiled` | `profile/recorder.rs` | this thread's index and name in profiles |
//! | `open_segment` | [`open_segment`] | the bulk segment this thread pushed last, which its next ops may join |
//! | `reclaims` | `run/dispatch.rs` | the callbacks of the vars this thread's completions reclaimed, and whether an outer completion collects them |
//!
//! Under loom the state is a loom thread-local (one per model thread, fresh for each
//! execution), as the models' threads are loom's.

pub(crate) mod frame;
pub(crate) mod open_segment;
pub(crate) mod serving;
pub(crate) mod task;

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use depengine_graph::{OnDeleted, ReadyOp};

use crate::op::record::OpRecord;
use crate::profile::report::ProfiledThread;

/// An engine that runs an op queued on a thread for it (a naive op made ready while the thread
/// ran another one). A trait object, so that the thread's state does not depend on how the
/// engine runs ops.
pub(crate) trait RunQueuedOp: Send + Sync {
    /// Runs (or skips) `op` and completes it, on this thread.
    fn run_queued_op(self: Arc<Self>, op: ReadyOp<OpRecord>);
}

/// A naive op queued on this thread, with the engine that runs it.
pub(crate) type NaiveOp = (Arc<dyn RunQueuedOp>, ReadyOp<OpRecord>);

/// The callbacks of the vars this thread's completions reclaimed, not called yet
/// (`run/dispatch.rs`).
pub(crate) struct Reclaims {
    pub(crate) callbacks: Vec<OnDeleted>,
    /// A completion runs ops nested in it: it calls the callbacks of theirs when it ends.
    pub(crate) collecting: bool,
}

/// What the engine knows about the current thread (see the module documentation).
pub(crate) struct ThreadState {
    pub(crate) tasks: RefCell<Vec<u64>>,
    pub(crate) frames: RefCell<frame::Frames>,
    pub(crate) serving: Cell<Option<(u64, serving::Served)>>,
    pub(crate) runner: RefCell<Option<Arc<dyn serving::BlockRunner>>>,
    /// `Some` while this thread runs naive ops: the ones made ready meanwhile.
    pub(crate) naive: RefCell<Option<VecDeque<NaiveOp>>>,
    pub(crate) profiled: OnceCell<ProfiledThread>,
    /// Boxed: a word here, off the lines of the fields every op touches.
    pub(crate) open_segment: RefCell<Option<Box<open_segment::OpenSegment>>>,
    pub(crate) reclaims: RefCell<Reclaims>,
}

impl ThreadState {
    const fn new() -> Self {
        ThreadState {
            tasks: RefCell::new(Vec::new()),
            frames: RefCell::new(frame::Frames::new()),
            serving: Cell::new(None),
            runner: RefCell::new(None),
            naive: RefCell::new(None),
            profiled: OnceCell::new(),
            open_segment: RefCell::new(None),
            reclaims: RefCell::new(Reclaims {
                callbacks: Vec::new(),
                collecting: false,
            }),
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    // `const`: no lazy initialization to check on each access (every op enters a frame).
    static STATE: ThreadState = const { ThreadState::new() };
}

#[cfg(loom)]
depengine_sync::thread_local! {
    static STATE: ThreadState = ThreadState::new();
}

/// Calls `f` with the current thread's state.
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&ThreadState) -> R) -> R {
    STATE.with(f)
}

/// As [`with`], or `None` while the thread's thread-locals are being destroyed (an op completed
/// from another thread-local's destructor).
pub(crate) fn try_with<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    STATE.try_with(f).ok()
}

/// Whether this thread runs engine work now: an op's function (of any engine), a task of a
/// worker block or device executor, naive ops, or a CPU block's worker or stand-in at all
/// (see `wait/throttle.rs`: the pending bound never holds such a thread back). `true` while
/// the thread's locals are being destroyed.
pub(crate) fn runs_engine_work() -> bool {
    try_with(|cx| {
        !cx.frames.borrow().is_empty()
            || !cx.tasks.borrow().is_empty()
            || cx.naive.borrow().is_some()
            || cx.runner.borrow().is_some()
    })
    .unwrap_or(true)
}

/// Hands out thread indices for profiles (process-wide, so two engines agree).
static NEXT_THREAD: AtomicU32 = AtomicU32::new(0);

/// This thread's index and name in profiles, assigned on its first profiled op.
pub(crate) fn profiled() -> ProfiledThread {
    let new = || {
        let index = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
        let name = std::thread::current()
            .name()
            .map_or_else(|| Arc::from(format!("thread-{index}")), Arc::from);
        ProfiledThread { index, name }
    };
    // `try_with`: an op completed from a thread-local's destructor (a `Completion` dropped as
    // its thread exits) still gets a thread, a fresh one.
    try_with(|cx| cx.profiled.get_or_init(new).clone()).unwrap_or_else(new)
}
