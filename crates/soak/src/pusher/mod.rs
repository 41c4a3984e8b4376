//! A pusher: one thread that owns a set of values and plain vars, pushes random ops on them
//! (and on the epoch's shared values), looks at them in every way the engine allows, and
//! keeps the model of them that each look is checked against.

mod looks;
mod ops;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Instant;

use depengine::{Data, Engine, Var};

use crate::check;
use crate::completer::Completers;
use crate::faults::{self, Fault};
use crate::job::Cells;
use crate::ledger;
use crate::lender::{Lenders, Returned};
use crate::model::{FailId, Model, Tracked};
use crate::rng::Rng;
use crate::value::{Content, Value};
use crate::watchdog;

/// Values each pusher owns.
const TYPED_SLOTS: usize = 24;
/// Plain vars each pusher owns.
const PLAIN_SLOTS: usize = 12;
/// Ops a pusher pushes last before an abrupt end, without waiting for any.
const FINAL_BURST: usize = 256;
/// One new value in this many owns a clone of its engine (when that fault is on).
const ENGINE_IN_VALUE_ONE_IN: u64 = 16;

/// What an epoch gives its pushers.
pub(crate) struct Common {
    pub(crate) engine: Engine,
    /// Values no op writes: any pusher's ops read them.
    pub(crate) shared: Vec<Data<Value>>,
    pub(crate) shared_content: Vec<Content>,
    /// Values every pusher's accumulator ops add to.
    pub(crate) accumulators: Vec<Data<Value>>,
    pub(crate) completers: Completers,
    pub(crate) lenders: Lenders,
    pub(crate) plan: Plan,
}

/// How a pusher runs.
#[derive(Clone, Copy)]
pub(crate) struct Plan {
    /// Steps per pusher.
    pub(crate) steps: u64,
    /// Ends without taking anything back: the engine is dropped with work in flight.
    pub(crate) abrupt: bool,
    pub(crate) engine_in_values: bool,
    pub(crate) deadline: Instant,
}

/// What a pusher hands back.
pub(crate) struct Report {
    pub(crate) ops: u64,
    /// Per accumulator: the sum of this pusher's terms, and their count.
    pub(crate) sums: Vec<(u64, u64)>,
    pub(crate) unreported: HashSet<FailId>,
    /// The handles it still had (an abrupt end), their expectations set, and whether each
    /// value owns a clone of the engine.
    pub(crate) left: Vec<(Data<Value>, bool)>,
}

/// Deletion callbacks registered and not run yet (every one must run once).
pub(crate) static PENDING_DELETIONS: AtomicU64 = AtomicU64::new(0);

/// A value slot: `data` is `None` while the value is lent.
struct Slot {
    data: Option<Data<Value>>,
    id: u64,
    owns_engine: bool,
}

/// A plain var slot; `deleted` is the deletion's flag, set when its callback ran.
struct PlainSlot {
    var: Var,
    deleted: Option<Arc<AtomicBool>>,
}

pub(crate) struct Pusher<'s> {
    s: &'s Common,
    index: u64,
    rng: Rng,
    model: Model,
    slots: Vec<Slot>,
    plain: Vec<PlainSlot>,
    cells: Cells,
    /// Slots an op may name now (not lent, not deleted), rebuilt when `stale`.
    usable_typed: Vec<u8>,
    usable_plain: Vec<u8>,
    stale: bool,
    shared_pool: Vec<u8>,
    accumulator_pool: Vec<u8>,
    back: Sender<Returned>,
    returns: Receiver<Returned>,
    lent: usize,
    next_id: u64,
    ops: u64,
    /// Ending: a value let go of is not replaced.
    closing: bool,
}

impl<'s> Pusher<'s> {
    pub(crate) fn new(s: &'s Common, index: u64, rng: Rng) -> Self {
        let (back, returns) = channel();
        let mut pusher = Pusher {
            s,
            index,
            rng,
            model: Model::new(s.shared_content.clone(), s.accumulators.len()),
            slots: Vec::with_capacity(TYPED_SLOTS),
            plain: Vec::with_capacity(PLAIN_SLOTS),
            cells: (0..PLAIN_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            usable_typed: Vec::new(),
            usable_plain: Vec::new(),
            stale: true,
            shared_pool: (0..s.shared.len() as u8).collect(),
            accumulator_pool: (0..s.accumulators.len() as u8).collect(),
            back,
            returns,
            lent: 0,
            next_id: 0,
            ops: 0,
            closing: false,
        };
        for slot in 0..TYPED_SLOTS {
            pusher.model.typed.push(Tracked::new(Content::default()));
            pusher.slots.push(Slot {
                data: None,
                id: 0,
                owns_engine: false,
            });
            pusher.replace(slot);
        }
        for slot in 0..PLAIN_SLOTS {
            pusher.model.plain.push(Tracked::new(0));
            let var = pusher.new_plain(slot);
            pusher.plain.push(PlainSlot { var, deleted: None });
        }
        pusher
    }

    fn engine(&self) -> &'s Engine {
        &self.s.engine
    }

