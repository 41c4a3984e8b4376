//! [`run_recorded`]: a recorded device task (`DeviceTask::recorded`, a plan's GPU ops made one
//! graph) on a GPU worker. At its first run its functions are called while the worker's stream
//! captures (thread-local mode: other threads' CUDA calls go on as usual), and the CUDA graph of
//! what they launched there is instantiated, kept in the task's recording, and launched; each
//! later run of the same recording launches that graph on the worker's stream and calls no
//! function. Either way the worker then records its event after the launch, as for any op
//! (`executor.rs`): one event, and one completion, for the whole graph.
//!
//! A recording is kept only from a run whose functions all succeeded: the work a failed one
//! launched is not the graph's work (and is not launched). A capture that CUDA ends with an
//! error (a call not allowed while a stream captures, such as a wait for an event recorded
//! before it) fails the op with that error, and the next run records again.

use std::sync::Mutex;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaStream, DriverError, result};
use depengine_device::{DeviceCompletion, DeviceTask, Recording};

/// What a recording keeps: the graph of the work its functions launched, if they launched any.
enum Recorded {
    Graph(StreamGraph),
    Nothing,
}

/// A CUDA graph, launched on any worker's stream of its device.
struct StreamGraph(Mutex<CudaGraph>);

// SAFETY: a graph's handles are the driver's, valid on every thread; CUDA requires only that
// calls on one graph be serialized ("Graph object thread safety" in the CUDA programming guide),
// and every call goes through the mutex (its launches) or through the drop, which has the only
// reference. `CudaGraph` is not `Send` for that rule alone.
unsafe impl Send for StreamGraph {}
// SAFETY: as for `Send`: a shared reference reaches the graph only through the mutex.
unsafe impl Sync for StreamGraph {}

impl StreamGraph {
    /// Launches the graph on `stream` (of the graph's context), behind the work queued there.
    fn launch(&self, stream: &CudaStream) -> Result<(), DriverError> {
        let graph = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        stream.context().bind_to_thread()?;
        // SAFETY: the executable graph lives while the guard is held (the graph is dropped only
        // with the last reference to the recording), the stream while `stream` is borrowed, and
        // both belong to the context bound above. A launch in flight when the graph is dropped
        // finishes first: CUDA frees an executable graph once its launches are done.
        unsafe { result::graph::launch(graph.cu_graph_exec(), stream.cu_stream()) }
    }
}

/// Runs recorded `task` on the worker whose stream is `stream`, with `recording` its recording
/// (see the module documentation): the op's completion, and the outcome of recording or
/// launching its graph (an `Err` fails the op; nothing of it was launched then).
pub(crate) fn run_recorded(
    stream: &std::sync::Arc<CudaStream>,
    task: DeviceTask,
    recording: &Recording,
) -> (DeviceCompletion, Result<(), DriverError>) {
    match recording.get::<Recorded>() {
        Some(Recorded::Graph(graph)) => return (task.replay(), graph.launch(stream)),
        Some(Recorded::Nothing) => return (task.replay(), Ok(())),
        None => {}
    }
    let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    if stream.begin_capture(mode).is_err() {
        // Not captured: the functions launch their work as an op's do, and the next run
        // tries to record again.
        return (task.run(), Ok(()));
    }
    let completion = task.run();
    let captured = stream.end_capture(CUgraphInstantiate_flags(0));
    if completion.function_failed() {
        // Its own failure is the op's outcome; the graph is dropped unlaunched.
        return (completion, Ok(()));
    }
    let recorded = match captured {
        Ok(Some(graph)) => Recorded::Graph(StreamGraph(Mutex::new(graph))),
        Ok(None) => Recorded::Nothing,
        Err(error) => return (completion, Err(error)),
    };
    let launched = match &recorded {
        Recorded::Graph(graph) => graph.launch(stream),
        Recorded::Nothing => Ok(()),
    };
    if launched.is_ok() {
        // A recording kept by a run beside this one wins; this graph goes once its launch is
        // done.
        let _ = recording.set(recorded);
    }
    (completion, launched)
}
