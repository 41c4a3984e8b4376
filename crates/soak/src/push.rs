//! Pushing an op: its builder (plain vars, then its data, read or written), and its function,
//! sync or async, for each shape of typed accesses up to four reads and four writes.

use std::borrow::Cow;
use std::sync::mpsc::Sender;

use depengine::{Data, Engine, OpBuilder, Var};

use crate::completer::{self, Task};
use crate::job::{Job, finish};
use crate::value::Value;
use crate::workload::Place;

/// The vars of an op, in the order the builder names them.
pub(crate) struct OpVars<'a> {
    pub(crate) plain_reads: &'a [Var],
    pub(crate) plain_writes: &'a [Var],
    /// Data read, in the order named (shared values first).
    pub(crate) reads: &'a [&'a Data<Value>],
    pub(crate) writes: &'a [&'a Data<Value>],
}

/// The match over the shapes of two typed accesses or more: one arm per shape, whose builder
/// names its data and whose function takes the tuple of references apart.
macro_rules! shapes {
    ($shape:expr, $base:expr, $vars:expr, $job:expr, $completer:expr;
     $(($nr:literal, $nw:literal) [$($r:ident $ri:literal),*] [$($w:ident $wi:literal),*];)*) => {
        match $shape {
            $(($nr, $nw) => {
                let op = $base $(.read($vars.reads[$ri]))* $(.write($vars.writes[$wi]))*;
                let job = $job;
                match $completer {
                    Some(completer) => op.push_async(move |_, mut held| {
                        let task: Task = Box::new(move || {
                            {
                                let ($($r,)* $($w,)*) = held.refs();
                                job.apply(&[$($r),*], &mut [$($w),*]);
                            }
                            finish(held, job.fate);
                        });
                        completer::send(&completer, task);
                    }),
                    None => op.push_sync(move |_, ($($r,)* $($w,)*)| {
                        job.run(&[$($r),*], &mut [$($w),*])
                    }),
                }
            })*
            shape => unreachable!("the workload makes no op of shape {shape:?}"),
        }
    };
}

/// Pushes an op on `vars` whose function runs `job`; an async op (by its fate) hands its
/// work to the completer behind `completer`.
pub(crate) fn push(
    engine: &Engine,
    name: Cow<'static, str>,
    place: Place,
    vars: &OpVars<'_>,
    job: Job,
    completer: Option<Sender<Task>>,
) -> depengine::Result<()> {
    let base = engine
        .op(name)
        .reads(vars.plain_reads)
        .writes(vars.plain_writes)
        .on(place.context)
        .prop(place.property)
        .priority(place.priority);
    match (vars.reads.len(), vars.writes.len()) {
        (0, 0) => push_plain(base, job, completer),
        (1, 0) => {
            let op = base.read(vars.reads[0]);
            match completer {
                Some(completer) => op.push_async(move |_, mut held| {
                    let task: Task = Box::new(move || {
                        job.apply(&[held.refs()], &mut []);
                        finish(held, job.fate);
                    });
                    completer::send(&completer, task);
                }),
                None => op.push_sync(move |_, r| job.run(&[r], &mut [])),
            }
        }
        (0, 1) => {
            let op = base.write(vars.writes[0]);
            match completer {
                Some(completer) => op.push_async(move |_, mut held| {
                    let task: Task = Box::new(move || {
                        job.apply(&[], &mut [held.refs()]);
                        finish(held, job.fate);
                    });
                    completer::send(&completer, task);
                }),
                None => op.push_sync(move |_, w| job.run(&[], &mut [w])),
            }
        }
        shape => shapes!(shape, base, vars, job, completer;
        (0, 2) [] [w0 0, w1 1];
        (0, 3) [] [w0 0, w1 1, w2 2];
        (0, 4) [] [w0 0, w1 1, w2 2, w3 3];
        (1, 1) [r0 0] [w0 0];
        (1, 2) [r0 0] [w0 0, w1 1];
        (1, 3) [r0 0] [w0 0, w1 1, w2 2];
        (1, 4) [r0 0] [w0 0, w1 1, w2 2, w3 3];
        (2, 0) [r0 0, r1 1] [];
        (2, 1) [r0 0, r1 1] [w0 0];
        (2, 2) [r0 0, r1 1] [w0 0, w1 1];
        (2, 3) [r0 0, r1 1] [w0 0, w1 1, w2 2];
        (2, 4) [r0 0, r1 1] [w0 0, w1 1, w2 2, w3 3];
        (3, 0) [r0 0, r1 1, r2 2] [];
        (3, 1) [r0 0, r1 1, r2 2] [w0 0];
        (3, 2) [r0 0, r1 1, r2 2] [w0 0, w1 1];
        (3, 3) [r0 0, r1 1, r2 2] [w0 0, w1 1, w2 2];
        (3, 4) [r0 0, r1 1, r2 2] [w0 0, w1 1, w2 2, w3 3];
        (4, 0) [r0 0, r1 1, r2 2, r3 3] [];
        (4, 1) [r0 0, r1 1, r2 2, r3 3] [w0 0];
        (4, 2) [r0 0, r1 1, r2 2, r3 3] [w0 0, w1 1];
        (4, 3) [r0 0, r1 1, r2 2, r3 3] [w0 0, w1 1, w2 2];
        (4, 4) [r0 0, r1 1, r2 2, r3 3] [w0 0, w1 1, w2 2, w3 3];
        ),
    }
}

/// An op without typed data.
fn push_plain(
    base: OpBuilder<'_>,
    job: Job,
    completer: Option<Sender<Task>>,
) -> depengine::Result<()> {
    match completer {
        Some(completer) => base.push_async(move |_, completion| {
            let task: Task = Box::new(move || {
                job.apply(&[], &mut []);
                finish(completion, job.fate);
            });
            completer::send(&completer, task);
        }),
        None => base.push_sync(move |_| job.run(&[], &mut [])),
    }
}
