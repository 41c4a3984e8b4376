//! The futures of [`Engine::wait_for_var_async`] and [`Engine::wait_for_all_async`]: the
//! blocking waits' twins for async code, which wait without blocking a thread.
//!
//! Each is a plain state machine over the engine's own wake-ups, so it works with any
//! executor: a [`WaitForVar`] polls the one-shot its wait op sets (`wait/one_shot.rs`), a
//! [`WaitForAll`] registers with the pending-op counter (`wait/idle.rs`, "Async waiters"); each
//! stores the waker of its latest poll in the same critical section as it checks, which is why
//! no wake-up is lost (argued in those files, checked by the loom models).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::api::{Engine, after_idle, blocking, var_outcome};
use crate::error::{EngineError, Result};
use crate::wait::deadlock::WaitOneShot;
use crate::wait::idle::IdleWaiter;

/// The future of [`Engine::wait_for_var_async`]: resolves once every op pushed on the var
/// before it was created has completed, with the var's failure (taken and cleared) as
/// [`EngineError::OpFailed`], or with the error that kept the wait from starting.
///
/// `Send`, `Unpin`, and executor-agnostic; it does not keep the engine alive (the engine
/// completes its wait op before it shuts down). Dropped before it resolves, it takes nothing
/// from the var, unless the failure was already on its way: then the next
/// [`Engine::wait_for_all`] returns it.
///
/// # Panics
///
/// Polled again after it resolved.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, EngineError, WaitForVar};
/// use futures::executor::block_on;
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let (a, b) = (engine.new_var()?, engine.new_var()?);
/// engine.op("fill a").writes([a]).push_sync(|_| {})?;
/// engine.op("fill b").writes([b]).push_sync(|_| Err("no".into()))?;
///
/// // Any number of waits, awaited together.
/// let waits: Vec<WaitForVar> = vec![engine.wait_for_var_async(a), engine.wait_for_var_async(b)];
/// let outcomes = block_on(futures::future::join_all(waits));
/// assert!(outcomes[0].is_ok());
/// assert!(matches!(&outcomes[1], Err(EngineError::OpFailed(f)) if f.op_name() == "fill b"));
///
/// // Dropped before it resolves, a wait gives its failure up to a later wait.
/// engine.op("fill b again").writes([b]).push_sync(|_| Err("no".into()))?;
/// drop(engine.wait_for_var_async(b));
/// assert!(engine.wait_for_all().is_err());
/// # Ok::<(), EngineError>(())
/// ```
#[must_use = "a future does nothing unless polled; drop it to give up the wait"]
pub struct WaitForVar {
    state: VarWaitState,
}

enum VarWaitState {
    /// The wait could not start: returned by the first poll.
    Refused(EngineError),
    /// The wait op is pushed; its release sets the one-shot.
    Waiting(Arc<WaitOneShot>),
    /// The future resolved.
    Done,
}

impl WaitForVar {
    pub(crate) fn refused(error: EngineError) -> Self {
        WaitForVar {
            state: VarWaitState::Refused(error),
        }
    }

    pub(crate) fn waiting(one_shot: Arc<WaitOneShot>) -> Self {
        WaitForVar {
            state: VarWaitState::Waiting(one_shot),
        }
    }
}

impl Future for WaitForVar {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let outcome = match std::mem::replace(&mut self.state, VarWaitState::Done) {
            VarWaitState::Waiting(one_shot) => match one_shot.poll_take(cx) {
                Poll::Ready(outcome) => var_outcome(outcome),
                Poll::Pending => {
                    self.state = VarWaitState::Waiting(one_shot);
                    return Poll::Pending;
                }
            },
            VarWaitState::Refused(error) => Err(error),
            VarWaitState::Done => panic!("`WaitForVar` polled after it resolved"),
        };
        Poll::Ready(outcome)
    }
}

impl Drop for WaitForVar {
    fn drop(&mut self) {
        if let VarWaitState::Waiting(one_shot) = &self.state {
            // As a blocking wait that gives up (`deadlock.rs`): if the wait op was not
            // released yet, it will take nothing. Otherwise its value is left in the one-shot: a
            // failure it holds was never marked reported, so `wait_for_all` returns it.
            let _ = one_shot.abandon();
        }
    }
}

