//! [`FailureLog`]: what `wait_for_all` reports and clears (failure rule 4), in bounded memory.
//!
//! Every failed or skipped op adds the vars it wrote (a chain of replays, once, as its last
//! left them: `run/replay/`), and every op's own (root) failure adds that failure. Only
//! `wait_for_all` empties the log, so a program that handles its failures
//! with `wait_for_var` alone, and never calls `wait_for_all`, would grow it forever. The log
//! therefore forgets what `wait_for_all` no longer needs, whenever it doubles:
//!
//! - a var that holds no failure any more (a `wait_for_var` or a successful write cleared it;
//!   a var failed again is added again by that failure), and duplicates;
//! - a root failure that a `wait_for_var` already returned (`wait_for_all` skips those).
//!
//! What is left is bounded by the vars failed now and the failures nobody was told of. The
//! latter is capped at [`MAX_UNREPORTED`]: past it, only the newest further failure is kept,
//! reported if every kept one was reported by `wait_for_var` meanwhile.
//!
//! The engine adds a failed op's vars *after* storing the failure on them (after
//! `Graph::complete`), so a var pruned for holding no failure cannot be one whose failure is
//! still being stored.

use std::collections::HashSet;

use depengine_graph::Var;
use depengine_sync::{Mutex, MutexGuard, lock};

use crate::failure::OpFailure;

/// Root failures kept for `wait_for_all` that no wait returned yet.
pub(crate) const MAX_UNREPORTED: usize = 1024;

/// Entries a list may hold before it is pruned the first time.
const FIRST_PRUNE: usize = 64;

/// Failures recorded since the last `wait_for_all`, behind the log's lock.
///
/// Threads: any thread that completes a failed or skipped op (a worker, a device executor's
/// thread, the thread that completes an async op, a pusher running ops inline) adds to it, and
/// so does the thread that runs a panicking `delete_var` callback; `wait_for_all`'s caller
/// empties it, and `Engine::stats`'s caller counts it. Every method locks it once, briefly (the
/// lock ignores poisoning, and nothing that runs under it leaves the log half changed).
#[derive(Default)]
pub(crate) struct FailureLog {
    entries: Mutex<Entries>,
}

/// What the log holds.
struct Entries {
    /// Original failures (not propagated ones), in completion order.
    roots: Vec<OpFailure>,
    /// The newest root failure that did not fit in `roots`.
    overflow: Option<OpFailure>,
    /// Vars a failed or skipped op wrote: `wait_for_all` clears their failures.
    vars: Vec<Var>,
    /// Lengths at which `roots` and `vars` are pruned next.
    prune_roots_at: usize,
    prune_vars_at: usize,
}

/// What `wait_for_all` takes from the log.
pub(crate) struct Taken {
    /// The failure to report: the first root failure no wait returned yet.
    pub(crate) unreported: Option<OpFailure>,
    /// The vars whose failures to clear (some may hold none any more).
    pub(crate) vars: Vec<Var>,
}

impl Default for Entries {
    fn default() -> Self {
        Entries {
            roots: Vec::new(),
            overflow: None,
            vars: Vec::new(),
            prune_roots_at: FIRST_PRUNE,
            prune_vars_at: FIRST_PRUNE,
        }
    }
}

impl FailureLog {
    /// The entries, locked.
    fn lock(&self) -> MutexGuard<'_, Entries> {
        lock(&self.entries)
    }

    /// Records an op's own failure.
    pub(crate) fn add_root(&self, failure: OpFailure) {
        self.lock().add_root(failure);
    }

    /// Records the vars a failed or skipped op wrote (after the failure was stored on them);
    /// `holds_failure` tells whether a var still holds one, for pruning (called under the
    /// log's lock).
    pub(crate) fn add_vars(
        &self,
        vars: impl IntoIterator<Item = Var>,
        holds_failure: impl Fn(Var) -> bool,
    ) {
        self.lock().add_vars(vars, holds_failure);
    }

    /// Empties the log.
    pub(crate) fn take(&self) -> Taken {
        self.lock().take()
    }

    /// Entries held: root failures and vars.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

