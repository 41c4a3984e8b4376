//! [`TaskMarker`]: which engines' tasks (an op, or a worker task's epilogue) run on this thread,
//! so that an engine's last handle dropped by its own task does not wait for itself. A thread
//! that serves one of an engine's blocks (`serving.rs`) runs that engine's tasks all along and
//! needs no marker for them.

use crate::thread;

/// Marks the current thread as running a task of one engine while alive.
pub(crate) struct TaskMarker;

impl TaskMarker {
    #[inline]
    pub(crate) fn enter(engine: u64) -> Self {
        thread::with(|cx| cx.tasks.borrow_mut().push(engine));
        TaskMarker
    }

    /// Whether the current thread runs a task of engine `engine` (possibly with tasks of other
    /// engines nested inside it, or around it). A thread that serves a block of the engine (a
    /// worker, a stand-in, a priority task: `serving.rs`) runs nothing but its tasks, so it
    /// counts whether or not it entered a marker: the engine's ops on a block's workers do not.
    pub(crate) fn active(engine: u64) -> bool {
        thread::with(|cx| {
            matches!(cx.serving.get(), Some((id, _)) if id == engine)
                || cx.tasks.borrow().contains(&engine)
        })
    }
}

impl Drop for TaskMarker {
    #[inline]
    fn drop(&mut self) {
        thread::with(|cx| cx.tasks.borrow_mut().pop());
    }
}
