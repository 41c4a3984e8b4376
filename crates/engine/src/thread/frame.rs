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
//! Only the owning thread touches its frames (in its `ThreadContext`); the released flag is the one thing other
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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use depengine_graph::{ReadyOp, Var};

use crate::op::record::OpRecord;
use crate::thread;

/// The op frames of one thread.
pub(crate) struct Frames {
    /// The vars of every frame, innermost frame's last.
    vars: Vec<Var>,
    /// Per frame, innermost last: where its vars start in `vars`, and its engine.
    starts: Vec<(usize, u64)>,
    /// The released flags of the async frames: (frame depth, flag), innermost last. Apart
    /// from `starts` so that sync frames do not pay for them.
    released: Vec<(usize, Arc<AtomicBool>)>,
}

impl Frames {
    pub(crate) const fn new() -> Self {
        Frames {
            vars: Vec::new(),
            starts: Vec::new(),
            released: Vec::new(),
        }
    }

    /// Whether no op's function runs on this thread.
    pub(crate) fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Calls `f` with each frame of engine `engine` whose op has not completed: its flag (async
    /// frames) and its vars.
    fn for_each_live(&self, engine: u64, mut f: impl FnMut(Option<&Arc<AtomicBool>>, &[Var])) {
        for (depth, &(start, id)) in self.starts.iter().enumerate() {
            if id != engine {
                continue;
            }
            let end = self
                .starts
                .get(depth + 1)
                .map_or(self.vars.len(), |&(next, _)| next);
            let flag = self
                .released
                .iter()
                .find(|(at, _)| *at == depth)
                .map(|(_, flag)| flag);
            if !flag.is_some_and(|flag| flag.load(Ordering::Relaxed)) {
                f(flag, &self.vars[start..end]);
            }
        }
    }

    /// Pushes a frame for `op`; returns its depth.
    #[inline]
    fn push(&mut self, engine: u64, op: &ReadyOp<OpRecord>) -> usize {
        self.starts.push((self.vars.len(), engine));
        // Two loops rather than one over `reads().chain(writes())`, whose every step asks
        // which half it is in: every sync op enters a frame (`bench-ab --instructions`).
        self.vars.reserve(op.reads().len() + op.writes().len());
        for var in op.reads() {
            self.vars.push(var);
        }
        for var in op.writes() {
            self.vars.push(var);
        }
        self.starts.len() - 1
    }
}

/// Marks an op's function as running on this thread while alive.
pub(crate) struct OpFrame {
    is_async: bool,
}

impl OpFrame {
    /// The frame of a sync op (it holds its vars until the frame ends).
    #[inline]
    pub(crate) fn enter(engine: u64, op: &ReadyOp<OpRecord>) -> Self {
        thread::with(|cx| cx.frames.borrow_mut().push(engine, op));
        OpFrame { is_async: false }
    }

    /// The frame of an async op, whose completion sets `released`.
    pub(crate) fn enter_async(
        engine: u64,
        op: &ReadyOp<OpRecord>,
        released: Arc<AtomicBool>,
    ) -> Self {
        thread::with(|cx| {
            let mut frames = cx.frames.borrow_mut();
            let depth = frames.push(engine, op);
            frames.released.push((depth, released));
        });
        OpFrame { is_async: true }
    }
}

impl Drop for OpFrame {
    #[inline]
    fn drop(&mut self) {
        thread::with(|cx| {
            let mut frames = cx.frames.borrow_mut();
            if self.is_async {
                frames.released.pop();
            }
            let start = frames.starts.pop().map_or(0, |(start, _)| start);
            frames.vars.truncate(start);
        });
    }
}

/// Whether the current thread runs an op of engine `engine` that uses `var` and has not
/// completed.
pub(crate) fn running_op_uses(engine: u64, var: Var) -> bool {
    let mut uses = false;
    thread::with(|cx| {
        cx.frames
            .borrow()
            .for_each_live(engine, |_, vars| uses |= vars.contains(&var));
    });
    uses
}

/// Whether the current thread is inside the function of an op of engine `engine`.
pub(crate) fn running_op_of(engine: u64) -> bool {
    thread::with(|cx| {
        cx.frames
            .borrow()
            .starts
            .iter()
            .any(|&(_, id)| id == engine)
    })
}

/// The vars of the sync ops of engine `engine` that this thread runs: held until the wait
/// returns, since a sync op completes only after its function has returned. (An async op's
/// vars are left out: whoever holds its `Completion`, possibly another thread, may complete
/// it while this thread waits.)
pub(crate) fn sync_ops_hold(engine: u64) -> Vec<Var> {
    let mut held = Vec::new();
    thread::with(|cx| {
        cx.frames.borrow().for_each_live(engine, |flag, vars| {
            if flag.is_none() {
                held.extend_from_slice(vars);
            }
        });
    });
    held
}
