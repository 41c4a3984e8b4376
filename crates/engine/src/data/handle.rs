//! [`Data<T>`]: the handle of a value the engine owns.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Weak};

use depengine_graph::Var;

use crate::data::cell::{CellPtr, OwnedCell};
use crate::run::EngineState;

/// A value of type `T` that the engine owns, with a [`Var`] inside: ops name it with
/// [`OpBuilder::read`](crate::OpBuilder::read) and [`OpBuilder::write`](crate::OpBuilder::write),
/// and their functions receive `&T` and `&mut T`, with no lock: the schedule proves that a
/// write runs alone. From [`Engine::data`](crate::Engine::data).
///
/// Cheap to clone (an `Arc`), `Send + Sync` when `T: Send`. The value lives while a handle
/// does, or an op pushed on it is pending: dropping the last handle deletes the var once
/// every op pushed on it completed, and drops the value then: on the thread that drops the
/// last handle if no op is pending, else on the thread that completed the last of them, once
/// that op is counted done. Its `Drop` runs with no lock of the engine held and may call the
/// engine, or drop the engine's last handle (a value may own its engine).
/// [`Engine::take`](crate::Engine::take) takes it back instead.
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let x = engine.data(vec![1.0_f64; 4])?;
/// let sum = engine.data_named("sum", 0.0_f64)?;
/// engine.op("scale").write(&x).push_sync(|_, x| x.iter_mut().for_each(|v| *v *= 2.0))?;
/// engine.op("sum").read(&x).write(&sum).push_sync(|_, (x, sum)| *sum = x.iter().sum())?;
/// assert_eq!(*engine.read(&sum)?, 8.0);
/// assert_eq!(engine.take(x)?, vec![2.0; 4]);
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// The value must be `Send` (ops run on any worker):
///
/// ```compile_fail,E0277
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// let counter = engine.data(std::rc::Rc::new(0))?; // `Rc` is not `Send`
/// # Ok::<(), depengine::EngineError>(())
/// ```
pub struct Data<T: Send + 'static> {
    shared: Arc<DataShared<T>>,
}

/// What the handles of one value share. Dropped with the last handle: see [`Drop`] below.
struct DataShared<T: Send + 'static> {
    cell: OwnedCell<T>,
    var: Var,
    /// The engine's id, for the check that an op names data of its own engine.
    engine_id: u64,
    /// The engine's state, for the deletion of the var; not kept alive by the data.
    engine: Weak<EngineState>,
}

impl<T: Send + 'static> Data<T> {
    /// The handle of `cell`, whose var `var`, a new var of `engine`, carries it.
    pub(crate) fn new(engine: &Arc<EngineState>, var: Var, cell: CellPtr<T>) -> Self {
        Data {
            shared: Arc::new(DataShared {
                cell: OwnedCell(cell),
                var,
                engine_id: engine.id(),
                engine: Arc::downgrade(engine),
            }),
        }
    }

    /// The data's var: for the untyped API (`wait_for_var`, an op's `reads`/`writes` to order
    /// it without touching the value, `dump_pending`). Deleting it by hand
    /// ([`Engine::delete_var`](crate::Engine::delete_var)) makes later ops on the data fail
    /// with [`EngineError::DeletedVar`](crate::EngineError::DeletedVar), and keeps the value
    /// until the engine is dropped.
    pub fn var(&self) -> Var {
        self.shared.var
    }

    pub(crate) fn cell(&self) -> CellPtr<T> {
        self.shared.cell.0
    }

    /// Whether the data belongs to the engine with this id.
    pub(crate) fn belongs_to(&self, engine: u64) -> bool {
        self.shared.engine_id == engine
    }

    /// The shared part, if this is the last handle (for `Engine::take`); else the handle back.
    pub(crate) fn into_last(self) -> Result<LastHandle<T>, Self> {
        Arc::try_unwrap(self.shared)
            .map(LastHandle)
            .map_err(|shared| Data { shared })
    }
}

/// The last handle of a value, unwrapped: `Engine::take` holds it while it waits.
pub(crate) struct LastHandle<T: Send + 'static>(DataShared<T>);

impl<T: Send + 'static> LastHandle<T> {
    pub(crate) fn var(&self) -> Var {
        self.0.var
    }

    /// The handle again (the take was refused).
    pub(crate) fn into_data(self) -> Data<T> {
        Data {
            shared: Arc::new(self.0),
        }
    }

    /// The cell, which the caller now releases itself (`Engine::take`, role 4 of `cell.rs`):
    /// the drop's deletion is skipped.
    pub(crate) fn into_cell(self) -> CellPtr<T> {
        let mut shared = self.0;
        // The only field with a destructor; an empty `Weak` owns nothing.
        drop(std::mem::take(&mut shared.engine));
        let cell = shared.cell.0;
        // Skips the drop below: the cell is the caller's to release, the rest is `Copy`.
        std::mem::forget(shared);
        cell
    }
}

impl<T: Send + 'static> Clone for Data<T> {
    fn clone(&self) -> Self {
        Data {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T: Send + 'static> fmt::Debug for Data<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Data")
            .field("var", &self.shared.var)
            .finish_non_exhaustive()
    }
}

/// The cell of a value, sent to the thread that releases it.
struct Release<T>(OwnedCell<T>);

impl<T> Release<T> {
    /// Drops the value, catching a panic of its `Drop` (the callers are the graph's completion
    /// of an op, and the engine state's drop, which must not unwind).
    ///
    /// # Safety
    ///
    /// Role 4 of `cell.rs`.
    unsafe fn run(self) {
        // SAFETY: the caller's.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { self.0.0.release() }));
    }
}

impl<T: Send + 'static> Drop for DataShared<T> {
    /// The last handle: the value is released once no op can reach it (role 4 of `cell.rs`).
    ///
    /// Subtle: the value's `Drop` may drop the engine's last handle, whose shutdown waits for
    /// every other reference to the engine's state to go; so it never runs while this thread
    /// holds the state it upgraded here (an idle var's release runs after the state is
    /// dropped; a busy one's runs from the completion of its last op, `run/dispatch.rs`).
    fn drop(&mut self) {
        let cell = self.cell.0;
        let Some(engine) = self.engine.upgrade() else {
            // SAFETY: the engine's state is gone, and with it every op of the engine (a
            // pending op is in its graph; a running one holds the state).
            unsafe { Release(OwnedCell(cell)).run() };
            return;
        };
        let release = Release(OwnedCell(cell));
        let deletion = engine.graph().delete_var(self.var, move || {
            // SAFETY: every op pushed on the var before the deletion completed (the graph
            // hands the callback over then), and every op that reaches the cell was pushed
            // through a handle, before the last one dropped (here).
            unsafe { release.run() }
        });
        if let Ok(deletion) = deletion {
            // A deletion, for bulk execution's joins (`run/bulk/entries.rs`).
            engine.entered_graph();
            drop(engine);
            deletion.call_if_reclaimed();
        } else {
            // The var was deleted by hand (`Data::var`): its deletion may still wait for ops on
            // the cell. The callback was dropped uncalled; the engine state releases the cell
            // when it drops.
            let release = Release(OwnedCell(cell));
            engine.retired_data().keep(Box::new(move || {
                // SAFETY: run by the engine state's drop, when no op of the engine is left.
                unsafe { release.run() }
            }));
        }
    }
}
