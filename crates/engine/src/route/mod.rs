//! Where a ready op runs: the worker blocks of each engine kind and the device executors.

pub(crate) mod block;
pub(crate) mod devices;
pub(crate) mod lazy;
pub(crate) mod naive;
pub(crate) mod per_device;
pub(crate) mod pooled;
