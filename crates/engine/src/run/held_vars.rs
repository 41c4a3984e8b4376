//! [`HeldVars`]: what a sync function sees of the vars of the op it runs for ([`OpVars`]):
//! the op's own, or those of one op of a bulk segment.

use std::ptr::NonNull;

use depengine_graph::{Access, ReadyOp, Var};

use crate::op::record::OpRecord;
use crate::op::segment::MemberVars;
use crate::op::vars::OpVars;
use crate::run::EngineGraph;

/// The vars of `op` (or of one member of its segment), which it holds while the function runs.
pub(super) struct HeldVars<'a> {
    graph: &'a EngineGraph,
    op: &'a ReadyOp<OpRecord>,
    /// The segment member being run: its vars are positions in `op`'s (reads, then writes).
    member: Option<&'a MemberVars>,
}

impl<'a> HeldVars<'a> {
    /// The vars of `op`, from `graph`.
    #[inline]
    pub(super) fn of(graph: &'a EngineGraph, op: &'a ReadyOp<OpRecord>) -> Self {
        HeldVars {
            graph,
            op,
            member: None,
        }
    }

    /// The vars of the member of `op`'s segment whose positions are `member`.
    pub(super) fn of_member(
        graph: &'a EngineGraph,
        op: &'a ReadyOp<OpRecord>,
        member: &'a MemberVars,
    ) -> Self {
        HeldVars {
            graph,
            op,
            member: Some(member),
        }
    }

    /// The var the op (or member) named `from_end + 1`-th last among its `access`es.
    #[inline]
    fn var(&self, access: Access, from_end: usize) -> Option<Var> {
        match self.member {
            None => match access {
                Access::Read => nth_back(self.op.reads(), from_end),
                Access::Write => nth_back(self.op.writes(), from_end),
            },
            Some(member) => {
                let positions = match access {
                    Access::Read => member.reads(),
                    Access::Write => member.writes(),
                };
                let at = *positions.iter().rev().nth(from_end)?;
                self.op.reads().chain(self.op.writes()).nth(usize::from(at))
            }
        }
    }
}

/// The `from_end + 1`-th last of `vars`.
#[inline]
fn nth_back(mut vars: impl ExactSizeIterator<Item = Var>, from_end: usize) -> Option<Var> {
    let at = vars.len().checked_sub(from_end + 1)?;
    vars.nth(at)
}

impl OpVars for HeldVars<'_> {
    #[inline]
    fn attachment(&self, access: Access, from_end: usize) -> Option<NonNull<()>> {
        self.graph.attachment(self.var(access, from_end)?)
    }
}
