//! Op frames: which ops the current thread is running, with their vars, for the misuse checks
//! of waits inside ops (`WaitOnOwnVar`, `WaitAllInsideOp`, and the cycle check of
//! `deadlock.rs`), and for routing (`in_op_function`).
//!
//! A frame lives while an op's function runs, innermost last (a naive op runs the ops it
//! waits for nested in its wait). A sync op holds its vars until its function has returned,
//! so its frame's vars are held for the frame's whole life. An async op can complete while its
//! function still runs (its `Completion`, called there or handed to another thread): its frame
//! carries a *released* flag, which the completion sets before it releases the vars, and a
//! released frame no longer counts as holding them.
//!
//! Every sync op enters a frame, and few ever look at one (only a wait inside an op does), so
//! a sync frame copies nothing: it points at the op, which [`within`] borrows for the frame's
//! whole life, and its vars are read from the op when they are asked for. A replayed op's frame
//! ([`within_replay`]) points the same way at its replay's vars, all of which it holds: its
//! replay completes only after its function returned. An async op moves
//! into its `Completion` while its function runs, so its frame ([`OpFrame`]) copies the vars.
//!
//! Only the owning thread touches its frames (in its `ThreadState`); the released flag is the one thing other
//! threads write (before they complete the op). The deadlock check counts sync frames only
//! ([`sync_ops_hold`]).
//!
//! The flag is `Relaxed` on both sides: it publishes no data. Its reader only decides whether
//! the frame still counts as holding its vars, and reads nothing the completer wrote before
//! setting it (the wait that follows synchronizes with the release of the vars through the
//! graph). A completion that happens-before the check is seen by coherence (a load never
//! reads a value older than a store that happens-before it), whatever the ordering; one
//! concurrent with the check may be seen or not under any ordering, and either answer is
//! right for some interleaving (the function still ran the op, or the op had completed).

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use depengine_graph::{ReadyOp, Var};

use crate::op::record::OpRecord;
use crate::thread;

/// The op frames of one thread.
pub(crate) struct Frames {
    /// The frames, innermost last.
    stack: Vec<Frame>,
    /// The vars of the async frames, innermost frame's last (`FrameVars::Copied`).
    copied: Vec<Var>,
}

/// One op whose function runs on this thread.
struct Frame {
    engine: u64,
    vars: FrameVars,
}

/// Where a frame's vars are.
enum FrameVars {
    /// A sync op's: in the op, which `within` borrows while the frame exists.
    Op(NonNull<ReadyOp<OpRecord>>),
    /// A replayed op's: the replay's vars (`within_replay`), borrowed while the frame exists.
    Listed {
        reads: NonNull<[Var]>,
        writes: NonNull<[Var]>,
    },
    /// An async op's: `copied[start..end]`, and the flag its completion sets.
    Copied {
        start: usize,
        end: usize,
        released: Arc<AtomicBool>,
    },
}

impl Frames {
    pub(crate) const fn new() -> Self {
        Frames {
            stack: Vec::new(),
            copied: Vec::new(),
        }
    }

    /// Whether no op's function runs on this thread.
    pub(crate) fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }

    /// Calls `f` with each frame of engine `engine` whose op has not completed: whether it is a
    /// sync op's, and its vars.
    #[allow(
        unsafe_code,
        reason = "a sync or replayed op's frame points at its vars: see the SAFETY comments"
    )]
    fn for_each_live(&self, engine: u64, mut f: impl FnMut(bool, &mut dyn Iterator<Item = Var>)) {
        for frame in &self.stack {
            if frame.engine != engine {
                continue;
            }
            match &frame.vars {
                FrameVars::Op(op) => {
                    // SAFETY: an `Op` frame is on this thread's stack only during the call of
                    // `within` that pushed it (its guard pops it, also when unwinding), and
                    // that call holds the `&ReadyOp` it was made from: the op is alive and
                    // borrowed shared (nothing moves or changes it) while we read it, here on
                    // the same thread.
                    let op = unsafe { op.as_ref() };
                    f(true, &mut op.reads().chain(op.writes()));
                }
                FrameVars::Listed { reads, writes } => {
                    // SAFETY: as for `Op`: the frame lives only during the call of
                    // `within_replay` that pushed it, which borrows both slices shared.
                    let (reads, writes) = unsafe { (reads.as_ref(), writes.as_ref()) };
                    f(true, &mut reads.iter().chain(writes).copied());
                }
                FrameVars::Copied {
                    start,
                    end,
                    released,
                } => {
                    if !released.load(Ordering::Relaxed) {
                        f(false, &mut self.copied[*start..*end].iter().copied());
                    }
                }
            }
        }
    }

    /// Pops the innermost frame, with an async frame's copied vars.
    fn pop(&mut self) {
        if let Some(Frame {
            vars: FrameVars::Copied { start, .. },
            ..
        }) = self.stack.pop()
        {
            self.copied.truncate(start);
        }
    }
}

