//! [`NcclComm`]: collectives on GPU buffers through NCCL (cudarc's `nccl` module, the library
//! loaded at run time), each a GPU op of the engine, one rank per GPU.
//!
//! Start. Every rank of an MPI communicator calls [`NcclComm::new`] at the same place of its
//! order: each first makes what it needs (a CUDA driver, the device, `libnccl`, a stream of its
//! own), and a min-allreduce of those outcomes over MPI tells all whether all can, so that no
//! rank enters NCCL's initialization (which waits for every rank) while another cannot. Rank 0
//! then makes NCCL's unique id and an MPI broadcast hands it to the others (with whether making
//! it failed); each joins the NCCL communicator, then runs a one-element allreduce on the
//! calling thread, so that NCCL's connections are made there rather than on a GPU worker.
//!
//! Order. NCCL, as MPI, matches collectives in the order each rank issues them. Every op of a
//! communicator writes its `order` var, so the engine runs them one after another in push
//! order (a GPU op behind another is released at that one's launch, `docs/cuda.md`), and each
//! enqueues its collective on the communicator's stream as its function runs: in push order.
//! Ops run on the device's copy workers (communication, as copies are), so a collective holds
//! back the later work of a copy stream, not of the compute streams.
//!
//! Streams. An op's function makes the communicator's stream wait for its worker's (the op's
//! inputs are ready there), enqueues the collective, and makes the worker's stream wait for
//! the communicator's: an event recorded on the worker's stream after the op (its own or a
//! later op's), which the engine's dependents wait for, covers the collective. A wait that
//! cannot be enqueued becomes a host wait, so every rank enqueues its collective (a rank that
//! failed early would leave the others' waiting). Not for a recorded plan: the communicator's
//! stream, which other threads use, would join the capture (`CudaRun::stream_wait`). The
//! communicator lives until the last op's work is done (`CudaRun::drop_after_completion`). The
//! waits are `CudaRun::stream_wait`'s: the worker's recycled events, no error another thread
//! stored on the context taken as theirs.
//!
//! Failures. A failed (or skipped) op fails the `order` var, so this rank's later ops skip
//! until [`NcclComm::wait`] reports it; the other ranks' matching collectives then never
//! complete (NCCL cannot take back a collective enqueued on a stream, as MPI cannot cancel a
//! pending one): a failure is recoverable only where every rank fails alike.

use std::ffi::c_char;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, result};
use cudarc::nccl::{self, Id, NcclType, ReduceOp};
use depengine::cuda::Driver;
use depengine::{BoxError, Context, Data, Engine, EngineError, FnProperty, RunContext, Var};

use crate::comm::Comm;
use crate::error::MpiError;
use crate::reduce::Reduce;

/// The bytes of NCCL's unique id.
const ID_BYTES: usize = 128;

/// An NCCL communicator of the ranks of an MPI [`Comm`], one GPU each, whose collectives on GPU
/// buffers ([`Data<CudaSlice<T>>`](depengine::Data)) are GPU ops of the engine: each writes the
/// data it changes (and reads its input), and completes when its collective has finished on
/// the device; they run on the device's copy workers, so compute ops go on meanwhile. Push its
/// ops in the same order on every rank, as a `Comm`'s (a failure: see `nccl.rs`'s module
/// documentation).
///
/// # Examples
///
/// Without a GPU (or NCCL), every rank gets the reason as a typed error:
///
/// ```
/// use depengine::{Engine, EngineConfig};
/// use depengine_mpi::{Comm, MpiError, NcclComm};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let comm = Comm::world(&engine)?;
/// match NcclComm::new(&comm, 0) {
///     Ok(nccl) => println!("NCCL rank {} of {}", nccl.rank(), nccl.size()),
///     Err(MpiError::NoNccl { reason }) => println!("no NCCL here: {reason}"),
///     Err(error) => return Err(error.into()),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct NcclComm {
    engine: Engine,
    device: u32,
    rank: usize,
    size: usize,
    /// Written by each of its ops: they run, and issue their collectives, in push order.
    order: Var,
    shared: Arc<Shared>,
}

/// An NCCL communicator, used by one op at a time.
struct Shared(Mutex<Option<nccl::Comm>>);

