//! Typed data the engine owns: a [`Data<T>`] is a value with a var inside, which ops name by
//! their accesses (`op.read(&x).write(&y)`) and reach as `&T` and `&mut T` with no lock, the
//! schedule being the proof that a write runs alone.
//!
//! - `cell.rs`: where the value lives, and the roles in which it may be reached (the safety
//!   argument of everything here);
//! - `handle.rs`: the handle, and the release of the value after the last one;
//! - `access.rs`: an op's typed accesses and the references its function receives;
//! - `held.rs`: an async op's accesses with its completion;
//! - `typed_op.rs`: the op builder's `read` and `write`, and the typed op they make;
//! - `methods.rs`: the engine's methods for data (`data`, the guards, `read_async`, `take`);
//! - `hold.rs`, `guard.rs`, `read_future.rs`, `take.rs`: the value reached from outside every
//!   op, as an op holding its var.
//!
//! Typed data is a layer over the untyped engine: this module uses the engine's builders,
//! waits and state, and nothing below it knows of data (the engine state keeps the releases
//! of `run/retired.rs` as boxed closures; a data's var carries its cell's pointer as an
//! untyped word, which a sync function finds through `op/vars.rs`'s `OpVars`). This folder
//! holds most of the crate's `unsafe` code; the rest is `op/sync_fn.rs` (a function stored in
//! the record) and the two calls of a sync function with its op's vars (`run/execute.rs`,
//! `run/bulk/runner.rs`), whose contract is `SyncFn::call`'s.

pub(crate) mod access;
pub(crate) mod cell;
pub(crate) mod guard;
pub(crate) mod handle;
pub(crate) mod held;
pub(crate) mod hold;
mod methods;
pub(crate) mod read_future;
pub(crate) mod take;
pub(crate) mod typed_capture;
pub(crate) mod typed_op;

use std::error::Error;
use std::fmt;

use crate::data::handle::Data;
use crate::error::EngineError;

/// [`Engine::data`](crate::Engine::data)'s error: why, and the value, given back.
///
/// # Examples
///
/// ```
/// use depengine::{DataRefused, Engine, EngineConfig, EngineError};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// engine.clone().shutdown()?; // no new data from now on, through any clone
/// let buffer = vec![0.5_f32; 1024];
/// match engine.data(buffer) {
///     Err(DataRefused { error: EngineError::ShutDown, value }) => {
///         assert_eq!(value.len(), 1024); // given back, not dropped
///     }
///     other => panic!("expected a shutdown refusal, got {other:?}"),
/// }
/// // Converted into an `EngineError` (as `?` does), it keeps the reason alone.
/// let error = EngineError::from(engine.data(0_u8).unwrap_err());
/// assert!(matches!(error, EngineError::ShutDown));
/// # Ok::<(), EngineError>(())
/// ```
pub struct DataRefused<T> {
    /// Why the data could not be made.
    pub error: EngineError,
    /// The value.
    pub value: T,
}

/// [`Engine::take`](crate::Engine::take)'s error: why, and what it gives back.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, EngineError, TakeError};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let data = engine.data(vec![1_u32, 2, 3])?;
/// let other = data.clone();
/// // Another handle exists: refused, and the handle comes back.
/// let Err(TakeError::Refused { error: EngineError::DataShared, data }) = engine.take(data) else {
///     panic!("taken while shared");
/// };
/// drop(other);
/// engine.op("shrink").write(&data).push_sync(|_, values| {
///     values.truncate(1);
///     Err("interrupted".into()) // fails after changing the value
/// })?;
/// match engine.take(data) {
///     Err(TakeError::Failed { error, value }) => {
///         assert!(matches!(error, EngineError::OpFailed(_)), "{error}");
///         assert_eq!(value, [1]); // as the failed op left it
///     }
///     other => panic!("expected the op's failure, got {other:?}"),
/// }
/// # Ok::<(), EngineError>(())
/// ```
pub enum TakeError<T: Send + 'static> {
    /// The value could not be taken; the handle comes back, unchanged.
    Refused {
        /// Why: [`EngineError::DataShared`], [`EngineError::ForeignData`],
        /// [`EngineError::DataInsideOp`], [`EngineError::ShutDown`], ...
        error: EngineError,
        /// The handle.
        data: Data<T>,
    },
    /// The data held a failure ([`EngineError::OpFailed`], now taken and cleared); the value
    /// is taken all the same, as the failed op left it.
    Failed {
        /// The failure.
        error: EngineError,
        /// The value.
        value: T,
    },
}

impl<T: Send + 'static> TakeError<T> {
    /// Why the take failed.
    pub fn error(&self) -> &EngineError {
        match self {
            TakeError::Refused { error, .. } | TakeError::Failed { error, .. } => error,
        }
    }
}

impl<T> fmt::Debug for DataRefused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataRefused")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for DataRefused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> Error for DataRefused<T> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.error.source()
    }
}

impl<T> From<DataRefused<T>> for EngineError {
    fn from(refused: DataRefused<T>) -> Self {
        refused.error
    }
}

impl<T: Send + 'static> fmt::Debug for TakeError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TakeError::Refused { error, data } => f
                .debug_struct("Refused")
                .field("error", error)
                .field("data", data)
                .finish(),
            TakeError::Failed { error, .. } => f
                .debug_struct("Failed")
                .field("error", error)
                .finish_non_exhaustive(),
        }
    }
}

impl<T: Send + 'static> fmt::Display for TakeError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.error(), f)
    }
}

impl<T: Send + 'static> Error for TakeError<T> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.error().source()
    }
}

impl<T: Send + 'static> From<TakeError<T>> for EngineError {
    fn from(error: TakeError<T>) -> Self {
        match error {
            TakeError::Refused { error, .. } | TakeError::Failed { error, .. } => error,
        }
    }
}
