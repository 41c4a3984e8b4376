//! The communication thread: it initializes MPI (so `MPI_THREAD_FUNNELED` suffices: it makes
//! every MPI call), starts the ops' non-blocking calls in their sequence order (`comm.rs`),
//! holding back those that arrive before a predecessor, polls the requests in flight with
//! `MPI_Test` (which also drives MPI's progress), completes each op whose request is done, and
//! finalizes MPI when its communicator is dropped.
//!
//! While requests are in flight it polls without sleeping (spinning briefly between rounds,
//! then yielding): a non-blocking collective progresses only inside MPI's calls. With nothing
//! in flight it looks for the next message for a few tens of microseconds, then blocks on its
//! channel. An allreduce is made blocking (`Call::make` says why).

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpi::Threading;
use mpi::ffi::{self, MPI_Comm, MPI_Request};
use mpi::raw::AsRaw;
use mpi::topology::Communicator;

use crate::error::MpiError;
use crate::transfer::{Finish, Made, Transfer};

/// What the communicator and its ops send the thread.
pub(crate) enum Message {
    /// The call of the op of this sequence number, to start in its turn.
    Transfer(u64, Transfer),
    /// The op of this sequence number was skipped or failed before its call (why): in its
    /// turn, the communicator stops.
    Skip(u64, String),
    /// `Comm::wait` after a skip, once every op pushed before it is done: the thread resumes
    /// the communicator and replies. It comes after the messages of those ops, so their turns
    /// are taken by then.
    Resume(Sender<()>),
    /// The communicator is dropped: finish what is in flight, then finalize MPI.
    Stop,
}

/// A started communication thread: this process's rank among `size`.
pub(crate) struct Started {
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) sender: Sender<Message>,
    pub(crate) thread: JoinHandle<()>,
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
            sender,
            thread,
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
        comm,
        next: 0,
        early: BTreeMap::new(),
        stopped: None,
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
    comm: MPI_Comm,
    /// The sequence number of the next op to start.
    next: u64,
    /// Ops that arrived before a predecessor, by sequence number.
    early: BTreeMap<u64, Turn>,
    /// Why the communicator is stopped, if it is (see `comm.rs`).
    stopped: Option<String>,
    /// The requests started and not yet complete, each with its op's completion.
    in_flight: Vec<(MPI_Request, Finish)>,
}

/// What an op's turn brings: its call, or its skip (why).
enum Turn {
    Transfer(Transfer),
    Skip(String),
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
                match message {
                    Ok(Message::Transfer(sequence, transfer)) => {
                        self.early.insert(sequence, Turn::Transfer(transfer));
                    }
                    Ok(Message::Skip(sequence, reason)) => {
                        self.early.insert(sequence, Turn::Skip(reason));
                    }
                    Ok(Message::Resume(reply)) => {
                        self.stopped = None;
                        let _ = reply.send(());
                    }
                    Ok(Message::Stop) | Err(TryRecvError::Disconnected) => {
                        stopping = true;
                        break;
                    }
                    Err(TryRecvError::Empty) => break,
                }
                self.take_turns();
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
                for (_, turn) in std::mem::take(&mut self.early) {
                    if let Turn::Transfer(transfer) = turn {
                        (transfer.finish)(Err(MpiError::Closed));
                    }
                }
                return;
            }
        }
    }

    /// Takes the turns that have come: starts each call in sequence order, or stops the
    /// communicator at a skip; while it is stopped, the calls fail instead.
    fn take_turns(&mut self) {
        while let Some(turn) = self.early.remove(&self.next) {
            self.next += 1;
            match turn {
                Turn::Skip(reason) => {
                    self.stopped.get_or_insert(reason);
                }
                Turn::Transfer(transfer) => match &self.stopped {
                    Some(reason) => (transfer.finish)(Err(MpiError::Stopped(reason.clone()))),
                    None => self.start(transfer),
                },
            }
        }
    }

    /// Makes `transfer`'s call; a call MPI refuses, or a blocking one made, completes its op.
    fn start(&mut self, transfer: Transfer) {
        let Transfer { call, finish } = transfer;
        // SAFETY: MPI_REQUEST_NULL, a constant of the MPI library (rsmpi's shim).
        let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
        match call.make(self.comm, &mut request) {
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
