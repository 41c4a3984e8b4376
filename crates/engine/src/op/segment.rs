//! [`Segment`]: the ops of one bulk segment, shared by the thread that pushes them and the
//! thread that runs them (the mechanism is described in `run/bulk/mod.rs`).
//!
//! A segment is in the dependency graph from its first op on, as one op whose function runs
//! the segment's *members*. The pushing thread appends members while the segment is open; the
//! thread that runs the segment takes the members appended so far, runs them, and takes again,
//! until it finds none.
//!
//! # Why no member is lost
//!
//! Both sides work under the segment's one lock. The runner closes the segment in the same
//! critical section as the look that found it empty: an append that comes before that critical
//! section adds a member that look finds (and a later take hands over), and an append that
//! comes after it finds the segment closed and is refused, giving the member back to the
//! pusher, which pushes it another way. So every member an append accepted runs, exactly once,
//! before the segment completes, and nothing can join a segment that completed. The model
//! `segment_runs_every_member_an_append_accepted` (`loom_tests.rs`) checks it.

use depengine_sync::{Mutex, lock};

use crate::name::OpName;
use crate::op::sync_fn::SyncFn;

/// The most vars a segment's first op, and so the segment, may use (an op on more vars runs
/// alone); keeps a member's vars in 18 bytes.
pub(crate) const MAX_SEGMENT_VARS: usize = 16;

/// The members of one segment (see the module documentation).
///
/// Threads: the pushing thread appends; the thread that runs the segment (a worker of its
/// block, or the thread that makes it ready on the naive engine) takes and closes.
pub(crate) struct Segment {
    members: Mutex<Members>,
}

/// What the segment's lock protects.
struct Members {
    /// Appended and not taken yet, in push order.
    queue: Vec<Member>,
    /// Set by the take that found `queue` empty; no append is accepted after it.
    closed: bool,
}

/// One op of a segment: what running it alone would need beyond the segment's own record.
pub(crate) struct Member {
    pub(crate) name: OpName,
    pub(crate) func: SyncFn,
    /// Marked for a profiler in `ProfileMode::Marked`.
    pub(crate) profiled: bool,
    pub(crate) vars: MemberVars,
}

/// A member's vars, as positions in its segment's list of vars (the segment's first op's
/// reads then writes, as pushed), in the member's own order (its reads, then its writes): the
/// order in which a skipped op looks for the failure it passes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemberVars {
    len: u8,
    reads: u8,
    at: [u8; MAX_SEGMENT_VARS],
}

impl MemberVars {
    /// The positions of `reads` then of `writes`; `None` if there are more than
    /// [`MAX_SEGMENT_VARS`] or a position is not below it.
    pub(crate) fn new(reads: &[u8], writes: &[u8]) -> Option<Self> {
        let len = reads.len() + writes.len();
        if len > MAX_SEGMENT_VARS
            || reads
                .iter()
                .chain(writes)
                .any(|&at| usize::from(at) >= MAX_SEGMENT_VARS)
        {
            return None;
        }
        let mut at = [0; MAX_SEGMENT_VARS];
        for (slot, &position) in at.iter_mut().zip(reads.iter().chain(writes)) {
            *slot = position;
        }
        Some(MemberVars {
            len: len as u8,
            reads: reads.len() as u8,
            at,
        })
    }

    /// The vars of a segment's first op, which reads `reads` vars and writes `writes`: every
    /// position in order; `None` if they are more than [`MAX_SEGMENT_VARS`].
    pub(crate) fn first(reads: usize, writes: usize) -> Option<Self> {
        let len = reads + writes;
        if len > MAX_SEGMENT_VARS {
            return None;
        }
        let mut at = [0; MAX_SEGMENT_VARS];
        for (position, slot) in at.iter_mut().enumerate() {
            *slot = position as u8;
        }
        Some(MemberVars {
            len: len as u8,
            reads: reads as u8,
            at,
        })
    }

    /// Every position, reads first.
    pub(crate) fn all(&self) -> &[u8] {
        &self.at[..usize::from(self.len)]
    }

    /// The positions of the vars the member reads.
    pub(crate) fn reads(&self) -> &[u8] {
        &self.at[..usize::from(self.reads)]
    }

    /// The positions of the vars the member writes.
    pub(crate) fn writes(&self) -> &[u8] {
        &self.at[usize::from(self.reads)..usize::from(self.len)]
    }
}

impl Segment {
    /// An open segment whose first member is `first`.
    pub(crate) fn new(first: Member) -> Self {
        Segment {
            members: Mutex::new(Members {
                queue: vec![first],
                closed: false,
            }),
        }
    }

    /// Appends `member`, to run after the members appended before it; gives it back if the
    /// segment is closed (its runner found it empty: it completes without running more).
    pub(crate) fn append(&self, member: Member) -> Result<(), Member> {
        let mut members = lock(&self.members);
        if members.closed {
            return Err(member);
        }
        members.queue.push(member);
        Ok(())
    }

    /// Moves the members appended since the last take into `batch`, which must be empty (its
    /// buffer is kept for the appends to come); if there are none, closes the segment, frees
    /// its buffer and returns `false`.
    pub(crate) fn take_into(&self, batch: &mut Vec<Member>) -> bool {
        debug_assert!(batch.is_empty(), "the last batch was not run");
        let mut members = lock(&self.members);
        if members.queue.is_empty() {
            // The look and the close in one critical section: see the module documentation.
            members.closed = true;
            members.queue = Vec::new();
            return false;
        }
        std::mem::swap(&mut members.queue, batch);
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn member(name: &'static str) -> Member {
        Member {
            name: OpName::from(Cow::Borrowed(name)),
            func: SyncFn::new(|_| Ok(())),
            profiled: false,
            vars: MemberVars::new(&[], &[0]).unwrap(),
        }
    }

    fn names(batch: &[Member]) -> Vec<&str> {
        batch.iter().map(|member| member.name.as_str()).collect()
    }

    #[test]
    fn members_are_taken_in_push_order_until_the_segment_closes() {
        let segment = Segment::new(member("a"));
        let mut batch = Vec::new();
        assert!(segment.append(member("b")).is_ok());
        assert!(segment.take_into(&mut batch));
        assert_eq!(names(&batch), ["a", "b"]);
        batch.clear();
        assert!(segment.append(member("c")).is_ok());
        assert!(segment.take_into(&mut batch));
        assert_eq!(names(&batch), ["c"]);
        batch.clear();
        assert!(!segment.take_into(&mut batch), "empty: closes");
        let refused = segment.append(member("d")).map_err(|member| member.name);
        assert_eq!(refused.unwrap_err().as_str(), "d");
        assert!(!segment.take_into(&mut batch));
    }

    #[test]
    fn member_vars_keep_the_member_order() {
        let vars = MemberVars::new(&[3, 1], &[0, 7]).unwrap();
        assert_eq!(vars.all(), [3, 1, 0, 7]);
        assert_eq!(vars.writes(), [0, 7]);
        let many: Vec<u8> = (0..=MAX_SEGMENT_VARS as u8).collect();
        assert_eq!(MemberVars::new(&many, &[]), None);
        assert_eq!(MemberVars::new(&[MAX_SEGMENT_VARS as u8], &[]), None);
        assert_eq!(size_of::<MemberVars>(), 18);
        let first = MemberVars::first(1, 2).unwrap();
        assert_eq!((first.all(), first.writes()), (&[0, 1, 2][..], &[1, 2][..]));
        assert_eq!(MemberVars::first(MAX_SEGMENT_VARS, 1), None);
    }
}
