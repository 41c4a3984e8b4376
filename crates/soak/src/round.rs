//! A round: one engine kind, epoch after epoch (a fresh engine each) until its share of the
//! ops or of the time is spent.

use std::time::{Duration, Instant};

use depengine::EngineKind;

use crate::check;
use crate::epoch::{self, Setup};

/// Steps per pusher and epoch: an engine's life is long enough for its queues to fill and
/// its failures to pile up, short enough that many configurations are tried.
const EPOCH_STEPS: u64 = 10_000;

/// What a round did.
pub(crate) struct Round {
    pub(crate) ops: u64,
    pub(crate) engines: u64,
    pub(crate) elapsed: Duration,
    /// Its disagreements with the model (empty: it passed).
    pub(crate) failures: Vec<String>,
}

/// What a round runs.
pub(crate) struct Budget {
    pub(crate) seed: u64,
    pub(crate) ops: u64,
    pub(crate) time: Option<Duration>,
    pub(crate) pushers: usize,
    pub(crate) engine_in_values: bool,
}

pub(crate) fn run(kind: EngineKind, budget: &Budget) -> Round {
    let started = Instant::now();
    // Far enough to mean "none".
    let deadline = started + budget.time.unwrap_or(Duration::from_secs(1 << 32));
    let mut round = Round {
        ops: 0,
        engines: 0,
        elapsed: Duration::ZERO,
        failures: Vec::new(),
    };
    while round.ops < budget.ops && Instant::now() < deadline && !check::failed() {
        let left = (budget.ops - round.ops).div_ceil(budget.pushers as u64);
        let setup = Setup {
            kind,
            index: round.engines,
            seed: budget.seed,
            pushers: budget.pushers,
            steps: left.min(EPOCH_STEPS),
            engine_in_values: budget.engine_in_values,
            deadline,
        };
        round.ops += epoch::run(&setup);
        round.engines += 1;
    }
    round.elapsed = started.elapsed();
    round.failures = check::take();
    round
}