impl Entries {
    fn add_root(&mut self, failure: OpFailure) {
        if self.roots.len() >= self.prune_roots_at {
            self.roots.retain(|root| !root.is_reported());
            self.prune_roots_at = (2 * self.roots.len()).max(FIRST_PRUNE);
        }
        if self.roots.len() < MAX_UNREPORTED {
            self.roots.push(failure);
        } else {
            self.overflow = Some(failure);
        }
    }

    fn add_vars(
        &mut self,
        vars: impl IntoIterator<Item = Var>,
        holds_failure: impl Fn(Var) -> bool,
    ) {
        self.vars.extend(vars);
        if self.vars.len() >= self.prune_vars_at {
            let mut seen = HashSet::with_capacity(self.vars.len());
            self.vars
                .retain(|&var| seen.insert(var) && holds_failure(var));
            self.prune_vars_at = (2 * self.vars.len()).max(FIRST_PRUNE);
        }
    }

    fn take(&mut self) -> Taken {
        let log = std::mem::take(self);
        let unreported = log
            .roots
            .into_iter()
            .chain(log.overflow)
            .find(|failure| !failure.is_reported());
        Taken {
            unreported,
            vars: log.vars,
        }
    }

    fn len(&self) -> usize {
        self.roots.len() + usize::from(self.overflow.is_some()) + self.vars.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::borrow::Cow;

    use depengine_graph::Graph;

    use super::*;
    use crate::failure::FailureCause;

    fn failure(name: &'static str) -> OpFailure {
        OpFailure::new(Cow::Borrowed(name), FailureCause::Panic(String::new()))
    }

    #[test]
    fn reported_roots_are_forgotten_and_the_first_unreported_is_taken() {
        let log = FailureLog::default();
        let rounds = if cfg!(miri) { 200 } else { 100_000 };
        for _ in 0..rounds {
            let reported = failure("reported");
            log.add_root(reported.clone());
            reported.mark_reported();
        }
        assert!(log.len() <= 2 * FIRST_PRUNE, "log holds {}", log.len());
        log.add_root(failure("first"));
        log.add_root(failure("second"));
        let taken = log.take();
        assert_eq!(
            taken.unreported.map(|f| f.op_name().to_owned()).as_deref(),
            Some("first")
        );
        assert!(log.take().unreported.is_none(), "take empties the log");
    }

    #[test]
    fn unreported_roots_are_capped_and_the_newest_extra_one_is_kept() {
        let log = FailureLog::default();
        let kept: Vec<_> = (0..MAX_UNREPORTED).map(|_| failure("kept")).collect();
        for root in &kept {
            log.add_root(root.clone());
        }
        log.add_root(failure("older extra"));
        log.add_root(failure("newest extra"));
        assert_eq!(log.len(), MAX_UNREPORTED + 1);
        for root in &kept {
            root.mark_reported();
        }
        let taken = log.take();
        assert_eq!(
            taken.unreported.map(|f| f.op_name().to_owned()).as_deref(),
            Some("newest extra")
        );
    }

    #[test]
    fn vars_are_deduplicated_and_cleared_ones_forgotten() {
        let graph: Graph<(), ()> = Graph::new();
        let failed = graph.new_var().unwrap();
        let cleared = graph.new_var().unwrap();
        // Fail `failed` for good: a write that completes with an error.
        let mut ready = Vec::new();
        graph.push(&[], &[failed], (), &mut ready).unwrap();
        let op = ready.pop().unwrap();
        graph.complete(op, Err(()), &mut ready).unwrap();
        let holds = |var| graph.var_failure(var).ok().flatten().is_some();
        let log = FailureLog::default();
        let rounds = if cfg!(miri) { 100 } else { 10_000 };
        for _ in 0..rounds {
            log.add_vars([failed, cleared, failed], holds);
        }
        assert!(log.len() <= 2 * FIRST_PRUNE, "log holds {}", log.len());
        let vars = log.take().vars;
        assert!(
            vars.contains(&failed),
            "a var that still holds a failure is kept"
        );
        assert!(vars.len() <= FIRST_PRUNE + 2, "{} vars taken", vars.len());
    }
}
