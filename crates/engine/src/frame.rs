//! [`OpFrame`]: which ops the current thread is running, with their vars, for the misuse
//! checks of waits inside ops (`WaitOnOwnVar`, `WaitAllInsideOp`, and the cycle check of
//! `deadlock.rs`), and for routing (`in_op_function`).
//!
//! A frame lives while an op's function runs, innermost last (a naive op runs the ops it
//! waits for nested in its wait). A sync op holds its vars until its function has returned,
//! so its frame's vars are held for the frame's whole life. An async op can complete while its
//! function still runs (its `Completion`, called there or handed to another thread): its frame
//! carries a *released* flag, which the completion sets before it releases the vars, and a
//! released frame no longer counts as holding them.
//!
//! Only the owning thread touches the thread-locals; the released flag is the one thing other
//! threads write (`Release`, before they complete the op; read with `Acquire`, see
//! [`Held::still_held`]).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use depengine_graph::{ReadyOp, Var};

use crate::record::OpRecord;

/// One running op of this thread.
struct Frame {
    /// Where its vars start in `Frames::vars`.
    start: usize,
    engine: u64,
    /// Set once the op completed (async ops only).
    released: Option<Arc<AtomicBool>>,
}

#[derive(Default)]
struct Frames {
    /// The vars of every frame, innermost frame's last.
    vars: Vec<Var>,
    frames: Vec<Frame>,
}

impl Frames {
    /// The frames of engine `engine` whose op has not completed, with their vars.
    fn live(&self, engine: u64) -> impl Iterator<Item = (&Frame, &[Var])> {
        let ends = self.frames.iter().skip(1).map(|next| next.start);
        self.frames
            .iter()
            .zip(ends.chain([self.vars.len()]))
            .filter(move |(frame, _)| {
                frame.engine == engine
                    && !frame
                        .released
                        .as_ref()
                        .is_some_and(|released| released.load(Ordering::Acquire))
            })
            .map(|(frame, end)| (frame, &self.vars[frame.start..end]))
    }
}

thread_local! {
    static FRAMES: RefCell<Frames> = RefCell::new(Frames::default());
}

/// Marks an op's function as running on this thread while alive.
pub(crate) struct OpFrame;

impl OpFrame {
    /// The frame of a sync op (it holds its vars until the frame ends).
    pub(crate) fn enter(engine: u64, op: &ReadyOp<OpRecord>) -> Self {
        Self::push(engine, op, None)
    }

    /// The frame of an async op, whose completion sets `released`.
    pub(crate) fn enter_async(
        engine: u64,
        op: &ReadyOp<OpRecord>,
        released: Arc<AtomicBool>,
    ) -> Self {
        Self::push(engine, op, Some(released))
    }

    fn push(engine: u64, op: &ReadyOp<OpRecord>, released: Option<Arc<AtomicBool>>) -> Self {
        FRAMES.with(|frames| {
            let frames = &mut *frames.borrow_mut();
            frames.frames.push(Frame {
                start: frames.vars.len(),
                engine,
                released,
            });
            frames.vars.extend(op.reads().chain(op.writes()));
        });
        OpFrame
    }
}

impl Drop for OpFrame {
    fn drop(&mut self) {
        FRAMES.with(|frames| {
            let frames = &mut *frames.borrow_mut();
            if let Some(frame) = frames.frames.pop() {
                frames.vars.truncate(frame.start);
            }
        });
    }
}

/// Whether the current thread runs an op of engine `engine` that uses `var` and has not
/// completed.
pub(crate) fn running_op_uses(engine: u64, var: Var) -> bool {
    FRAMES.with(|frames| {
        frames
            .borrow()
            .live(engine)
            .any(|(_, vars)| vars.contains(&var))
    })
}

/// Whether the current thread is inside an op's function (of any engine).
#[inline]
pub(crate) fn in_op_function() -> bool {
    FRAMES.with(|frames| !frames.borrow().frames.is_empty())
}

/// Whether the current thread is inside the function of an op of engine `engine`.
pub(crate) fn running_op_of(engine: u64) -> bool {
    FRAMES.with(|frames| frames.borrow().frames.iter().any(|f| f.engine == engine))
}

/// The vars the ops of one engine that this thread runs hold now.
#[derive(Clone, Default)]
pub(crate) struct Held {
    pub(crate) vars: Vec<Var>,
    /// The released flags of the async ones among those ops.
    released: Vec<Arc<AtomicBool>>,
}

impl Held {
    /// What this thread's ops of engine `engine` hold.
    pub(crate) fn by_this_thread(engine: u64) -> Self {
        FRAMES.with(|frames| {
            let mut held = Held::default();
            for (frame, vars) in frames.borrow().live(engine) {
                held.vars.extend_from_slice(vars);
                held.released.extend(frame.released.iter().cloned());
            }
            held
        })
    }

    /// Whether none of the ops completed since `by_this_thread`: then they held their vars
    /// throughout. (A completion sets its flag with `Release` before it releases the vars, so
    /// whoever observed a var released by it and then loads the flag with `Acquire` sees it.)
    pub(crate) fn still_held(&self) -> bool {
        self.released
            .iter()
            .all(|released| !released.load(Ordering::Acquire))
    }
}
