//! The random ops: which vars an op reads and writes (1 to 8, typed data and plain vars
//! mixed), where it runs, and its fate (succeeds, fails, panics, completes late ...), at the
//! rates below.

use depengine::{Context, FnProperty};

use crate::rng::Rng;

/// One op in this many is async (completed from a completer thread, usually late).
pub(crate) const ASYNC_ONE_IN: u64 = 12;
/// Of async ops, one in this many fails through its token, one drops it, one panics.
pub(crate) const ASYNC_FAULT_ONE_IN: u64 = 20;
/// One sync op in this many returns an error (after writing).
pub(crate) const ERROR_ONE_IN: u64 = 400;
/// One sync op in this many panics halfway through its writes.
pub(crate) const PANIC_ONE_IN: u64 = 500;

/// The most typed reads, and the most typed writes, of one op (the shapes `push.rs` knows).
pub(crate) const MAX_TYPED: usize = 4;
/// The most vars of one op, typed and plain together.
pub(crate) const MAX_VARS: usize = 8;

/// Up to eight small indices (slots of a pusher, shared values), without allocation.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Picks {
    len: u8,
    items: [u8; MAX_VARS],
}

impl Picks {
    pub(crate) fn push(&mut self, item: usize) {
        self.items[usize::from(self.len)] = item as u8;
        self.len += 1;
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub(crate) fn get(&self, i: usize) -> usize {
        usize::from(self.items[..self.len()][i])
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.items[..self.len()]
            .iter()
            .map(|&item| usize::from(item))
    }

    pub(crate) fn contains(&self, item: usize) -> bool {
        self.iter().any(|i| i == item)
    }
}

/// How an op ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    Ok,
    /// Returns an error after all its writes.
    Error,
    /// Panics after the first half of its writes.
    Panic,
    /// Async, completed successfully (late, on a completer thread).
    AsyncOk,
    /// Async, failed through its token after its writes.
    AsyncFail,
    /// Async, its token dropped unused after its writes.
    AsyncDrop,
    /// Async, panics after the first half of its writes, on the completer thread.
    AsyncPanic,
}

impl Fate {
    pub(crate) fn is_async(self) -> bool {
        matches!(
            self,
            Fate::AsyncOk | Fate::AsyncFail | Fate::AsyncDrop | Fate::AsyncPanic
        )
    }

    /// Whether the op fails by itself (when it runs at all).
    pub(crate) fn fails(self) -> bool {
        !matches!(self, Fate::Ok | Fate::AsyncOk)
    }

    /// How many of `writes` targets the op writes before it ends.
    pub(crate) fn written(self, writes: usize) -> usize {
        match self {
            Fate::Panic | Fate::AsyncPanic => writes.div_ceil(2),
            _ => writes,
        }
    }
}

/// Where an op runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    pub(crate) context: Context,
    pub(crate) property: FnProperty,
    pub(crate) priority: i32,
}

/// An op on a pusher's own vars (and shared read-only values).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpSpec {
    pub(crate) id: u64,
    pub(crate) plain_reads: Picks,
    pub(crate) plain_writes: Picks,
    /// Shared read-only values read (named before the own reads).
    pub(crate) shared_reads: Picks,
    pub(crate) reads: Picks,
    pub(crate) writes: Picks,
    pub(crate) fate: Fate,
    pub(crate) place: Place,
}

/// An op that adds to shared accumulators, reading shared read-only values: it never fails,
/// so that pushers may race on the accumulators and their sums stay exact.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AccumulatorSpec {
    pub(crate) id: u64,
    pub(crate) shared_reads: Picks,
    pub(crate) accumulators: Picks,
}

/// The name of an op that fails by itself: failures name the original op, so the checker
/// knows which one a report is about.
pub(crate) fn failing_name(id: u64) -> String {
    format!("soak-fail-{id}")
}

/// What an op may pick from: the usable slots of its pusher, and the shared values.
pub(crate) struct Pools<'a> {
    pub(crate) typed: &'a [u8],
    pub(crate) plain: &'a [u8],
    /// The shared read-only values: `0..n`.
    pub(crate) shared: &'a [u8],
}

