//! A pusher's looks at its vars from outside every op (on its own thread or lent to a
//! lender's), its deletions by hand, and its last look at everything when it ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use depengine::EngineError;
use futures::executor::block_on;

use crate::check;
use crate::faults::{self, Fault};
use crate::ledger;
use crate::lender::Errand;
use crate::look::{self, Expect, Look};
use crate::model::FailId;

use super::{PENDING_DELETIONS, PLAIN_SLOTS, Pusher, TYPED_SLOTS};

impl Pusher<'_> {
    /// A random look at a random usable value, here or on a lender.
    pub(super) fn look_at_value(&mut self) {
        if self.usable_typed.is_empty() {
            return;
        }
        let slot = self.usable_slot();
        let failed = self.model.typed[slot].failure.is_some();
        let look = match self.rng.below(10) {
            0 => Look::Read,
            3 if !failed => Look::ReadAsyncAbandoned,
            1 | 3 => Look::ReadAsync,
            2 => Look::ReadAsyncUnpolled,
            5 if self.rng.one_in(3) => Look::WritePanic(self.rng.next()),
            4 | 5 => Look::Write(self.rng.next()),
            6 => Look::WaitForVar,
            7 => Look::WaitForVarAsync,
            8 => Look::Take,
            _ => Look::Drop,
        };
        let lend = self.rng.one_in(2);
        self.look(slot, look, lend);
    }

    /// Looks at `slot` with `look`, here or (`lend`) on a lender, after applying its effect
    /// to the model.
    fn look(&mut self, slot: usize, look: Look, lend: bool) {
        count(look);
        let expect = self.predict(slot, look);
        let data = self.slots[slot]
            .data
            .take()
            .expect("looks are at usable slots");
        let id = self.slots[slot].id;
        self.stale = true;
        if lend {
            self.lent += 1;
            let errand = Errand::Look {
                engine: self.engine().clone(),
                data,
                id,
                slot,
                look,
                expect,
                back: self.back.clone(),
            };
            self.s.lenders.send(self.rng.next(), errand);
        } else {
            match look::perform(self.engine(), data, id, look, &expect) {
                Some(data) => self.slots[slot].data = Some(data),
                None => self.replace(slot),
            }
        }
    }

    /// What `look` at `slot` must see, and its effect on the model (rule 3 for the looks
    /// that return a failure; the write of a write guard; a take or drop lets go of it).
    fn predict(&mut self, slot: usize, look: Look) -> Expect {
        let failure = match look {
            Look::ReadAsyncUnpolled | Look::Drop => None,
            _ => self.model.report_typed(slot),
        };
        let expect = Expect {
            failure: failure.map(FailId::name),
            content: self.model.typed[slot].value.clone(),
        };
        match look {
            Look::Write(term) if failure.is_none() => self.model.typed[slot].value.write(term),
            Look::WritePanic(term) if failure.is_none() => {
                let id = self.next_id();
                self.model.guard_panicked(slot, id, term);
            }
            Look::Take | Look::Drop => {
                ledger::expect(self.slots[slot].id, expect.content.digest());
            }
            _ => {}
        }
        expect
    }

    /// Waits for a plain var here and checks its failure and its value.
    pub(super) fn check_plain(&mut self) {
        if self.usable_plain.is_empty() {
            return;
        }
        let slot = usize::from(self.usable_plain[self.rng.below(self.usable_plain.len())]);
        self.check_plain_slot(slot);
    }

    fn check_plain_slot(&mut self, slot: usize) {
        let var = self.plain[slot].var;
        let failure = self.model.report_plain(slot).map(FailId::name);
        let outcome = if self.rng.one_in(2) {
            faults::count(Fault::WaitForVar);
            self.engine().wait_for_var(var)
        } else {
            faults::count(Fault::WaitForVarAsync);
            block_on(self.engine().wait_for_var_async(var))
        };
        let what = |outcome: &str| format!("wait on plain var {var:?}: {outcome}");
        look::waited(outcome, failure.as_deref(), &what);
        let value = self.cells[slot].load(Ordering::Relaxed);
        if value != self.model.plain[slot].value {
            check::fail(what(&format!(
                "holds {value:016x}, the model says {:016x}",
                self.model.plain[slot].value
            )));
        }
    }

    /// Deletes a plain var by hand; its callback checks the var's last value. Then a push
    /// naming it must be refused.
    pub(super) fn delete_plain(&mut self) {
        if self.usable_plain.is_empty() {
            return;
        }
        let slot = usize::from(self.usable_plain[self.rng.below(self.usable_plain.len())]);
        self.delete_plain_slot(slot);
        let var = self.plain[slot].var;
        let refused = self
            .engine()
            .op("soak-deleted")
            .writes([var])
            .push_sync(|_| {});
        Self::refused(refused, "a push on a deleted plain var");
    }

    fn delete_plain_slot(&mut self, slot: usize) {
        faults::count(Fault::DeletedPlainVar);
        let var = self.plain[slot].var;
        let expected = self.model.plain[slot].value;
        let cells = self.cells.clone();
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        PENDING_DELETIONS.fetch_add(1, Ordering::Relaxed);
        let deleted = self.engine().delete_var(var, move || {
            let value = cells[slot].load(Ordering::Relaxed);
            if value != expected {
                check::fail(format!(
                    "deleted plain var {var:?} held {value:016x}, the model says {expected:016x}"
                ));
            }
            flag.store(true, Ordering::Release);
            PENDING_DELETIONS.fetch_sub(1, Ordering::Relaxed);
        });
        if let Err(error) = deleted {
            check::fail(format!("deleting plain var {var:?}: {error}"));
        }
        self.plain[slot].deleted = Some(done);
        self.stale = true;
    }

    /// Deletes a value's var by hand: later ops and guards on it must be refused, and the
    /// engine keeps the value until it drops (a value that owns its engine would keep it
    /// alive forever, so none of those).
    pub(super) fn delete_data(&mut self) {
        if self.usable_typed.is_empty() {
            return;
        }
        let slot = self.usable_slot();
        if self.slots[slot].owns_engine {
            return;
        }
        faults::count(Fault::DeletedData);
        let data = self.slots[slot].data.take().expect("a usable slot");
        PENDING_DELETIONS.fetch_add(1, Ordering::Relaxed);
        let deleted = self.engine().delete_var(data.var(), || {
            PENDING_DELETIONS.fetch_sub(1, Ordering::Relaxed);
        });
        if let Err(error) = deleted {
            check::fail(format!(
                "deleting the var of value {}: {error}",
                self.slots[slot].id
            ));
        }
        let refused = self
            .engine()
            .op("soak-deleted")
            .write(&data)
            .push_sync(|_, _| {});
        Self::refused(refused, "a push on deleted data");
        if self.rng.one_in(2) {
            let refused = self.engine().read(&data).map(drop);
            Self::refused(refused, "a read guard on deleted data");
        }
        self.slots[slot].data = Some(data);
        self.retire(slot);
    }

    fn refused(outcome: depengine::Result<()>, what: &str) {
        match outcome {
            Err(EngineError::DeletedVar { .. }) => faults::count(Fault::PushOnDeleted),
            other => check::fail(format!("{what}: got {other:?}, expected DeletedVar")),
        }
    }

    /// Reads a shared read-only value here: it never changes.
    pub(super) fn read_shared(&mut self) {
        if self.s.shared.is_empty() {
            return;
        }
        faults::count(Fault::ReadGuard);
        let s = self.rng.below(self.s.shared.len());
        match self.engine().read(&self.s.shared[s]) {
            Ok(guard) if guard.content == self.s.shared_content[s] => {}
            Ok(guard) => check::fail(format!("shared value {s} changed: {}", guard.content)),
            Err(error) => check::fail(format!("reading shared value {s}: {error}")),
        }
    }

    /// Writes what the engine has pending while the other pushers push: the watchdog's
    /// report must not stop a busy engine, nor hang on it.
    pub(super) fn dump_pending(&mut self) {
        faults::count(Fault::DumpPending);
        if let Err(error) = self.engine().dump_pending(&mut std::io::sink()) {
            check::fail(format!("dump_pending failed: {error}"));
        }
    }

    /// The orderly end: every value taken back or dropped (here or on a lender), every plain
    /// var checked and deleted.
    pub(super) fn let_go_of_all(&mut self) {
        self.closing = true;
        for slot in 0..TYPED_SLOTS {
            if self.slots[slot].data.is_some() {
                let look = if self.rng.one_in(3) {
                    Look::Drop
                } else {
                    Look::Take
                };
                let lend = self.rng.one_in(2);
                self.look(slot, look, lend);
            }
        }
        for slot in 0..PLAIN_SLOTS {
            if self.plain[slot].deleted.is_none() {
                self.check_plain_slot(slot);
                self.delete_plain_slot(slot);
            }
        }
        self.wait_returns();
    }
}

/// Counts a look.
fn count(look: Look) {
    let fault = match look {
        Look::Read => Fault::ReadGuard,
        Look::ReadAsync => Fault::ReadAsync,
        Look::ReadAsyncUnpolled => Fault::ReadAsyncUnpolled,
        Look::ReadAsyncAbandoned => Fault::ReadAsyncAbandoned,
        Look::Write(_) => Fault::WriteGuard,
        Look::WritePanic(_) => Fault::GuardPanic,
        Look::WaitForVar => Fault::WaitForVar,
        Look::WaitForVarAsync => Fault::WaitForVarAsync,
        Look::Take => Fault::Take,
        Look::Drop => return,
    };
    faults::count(fault);
}
