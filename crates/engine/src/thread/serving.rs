//! [`Serving`]: the worker block whose ops the current thread runs (a drainer or a stand-in of
//! a CPU block, or a task of the priority block), for the stand-ins of a wait inside an op and
//! for handing a released op back to a drainer.

use crate::op::record::BlockKey;
use crate::thread;

/// A block whose workers a stand-in can take the place of.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    /// A CPU worker block (`route/queued.rs`).
    Queued(BlockKey),
    /// The CPU priority block.
    Priority,
}

impl Served {
    /// The block of engine `engine` that the current thread serves, if any.
    pub(crate) fn by_this_thread(engine: u64) -> Option<Self> {
        match thread::with(|cx| cx.serving.get()) {
            Some((id, served)) if id == engine => Some(served),
            _ => None,
        }
    }
}

/// Marks the current thread as serving a block of one engine while alive.
pub(crate) struct Serving {
    previous: Option<(u64, Served)>,
}

impl Serving {
    pub(crate) fn enter(engine: u64, served: Served) -> Self {
        Serving {
            previous: thread::with(|cx| cx.serving.replace(Some((engine, served)))),
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        thread::with(|cx| cx.serving.set(self.previous));
    }
}
