//! A pusher's ops: random ops on its vars, runs meant for bulk segments, accumulator ops, and
//! the waits that clear the failures the ops leave, so that failures do not take over.

use std::borrow::Cow;

use depengine::Data;

use crate::check;
use crate::faults::{self, Fault};
use crate::job::Job;
use crate::lender::Errand;
use crate::model::Outcome;
use crate::push::{self, OpVars};
use crate::value::Value;
use crate::workload::{self, Fate, OpSpec, Picks, Pools, failing_name};

use super::Pusher;

/// A handle an op's function owns.
#[derive(Clone, Copy)]
pub(super) enum Carry {
    Nothing,
    /// A clone of this slot's handle, dropped inside the op.
    Clone(usize),
    /// This slot's last handle: the value is let go of inside the op.
    Last(usize),
}

impl Pusher<'_> {
    /// One step: an op, mostly, or a look, a check, a deletion.
    pub(super) fn step(&mut self) {
        match self.rng.below(1000) {
            0..20 => self.accumulate(),
            20..25 => self.bulk_run(),
            25..55 => self.look_at_value(),
            55..60 => self.check_plain(),
            60..62 => self.delete_plain(),
            62 => self.delete_data(),
            63..65 => self.read_shared(),
            65 if self.rng.one_in(16) => self.dump_pending(),
            _ => self.random_op(),
        }
    }

    fn spec(&mut self, fate: Option<Fate>) -> OpSpec {
        let id = self.next_id();
        let pools = Pools {
            typed: &self.usable_typed,
            plain: &self.usable_plain,
            shared: &self.shared_pool,
        };
        let mut spec = workload::op(&mut self.rng, id, &pools);
        if let Some(fate) = fate {
            spec.fate = fate;
        }
        spec
    }

    pub(super) fn random_op(&mut self) {
        let spec = self.spec(None);
        let carry = match (self.rng.below(200), self.usable_typed.is_empty()) {
            (0 | 1, false) => Carry::Clone(self.usable_slot()),
            (2, false) => Carry::Last(self.usable_slot()),
            _ => Carry::Nothing,
        };
        let outcome = self.push_spec(&spec, carry);
        self.quench(&spec, outcome);
    }

    /// A usable value slot (some must be usable).
    pub(super) fn usable_slot(&mut self) -> usize {
        usize::from(self.usable_typed[self.rng.below(self.usable_typed.len())])
    }

    /// An op, then more on the same vars, each in conflict with the one before: with bulk
    /// execution on, they join one segment.
    fn bulk_run(&mut self) {
        faults::count(Fault::BulkRun);
        let fate = workload::sync_fate(&mut self.rng);
        let first = self.spec(Some(fate));
        let mut outcome = self.push_spec(&first, Carry::Nothing);
        for _ in 0..=self.rng.below(16) {
            let spec = OpSpec {
                id: self.next_id(),
                fate: workload::sync_fate(&mut self.rng),
                ..first
            };
            outcome = self.push_spec(&spec, Carry::Nothing);
        }
        // After the run: a wait would end the segment.
        self.quench(&first, outcome);
    }

    /// Applies `spec` to the model and pushes it.
    pub(super) fn push_spec(&mut self, spec: &OpSpec, carry: Carry) -> Outcome {
        self.ops += 1;
        let carried = match carry {
            Carry::Nothing => None,
            Carry::Clone(slot) | Carry::Last(slot) => self.slots[slot].data.clone(),
        };
        let outcome = self.model.apply(spec);
        count(spec.fate, outcome);
        let name = if spec.fate.fails() {
            Cow::Owned(failing_name(spec.id))
        } else {
            Cow::Borrowed("soak")
        };
        let data = |picks: &Picks| -> Vec<&Data<Value>> {
            picks
                .iter()
                .map(|t| self.slots[t].data.as_ref().expect("ops name usable slots"))
                .collect()
        };
        let mut reads: Vec<&Data<Value>> = spec
            .shared_reads
            .iter()
            .map(|s| &self.s.shared[s])
            .collect();
        reads.extend(data(&spec.reads));
        let writes = data(&spec.writes);
        let plain_reads: Vec<_> = spec.plain_reads.iter().map(|p| self.plain[p].var).collect();
        let plain_writes: Vec<_> = spec
            .plain_writes
            .iter()
            .map(|p| self.plain[p].var)
            .collect();
        let vars = OpVars {
            plain_reads: &plain_reads,
            plain_writes: &plain_writes,
            reads: &reads,
            writes: &writes,
        };
        let job = Job {
            id: spec.id,
            fate: spec.fate,
            cells: self.cells.clone(),
            plain_reads: spec.plain_reads,
            plain_writes: spec.plain_writes,
            accumulate: false,
            _carried: carried,
        };
        let completer = spec
            .fate
            .is_async()
            .then(|| self.s.completers.sender(spec.id));
        if let Err(error) = push::push(self.engine(), name, spec.place, &vars, job, completer) {
            check::fail(format!("push of op {} refused: {error}", spec.id));
        }
        match carry {
            Carry::Nothing => {}
            Carry::Clone(_) => faults::count(Fault::CloneInOp),
            Carry::Last(slot) => {
                faults::count(Fault::LastHandleInOp);
                self.retire(slot);
            }
        }
        outcome
    }

    /// An op that adds to accumulators shared by every pusher.
    fn accumulate(&mut self) {
        if self.accumulator_pool.is_empty() {
            return;
        }
        self.ops += 1;
        faults::count(Fault::AccumulatorOp);
        let id = self.next_id();
        let spec =
            workload::accumulator_op(&mut self.rng, id, &self.shared_pool, &self.accumulator_pool);
        self.model.apply_accumulator(&spec);
        let reads: Vec<_> = spec
            .shared_reads
            .iter()
            .map(|s| &self.s.shared[s])
            .collect();
        let writes: Vec<_> = spec
            .accumulators
            .iter()
            .map(|a| &self.s.accumulators[a])
            .collect();
        let vars = OpVars {
            plain_reads: &[],
            plain_writes: &[],
            reads: &reads,
            writes: &writes,
        };
        let job = Job {
            id,
            fate: Fate::Ok,
            cells: self.cells.clone(),
            plain_reads: Picks::default(),
            plain_writes: Picks::default(),
            accumulate: true,
            _carried: None,
        };
        let place = workload::place(&mut self.rng);
        let name = Cow::Borrowed("soak-accumulate");
        if let Err(error) = push::push(self.engine(), name, place, &vars, job, None) {
            check::fail(format!("push of accumulator op {id} refused: {error}"));
        }
    }

    /// After an op that failed or was skipped: most of the vars it wrote get a wait that
    /// clears their failure (awaited by a lender), so that failures stay few.
    fn quench(&mut self, spec: &OpSpec, outcome: Outcome) {
        if outcome == Outcome::Ran {
            return;
        }
        for p in spec.plain_writes.iter() {
            if !self.rng.one_in(4) {
                self.clear_plain(p);
            }
        }
        for t in spec.writes.iter() {
            if !self.rng.one_in(4) && self.slots[t].data.is_some() {
                self.clear_typed(t);
            }
        }
    }

    /// Clears every failure the model sees on a usable var.
    pub(super) fn sweep(&mut self) {
        let typed: Vec<_> = self.model.failed_typed().collect();
        for t in typed {
            if self.slots[t].data.is_some() {
                self.clear_typed(t);
            }
        }
        let plain: Vec<_> = self.model.failed_plain().collect();
        for p in plain {
            if self.plain[p].deleted.is_none() {
                self.clear_plain(p);
            }
        }
    }

    fn clear_typed(&mut self, slot: usize) {
        let var = self.slots[slot].data.as_ref().expect("a usable slot").var();
        let failure = self.model.report_typed(slot);
        self.await_elsewhere(var, failure);
    }

    fn clear_plain(&mut self, slot: usize) {
        let var = self.plain[slot].var;
        let failure = self.model.report_plain(slot);
        self.await_elsewhere(var, failure);
    }

    /// Starts a wait on `var` here (in push order), for a lender to await.
    fn await_elsewhere(&mut self, var: depengine::Var, failure: Option<crate::model::FailId>) {
        faults::count(Fault::WaitForVarAsync);
        let wait = self.engine().wait_for_var_async(var);
        let errand = Errand::Await { wait, var, failure };
        self.s.lenders.send(self.rng.next(), errand);
    }
}

/// Counts what an op did.
fn count(fate: Fate, outcome: Outcome) {
    if let Outcome::Skipped(_) = outcome {
        return faults::count(Fault::Skipped);
    }
    let fault = match fate {
        Fate::Ok => return,
        Fate::Error => Fault::OpError,
        Fate::Panic => Fault::OpPanic,
        Fate::AsyncOk => Fault::AsyncLate,
        Fate::AsyncFail => Fault::AsyncFailed,
        Fate::AsyncDrop => Fault::AsyncDropped,
        Fate::AsyncPanic => Fault::AsyncPanic,
    };
    faults::count(fault);
}
