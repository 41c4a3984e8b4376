//! [`Workers`]: where an engine's ops run: the CPU blocks of its kind and the device backend's
//! GPU executors. It resolves an op's route at push (starting what the route needs), finds the
//! block or executor a route names at dispatch, serves the waits inside ops (is work queued on
//! a block, a stand-in that runs it) and stops the blocks at the teardown.

use std::sync::Arc;

use depengine_cpu::PriorityBlock;
use depengine_device::{DeviceError, Executor};

use crate::config::{EngineConfig, EngineKind};
use crate::context::{Context, FnProperty};
use crate::error::Result;
use crate::op::record::{BlockKey, Route};
use crate::route::block::{CpuBlock, Pinning, WorkerSetup};
use crate::route::devices::GpuExecutors;
use crate::route::per_device::PerDevice;
use crate::route::pooled::Pooled;
use crate::thread::serving::{BlockRunner, Served, StandingIn};

/// The CPU blocks of each engine kind.
enum CpuWorkers {
    /// Every op runs on the thread that makes it ready (`naive.rs`).
    Naive,
    Pooled(Pooled),
    PerDevice(PerDevice),
}

/// The threads that run one engine's ops (see the module documentation).
///
/// Threads: a pusher resolves its op's route ([`route`](Self::route)), which starts a block or
/// creates an executor on first use (under that block's or executor's lock); the thread that
/// dispatches a ready op (a pusher, or the thread that completed what it waited for) and the
/// workers that run it look blocks and executors up, lock-free; a worker blocked in a wait
/// inside an op asks whether its block has work queued, and a stand-in thread runs it; the
/// last handle's teardown stops the blocks, once every op completed. The blocks' own state is
/// their pools' (depengine-pool documents which thread touches what).
pub(crate) struct Workers {
    /// The engine's id, which its blocks' threads are marked with.
    engine: u64,
    cpu: CpuWorkers,
    gpus: GpuExecutors,
}

impl Workers {
    /// The workers `config` asks for, none started yet.
    pub(crate) fn new(engine: u64, config: &EngineConfig) -> Self {
        let setup = WorkerSetup {
            pinning: if config.pin_workers {
                Pinning::Pinned
            } else {
                Pinning::Free
            },
            max_spin: config.cpu_max_spin,
        };
        let cpu = match config.kind {
            EngineKind::Naive => CpuWorkers::Naive,
            EngineKind::ThreadedPooled => CpuWorkers::Pooled(Pooled::new(
                config.cpu_worker_threads,
                setup,
                config.gpu_copy_threads,
            )),
            EngineKind::ThreadedPerDevice => CpuWorkers::PerDevice(PerDevice::new(
                config.cpu_worker_threads,
                setup,
                config.cpu_priority_threads,
            )),
        };
        Workers {
            engine,
            cpu,
            gpus: GpuExecutors::new(
                config.device_backend.clone(),
                config.gpu_worker_threads,
                config.gpu_copy_threads,
                config.device_hang_limit,
            ),
        }
    }

    /// The engine kind the workers are of.
    pub(crate) fn kind(&self) -> EngineKind {
        match self.cpu {
            CpuWorkers::Naive => EngineKind::Naive,
            CpuWorkers::Pooled(_) => EngineKind::ThreadedPooled,
            CpuWorkers::PerDevice(_) => EngineKind::ThreadedPerDevice,
        }
    }

    /// Starts the workers every engine of its kind has from the start (the pooled engine's
    /// normal block); the others start on first use. A started block's workers hold `runner`
    /// (the engine's state) until [`stop_blocks`](Self::stop_blocks).
    pub(crate) fn start(&self, runner: impl FnOnce() -> Arc<dyn BlockRunner>) -> Result<()> {
        match &self.cpu {
            CpuWorkers::Pooled(pooled) => pooled.start(self.engine, runner),
            CpuWorkers::Naive | CpuWorkers::PerDevice(_) => Ok(()),
        }
    }

