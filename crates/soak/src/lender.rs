//! The lender threads: threads outside the engine that await the waits a pusher started, and
//! look at values a pusher lent them (guards, `read_async`, takes, drops), then hand the
//! handles back.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::{Builder, Scope};

use depengine::{Data, Engine, Var, WaitForVar};
use futures::executor::block_on;

use crate::faults::{self, Fault};
use crate::look::{self, Expect, Look};
use crate::model::FailId;
use crate::value::Value;
use crate::watchdog;

/// What a lender does.
pub(crate) enum Errand {
    /// Awaits a wait that a pusher started on `var` (so it is in the pusher's order), which
    /// must return `failure`.
    Await {
        wait: WaitForVar,
        var: Var,
        failure: Option<FailId>,
    },
    /// Looks at a lent value, then returns the handle (if the look left one) to `back`.
    Look {
        engine: Engine,
        data: Data<Value>,
        id: u64,
        slot: usize,
        look: Look,
        expect: Expect,
        back: Sender<Returned>,
    },
    /// Replies once every errand sent before it is done.
    Flush(Sender<()>),
}

/// A lent value coming back to its pusher's slot.
pub(crate) struct Returned {
    pub(crate) slot: usize,
    pub(crate) data: Option<Data<Value>>,
}

/// Senders to the lender threads.
#[derive(Clone)]
pub(crate) struct Lenders(Vec<Sender<Errand>>);

impl Lenders {
    /// Starts `count` lenders in `scope`; they end once every sender is dropped.
    pub(crate) fn start<'s>(scope: &'s Scope<'s, '_>, count: usize) -> Self {
        let senders = (0..count)
            .map(|i| {
                let (sender, receiver) = channel();
                Builder::new()
                    .name(format!("soak-lender-{i}"))
                    .spawn_scoped(scope, move || serve(&receiver))
                    .expect("a lender thread starts");
                sender
            })
            .collect();
        Lenders(senders)
    }

    /// Sends `errand` to the lender picked by `pick`.
    pub(crate) fn send(&self, pick: u64, errand: Errand) {
        let lender = &self.0[(pick % self.0.len() as u64) as usize];
        lender
            .send(errand)
            .expect("a lender serves until its last sender is dropped");
    }

    /// Returns once every errand sent so far is done.
    pub(crate) fn flush(&self) {
        let (done, finished) = channel();
        for lender in &self.0 {
            lender
                .send(Errand::Flush(done.clone()))
                .expect("a lender serves until its last sender is dropped");
        }
        drop(done);
        while finished.recv().is_ok() {}
    }
}

fn serve(receiver: &Receiver<Errand>) {
    while let Ok(errand) = receiver.recv() {
        watchdog::tick();
        match errand {
            Errand::Await { wait, var, failure } => {
                let name = failure.map(FailId::name);
                let what = |outcome: &str| format!("awaited wait on {var:?}: {outcome}");
                look::waited(block_on(wait), name.as_deref(), &what);
            }
            Errand::Look {
                engine,
                data,
                id,
                slot,
                look,
                expect,
                back,
            } => {
                faults::count(Fault::FromOtherThread);
                let data = look::perform(&engine, data, id, look, &expect);
                drop(engine);
                // The pusher may have stopped listening after a disagreement elsewhere.
                let _ = back.send(Returned { slot, data });
            }
            Errand::Flush(done) => drop(done),
        }
    }
}
