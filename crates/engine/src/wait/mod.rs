//! Waits: counting pending ops, the latch a `wait_for_var` blocks on, deadlock checks of waits
//! inside ops, stand-ins for blocked workers, pushers held back by the pending bound, and
//! warnings for waits that stay blocked.

pub(crate) mod deadlock;
pub(crate) mod idle;
pub(crate) mod stall;
pub(crate) mod stand_in;
pub(crate) mod throttle;
