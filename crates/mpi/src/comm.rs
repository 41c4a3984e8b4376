//! [`Comm`]: MPI's world communicator on an engine, whose collectives and transfers are ops.
//!
//! Order (MPI matches collectives, and messages between two ranks, in the order each rank
//! issues them): every op of a communicator writes one var of its own (`order`), so the engine
//! runs them, and so hands them to the communication thread, one after the other in push
//! order, each once the one before it completed. Ranks that push the same ops in the same order
//! issue them in the same order, whatever order their data become ready in. The var also
//! carries failures: an op skipped for a failed input leaves its failure there, and the ops
//! after it skip too (the communicator stays stopped until [`Comm::wait`] takes the failure),
//! rather than issuing a call that the other ranks would match with a different one.

use std::ffi::c_int;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

use depengine::{AccessList, Engine, Held, TypedOp, Var};
use mpi::datatype::Equivalence;

use crate::error::MpiError;
use crate::reduce::Reduce;
use crate::thread::{self, Message};
use crate::transfer::{Buffer, Call, Transfer};

/// MPI's world communicator on an engine: collectives and point-to-point transfers on typed
/// data ([`Data<Vec<T>>`](depengine::Data)), each pushed as an op of the engine (a send reads
/// its data, a receive or a reduction writes it), which completes when MPI completes it. Its
/// communication thread makes every MPI call, so no compute worker blocks on MPI, and the ops
/// that do not touch the data run meanwhile.
///
/// Push a communicator's ops in the same order on every rank (MPI's rule for collectives; see
/// the module documentation for how that order is kept). One per process: it initializes MPI,
/// and finalizes it when dropped (after waiting for its ops), which waits for the other ranks.
///
/// # Examples
///
/// Run alone, a process is a world of one rank:
///
/// ```
/// use depengine::{Engine, EngineConfig};
/// use depengine_mpi::{Comm, Reduce};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let comm = Comm::world(&engine)?;
/// let gradient = engine.data(vec![1.0_f64, 2.0, 3.0])?;
/// comm.allreduce(&gradient, Reduce::Sum)?;
/// let expected: Vec<f64> = [1.0, 2.0, 3.0].iter().map(|x| x * comm.size() as f64).collect();
/// assert_eq!(*engine.read(&gradient)?, expected);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Comm {
    engine: Engine,
    rank: usize,
    size: usize,
    /// Written by each of its ops: they run in push order (see the module documentation).
    order: Var,
    sender: Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl Comm {
    /// The world communicator of this process, its ops pushed on `engine`: starts the
    /// communication thread, which initializes MPI.
    ///
    /// # Errors
    ///
    /// [`MpiError::AlreadyInitialized`] for a second call in one process (or MPI initialized by
    /// another library); [`MpiError::ThreadLevel`] if MPI gives less than
    /// `MPI_THREAD_FUNNELED`; [`MpiError::ThreadStart`]; [`MpiError::Engine`] if the engine
    /// cannot make a var.
    pub fn world(engine: &Engine) -> Result<Comm, MpiError> {
        let order = engine.new_var_named("mpi order")?;
        let started = thread::start()?;
        Ok(Comm {
            engine: engine.clone(),
            rank: started.rank,
            size: started.size,
            order,
            sender: started.sender,
            thread: Some(started.thread),
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks the communicator has.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Waits until every op pushed on the communicator so far is done; returns the first
    /// failure among them and takes it, so that the ops pushed after run again.
    ///
    /// # Errors
    ///
    /// The failure of an op (its source an [`MpiError`] for MPI's own errors), as
    /// [`Engine::wait_for_var`] returns it.
    pub fn wait(&self) -> Result<(), MpiError> {
        Ok(self.engine.wait_for_var(self.order)?)
    }

    /// Pushes an allreduce of `data` in place: each element becomes the reduction of that
    /// element on every rank. Every rank's vector must have the same length.
    ///
    /// # Errors
    ///
    /// A push's errors, as [`MpiError::Engine`]. The op fails with [`MpiError::TooLong`] past
    /// `i32::MAX` elements, or with MPI's error.
    pub fn allreduce<T>(
        &self,
        data: &depengine::Data<Vec<T>>,
        reduce: Reduce,
    ) -> Result<(), MpiError>
    where
        T: Equivalence + Copy + Send + Sync + 'static,
    {
        self.submit(self.engine.op("mpi allreduce").write(data), move |held| {
            let values = held.refs();
            // MPI_IN_PLACE is no constant rsmpi exports: the values are sent from a copy, kept
            // until the call completes.
            let sent = values.clone();
            let call = Call::Allreduce {
                from: Buffer::of(&sent)?,
                into: Buffer::of_mut(values)?,
                reduce,
            };
            Ok((call, Some(Box::new(sent))))
        })
    }

    /// Pushes a broadcast of `data` from rank `root` to every rank. Every rank's vector must
    /// have the root's length.
    ///
    /// # Errors
    ///
    /// [`MpiError::NoSuchRank`] for a `root` outside the communicator; a push's errors. The op
    /// fails as [`allreduce`](Self::allreduce)'s does.
    pub fn broadcast<T>(&self, data: &depengine::Data<Vec<T>>, root: usize) -> Result<(), MpiError>
    where
        T: Equivalence + Copy + Send + Sync + 'static,
    {
        let root = self.rank_number(root)?;
        self.submit(self.engine.op("mpi broadcast").write(data), move |held| {
            let buffer = Buffer::of_mut(held.refs())?;
            Ok((Call::Broadcast { buffer, root }, None))
        })
    }

    /// Pushes an allgather: `output` becomes every rank's `input`, concatenated in rank order.
    /// Every rank's input must have the same length.
    ///
    /// # Errors
    ///
    /// As [`allreduce`](Self::allreduce).
    pub fn allgather<T>(
        &self,
        input: &depengine::Data<Vec<T>>,
        output: &depengine::Data<Vec<T>>,
    ) -> Result<(), MpiError>
    where
        T: Equivalence + Copy + Default + Send + Sync + 'static,
    {
        let size = self.size;
        let op = self.engine.op("mpi allgather").read(input).write(output);
        self.submit(op, move |held| {
            let (input, output) = held.refs();
            output.clear();
            output.resize(input.len() * size, T::default());
            let (from, into) = (Buffer::of(input)?, Buffer::of_mut(output)?);
            Ok((Call::Allgather { from, into }, None))
        })
    }

    /// Pushes a reduce-scatter: `input` is cut into one equal block per rank, the blocks are
    /// reduced element by element across the ranks, and `output` becomes this rank's reduced
    /// block.
    ///
    /// # Errors
    ///
    /// As [`allreduce`](Self::allreduce); the op fails with [`MpiError::UnevenBlocks`] for an
    /// input that does not split into equal blocks.
    pub fn reduce_scatter<T>(
        &self,
        input: &depengine::Data<Vec<T>>,
        output: &depengine::Data<Vec<T>>,
        reduce: Reduce,
    ) -> Result<(), MpiError>
    where
        T: Equivalence + Copy + Default + Send + Sync + 'static,
    {
        let size = self.size;
        let op = self
            .engine
            .op("mpi reduce_scatter")
            .read(input)
            .write(output);
        self.submit(op, move |held| {
            let (input, output) = held.refs();
            if input.len() % size != 0 {
                return Err(MpiError::UnevenBlocks {
                    len: input.len(),
                    size,
                });
            }
            output.clear();
            output.resize(input.len() / size, T::default());
            let (from, into) = (Buffer::of(input)?, Buffer::of_mut(output)?);
            Ok((Call::ReduceScatter { from, into, reduce }, None))
        })
    }

    /// Pushes a send of `data` to rank `to`, with `tag`: done when MPI no longer needs the
    /// buffer.
    ///
    /// # Errors
    ///
    /// [`MpiError::NoSuchRank`]; as [`allreduce`](Self::allreduce) otherwise.
    pub fn send<T>(
        &self,
        data: &depengine::Data<Vec<T>>,
        to: usize,
        tag: u16,
    ) -> Result<(), MpiError>
    where
        T: Equivalence + Copy + Send + Sync + 'static,
    {
        let to = self.rank_number(to)?;
        self.submit(self.engine.op("mpi send").read(data), move |held| {
            let buffer = Buffer::of(held.refs())?;
            let tag = c_int::from(tag);
            Ok((Call::Send { buffer, to, tag }, None))
        })
    }

    /// Pushes a receive into `data` from rank `from`, with `tag`. The vector must be as long
    /// as the message; a longer message fails the op with MPI's truncation error.
    ///
    /// # Errors
    ///
    /// [`MpiError::NoSuchRank`]; as [`allreduce`](Self::allreduce) otherwise.
    pub fn recv<T>(
        &self,
        data: &depengine::Data<Vec<T>>,
        from: usize,
        tag: u16,
    ) -> Result<(), MpiError>
    where
        T: Equivalence + Copy + Send + Sync + 'static,
    {
        let from = self.rank_number(from)?;
        self.submit(self.engine.op("mpi recv").write(data), move |held| {
            let buffer = Buffer::of_mut(held.refs())?;
            let tag = c_int::from(tag);
            Ok((Call::Recv { buffer, from, tag }, None))
        })
    }

    /// Pushes a barrier: done once every rank has pushed and reached it.
    ///
    /// # Errors
    ///
    /// A push's errors.
    pub fn barrier(&self) -> Result<(), MpiError> {
        let sender = self.sender.clone();
        self.engine
            .op("mpi barrier")
            .writes([self.order])
            .push_async(move |_, done| {
                hand_over(
                    &sender,
                    Transfer {
                        call: Call::Barrier,
                        finish: Box::new(move |outcome| done.complete(outcome)),
                    },
                );
            })?;
        Ok(())
    }

    /// `rank` as MPI numbers it, if it is in the communicator.
    fn rank_number(&self, rank: usize) -> Result<c_int, MpiError> {
        let error = MpiError::NoSuchRank {
            rank,
            size: self.size,
        };
        if rank >= self.size {
            return Err(error);
        }
        c_int::try_from(rank).map_err(|_| error)
    }

    /// Pushes `op` (also writing the order var), whose function makes its MPI call with
    /// `prepare` (the start, and what the call's buffers need kept until it completes) and
    /// hands it to the communication thread; a `prepare` error fails the op.
    fn submit<L, F>(&self, op: TypedOp<'_, L>, prepare: F) -> Result<(), MpiError>
    where
        L: AccessList,
        F: FnOnce(&mut Held<L>) -> Result<(Call, Option<Box<dyn Send>>), MpiError> + Send + 'static,
    {
        let sender = self.sender.clone();
        op.writes([self.order])
            .push_async(move |_, mut held| match prepare(&mut held) {
                Ok((call, kept)) => hand_over(
                    &sender,
                    Transfer {
                        call,
                        finish: Box::new(move |outcome| {
                            drop(kept);
                            held.complete(outcome);
                        }),
                    },
                ),
                Err(error) => held.fail(error),
            })?;
        Ok(())
    }
}

/// Hands `transfer` to the communication thread; if it is gone, fails the op.
fn hand_over(sender: &Sender<Message>, transfer: Transfer) {
    if let Err(returned) = sender.send(Message::Transfer(transfer))
        && let Message::Transfer(transfer) = returned.0
    {
        (transfer.finish)(Err(MpiError::Closed));
    }
}

impl Drop for Comm {
    /// Waits for the communicator's ops, then stops its thread, which finalizes MPI (a
    /// collective call: it returns once every rank finalizes).
    fn drop(&mut self) {
        let _ = self.engine.wait_for_var(self.order);
        let _ = self.sender.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = self.engine.delete_var(self.order, || {});
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}