impl fmt::Debug for WaitForVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            VarWaitState::Refused(_) => "refused",
            VarWaitState::Waiting(_) => "waiting",
            VarWaitState::Done => "done",
        };
        f.debug_struct("WaitForVar").field("state", &state).finish()
    }
}

/// The future of [`Engine::wait_for_all_async`]: resolves once the engine is idle, then does
/// what [`Engine::wait_for_all`] does after its wait (returns the first unreported failure,
/// clears the var failures, gives back the memory a burst of waiting ops grew).
///
/// `Send`, `Unpin`, and executor-agnostic. It holds a clone of the engine until it resolves
/// or is dropped (so, like any clone, it may be the last one, and shut the engine down when it
/// goes). Dropped before it resolves, it just stops waiting: the failures stay for the next
/// wait.
///
/// # Panics
///
/// Polled again after it resolved.
///
/// # Examples
///
/// ```
/// use std::future::Future;
/// use std::pin::Pin;
/// use std::sync::mpsc;
/// use std::task::{Context, Waker};
///
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let var = engine.new_var()?;
/// let (tx, rx) = mpsc::channel();
/// engine.op("load").writes([var]).push_async(move |_, done| tx.send(done).unwrap())?;
/// let done = rx.recv().unwrap(); // "load" is pending until its token completes
///
/// let mut all = engine.wait_for_all_async();
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(Pin::new(&mut all).poll(&mut cx).is_pending()); // no thread blocks
/// done.ok();
/// futures::executor::block_on(all)?; // woken by the completion
/// assert_eq!(engine.stats().pending_ops, 0);
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[must_use = "a future does nothing unless polled"]
pub struct WaitForAll {
    state: AllWaitState,
}

enum AllWaitState {
    /// The wait could not start: returned by the first poll.
    Refused(EngineError),
    /// Registered with the engine's pending-op counter from its first `Pending` on; also
    /// waiting for the values' releases unless created by a thread running the engine's work
    /// (see `api/blocking.rs`, `wait_idle`).
    Waiting {
        engine: Engine,
        waiter: IdleWaiter,
        releases: bool,
    },
    /// The future resolved.
    Done,
}

impl WaitForAll {
    pub(crate) fn refused(error: EngineError) -> Self {
        WaitForAll {
            state: AllWaitState::Refused(error),
        }
    }

    pub(crate) fn waiting(engine: Engine) -> Self {
        WaitForAll {
            state: AllWaitState::Waiting {
                releases: blocking::waits_for_releases(engine.id()),
                engine,
                waiter: IdleWaiter::default(),
            },
        }
    }
}

impl Future for WaitForAll {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let outcome = match std::mem::replace(&mut self.state, AllWaitState::Done) {
            AllWaitState::Waiting {
                engine,
                mut waiter,
                releases,
            } => {
                let state = engine.state();
                // Ops first, then releases (which may push ops: a later poll checks again).
                if state.pending().poll_idle(&mut waiter, cx).is_pending()
                    || (releases && state.releases().poll_none(cx).is_pending())
                {
                    self.state = AllWaitState::Waiting {
                        engine,
                        waiter,
                        releases,
                    };
                    return Poll::Pending;
                }
                // Idle; `poll_idle` unregistered the waiter.
                after_idle(engine.state())
            }
            AllWaitState::Refused(error) => Err(error),
            AllWaitState::Done => panic!("`WaitForAll` polled after it resolved"),
        };
        Poll::Ready(outcome)
    }
}

impl Drop for WaitForAll {
    fn drop(&mut self) {
        if let AllWaitState::Waiting { engine, waiter, .. } = &mut self.state {
            engine.state().pending().forget_idle(waiter);
        }
    }
}

impl fmt::Debug for WaitForAll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            AllWaitState::Refused(_) => "refused",
            AllWaitState::Waiting { .. } => "waiting",
            AllWaitState::Done => "done",
        };
        f.debug_struct("WaitForAll").field("state", &state).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{WaitForAll, WaitForVar};

    fn send_unpin<T: Send + Unpin>() {}

    #[test]
    fn the_futures_are_send_and_unpin() {
        send_unpin::<WaitForVar>();
        send_unpin::<WaitForAll>();
    }
}
