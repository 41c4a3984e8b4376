//! [`SpinWindow`]: how long an idle worker keeps searching before it sleeps, learned from
//! how long its last idle period lasted.
//!
//! A worker that runs out of work searches a while longer before it sleeps (step 4 of
//! `worker.rs`): sleeping costs a futex wait now and, for whoever pushes next, a futex wake,
//! and on a virtual machine the woken worker starts several microseconds later. A fixed
//! window serves only work that comes back within it. A program that pushes a few ops every
//! millisecond or two (a step of a simulation, a training loop waiting on its data) would find
//! its workers asleep at every push, each op waiting for a wake-up, where a searching worker
//! takes it within a yield (`docs/decisions.md`, "A spin window learned from steady idle
//! periods").
//!
//! So each worker times its idle periods, and once two in a row ended with work within the
//! pool's bound ([`Builder::max_spin`](crate::Builder::max_spin), 4 ms by default), sets the
//! next window to twice the shorter of the two (at least [`SHORTEST`](SpinWindow::SHORTEST),
//! at most the bound): work that comes back at a steady period finds the worker still
//! searching. One idle period that lasted longer than the bound (or no work at all) sets it
//! back to the shortest, and so does one short period: a single pause of a millisecond
//! between two bursts does not make the worker spin for milliseconds once the work stops. An
//! idle pool spins for at most the bound before it sleeps. Each worker learns from its own idle
//! periods only, so a worker that is never woken keeps the shortest window.
//!
//! The price is CPU time while the work is periodic: a worker spends up to the bound
//! searching between two pieces of work. It yields the core at every look (step 4 of
//! `worker.rs`), so a thread that wants the core gets it.
//!
//! ```text
//!   idle period ended by work after t (the one before: p), bound = Builder::max_spin:
//!       shortest = min(SHORTEST, bound)
//!       window = clamp(2·min(t, p), shortest, bound)   if t ≤ bound and p ≤ bound
//!       window = shortest                              otherwise
//! ```
//!
//! A window belongs to its worker's thread alone (it lives on that thread's stack, in
//! `run_worker`): no atomics.

use std::time::Duration;

/// See the module documentation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpinWindow {
    window: Duration,
    /// The last idle period that ended with work, if it was no longer than `longest`.
    last: Option<Duration>,
    /// `SHORTEST`, or `longest` if that is shorter.
    shortest: Duration,
    /// The pool's bound (`Builder::max_spin`; `LONGEST` by default).
    longest: Duration,
}

impl SpinWindow {
    /// The window after a long idle period, and the least one: about what a worker's search
    /// for the released successors of the ops it ran, or the next of a stream of pushes,
    /// takes.
    pub(crate) const SHORTEST: Duration = Duration::from_micros(50);

    /// The longest window by default ([`DEFAULT_MAX_SPIN`](crate::DEFAULT_MAX_SPIN)): work that
    /// comes back at a period up to this long finds the worker searching.
    pub(crate) const LONGEST: Duration = Duration::from_millis(4);

    /// A window bounded by `longest` (`Builder::max_spin`): windows run from `SHORTEST` (or
    /// `longest` if that is shorter) to `longest`.
    pub(crate) fn new(longest: Duration) -> Self {
        let shortest = Self::SHORTEST.min(longest);
        SpinWindow {
            window: shortest,
            last: None,
            shortest,
            longest,
        }
    }

    /// How long the next idle period may spin.
    pub(crate) fn length(self) -> Duration {
        self.window
    }

    /// The idle period that began `idle_for` ago ended with work (found while searching, or
    /// woken for it).
    pub(crate) fn ended_after(&mut self, idle_for: Duration) {
        let this = (idle_for <= self.longest).then_some(idle_for);
        self.window = match (this, self.last) {
            (Some(this), Some(last)) => this
                .min(last)
                .saturating_mul(2)
                .clamp(self.shortest, self.longest),
            _ => self.shortest,
        };
        self.last = this;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_follows_the_last_two_idle_periods_within_bounds() {
        let us = Duration::from_micros;
        let mut spin = SpinWindow::new(SpinWindow::LONGEST);
        assert_eq!(spin.length(), SpinWindow::SHORTEST);
        spin.ended_after(us(700));
        assert_eq!(
            spin.length(),
            SpinWindow::SHORTEST,
            "one period is no steady period"
        );
        spin.ended_after(us(900));
        assert_eq!(spin.length(), us(1400), "twice the shorter of the last two");
        spin.ended_after(us(3));
        assert_eq!(
            spin.length(),
            SpinWindow::SHORTEST,
            "never below the shortest"
        );
        spin.ended_after(us(3000));
        spin.ended_after(us(3000));
        assert_eq!(
            spin.length(),
            SpinWindow::LONGEST,
            "never above the longest"
        );
        spin.ended_after(us(5000));
        assert_eq!(
            spin.length(),
            SpinWindow::SHORTEST,
            "a long idle period: back to the shortest"
        );
        spin.ended_after(us(3000));
        assert_eq!(
            spin.length(),
            SpinWindow::SHORTEST,
            "and it is not a steady one"
        );
    }

    #[test]
    fn a_pool_bound_caps_every_window() {
        let us = Duration::from_micros;
        let mut spin = SpinWindow::new(us(500));
        spin.ended_after(us(400));
        spin.ended_after(us(400));
        assert_eq!(spin.length(), us(500));
        spin.ended_after(us(600));
        assert_eq!(spin.length(), SpinWindow::SHORTEST, "longer than the bound");
        let mut never = SpinWindow::new(Duration::ZERO);
        assert_eq!(never.length(), Duration::ZERO);
        never.ended_after(Duration::ZERO);
        never.ended_after(Duration::ZERO);
        assert_eq!(never.length(), Duration::ZERO, "no spinning at all");
    }
}
