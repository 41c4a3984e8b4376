//! `ThreadedPooled`: one shared worker block for every normal CPU op, one for copy ops (MXNet's
//! `ThreadedEnginePooled` with its task and IO queues). GPU ops go to the device backend.

use depengine_cpu::WorkerBlock;

use crate::context::{Context, FnProperty};
use crate::error::{EngineError, Result};
use crate::op::record::Route;
use crate::route::lazy::Lazy;
use crate::route::queued::QueuedBlock;

pub(crate) struct Pooled {
    pub(crate) normal: QueuedBlock,
    pub(crate) copy: Lazy<QueuedBlock>,
    copy_threads: usize,
}

impl Pooled {
    pub(crate) fn new(threads: usize, copy_threads: usize) -> Result<Self> {
        let normal = WorkerBlock::new("depengine-pooled", threads).map_err(|error| {
            EngineError::WorkerStart {
                message: error.to_string(),
            }
        })?;
        Ok(Pooled {
            normal: QueuedBlock::new(normal),
            copy: Lazy::new(),
            copy_threads,
        })
    }

    /// The route of a CPU op (copy ops to the copy block, started on first use).
    pub(crate) fn route(&self, _context: Context, property: FnProperty) -> Result<Route> {
        if property.is_copy() {
            self.copy.get_or_try_init(|| {
                WorkerBlock::new("depengine-pooled-copy", self.copy_threads)
                    .map(QueuedBlock::new)
                    .map_err(|error| EngineError::WorkerStart {
                        message: error.to_string(),
                    })
            })?;
            Ok(Route::PooledCopy)
        } else {
            Ok(Route::Pooled)
        }
    }
}