    /// Where an op with this context and property runs; starts its block (whose workers run
    /// ops with `runner`) or creates its executor on first use.
    #[inline]
    pub(crate) fn route(
        &self,
        context: Context,
        property: FnProperty,
        runner: impl FnOnce() -> Arc<dyn BlockRunner>,
    ) -> Result<Route> {
        if context.is_gpu() {
            let route = self.gpus.route(context, property)?;
            return Ok(match self.cpu {
                // The debugging engine runs everything inline, GPU ops included.
                CpuWorkers::Naive => Route::Inline,
                _ => route,
            });
        }
        match &self.cpu {
            CpuWorkers::Naive => Ok(Route::Inline),
            CpuWorkers::Pooled(pooled) => pooled.route(property, self.engine, runner),
            CpuWorkers::PerDevice(per_device) => {
                per_device.route(context, property, self.engine, runner)
            }
        }
    }

    /// Notes what the device of `context` reported for an op's work (a lost device refuses
    /// later GPU ops: `GpuExecutors::note_outcome`).
    pub(crate) fn note_device_outcome(
        &self,
        context: Context,
        outcome: &std::result::Result<(), DeviceError>,
    ) {
        self.gpus.note_outcome(context, outcome);
    }

    /// The GPU executors (their count of device work in flight).
    pub(crate) fn gpus(&self) -> &GpuExecutors {
        &self.gpus
    }

    /// Whether ready `Async` ops run on the thread that pushed them (`ThreadedPerDevice`).
    #[inline]
    pub(crate) fn runs_ready_async_on_pusher(&self) -> bool {
        matches!(self.cpu, CpuWorkers::PerDevice(_))
    }

    /// The started worker block of `key`.
    #[inline]
    pub(crate) fn block(&self, key: BlockKey) -> Option<&CpuBlock> {
        match (&self.cpu, key) {
            (CpuWorkers::Pooled(pooled), key) => pooled.block(key),
            (CpuWorkers::PerDevice(per_device), BlockKey::Cpu(id)) => per_device.cpu_block(id),
            _ => None,
        }
    }

    /// The priority block, if it was started.
    #[inline]
    pub(crate) fn priority_block(&self) -> Option<&PriorityBlock> {
        match &self.cpu {
            CpuWorkers::PerDevice(per_device) => per_device.priority_block(),
            CpuWorkers::Naive | CpuWorkers::Pooled(_) => None,
        }
    }

    /// The executor of GPU ops of `context` routed to [`Route::Device`] `{ copy }`, which
    /// resolving the route created (see `GpuExecutors::executor`).
    ///
    /// # Errors
    ///
    /// As `GpuExecutors::executor`, if it has to create the executor and cannot.
    #[inline]
    pub(crate) fn executor(&self, context: Context, copy: bool) -> Result<&Arc<dyn Executor>> {
        self.gpus.executor(context, copy)
    }

    /// Whether ops are queued on `block` now.
    pub(crate) fn has_queued(&self, block: Served) -> bool {
        match block {
            Served::Queued(key) => self.block(key).is_some_and(CpuBlock::has_queued),
            Served::Priority => self.priority_block().is_some_and(PriorityBlock::has_queued),
        }
    }

    /// A stand-in for a blocked worker of `block`: runs what is queued there until none is
    /// left (for a CPU worker block, as its workers do, with `runner`, without being one of
    /// them).
    pub(crate) fn stand_in(&self, block: Served, runner: impl FnOnce() -> Arc<dyn BlockRunner>) {
        match block {
            Served::Queued(key) => {
                if let Some(block) = self.block(key) {
                    let standing_in = StandingIn::enter(self.engine, key, runner());
                    block.help();
                    drop(standing_in);
                }
            }
            Served::Priority => {
                if let Some(priority) = self.priority_block() {
                    // Each task marks itself (`EngineState::execute_priority_task`) and holds
                    // its own reference to the engine.
                    priority.run_queued();
                }
            }
        }
    }

    /// Shuts the started CPU blocks down and joins their threads (every op is complete: the
    /// caller waited for the engine to be idle), which drops the runners their workers hold.
    pub(crate) fn stop_blocks(&self) {
        match &self.cpu {
            CpuWorkers::Naive => {}
            CpuWorkers::Pooled(pooled) => pooled.blocks().for_each(CpuBlock::shut_down_and_join),
            CpuWorkers::PerDevice(per_device) => per_device
                .cpu_blocks()
                .for_each(CpuBlock::shut_down_and_join),
        }
    }
}
