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

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use depengine_graph::{ReadyOp, Var};

use crate::op::record::OpRecord;

thread_local! {
    // All `const`: no lazy initialization to check on each access (every sync op enters a
    // frame, and every submit from a worker checks `in_op_function`).
    /// The vars of every frame, innermost frame's last.
    static VARS: RefCell<Vec<Var>> = const { RefCell::new(Vec::new()) };
    /// Per frame, innermost last: where its vars start in `VARS`, and its engine.
    static FRAMES: RefCell<Vec<(usize, u64)>> = const { RefCell::new(Vec::new()) };
    /// The released flags of the async frames: (frame depth, flag), innermost last. Apart
    /// from `FRAMES` so that sync frames do not pay for them.
    static RELEASED: RefCell<Vec<(usize, Arc<AtomicBool>)>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with each frame of engine `engine` whose op has not completed: its flag (async
/// frames) and its vars.
fn for_each_live(engine: u64, mut f: impl FnMut(Option<&Arc<AtomicBool>>, &[Var])) {
    VARS.with(|vars| {
        FRAMES.with(|frames| {
            RELEASED.with(|released| {
                let (vars, frames, released) = (vars.borrow(), frames.borrow(), released.borrow());
                for (depth, &(start, id)) in frames.iter().enumerate() {
                    if id != engine {
                        continue;
                    }
                    let end = frames.get(depth + 1).map_or(vars.len(), |&(next, _)| next);
                    let flag = released
                        .iter()
                        .find(|(at, _)| *at == depth)
                        .map(|(_, flag)| flag);
                    if !flag.is_some_and(|flag| flag.load(Ordering::Relaxed)) {
                        f(flag, &vars[start..end]);
                    }
                }
            });
        });
    });
}

/// Pushes a frame for `op`; returns its depth.
#[inline]
fn push_frame(engine: u64, op: &ReadyOp<OpRecord>) -> usize {
    VARS.with(|vars| {
        let mut vars = vars.borrow_mut();
        let depth = FRAMES.with(|frames| {
            let mut frames = frames.borrow_mut();
            frames.push((vars.len(), engine));
            frames.len() - 1
        });
        vars.extend(op.reads().chain(op.writes()));
        depth
    })
}

/// Marks an op's function as running on this thread while alive.
pub(crate) struct OpFrame {
    is_async: bool,
}

impl OpFrame {
    /// The frame of a sync op (it holds its vars until the frame ends).
    #[inline]
    pub(crate) fn enter(engine: u64, op: &ReadyOp<OpRecord>) -> Self {
        push_frame(engine, op);
        OpFrame { is_async: false }
    }

    /// The frame of an async op, whose completion sets `released`.
    pub(crate) fn enter_async(
        engine: u64,
        op: &ReadyOp<OpRecord>,
        released: Arc<AtomicBool>,
    ) -> Self {
        let depth = push_frame(engine, op);
        RELEASED.with(|flags| flags.borrow_mut().push((depth, released)));
        OpFrame { is_async: true }
    }
}

impl Drop for OpFrame {
    #[inline]
    fn drop(&mut self) {
        if self.is_async {
            RELEASED.with(|flags| flags.borrow_mut().pop());
        }
        let start = FRAMES
            .with(|frames| frames.borrow_mut().pop())
            .map_or(0, |(start, _)| start);
        VARS.with(|vars| vars.borrow_mut().truncate(start));
    }
}

/// Whether the current thread runs an op of engine `engine` that uses `var` and has not
/// completed.
pub(crate) fn running_op_uses(engine: u64, var: Var) -> bool {
    let mut uses = false;
    for_each_live(engine, |_, vars| uses |= vars.contains(&var));
    uses
}

/// Whether the current thread is inside an op's function (of any engine).
#[inline]
pub(crate) fn in_op_function() -> bool {
    FRAMES.with(|frames| !frames.borrow().is_empty())
}

/// Whether the current thread is inside the function of an op of engine `engine`.
pub(crate) fn running_op_of(engine: u64) -> bool {
    FRAMES.with(|frames| frames.borrow().iter().any(|&(_, id)| id == engine))
}

/// The vars of the sync ops of engine `engine` that this thread runs: held until the wait
/// returns, since a sync op completes only after its function has returned. (An async op's
/// vars are left out: whoever holds its `Completion`, possibly another thread, may complete
/// it while this thread waits.)
pub(crate) fn sync_ops_hold(engine: u64) -> Vec<Var> {
    let mut held = Vec::new();
    for_each_live(engine, |flag, vars| {
        if flag.is_none() {
            held.extend_from_slice(vars);
        }
    });
    held
}
