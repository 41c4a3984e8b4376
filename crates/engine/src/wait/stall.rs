//! Warnings for waits that stay blocked.
//!
//! The engine cannot tell every hang from a long wait (see "Misuse" in `docs/engine.md`: a
//! cycle through a thread outside the engine, an async op whose `Completion` is never
//! completed, ...). So that such a hang is not silent, a wait that has blocked for
//! [`EngineConfig::stall_warning`](crate::EngineConfig::stall_warning) emits a `WARN` event
//! (target `depengine::stall`), and again after each further period, naming what it waits
//! for: for `wait_for_var`, the var's state and the first ops waiting on it; for
//! `wait_for_all` and the last clone's shutdown, the number of pending ops.
//!
//! A blocked wait wakes once per period to check; nothing else changes for it.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use depengine_graph::Var;

use crate::failure::OpFailure;
use crate::run::Inner;
use crate::wait::deadlock::WaitLatch;

/// Ops waiting on a var that a warning names, at most.
const NAMED_OPS: usize = 8;

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
            next: period.map(|period| started + period),
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
        self.next = Some(now + period);
        Some(now - self.started)
    }
}

impl Inner {
    /// `latch.wait()` for `wait_for_var(var)`, warning while it blocks.
    pub(crate) fn wait_watched(&self, latch: &WaitLatch, var: Var) -> Option<OpFailure> {
        let mut clock = StallClock::start(self.stall_warning);
        loop {
            match clock.timeout(None) {
                None => return latch.wait(),
                Some(timeout) => {
                    if let Some(value) = latch.wait_timeout(timeout) {
                        return value;
                    }
                }
            }
            if let Some(waited) = clock.due() {
                self.warn_stalled_var(var, waited);
            }
        }
    }

    /// `idle.wait_idle()` for `what` (`wait_for_all`, the shutdown), warning while it blocks.
    pub(crate) fn wait_idle_watched(&self, what: &str) {
        let mut clock = StallClock::start(self.stall_warning);
        while !self.idle.wait_idle_for(clock.timeout(None)) {
            if let Some(waited) = clock.due() {
                tracing::warn!(
                    target: "depengine::stall",
                    "{what} has been blocked for {:.2} s: {} op(s) pending",
                    waited.as_secs_f64(),
                    self.idle.pending(),
                );
            }
        }
    }

    /// The warning for a `wait_for_var(var)` blocked for `waited`.
    pub(crate) fn warn_stalled_var(&self, var: Var, waited: Duration) {
        let mut report = String::new();
        if let Ok(status) = self.graph.var_status(var) {
            let running = if status.write_running {
                "a write".to_owned()
            } else {
                format!("{} read(s)", status.running_reads)
            };
            let _ = write!(
                report,
                "{running} running, {} op(s) waiting",
                status.waiting
            );
        }
        if let Ok(pending) = self.graph.pending_ops(var) {
            let names: Vec<String> = pending
                .iter()
                .take(NAMED_OPS)
                .filter_map(|op| {
                    self.graph
                        .inspect_op(op.id, |record| record.name.to_string())
                })
                .collect();
            let _ = write!(report, " (first: {})", names.join(", "));
        }
        tracing::warn!(
            target: "depengine::stall",
            "wait_for_var({var}) has been blocked for {:.2} s: on the var, {report}",
            waited.as_secs_f64(),
        );
    }
}
