//! The completer threads: they finish async ops late and out of order (the ops' writes, then
//! their tokens completed, failed or dropped), as work that completes elsewhere does.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::{Builder, Scope};
use std::time::Duration;

use crate::check;
use crate::job::Injected;
use crate::rng::Rng;
use crate::watchdog;

/// An async op's remaining work, with its token.
pub(crate) type Task = Box<dyn FnOnce() + Send>;

/// A completer keeps up to this many tasks back, finishing a random one as each arrives.
const HELD: usize = 8;
/// How long a completer with tasks in hand waits for another before it finishes them all.
const LATE: Duration = Duration::from_micros(200);

/// Senders to the completer threads.
#[derive(Clone)]
pub(crate) struct Completers(Vec<Sender<Task>>);

impl Completers {
    /// Starts `count` completers in `scope`; they end once every sender is dropped.
    pub(crate) fn start<'s>(scope: &'s Scope<'s, '_>, count: usize, seed: u64) -> Self {
        let senders = (0..count)
            .map(|i| {
                let (sender, receiver) = channel();
                let rng = Rng::derive(seed, &[i as u64]);
                Builder::new()
                    .name(format!("soak-completer-{i}"))
                    .spawn_scoped(scope, move || serve(&receiver, rng))
                    .expect("a completer thread starts");
                sender
            })
            .collect();
        Completers(senders)
    }

    /// A sender to one of the completers, picked by `pick`.
    pub(crate) fn sender(&self, pick: u64) -> Sender<Task> {
        self.0[(pick % self.0.len() as u64) as usize].clone()
    }
}

/// Sends `task` to its completer; if that one is gone, runs it here (it still completes from
/// a thread other than the op's).
pub(crate) fn send(sender: &Sender<Task>, task: Task) {
    if let Err(returned) = sender.send(task) {
        run(returned.0);
    }
}

fn serve(receiver: &Receiver<Task>, mut rng: Rng) {
    let mut held: Vec<Task> = Vec::new();
    loop {
        let next = if held.is_empty() {
            receiver.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            receiver.recv_timeout(LATE)
        };
        match next {
            Ok(task) => {
                held.push(task);
                while held.len() > HELD {
                    run(held.swap_remove(rng.below(held.len())));
                }
            }
            Err(timeout_or_end) => {
                while !held.is_empty() {
                    run(held.swap_remove(rng.below(held.len())));
                }
                if timeout_or_end == RecvTimeoutError::Disconnected {
                    return;
                }
            }
        }
    }
}

/// Runs a task, catching the panics the soak injects (its token fails the op as it drops).
fn run(task: Task) {
    watchdog::tick();
    if let Err(payload) = catch_unwind(AssertUnwindSafe(task))
        && !payload.is::<Injected>()
    {
        check::fail("a completer task panicked unexpectedly".to_owned());
    }
}