    /// A fresh op id, unique in the engine (failures are named after it).
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        (self.index + 1) << 40 | self.next_id
    }

    /// Pushes until its steps are done, then ends as its plan says.
    pub(crate) fn run(mut self) -> Report {
        for step in 0..self.s.plan.steps {
            if check::failed() || Instant::now() > self.s.plan.deadline {
                break;
            }
            watchdog::tick();
            self.collect_returns();
            if self.stale {
                self.rebuild();
            }
            self.step();
            if step % 64 == 63 {
                self.sweep();
            }
        }
        self.finish()
    }

    /// A new value in `slot` (the old one, if any, already let go of).
    fn replace(&mut self, slot: usize) {
        self.stale = true;
        if self.closing {
            self.slots[slot].data = None;
            return;
        }
        let content = Content::new(self.rng.next());
        let owns_engine = self.s.plan.engine_in_values && self.rng.one_in(ENGINE_IN_VALUE_ONE_IN);
        if owns_engine {
            faults::count(Fault::EngineInValue);
        }
        let value = Value::new(content.clone(), owns_engine.then(|| self.engine().clone()));
        let id = value.id;
        match self.engine().data(value) {
            Ok(data) => {
                self.slots[slot] = Slot {
                    data: Some(data),
                    id,
                    owns_engine,
                };
            }
            Err(refused) => {
                ledger::expect(id, refused.value.content.digest());
                check::fail(format!("a new value was refused: {}", refused.error));
            }
        }
        self.model.typed[slot] = Tracked::new(content);
    }

    /// A new plain var for `slot`, its cell and model reset.
    fn new_plain(&mut self, slot: usize) -> Var {
        let value = self.rng.next();
        self.cells[slot].store(value, Ordering::Relaxed);
        self.model.plain[slot] = Tracked::new(value);
        self.stale = true;
        self.engine().new_var().expect("a live engine makes vars")
    }

    /// Lets go of the value in `slot` (its last handle is dropped, or moved elsewhere): it
    /// must end with the model's content. Then puts a new value there.
    fn retire(&mut self, slot: usize) {
        ledger::expect(self.slots[slot].id, self.model.typed[slot].value.digest());
        self.slots[slot].data = None;
        self.replace(slot);
    }

    /// Takes back the handles that lenders return.
    fn collect_returns(&mut self) {
        while let Ok(returned) = self.returns.try_recv() {
            self.returned(returned);
        }
    }

    fn returned(&mut self, returned: Returned) {
        self.lent -= 1;
        match returned.data {
            Some(data) => self.slots[returned.slot].data = Some(data),
            None => self.replace(returned.slot),
        }
        self.stale = true;
    }

    /// Rebuilds the lists of usable slots, reviving deleted plain vars whose deletion ran.
    fn rebuild(&mut self) {
        for slot in 0..PLAIN_SLOTS {
            let done = self.plain[slot]
                .deleted
                .as_ref()
                .is_some_and(|flag| flag.load(Ordering::Acquire));
            if done {
                let var = self.new_plain(slot);
                self.plain[slot] = PlainSlot { var, deleted: None };
            }
        }
        self.usable_typed.clear();
        self.usable_typed
            .extend((0..TYPED_SLOTS as u8).filter(|&t| self.slots[usize::from(t)].data.is_some()));
        self.usable_plain.clear();
        self.usable_plain.extend(
            (0..PLAIN_SLOTS as u8).filter(|&p| self.plain[usize::from(p)].deleted.is_none()),
        );
        self.stale = false;
    }

    /// Waits for every lent value to come back.
    fn wait_returns(&mut self) {
        while self.lent > 0 {
            let returned = self
                .returns
                .recv()
                .expect("the pusher holds a sender of its own returns");
            self.returned(returned);
        }
    }

    /// Ends the pusher: takes or drops every value and checks every plain var (or, for an
    /// abrupt end, hands the handles to the epoch, which drops the engine under them).
    fn finish(mut self) -> Report {
        self.wait_returns();
        let mut left = Vec::new();
        if self.s.plan.abrupt {
            // The last ops, for the engine to drop in flight.
            self.rebuild();
            for _ in 0..FINAL_BURST {
                self.random_op();
            }
            for slot in 0..TYPED_SLOTS {
                ledger::expect(self.slots[slot].id, self.model.typed[slot].value.digest());
                let owns_engine = self.slots[slot].owns_engine;
                left.extend(self.slots[slot].data.take().map(|data| (data, owns_engine)));
            }
        } else {
            self.let_go_of_all();
        }
        Report {
            ops: self.ops,
            sums: self.model.sums.clone(),
            unreported: std::mem::take(&mut self.model.unreported),
            left,
        }
    }
}
