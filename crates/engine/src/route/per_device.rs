//! `ThreadedPerDevice` (the default): a lazily started worker block per CPU device id, one CPU
//! priority block shared by all devices for `CpuPrioritized` ops (highest priority first), and
//! the device backend's GPU compute and copy executors. Ready `Async` ops run on the pusher
//! (see `EngineState::dispatch`).

use std::sync::Arc;

use depengine_cpu::{BlockOptions, PriorityBlock};

use crate::context::{Context, FnProperty};
use crate::error::{EngineError, Result};
use crate::op::record::{BlockKey, Route};
use crate::route::block::{self, CpuBlock, WorkerSetup};
use crate::route::lazy::Lazy;
use crate::thread::serving::BlockRunner;

/// CPU device ids the engine supports.
pub(crate) const MAX_CPU_DEVICES: u32 = 64;

pub(crate) struct PerDevice {
    cpu: Box<[Lazy<CpuBlock>]>,
    priority: Lazy<PriorityBlock>,
    cpu_threads: usize,
    /// How the CPU blocks' workers run (the priority block's search for work as long, but are
    /// never pinned).
    setup: WorkerSetup,
    priority_threads: usize,
}

impl PerDevice {
    pub(crate) fn new(cpu_threads: usize, setup: WorkerSetup, priority_threads: usize) -> Self {
        PerDevice {
            cpu: (0..MAX_CPU_DEVICES).map(|_| Lazy::new()).collect(),
            priority: Lazy::new(),
            cpu_threads,
            setup,
            priority_threads,
        }
    }

    /// The block of CPU device `id`, if it was started.
    #[inline]
    pub(crate) fn cpu_block(&self, id: u32) -> Option<&CpuBlock> {
        self.cpu.get(id as usize).and_then(Lazy::get)
    }

    /// The priority block, if it was started.
    #[inline]
    pub(crate) fn priority_block(&self) -> Option<&PriorityBlock> {
        self.priority.get()
    }

    /// The started CPU blocks.
    pub(crate) fn cpu_blocks(&self) -> impl Iterator<Item = &CpuBlock> {
        self.cpu.iter().filter_map(Lazy::get)
    }

    /// The route of a CPU op, starting its block on first use. Inlined into every push: once
    /// the block runs, the route is two loads and a comparison; the rest is `start_route`.
    #[inline]
    pub(crate) fn route(
        &self,
        context: Context,
        property: FnProperty,
        engine: u64,
        runner: impl FnOnce() -> Arc<dyn BlockRunner>,
    ) -> Result<Route> {
        if property != FnProperty::CpuPrioritized && self.cpu_block(context.device_id()).is_some() {
            return Ok(Route::Cpu);
        }
        self.start_route(context, property, engine, runner)
    }

    /// `route` where the block may have to be started (or the device id is out of range).
    #[cold]
    fn start_route(
        &self,
        context: Context,
        property: FnProperty,
        engine: u64,
        runner: impl FnOnce() -> Arc<dyn BlockRunner>,
    ) -> Result<Route> {
        if property == FnProperty::CpuPrioritized {
            self.priority.get_or_try_init(|| {
                // Unpinned: priority workers come and go beside the pinned CPU workers.
                let options = BlockOptions {
                    max_spin: Some(self.setup.max_spin),
                    ..BlockOptions::default()
                };
                PriorityBlock::with_options(
                    "depengine-cpu-priority",
                    self.priority_threads,
                    options,
                )
                .map_err(|error| EngineError::WorkerStart {
                    message: error.to_string(),
                })
            })?;
            return Ok(Route::Priority);
        }
        let id = context.device_id();
        let cell = self
            .cpu
            .get(id as usize)
            .ok_or_else(|| EngineError::device_id_out_of_range(context, MAX_CPU_DEVICES))?;
        cell.get_or_try_init(|| {
            block::start(
                &format!("depengine-cpu{id}"),
                self.cpu_threads,
                self.setup,
                engine,
                BlockKey::Cpu(id),
                runner(),
            )
        })?;
        Ok(Route::Cpu)
    }
}
