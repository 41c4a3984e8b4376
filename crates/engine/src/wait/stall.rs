//! Warnings for waits that stay blocked.
//!
//! The engine cannot tell every hang from a long wait (see "Misuse" in `docs/engine.md`: a
//! cycle through a thread outside the engine, an async op whose `Completion` is never
//! completed, ...). So that such a hang is not silent, a wait that has blocked for
//! [`EngineConfig::stall_warning`](crate::EngineConfig::stall_warning) warns, and again after
//! each further period (`warn.rs`: a `WARN` event, target `depengine::stall`, when a `tracing`
//! subscriber wants it, else a line on stderr), naming what it waits for: for `wait_for_var`,
//! the var, what holds it and the ops queued ahead of the wait (`api/blocking.rs`); for
//! `wait_for_all` and the last clone's shutdown, the number of pending ops. Each ends by
//! pointing to `Engine::dump_pending`, the whole picture (`api/dump.rs`).
//!
//! A blocked wait wakes once per period to check; nothing else changes for it.

use std::time::{Duration, Instant};

/// When a blocked wait warns next: after each `period` it has waited.
pub(crate) struct StallClock {
    started: Instant,
    period: Option<Duration>,
    next: Option<Instant>,
}

impl StallClock {
    pub(crate) fn start(period: Option<Duration>) -> Self {
        let started = Instant::now();
        StallClock {
            started,
            period,
            // A period too long to add to the clock never comes due.
            next: period.and_then(|period| started.checked_add(period)),
        }
    }

    /// How long to block before the next check (at most `slice`, if given).
    pub(crate) fn timeout(&self, slice: Option<Duration>) -> Option<Duration> {
        let until_warning = self
            .next
            .map(|next| next.saturating_duration_since(Instant::now()));
        match (until_warning, slice) {
            (Some(left), Some(slice)) => Some(left.min(slice)),
            (left, slice) => left.or(slice),
        }
    }

    /// If a warning is due: how long the wait has blocked (and the next one is scheduled).
    pub(crate) fn due(&mut self) -> Option<Duration> {
        let (next, period) = (self.next?, self.period?);
        let now = Instant::now();
        if now < next {
            return None;
        }
        self.next = now.checked_add(period);
        Some(now - self.started)
    }
}
