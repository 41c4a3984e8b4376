//! [`run_recorded`]: a recorded device task (`DeviceTask::recorded`, a plan's GPU ops made one
//! graph) on a GPU worker. At the run that records it, its functions are called with the
//! worker's capture stream in place of its stream (what `CudaRun::current` gives), capturing in
//! thread-local mode, and the CUDA graph of what they launched there is instantiated, kept in
//! the task's recording, and launched on the worker's stream; each later run of the same
//! recording launches that graph on its worker's stream and calls no function. Either way the
//! worker then numbers it on its stream, as any op (`executor.rs`): one fence, and one
//! completion, for the whole graph.
//!
//! Why a second stream: while a stream captures, every stream-ordered call on it joins the
//! capture, whichever thread makes it; another thread freeing a buffer on the worker's stream
//! (a value dropped after an earlier op's completion) would break it. (A side stream that a
//! function orders with `CudaRun::stream_wait` joins the capture: `side_stream.rs`.)
//!
//! A recording is kept only from a run whose functions all succeeded: the work a failed one
//! launched is not the graph's work (and is not launched); a capture that CUDA ends with an
//! error fails the op; either way, the next run records again. The capture is ended on every
//! path, unwinding included. With cudarc's event tracking on, whose waits for events recorded
//! before a capture would break it, nothing is recorded: the functions launch their work at
//! every run, as an op's do.
//!
//! The driver is called directly for the capture and the graph: cudarc's wrappers first return
//! (and clear) any error another thread stored on the context, which would leave a capture
//! begun and not ended, or fail this op with another's error. Capture stops at calls that
//! wait for the device (a synchronize, a copy to pageable memory): the capture then fails.

use std::sync::Arc;

use cudarc::driver::sys::{CUgraph, CUgraphExec, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaStream, DriverError, result};
use depengine_device::{DeviceCompletion, DeviceTask, Recording};
use depengine_sync::{Mutex, lock};

use crate::current::MadeCurrent;
use crate::run::CudaRun;

/// What a recording keeps: the graph of the work its functions launched, if they launched any.
enum Recorded {
    Graph(StreamGraph),
    Nothing,
}

/// A captured CUDA graph, owned: destroyed when dropped.
struct CapturedGraph(CUgraph);

impl Drop for CapturedGraph {
    fn drop(&mut self) {
        // SAFETY: the graph was captured for this value alone, and nothing uses it after: an
        // executable graph instantiated from it is independent of it.
        let _ = unsafe { result::graph::destroy(self.0) };
    }
}

/// An executable CUDA graph, launched on any worker's stream of its device.
struct StreamGraph {
    context: Arc<CudaContext>,
    exec: CUgraphExec,
    /// Held by each launch: CUDA requires the calls on one graph to be serialized.
    launching: Mutex<()>,
}

// SAFETY: a graph's handle is the driver's, valid on every thread; CUDA requires only that the
// calls on one graph be serialized ("Graph object thread safety" in its programming guide), and
// every call goes through `launching` (a launch) or is the drop, which has the only reference.
unsafe impl Send for StreamGraph {}
// SAFETY: as for `Send`: a shared reference calls the driver only under `launching`.
unsafe impl Sync for StreamGraph {}

impl StreamGraph {
    /// Instantiates `graph` (captured in `context`).
    fn instantiate(context: &Arc<CudaContext>, graph: &CapturedGraph) -> Result<Self, DriverError> {
        let _current = MadeCurrent::new(context)?;
        // SAFETY: the graph is alive (borrowed) and used by no other call meanwhile; the context
        // is current.
        let exec = unsafe { result::graph::instantiate(graph.0, CUgraphInstantiate_flags(0)) }?;
        Ok(StreamGraph {
            context: Arc::clone(context),
            exec,
            launching: Mutex::new(()),
        })
    }

    /// Launches the graph on `stream` (of the graph's context), behind the work queued there.
    fn launch(&self, stream: &CudaStream) -> Result<(), DriverError> {
        let _serial = lock(&self.launching);
        let _current = MadeCurrent::new(&self.context)?;
        // SAFETY: the executable graph lives as long as `self`, the stream while it is borrowed,
        // both of the context made current; launches are serialized by `launching`. A launch in
        // flight when the graph is destroyed finishes first (CUDA frees an executable graph once
        // its launches are done).
        unsafe { result::graph::launch(self.exec, stream.cu_stream()) }
    }
}

