//! [`OpenSegment`]: the bulk segment this thread pushed last, which the ops it pushes next may
//! join; and the checks of an op's vars that decide whether one may (the rules and why they
//! keep the engine's semantics are in `run/bulk/mod.rs`).
//!
//! A thread has at most one open segment, of one engine (a field of its `ThreadState`):
//! pushing to another engine, or an op that cannot join, replaces or drops it. Only the
//! thread itself touches it; the segment it names is shared with the thread that runs it.

use std::sync::Arc;

use depengine_graph::Var;
use smallvec::SmallVec;

use crate::context::Context;
use crate::name::OpName;
use crate::op::record::SyncFn;
use crate::op::segment::{MAX_SEGMENT_VARS, Member, MemberVars, Segment};
use crate::thread;

/// A set of positions in a segment's list of vars (bit `p`: position `p`).
type Positions = u16;

const _: () = assert!(MAX_SEGMENT_VARS <= Positions::BITS as usize);

/// The pushing thread's side of the segment it pushed last.
pub(crate) struct OpenSegment {
    engine: u64,
    segment: Arc<Segment>,
    context: Context,
    priority: i32,
    /// The engine's count of graph entries while ops may join: the count before the segment
    /// was pushed plus the segment's own entry (see `run/bulk/entries.rs`).
    joinable_at: u64,
    /// Ops in the segment so far, and the most it may hold.
    ops: usize,
    max_ops: usize,
    /// The segment's vars: its first op's reads, then its writes.
    vars: SmallVec<[Var; MAX_SEGMENT_VARS]>,
    /// How many of `vars` are reads.
    reads: usize,
    /// The positions the segment's last op uses (reads or writes), and those it writes: an op
    /// conflicts with that op if it writes one of the first or reads one of the second.
    last_used: Positions,
    last_written: Positions,
}

/// What an op that asks to join brings, handed back when it may not.
pub(crate) struct Joining {
    pub(crate) name: OpName,
    pub(crate) func: SyncFn,
    pub(crate) profiled: bool,
}

impl OpenSegment {
    /// The segment of engine `engine` just pushed, whose first op reads `reads` and writes
    /// `writes` (at most [`MAX_SEGMENT_VARS`] in all, validated by the graph); ops may join it
    /// while the engine's entry count is `joinable_at`, up to `max_ops` ops in all.
    #[allow(
        clippy::too_many_arguments,
        reason = "one constructor, called once, with the segment's every property"
    )]
    pub(crate) fn new(
        engine: u64,
        segment: Arc<Segment>,
        context: Context,
        priority: i32,
        joinable_at: u64,
        max_ops: usize,
        reads: &[Var],
        writes: &[Var],
    ) -> Self {
        debug_assert!(reads.len() + writes.len() <= MAX_SEGMENT_VARS);
        let all: Positions = mask(0..reads.len() + writes.len());
        OpenSegment {
            engine,
            segment,
            context,
            priority,
            joinable_at,
            ops: 1,
            max_ops,
            vars: reads.iter().chain(writes).copied().collect(),
            reads: reads.len(),
            last_used: all,
            last_written: all & !mask(0..reads.len()),
        }
    }

    /// Appends the op (`reads`, `writes`, `op`) to this segment if it may join: same engine,
    /// context and priority, room left, no entry into the engine's graph since the segment
    /// was pushed (`entries_now`), vars that [`member_vars`](Self::member_vars) accepts, and
    /// the segment still open. Whether the segment is full now; the op back if it did not
    /// join.
    fn try_join(&mut self, request: &JoinRequest<'_>, op: Joining) -> Result<bool, Joining> {
        if request.engine != self.engine
            || request.context != self.context
            || request.priority != self.priority
            || self.ops >= self.max_ops
            || request.entries_now != self.joinable_at
        {
            return Err(op);
        }
        let Some((vars, used, written)) = self.member_vars(request.reads, request.writes) else {
            return Err(op);
        };
        let member = Member {
            name: op.name,
            func: op.func,
            profiled: op.profiled,
            vars,
        };
        if let Err(member) = self.segment.append(member) {
            return Err(Joining {
                name: member.name,
                func: member.func,
                profiled: member.profiled,
            });
        }
        self.ops += 1;
        self.last_used = used;
        self.last_written = written;
        Ok(self.ops >= self.max_ops)
    }

    /// The positions of an op's vars in the segment (as [`MemberVars`], and as the sets it
    /// uses and writes), if they allow it to join: each a var of the segment, each written
    /// one written by the segment, none twice (a list the graph would refuse is pushed alone,
    /// which reports the error), and the op in conflict with the segment's last op (which is,
    /// in turn, in conflict with the one before it: the op depends on every op of the segment).
    fn member_vars(
        &self,
        reads: &[Var],
        writes: &[Var],
    ) -> Option<(MemberVars, Positions, Positions)> {
        let mut at = [0_u8; MAX_SEGMENT_VARS];
        let mut used: Positions = 0;
        let mut written: Positions = 0;
        for (i, var) in reads.iter().chain(writes).enumerate() {
            let is_write = i >= reads.len();
            let searched = if is_write {
                &self.vars[self.reads..]
            } else {
                &self.vars[..]
            };
            let found = searched.iter().position(|held| held == var)?;
            let position = if is_write { found + self.reads } else { found };
            let bit: Positions = 1 << position;
            if used & bit != 0 {
                return None;
            }
            used |= bit;
            if is_write {
                written |= bit;
            }
            *at.get_mut(i)? = position as u8;
        }
        let conflicts_with_last =
            written & self.last_used != 0 || (used & !written) & self.last_written != 0;
        if !conflicts_with_last {
            return None;
        }
        let len = reads.len() + writes.len();
        let vars = MemberVars::new(&at[..reads.len()], &at[reads.len()..len])?;
        Some((vars, used, written))
    }
}

