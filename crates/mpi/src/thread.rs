//! The communication thread: it initializes MPI (so `MPI_THREAD_FUNNELED` suffices: it makes
//! every MPI call), starts the ops' non-blocking calls in their sequence order (`comm.rs`),
//! holding back those that arrive before a predecessor, polls the requests in flight with
//! `MPI_Test` (which also drives MPI's progress), completes each op whose request is done, and
//! finalizes MPI when the last communicator is dropped.
//!
//! It serves every communicator of the process, each a [`Lane`] with its own order: the world
//! (lane 0) and those split from it, which it makes (`MPI_Comm_split`, a blocking call, in the
//! parent's turn) and frees.
//!
//! While requests are in flight it polls without sleeping (spinning briefly between rounds,
//! then yielding): a non-blocking collective progresses only inside MPI's calls. With nothing
//! in flight it looks for the next message for a few tens of microseconds, then blocks on its
//! channel. An allreduce is made blocking until the world's first split (`Call::make` and
//! `Lane::blocking` say why).

use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, c_char, c_int};
use std::mem;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpi::Threading;
use mpi::ffi::{self, MPI_Comm, MPI_Request};
use mpi::raw::AsRaw;
use mpi::topology::Communicator;

use crate::error::MpiError;
use crate::transfer::{Finish, Made, Transfer};

/// A communicator's number on the thread: 0 is the world.
pub(crate) type LaneId = u32;

/// What the communicators and their ops send the thread.
pub(crate) enum Message {
    /// The call of the op of this sequence number of a communicator, to start in its turn.
    Transfer(LaneId, u64, Transfer),
    /// The op of this sequence number was skipped or failed before its call (why): in its
    /// turn, the communicator stops.
    Skip(LaneId, u64, String),
    /// A split of a communicator (`Comm::split`), made in the turn of this sequence number.
    Split(LaneId, u64, Split),
    /// `Comm::wait` after a skip, once every op pushed before it is done: the thread resumes
    /// the communicator and replies. It comes after the messages of those ops, so their turns
    /// are taken by then.
    Resume(LaneId, Sender<()>),
    /// A communicator split from the world is dropped, its ops done: the thread frees it.
    Free(LaneId),
    /// The last communicator is dropped: finish what is in flight, then finalize MPI.
    Stop,
}

/// A split's arguments (MPI's color, or `MPI_UNDEFINED` for none, and key) and where its
/// result goes: the new communicator, or `None` for a rank of no color.
pub(crate) struct Split {
    pub(crate) color: Option<u16>,
    pub(crate) key: i32,
    pub(crate) reply: Sender<Result<Option<Member>, MpiError>>,
}

/// This process's place in a communicator the thread serves.
pub(crate) struct Member {
    pub(crate) lane: LaneId,
    pub(crate) rank: usize,
    pub(crate) size: usize,
}

/// A started communication thread: this process's rank among `size` in the world.
pub(crate) struct Started {
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) thread: Thread,
}

/// The communication thread, shared by the communicators (each holds an `Arc`): the last one
/// dropped stops it, which finalizes MPI.
pub(crate) struct Thread {
    pub(crate) sender: Sender<Message>,
    handle: Option<JoinHandle<()>>,
}

