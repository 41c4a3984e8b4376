//! An epoch: one engine's life. A random configuration (workers, bulk execution, a pending
//! bound), shared values, pushers that run their ops, then an orderly end (everything taken
//! back and checked, `wait_for_all`'s report predicted, the engine found empty) or an abrupt
//! one (the engine dropped with work in flight). Either way every value must then have been
//! dropped exactly once, with the content the model predicts.

mod end;

use std::thread;
use std::time::{Duration, Instant};

use depengine::{Data, Engine, EngineConfig, EngineKind};

use crate::check;
use crate::completer::Completers;
use crate::faults::{self, Fault};
use crate::ledger;
use crate::lender::Lenders;
use crate::pusher::{Common, PENDING_DELETIONS, Plan, Pusher};
use crate::rng::Rng;
use crate::value::{Content, Value};
use crate::watchdog;

/// Shared read-only values, and shared accumulators, per epoch.
const SHARED: usize = 4;
const ACCUMULATORS: usize = 2;
/// Threads that finish async ops, and threads that look at lent values.
const COMPLETERS: usize = 2;
const LENDERS: usize = 2;
/// One epoch in this many ends by dropping the engine with work in flight.
const ABRUPT_ONE_IN: u64 = 4;
/// How long the values of an ended epoch may take to be dropped.
const SETTLE: Duration = Duration::from_secs(30);

/// What an epoch runs.
pub(crate) struct Setup {
    pub(crate) kind: EngineKind,
    pub(crate) index: u64,
    pub(crate) seed: u64,
    pub(crate) pushers: usize,
    pub(crate) steps: u64,
    pub(crate) engine_in_values: bool,
    pub(crate) deadline: Instant,
}

/// Runs one epoch; returns the ops its pushers pushed.
pub(crate) fn run(setup: &Setup) -> u64 {
    let mut rng = Rng::derive(setup.seed, &[setup.kind as u64, setup.index]);
    let abrupt = rng.one_in(ABRUPT_ONE_IN);
    // A pusher alone now and then: an op pushed by another thread ends a bulk segment.
    let pushers = if rng.one_in(4) { 1 } else { setup.pushers };
    let engine = match Engine::new(config(setup.kind, &mut rng)) {
        Ok(engine) => engine,
        Err(error) => {
            check::fail(format!("the engine did not start: {error}"));
            return 0;
        }
    };
    let place = format!("{} engine #{}", setup.kind, setup.index);
    watchdog::set_live(Some(engine.clone()), place.clone());
    sentinel(&engine, &mut rng);
    let shared_content: Vec<Content> = (0..SHARED).map(|_| Content::new(rng.next())).collect();
    let initial: Vec<Content> = (0..ACCUMULATORS)
        .map(|_| Content::new(rng.next()))
        .collect();
    let plan = Plan {
        steps: setup.steps,
        abrupt,
        engine_in_values: setup.engine_in_values,
        deadline: setup.deadline,
    };
    let mut ops = 0;
    thread::scope(|scope| {
        let (accumulators, accumulator_ids) = initial.iter().map(|c| new_data(&engine, c)).unzip();
        let common = Common {
            shared: shared_content
                .iter()
                .map(|c| new_data(&engine, c).0)
                .collect(),
            shared_content: shared_content.clone(),
            accumulators,
            completers: Completers::start(scope, COMPLETERS, rng.next()),
            lenders: Lenders::start(scope, LENDERS),
            engine: engine.clone(),
            plan,
        };
        let reports = push(&common, setup, pushers);
        ops = reports.iter().map(|report| report.ops).sum();
        let ending = end::Ending {
            common,
            reports,
            initial,
            accumulator_ids,
            place,
        };
        if abrupt {
            end::abrupt(ending, engine, &mut rng);
        } else {
            end::orderly(ending, engine);
        }
    });
    for error in ledger::settle(SETTLE).err().unwrap_or_default() {
        check::fail(format!("{}: {error}", setup.kind));
    }
    let pending = PENDING_DELETIONS.load(std::sync::atomic::Ordering::Relaxed);
    if pending != 0 {
        check::fail(format!("{pending} delete_var callbacks never ran"));
    }
    ops
}

/// The epoch's pushers, each on its own thread; their reports, in order.
fn push(common: &Common, setup: &Setup, pushers: usize) -> Vec<crate::pusher::Report> {
    thread::scope(|scope| {
        let pushers: Vec<_> = (0..pushers as u64)
            .map(|i| {
                let rng = Rng::derive(setup.seed, &[setup.kind as u64, setup.index, i + 1]);
                thread::Builder::new()
                    .name(format!("soak-pusher-{i}"))
                    .spawn_scoped(scope, move || Pusher::new(common, i, rng).run())
                    .expect("a pusher thread starts")
            })
            .collect();
        pushers
            .into_iter()
            .map(|pusher| {
                pusher
                    .join()
                    .expect("pushers report disagreements, never panic")
            })
            .collect()
    })
}

/// A random configuration of `kind`.
fn config(kind: EngineKind, rng: &mut Rng) -> EngineConfig {
    let mut config = EngineConfig::default()
        .kind(kind)
        .cpu_worker_threads(1 + rng.below(3))
        .cpu_priority_threads(1 + rng.below(2));
    if rng.one_in(2) {
        faults::count(Fault::BulkEpoch);
        config = config.bulk_size([4, 16, 64][rng.below(3)]);
    }
    let bound = [Some(8), Some(64), Some(512), config.max_pending, None][rng.below(5)];
    if bound.is_some_and(|bound| bound <= 64) {
        faults::count(Fault::ThrottledEpoch);
    }
    config = config.max_pending(bound);
    if rng.one_in(3) {
        // A strict bound: the pushers hold nothing their pending ops need.
        config = config.max_pending_wait(None);
    }
    if rng.one_in(4) {
        config = config.cpu_max_spin(Duration::ZERO);
    }
    config
}

/// A new value with `content`, expected to end with it; and its id.
fn new_data(engine: &Engine, content: &Content) -> (Data<Value>, u64) {
    let value = Value::new(content.clone(), None);
    let id = value.id;
    ledger::expect(id, content.digest());
    let data = engine.data(value).expect("a live engine takes data");
    (data, id)
}

/// A value whose var is deleted by hand at once: the engine keeps it until its state drops,
/// so its drop tells the ledger the engine is gone.
fn sentinel(engine: &Engine, rng: &mut Rng) {
    let (data, _) = new_data(engine, &Content::new(rng.next()));
    PENDING_DELETIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let deleted = engine.delete_var(data.var(), || {
        PENDING_DELETIONS.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    });
    if let Err(error) = deleted {
        check::fail(format!("deleting the sentinel's var: {error}"));
    }
}
