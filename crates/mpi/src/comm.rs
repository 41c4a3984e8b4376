//! [`Comm`]: an MPI communicator on an engine (the world, or one split from it), whose
//! collectives and transfers are ops.
//!
//! Order. MPI matches collectives, and messages between two ranks, in the order each rank
//! starts them; the engine runs ops as their data allow, in any order. So each op of a
//! communicator takes a sequence number as it is pushed (under a lock, so the numbers follow
//! the push order), and the communication thread starts the calls in that order (`thread.rs`),
//! holding back one whose predecessors have not arrived: ranks that push the same ops in the
//! same order start them in the same order, whatever order their data become ready in. No
//! deadlock: an op waits in the engine only for ops pushed before it, which have lower
//! numbers, and its function returns at once, so every op before a held-back one arrives.
//! Each op holds its data until MPI completes its call, and calls of several ops are in flight
//! together.
//!
//! Skips. An op the engine skips (a failed input) never runs its function: the guard its
//! function owns (`Issue`) reports the skip when dropped, before the op completes, and the
//! thread then stops the communicator: this rank's later ops fail rather than start calls that
//! the other ranks would match with other ones, until [`Comm::wait`] returns the reason and
//! resumes it. The other ranks' call matching the skipped one stays pending (MPI 3.1 has no
//! way to fail it): a skip is recoverable only when every rank skips the same op, as when a
//! failure comes from data every rank computes alike.
//!
//! Preconditions MPI does not check, and this crate cannot without a call of its own: every
//! rank's buffers of one op have the lengths MPI expects (equal, or the root's); Open MPI
//! reports a longer message as truncation.

use std::ffi::c_int;
use std::sync::{Arc, Mutex, PoisonError};

use depengine::{AccessList, Data, Engine, FnProperty, Held, OpBuilder, TypedOp, Var};

use crate::combine::Combine;
use crate::element::Element;
use crate::error::MpiError;
use crate::reduce::{Reduce, UserReduce};
use crate::thread::{self, LaneId, Message, Split, Thread};
use crate::transfer::{Buffer, Call, Finish, Transfer};

