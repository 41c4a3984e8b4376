//! Looks at a value from outside every op, on the pusher's thread or a lender's: guards,
//! `read_async` futures (awaited, dropped unpolled, dropped after a poll), waits, takes, and
//! the drop of the last handle. Each checks what it sees against the model's prediction.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use depengine::{Data, Engine, EngineError, TakeError};
use futures::executor::block_on;
use futures::task::noop_waker_ref;

use crate::check;
use crate::faults::{self, Fault};
use crate::job::Injected;
use crate::value::{Content, Value};

/// A way to look at a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Look {
    Read,
    ReadAsync,
    ReadAsyncUnpolled,
    /// Polled once, then dropped: only on a value the model says holds no failure, whose
    /// outcome then does not depend on how far the future got.
    ReadAsyncAbandoned,
    /// A write guard that writes this term.
    Write(u64),
    /// A write guard that writes this term, then is dropped by a panic.
    WritePanic(u64),
    WaitForVar,
    WaitForVarAsync,
    Take,
    /// The last handle dropped: the engine releases the value.
    Drop,
}

/// What the model says a look sees: the failure it returns (by op name), else the content.
#[derive(Clone, Debug)]
pub(crate) struct Expect {
    pub(crate) failure: Option<String>,
    pub(crate) content: Content,
}

/// Performs `look` at `data` (value `id`), checking it against `expect`. Returns the handle,
/// unless the look took or dropped it.
pub(crate) fn perform(
    engine: &Engine,
    data: Data<Value>,
    id: u64,
    look: Look,
    expect: &Expect,
) -> Option<Data<Value>> {
    let what = |outcome: &str| format!("{look:?} of value {id}: {outcome}");
    match look {
        Look::Read => seen(
            engine.read(&data).map(|guard| guard.content.clone()),
            expect,
            &what,
        ),
        Look::ReadAsync => {
            let guard = block_on(engine.read_async(&data));
            seen(guard.map(|guard| guard.content.clone()), expect, &what);
        }
        Look::ReadAsyncUnpolled => drop(engine.read_async(&data)),
        Look::ReadAsyncAbandoned => {
            let mut future = pin!(engine.read_async(&data));
            let mut context = Context::from_waker(noop_waker_ref());
            if let Poll::Ready(guard) = future.as_mut().poll(&mut context) {
                seen(guard.map(|guard| guard.content.clone()), expect, &what);
            }
        }
        Look::Write(term) => match engine.write(&data) {
            Ok(mut guard) => {
                seen(Ok(guard.content.clone()), expect, &what);
                guard.content.write(term);
            }
            Err(error) => seen(Err(error), expect, &what),
        },
        Look::WritePanic(term) => {
            let panicked = catch_unwind(AssertUnwindSafe(|| match engine.write(&data) {
                Ok(mut guard) => {
                    seen(Ok(guard.content.clone()), expect, &what);
                    guard.content.write(term);
                    std::panic::panic_any(Injected);
                }
                Err(error) => seen(Err(error), expect, &what),
            }));
            if let Err(payload) = panicked
                && !payload.is::<Injected>()
            {
                std::panic::resume_unwind(payload);
            }
        }
        Look::WaitForVar => {
            let outcome = engine.wait_for_var(data.var());
            waited(outcome, expect.failure.as_deref(), &what);
        }
        Look::WaitForVarAsync => {
            let outcome = block_on(engine.wait_for_var_async(data.var()));
            waited(outcome, expect.failure.as_deref(), &what);
        }
        Look::Take => {
            take(engine, data, expect, &what);
            return None;
        }
        Look::Drop => {
            faults::count(Fault::HandleDropped);
            return None;
        }
    }
    Some(data)
}

/// Takes the value back, retrying while a clone carried by an op is alive.
fn take(engine: &Engine, mut data: Data<Value>, expect: &Expect, what: &dyn Fn(&str) -> String) {
    loop {
        match engine.take(data) {
            Ok(value) => return seen(Ok(value.content.clone()), expect, what),
            Err(TakeError::Failed { error, value }) => {
                seen(Err(error), expect, what);
                if value.content != expect.content {
                    check::fail(what(&format!(
                        "the failed take gave {}, the model says {}",
                        value.content, expect.content
                    )));
                }
                return;
            }
            Err(TakeError::Refused {
                error: EngineError::DataShared,
                data: back,
            }) => {
                // An op pushed before owns a clone until it runs.
                faults::count(Fault::TakeShared);
                data = back;
                thread::sleep(Duration::from_micros(20));
            }
            Err(TakeError::Refused { error, .. }) => {
                return check::fail(what(&format!("refused: {error}")));
            }
        }
    }
}

/// Checks what a read saw: the content, or the failure (by op name).
fn seen(outcome: Result<Content, EngineError>, expect: &Expect, what: &dyn Fn(&str) -> String) {
    match outcome {
        Ok(content) if expect.failure.is_none() => {
            if content != expect.content {
                check::fail(what(&format!(
                    "saw {content}, the model says {}",
                    expect.content
                )));
            }
        }
        outcome => waited(outcome.map(drop), expect.failure.as_deref(), what),
    }
}

/// Checks a wait's outcome: `Ok`, or the failure of the op the model names.
pub(crate) fn waited(
    outcome: Result<(), EngineError>,
    failure: Option<&str>,
    what: &dyn Fn(&str) -> String,
) {
    match (outcome, failure) {
        (Ok(()), None) => {}
        (Err(EngineError::OpFailed(reported)), Some(name)) if reported.op_name() == name => {}
        (outcome, expected) => check::fail(what(&format!(
            "got {outcome:?}, the model says {}",
            expected.map_or("Ok".to_owned(), |name| format!("the failure of `{name}`"))
        ))),
    }
}
