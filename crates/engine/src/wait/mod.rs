//! Waits: counting pending ops, the one-shot a `wait_for_var` blocks on, deadlock checks of waits
//! inside ops, stand-ins for blocked workers, pushers held back by the pending bound, and
//! warnings for waits that stay blocked. [`pending::PendingOps`] is the engine's part that
//! holds the pending count, the bound and the shut-down flag; [`releases::Releases`] counts the
//! values being dropped after their ops.

pub(crate) mod deadlock;
pub(crate) mod idle;
pub(crate) mod one_shot;
pub(crate) mod pending;
pub(crate) mod releases;
pub(crate) mod stall;
pub(crate) mod stand_in;
pub(crate) mod throttle;
