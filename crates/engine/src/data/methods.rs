//! The engine's methods for typed data: [`Engine::data`] makes a [`Data<T>`], ops name it
//! (`typed_op.rs`), and the others reach it from outside every op.

use std::sync::Arc;

use crate::api::{Engine, blocking};
use crate::data::cell::CellPtr;
use crate::data::guard::{ReadGuard, WriteGuard};
use crate::data::handle::Data;
use crate::data::hold::{self, Handed, HoldKind, HoldOneShot};
use crate::data::read_future::ReadData;
use crate::data::take;
use crate::data::{DataRefused, TakeError};
use crate::error::{EngineError, Result};
use crate::op::record::Completion;
use crate::thread::frame::running_op_of;

impl Engine {
    /// Moves `value` into the engine: a [`Data<T>`] that ops read and write as `&T` and
    /// `&mut T` (see [`OpBuilder::read`](crate::OpBuilder::read)), with a new var inside.
    ///
    /// ```
    /// use depengine::{Engine, EngineConfig};
    ///
    /// let engine = Engine::new(EngineConfig::default())?;
    /// let counter = engine.data(0_u64)?;
    /// for _ in 0..10 {
    ///     engine.op("count").write(&counter).push_sync(|_, counter| *counter += 1)?;
    /// }
    /// assert_eq!(engine.take(counter)?, 10);
    /// # Ok::<(), depengine::EngineError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`new_var`](Self::new_var), with `value` given back ([`DataRefused`]).
    pub fn data<T: Send + 'static>(&self, value: T) -> Result<Data<T>, DataRefused<T>> {
        self.new_data(value, None)
    }

    /// As [`data`](Self::data), with a name that errors and warnings show (as
    /// [`new_var_named`](Self::new_var_named) does for a var).
    ///
    /// # Errors
    ///
    /// As [`data`](Self::data).
    pub fn data_named<T: Send + 'static>(
        &self,
        name: impl Into<Arc<str>>,
        value: T,
    ) -> Result<Data<T>, DataRefused<T>> {
        self.new_data(value, Some(name.into()))
    }

    /// Moves `value` into a new cell, whose var (named `name`, if any) carries the cell's
    /// pointer: a typed op's function finds it there (`access.rs`).
    fn new_data<T: Send + 'static>(
        &self,
        value: T,
        name: Option<Arc<str>>,
    ) -> Result<Data<T>, DataRefused<T>> {
        let cell = CellPtr::new(value);
        match self.create_var(Some(cell.erased())) {
            Ok(var) => {
                if let Some(name) = name {
                    self.state().var_names().insert(var, name);
                }
                Ok(Data::new(self.state(), var, cell))
            }
            Err(error) => {
                // SAFETY: role 4 of `cell.rs`: no var carries the cell, so no op reaches it.
                let value = unsafe { cell.into_inner() };
                Err(DataRefused { error, value })
            }
        }
    }

    /// Shared access to `data` from outside every op, once the writes pushed on it before
    /// this call completed ([`ReadGuard`]; ops pushed later that write it wait for the guard's
    /// drop). Blocks until then, warning as [`wait_for_var`](Self::wait_for_var) does when it
    /// takes long.
    ///
    /// Holding a guard while waiting for an op that writes the data (`wait_for_var`,
    /// `wait_for_all`, a second guard on this thread) waits forever; the stall warning names
    /// the guard's op (`data read guard`).
    ///
    /// Other threads may read the data meanwhile, hence `T: Sync`:
    ///
    /// ```compile_fail,E0277
    /// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
    /// let data = engine.data(std::cell::Cell::new(0_u64))?; // `Send`, not `Sync`
    /// let guard = engine.read(&data)?;
    /// # Ok::<(), depengine::EngineError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`EngineError::OpFailed`] if the data holds a failure (taken and cleared, as
    /// `wait_for_var` does); [`EngineError::ForeignData`]; [`EngineError::DataInsideOp`] from
    /// inside an op of this engine (an op reaches data through its own accesses);
    /// [`EngineError::ShutDown`]; [`EngineError::DeletedVar`] if its var was deleted by hand.
    pub fn read<'a, T: Send + Sync + 'static>(
        &'a self,
        data: &'a Data<T>,
    ) -> Result<ReadGuard<'a, T>> {
        let completion = self.hold(data, HoldKind::Read)?;
        Ok(ReadGuard::new(data.cell(), completion))
    }

    /// Exclusive access to `data` from outside every op, once every op pushed on it before
    /// this call completed ([`WriteGuard`]; ops pushed later wait for the guard's drop). As
    /// [`read`](Self::read) otherwise.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    pub fn write<'a, T: Send + 'static>(&'a self, data: &'a Data<T>) -> Result<WriteGuard<'a, T>> {
        let completion = self.hold(data, HoldKind::Write)?;
        Ok(WriteGuard::new(data.cell(), completion))
    }

    /// The twin of [`read`](Self::read) for async code: a future that resolves to the guard
    /// (or the data's failure) without blocking a thread, with any executor.
    ///
    /// ```
    /// use depengine::{Engine, EngineConfig};
    ///
    /// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
    /// let data = engine.data(1_u32)?;
    /// engine.op("double").write(&data).push_sync(|_, value| *value *= 2)?;
    /// let value = futures::executor::block_on(async { Ok::<_, depengine::EngineError>(*engine.read_async(&data).await?) })?;
    /// assert_eq!(value, 2);
    /// # Ok::<(), depengine::EngineError>(())
    /// ```
    ///
    /// As [`read`](Self::read), it needs `T: Sync`:
    ///
    /// ```compile_fail,E0277
    /// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
    /// let data = engine.data(std::cell::Cell::new(0_u64))?; // `Send`, not `Sync`
    /// let read = engine.read_async(&data);
    /// # Ok::<(), depengine::EngineError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Returned by the future: as [`read`](Self::read).
    pub fn read_async<'a, T: Send + Sync + 'static>(
        &'a self,
        data: &'a Data<T>,
    ) -> ReadData<'a, T> {
        let first = if let Some(error) = self.hold_refusal(data) {
            Err(error)
        } else {
            let one_shot = Arc::new(HoldOneShot::new());
            hold::push_hold(self.state(), data.var(), HoldKind::Read, &one_shot).map(|()| one_shot)
        };
        ReadData::new(self, data.cell(), data.var(), first)
    }

    /// Takes the value back from the engine, once every op pushed on it completed, and
    /// deletes its var. `data` must be its last handle.
    ///
    /// ```
    /// use depengine::{Engine, EngineConfig, TakeError};
    ///
    /// let engine = Engine::new(EngineConfig::default())?;
    /// let data = engine.data(vec![0_u8; 3])?;
    /// let other = data.clone();
    /// let Err(TakeError::Refused { data, .. }) = engine.take(data) else { unreachable!() };
    /// drop(other);
    /// assert_eq!(engine.take(data)?, [0, 0, 0]);
    /// # Ok::<(), depengine::EngineError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`TakeError::Refused`], with the handle back: [`EngineError::DataShared`] if other
    /// handles exist, and the errors of [`read`](Self::read) other than a failure.
    /// [`TakeError::Failed`], with the value: the data held a failure (taken and cleared).
    pub fn take<T: Send + 'static>(&self, data: Data<T>) -> Result<T, TakeError<T>> {
        if let Some(error) = self.hold_refusal(&data) {
            return Err(TakeError::Refused { error, data });
        }
        let last = match data.into_last() {
            Ok(last) => last,
            Err(data) => {
                let error = EngineError::DataShared;
                return Err(TakeError::Refused { error, data });
            }
        };
        take::take(self, last)
    }

    /// Why a hold of `data` cannot start here, if it cannot.
    fn hold_refusal<T: Send + 'static>(&self, data: &Data<T>) -> Option<EngineError> {
        if !data.belongs_to(self.id()) {
            Some(EngineError::ForeignData {
                var: data.var(),
                op: None,
            })
        } else if running_op_of(self.id()) {
            Some(EngineError::DataInsideOp)
        } else {
            None
        }
    }

    /// Holds `data`'s var (`hold.rs`), blocking until the hold is granted; a skipped hold
    /// returns the data's failure (or, cleared meanwhile, holds again).
    fn hold<T: Send + 'static>(&self, data: &Data<T>, kind: HoldKind) -> Result<Completion> {
        if let Some(error) = self.hold_refusal(data) {
            return Err(error);
        }
        let state = self.state();
        loop {
            let one_shot = Arc::new(HoldOneShot::new());
            hold::push_hold(state, data.var(), kind, &one_shot)?;
            match blocking::wait_watched(state, &one_shot, data.var()) {
                Handed::Granted(completion) => return Ok(completion),
                Handed::Skipped => self.wait_for_var(data.var())?,
            }
        }
    }
}