/// What an open segment checks of an op that would join it, besides its function: the
/// engine, context and priority it is pushed with, its var lists, and the count of graph
/// entries when it is pushed (`run/bulk/entries.rs`).
pub(crate) struct JoinRequest<'a> {
    pub(crate) engine: u64,
    pub(crate) context: Context,
    pub(crate) priority: i32,
    pub(crate) reads: &'a [Var],
    pub(crate) writes: &'a [Var],
    pub(crate) entries_now: u64,
}

/// The set of positions in `range`.
fn mask(range: std::ops::Range<usize>) -> Positions {
    range.fold(0, |set, position| set | 1 << position)
}

/// Appends an op to this thread's open segment, if it may join (see
/// [`OpenSegment::try_join`]); gives the op back if it may not. A segment that becomes full
/// is dropped from the thread: the next op starts a new one.
pub(crate) fn try_join(request: &JoinRequest<'_>, op: Joining) -> Result<(), Joining> {
    let full = thread::with(|cx| {
        let mut open = cx.open_segment.borrow_mut();
        let Some(segment) = open.as_mut() else {
            return Err(op);
        };
        let full = segment.try_join(request, op)?;
        Ok(if full { open.take() } else { None })
    })?;
    // Outside the thread's state: the thread's last reference to a segment that already ran.
    drop(full);
    Ok(())
}

/// Makes `segment` this thread's open segment, in place of any other; in the box of `reuse`
/// (the segment it replaces, taken by [`take`]) if there is one.
pub(crate) fn open(segment: OpenSegment, reuse: Option<Box<OpenSegment>>) {
    let boxed = match reuse {
        Some(mut boxed) => {
            *boxed = segment;
            boxed
        }
        None => Box::new(segment),
    };
    let replaced = thread::with(|cx| cx.open_segment.borrow_mut().replace(boxed));
    drop(replaced);
}

/// Takes this thread's open segment, if it is one of engine `engine`: the ops the thread
/// pushes next do not join it. (Its ops run all the same: the segment is in the graph.)
pub(crate) fn take(engine: u64) -> Option<Box<OpenSegment>> {
    thread::with(|cx| {
        let mut open = cx.open_segment.borrow_mut();
        if open
            .as_ref()
            .is_some_and(|segment| segment.engine == engine)
        {
            open.take()
        } else {
            None
        }
    })
}

/// Puts back a segment [`take`] took, unless the thread has opened another since.
pub(crate) fn restore(segment: Option<Box<OpenSegment>>) {
    let Some(segment) = segment else {
        return;
    };
    let unused = thread::with(|cx| {
        let mut open = cx.open_segment.borrow_mut();
        if open.is_none() {
            *open = Some(segment);
            None
        } else {
            Some(segment)
        }
    });
    drop(unused);
}