/// Runs `f` (a sync op's function, which holds `op`'s vars until it returns) inside a frame of
/// `op`, of engine `engine`.
///
/// The frame points at `op` (see the module documentation); it is popped before this returns
/// or unwinds, while `op` is still borrowed, which the SAFETY argument of `Frames::for_each_live`
/// rests on.
#[inline]
pub(crate) fn within<R>(engine: u64, op: &ReadyOp<OpRecord>, f: impl FnOnce() -> R) -> R {
    within_frame(engine, FrameVars::Op(NonNull::from(op)), f)
}

/// Runs `f` (a replayed op's function: its replay holds `reads` and `writes` until after it
/// returns) inside a frame of those vars, as `within` does for an op.
#[inline]
pub(crate) fn within_replay<R>(
    engine: u64,
    reads: &[Var],
    writes: &[Var],
    f: impl FnOnce() -> R,
) -> R {
    let vars = FrameVars::Listed {
        reads: NonNull::from(reads),
        writes: NonNull::from(writes),
    };
    within_frame(engine, vars, f)
}

/// Pushes a frame of borrowed `vars`, runs `f`, and pops the frame, also when `f` unwinds.
#[inline]
fn within_frame<R>(engine: u64, vars: FrameVars, f: impl FnOnce() -> R) -> R {
    /// Pops the frame when `within_frame` returns or unwinds.
    struct Pop;
    impl Drop for Pop {
        #[inline]
        fn drop(&mut self) {
            thread::with(|cx| cx.frames.borrow_mut().pop());
        }
    }
    thread::with(|cx| cx.frames.borrow_mut().stack.push(Frame { engine, vars }));
    let _pop = Pop;
    f()
}

/// Marks an async op's function as running on this thread while alive.
pub(crate) struct OpFrame {
    /// Not `Send`: it pops a frame of the thread that made it.
    thread: PhantomData<*const ()>,
}

impl OpFrame {
    /// The frame of an async op, whose completion sets `released`.
    pub(crate) fn enter_async(
        engine: u64,
        op: &ReadyOp<OpRecord>,
        released: Arc<AtomicBool>,
    ) -> Self {
        thread::with(|cx| {
            let mut frames = cx.frames.borrow_mut();
            let start = frames.copied.len();
            frames.copied.extend(op.reads().chain(op.writes()));
            let end = frames.copied.len();
            frames.stack.push(Frame {
                engine,
                vars: FrameVars::Copied {
                    start,
                    end,
                    released,
                },
            });
        });
        OpFrame {
            thread: PhantomData,
        }
    }
}

impl Drop for OpFrame {
    fn drop(&mut self) {
        thread::with(|cx| cx.frames.borrow_mut().pop());
    }
}

/// Whether the current thread runs an op of engine `engine` that uses `var` and has not
/// completed.
pub(crate) fn running_op_uses(engine: u64, var: Var) -> bool {
    let mut uses = false;
    thread::with(|cx| {
        cx.frames.borrow().for_each_live(engine, |_, vars| {
            for used in vars {
                uses |= used == var;
            }
        });
    });
    uses
}

/// Whether the current thread is inside the function of an op of engine `engine`.
pub(crate) fn running_op_of(engine: u64) -> bool {
    thread::with(|cx| {
        cx.frames
            .borrow()
            .stack
            .iter()
            .any(|frame| frame.engine == engine)
    })
}

/// The vars of the sync ops of engine `engine` that this thread runs: held until the wait
/// returns, since a sync op completes only after its function has returned. (An async op's
/// vars are left out: whoever holds its `Completion`, possibly another thread, may complete
/// it while this thread waits.)
pub(crate) fn sync_ops_hold(engine: u64) -> Vec<Var> {
    let mut held = Vec::new();
    thread::with(|cx| {
        cx.frames.borrow().for_each_live(engine, |sync, vars| {
            if sync {
                held.extend(vars);
            }
        });
    });
    held
}