/// An MPI communicator on an engine (the world, or one split from it): collectives and
/// point-to-point transfers on typed data ([`Data<Vec<T>>`](depengine::Data)), each pushed as
/// an op of the engine (a send reads its data, a receive or a reduction writes it), which
/// completes when MPI completes it. Its communication thread makes every MPI call, so no
/// compute worker blocks on MPI, and the ops that do not touch the data run meanwhile.
///
/// Push a communicator's ops in the same order on every rank (MPI's rule for collectives; see
/// the module documentation for how that order is kept). The world is made once per process:
/// it initializes MPI. Communicators split from it ([`split`](Self::split)) share its thread;
/// the last of them dropped (each waits for its ops) finalizes MPI, which waits for the other
/// ranks.
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
    /// Its number on the communication thread.
    lane: LaneId,
    rank: usize,
    size: usize,
    /// Read by each of its ops, so that a wait for it waits for them (nothing writes it, so it
    /// never holds a failure that would skip them).
    ops: Var,
    /// The sequence number of the next op pushed, locked while an op takes its number and is
    /// pushed, so that the numbers follow the push order even with several pushing threads
    /// (whose interleaving, though, differs between ranks: push from one thread).
    next: Mutex<u64>,
    /// The first op skipped since the last wait, named by its `Issue` as it drops (before the
    /// op completes): so a wait knows, without asking the thread, whether it must resume it.
    skipped: Arc<Mutex<Option<String>>>,
    thread: Arc<Thread>,
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
        let ops = engine.new_var_named("mpi ops")?;
        let started = thread::start().inspect_err(|_| {
            let _ = engine.delete_var(ops, || {});
        })?;
        Ok(Comm {
            engine: engine.clone(),
            lane: 0,
            rank: started.rank,
            size: started.size,
            ops,
            next: Mutex::new(0),
            skipped: Arc::new(Mutex::new(None)),
            thread: Arc::new(started.thread),
        })
    }

    /// Splits the communicator (`MPI_Comm_split`): the ranks that give the same `color` form a
    /// new communicator, ranked by `key` and then by their rank here; a rank that gives `None`
    /// joins none and gets `Ok(None)`. Every rank calls it at the same place of this
    /// communicator's order (it is a collective of this communicator): it returns once the ops
    /// pushed before it here have started their calls and every rank has reached it. The new
    /// communicator's ops are ordered among themselves, independently of this one's.
    ///
    /// From the first split on, allreduces are non-blocking MPI calls, and
    /// [`allreduce_by`](Self::allreduce_by) fails its ops (see
    /// [`MpiError::UserReduceAfterSplit`]). The split itself is a blocking call of the
    /// communication thread: split at set-up, not while ops of another communicator are
    /// pending that another rank's earlier ops wait for; and not inside an op, whose data an
    /// op before the split may need.
    ///
    /// ```
    /// use depengine::{Engine, EngineConfig};
    /// use depengine_mpi::{Comm, Reduce};
    ///
    /// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
    /// let world = Comm::world(&engine)?;
    /// // Even and odd ranks, each set a communicator of its own.
    /// let half = world.split(Some((world.rank() % 2) as u16), 0)?.expect("a color was given");
    /// let ones = engine.data(vec![1_u64; 4])?;
    /// half.allreduce(&ones, Reduce::Sum)?;
    /// assert_eq!(*engine.read(&ones)?, vec![half.size() as u64; 4]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`MpiError::Stopped`] if this communicator is stopped at the split's turn (a skip before
    /// it); [`MpiError::Closed`]; MPI's error; [`MpiError::Engine`] if the engine cannot make
    /// the new communicator's var.
    pub fn split(&self, color: Option<u16>, key: i32) -> Result<Option<Comm>, MpiError> {
        let (reply, made) = std::sync::mpsc::channel();
        let sent = {
            let mut next = lock(&self.next);
            let sequence = *next;
            *next += 1;
            let split = Split { color, key, reply };
            self.thread
                .sender
                .send(Message::Split(self.lane, sequence, split))
        };
        let made = match sent {
            Ok(()) => made.recv().unwrap_or(Err(MpiError::Closed)),
            Err(_) => Err(MpiError::Closed),
        };
        let Some(member) = made? else {
            return Ok(None);
        };
        // Made after the split, which every rank takes in its turn whatever happens here.
        let ops = match self.engine.new_var_named("mpi ops") {
            Ok(ops) => ops,
            Err(error) => {
                let _ = self.thread.sender.send(Message::Free(member.lane));
                return Err(error.into());
            }
        };
        Ok(Some(Comm {
            engine: self.engine.clone(),
            lane: member.lane,
            rank: member.rank,
            size: member.size,
            ops,
            next: Mutex::new(0),
            skipped: Arc::new(Mutex::new(None)),
            thread: Arc::clone(&self.thread),
        }))
    }

    /// The engine its ops are pushed on.
    #[cfg_attr(
        not(feature = "nccl"),
        allow(dead_code, reason = "used by NCCL's start")
    )]
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks the communicator has.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Waits until every op pushed on the communicator so far is done. If an op was skipped
    /// (a failed input), which stopped the communicator, returns why and resumes it: the ops
    /// pushed after run again. Each op's own failure is its data's (for a send, the one
    /// [`Engine::wait_for_all`] reports).
    ///
    /// # Errors
    ///
    /// [`MpiError::Stopped`]; an error of the wait itself, as [`MpiError::Engine`].
    pub fn wait(&self) -> Result<(), MpiError> {
        self.engine.wait_for_var(self.ops)?;
        let skipped = lock(&self.skipped).take();
        let Some(reason) = skipped else {
            return Ok(());
        };
        // The thread stops at the skip in its turn, which comes before this message.
        let (reply, resumed) = std::sync::mpsc::channel();
        self.thread
            .sender
            .send(Message::Resume(self.lane, reply))
            .map_err(|_| MpiError::Closed)?;
        resumed.recv().map_err(|_| MpiError::Closed)?;
        Err(MpiError::Stopped(reason))
    }

    /// Pushes an allreduce of `data` in place: each element becomes the reduction of that
    /// element on every rank. Every rank's vector must have the same length.
    ///
    /// # Errors
    ///
    /// A push's errors, as [`MpiError::Engine`]. The op fails with [`MpiError::TooLong`] past
    /// `i32::MAX` elements, or with MPI's error.
    pub fn allreduce<T>(&self, data: &Data<Vec<T>>, reduce: Reduce) -> Result<(), MpiError>
    where
        T: Element,
    {
        self.submit(
            "mpi allreduce",
            |op| op.write(data),
            move |held| {
                let buffer = Buffer::of_mut(held.refs())?;
                Ok(Call::Allreduce { buffer, reduce })
            },
        )
    }

    /// Pushes an allreduce of `data` in place by the caller's function (see [`UserReduce`]):
    /// each element becomes the combination of that element on every rank. Every rank's vector
    /// must have the same length, and every rank must reduce by the same function.
    ///
    /// # Errors
    ///
    /// As [`allreduce`](Self::allreduce); the op also fails with [`MpiError::ReduceFailed`] if
    /// the function panicked, and with [`MpiError::UserReduceAfterSplit`] after the world's
    /// first split.
    pub fn allreduce_by<T>(
        &self,
        data: &Data<Vec<T>>,
        reduce: &UserReduce<T>,
    ) -> Result<(), MpiError>
    where
        T: Element,
    {
        let combine = Combine::of(reduce);
        self.submit(
            "mpi allreduce",
            |op| op.write(data),
            move |held| {
                let buffer = Buffer::of_mut(held.refs())?;
                Ok(Call::AllreduceBy { buffer, combine })
            },
        )
    }

    /// Pushes a broadcast of `data` from rank `root` to every rank. Every rank's vector must
    /// have the root's length.
    ///
    /// # Errors
    ///
    /// [`MpiError::NoSuchRank`] for a `root` outside the communicator; a push's errors. The op
    /// fails as [`allreduce`](Self::allreduce)'s does.
    pub fn broadcast<T>(&self, data: &Data<Vec<T>>, root: usize) -> Result<(), MpiError>
    where
        T: Element,
    {
        let root = self.rank_number(root)?;
        self.submit(
            "mpi broadcast",
            |op| op.write(data),
            move |held| {
                let buffer = Buffer::of_mut(held.refs())?;
                Ok(Call::Broadcast { buffer, root })
            },
        )
    }

    /// Pushes an allgather: `output` becomes every rank's `input`, concatenated in rank order.
    /// Every rank's input must have the same length.
    ///
    /// # Errors
    ///
    /// As [`allreduce`](Self::allreduce).
    pub fn allgather<'a, T>(
        &'a self,
        input: &'a Data<Vec<T>>,
        output: &'a Data<Vec<T>>,
    ) -> Result<(), MpiError>
    where
        T: Element,
    {
        let size = self.size;
        let op = |op: OpBuilder<'a>| op.read(input).write(output);
        self.submit("mpi allgather", op, move |held| {
            let (input, output) = held.refs();
            output.clear();
            output.resize(input.len() * size, T::default());
            let (from, into) = (Buffer::of(input)?, Buffer::of_mut(output)?);
            Ok(Call::Allgather { from, into })
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
    pub fn reduce_scatter<'a, T>(
        &'a self,
        input: &'a Data<Vec<T>>,
        output: &'a Data<Vec<T>>,
        reduce: Reduce,
    ) -> Result<(), MpiError>
    where
        T: Element,
    {
        let size = self.size;
        let op = |op: OpBuilder<'a>| op.read(input).write(output);
        self.submit("mpi reduce_scatter", op, move |held| {
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
            Ok(Call::ReduceScatter { from, into, reduce })
        })
    }

    /// Pushes a send of `data` to rank `to`, with `tag`: done when MPI no longer needs the
    /// buffer.
    ///
    /// # Errors
    ///
    /// [`MpiError::NoSuchRank`]; as [`allreduce`](Self::allreduce) otherwise.
    pub fn send<T>(&self, data: &Data<Vec<T>>, to: usize, tag: u16) -> Result<(), MpiError>
    where
        T: Element,
    {
        let to = self.rank_number(to)?;
        self.submit(
            "mpi send",
            |op| op.read(data),
            move |held| {
                let buffer = Buffer::of(held.refs())?;
                let tag = c_int::from(tag);
                Ok(Call::Send { buffer, to, tag })
            },
        )
    }

    /// Pushes a receive into `data` from rank `from`, with `tag`. The vector must be as long
    /// as the message; a longer message fails the op with MPI's truncation error.
    ///
    /// # Errors
    ///
    /// [`MpiError::NoSuchRank`]; as [`allreduce`](Self::allreduce) otherwise.
    pub fn recv<T>(&self, data: &Data<Vec<T>>, from: usize, tag: u16) -> Result<(), MpiError>
    where
        T: Element,
    {
        let from = self.rank_number(from)?;
        self.submit(
            "mpi recv",
            |op| op.write(data),
            move |held| {
                let buffer = Buffer::of_mut(held.refs())?;
                let tag = c_int::from(tag);
                Ok(Call::Recv { buffer, from, tag })
            },
        )
    }

    /// Pushes a barrier: done once every rank has pushed and reached it.
    ///
    /// # Errors
    ///
    /// A push's errors.
    pub fn barrier(&self) -> Result<(), MpiError> {
        let mut next = lock(&self.next);
        let issue = self.issue(&mut next, "mpi barrier");
        self.engine
            .op("mpi barrier")
            .reads([self.ops])
            .prop(FnProperty::Async)
            .push_async(move |_, done| {
                issue.hand_over(
                    Call::Barrier,
                    Box::new(move |outcome| done.complete(outcome)),
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

    /// The guard of op `op`, numbered `next` (which it advances; the caller holds the lock
    /// until the op is pushed).
    fn issue(&self, next: &mut u64, op: &'static str) -> Issue {
        let sequence = *next;
        *next += 1;
        Issue {
            lane: self.lane,
            sequence,
            op,
            sender: Some(self.thread.sender.clone()),
            skipped: Arc::clone(&self.skipped),
        }
    }

    /// Pushes op `name` (`op` names its data; it also reads the `ops` var), whose function makes
    /// its MPI call with `prepare` and hands it to the communication thread; a `prepare` error
    /// fails the op (and, as a skip would, stops the communicator: the other ranks start the
    /// call).
    fn submit<'a, L, F>(
        &'a self,
        name: &'static str,
        op: impl FnOnce(OpBuilder<'a>) -> TypedOp<'a, L>,
        prepare: F,
    ) -> Result<(), MpiError>
    where
        L: AccessList,
        F: FnOnce(&mut Held<L>) -> Result<Call, MpiError> + Send + 'static,
    {
        let mut next = lock(&self.next);
        let issue = self.issue(&mut next, name);
        op(self.engine.op(name))
            .reads([self.ops])
            .prop(FnProperty::Async)
            .push_async(move |_, mut held| match prepare(&mut held) {
                Ok(call) => issue.hand_over(call, Box::new(move |outcome| held.complete(outcome))),
                Err(error) => {
                    // The skip is recorded before the op completes (see `Issue`).
                    drop(issue);
                    held.fail(error);
                }
            })?;
        Ok(())
    }
}

/// An op's place in its communicator's order, owned by its function: handing the call over
/// uses it; dropped unused (the op skipped, or failed before its call), it reports a skip.
struct Issue {
    lane: LaneId,
    sequence: u64,
    op: &'static str,
    /// `None` once used.
    sender: Option<std::sync::mpsc::Sender<Message>>,
    /// The communicator's record of a skip.
    skipped: Arc<Mutex<Option<String>>>,
}

impl Issue {
    /// Hands `call` to the communication thread, to start in its turn; `finish` completes the
    /// op. If the thread is gone, the op fails.
    fn hand_over(mut self, call: Call, finish: Finish) {
        let Some(sender) = self.sender.take() else {
            return;
        };
        let transfer = Transfer { call, finish };
        if let Err(returned) = sender.send(Message::Transfer(self.lane, self.sequence, transfer))
            && let Message::Transfer(_, _, transfer) = returned.0
        {
            (transfer.finish)(Err(MpiError::Closed));
        }
    }
}

impl Drop for Issue {
    fn drop(&mut self) {
        if let Some(sender) = self.sender.take() {
            let reason = skip_reason(self.op, self.sequence);
            lock(&self.skipped).get_or_insert_with(|| reason.clone());
            let _ = sender.send(Message::Skip(self.lane, self.sequence, reason));
        }
    }
}

/// Why a skip of op `op` (number `sequence`) stops the communicator.
fn skip_reason(op: &str, sequence: u64) -> String {
    format!("`{op}` (op {sequence} of the communicator) was skipped or failed before its call")
}

/// Locks `mutex`, whose data a panic cannot leave inconsistent (an `Option` replaced whole).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for Comm {
    /// Waits for the communicator's ops, then frees it (a split one) on the thread; the last
    /// communicator dropped stops the thread, which finalizes MPI (`thread::Thread`).
    fn drop(&mut self) {
        let _ = self.engine.wait_for_var(self.ops);
        let _ = self.thread.sender.send(Message::Free(self.lane));
        let _ = self.engine.delete_var(self.ops, || {});
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
