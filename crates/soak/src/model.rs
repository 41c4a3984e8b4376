//! The checker: a sequential model of one pusher's vars, which applies each op in push order
//! under the crate's failure rules, independently of the engine, and predicts what every look
//! at a var must see.
//!
//! A pusher alone writes its vars, and every op on a var runs in push order whatever the
//! engine's schedule, so the model, applied when each op is pushed, is exact: the content of
//! each value (with the partial writes of ops that panic), the failure each var holds and
//! which op it names, and the failures no wait has returned yet (what `wait_for_all` reports).

use std::collections::HashSet;

use crate::value::{Content, op_input, term, write_plain};
use crate::workload::{AccumulatorSpec, OpSpec, failing_name};

/// A failure the model tracks: the op that failed by itself (an op, or a write guard dropped
/// by a panic, which the engine names `data write guard`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FailId {
    pub(crate) id: u64,
    pub(crate) guard: bool,
}

impl FailId {
    /// The op name the engine reports for it.
    pub(crate) fn name(self) -> String {
        if self.guard {
            "data write guard".to_owned()
        } else {
            failing_name(self.id)
        }
    }
}

/// A var's predicted state: its value and the failure it holds.
#[derive(Clone, Debug)]
pub(crate) struct Tracked<T> {
    pub(crate) value: T,
    pub(crate) failure: Option<FailId>,
}

impl<T> Tracked<T> {
    pub(crate) fn new(value: T) -> Self {
        Tracked {
            value,
            failure: None,
        }
    }
}

/// What an op did, by the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ran,
    /// It ran and failed by itself.
    Failed(FailId),
    /// A var it names held this failure: it did not run, and passed the failure on.
    Skipped(FailId),
}

/// One pusher's vars, by the model.
pub(crate) struct Model {
    pub(crate) typed: Vec<Tracked<Content>>,
    pub(crate) plain: Vec<Tracked<u64>>,
    /// The shared read-only values (never written, never failed).
    pub(crate) shared: Vec<Content>,
    /// Per accumulator: the sum of this pusher's terms, and their count.
    pub(crate) sums: Vec<(u64, u64)>,
    /// Failures of this pusher's ops that no look returned yet.
    pub(crate) unreported: HashSet<FailId>,
}

impl Model {
    pub(crate) fn new(shared: Vec<Content>, accumulators: usize) -> Self {
        Model {
            typed: Vec::new(),
            plain: Vec::new(),
            shared,
            sums: vec![(0, 0); accumulators],
            unreported: HashSet::new(),
        }
    }

    /// Applies `op`, pushed now: rules 1 and 2 of the crate's failure rules (rule 5 needs no
    /// step: a write that runs finds its vars clear).
    pub(crate) fn apply(&mut self, op: &OpSpec) -> Outcome {
        // Rule 2, with the failure of the first failed var in the engine's order: the plain
        // reads, the data reads, the plain writes, the data writes.
        let held = op
            .plain_reads
            .iter()
            .map(|p| self.plain[p].failure)
            .chain(op.reads.iter().map(|t| self.typed[t].failure))
            .chain(op.plain_writes.iter().map(|p| self.plain[p].failure))
            .chain(op.writes.iter().map(|t| self.typed[t].failure))
            .find_map(|failure| failure);
        if let Some(failure) = held {
            self.fail_writes(op, failure);
            return Outcome::Skipped(failure);
        }
        let input = op_input(
            op.id,
            op.plain_reads.iter().map(|p| self.plain[p].value),
            op.shared_reads
                .iter()
                .map(|s| self.shared[s].state)
                .chain(op.reads.iter().map(|t| self.typed[t].value.state)),
        );
        let written = op.fate.written(op.plain_writes.len() + op.writes.len());
        let plain_writes = op.plain_writes.len();
        for k in 0..written {
            let term = term(input, k);
            if k < plain_writes {
                let plain = &mut self.plain[op.plain_writes.get(k)].value;
                *plain = write_plain(*plain, term);
            } else {
                self.typed[op.writes.get(k - plain_writes)]
                    .value
                    .write(term);
            }
        }
        if op.fate.fails() {
            // Rule 1: stored on every var it writes.
            let failure = FailId {
                id: op.id,
                guard: false,
            };
            self.fail_writes(op, failure);
            self.unreported.insert(failure);
            Outcome::Failed(failure)
        } else {
            Outcome::Ran
        }
    }

    fn fail_writes(&mut self, op: &OpSpec, failure: FailId) {
        for p in op.plain_writes.iter() {
            self.plain[p].failure = Some(failure);
        }
        for t in op.writes.iter() {
            self.typed[t].failure = Some(failure);
        }
    }

    /// Applies an accumulator op: its terms, one per accumulator it names.
    pub(crate) fn apply_accumulator(&mut self, op: &AccumulatorSpec) {
        let input = op_input(
            op.id,
            std::iter::empty(),
            op.shared_reads.iter().map(|s| self.shared[s].state),
        );
        for (k, a) in op.accumulators.iter().enumerate() {
            let (sum, count) = &mut self.sums[a];
            *sum = sum.wrapping_add(term(input, k));
            *count += 1;
        }
    }

    /// A look that returns a typed var's failure and clears it (a read, a wait, a take):
    /// rule 3. The failure it returns, if any.
    pub(crate) fn report_typed(&mut self, slot: usize) -> Option<FailId> {
        let failure = self.typed[slot].failure.take();
        self.reported(failure)
    }

    /// As `report_typed`, for a plain var.
    pub(crate) fn report_plain(&mut self, slot: usize) -> Option<FailId> {
        let failure = self.plain[slot].failure.take();
        self.reported(failure)
    }

    fn reported(&mut self, failure: Option<FailId>) -> Option<FailId> {
        if let Some(failure) = failure {
            self.unreported.remove(&failure);
        }
        failure
    }

    /// A write guard on a typed var that is dropped by a panic after writing `term`: the
    /// write stays, and the var holds the guard's failure.
    pub(crate) fn guard_panicked(&mut self, slot: usize, id: u64, term: u64) {
        let failure = FailId { id, guard: true };
        let tracked = &mut self.typed[slot];
        tracked.value.write(term);
        tracked.failure = Some(failure);
        self.unreported.insert(failure);
    }

    /// The typed vars that hold a failure (for the sweeps that clear them).
    pub(crate) fn failed_typed(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.typed.len()).filter(|&t| self.typed[t].failure.is_some())
    }

    /// The plain vars that hold a failure.
    pub(crate) fn failed_plain(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.plain.len()).filter(|&p| self.plain[p].failure.is_some())
    }
}
