//! The per-var dependency queue: MXNet's `ThreadedVar` state machine, without the locking.
//!
//! # Algorithm outline
//!
//! A var's state is three things (the graph keeps it under the var's mutex):
//!
//! - `running_reads`: how many granted reads have not completed. Running reads are *not* in the
//!   queue, exactly as in MXNet (`num_pending_reads_`).
//! - `queue`: a FIFO of requests that are waiting, in push order. Its front is always a write
//!   (MXNet's `pending_write_`): reads only ever wait behind a write.
//! - `head_running`: whether that front write was granted. A running write stays at the front of
//!   the queue until it completes, so everything pushed after it waits behind it.
//!
//! ```text
//!             append read            append write           complete read        complete write
//!  idle  ──────────────────► reading ─────────────► reading+queued ─────────► writing ─────► ...
//!  (0 reads, empty queue)    (n reads)               (front write waits       (front write
//!                                                     for n reads)             granted)
//! ```
//!
//! The four transitions:
//!
//! 1. **append read**: if the queue is empty (no write running or waiting), the read is granted at
//!    once and `running_reads += 1`; otherwise it is queued at the back, behind the last write.
//! 2. **append write**: queued at the back; if the queue was empty and no read runs, it is
//!    granted at once and becomes the running front (`head_running`).
//! 3. **complete read**: `running_reads -= 1`; when it reaches zero and a write waits at the front,
//!    that write is granted.
//! 4. **complete write**: the running front is popped; then the run of reads that follows it is
//!    popped and granted together (`running_reads` counts them); if the next front is a write and
//!    no read was released, that write is granted.
//!
//! Consequences, which the property tests check against a sequential model: everything on one
//! var happens in push order; a read is granted only once every earlier write completed, and never
//! while a later write runs; a write is granted only once every earlier op completed, and runs
//! alone.
//!
//! "Granting" an op here only means this var no longer holds it back: the caller is handed the op
//! id (through the `release` callback for transitions 3 and 4, or the [`Grant`] result for 1 and
//! 2) and decrements the op's wait counter; the op is ready once every var granted it.
//!
//! Memory: the queue is a `VecDeque` that keeps its capacity, so in steady state appending and
//! releasing allocate nothing.

use std::collections::VecDeque;

use crate::var::Access;

/// Op id recorded for a write that was granted when it was pushed (such ops get no slot).
pub(crate) const NO_OP: u32 = u32::MAX;

/// One request in a var's FIFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waiter {
    /// The op slot index of the waiting op ([`NO_OP`] for a write granted at push).
    pub(crate) op: u32,
    pub(crate) access: Access,
}

/// The result of appending a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// The var does not hold the op back.
    Granted,
    /// The op waits in this var's queue; a later completion releases it.
    Queued,
}

/// The dependency state of one var. See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct VarQueue {
    running_reads: u32,
    head_running: bool,
    queue: VecDeque<Waiter>,
}

impl VarQueue {
    /// Whether appending a request with `access` now would have to wait.
    pub(crate) fn would_wait(&self, access: Access) -> bool {
        match access {
            Access::Read => !self.queue.is_empty(),
            Access::Write => !self.queue.is_empty() || self.running_reads > 0,
        }
    }

    /// Transition 1: append a read by `op`.
    pub(crate) fn append_read(&mut self, op: u32) -> Grant {
        if self.queue.is_empty() {
            self.running_reads += 1;
            Grant::Granted
        } else {
            self.queue.push_back(Waiter {
                op,
                access: Access::Read,
            });
            Grant::Queued
        }
    }

    /// Transition 2: append a write by `op`.
    pub(crate) fn append_write(&mut self, op: u32) -> Grant {
        let ready = self.queue.is_empty() && self.running_reads == 0;
        self.queue.push_back(Waiter {
            op,
            access: Access::Write,
        });
        if ready {
            self.head_running = true;
            Grant::Granted
        } else {
            Grant::Queued
        }
    }

    /// Appends a request with `access` (transition 1 or 2).
    pub(crate) fn append(&mut self, op: u32, access: Access) -> Grant {
        match access {
            Access::Read => self.append_read(op),
            Access::Write => self.append_write(op),
        }
    }

    /// Transition 3: a granted read completed. Calls `release` with the write it unblocks, if any.
    ///
    /// Returns `false` (and changes nothing) if no read was running: the caller broke the
    /// protocol.
    pub(crate) fn complete_read(&mut self, mut release: impl FnMut(u32)) -> bool {
        if self.running_reads == 0 {
            return false;
        }
        self.running_reads -= 1;
        if self.running_reads == 0
            && let Some(front) = self.queue.front()
        {
            debug_assert!(front.access == Access::Write && !self.head_running);
            self.head_running = true;
            release(front.op);
        }
        true
    }

    /// Transition 4: the running write completed. Calls `release` with each read of the run that
    /// follows it, or with the next write.
    ///
    /// Returns `false` (and changes nothing) if no write was running.
    pub(crate) fn complete_write(&mut self, mut release: impl FnMut(u32)) -> bool {
        if !self.head_running {
            return false;
        }
        self.queue.pop_front();
        self.head_running = false;
        while let Some(&Waiter {
            op,
            access: Access::Read,
        }) = self.queue.front()
        {
            self.queue.pop_front();
            self.running_reads += 1;
            release(op);
        }
        if self.running_reads == 0
            && let Some(front) = self.queue.front()
        {
            self.head_running = true;
            release(front.op);
        }
        true
    }

