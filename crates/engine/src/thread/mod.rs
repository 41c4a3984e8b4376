//! What the engine knows about the current thread.

pub(crate) mod frame;
