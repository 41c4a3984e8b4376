//! The end of an epoch: orderly (every value taken back and checked, `wait_for_all`'s report
//! predicted, the engine found empty), or abrupt (the engine dropped with work in flight,
//! while another thread drops handles).

use std::collections::HashSet;
use std::sync::mpsc;
use std::thread;

use depengine::{Data, Engine, EngineError, EngineStats};

use crate::check;
use crate::faults::{self, Fault};
use crate::ledger;
use crate::model::FailId;
use crate::pusher::{Common, Report};
use crate::rng::Rng;
use crate::value::{Content, Value};
use crate::watchdog;

/// What the epoch hands its end.
pub(super) struct Ending {
    pub(super) common: Common,
    pub(super) reports: Vec<Report>,
    /// The accumulators' initial contents, and their values' ids.
    pub(super) initial: Vec<Content>,
    pub(super) accumulator_ids: Vec<u64>,
    pub(super) place: String,
}

impl Ending {
    /// The content accumulator `a` must end with: its initial state plus every pusher's terms.
    /// Also tells the ledger.
    fn accumulated(&self, a: usize) -> Content {
        let mut content = self.initial[a].clone();
        for report in &self.reports {
            let (sum, count) = report.sums[a];
            content.state = content.state.wrapping_add(sum);
            content.count += count;
        }
        ledger::expect(self.accumulator_ids[a], content.digest());
        content
    }
}

/// The orderly end.
pub(super) fn orderly(ending: Ending, engine: Engine) {
    // Waits that lenders still await took their failures: they must be reported before
    // `wait_for_all` looks for unreported ones.
    ending.common.lenders.flush();
    let accumulated: Vec<Content> = (0..ending.initial.len())
        .map(|a| ending.accumulated(a))
        .collect();
    let unreported: HashSet<FailId> = ending
        .reports
        .iter()
        .flat_map(|report| report.unreported.iter().copied())
        .collect();
    let Common {
        shared,
        shared_content,
        accumulators,
        engine: pushers_engine,
        ..
    } = ending.common;
    drop(pushers_engine);
    for (a, (data, expected)) in accumulators.into_iter().zip(&accumulated).enumerate() {
        take_checked(&engine, data, expected, &format!("accumulator {a}"));
    }
    for (s, (data, expected)) in shared.into_iter().zip(&shared_content).enumerate() {
        take_checked(&engine, data, expected, &format!("shared value {s}"));
    }
    // Rule 4: the first failure no look returned, if any; then nothing.
    match engine.wait_for_all() {
        Ok(()) if unreported.is_empty() => {}
        Err(EngineError::OpFailed(failure))
            if unreported.iter().any(|f| f.name() == failure.op_name()) => {}
        outcome => check::fail(format!(
            "wait_for_all returned {outcome:?}, with {} failures unreported by the model",
            unreported.len()
        )),
    }
    if let Err(error) = engine.wait_for_all() {
        check::fail(format!("a second wait_for_all returned {error}"));
    }
    let stats = engine.stats();
    if stats != EngineStats::default() {
        check::fail(format!("the engine is not empty at the end: {stats:?}"));
    }
    watchdog::set_live(None, ending.place);
    drop(engine);
}

/// Reads, then takes `data`, which must hold `expected`.
fn take_checked(engine: &Engine, data: Data<Value>, expected: &Content, what: &str) {
    match engine.read(&data) {
        Ok(guard) if guard.content == *expected => {}
        Ok(guard) => check::fail(format!(
            "{what}: read {}, expected {expected}",
            guard.content
        )),
        Err(error) => check::fail(format!("{what}: read failed: {error}")),
    }
    match engine.take(data) {
        Ok(value) if value.content == *expected => {}
        Ok(value) => check::fail(format!(
            "{what}: took {}, expected {expected}",
            value.content
        )),
        Err(error) => check::fail(format!("{what}: take failed: {error}")),
    }
}

/// The abrupt end: the engine dropped with work in flight, while another thread drops half
/// of the handles (some before the engine is gone, some after). In half of them, that thread
/// drops the values that own a clone of the engine last, after this one dropped its own: the
/// last clone of the engine then goes with the last of them.
pub(super) fn abrupt(ending: Ending, engine: Engine, rng: &mut Rng) {
    faults::count(Fault::DroppedInFlight);
    for a in 0..ending.initial.len() {
        ending.accumulated(a);
    }
    let Ending {
        common,
        reports,
        place,
        ..
    } = ending;
    let owners_last = rng.one_in(2);
    let (mut handles, mut owners) = (Vec::new(), Vec::new());
    for (data, owns_engine) in reports.into_iter().flat_map(|r| r.left) {
        if owns_engine && owners_last {
            owners.push(data);
        } else {
            handles.push(data);
        }
    }
    handles.extend(common.shared);
    handles.extend(common.accumulators);
    for i in (1..handles.len()).rev() {
        handles.swap(i, rng.below(i + 1));
    }
    let elsewhere = handles.split_off(handles.len() / 2);
    watchdog::set_live(None, format!("{place}, dropped with work in flight"));
    drop(common.engine);
    faults::add(Fault::InFlight, engine.stats().pending_ops as u64);
    let (dropped, engine_dropped) = mpsc::channel::<()>();
    thread::scope(|scope| {
        scope.spawn(move || {
            drop(elsewhere);
            // Disconnected once this thread's engine is dropped.
            let _ = engine_dropped.recv();
            drop(owners);
        });
        drop(handles);
        drop(engine);
        drop(dropped);
    });
}
