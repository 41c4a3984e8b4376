//! Type-erased units of work: what the run queues hold.
//!
//! A [`JobRef`] is four words: a three-word payload and the function that runs it.
//! A closure of at most three words (most tasks: a couple of references, an `Arc`, an
//! index) is stored *in* the payload, so spawning it allocates nothing; a larger one is
//! boxed and the payload holds the box's pointer ([`JobRef::boxed`]). A `join`'s second
//! half lives in the joining thread's stack frame ([`StackJob`]) and the payload points
//! at it. Measured on the pool bench: with one heap allocation per task, glibc's
//! `malloc`/`free` (cross-thread frees contend on the arena lock) took over a third of
//! the time of spawning empty tasks from outside the pool.

use crate::latch::Latch;
use depengine_sync::UnsafeCell;
use std::any::Any;
use std::mem::{self, MaybeUninit};
use std::panic::{self, AssertUnwindSafe};

/// Words of closure state a job stores inline.
const INLINE_WORDS: usize = 3;

/// A job's inline storage: a closure, or a pointer to a boxed closure or stack job.
type Payload = MaybeUninit<[usize; INLINE_WORDS]>;

/// A job and the function that runs it.
pub(crate) struct JobRef {
    payload: Payload,
    run: unsafe fn(*mut Payload),
}

// SAFETY: a JobRef is created only from jobs whose closures are `Send`, and it is run
// exactly once, by whichever thread pops it.
unsafe impl Send for JobRef {}

impl std::fmt::Debug for JobRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRef").finish_non_exhaustive()
    }
}

impl JobRef {
    /// Runs the job, consuming the reference.
    ///
    /// # Safety
    ///
    /// The job's data must still be alive, and this `JobRef` must not have been run
    /// before (each job runs exactly once).
    pub(crate) unsafe fn run(mut self) {
        // SAFETY: forwarded from the caller; `run` matches the payload's contents
        // (both are set together by the constructors below).
        unsafe { (self.run)(&raw mut self.payload) }
    }

    /// A job whose payload is the pointer `data`.
    fn from_pointer(data: *const (), run: unsafe fn(*mut Payload)) -> Self {
        let mut payload = Payload::uninit();
        // SAFETY: the payload is word-aligned and at least one word long.
        unsafe { payload.as_mut_ptr().cast::<*const ()>().write(data) };
        JobRef { payload, run }
    }

    /// Whether this is the stack job at `data` (the job `join` pushed).
    pub(crate) fn is_stack_job<F, R>(&self, data: *const StackJob<F, R>) -> bool
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        let run: unsafe fn(*mut Payload) = StackJob::<F, R>::run_job;
        // Both must match: the pointer alone could collide with an inline closure's
        // first word. A false "no" is harmless (the job then runs through its latch).
        // The function-pointer check must come first: `&&` then reads the payload only
        // for a job whose `run` is `StackJob::run_job`.
        std::ptr::fn_addr_eq(self.run, run)
            // SAFETY: only reached when `run` is `StackJob::<F, R>::run_job`, which only
            // `from_pointer` installs, and `from_pointer` writes the first payload word.
            // (Not every job has it initialized: `boxed` stores a small closure inline,
            // and a closure smaller than a word, or with padding there, leaves the word
            // partly or wholly uninitialized, so the read must not happen for those.)
            && unsafe { self.payload.as_ptr().cast::<*const ()>().read() } == data.cast()
    }

    /// Packs `f` into a job: inline if it fits in the payload, boxed otherwise.
    ///
    /// # Safety
    ///
    /// Everything `f` borrows must outlive the job's run (trivially true when `f` is
    /// `'static`), and the returned `JobRef` must be run exactly once (or `f` leaks).
    pub(crate) unsafe fn boxed<F: FnOnce() + Send>(f: F) -> JobRef {
        unsafe fn run_inline<F: FnOnce()>(payload: *mut Payload) {
            // SAFETY: `payload` holds an `F` written by `boxed`, moved out only here.
            let f = unsafe { payload.cast::<F>().read() };
            f();
        }
        unsafe fn run_boxed<F: FnOnce()>(payload: *mut Payload) {
            // SAFETY: the payload's first word is the pointer from `Box::into_raw`
            // below, and the job runs exactly once.
            let f = unsafe { Box::from_raw(payload.cast::<*mut F>().read()) };
            f();
        }
        if mem::size_of::<F>() <= mem::size_of::<Payload>()
            && mem::align_of::<F>() <= mem::align_of::<Payload>()
        {
            let mut payload = Payload::uninit();
            // SAFETY: `F` fits the payload in size and alignment (checked above).
            unsafe { payload.as_mut_ptr().cast::<F>().write(f) };
            JobRef {
                payload,
                run: run_inline::<F>,
            }
        } else {
            let boxed = Box::into_raw(Box::new(f));
            Self::from_pointer(boxed.cast_const().cast(), run_boxed::<F>)
        }
    }

    /// Packs a `'static` closure: safe, since it borrows nothing.
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
        JobRef::from_pointer(std::ptr::from_ref(self).cast(), Self::run_job)
    }

    /// Runs the stack job the payload points at and sets its latch.
    unsafe fn run_job(payload: *mut Payload) {
        // SAFETY: the payload's first word points at a live StackJob (the
        // `as_job_ref` contract).
        let job = unsafe { &*payload.cast::<*const Self>().read() };
        // SAFETY: each job runs once; until the latch is set, only this runner
        // touches `func` and `result`.
        let func = job.func.with_mut(|cell| unsafe { (*cell).take() });
        if let Some(func) = func {
            let result = panic::catch_unwind(AssertUnwindSafe(func));
            // SAFETY: as above; the owner reads `result` only after the latch.
            job.result.with_mut(|cell| unsafe { *cell = Some(result) });
        }
        // SAFETY: the owner keeps the job (and so its latch) alive until the latch is set,
        // and only this run sets it.
        unsafe { Latch::set(&raw const job.latch) };
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
