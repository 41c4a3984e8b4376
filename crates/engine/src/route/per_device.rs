//! `ThreadedPerDevice` (the default): a lazily started worker block per CPU device id, one CPU
//! priority block shared by all devices for `CpuPrioritized` ops (highest priority first), and
//! the device backend's GPU compute and copy executors. Ready `Async` ops run on the pusher
//! (see `Inner::dispatch`).

use depengine_cpu::{PriorityBlock, WorkerBlock};

use crate::context::{Context, FnProperty};
use crate::error::{EngineError, Result};
use crate::op::record::Route;
use crate::route::lazy::Lazy;
use crate::route::queued::QueuedBlock;

/// CPU device ids the engine supports.
pub(crate) const MAX_CPU_DEVICES: u32 = 64;

pub(crate) struct PerDevice {
    cpu: Box<[Lazy<QueuedBlock>]>,
    pub(crate) priority: Lazy<PriorityBlock>,
    cpu_threads: usize,
    priority_threads: usize,
}

impl PerDevice {
    pub(crate) fn new(cpu_threads: usize, priority_threads: usize) -> Self {
        PerDevice {
            cpu: (0..MAX_CPU_DEVICES).map(|_| Lazy::new()).collect(),
            priority: Lazy::new(),
            cpu_threads,
            priority_threads,
        }
    }

    /// The block of CPU device `id`, if it was started.
    #[inline]
    pub(crate) fn cpu_block(&self, id: u32) -> Option<&QueuedBlock> {
        self.cpu.get(id as usize).and_then(Lazy::get)
    }

    /// The route of a CPU op, starting its block on first use.
    pub(crate) fn route(&self, context: Context, property: FnProperty) -> Result<Route> {
        let start_error = |error: depengine_cpu::BlockError| EngineError::WorkerStart {
            message: error.to_string(),
        };
        if property == FnProperty::CpuPrioritized {
            self.priority.get_or_try_init(|| {
                PriorityBlock::new("depengine-cpu-priority", self.priority_threads)
                    .map_err(start_error)
            })?;
            return Ok(Route::Priority);
        }
        let id = context.device_id();
        let cell = self
            .cpu
            .get(id as usize)
            .ok_or(EngineError::DeviceIdOutOfRange {
                context,
                limit: MAX_CPU_DEVICES,
            })?;
        cell.get_or_try_init(|| {
            WorkerBlock::new(&format!("depengine-cpu{id}"), self.cpu_threads)
                .map(QueuedBlock::new)
                .map_err(start_error)
        })?;
        Ok(Route::Cpu)
    }
}
