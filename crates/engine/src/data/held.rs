//! [`Held`]: an async op's typed accesses and its completion, in one token.

use std::fmt;

use crate::data::access::AccessList;
use crate::failure::BoxError;
use crate::op::record::Completion;

/// What an async typed op's function receives: the op's data, held until it completes. The
/// references ([`refs`](Self::refs)) borrow from it, and completing consumes it
/// ([`ok`](Self::ok), [`fail`](Self::fail), [`complete`](Self::complete)), so none outlives
/// the op. It may move to another thread (when `T: Send` for each write and `T: Sync` for each
/// read) and complete there. Dropped without completing, it fails the op, as a
/// [`Completion`] does.
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let (input, output) = (engine.data(20_u64)?, engine.data(0_u64)?);
/// engine.op("add on another thread").read(&input).write(&output).push_async(|_, mut held| {
///     std::thread::spawn(move || {
///         let (input, output) = held.refs();
///         *output = *input + 22;
///         held.ok();
///     });
/// })?;
/// assert_eq!(*engine.read(&output)?, 42);
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// A reference cannot outlive the token:
///
/// ```compile_fail,E0505
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// # let data = engine.data(0_u64)?;
/// engine.op("leak").write(&data).push_async(|_, mut held| {
///     let value = held.refs();
///     held.ok(); // the op completes, releasing the data ...
///     *value += 1; // ... so the reference is gone
/// })?;
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[must_use = "an async op must complete its token (dropping it fails the op)"]
pub struct Held<L: AccessList> {
    accesses: L,
    completion: Completion,
}

impl<L: AccessList> Held<L> {
    pub(crate) fn new(accesses: L, completion: Completion) -> Self {
        Held {
            accesses,
            completion,
        }
    }

    /// The op's references: `&T` for each read, `&mut T` for each write, as the op's builder
    /// named them (one reference, or a tuple). One call's references at a time: they borrow
    /// the token mutably.
    ///
    /// ```compile_fail,E0499
    /// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
    /// # let data = engine.data(0_u64)?;
    /// engine.op("twice").write(&data).push_async(|_, mut held| {
    ///     let first = held.refs();
    ///     let second = held.refs(); // a second `&mut u64` to the same value
    ///     *first += *second;
    ///     held.ok();
    /// })?;
    /// # Ok::<(), depengine::EngineError>(())
    /// ```
    pub fn refs(&mut self) -> L::Refs<'_> {
        // SAFETY: the op holds its vars until its completion, which this token owns and
        // completes only when it is consumed or dropped, after this borrow of it ends (roles 1
        // and 2 of `cell.rs`, for the borrow).
        unsafe { self.accesses.refs() }
    }

    /// Completes the op: `Ok` lets its dependents run, `Err` fails it.
    pub fn complete<E>(self, result: Result<(), E>)
    where
        E: Into<BoxError>,
    {
        self.completion.complete(result);
    }

    /// Completes the op successfully.
    pub fn ok(self) {
        self.completion.ok();
    }

    /// Fails the op with `error`.
    pub fn fail<E>(self, error: E)
    where
        E: Into<BoxError>,
    {
        self.completion.fail(error);
    }

    /// The name of the op.
    pub fn op_name(&self) -> &str {
        self.completion.op_name()
    }
}

impl<L: AccessList> fmt::Debug for Held<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("op", &self.op_name())
            .finish_non_exhaustive()
    }
}
