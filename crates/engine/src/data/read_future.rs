//! [`ReadData`]: the future of [`Engine::read_async`](crate::Engine::read_async).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use depengine_graph::Var;

use crate::api::Engine;
use crate::api::async_wait::WaitForVar;
use crate::data::cell::{CellPtr, SharedCell};
use crate::data::guard::ReadGuard;
use crate::data::hold::{self, Handed, HoldKind, HoldOneShot};
use crate::error::{EngineError, Result};

/// The future of [`Engine::read_async`](crate::Engine::read_async): resolves to a
/// [`ReadGuard`] once the writes pushed on the data before it completed, or to the failure the
/// data holds (taken and cleared, as [`Engine::wait_for_var`](crate::Engine::wait_for_var)
/// does). No thread blocks while it is pending; it works with any executor.
///
/// Dropped before it resolves, it gives up: its read hold releases the data as soon as it is
/// granted.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, EngineError, ReadData};
/// use futures::executor::block_on;
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let data = engine.data(vec![1_u32, 2, 3])?;
/// engine.op("append").write(&data).push_sync(|_, values| values.push(4))?;
/// // Made now, it resolves once the write pushed before it completed.
/// let read: ReadData<'_, Vec<u32>> = engine.read_async(&data);
/// assert_eq!(*block_on(read)?, [1, 2, 3, 4]);
///
/// // A failure the data holds is the future's error, taken and cleared.
/// engine.op("fails").write(&data).push_sync(|_, _| Err("disk full".into()))?;
/// let error = block_on(engine.read_async(&data)).unwrap_err();
/// assert!(matches!(error, EngineError::OpFailed(_)), "{error}");
/// assert_eq!(block_on(engine.read_async(&data))?.len(), 4);
/// # Ok::<(), EngineError>(())
/// ```
///
/// The data cannot be dropped (or taken back) while the future borrows it:
///
/// ```compile_fail,E0505
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// let data = engine.data(0_u64)?;
/// let read = engine.read_async(&data);
/// drop(data); // moves the data the future borrows
/// drop(read);
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[must_use = "a future does nothing unless polled"]
pub struct ReadData<'a, T> {
    engine: &'a Engine,
    cell: SharedCell<T>,
    var: Var,
    state: ReadState,
}

enum ReadState {
    /// The read could not start: returned by the next poll.
    Refused(EngineError),
    /// The hold is pushed; its op hands its completion over the one-shot.
    Holding(Arc<HoldOneShot>),
    /// The hold was skipped (the data failed): taking the failure.
    Failing(WaitForVar),
    /// The future resolved.
    Done,
}

impl<'a, T> ReadData<'a, T> {
    pub(crate) fn new(
        engine: &'a Engine,
        cell: CellPtr<T>,
        var: Var,
        first: Result<Arc<HoldOneShot>>,
    ) -> Self {
        let state = match first {
            Ok(one_shot) => ReadState::Holding(one_shot),
            Err(error) => ReadState::Refused(error),
        };
        ReadData {
            engine,
            cell: SharedCell(cell),
            var,
            state,
        }
    }
}

impl<T> Unpin for ReadData<'_, T> {}

impl<'a, T> Future for ReadData<'a, T> {
    type Output = Result<ReadGuard<'a, T>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match std::mem::replace(&mut self.state, ReadState::Done) {
                ReadState::Holding(one_shot) => match one_shot.poll_take(cx) {
                    Poll::Ready(Handed::Granted(completion)) => {
                        return Poll::Ready(Ok(ReadGuard::new(self.cell.0, completion)));
                    }
                    Poll::Ready(Handed::Skipped) => {
                        self.state = ReadState::Failing(self.engine.wait_for_var_async(self.var));
                    }
                    Poll::Pending => {
                        self.state = ReadState::Holding(one_shot);
                        return Poll::Pending;
                    }
                },
                ReadState::Failing(mut failing) => match Pin::new(&mut failing).poll(cx) {
                    Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                    // Cleared by another wait meanwhile: hold again.
                    Poll::Ready(Ok(())) => {
                        let one_shot = Arc::new(HoldOneShot::new());
                        self.state = match hold::push_hold(
                            self.engine.state(),
                            self.var,
                            HoldKind::Read,
                            &one_shot,
                        ) {
                            Ok(()) => ReadState::Holding(one_shot),
                            Err(error) => ReadState::Refused(error),
                        };
                    }
                    Poll::Pending => {
                        self.state = ReadState::Failing(failing);
                        return Poll::Pending;
                    }
                },
                ReadState::Refused(error) => return Poll::Ready(Err(error)),
                ReadState::Done => panic!("`ReadData` polled after it resolved"),
            }
        }
    }
}

impl<T> Drop for ReadData<'_, T> {
    fn drop(&mut self) {
        if let ReadState::Holding(one_shot) = &self.state {
            hold::abandon(one_shot);
        }
    }
}

impl<T> fmt::Debug for ReadData<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadData")
            .field("var", &self.var)
            .finish_non_exhaustive()
    }
}