impl Drop for Thread {
    /// Stops the thread, once what is in flight is done, and waits for it: MPI's finalize, a
    /// collective call, returns once every rank finalizes.
    fn drop(&mut self) {
        let _ = self.sender.send(Message::Stop);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Starts the communication thread, which initializes MPI.
pub(crate) fn start() -> Result<Started, MpiError> {
    let (sender, receiver) = mpsc::channel();
    let (report, reported) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("depengine-mpi".to_owned())
        .spawn(move || run(&report, &receiver))
        .map_err(|error| MpiError::ThreadStart(error.to_string()))?;
    match reported.recv() {
        Ok(Ok((rank, size))) => Ok(Started {
            rank,
            size,
            thread: Thread {
                sender,
                handle: Some(thread),
            },
        }),
        Ok(Err(error)) => {
            let _ = thread.join();
            Err(error)
        }
        Err(_) => {
            let _ = thread.join();
            Err(MpiError::ThreadStart(
                "it stopped before MPI was initialized".to_owned(),
            ))
        }
    }
}

/// The thread's body: initializes MPI, reports the rank and size, serves the ops.
fn run(report: &Sender<Result<(usize, usize), MpiError>>, receiver: &Receiver<Message>) {
    let Some((universe, threading)) = mpi::initialize_with_threading(Threading::Funneled) else {
        let _ = report.send(Err(MpiError::AlreadyInitialized));
        return;
    };
    if threading == Threading::Single {
        let _ = report.send(Err(MpiError::ThreadLevel {
            provided: "MPI_THREAD_SINGLE",
        }));
        return;
    }
    let world = universe.world();
    let comm = world.as_raw();
    // SAFETY: `comm` is MPI_COMM_WORLD, valid until `universe` finalizes MPI; the handler is
    // MPI's predefined one.
    let code = unsafe { ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN) };
    if code != 0 {
        let _ = report.send(Err(mpi_error(code)));
        return;
    }
    let (rank, size) = (world.rank(), world.size());
    let (Ok(rank), Ok(size)) = (usize::try_from(rank), usize::try_from(size)) else {
        return;
    };
    if report.send(Ok((rank, size))).is_err() {
        return;
    }
    // A panic here would drop the ops' completions while MPI may still use their buffers, and
    // finalize MPI with requests active: the process aborts instead.
    let _abort = AbortOnUnwind;
    Serving {
        lanes: HashMap::from([(0, Lane::new(comm, true))]),
        next_lane: 1,
        in_flight: Vec::new(),
    }
    .serve(receiver);
    // Finalizes MPI, on the thread that initialized it.
    drop(universe);
}

/// Aborts the process if dropped by a panic (see `run`).
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("depengine-mpi: the communication thread panicked with MPI calls in flight");
            std::process::abort();
        }
    }
}

/// The thread's state while it serves ops.
struct Serving {
    /// The communicators, by number.
    lanes: HashMap<LaneId, Lane>,
    /// The number the next split communicator gets.
    next_lane: LaneId,
    /// The requests started and not yet complete, each with its op's completion.
    in_flight: Vec<(MPI_Request, Finish)>,
}

/// One communicator's order on the thread.
struct Lane {
    comm: MPI_Comm,
    /// The sequence number of the next op to start.
    next: u64,
    /// Ops that arrived before a predecessor, by sequence number.
    early: BTreeMap<u64, Turn>,
    /// Why the communicator is stopped, if it is (see `comm.rs`).
    stopped: Option<String>,
    /// Whether its allreduces are blocking calls (`Call::make`): only the world's, until its
    /// first split. Every rank of the world takes that split at the same place in its order
    /// (one given no color too), so the ranks agree on each call's kind; and no two ranks'
    /// threads can then each block in an allreduce that waits for the other's (splits are
    /// the blocking calls left: `Comm::split` says when to make them).
    blocking: bool,
}

impl Lane {
    fn new(comm: MPI_Comm, blocking: bool) -> Self {
        Lane {
            comm,
            next: 0,
            early: BTreeMap::new(),
            stopped: None,
            blocking,
        }
    }
}

/// What an op's turn brings: its call, its skip (why), or a split.
enum Turn {
    Transfer(Transfer),
    Skip(String),
    Split(Split),
}

impl Turn {
    /// Fails the turn's op, or its split, with `error` (a skip has nothing to fail).
    fn fail(self, error: MpiError) {
        match self {
            Turn::Transfer(transfer) => (transfer.finish)(Err(error)),
            Turn::Split(split) => {
                let _ = split.reply.send(Err(error));
            }
            Turn::Skip(_) => {}
        }
    }
}

/// Rounds without progress spent spinning before polling yields the core between rounds.
const SPINS: u32 = 64;
/// How long the idle thread looks for a message before it sleeps.
const LINGER: Duration = Duration::from_micros(50);

