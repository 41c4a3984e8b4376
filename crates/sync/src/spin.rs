//! Spin loops that loom can check: [`spin_hint`] for one step, [`Backoff`] for
//! spin-then-park loops.
//!
//! A spin loop waits for another thread to make progress. Under loom that other thread only runs
//! when the spinning one yields, so every step yields to the model checker there; otherwise the
//! model would explore the spinning thread forever.

/// One step of a spin loop: the CPU's spin-loop hint, or a yield to the model checker under
/// loom.
///
/// ```
/// use depengine_sync::{AtomicBool, Ordering, spin_hint};
///
/// let flag = AtomicBool::new(true);
/// while !flag.load(Ordering::Acquire) {
///     spin_hint();
/// }
/// ```
#[inline]
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Exponential backoff for spin-then-park loops: crossbeam-utils' `Backoff` (spin a few
/// doubling rounds, then yield, then report completion so that the caller parks).
#[cfg(not(loom))]
#[doc(inline)]
pub use crossbeam_utils::Backoff;

/// Backoff for spin-then-park loops under loom: completed at once, so such loops park without
/// spinning. Spinning would only multiply the interleavings to explore without adding
/// behaviours: a spin that finds nothing is followed by the parking path anyway, and a spin
/// that finds the awaited state is one of the interleavings of the parking path.
///
/// ```
/// use depengine_sync::Backoff;
///
/// let backoff = Backoff::new();
/// let mut rounds = 0;
/// while !backoff.is_completed() {
///     rounds += 1;
///     backoff.snooze();
/// }
/// // Here the caller would park until woken.
/// # let _ = rounds;
/// ```
#[cfg(loom)]
#[derive(Debug, Default)]
pub struct Backoff(());

#[cfg(loom)]
#[allow(
    clippy::unused_self,
    reason = "the methods of crossbeam-utils' Backoff, which the code outside loom calls"
)]
impl Backoff {
    /// A backoff at its first step.
    pub fn new() -> Self {
        Self::default()
    }

    /// One backoff step: a yield to the model checker.
    pub fn snooze(&self) {
        loom::thread::yield_now();
    }

    /// Always `true`: under loom, spin-then-park loops park at once (see the type's docs).
    pub fn is_completed(&self) -> bool {
        true
    }
}
