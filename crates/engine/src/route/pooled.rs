//! `ThreadedPooled`: one shared worker block for every normal CPU op, one for copy ops (MXNet's
//! `ThreadedEnginePooled` with its task and IO queues). GPU ops go to the device backend.

use std::sync::Arc;

use crate::context::FnProperty;
use crate::error::Result;
use crate::op::record::{BlockKey, Route};
use crate::route::block::{self, CpuBlock, Pinning, WorkerSetup};
use crate::route::lazy::Lazy;
use crate::thread::serving::BlockRunner;

pub(crate) struct Pooled {
    /// Started with the engine (`Workers::start`).
    normal: Lazy<CpuBlock>,
    /// Started on the first copy op.
    copy: Lazy<CpuBlock>,
    threads: usize,
    /// How the normal block's workers run (the copy block's are never pinned).
    setup: WorkerSetup,
    copy_threads: usize,
}

impl Pooled {
    pub(crate) fn new(threads: usize, setup: WorkerSetup, copy_threads: usize) -> Self {
        Pooled {
            normal: Lazy::new(),
            copy: Lazy::new(),
            threads,
            setup,
            copy_threads,
        }
    }

    /// Starts the normal block.
    pub(crate) fn start(
        &self,
        engine: u64,
        runner: impl FnOnce() -> Arc<dyn BlockRunner>,
    ) -> Result<()> {
        self.normal
            .get_or_try_init(|| {
                block::start(
                    "depengine-pooled",
                    self.threads,
                    self.setup,
                    engine,
                    BlockKey::Pooled,
                    runner(),
                )
            })
            .map(drop)
    }

    /// The started block of `key`.
    #[inline]
    pub(crate) fn block(&self, key: BlockKey) -> Option<&CpuBlock> {
        match key {
            BlockKey::Pooled => self.normal.get(),
            BlockKey::PooledCopy => self.copy.get(),
            BlockKey::Cpu(_) | BlockKey::Priority => None,
        }
    }

    /// The started blocks.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = &CpuBlock> {
        self.normal.get().into_iter().chain(self.copy.get())
    }

    /// The route of a CPU op (copy ops to the copy block, started on first use).
    pub(crate) fn route(
        &self,
        property: FnProperty,
        engine: u64,
        runner: impl FnOnce() -> Arc<dyn BlockRunner>,
    ) -> Result<Route> {
        if property.is_copy() {
            self.copy.get_or_try_init(|| {
                block::start(
                    "depengine-pooled-copy",
                    self.copy_threads,
                    WorkerSetup {
                        pinning: Pinning::Free,
                        ..self.setup
                    },
                    engine,
                    BlockKey::PooledCopy,
                    runner(),
                )
            })?;
            Ok(Route::PooledCopy)
        } else {
            Ok(Route::Pooled)
        }
    }
}
