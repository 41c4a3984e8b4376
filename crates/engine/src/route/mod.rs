//! Where a ready op runs: the worker blocks of each engine kind and the device executors, held
//! together by the engine's part [`workers::Workers`].

pub(crate) mod block;
pub(crate) mod devices;
pub(crate) mod lazy;
pub(crate) mod naive;
pub(crate) mod per_device;
pub(crate) mod pooled;
pub(crate) mod workers;
