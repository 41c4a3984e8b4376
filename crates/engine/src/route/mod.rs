//! Where a ready op runs: the worker blocks of each engine kind and the device executors.

pub(crate) mod devices;
pub(crate) mod lazy;
pub(crate) mod naive;
pub(crate) mod per_device;
pub(crate) mod pooled;
pub(crate) mod queued;
pub(crate) mod ready_queue;
