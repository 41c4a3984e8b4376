//! [`ReadGuard`] and [`WriteGuard`]: a value reached from outside every op, held as an op of
//! the engine holds it (`hold.rs`).

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use crate::api::Engine;
use crate::data::cell::{CellPtr, ExclusiveCell, SharedCell};
use crate::op::record::Completion;

/// Shared access to a [`Data<T>`](crate::Data) from outside the engine's ops, from
/// [`Engine::read`](crate::Engine::read): while it lives, the value's var is held as a read
/// (ops that read it run, writes wait). Borrows the engine, which cannot be dropped meanwhile.
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let data = engine.data(String::from("hello"))?;
/// engine.op("append").write(&data).push_sync(|_, text| text.push_str(", world"))?;
/// let text = engine.read(&data)?; // waits for the write
/// assert_eq!(*text, "hello, world");
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// A reference cannot outlive its guard:
///
/// ```compile_fail,E0597
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// # let data = engine.data(0_u64)?;
/// let value: &u64 = {
///     let guard = engine.read(&data)?;
///     &*guard
/// };
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// The data cannot be taken back (or dropped) while a guard borrows it:
///
/// ```compile_fail,E0505
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// let data = engine.data(0_u64)?;
/// let guard = engine.read(&data)?;
/// let value = engine.take(data); // moves the data the guard borrows
/// drop(guard);
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// Nor can the engine:
///
/// ```compile_fail,E0505
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// let data = engine.data(0_u64)?;
/// let guard = engine.read(&data)?;
/// drop(engine); // moves the engine the guard borrows
/// drop(guard);
/// # Ok::<(), depengine::EngineError>(())
/// ```
pub struct ReadGuard<'a, T> {
    cell: SharedCell<T>,
    completion: HoldCompletion,
    _engine: PhantomData<&'a Engine>,
}

/// Exclusive access to a [`Data<T>`](crate::Data) from outside the engine's ops, from
/// [`Engine::write`](crate::Engine::write): while it lives, the value's var is held as a write
/// (every op on it waits). Dropped during a panic, it fails its write, which poisons the
/// data as a failed op does.
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let data = engine.data(vec![1, 2])?;
/// engine.write(&data)?.push(3);
/// engine.op("check").read(&data).push_sync(|_, values| assert_eq!(values, &[1, 2, 3]))?;
/// engine.wait_for_all()?;
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// Shared between threads, it would share `&T`: that needs `T: Sync`.
///
/// ```compile_fail,E0277
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// let data = engine.data(std::cell::Cell::new(0_u64))?; // `Send`, not `Sync`
/// let guard = engine.write(&data)?;
/// std::thread::scope(|scope| {
///     scope.spawn(|| guard.set(1));
///     guard.set(2);
/// });
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// It is invariant in `T`: data of `&'static str` takes no shorter-lived reference.
///
/// ```compile_fail,E0597
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// let data = engine.data("static")?;
/// let local = String::from("local");
/// let mut text = engine.write(&data)?;
/// *text = &local; // `data` outlives `local`
/// # drop(text);
/// # Ok::<(), depengine::EngineError>(())
/// ```
pub struct WriteGuard<'a, T> {
    cell: ExclusiveCell<T>,
    completion: HoldCompletion,
    _engine: PhantomData<&'a Engine>,
}

/// A guard's hold: its completion, completed by the guard's drop (always `Some` until then).
/// Reached only through `&mut` (the drop), so that sharing a guard between threads shares
/// nothing of it (the pattern of `std::sync::Exclusive`).
struct HoldCompletion(Option<Completion>);

// SAFETY: nothing reaches the completion through `&HoldCompletion` (it has no method, and the
// guards touch it only in their drop, through `&mut`): a shared reference to it gives nothing.
unsafe impl Sync for HoldCompletion {}

impl<T> ReadGuard<'_, T> {
    /// A guard for the read hold `completion` completes.
    pub(crate) fn new(cell: CellPtr<T>, completion: Completion) -> Self {
        ReadGuard {
            cell: SharedCell(cell),
            completion: HoldCompletion(Some(completion)),
            _engine: PhantomData,
        }
    }
}

impl<T> WriteGuard<'_, T> {
    /// A guard for the write hold `completion` completes.
    pub(crate) fn new(cell: CellPtr<T>, completion: Completion) -> Self {
        WriteGuard {
            cell: ExclusiveCell(cell),
            completion: HoldCompletion(Some(completion)),
            _engine: PhantomData,
        }
    }
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard's read hold lasts until its drop, after this borrow (role 1 of
        // `cell.rs`); the cell lives until the var's deletion, ordered after the hold.
        unsafe { self.cell.0.get() }
    }
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard's write hold lasts until its drop, after this borrow (role 2); a
        // shared borrow of the guard cannot overlap `deref_mut`'s.
        unsafe { self.cell.0.get() }
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard's write hold lasts until its drop, after this borrow (role 2), and
        // `&mut self` excludes every other borrow of the guard.
        unsafe { self.cell.0.get_mut() }
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        if let Some(completion) = self.completion.0.take() {
            completion.ok();
        }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        if let Some(completion) = self.completion.0.take() {
            if std::thread::panicking() {
                completion
                    .fail("a write guard was dropped by a panic: the value may be half-written");
            } else {
                completion.ok();
            }
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for ReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: fmt::Debug> fmt::Debug for WriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
