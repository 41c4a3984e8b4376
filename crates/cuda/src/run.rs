//! [`CudaRun`]: what a GPU op's function gets from the worker that runs it (the device's
//! context and the worker's stream), held in a thread-local of the worker.

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use depengine_sync::{Mutex, MutexGuard, lock};

use crate::completer::{AfterWork, Completer};
use crate::fence::StreamOrder;
use crate::tail::StreamTail;

thread_local! {
    /// The stream of the GPU worker this thread is, if it is one: set by the worker's start
    /// hook, before its first task, and cleared by its exit hook. Only that thread touches it.
    static CURRENT: RefCell<Option<CudaRun>> = const { RefCell::new(None) };
}

/// The CUDA resources of the GPU worker running an op: the device's (primary) context and the
/// worker's own non-blocking stream. An op launches its work on [`stream`](Self::stream) and
/// returns without waiting for it: the engine completes the op once an event recorded on the
/// stream after the function returned has fired.
///
/// [`current`](Self::current) is `None` on any thread that is not one of this crate's GPU
/// workers, such as the threads of a test without a GPU:
///
/// ```
/// assert!(depengine_cuda::CudaRun::current().is_none());
/// ```
#[derive(Clone, Debug)]
pub struct CudaRun {
    device: u32,
    worker: usize,
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The stream on which the worker records device graphs (`graph.rs`).
    capture: Arc<CudaStream>,
    /// The completion thread of `stream`, to which the worker hands each op it ran.
    completer: Arc<Completer>,
    /// The worker's stream as the ops launched on it, and their events (`tail.rs`).
    tail: Arc<StreamTail>,
    /// The values to drop once the op running on the worker completed.
    after_work: Arc<Mutex<AfterWork>>,
    /// What `stream` is ordered after: the fences of other streams it waited for.
    order: Arc<Mutex<StreamOrder<Arc<CudaStream>>>>,
}

impl CudaRun {
    /// The resources of worker `worker` of `device`: `[its stream, its capture stream]`.
    pub(crate) fn new(
        device: u32,
        worker: usize,
        context: Arc<CudaContext>,
        [stream, capture]: [Arc<CudaStream>; 2],
        completer: Arc<Completer>,
        tail: Arc<StreamTail>,
    ) -> Self {
        CudaRun {
            device,
            worker,
            context,
            stream,
            capture,
            completer,
            tail,
            after_work: Arc::default(),
            order: Arc::default(),
        }
    }

    /// The resources of the GPU worker the calling thread is, or `None` on other threads.
    pub fn current() -> Option<CudaRun> {
        CURRENT.with(|current| current.borrow().clone())
    }

    /// The device id.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// The worker's index in its block (compute or copy workers of the device).
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// The device's context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// The worker's stream: launch the op's work here.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Drops `value` once the op running on this worker has completed, on its stream's
    /// completion thread: for what the op's work may still use when its function returns, such
    /// as a device buffer the op replaced, or the staging buffer of a copy it queued. Dropped
    /// inside the function, a buffer would be freed while that work runs (with cudarc's event
    /// tracking off), or its drop would order the free behind it (with tracking on).
    ///
    /// Called outside an op (or from another thread than the worker's), the value waits for
    /// the worker's next op, or for the worker's end.
    ///
    /// ```no_run
    /// use depengine_cuda::CudaRun;
    ///
    /// // Inside a GPU op's function:
    /// let run = CudaRun::current().expect("a GPU worker");
    /// let mut buffer = run.stream().alloc_zeros::<f32>(1 << 20)?;
    /// // ... launch work that reads `buffer`, then replace it:
    /// let old = std::mem::replace(&mut buffer, run.stream().alloc_zeros::<f32>(1 << 21)?);
    /// run.drop_after_completion(old);
    /// # Ok::<(), depengine_cuda::cudarc::driver::DriverError>(())
    /// ```
    pub fn drop_after_completion<T: Send + 'static>(&self, value: T) {
        lock(&self.after_work).push(Box::new(value));
    }

    /// The values to drop once the op that just ran on this worker completed.
    pub(crate) fn take_after_work(&self) -> AfterWork {
        std::mem::take(&mut *lock(&self.after_work))
    }

    /// The stream on which the worker records device graphs.
    pub(crate) fn capture_stream(&self) -> &Arc<CudaStream> {
        &self.capture
    }

    /// The completion thread of the worker's stream.
    pub(crate) fn completer(&self) -> &Completer {
        &self.completer
    }

    /// What the worker's stream is ordered after (`fence.rs`).
    pub(crate) fn order(&self) -> MutexGuard<'_, StreamOrder<Arc<CudaStream>>> {
        lock(&self.order)
    }

    /// The worker's stream as the ops launched on it (its own stream, even while `stream`
    /// is the capture stream).
    pub(crate) fn tail(&self) -> &Arc<StreamTail> {
        &self.tail
    }

    /// Runs `f` with the calling worker's stream (what `current()` gives) replaced by
    /// `stream`, restored after (also on unwind): the functions of a recorded task launch into
    /// a capture stream of their own (`graph.rs`).
    pub(crate) fn with_stream<R>(stream: &Arc<CudaStream>, f: impl FnOnce() -> R) -> R {
        /// Puts the worker's own stream back.
        struct Restore(Option<Arc<CudaStream>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                if let Some(own) = self.0.take() {
                    CURRENT.with(|current| {
                        if let Some(run) = &mut *current.borrow_mut() {
                            run.stream = own;
                        }
                    });
                }
            }
        }
        let _restore = Restore(CURRENT.with(|current| {
            let mut current = current.borrow_mut();
            let run = current.as_mut()?;
            Some(std::mem::replace(&mut run.stream, Arc::clone(stream)))
        }));
        f()
    }

    /// Makes `self` the calling thread's (a GPU worker's start hook).
    pub(crate) fn enter(self) {
        CURRENT.with(|current| *current.borrow_mut() = Some(self));
    }

    /// Clears the calling thread's (a GPU worker's exit hook).
    pub(crate) fn leave() {
        CURRENT.with(|current| current.borrow_mut().take());
    }
}