/// Picks `count` distinct items of `pool` not in `taken`, as many as there are.
fn pick(rng: &mut Rng, pool: &[u8], count: usize, taken: &[&Picks], out: &mut Picks) {
    for _ in 0..count * 4 {
        if out.len() == count || out.len() == MAX_VARS {
            return;
        }
        let item = usize::from(pool[rng.below(pool.len())]);
        if !out.contains(item) && taken.iter().all(|picks| !picks.contains(item)) {
            out.push(item);
        }
    }
}

/// A random op with id `id`.
pub(crate) fn op(rng: &mut Rng, id: u64, pools: &Pools<'_>) -> OpSpec {
    let vars = 1 + rng.below(MAX_VARS);
    let typed_writes = rng.below(vars.min(MAX_TYPED) + 1);
    let typed_reads = rng.below((vars - typed_writes).min(MAX_TYPED) + 1);
    let plain = vars - typed_writes - typed_reads;
    let plain_writes = rng.below(plain + 1);
    let mut spec = OpSpec {
        id,
        plain_reads: Picks::default(),
        plain_writes: Picks::default(),
        shared_reads: Picks::default(),
        reads: Picks::default(),
        writes: Picks::default(),
        fate: fate(rng),
        place: place(rng),
    };
    if spec.fate.is_async() && rng.one_in(2) {
        // Run on the pushing thread when ready at push (`ThreadedPerDevice`).
        spec.place.property = FnProperty::Async;
    }
    if !pools.typed.is_empty() {
        pick(rng, pools.typed, typed_writes, &[], &mut spec.writes);
        let shared = (0..typed_reads).filter(|_| rng.one_in(3)).count();
        if !pools.shared.is_empty() {
            pick(rng, pools.shared, shared, &[], &mut spec.shared_reads);
        }
        let own = typed_reads - spec.shared_reads.len();
        pick(rng, pools.typed, own, &[&spec.writes], &mut spec.reads);
    }
    if !pools.plain.is_empty() {
        pick(rng, pools.plain, plain_writes, &[], &mut spec.plain_writes);
        let reads = plain - plain_writes;
        pick(
            rng,
            pools.plain,
            reads,
            &[&spec.plain_writes],
            &mut spec.plain_reads,
        );
    }
    spec
}

/// A random accumulator op with id `id`, over the shared read-only values `shared` and the
/// accumulators `accumulators` (both `0..n`, not empty).
pub(crate) fn accumulator_op(
    rng: &mut Rng,
    id: u64,
    shared: &[u8],
    accumulators: &[u8],
) -> AccumulatorSpec {
    let mut spec = AccumulatorSpec {
        id,
        shared_reads: Picks::default(),
        accumulators: Picks::default(),
    };
    let reads = rng.below(3);
    pick(rng, shared, reads, &[], &mut spec.shared_reads);
    let count = 1 + rng.below(accumulators.len());
    pick(rng, accumulators, count, &[], &mut spec.accumulators);
    spec
}

/// A random fate, at the rates above.
pub(crate) fn fate(rng: &mut Rng) -> Fate {
    if rng.one_in(ASYNC_ONE_IN) {
        match rng.below(ASYNC_FAULT_ONE_IN as usize) {
            0 => Fate::AsyncFail,
            1 => Fate::AsyncDrop,
            2 => Fate::AsyncPanic,
            _ => Fate::AsyncOk,
        }
    } else if rng.one_in(ERROR_ONE_IN) {
        Fate::Error
    } else if rng.one_in(PANIC_ONE_IN) {
        Fate::Panic
    } else {
        Fate::Ok
    }
}

/// A sync fate (an op meant to join a bulk segment, which only sync ops do).
pub(crate) fn sync_fate(rng: &mut Rng) -> Fate {
    loop {
        let fate = fate(rng);
        if !fate.is_async() {
            return fate;
        }
    }
}

/// A random place: mostly the first CPU device's normal workers.
pub(crate) fn place(rng: &mut Rng) -> Place {
    let context = Context::cpu(u32::from(rng.one_in(10)));
    let (property, priority) = if rng.one_in(8) {
        (FnProperty::CpuPrioritized, (rng.next() % 4) as i32)
    } else {
        (FnProperty::Normal, 0)
    };
    Place {
        context,
        property,
        priority,
    }
}
