//! What an op's function does to the real values: the same updates the model applies, then
//! the op's fate (an error, a panic halfway through, an async token completed or dropped).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use depengine::{AccessList, BoxError, Completion, Data, Held};

use crate::value::{Value, op_input, term, write_plain};
use crate::workload::{Fate, Picks};

/// The payload of the panics the soak injects: the panic hook stays quiet about these.
pub(crate) struct Injected;

/// The external state of a pusher's plain vars, one cell per plain slot. Relaxed accesses:
/// the engine's ordering of the ops on a var is what must make each op see the last write,
/// and a missing order shows as a value the model disagrees with.
pub(crate) type Cells = Arc<[AtomicU64]>;

/// An op's function, apart from its typed references.
pub(crate) struct Job {
    pub(crate) id: u64,
    pub(crate) fate: Fate,
    pub(crate) cells: Cells,
    pub(crate) plain_reads: Picks,
    pub(crate) plain_writes: Picks,
    /// An accumulator op: adds to its data instead of writing them.
    pub(crate) accumulate: bool,
    /// A handle the function owns and drops with itself: when the op ran, or was skipped.
    /// Never read: what matters is where it is dropped.
    pub(crate) _carried: Option<Data<Value>>,
}

impl Job {
    /// The op's writes; panics halfway if that is its fate.
    pub(crate) fn apply(&self, reads: &[&Value], writes: &mut [&mut Value]) {
        let input = op_input(
            self.id,
            self.plain_reads
                .iter()
                .map(|p| self.cells[p].load(Ordering::Relaxed)),
            reads.iter().map(|value| value.content.state),
        );
        let plain_writes = self.plain_writes.len();
        for k in 0..self.fate.written(plain_writes + writes.len()) {
            let term = term(input, k);
            if k < plain_writes {
                let cell = &self.cells[self.plain_writes.get(k)];
                cell.store(
                    write_plain(cell.load(Ordering::Relaxed), term),
                    Ordering::Relaxed,
                );
            } else if self.accumulate {
                writes[k - plain_writes].content.add(term);
            } else {
                writes[k - plain_writes].content.write(term);
            }
        }
        if matches!(self.fate, Fate::Panic | Fate::AsyncPanic) {
            std::panic::panic_any(Injected);
        }
    }

    /// A sync op's function: its writes, then its result.
    pub(crate) fn run(&self, reads: &[&Value], writes: &mut [&mut Value]) -> Result<(), BoxError> {
        self.apply(reads, writes);
        if self.fate == Fate::Error {
            Err("injected error".into())
        } else {
            Ok(())
        }
    }
}

/// An async op's token: a plain op's [`Completion`], or a typed op's [`Held`].
pub(crate) trait Token {
    fn succeed(self);
    fn fail(self);
}

impl Token for Completion {
    fn succeed(self) {
        self.ok();
    }

    fn fail(self) {
        Completion::fail(self, "injected async failure");
    }
}

impl<L: AccessList> Token for Held<L> {
    fn succeed(self) {
        self.ok();
    }

    fn fail(self) {
        Held::fail(self, "injected async failure");
    }
}

/// Ends an async op whose writes are done, as its fate says.
pub(crate) fn finish(token: impl Token, fate: Fate) {
    match fate {
        Fate::AsyncFail => token.fail(),
        Fate::AsyncDrop => drop(token),
        _ => token.succeed(),
    }
}