// SAFETY: NCCL's communicator handle may be used from any thread as long as its calls are
// serialized (NCCL's rule for a communicator), and every use of it goes through the mutex;
// cudarc's `Comm` is not `Send` for its raw handle alone.
unsafe impl Send for Shared {}
// SAFETY: as for `Send`: a shared reference reaches the communicator only through the mutex.
unsafe impl Sync for Shared {}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Option<nccl::Comm>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(comm) = self.lock().take() {
            // cudarc's drop aborts the communicator and panics if that fails; this drop may run
            // on a completion thread, which must go on (built with `panic = "abort"`, the
            // process would end here instead).
            let _ = catch_unwind(AssertUnwindSafe(move || drop(comm)));
        }
    }
}

impl NcclComm {
    /// The NCCL communicator of `comm`'s ranks, this one on GPU `device` (one rank per GPU:
    /// with several GPUs per node, each rank names its own, such as its rank on the node). A
    /// collective of `comm`: every rank calls it at the same place of `comm`'s order, and it
    /// returns once all have joined.
    ///
    /// # Errors
    ///
    /// [`MpiError::NoNccl`] on every rank if some rank has no CUDA driver, no such device, or no
    /// NCCL library (each names its own reason, or that another rank cannot);
    /// [`MpiError::Nccl`] if NCCL's unique id or its initialization fails; the errors of
    /// `comm`'s allreduce and broadcast. A rank whose joining fails once all agreed leaves the
    /// others waiting in NCCL's initialization (NCCL's own rule: every rank joins, or none
    /// returns).
    pub fn new(comm: &Comm, device: u32) -> Result<NcclComm, MpiError> {
        let engine = comm.engine().clone();
        let here = usable(device);
        let all = engine
            .data(vec![i32::from(here.is_ok())])
            .map_err(EngineError::from)?;
        comm.allreduce(&all, Reduce::Min)?;
        let all_usable = engine.read(&all)?.first() == Some(&1);
        let stream = here?;
        if !all_usable {
            return Err(MpiError::NoNccl {
                reason: "another rank cannot use NCCL".to_owned(),
            });
        }
        // Byte 0: whether rank 0 made the id; then the id.
        let mut message: Vec<c_char> = vec![0; 1 + ID_BYTES];
        if comm.rank() == 0
            && let Ok(id) = Id::new()
        {
            message[0] = 1;
            message[1..].copy_from_slice(id.internal());
        }
        let message = engine.data(message).map_err(EngineError::from)?;
        comm.broadcast(&message, 0)?;
        let message = engine.read(&message)?.clone();
        if message[0] != 1 {
            return Err(MpiError::Nccl(
                "rank 0 could not make NCCL's unique id".to_owned(),
            ));
        }
        let mut internal: [c_char; ID_BYTES] = [0; ID_BYTES];
        internal.copy_from_slice(&message[1..]);
        let order = engine.new_var_named("nccl ops")?;
        let nccl = nccl::Comm::from_rank(stream, comm.rank(), comm.size(), Id::uninit(internal))
            .map_err(|error| nccl_error("joining the communicator", &error))
            .and_then(|nccl| warm_up(&nccl).map(|()| nccl))
            .inspect_err(|_| {
                let _ = engine.delete_var(order, || {});
            })?;
        Ok(NcclComm {
            order,
            engine,
            device,
            rank: comm.rank(),
            size: comm.size(),
            shared: Arc::new(Shared(Mutex::new(Some(nccl)))),
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks there are.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The GPU this rank's collectives run on.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// Reduces `data` across the ranks, in place (`ncclAllReduce`): every rank ends with the
    /// element-wise `reduce` of all ranks' data, each of the same length.
    ///
    /// # Errors
    ///
    /// [`MpiError::Engine`] if the engine refuses the push (a GPU op needs its CUDA backend);
    /// the op fails with [`MpiError::Nccl`] if NCCL refuses the call.
    pub fn allreduce<T>(&self, data: &Data<CudaSlice<T>>, reduce: Reduce) -> Result<(), MpiError>
    where
        T: NcclType + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        self.op("nccl allreduce")
            .write(data)
            .writes([self.order])
            .push_sync(move |run, x| {
                issue(&shared, &run, |comm| {
                    comm.all_reduce_in_place(x, &reduce_op(reduce))
                })
            })?;
        Ok(())
    }

    /// Sends `root`'s `data` to every rank, in place (`ncclBroadcast`), each of the same length.
    ///
    /// # Errors
    ///
    /// [`MpiError::NoSuchRank`] for a root outside the communicator; as
    /// [`allreduce`](Self::allreduce).
    pub fn broadcast<T>(&self, data: &Data<CudaSlice<T>>, root: usize) -> Result<(), MpiError>
    where
        T: NcclType + Send + 'static,
    {
        let root = self.rank_number(root)?;
        let shared = Arc::clone(&self.shared);
        self.op("nccl broadcast")
            .write(data)
            .writes([self.order])
            .push_sync(move |run, x| {
                issue(&shared, &run, |comm| comm.broadcast_in_place(x, root))
            })?;
        Ok(())
    }

    /// Gathers every rank's `input` into every rank's `output`, in rank order
    /// (`ncclAllGather`): `output` holds `size()` times as many elements as `input`.
    ///
    /// # Errors
    ///
    /// As [`allreduce`](Self::allreduce); the op fails with [`MpiError::Lengths`] if `output`
    /// has not `size()` times `input`'s length.
    pub fn allgather<T>(
        &self,
        input: &Data<CudaSlice<T>>,
        output: &Data<CudaSlice<T>>,
    ) -> Result<(), MpiError>
    where
        T: NcclType + Send + Sync + 'static,
    {
        let (shared, size) = (Arc::clone(&self.shared), self.size);
        self.op("nccl allgather")
            .read(input)
            .write(output)
            .writes([self.order])
            .push_sync(move |run, (input, output)| {
                check_lengths(output.len(), input.len() * size)?;
                issue(&shared, &run, |comm| comm.all_gather(input, output))
            })?;
        Ok(())
    }

    /// Reduces `input` across the ranks and leaves block `rank` of the result, in rank order,
    /// in each rank's `output` (`ncclReduceScatter`): `input` holds `size()` blocks of
    /// `output`'s length.
    ///
    /// # Errors
    ///
    /// As [`allgather`](Self::allgather), for `input`'s length.
    pub fn reduce_scatter<T>(
        &self,
        input: &Data<CudaSlice<T>>,
        output: &Data<CudaSlice<T>>,
        reduce: Reduce,
    ) -> Result<(), MpiError>
    where
        T: NcclType + Send + Sync + 'static,
    {
        let (shared, size) = (Arc::clone(&self.shared), self.size);
        self.op("nccl reduce-scatter")
            .read(input)
            .write(output)
            .writes([self.order])
            .push_sync(move |run, (input, output)| {
                check_lengths(input.len(), output.len() * size)?;
                issue(&shared, &run, |comm| {
                    comm.reduce_scatter(input, output, &reduce_op(reduce))
                })
            })?;
        Ok(())
    }

    /// Waits for every op pushed on the communicator.
    ///
    /// # Errors
    ///
    /// The failure of one of them (`EngineError::OpFailed` inside [`MpiError::Engine`]).
    pub fn wait(&self) -> Result<(), MpiError> {
        self.engine.wait_for_var(self.order)?;
        Ok(())
    }

    /// An op of the communicator, on its GPU's copy workers.
    fn op(&self, name: &'static str) -> depengine::OpBuilder<'_> {
        self.engine
            .op(name)
            .on(Context::gpu(self.device))
            .prop(FnProperty::CopyToGpu)
    }

    /// `rank` as NCCL numbers it, if it is one of the communicator's.
    fn rank_number(&self, rank: usize) -> Result<i32, MpiError> {
        i32::try_from(rank)
            .ok()
            .filter(|_| rank < self.size)
            .ok_or(MpiError::NoSuchRank {
                rank,
                size: self.size,
            })
    }
}

impl Drop for NcclComm {
    /// Waits for its ops (their failures are theirs to report), and lets its var go; the NCCL
    /// communicator goes once the last op's work is done.
    fn drop(&mut self) {
        let _ = self.engine.wait_for_var(self.order);
        let _ = self.engine.delete_var(self.order, || {});
    }
}

impl std::fmt::Debug for NcclComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclComm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

/// What this process needs to use NCCL on `device` (a CUDA driver, the device, `libnccl`): the
/// stream its communicator will run on.
fn usable(device: u32) -> Result<Arc<CudaStream>, MpiError> {
    let no = |reason: String| MpiError::NoNccl { reason };
    let driver = Driver::probe().map_err(|error| no(error.to_string()))?;
    if device as usize >= driver.device_count() {
        return Err(no(format!(
            "no CUDA device {device} ({} here)",
            driver.device_count()
        )));
    }
    // SAFETY: loading the library runs its initializers, as any use of NCCL through cudarc
    // does first; nothing of it is called here.
    if !unsafe { nccl::sys::is_culib_present() } {
        return Err(no(
            "no NCCL library could be loaded: cudarc looks for libnccl.so (Debian's \
             libnccl-dev, or a link to libnccl.so.2 on the loader's path)"
                .to_owned(),
        ));
    }
    CudaContext::new(device as usize)
        .and_then(|context| context.new_stream())
        .map_err(|error| no(format!("a stream for NCCL: {error}")))
}

/// A one-element allreduce on `comm`'s stream, waited for: NCCL makes its connections at the
/// first collective, which may block the thread that issues it until the peers issue theirs.
fn warm_up(comm: &nccl::Comm) -> Result<(), MpiError> {
    let stream = comm.stream();
    let mut one = stream
        .alloc_zeros::<f32>(1)
        .map_err(|error| MpiError::Nccl(format!("a warm-up buffer: {error}")))?;
    comm.all_reduce_in_place(&mut one, &ReduceOp::Sum)
        .map_err(|error| nccl_error("a warm-up allreduce", &error))?;
    stream
        .synchronize()
        .map_err(|error| MpiError::Nccl(format!("a warm-up allreduce: {error}")))
}

/// On the op's GPU worker: orders the communicator's stream behind the worker's, enqueues the
/// collective there with `call`, and orders the worker's stream behind it (see the module
/// documentation).
fn issue(
    shared: &Arc<Shared>,
    run: &RunContext,
    call: impl FnOnce(&nccl::Comm) -> Result<nccl::result::NcclStatus, nccl::result::NcclError>,
) -> Result<(), BoxError> {
    let cuda = run
        .cuda()
        .ok_or("an NCCL op ran on a thread that is no GPU worker")?;
    // SAFETY: the worker's context, alive while `cuda` holds it, made current on the worker's
    // own thread, which runs only this device's work.
    unsafe { result::ctx::set_current(cuda.context().cu_ctx()) }?;
    let guard = shared.lock();
    let comm = guard.as_ref().ok_or("the NCCL communicator is gone")?;
    let stream: Arc<CudaStream> = comm.stream();
    // Ordered on the host where the device refuses (`stream_wait`): the collective must go
    // out, or the other ranks' would wait for it forever.
    cuda.stream_wait(&stream, cuda.stream())
        .map_err(|error| MpiError::Nccl(format!("waiting for the op's inputs: {error}")))?;
    call(comm).map_err(|error| nccl_error("a collective", &error))?;
    // Enqueued: from here on the op is done only when the collective is.
    let joined = cuda.stream_wait(cuda.stream(), &stream);
    drop(guard);
    cuda.drop_after_completion(Arc::clone(shared));
    joined.map_err(|error| MpiError::Nccl(format!("waiting for a collective: {error}")))?;
    Ok(())
}

/// `Ok` if `len` is `expected`.
fn check_lengths(len: usize, expected: usize) -> Result<(), MpiError> {
    if len == expected {
        Ok(())
    } else {
        Err(MpiError::Lengths { len, expected })
    }
}

/// NCCL's operation for `reduce`.
fn reduce_op(reduce: Reduce) -> ReduceOp {
    match reduce {
        Reduce::Sum => ReduceOp::Sum,
        Reduce::Product => ReduceOp::Prod,
        Reduce::Min => ReduceOp::Min,
        Reduce::Max => ReduceOp::Max,
    }
}

/// NCCL's error, while `doing` something.
fn nccl_error(doing: &str, error: &nccl::result::NcclError) -> MpiError {
    MpiError::Nccl(format!("{doing}: {:?}", error.0))
}