impl Serving {
    /// Serves until the communicator stops it (or is gone) and nothing is in flight.
    fn serve(mut self, receiver: &Receiver<Message>) {
        let mut stopping = false;
        let mut idle = 0_u32;
        loop {
            // Take every message; block only with nothing in flight.
            loop {
                let message = if self.in_flight.is_empty() && !stopping {
                    wait_for_message(receiver)
                } else {
                    receiver.try_recv()
                };
                let lane = match message {
                    Ok(Message::Transfer(lane, sequence, transfer)) => {
                        self.arrive(lane, sequence, Turn::Transfer(transfer))
                    }
                    Ok(Message::Skip(lane, sequence, reason)) => {
                        self.arrive(lane, sequence, Turn::Skip(reason))
                    }
                    Ok(Message::Split(lane, sequence, split)) => {
                        self.arrive(lane, sequence, Turn::Split(split))
                    }
                    Ok(Message::Resume(lane, reply)) => {
                        if let Some(lane) = self.lanes.get_mut(&lane) {
                            lane.stopped = None;
                        }
                        let _ = reply.send(());
                        None
                    }
                    Ok(Message::Free(lane)) => {
                        self.free(lane);
                        None
                    }
                    Ok(Message::Stop) | Err(TryRecvError::Disconnected) => {
                        stopping = true;
                        break;
                    }
                    Err(TryRecvError::Empty) => break,
                };
                if let Some(lane) = lane {
                    self.take_turns(lane);
                }
                idle = 0;
            }
            if self.poll() {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                if idle < SPINS {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            if stopping && self.in_flight.is_empty() {
                // Ops still held back wait for a predecessor that will never come (the
                // communicator is gone): they fail.
                let ids: Vec<LaneId> = self.lanes.keys().copied().collect();
                for id in ids {
                    self.free(id);
                }
                return;
            }
        }
    }

    /// Files `turn`, of op `sequence` of communicator `id`, to be taken in its turn; `id`, if
    /// the thread serves it (a turn of a freed one fails).
    fn arrive(&mut self, id: LaneId, sequence: u64, turn: Turn) -> Option<LaneId> {
        let Some(lane) = self.lanes.get_mut(&id) else {
            turn.fail(MpiError::Closed);
            return None;
        };
        lane.early.insert(sequence, turn);
        Some(id)
    }

    /// Takes the turns of communicator `id` that have come: starts each call in sequence
    /// order, or stops the communicator at a skip; while it is stopped, the calls fail instead.
    fn take_turns(&mut self, id: LaneId) {
        loop {
            let Some(lane) = self.lanes.get_mut(&id) else {
                return;
            };
            let Some(turn) = lane.early.remove(&lane.next) else {
                return;
            };
            lane.next += 1;
            let (comm, blocking) = (lane.comm, lane.blocking);
            match (turn, &lane.stopped) {
                (Turn::Skip(reason), _) => {
                    lane.stopped.get_or_insert(reason);
                }
                (turn, Some(reason)) => turn.fail(MpiError::Stopped(reason.clone())),
                (Turn::Transfer(transfer), None) => self.start(comm, blocking, transfer),
                (Turn::Split(split), None) => {
                    lane.blocking = false;
                    let made = self.split(comm, split.color, split.key);
                    let _ = split.reply.send(made);
                }
            }
        }
    }

    /// Splits `parent` (a blocking collective call over its ranks, as a split is rare): the
    /// new communicator's lane, or `None` for a rank of no color.
    fn split(
        &mut self,
        parent: MPI_Comm,
        color: Option<u16>,
        key: i32,
    ) -> Result<Option<Member>, MpiError> {
        // SAFETY: MPI_UNDEFINED and MPI_COMM_NULL, constants of the MPI library (rsmpi's shim).
        let (undefined, null) = unsafe { (ffi::RSMPI_UNDEFINED, ffi::RSMPI_COMM_NULL) };
        let color = color.map_or(undefined, c_int::from);
        let mut comm = null;
        // SAFETY: `parent` is a communicator this thread serves (the world, or one it split
        // and has not freed); `comm` is written by MPI.
        let code = unsafe { ffi::MPI_Comm_split(parent, color, key, &raw mut comm) };
        outcome(code)?;
        if comm == null {
            return Ok(None);
        }
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: `comm` is the communicator MPI just made; the handler is MPI's predefined
        // one; rank and size are written by MPI.
        let code = unsafe {
            [
                ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN),
                ffi::MPI_Comm_rank(comm, &raw mut rank),
                ffi::MPI_Comm_size(comm, &raw mut size),
            ]
        }
        .into_iter()
        .find(|&code| code != 0);
        let (Ok(rank), Ok(size), None) = (usize::try_from(rank), usize::try_from(size), code)
        else {
            // SAFETY: the communicator MPI just made, used by nothing else.
            unsafe { ffi::MPI_Comm_free(&raw mut comm) };
            return Err(code.map_or_else(
                || MpiError::Mpi {
                    code: 0,
                    message: "MPI gave a split communicator a negative rank or size".to_owned(),
                },
                mpi_error,
            ));
        };
        let lane = self.next_lane;
        self.next_lane += 1;
        self.lanes.insert(lane, Lane::new(comm, false));
        Ok(Some(Member { lane, rank, size }))
    }

    /// Stops serving communicator `id`: its turns still held back fail (they wait for a
    /// predecessor that will not come), and a split one is freed (nothing is in flight on it:
    /// its `Comm` waited for its ops, or the thread is stopping with nothing in flight).
    fn free(&mut self, id: LaneId) {
        let Some(mut lane) = self.lanes.remove(&id) else {
            return;
        };
        for turn in mem::take(&mut lane.early).into_values() {
            turn.fail(MpiError::Closed);
        }
        if id != 0 {
            // SAFETY: a communicator MPI made for a split, which nothing uses any more.
            let _ = unsafe { ffi::MPI_Comm_free(&raw mut lane.comm) };
        }
    }

    /// Makes `transfer`'s call; a call MPI refuses, or a blocking one made, completes its op.
    fn start(&mut self, comm: MPI_Comm, blocking: bool, transfer: Transfer) {
        let Transfer { call, finish } = transfer;
        // SAFETY: MPI_REQUEST_NULL, a constant of the MPI library (rsmpi's shim).
        let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
        match call.make(comm, blocking, &mut request) {
            Made::Started(0) => self.in_flight.push((request, finish)),
            Made::Started(code) | Made::Done(code) => finish(outcome(code)),
            Made::Failed(error) => finish(Err(error)),
        }
    }

    /// Tests each request in flight, completing the ops whose requests are done; whether any
    /// was.
    fn poll(&mut self) -> bool {
        let before = self.in_flight.len();
        let mut at = 0;
        while at < self.in_flight.len() {
            let mut flag: c_int = 0;
            let request = &raw mut self.in_flight[at].0;
            // SAFETY: the request is one MPI started and has not completed (a completed one
            // leaves this list at once); its buffers are held by its op (the ownership rule of
            // `transfer.rs`).
            let code = unsafe { ffi::MPI_Test(request, &raw mut flag, ffi::RSMPI_STATUS_IGNORE) };
            // An error is the failed operation's, returned as it completes (MPI 3.1, 3.7.3).
            if code != 0 || flag != 0 {
                let (_, finish) = self.in_flight.swap_remove(at);
                finish(outcome(code));
            } else {
                at += 1;
            }
        }
        self.in_flight.len() < before
    }
}

/// The next message, with nothing in flight: looked for (yielding the core between looks) for
/// up to `LINGER`, since an op often follows the completion of the one before it, and then
/// waited for, asleep.
fn wait_for_message(receiver: &Receiver<Message>) -> Result<Message, TryRecvError> {
    let since = Instant::now();
    loop {
        match receiver.try_recv() {
            Err(TryRecvError::Empty) if since.elapsed() < LINGER => std::thread::yield_now(),
            Err(TryRecvError::Empty) => {
                return receiver.recv().map_err(|_| TryRecvError::Disconnected);
            }
            other => return other,
        }
    }
}

/// The outcome of a call that returned `code`.
fn outcome(code: c_int) -> Result<(), MpiError> {
    if code == 0 {
        Ok(())
    } else {
        Err(mpi_error(code))
    }
}

/// MPI's error `code`, with its text.
pub(crate) fn mpi_error(code: c_int) -> MpiError {
    let mut text = [0 as c_char; 1024];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING (256 in Open MPI and MPICH) characters and
    // more; MPI writes a NUL-terminated string and its length.
    let known = unsafe { ffi::MPI_Error_string(code, text.as_mut_ptr(), &raw mut len) } == 0;
    let message = if known {
        // SAFETY: MPI wrote a NUL-terminated string into `text`, which ends in NULs besides.
        unsafe { CStr::from_ptr(text.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        "an error MPI does not describe".to_owned()
    };
    MpiError::Mpi { code, message }
}