    /// Completes a granted request with `access` (transition 3 or 4).
    pub(crate) fn complete(&mut self, access: Access, release: impl FnMut(u32)) -> bool {
        match access {
            Access::Read => self.complete_read(release),
            Access::Write => self.complete_write(release),
        }
    }

    /// No request is running or waiting.
    pub(crate) fn is_idle(&self) -> bool {
        self.running_reads == 0 && self.queue.is_empty()
    }

    pub(crate) fn running_reads(&self) -> u32 {
        self.running_reads
    }

    pub(crate) fn write_running(&self) -> bool {
        self.head_running
    }

    /// The requests still waiting (not the running write), in push order.
    pub(crate) fn waiting(&self) -> impl Iterator<Item = &Waiter> {
        self.queue.iter().skip(usize::from(self.head_running))
    }

    pub(crate) fn waiting_len(&self) -> usize {
        self.queue.len() - usize::from(self.head_running)
    }

    /// Drops spare queue capacity beyond `keep` entries (used when a var slot is reclaimed, so a
    /// var that once had a long queue does not pin that memory forever).
    pub(crate) fn trim(&mut self, keep: usize) {
        if self.queue.capacity() > keep {
            self.queue.shrink_to(keep);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn released(f: impl FnOnce(&mut dyn FnMut(u32)) -> bool) -> (bool, Vec<u32>) {
        let mut out = Vec::new();
        let ok = f(&mut |op| out.push(op));
        (ok, out)
    }

    #[test]
    fn read_on_idle_var_is_granted() {
        let mut q = VarQueue::default();
        assert!(!q.would_wait(Access::Read));
        assert_eq!(q.append_read(1), Grant::Granted);
        assert_eq!(q.append_read(2), Grant::Granted);
        assert_eq!(q.running_reads(), 2);
        assert_eq!(q.waiting_len(), 0);
        assert!(!q.is_idle());
    }

    #[test]
    fn write_on_idle_var_is_granted_and_stays_at_head() {
        let mut q = VarQueue::default();
        assert!(!q.would_wait(Access::Write));
        assert_eq!(q.append_write(1), Grant::Granted);
        assert!(q.write_running());
        assert_eq!(q.waiting_len(), 0);
        assert!(q.would_wait(Access::Read));
        assert!(q.would_wait(Access::Write));
    }

    #[test]
    fn write_waits_for_running_reads() {
        let mut q = VarQueue::default();
        q.append_read(1);
        q.append_read(2);
        assert!(q.would_wait(Access::Write));
        assert_eq!(q.append_write(3), Grant::Queued);
        // A read pushed after the write waits behind it.
        assert_eq!(q.append_read(4), Grant::Queued);
        let (ok, out) = released(|r| q.complete_read(r));
        assert!(ok);
        assert!(out.is_empty(), "one read still runs");
        let (ok, out) = released(|r| q.complete_read(r));
        assert!(ok);
        assert_eq!(out, vec![3]);
        assert!(q.write_running());
        assert_eq!(q.waiting().map(|w| w.op).collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn complete_write_releases_following_run_of_reads() {
        let mut q = VarQueue::default();
        q.append_write(1);
        q.append_read(2);
        q.append_read(3);
        q.append_write(4);
        q.append_read(5);
        let (ok, out) = released(|r| q.complete_write(r));
        assert!(ok);
        assert_eq!(out, vec![2, 3]);
        assert_eq!(q.running_reads(), 2);
        assert!(!q.write_running());
        assert_eq!(q.waiting_len(), 2);
        q.complete_read(|_| unreachable!());
        let (_, out) = released(|r| q.complete_read(r));
        assert_eq!(out, vec![4]);
        let (_, out) = released(|r| q.complete_write(r));
        assert_eq!(out, vec![5]);
        let (_, out) = released(|r| q.complete_read(r));
        assert!(out.is_empty());
        assert!(q.is_idle());
    }

    #[test]
    fn complete_write_releases_next_write() {
        let mut q = VarQueue::default();
        q.append_write(1);
        assert_eq!(q.append_write(2), Grant::Queued);
        let (_, out) = released(|r| q.complete_write(r));
        assert_eq!(out, vec![2]);
        assert!(q.write_running());
        let (_, out) = released(|r| q.complete_write(r));
        assert!(out.is_empty());
        assert!(q.is_idle());
    }

    #[test]
    fn completing_what_is_not_running_is_refused() {
        let mut q = VarQueue::default();
        assert!(!q.complete_read(|_| unreachable!()));
        assert!(!q.complete_write(|_| unreachable!()));
        q.append_read(1);
        assert!(!q.complete_write(|_| unreachable!()));
        q.append_write(2);
        // The write waits: completing "it" is refused, the read still runs.
        assert!(!q.complete_write(|_| unreachable!()));
        assert_eq!(q.running_reads(), 1);
    }

    #[test]
    fn trim_drops_spare_capacity() {
        let mut q = VarQueue::default();
        q.append_write(0);
        for op in 1..100 {
            q.append(op, Access::Write);
        }
        for _ in 0..100 {
            q.complete(Access::Write, |_| {});
        }
        assert!(q.is_idle());
        q.trim(4);
        assert!(q.queue.capacity() < 100);
    }
}
