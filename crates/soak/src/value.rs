//! The values the engine owns: their content, which an op's update makes a function of the
//! ops applied in push order, and the [`Value`] around it, whose drop the ledger counts.

use std::fmt;

use depengine::Engine;

use crate::ledger;
use crate::rng::mix;

/// How many states a value's log keeps before it starts over: the log makes writes allocate
/// and free, as real values do, within a bound.
const LOG_CAP: usize = 24;

/// What a value holds. The model keeps one per value it tracks and applies the same updates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Content {
    pub(crate) state: u64,
    pub(crate) count: u64,
    pub(crate) log: Vec<u64>,
}

impl Content {
    pub(crate) fn new(state: u64) -> Self {
        Content {
            state,
            count: 0,
            log: Vec::new(),
        }
    }

    /// An op's write: depends on the value before it, so writes must run in push order.
    pub(crate) fn write(&mut self, input: u64) {
        self.state = mix(self.state, input);
        self.count += 1;
        if self.log.len() == LOG_CAP {
            self.log = Vec::new();
        }
        self.log.push(self.state);
    }

    /// An accumulator's update: commutative, so that pushers may race on it.
    pub(crate) fn add(&mut self, term: u64) {
        self.state = self.state.wrapping_add(term);
        self.count += 1;
    }

    /// A word that changes with every field (what the ledger compares).
    pub(crate) fn digest(&self) -> u64 {
        let head = mix(mix(self.state, self.count), self.log.len() as u64);
        self.log.iter().fold(head, |acc, &entry| mix(acc, entry))
    }
}

impl fmt::Display for Content {
    /// Briefly, for messages: the state, the count, the log's length.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "state {:016x} after {} writes, log of {}",
            self.state,
            self.count,
            self.log.len()
        )
    }
}

/// A value the engine owns: its content, an id for the ledger, and optionally a clone of the
/// engine that owns it (a value that keeps its own engine alive).
pub(crate) struct Value {
    pub(crate) id: u64,
    pub(crate) content: Content,
    /// Never read: what matters is where it is dropped.
    _engine: Option<Engine>,
}

impl Value {
    /// A new value, registered with the ledger.
    pub(crate) fn new(content: Content, engine: Option<Engine>) -> Self {
        Value {
            id: ledger::created(),
            content,
            _engine: engine,
        }
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        ledger::dropped(self.id, self.content.digest());
    }
}

/// An op's input: its id, folded with what it reads in the order the engine lists its vars
/// (plain reads, then data reads).
pub(crate) fn op_input(
    id: u64,
    plain: impl Iterator<Item = u64>,
    data: impl Iterator<Item = u64>,
) -> u64 {
    plain.chain(data).fold(id, mix)
}

/// What an op with `input` writes to its `k`-th target (plain writes first, then data).
pub(crate) fn term(input: u64, k: usize) -> u64 {
    mix(input, k as u64)
}

/// A plain var's external value after a write of `term`.
pub(crate) fn write_plain(value: u64, term: u64) -> u64 {
    mix(value, term)
}
