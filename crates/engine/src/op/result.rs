//! [`IntoOpResult`]: what an op's function may return.
//!
//! An op's function returns `()` (it cannot fail, short of panicking) or
//! `Result<(), BoxError>`; a function that only panics (`|_| panic!(..)`, or any other diverging body)
//! returns `!`, which is accepted too. The set is closed (the trait is sealed) and holds exactly one
//! `Result`, which is what lets `|_| Ok(())` compile without annotations: the closure's return
//! type is `Result<(), ?E>` with `?E` unknown, the bound `Result<(), ?E>: IntoOpResult` has a
//! single impl whose header unifies with it, and the compiler takes it (`?E = BoxError`). The
//! same goes for `?` inside the function: it converts an error of any
//! `std::error::Error + Send + Sync + 'static` type (or a `&str` or `String`) into the
//! `BoxError` that the one impl fixes, and for `Err("message".into())`.
//!
//! A second `Result` impl (`Result<(), E>` for every `E: Into<BoxError>`, so that a function
//! declared `-> Result<(), MyError>` is accepted as it is) would make both impls unify with
//! `Result<(), ?E>`, and `Ok(())` would need its error type spelled out again (`E0283`): Rust
//! has no default for an inference variable that two impls could fill. The common case (a
//! function that may fail with whatever its calls fail with) wins: a function that has a typed
//! result in hand converts it with `.map_err(Into::into)`, or returns `Ok(typed?)`.

use crate::failure::BoxError;

/// What an op's function may return: `()` or `Result<(), BoxError>` (and `!`, for a function
/// that only panics). Sealed, with exactly one `Result`, so that `|_| Ok(())` and
/// `|_| { fallible()?; Ok(()) }` need no annotation (the error type is fixed to
/// [`BoxError`](crate::BoxError)); a result that is already typed is converted:
/// `.map_err(Into::into)`, or `typed?; Ok(())`.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// #[derive(Debug)]
/// struct OutOfMemory;
/// impl std::fmt::Display for OutOfMemory {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("out of memory")
///     }
/// }
/// impl std::error::Error for OutOfMemory {}
///
/// fn allocate(bytes: usize) -> Result<Vec<u8>, OutOfMemory> {
///     if bytes > 1 << 20 { Err(OutOfMemory) } else { Ok(vec![0; bytes]) }
/// }
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let var = engine.new_var()?;
/// engine.op("cannot fail").writes([var]).push_sync(|_| {})?;
/// engine.op("succeeds").writes([var]).push_sync(|_| Ok(()))?;
/// engine.op("may fail").writes([var]).push_sync(|_| {
///     let buffer = allocate(1 << 30)?; // any error type converts
///     drop(buffer);
///     Ok(())
/// })?;
/// engine.op("typed result").writes([var]).push_sync(|_| {
///     allocate(16).map(drop).map_err(Into::into)
/// })?;
/// let error = engine.wait_for_var(var).unwrap_err();
/// assert!(error.to_string().contains("out of memory"));
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "an op's function returns `()` or `Result<(), BoxError>`, not `{Self}`",
    label = "this function returns `{Self}`",
    note = "return `Ok(())`; `?` converts errors of any `std::error::Error + Send + Sync + 'static` \
            type into `depengine::BoxError`, and so does `.map_err(Into::into)`"
)]
pub trait IntoOpResult: sealed::Sealed {
    /// The op's outcome.
    ///
    /// # Errors
    ///
    /// The error that fails the op.
    fn into_op_result(self) -> Result<(), BoxError>;
}

impl IntoOpResult for () {
    #[inline]
    fn into_op_result(self) -> Result<(), BoxError> {
        Ok(())
    }
}

impl IntoOpResult for Result<(), BoxError> {
    #[inline]
    fn into_op_result(self) -> Result<(), BoxError> {
        self
    }
}

impl IntoOpResult for sealed::Never {
    fn into_op_result(self) -> Result<(), BoxError> {
        self
    }
}

mod sealed {
    use crate::failure::BoxError;

    /// Keeps the set of [`IntoOpResult`](super::IntoOpResult) types closed: inference of
    /// `Ok(())` relies on it holding one `Result`.
    pub trait Sealed {}

    impl Sealed for () {}
    impl Sealed for Result<(), BoxError> {}
    impl Sealed for Never {}

    /// `!`, the type of a closure that only panics (edition 2024 infers it for
    /// `|_| panic!()`), named on stable Rust as the output of a `fn() -> !` (no value of it
    /// exists).
    pub(super) type Never = <fn() -> ! as FnOutput>::Output;

    /// The output type of a function pointer type (to name [`Never`]).
    pub trait FnOutput {
        type Output;
    }

    impl<T> FnOutput for fn() -> T {
        type Output = T;
    }
}