impl Drop for StreamGraph {
    fn drop(&mut self) {
        // SAFETY: the only reference: nothing launches it any more; a launch in flight finishes
        // first (see `launch`). The call needs no current context, so the dropping thread's is
        // left alone; a failure leaves the graph to the context's end.
        let _ = unsafe { result::graph::exec_destroy(self.exec) };
    }
}

/// A stream capturing, until [`end`](Self::end) or the drop (an unwind) ends the capture.
struct Capturing<'s> {
    stream: &'s CudaStream,
    context: &'s CudaContext,
    ended: bool,
}

impl<'s> Capturing<'s> {
    /// Begins capturing `stream`, of `context`, in thread-local mode.
    fn begin(stream: &'s CudaStream, context: &'s CudaContext) -> Result<Self, DriverError> {
        let _current = MadeCurrent::new(context)?;
        let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: the stream is borrowed, so alive; its context is current.
        unsafe { result::stream::begin_capture(stream.cu_stream(), mode) }?;
        Ok(Capturing {
            stream,
            context,
            ended: false,
        })
    }

    /// Ends the capture: the graph captured, `None` if nothing was.
    fn end(mut self) -> Result<Option<CapturedGraph>, DriverError> {
        self.end_capture()
    }

    fn end_capture(&mut self) -> Result<Option<CapturedGraph>, DriverError> {
        // The worker's context is current (it began the capture); made so again if not.
        let _current = MadeCurrent::new(self.context);
        // SAFETY: the stream captures (since `begin`); ending it leaves the stream out of capture
        // mode, whether the capture succeeded or not.
        let graph = unsafe { result::stream::end_capture(self.stream.cu_stream()) };
        self.ended = true;
        let graph = graph?;
        Ok(if graph.is_null() {
            None
        } else {
            Some(CapturedGraph(graph))
        })
    }
}

impl Drop for Capturing<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.end_capture();
        }
    }
}

/// Runs recorded `task` on the worker `run` (see the module documentation), with `recording`
/// its recording: the op's completion, and the outcome of recording or launching its graph
/// (an `Err` fails the op; nothing of the graph was launched then).
pub(crate) fn run_recorded(
    run: &CudaRun,
    task: DeviceTask,
    recording: &Recording,
) -> (DeviceCompletion, Result<(), DriverError>) {
    match recording.get::<Recorded>() {
        Some(Recorded::Graph(graph)) => {
            return (task.launch_recorded(), graph.launch(run.stream()));
        }
        Some(Recorded::Nothing) => return (task.launch_recorded(), Ok(())),
        None => {}
    }
    if run.context().is_event_tracking() {
        return (task.run(), Ok(()));
    }
    let capture = run.capture_stream();
    let capturing = match Capturing::begin(capture, run.context()) {
        Ok(capturing) => capturing,
        Err(error) => return (task.launch_recorded(), Err(error)),
    };
    let completion = CudaRun::with_stream(capture, || task.run());
    let captured = capturing.end();
    let recorded = match captured {
        // Its own failure is the op's outcome; the work is dropped unlaunched.
        Ok(_) if completion.function_failed() => return (completion, Ok(())),
        Ok(Some(graph)) => match StreamGraph::instantiate(run.context(), &graph) {
            Ok(graph) => Recorded::Graph(graph),
            Err(error) => return (completion, Err(error)),
        },
        Ok(None) => Recorded::Nothing,
        Err(error) => return (completion, Err(error)),
    };
    let launched = match &recorded {
        Recorded::Graph(graph) => graph.launch(run.stream()),
        Recorded::Nothing => Ok(()),
    };
    if launched.is_ok() {
        // A recording kept meanwhile by a run beside this one (replays of a plan that writes
        // nothing may overlap) wins; this graph goes once its launch is done.
        let _ = recording.set(recorded);
    }
    (completion, launched)
}
