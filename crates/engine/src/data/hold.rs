//! Holds: how a thread outside every op reaches a value (a guard, `take`, `read_async`).
//!
//! A hold is an async op on the data's var (a read, or a write) whose function hands its
//! [`Completion`] to the waiting thread over a one-shot (`wait/one_shot.rs`): from then on, the
//! waiter holds the var as that op did, and completing the `Completion` (the guard's drop)
//! releases it. No worker blocks: the function returns at once (and an async op that is ready
//! at push time runs on the pushing thread, so holding an idle value costs one push and one
//! completion on the caller's thread).
//!
//! If a var of the hold's op holds a failure, the op is skipped: its function is dropped unrun,
//! and the hand-over's drop tells the waiter so ([`Handed::Skipped`]). The waiter then takes
//! the failure with `wait_for_var`, as a failure is returned (and cleared) everywhere else.
//!
//! A waiter that gives up (a dropped future) abandons the one-shot; a grant that finds it
//! abandoned completes its op itself, so a hold nobody waits for any more releases the var at
//! once and fails nothing.

use std::sync::Arc;

use depengine_graph::Var;

use crate::context::{Context, FnProperty};
use crate::error::Result;
use crate::name::OpName;
use crate::op::record::Completion;
use crate::op::record::{OpFn, OpRecord};
use crate::run::EngineState;
use crate::wait::one_shot::OneShot;

/// What a hold's op hands its waiter.
pub(crate) enum Handed {
    /// The op holds the var: completing this releases it.
    Granted(Completion),
    /// The op was skipped: a var it names holds a failure.
    Skipped,
}

/// The one-shot a hold's waiter waits on.
pub(crate) type HoldOneShot = OneShot<Handed>;

/// How a hold uses the var.
#[derive(Clone, Copy)]
pub(crate) enum HoldKind {
    /// A [`ReadGuard`](crate::ReadGuard) or [`ReadData`](crate::ReadData).
    Read,
    /// A [`WriteGuard`](crate::WriteGuard).
    Write,
    /// [`Engine::take`](crate::Engine::take).
    Take,
}

impl HoldKind {
    pub(crate) fn op_name(self) -> &'static str {
        match self {
            HoldKind::Read => "data read guard",
            HoldKind::Write => "data write guard",
            HoldKind::Take => "data take",
        }
    }
}

/// The hold op's side of the one-shot: hands over the completion, or, dropped unrun (the op was
/// skipped), says so.
struct HandOver {
    /// Taken by the grant.
    one_shot: Option<Arc<HoldOneShot>>,
}

impl HandOver {
    fn grant(mut self, completion: Completion) {
        if let Some(one_shot) = self.one_shot.take()
            && let Err(Handed::Granted(completion)) = one_shot.offer(Handed::Granted(completion))
        {
            // The waiter gave up: nobody holds the var; release it.
            completion.ok();
        }
    }
}

impl Drop for HandOver {
    fn drop(&mut self) {
        if let Some(one_shot) = self.one_shot.take() {
            // An abandoned one-shot takes nothing: nothing to release.
            let _ = one_shot.offer(Handed::Skipped);
        }
    }
}

/// Pushes a hold of `var` whose op hands its completion over `one_shot`.
pub(crate) fn push_hold(
    state: &Arc<EngineState>,
    var: Var,
    kind: HoldKind,
    one_shot: &Arc<HoldOneShot>,
) -> Result<()> {
    let name = kind.op_name();
    let context = Context::cpu(0);
    let property = FnProperty::Normal;
    let route = state
        .route(context, property)
        .map_err(|error| state.named(error, Some(name)))?;
    let hand_over = HandOver {
        one_shot: Some(Arc::clone(one_shot)),
    };
    let record = OpRecord {
        name: OpName::Static(name),
        func: Some(OpFn::Async(Box::new(move |_, completion| {
            hand_over.grant(completion);
        }))),
        context,
        property,
        priority: 0,
        route,
        profiled: false,
    };
    let var = [var];
    let (reads, writes): (&[Var], &[Var]) = match kind {
        HoldKind::Read => (&var, &[]),
        HoldKind::Write | HoldKind::Take => (&[], &var),
    };
    state
        .push_record(reads, writes, record)
        .map_err(|error| state.named(error, Some(name)))
}

/// Gives up waiting on `one_shot` (a dropped future): a grant already handed over is released.
pub(crate) fn abandon(one_shot: &HoldOneShot) {
    if !one_shot.abandon()
        && let Some(Handed::Granted(completion)) = one_shot.try_take()
    {
        completion.ok();
    }
}
