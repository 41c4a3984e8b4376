//! The communication thread: it initializes MPI (so `MPI_THREAD_FUNNELED` suffices: it makes
//! every MPI call), starts each op's non-blocking call in the order the ops hand them over,
//! polls the requests in flight with `MPI_Test` (which also drives MPI's progress), completes
//! each op whose request is done, and finalizes MPI when its communicator is dropped.
//!
//! Polling backs off while nothing completes: it spins briefly, then yields, then sleeps a few
//! microseconds per round; with nothing in flight it blocks on its channel.

use std::ffi::{CStr, c_char, c_int};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::Duration;

use mpi::Threading;
use mpi::ffi::{self, MPI_Comm, MPI_Request};
use mpi::raw::AsRaw;
use mpi::topology::Communicator;

use crate::error::MpiError;
use crate::transfer::{Finish, Transfer};

/// What the communicator sends its thread.
pub(crate) enum Message {
    /// An op's call, to start now.
    Transfer(Transfer),
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
    Serving {
        comm,
        in_flight: Vec::new(),
    }
    .serve(receiver);
    // Finalizes MPI, on the thread that initialized it.
    drop(universe);
}

/// The thread's state while it serves ops.
struct Serving {
    comm: MPI_Comm,
    /// The requests started and not yet complete, each with its op's completion.
    in_flight: Vec<(MPI_Request, Finish)>,
}

/// Rounds without progress spent spinning, then yielding, before polling sleeps.
const SPINS: u32 = 64;
const YIELDS: u32 = 256;
/// How long a poll sleeps once it has spun and yielded.
const NAP: Duration = Duration::from_micros(20);

impl Serving {
    /// Serves until the communicator stops it (or is gone) and nothing is in flight.
    fn serve(mut self, receiver: &Receiver<Message>) {
        let mut stopping = false;
        let mut idle = 0_u32;
        loop {
            // Take every op handed over, in order; block only with nothing in flight.
            loop {
                let message = if self.in_flight.is_empty() && !stopping {
                    receiver.recv().map_err(|_| TryRecvError::Disconnected)
                } else if idle >= YIELDS && !stopping {
                    receiver.recv_timeout(NAP).map_err(|error| match error {
                        RecvTimeoutError::Timeout => TryRecvError::Empty,
                        RecvTimeoutError::Disconnected => TryRecvError::Disconnected,
                    })
                } else {
                    receiver.try_recv()
                };
                match message {
                    Ok(Message::Transfer(transfer)) => {
                        self.start(transfer);
                        idle = 0;
                    }
                    Ok(Message::Stop) | Err(TryRecvError::Disconnected) => {
                        stopping = true;
                        break;
                    }
                    Err(TryRecvError::Empty) => break,
                }
            }
            if self.poll() {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                if idle < SPINS {
                    std::hint::spin_loop();
                } else if idle < YIELDS || stopping {
                    std::thread::yield_now();
                }
            }
            if stopping && self.in_flight.is_empty() {
                return;
            }
        }
    }

    /// Starts `transfer`'s call; a call MPI refuses completes its op with MPI's error.
    fn start(&mut self, transfer: Transfer) {
        let Transfer { call, finish } = transfer;
        // SAFETY: MPI_REQUEST_NULL, a constant of the MPI library (rsmpi's shim).
        let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
        let code = call.start(self.comm, &mut request);
        if code == 0 {
            self.in_flight.push((request, finish));
        } else {
            finish(Err(mpi_error(code)));
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
            // leaves this list at once); its buffers are held by its op's completion (the
            // ownership rule of `transfer.rs`).
            let code = unsafe { ffi::MPI_Test(request, &raw mut flag, ffi::RSMPI_STATUS_IGNORE) };
            if code != 0 || flag != 0 {
                let (_, finish) = self.in_flight.swap_remove(at);
                finish(if code == 0 {
                    Ok(())
                } else {
                    Err(mpi_error(code))
                });
            } else {
                at += 1;
            }
        }
        self.in_flight.len() < before
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
