//! The faults the soak injects (and the other events it provokes), each with a counter.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! faults {
    ($($kind:ident: $what:literal,)+) => {
        /// What the soak does to the engine besides plain successful ops.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Fault {
            $($kind,)+
        }

        impl Fault {
            const ALL: &[Fault] = &[$(Fault::$kind,)+];

            fn what(self) -> &'static str {
                match self {
                    $(Fault::$kind => $what,)+
                }
            }
        }
    };
}

faults! {
    OpError: "sync ops that return an error after writing",
    OpPanic: "sync ops that panic halfway through their writes",
    AsyncLate: "async ops completed late, from a completer thread",
    AsyncFailed: "async ops failed through their token",
    AsyncDropped: "async tokens dropped unused (after writing)",
    AsyncPanic: "async ops that panic halfway, on a completer thread",
    Skipped: "ops skipped for a failure on their vars (per the model)",
    AccumulatorOp: "ops racing on shared accumulators",
    BulkRun: "runs of ops pushed to join a bulk segment",
    ReadGuard: "read guards",
    WriteGuard: "write guards",
    GuardPanic: "write guards dropped by a panic",
    ReadAsync: "read_async futures awaited",
    ReadAsyncUnpolled: "read_async futures dropped unpolled",
    ReadAsyncAbandoned: "read_async futures dropped after a poll",
    WaitForVar: "wait_for_var calls",
    WaitForVarAsync: "wait_for_var_async futures awaited",
    Take: "values taken back",
    FromOtherThread: "looks above made on a lender thread",
    TakeShared: "takes refused while a clone lived in an op",
    HandleDropped: "last handles dropped (value released by the engine)",
    CloneInOp: "handle clones dropped inside ops",
    LastHandleInOp: "last handles dropped inside ops",
    EngineInValue: "values that own a clone of their engine",
    DumpPending: "dump_pending calls on a busy engine",
    DeletedPlainVar: "plain vars deleted by hand",
    DeletedData: "data deleted by hand",
    PushOnDeleted: "pushes on a deleted var, refused",
    BulkEpoch: "engines with bulk execution",
    ThrottledEpoch: "engines with a small max_pending",
    DroppedInFlight: "engines dropped with work in flight",
    InFlight: "ops pending when their engine was dropped",
}

static COUNTS: [AtomicU64; Fault::ALL.len()] = [const { AtomicU64::new(0) }; Fault::ALL.len()];

/// Counts one `fault`.
pub(crate) fn count(fault: Fault) {
    add(fault, 1);
}

/// Counts `n` of `fault`.
pub(crate) fn add(fault: Fault, n: u64) {
    COUNTS[fault as usize].fetch_add(n, Ordering::Relaxed);
}

/// Each fault's count so far, with what it is.
pub(crate) fn counts() -> Vec<(&'static str, u64)> {
    Fault::ALL
        .iter()
        .map(|&fault| (fault.what(), COUNTS[fault as usize].load(Ordering::Relaxed)))
        .collect()
}

/// Prints the counts, one per line.
pub(crate) fn print(out: &mut impl std::io::Write) {
    for (what, count) in counts() {
        // The report's own output: a write error leaves nothing better to do.
        let _ = writeln!(out, "  {count:>10}  {what}");
    }
}