/// Drops this thread's open segment, if it is one of engine `engine` (see [`take`]).
pub(crate) fn close(engine: u64) {
    drop(take(engine));
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use depengine_graph::Graph;
    use std::borrow::Cow;

    fn request<'a>(
        engine: u64,
        context: Context,
        priority: i32,
        reads: &'a [Var],
        writes: &'a [Var],
        entries_now: u64,
    ) -> JoinRequest<'a> {
        JoinRequest {
            engine,
            context,
            priority,
            reads,
            writes,
            entries_now,
        }
    }

    fn first_op() -> Member {
        Member {
            name: OpName::from(Cow::Borrowed("first")),
            func: SyncFn::new(|_| Ok(())),
            profiled: false,
            vars: MemberVars::new(&[0], &[1, 2]).unwrap(),
        }
    }

    /// A segment whose first op reads `a` and writes `b`, `c`.
    fn segment(vars: &[Var]) -> OpenSegment {
        let segment = Arc::new(Segment::new(first_op()));
        OpenSegment::new(
            1,
            segment,
            Context::cpu(0),
            0,
            5,
            4,
            &vars[..1],
            &vars[1..3],
        )
    }

    #[test]
    fn an_op_joins_only_with_vars_of_the_segment_in_conflict_with_every_op() {
        let graph: Graph<u32> = Graph::new();
        let vars: Vec<Var> = (0..4).map(|_| graph.new_var().unwrap()).collect();
        let (a, b, c, d) = (vars[0], vars[1], vars[2], vars[3]);
        let open = segment(&vars);
        let positions = |reads: &[Var], writes: &[Var]| {
            open.member_vars(reads, writes)
                .map(|(vars, _, _)| vars.all().to_vec())
        };
        // Reads a var the segment writes, or writes one it writes: in the member's order.
        assert_eq!(positions(&[c, a], &[b]), Some(vec![2, 0, 1]));
        assert_eq!(positions(&[b], &[]), Some(vec![1]));
        // Writes a var the segment only reads; a var not in the segment; a var twice.
        assert_eq!(positions(&[], &[a]), None);
        assert_eq!(positions(&[d], &[b]), None);
        assert_eq!(positions(&[b, b], &[]), None);
        assert_eq!(positions(&[b], &[b]), None);
        // Only reads of a var the first op reads: no conflict, it would not wait for it.
        assert_eq!(positions(&[a], &[]), None);
        assert_eq!(positions(&[], &[]), None);
    }

    #[test]
    fn an_op_must_be_in_conflict_with_the_last_op_of_the_segment() {
        let graph: Graph<u32> = Graph::new();
        let vars: Vec<Var> = (0..3).map(|_| graph.new_var().unwrap()).collect();
        let (a, b, c) = (vars[0], vars[1], vars[2]);
        let mut open = segment(&vars);
        let op = || Joining {
            name: OpName::from(Cow::Borrowed("next")),
            func: SyncFn::new(|_| Ok(())),
            profiled: false,
        };
        let join = |open: &mut OpenSegment, reads: &[Var], writes: &[Var]| {
            open.try_join(&request(1, Context::cpu(0), 0, reads, writes, 5), op())
                .is_ok()
        };
        // Writes `b`: in conflict with the first op (reads `a`, writes `b`, `c`).
        assert!(join(&mut open, &[], &[b]));
        // Reads `c`: the first op writes it, the last (`b`'s writer) does not use it. Pushed
        // alone, it could run before that one.
        assert!(!join(&mut open, &[c], &[]));
        // Reads `b`: the last op writes it.
        assert!(join(&mut open, &[b], &[]));
        // Writes `c`: the last op (reads `b`) does not use it.
        assert!(!join(&mut open, &[a], &[c]));
        // Reads `b`, writes `c`: reads what the op before the last wrote, but only reads
        // what the last op reads.
        assert!(!join(&mut open, &[b], &[c]));
        // Writes `b`, which the last op reads; the segment is full after it (4 ops).
        assert_eq!(
            open.try_join(&request(1, Context::cpu(0), 0, &[], &[b], 5), op())
                .ok(),
            Some(true)
        );
        assert!(!join(&mut open, &[], &[b]), "full");
    }

    #[test]
    fn an_op_of_another_kind_or_after_another_entry_does_not_join() {
        let graph: Graph<u32> = Graph::new();
        let vars: Vec<Var> = (0..3).map(|_| graph.new_var().unwrap()).collect();
        let b = vars[1];
        let mut open = segment(&vars);
        let op = || Joining {
            name: OpName::from(Cow::Borrowed("next")),
            func: SyncFn::new(|_| Ok(())),
            profiled: false,
        };
        let cases = [
            (2, Context::cpu(0), 0, 5),
            (1, Context::cpu(1), 0, 5),
            (1, Context::cpu(0), 1, 5),
            (1, Context::cpu(0), 0, 6),
        ];
        for (engine, context, priority, entries) in cases {
            let joined = open.try_join(
                &request(engine, context, priority, &[], &[b], entries),
                op(),
            );
            assert!(joined.is_err());
        }
        let mut taken = Vec::new();
        assert!(open.segment.take_into(&mut taken));
        taken.clear();
        assert!(!open.segment.take_into(&mut taken), "closes");
        let refused = open.try_join(&request(1, Context::cpu(0), 0, &[], &[b], 5), op());
        assert!(refused.is_err(), "closed");
    }
}
