//! The synchronization the facade adds of its own (completion counting and waits, the ready
//! queue's drainer protocol), from `depengine-sync`: std types normally, loom's under
//! `--cfg loom`.

pub(crate) use depengine_sync::{
    AtomicBool, AtomicUsize, Condvar, Mutex, Ordering, fence, lock, spin_hint, wait,
};
