//! [`OpFailure`]: the failure of an op, as recorded on the vars it wrote.
//!
//! A failure is shared: the same `OpFailure` (one allocation) is stored on every var the failed
//! op wrote and on every var a skipped dependent wrote, so [`OpFailure::same_failure`] tells
//! whether two reports name the same original failure.

pub(crate) mod log;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A boxed error as returned by op functions.
///
/// # Examples
///
/// ```
/// use depengine::{BoxError, Engine, EngineConfig, EngineError, FailureCause};
///
/// fn parse_len(text: &str) -> Result<usize, BoxError> {
///     let len: usize = text.trim().parse()?; // any error type boxes into a `BoxError`
///     if len == 0 {
///         return Err("an empty buffer".into()); // and so does a message
///     }
///     Ok(len)
/// }
/// assert_eq!(parse_len(" 8 ").ok(), Some(8));
/// assert_eq!(parse_len("0").unwrap_err().to_string(), "an empty buffer");
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let var = engine.new_var()?;
/// engine.op("parse").writes([var]).push_sync(|_| parse_len("eight").map(drop))?;
/// let Err(EngineError::OpFailed(failure)) = engine.wait_for_var(var) else { panic!() };
/// // The failure keeps the boxed error, with its type.
/// let FailureCause::Error(error) = failure.cause() else { panic!() };
/// assert!(error.is::<std::num::ParseIntError>());
/// # Ok::<(), EngineError>(())
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an op failed.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, EngineError, FailureCause};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let (a, b) = (engine.new_var()?, engine.new_var()?);
/// engine.op("forgets").writes([a]).push_async(|_, done| drop(done))?;
/// engine.op("rejects").writes([b]).push_sync(|_| Err("bad input".into()))?;
///
/// let cause = |var| match engine.wait_for_var(var) {
///     Err(EngineError::OpFailed(failure)) => match failure.cause() {
///         FailureCause::Error(error) => format!("error: {error}"),
///         FailureCause::Panic(message) => format!("panic: {message}"),
///         other => other.to_string(),
///     },
///     other => panic!("expected a failure, got {other:?}"),
/// };
/// assert_eq!(cause(a), "its completion token was dropped without completing");
/// assert_eq!(cause(b), "error: bad input");
/// # Ok::<(), EngineError>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum FailureCause {
    /// The op's function returned this error (or passed it to its completion).
    Error(BoxError),
    /// The op's function panicked; the panic message.
    Panic(String),
    /// An async op's completion token was dropped without being completed.
    CompletionDropped,
}

impl fmt::Display for FailureCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureCause::Error(error) => write!(f, "{error}"),
            FailureCause::Panic(message) => write!(f, "panicked: {message}"),
            FailureCause::CompletionDropped => {
                f.write_str("its completion token was dropped without completing")
            }
        }
    }
}

struct FailureInner {
    op: Cow<'static, str>,
    cause: FailureCause,
    /// Set once a wait returned this failure; `wait_for_all` reports only unreported ones.
    reported: AtomicBool,
}

/// The failure of one op: which op, and why. Cheap to clone (shared).
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, EngineError};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let (input, output) = (engine.new_var()?, engine.new_var()?);
/// engine.op("load").writes([input]).push_sync(|_| Err("file not found".into()))?;
/// engine.op("transform").reads([input]).writes([output]).push_sync(|_| {})?; // skipped
///
/// let Err(EngineError::OpFailed(on_output)) = engine.wait_for_var(output) else { panic!() };
/// let Err(EngineError::OpFailed(on_input)) = engine.wait_for_var(input) else { panic!() };
/// assert_eq!(on_output.op_name(), "load"); // the original op, also on a dependent's var
/// assert!(on_output.same_failure(&on_input));
/// assert_eq!(on_input.to_string(), "op `load` failed: file not found");
/// # Ok::<(), EngineError>(())
/// ```
#[derive(Clone)]
pub struct OpFailure(Arc<FailureInner>);

impl OpFailure {
    pub(crate) fn new(op: Cow<'static, str>, cause: FailureCause) -> Self {
        OpFailure(Arc::new(FailureInner {
            op,
            cause,
            reported: AtomicBool::new(false),
        }))
    }

    /// The name of the op that failed (the original op, also when reported on a dependent).
    pub fn op_name(&self) -> &str {
        &self.0.op
    }

    /// Why it failed.
    pub fn cause(&self) -> &FailureCause {
        &self.0.cause
    }

    /// Whether `self` and `other` are the same original failure.
    pub fn same_failure(&self, other: &OpFailure) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub(crate) fn mark_reported(&self) {
        self.0.reported.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_reported(&self) -> bool {
        self.0.reported.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for OpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpFailure")
            .field("op", &self.0.op)
            .field("cause", &self.0.cause)
            .finish()
    }
}

impl fmt::Display for OpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op `{}` failed: {}", self.0.op, self.0.cause)
    }
}

impl std::error::Error for OpFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0.cause {
            FailureCause::Error(error) => Some(error.as_ref()),
            _ => None,
        }
    }
}

/// The message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}
