//! Type-erased units of work: what the run queues hold.
//!
//! A [`JobRef`] is two words: a pointer to the job's data and the function that runs
//! it. Detached work lives on the heap ([`JobRef::boxed`]); a `join`'s second half lives in
//! the joining thread's stack frame ([`StackJob`]), which is why `join` allocates
//! nothing.

use crate::latch::Latch;
use crate::sync::UnsafeCell;
use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

/// A pointer to a job and the function that runs it.
#[derive(Debug)]
pub(crate) struct JobRef {
    data: *const (),
    run: unsafe fn(*const ()),
}

// SAFETY: a JobRef is created only from jobs whose closures are `Send`, and it is run
// exactly once, by whichever thread pops it.
unsafe impl Send for JobRef {}

impl JobRef {
    /// Runs the job, consuming the reference.
    ///
    /// # Safety
    ///
    /// The job's data must still be alive, and this `JobRef` must not have been run
    /// before (each job runs exactly once).
    pub(crate) unsafe fn run(self) {
        // SAFETY: forwarded from the caller.
        unsafe { (self.run)(self.data) }
    }

    /// Whether this reference points at `data`.
    pub(crate) fn points_at<T>(&self, data: *const T) -> bool {
        self.data == data.cast()
    }
}

impl JobRef {
    /// Boxes `f` into a job: a closure run once and freed.
    ///
    /// # Safety
    ///
    /// Everything `f` borrows must outlive the job's run (trivially true when `f` is
    /// `'static`), and the returned `JobRef` must be run exactly once (or the box
    /// leaks).
    pub(crate) unsafe fn boxed<F: FnOnce() + Send>(f: F) -> JobRef {
        unsafe fn run<F: FnOnce()>(data: *const ()) {
            // SAFETY: `data` came from `Box::into_raw` below, and runs exactly once.
            let f = unsafe { Box::from_raw(data.cast::<F>().cast_mut()) };
            f();
        }
        JobRef {
            data: Box::into_raw(Box::new(f)).cast_const().cast(),
            run: run::<F>,
        }
    }

    /// Boxes a `'static` closure: safe, since it borrows nothing.
    pub(crate) fn boxed_static<F: FnOnce() + Send + 'static>(f: F) -> JobRef {
        // SAFETY: `F: 'static` borrows nothing; the pool runs every job it accepts.
        unsafe { Self::boxed(f) }
    }
}

/// A closure living in the frame of the thread that waits for it; it stores its
/// result (or panic) in place and sets a latch.
pub(crate) struct StackJob<F, R> {
    func: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<std::thread::Result<R>>>,
    pub(crate) latch: Latch,
}

impl<F: FnOnce() -> R + Send, R: Send> StackJob<F, R> {
    pub(crate) fn new(func: F) -> Self {
        Self {
            func: UnsafeCell::new(Some(func)),
            result: UnsafeCell::new(None),
            latch: Latch::new(),
        }
    }

    /// A reference other threads may run.
    ///
    /// # Safety
    ///
    /// `self` must not move or be dropped until the job has run (its latch is set) or
    /// the reference has been reclaimed unrun; the reference must run at most once.
    pub(crate) unsafe fn as_job_ref(&self) -> JobRef {
        unsafe fn run<F: FnOnce() -> R, R>(data: *const ()) {
            // SAFETY: `data` points at a live StackJob (the `as_job_ref` contract).
            let job = unsafe { &*data.cast::<StackJob<F, R>>() };
            // SAFETY: each job runs once; until the latch is set, only this runner
            // touches `func` and `result`.
            let func = job.func.with_mut(|cell| unsafe { (*cell).take() });
            if let Some(func) = func {
                let result = panic::catch_unwind(AssertUnwindSafe(func));
                // SAFETY: as above; the owner reads `result` only after the latch.
                job.result.with_mut(|cell| unsafe { *cell = Some(result) });
            }
            job.latch.set();
        }
        JobRef {
            data: std::ptr::from_ref(self).cast(),
            run: run::<F, R>,
        }
    }

    /// Runs the closure on the owner's thread (the job was never handed out, or was
    /// popped back unrun), without going through the latch.
    pub(crate) fn run_inline(self) -> R {
        let func = self.func.with_mut(|cell| {
            // SAFETY: we own `self` by value; no reference to it is outstanding.
            unsafe { (*cell).take() }
        });
        match func {
            Some(func) => func(),
            None => unreachable_result(),
        }
    }

    /// The result once the latch is set: the value, or the panic to resume.
    pub(crate) fn into_result(self) -> std::thread::Result<R> {
        debug_assert!(self.latch.probe());
        // SAFETY: the latch is set, so the runner is done with the cell (Acquire in
        // `probe` made its write visible), and we own `self`.
        let result = self.result.with_mut(|cell| unsafe { (*cell).take() });
        result.unwrap_or_else(|| Err(Box::new("depengine-pool: job result missing")))
    }
}

/// `run_inline` on a job whose closure is gone: impossible by construction (a job is
/// either run by a thief, then reclaimed through its latch, or popped back unrun).
#[cold]
fn unreachable_result<R>() -> R {
    panic!("depengine-pool: a join job ran twice")
}

/// The payload of a caught panic.
pub(crate) type Panic = Box<dyn Any + Send + 'static>;
