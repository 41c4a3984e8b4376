//! [`Graph`]: vars, ops and the transitions between them.

use std::num::NonZeroU32;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use depengine_slab::{Keep, NIL, Slab, Slot};
use depengine_sync::{
    AtomicPtr, AtomicU32, AtomicUsize, CachePadded, Mutex, MutexGuard, Ordering, lock,
};
use smallvec::SmallVec;

use crate::busy::{BusyVar, Holder};
use crate::deletion::{Deletion, OnDeleted};
use crate::error::GraphError;
use crate::incoming::Incoming;
use crate::op::{DepList, Dispatch, LaunchedOp, OpId, Parked, PendingOp, ReadyOp, VarKey};
use crate::op_cell::OpSlot;
use crate::read_credits::{Credit, ReadCredits};
use crate::stats::GraphStats;
use crate::var::{Access, Var, VarStatus, Waits};
use crate::var_queue::{Grant, KEEP_SPILL, NO_OP, VarQueue, Waiter};

/// The default failure type: any error, shared so it can be recorded on several vars.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use depengine_graph::{Failure, Graph, ReadyOp};
///
/// // `Graph<T>` records failures of this type.
/// let graph: Graph<&str> = Graph::new();
/// let (a, b) = (graph.new_var()?, graph.new_var()?);
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[a, b], "write a and b", &mut ready)?;
/// let failure: Failure = Arc::new(std::io::Error::other("disk full"));
/// graph.complete(ready.pop().unwrap(), Err(failure.clone()), &mut ready)?;
///
/// // Both written vars share the one failure.
/// let on_a = graph.var_failure(a)?.expect("the write failed");
/// let on_b = graph.var_failure(b)?.expect("the write failed");
/// assert!(Arc::ptr_eq(&on_a, &failure) && Arc::ptr_eq(&on_b, &failure));
/// assert_eq!(on_a.to_string(), "disk full");
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
pub type Failure = Arc<dyn std::error::Error + Send + Sync>;

/// Op slab buckets `trim` keeps: 32 + 64 + ... + 512 = 992 slots.
const KEEP_OP_BUCKETS: usize = 5;

/// Vars a push on several vars keeps its requests for on the stack (more than this: one
/// allocation).
const REQUESTS_INLINE: usize = 8;

/// Vars a push on several vars checks for duplicates pair by pair (more: sorted).
const DISTINCT_BY_PAIRS: usize = 8;

/// Whether the reads (`vars[..reads]`) and the writes each come in strictly ascending slot
/// order, as a replay's do (its plan sorts its vars once).
fn runs_ascending(vars: &[VarKey], reads: usize) -> bool {
    let ascending = |run: &[VarKey]| run.windows(2).all(|pair| pair[0].index < pair[1].index);
    let (read_keys, write_keys) = vars.split_at(reads);
    ascending(read_keys) && ascending(write_keys)
}

/// For vars whose two runs are ascending (`runs_ascending`): the first pair of positions, a
/// read's and a write's, that name one slot, found in one merge of the runs, without a sort.
fn same_slot_in_ascending_runs(vars: &[VarKey], reads: usize) -> Option<(usize, usize)> {
    let (read_keys, write_keys) = vars.split_at(reads);
    let (mut read, mut write) = (0, 0);
    while let (Some(r), Some(w)) = (read_keys.get(read), write_keys.get(write)) {
        match r.index.cmp(&w.index) {
            std::cmp::Ordering::Less => read += 1,
            std::cmp::Ordering::Greater => write += 1,
            std::cmp::Ordering::Equal => return Some((read, reads + write)),
        }
    }
    None
}

/// Ops a completion asks the slots of while it holds the var's lock (see `release`).
const GRANT_PREFETCHED: usize = 8;

/// Ops a completion grants from a buffer on the stack after releasing the var's lock (see
/// `release`), the first `GRANT_PREFETCHED` of them included; more (a long run of reads) go to
/// a heap buffer. Two under loom, so that a model's run of three reads reaches the heap buffer
/// (`a_long_run_of_reads_granted_after_the_unlock_races_another_grant`).
const GRANT_ON_STACK: usize = if cfg!(loom) { 2 } else { 64 };

/// Completions on a var with waiting ops after which the completing thread merges its open ring
/// (see `settle`): half the ring.
const MERGE_EVERY: usize = crate::incoming::CAPACITY / 2;

/// The rare part of a var, kept out of line in the queue's cold part (allocated the first time a
/// var needs it, and kept with the slot).
struct VarCold<E, L> {
    on_deleted: Option<OnDeleted>,
    failure: Option<E>,
    /// What the caller keeps on the var for the ops launched on it (`Graph::launch`); reset
    /// when the slot is reclaimed.
    for_launched: L,
}

impl<E, L: Default> Default for VarCold<E, L> {
    fn default() -> Self {
        VarCold {
            on_deleted: None,
            failure: None,
            for_launched: L::default(),
        }
    }
}

/// Everything about one var, under its mutex. With the mutex it fits one cache line (see
/// `VarSlot`); `on_deleted`, `failure` and the caller's `L` live in the queue's cold part.
struct VarState<E, L> {
    /// Bumped when the slot is reclaimed; a handle with another generation is stale.
    generation: u32,
    /// Whether the var takes pushes, waits to be reclaimed, or was retired.
    life: Life,
    /// The cold part holds a failure: a hot copy of `failure.is_some()`, so that completing a
    /// write on a var without a failure does not touch the cold part (which the pushing thread
    /// writes while the FIFO is spilled).
    failed: bool,
    /// The slot's `Incoming` ring is open (a copy of its `OPEN` bit, which only lock holders
    /// change): set while the FIFO holds a waiting op, see `incoming.rs`. Lock holders that find
    /// it clear know the ring is empty without touching its line.
    open: bool,
    /// Completions that left ops waiting since the last one that merged the ring (see
    /// `settle`; other merges leave it be).
    unmerged: u8,
    queue: VarQueue<VarCold<E, L>>,
}

impl<E, L: Default> VarState<E, L> {
    fn failure(&self) -> Option<&E> {
        if !self.failed {
            return None;
        }
        self.queue.extra().and_then(|c| c.failure.as_ref())
    }

    fn take_failure(&mut self) -> Option<E> {
        if !self.failed {
            return None;
        }
        self.failed = false;
        self.queue.extra_mut().and_then(|c| c.failure.take())
    }

    fn set_failure(&mut self, failure: E) -> Option<E> {
        self.failed = true;
        self.queue.extra_or_default().failure.replace(failure)
    }
}

/// Where a var slot is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    /// The var takes pushes.
    Live,
    /// `delete_var` was called: new pushes are refused, and the slot is reclaimed once idle
    /// (then `Live` again, with the next generation).
    Deleted,
    /// Deleted and reclaimed, and its generation ran out: refused forever, so that no handle
    /// can alias a later var, and never reclaimed again. (A read that took the var's last read
    /// credit may still lock it after the reclaim, `read_credits.rs`; it finds nothing to do.)
    Retired,
}

/// One var slot, two cache lines: the locked state (mutex, generation, deletion mark, queue
/// counters and the inline ring), so that the threads pushing and completing ops on a var move
/// one line between cores, and neighbouring vars never share it; and the lock-free side
/// entrance (`incoming.rs`), which only single-var pushes onto a var with a waiting op write
/// (and the lock holder that merges them reads). `repr(C)` keeps the fields in this order. The
/// var's attachment and read credits are the slot's head, beside the slab's link, on the line
/// before these two (`Slot::Header`, [`VarHead`]).
#[repr(C, align(64))]
struct VarSlot<E, L> {
    state: Mutex<VarState<E, L>>,
    incoming: Incoming,
}

/// The head of a var's slab entry, on the line of the slab's link: the var's attachment, which
/// the functions of its ops read, and its read credits, which every completing read looks at
/// without the lock (`read_credits.rs`). No pusher writes this line: it is written when the slot
/// is handed out or freed, and while a long run of reads holds credits (`CREDITED_RUN` in
/// `var_queue.rs`), by the run's grant and its reads' takes, which then move it between the
/// readers' cores, the attachment with it. Beside the `Incoming` ring, whose line a `chain`'s
/// pusher writes for every op, the attachment would leave the worker's cache on every op
/// (`docs/decisions.md`, "The attachment beside the slab's link").
#[derive(Default)]
struct VarHead {
    attachment: Attachment,
    /// The generation of the var the attachment was stored for, which [`Graph::attachment`]
    /// compares with the handle's: a stale handle must not read its slot's next var's word.
    generation: AtomicU32,
    credits: ReadCredits,
}

/// The word a var was created with ([`Graph::new_attached_var`]); null for a plain var and
/// once the var is reclaimed. Written when the var is created and when it is reclaimed, read by
/// the functions of its ops (see [`Graph::attachment`] for the orderings). In the slot's
/// [`VarHead`].
struct Attachment(AtomicPtr<()>);

impl Default for Attachment {
    fn default() -> Self {
        Attachment(AtomicPtr::new(ptr::null_mut()))
    }
}

impl<E, L> Slot for VarSlot<E, L> {
    type Header = VarHead;
}

impl<E, L> Default for VarSlot<E, L> {
    fn default() -> Self {
        VarSlot {
            state: Mutex::new(VarState {
                generation: 0,
                life: Life::Live,
                failed: false,
                open: false,
                unmerged: 0,
                queue: VarQueue::default(),
            }),
            incoming: Incoming::default(),
        }
    }
}

/// What a release does on one of an op's vars: complete the op's request (transition 3 or 4, with
/// the op's failure), launch it (5), or complete it once launched (6, with the failure of its
/// work).
enum Step<'f, E> {
    Complete(Option<&'f E>),
    Launch,
    CompleteLaunched(Option<&'f E>),
}

// By hand: a derive would ask for `E: Copy`, and a step holds only a reference to `E`.
impl<E> Clone for Step<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Step<'_, E> {}

/// What reclaiming a var leaves to do once its lock is released.
struct Reclaimed {
    /// Whether the slot can be reused (its generation did not run out).
    reusable: bool,
    on_deleted: Option<OnDeleted>,
}

type Guard<'a, E, L> = MutexGuard<'a, VarState<E, L>>;

/// A var's slot locked ([`Graph::lock_slot`]): its head, the slot, and the guard of its state.
type LockedSlot<'a, E, L> = (&'a VarHead, &'a VarSlot<E, L>, Guard<'a, E, L>);

/// One var of an op pushed on several vars (`push_each`): its slot, the handle's key and how
/// the op uses it.
struct Request<'g, E, L> {
    slot: &'g VarSlot<E, L>,
    key: VarKey,
    access: Access,
}

/// Where an op pushed on several vars is while its pusher appends it (`push_each`).
enum Appending<T> {
    /// No var has held it back yet: the pusher still has it.
    Held(Parked<T>),
    /// Parked in its slot, at the first var that held it back.
    Parked,
}

/// Hands out graph ids; 0 is never used (placeholder vars carry it). A plain std atomic even
/// under loom: ids only need to differ, no model observes this counter.
static NEXT_GRAPH_ID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

fn next_graph_id() -> u32 {
    loop {
        let id = NEXT_GRAPH_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if id != 0 {
            return id;
        }
    }
}

/// The dependency graph: decides when each pushed op may run.
///
/// `T` is the payload the caller stores with each op (the engine's op record); `E` is the failure
/// type recorded on vars (cloned onto every var a failed op wrote); `L` is what the caller keeps on
/// each var for the ops launched on it (the engine: their fences, as `MXNet` keeps them on its
/// vars), changed by [`launch`](Self::launch) and [`complete_launched`](Self::complete_launched)
/// under the var's lock, beside the release they make, and read by
/// [`launched_on`](Self::launched_on). All methods take `&self`: share the graph with an `Arc`.
/// See the [crate documentation](crate) for an example.
///
/// # Examples
///
/// ```
/// use depengine_graph::{Graph, ReadyOp};
///
/// // Payloads are op names; failures are plain strings.
/// let graph: Graph<&str, String> = Graph::new();
/// let x = graph.new_var()?;
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[x], "fill x", &mut ready)?;
/// graph.push(&[x], &[], "print x", &mut ready)?;
/// assert_eq!(ready.len(), 1, "the read waits for the write");
///
/// let fill = ready.pop().unwrap();
/// graph.complete(fill, Err("out of memory".to_string()), &mut ready)?;
/// // The failure stays on `x`: the reader, dispatched now, sees it and can skip its work.
/// let print = ready.pop().unwrap();
/// assert_eq!(graph.op_failure(&print).as_deref(), Some("out of memory"));
/// assert_eq!(graph.complete(print, Ok(()), &mut ready)?, "print x");
/// assert_eq!(graph.clear_failure(x)?.as_deref(), Some("out of memory"));
/// assert_eq!(graph.var_failure(x)?, None);
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
pub struct Graph<T, E = Failure, L = ()> {
    id: u32,
    vars: Slab<VarSlot<E, L>>,
    ops: Slab<OpSlot<T>>,
    live_vars: AtomicUsize,
    failed_vars: AtomicUsize,
    /// The push lock: held by each push of an op on several vars while it appends, and by
    /// `delete_var`, for one order of such ops on every var and their vars live throughout (see
    /// `push_each`). It guards the spare op slot (`NIL`: none), one that such a push took and
    /// did not need, kept for the next: an op that no var holds back then touches neither of the
    /// slab's free stacks, which the threads that free parked ops' slots write.
    push_lock: CachePadded<Mutex<u32>>,
}

impl<T, E, L: Default> Default for Graph<T, E, L> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, E, L: Default> Graph<T, E, L> {
    /// An empty graph.
    pub fn new() -> Self {
        Graph {
            id: next_graph_id(),
            vars: Slab::new(),
            ops: Slab::new(),
            live_vars: AtomicUsize::new(0),
            failed_vars: AtomicUsize::new(0),
            push_lock: CachePadded::new(Mutex::new(NIL)),
        }
    }

    /// Creates a var.
    ///
    /// # Errors
    ///
    /// [`GraphError::CapacityExhausted`] when 2^30 - 1 vars are live.
    pub fn new_var(&self) -> Result<Var, GraphError> {
        self.create_var(ptr::null_mut())
    }

    /// Creates a var that carries `attachment`, a word of its owner's (say, a pointer to the
    /// value the var guards), which the functions of the ops on the var read back with
    /// [`attachment`](Self::attachment), with no lookup table of the owner's own.
    ///
    /// ```
    /// use std::ptr::NonNull;
    ///
    /// use depengine_graph::Graph;
    ///
    /// let value = Box::new(41_u64);
    /// let graph: Graph<()> = Graph::new();
    /// let var = graph.new_attached_var(NonNull::from(&*value).cast())?;
    /// let attached = graph.attachment(var).expect("attached").cast::<u64>();
    /// // SAFETY: `value` outlives this read, and nothing else accesses it meanwhile.
    /// assert_eq!(unsafe { *attached.as_ref() }, 41);
    /// assert_eq!(graph.attachment(graph.new_var()?), None);
    /// # Ok::<(), depengine_graph::GraphError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`new_var`](Self::new_var).
    pub fn new_attached_var(&self, attachment: NonNull<()>) -> Result<Var, GraphError> {
        self.create_var(attachment.as_ptr())
    }

    /// The word `var` was created with ([`new_attached_var`](Self::new_attached_var)); `None`
    /// for a var created without one, of another graph, or stale. Looked up without the var's
    /// lock: a caller that needs the var's own word reads it while the var cannot be reclaimed
    /// (from an op on the var not completed yet, or before the var's deletion is pushed).
    ///
    /// What orders the word's store before this load is the caller's: it is stored before
    /// `new_attached_var` returns the handle, so it happens-before a push from any thread that
    /// got the handle through synchronization (a channel, a spawn, an `Arc` filled in after
    /// the call, as the engine's typed data does) and, through the grant, its op's function;
    /// a handle passed on with no happens-before may find no word. The word changes again only
    /// at the reclaim (after every op on the var completed) and when the slot goes to a new
    /// var, after the slab's `free` (`Release`) and `alloc` (`Acquire`). The generation is
    /// stored before the word, which is stored `Release` and loaded `Acquire`: a load that finds
    /// a later var's word finds that var's generation, never a stale handle's.
    #[inline]
    pub fn attachment(&self, var: Var) -> Option<NonNull<()>> {
        if var.graph != self.id {
            return None;
        }
        let header = self.vars.header(var.index)?;
        let word = header.attachment.0.load(Ordering::Acquire);
        if header.generation.load(Ordering::Relaxed) != var.generation {
            return None;
        }
        NonNull::new(word)
    }

    /// `new_var` with the slot's attachment set to `attachment` (null: none).
    fn create_var(&self, attachment: *mut ()) -> Result<Var, GraphError> {
        let index = self
            .vars
            .alloc()
            .ok_or(GraphError::CapacityExhausted { what: "var" })?;
        let slot = self
            .vars
            .get(index)
            .ok_or(GraphError::CapacityExhausted { what: "var" })?;
        let generation = lock(&slot.state).generation;
        if let Some(header) = self.vars.header(index) {
            // See `attachment`. The slot is ours alone until the handle is returned.
            header.generation.store(generation, Ordering::Relaxed);
            header.attachment.0.store(attachment, Ordering::Release);
        }
        self.live_vars.fetch_add(1, Ordering::Relaxed);
        Ok(Var {
            graph: self.id,
            index,
            generation,
        })
    }

    /// The head and the slot of `var`, checking only that it belongs to this graph.
    fn var_slot(&self, var: Var) -> Result<(&VarHead, &VarSlot<E, L>), GraphError> {
        if var.graph != self.id {
            return Err(GraphError::ForeignVar { var });
        }
        self.vars
            .get_with_header(var.index)
            .ok_or(GraphError::ForeignVar { var })
    }

    /// Locks `var`'s state, checking that the handle is current (deletion may be pending).
    fn lock_current(&self, var: Var) -> Result<Guard<'_, E, L>, GraphError> {
        Ok(self.lock_slot(var)?.2)
    }

    /// As `lock_current`, also returning the slot and its head.
    fn lock_slot(&self, var: Var) -> Result<LockedSlot<'_, E, L>, GraphError> {
        let (head, slot) = self.var_slot(var)?;
        let state = lock(&slot.state);
        if state.generation != var.generation {
            return Err(GraphError::DeletedVar { var });
        }
        Ok((head, slot, state))
    }

    /// As `lock_current`, with the requests of the var's `Incoming` ring merged into its FIFO
    /// (for callers that read the FIFO).
    fn lock_merged(&self, var: Var) -> Result<Guard<'_, E, L>, GraphError> {
        let (_, slot, mut state) = self.lock_slot(var)?;
        Self::merge_behind_waiters(slot, &mut state);
        Ok(state)
    }

    /// Moves the requests of `slot`'s `Incoming` ring to the back of its FIFO, oldest first, as
    /// their pushes would have appended them (var lock held). Ops the merge grants (only
    /// possible once the FIFO has no waiting op, see `settle`) go to `on_grant`.
    fn merge(slot: &VarSlot<E, L>, state: &mut VarState<E, L>, on_grant: &mut impl FnMut(u32)) {
        if !state.open {
            return;
        }
        slot.incoming.drain(|entry| {
            let request = Waiter::unpack(entry);
            if state.queue.append(request) == Grant::Granted {
                on_grant(request.op);
            }
        });
    }

    /// `merge` where the ring is open, hence the FIFO holds a waiting op (the invariant of
    /// `incoming.rs`): every merged op queues behind it and none is granted.
    fn merge_behind_waiters(slot: &VarSlot<E, L>, state: &mut VarState<E, L>) {
        debug_assert!(!state.open || state.queue.waiting_len() > 0);
        Self::merge(slot, state, &mut |_| {
            debug_assert!(false, "an open ring merged behind no waiting op");
        });
    }

    /// Closes `slot`'s ring, merging what it holds (var lock held).
    fn close(slot: &VarSlot<E, L>, state: &mut VarState<E, L>) {
        if !state.open {
            return;
        }
        loop {
            Self::merge_behind_waiters(slot, state);
            if slot.incoming.try_close() {
                state.open = false;
                return;
            }
        }
    }

    /// After a completion on a var with an open ring: once the FIFO has no waiting op left,
    /// merges the ring (granting what it can, through `on_grant`) and closes it, or keeps it open
    /// if the merged ops wait. Keeps the invariant of `incoming.rs`.
    ///
    /// While ops still wait, every `MERGE_EVERY`th completion merges the ring behind them: a
    /// pusher that keeps ahead of the completions would otherwise fill the ring, then take the
    /// lock to merge it while the completing thread waits for that lock (`docs/decisions.md`,
    /// "The ring merged every 16 completions while ops wait").
    fn settle(slot: &VarSlot<E, L>, state: &mut VarState<E, L>, on_grant: &mut impl FnMut(u32)) {
        if state.open && state.queue.waiting_len() > 0 {
            state.unmerged += 1;
            if usize::from(state.unmerged) >= MERGE_EVERY {
                state.unmerged = 0;
                Self::merge_behind_waiters(slot, state);
            }
            return;
        }
        while state.open && state.queue.waiting_len() == 0 {
            Self::merge(slot, state, on_grant);
            if state.queue.waiting_len() == 0 && slot.incoming.try_close() {
                state.open = false;
            }
        }
    }

    /// Pushes an op that reads `reads` and writes `writes`, carrying `payload`.
    ///
    /// If nothing holds the op back it is handed to `dispatch` before `push` returns; otherwise a
    /// later [`complete`](Self::complete) of the op it waits for dispatches it. The input is
    /// validated before anything changes: on error the graph is untouched (and `payload` is
    /// dropped). Ops listing up to 4 vars push without allocating in steady state.
    ///
    /// # Errors
    ///
    /// - [`GraphError::ForeignVar`]: a var of another graph;
    /// - [`GraphError::DuplicateVar`]: a var twice in `reads` or twice in `writes`;
    /// - [`GraphError::ReadWriteConflict`]: a var in both;
    /// - [`GraphError::DeletedVar`]: a var that was deleted (or a stale handle);
    /// - [`GraphError::CapacityExhausted`]: 2^30 - 1 ops waiting at once.
    pub fn push<D>(
        &self,
        reads: &[Var],
        writes: &[Var],
        payload: T,
        dispatch: &mut D,
    ) -> Result<(), GraphError>
    where
        D: Dispatch<T> + ?Sized,
    {
        self.push_with(Waits::Completion, reads, writes, payload, dispatch)
    }

    /// As [`push`](Self::push), for an op that `waits` for the launch
    /// ([`Waits::Launch`], see [`launch`](Self::launch)) or the completion of the earlier ops it
    /// conflicts with.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push).
    pub fn push_with<D>(
        &self,
        waits: Waits,
        reads: &[Var],
        writes: &[Var],
        payload: T,
        dispatch: &mut D,
    ) -> Result<(), GraphError>
    where
        D: Dispatch<T> + ?Sized,
    {
        if reads.is_empty() && writes.is_empty() {
            // Nothing can hold it back.
            dispatch.dispatch(ReadyOp {
                graph: self.id,
                payload,
                deps: DepList::EMPTY,
            });
            return Ok(());
        }
        if let Some(&var) = reads.iter().chain(writes).find(|v| v.graph != self.id) {
            return Err(GraphError::ForeignVar { var });
        }
        if !DepList::fits(reads, writes) {
            return Err(GraphError::CapacityExhausted { what: "op" });
        }
        let deps = DepList::new(reads, writes);
        // An op on one var whose ring is open skips the lock (checked first: one load).
        let ring = match (reads, writes) {
            ([var], []) | ([], [var]) => self
                .vars
                .get(var.index)
                .filter(|slot| slot.incoming.accepts(var.generation)),
            _ => None,
        };
        let (payload, deps) = match ring {
            Some(slot) => match self.try_push_incoming(slot, waits, deps, payload) {
                None => return Ok(()),
                Some(Parked { payload, deps }) => (payload, deps),
            },
            None => (payload, deps),
        };
        let mut merged_ready = NIL;
        let pushed = match deps.all() {
            [_] => self.push_one(waits, deps, payload, &mut merged_ready, dispatch),
            _ => self.push_each(waits, deps, payload, &mut merged_ready, dispatch),
        };
        // Every lock is released: dispatch what merging the vars' rings made ready (nothing, by
        // the invariant of `incoming.rs`; handled all the same).
        self.dispatch_ready_list(merged_ready, dispatch);
        pushed
    }

    /// The push of an op on one var (`slot`, whose ring was just seen open) through the var's
    /// `Incoming` ring: parks the op in a slot and appends its request without taking the var's
    /// lock. Hands the op back (`Some`) when the ring has closed, filled or changed generation
    /// since, or no slot is left: the caller pushes it the locked way, which reports errors.
    fn try_push_incoming(
        &self,
        slot: &VarSlot<E, L>,
        waits: Waits,
        deps: DepList,
        payload: T,
    ) -> Option<Parked<T>> {
        let key = deps.all()[0];
        let access = deps.access(0);
        let parked = Parked { payload, deps };
        let Some((index, op_slot)) = self
            .ops
            .alloc()
            .and_then(|index| Some((index, self.ops.get(index)?)))
        else {
            return Some(parked);
        };
        // Parked before its request is published (the ring's Release store): whoever merges
        // and grants it sees the op.
        op_slot.park(parked, 1);
        let entry = Waiter {
            op: index,
            access,
            waits,
        }
        .pack();
        if slot.incoming.try_append(key.generation, entry) {
            return None;
        }
        // The ring closed or filled since `accepts`. Nothing names the slot: take the op back.
        let owned = op_slot.grant();
        debug_assert!(owned, "an unpublished op waits for no var but ours");
        let parked = op_slot.take();
        self.ops.free(index);
        Some(parked)
    }

    /// Dispatches the ops threaded through the slots' links from `ready` (see `thread_ready`).
    fn dispatch_ready_list<D>(&self, mut ready: u32, dispatch: &mut D)
    where
        D: Dispatch<T> + ?Sized,
    {
        while ready != NIL {
            let index = ready;
            let (Some(op_slot), Some(link)) = (self.ops.get(index), self.ops.link(index)) else {
                break;
            };
            ready = link.load(Ordering::Relaxed);
            self.dispatch_parked(index, op_slot, dispatch);
        }
    }

    /// `push` of an op on one var, under that var's lock: validates the handle, appends the
    /// request, and dispatches the op or parks it. An op that waits opens the var's ring for the
    /// pushes of single-var ops behind it (`incoming.rs`).
    fn push_one<D>(
        &self,
        waits: Waits,
        deps: DepList,
        payload: T,
        ready: &mut u32,
        dispatch: &mut D,
    ) -> Result<(), GraphError>
    where
        D: Dispatch<T> + ?Sized,
    {
        let key = deps.all()[0];
        let access = deps.access(0);
        let var = key.var(self.id);
        let (head, slot) = self.var_slot(var)?;
        let mut state = lock(&slot.state);
        if state.generation != var.generation || state.life != Life::Live {
            return Err(GraphError::DeletedVar { var });
        }
        // Requests that came in through the ring were pushed before this op: they go first.
        let ops = &self.ops;
        let mut last = NIL;
        Self::merge(slot, &mut state, &mut |op| {
            if ops.get(op).is_some_and(OpSlot::grant) {
                Self::thread_ready(ops, op, ready, &mut last);
            }
        });
        if !state.queue.would_wait(&head.credits, access, waits) {
            state.queue.append(Waiter {
                op: NO_OP,
                access,
                waits,
            });
            drop(state);
            dispatch.dispatch(ReadyOp {
                graph: self.id,
                payload,
                deps,
            });
            return Ok(());
        }
        let exhausted = GraphError::CapacityExhausted { what: "op" };
        let index = self.ops.alloc().ok_or(exhausted)?;
        let Some(op_slot) = self.ops.get(index) else {
            return Err(exhausted);
        };
        state.queue.append(Waiter {
            op: index,
            access,
            waits,
        });
        if !state.open {
            slot.incoming.open();
            state.open = true;
        }
        // The releasing thread decrements the wait count only after locking the var we hold:
        // our unlock (Release) and its lock (Acquire) order the parking before it.
        op_slot.park(Parked { payload, deps }, 1);
        Ok(())
    }

    /// `push` of an op on several vars, MXNet's way: appends the op's request to one var at a
    /// time, each under that var's lock alone, so that a completion on one of them never waits
    /// for the pusher to lock the others.
    ///
    /// Two things that holding every lock at once would give are kept by the graph's push lock,
    /// held for the appends (and by `delete_var`):
    /// - **One order on every var.** Two ops that share two vars are appended to both in the
    ///   order they took the lock, so neither waits for the other on a second var (a cycle, a
    ///   deadlock, needs two ops that share two vars in opposite orders). Ops on one var need
    ///   not take it: they cannot close a cycle.
    /// - **All or nothing.** Every handle is checked before the first append (the `Incoming`
    ///   word's generation and deletion mark), and no var can be deleted until the last append:
    ///   a push either appends everywhere or changes nothing.
    ///
    /// The op's slot (the spare one, else one from the slab) is taken before the first append,
    /// so that running out of slots changes nothing, and the op parks at the first var that
    /// holds it back, with a count that includes the pusher's hold (`op_cell.rs`, role 1). An op
    /// that no var holds back is dispatched without touching the slot, which stays the spare.
    fn push_each<D>(
        &self,
        waits: Waits,
        deps: DepList,
        payload: T,
        ready: &mut u32,
        dispatch: &mut D,
    ) -> Result<(), GraphError>
    where
        D: Dispatch<T> + ?Sized,
    {
        self.check_distinct(&deps)?;
        // The vars' slots and the requests, looked up once and kept: the dependency list moves
        // into the op's slot when the op parks.
        let n = deps.all().len();
        let mut requests: SmallVec<[Request<'_, E, L>; REQUESTS_INLINE]> = SmallVec::new();
        for (position, &key) in deps.all().iter().enumerate() {
            let (_, slot) = self.var_slot(key.var(self.id))?;
            requests.push(Request {
                slot,
                key,
                access: deps.access(position),
            });
        }
        // The locks below are taken one after the other, each on a line that a completion on
        // another core likely wrote last: ask for all of them first, so that the misses overlap
        // (and for the handles' check, the line beside).
        for request in &requests {
            depengine_slab::prefetch_line(std::ptr::from_ref(&request.slot.state));
            depengine_slab::prefetch_line(std::ptr::from_ref(&request.slot.incoming));
        }
        let mut spare = lock(&self.push_lock);
        if let Some(stale) = requests
            .iter()
            .find(|request| !request.slot.incoming.is_current(request.key.generation))
        {
            return Err(GraphError::DeletedVar {
                var: stale.key.var(self.id),
            });
        }
        let exhausted = GraphError::CapacityExhausted { what: "op" };
        let index = match std::mem::replace(&mut *spare, NIL) {
            NIL => self.ops.alloc().ok_or(exhausted)?,
            index => index,
        };
        let Some(op_slot) = self.ops.get(index) else {
            return Err(exhausted);
        };
        let mut appending = Appending::Held(Parked { payload, deps });
        let mut granted_at_append = 0;
        let mut last = NIL;
        let ops = &self.ops;
        for (position, request) in requests.iter().enumerate() {
            let mut state = lock(&request.slot.state);
            debug_assert!(state.generation == request.key.generation && state.life == Life::Live);
            // Requests that came in through the ring were pushed before this op: they go first.
            Self::merge(request.slot, &mut state, &mut |op| {
                if ops.get(op).is_some_and(OpSlot::grant) {
                    Self::thread_ready(ops, op, ready, &mut last);
                }
            });
            let waiter = Waiter {
                op: index,
                access: request.access,
                waits,
            };
            appending = match (state.queue.append(waiter), appending) {
                (Grant::Granted, held @ Appending::Held(_)) => held,
                (Grant::Granted, Appending::Parked) => {
                    granted_at_append += 1;
                    Appending::Parked
                }
                // The first var that holds the op back: park it before this var's unlock
                // publishes the request, counting this var, the ones after it and the hold.
                (Grant::Queued, Appending::Held(held)) => {
                    op_slot.park(held, (n - position) as u32 + 1);
                    Appending::Parked
                }
                (Grant::Queued, Appending::Parked) => Appending::Parked,
            };
        }
        if let Appending::Held(_) = appending {
            // No var held the op back: it never needed its slot.
            *spare = index;
        }
        drop(spare);
        match appending {
            Appending::Held(Parked { payload, deps }) => {
                dispatch.dispatch(ReadyOp {
                    graph: self.id,
                    payload,
                    deps,
                });
            }
            Appending::Parked => {
                if op_slot.release_hold(granted_at_append) {
                    self.dispatch_parked(index, op_slot, dispatch);
                }
            }
        }
        Ok(())
    }

    /// Holds off pushes on several vars, and deletions, until the guard drops: for the walks
    /// that must not find such a push halfway through its appends (`holds_back`, `busy_vars`).
    pub(crate) fn hold_pushes(&self) -> MutexGuard<'_, u32> {
        lock(&self.push_lock)
    }

    /// Rejects an op that names a var twice (`DuplicateVar`) or both reads and writes it
    /// (`ReadWriteConflict`), before anything changes. Two handles of one slot with different
    /// generations are not a duplicate: the stale one is a `DeletedVar`.
    fn check_distinct(&self, deps: &DepList) -> Result<(), GraphError> {
        let vars = deps.all();
        let same_slot = |(first, second): (usize, usize)| vars[first].index == vars[second].index;
        let pair = if vars.len() <= DISTINCT_BY_PAIRS {
            (1..vars.len())
                .flat_map(|second| (0..second).map(move |first| (first, second)))
                .find(|&pair| same_slot(pair))
        } else if runs_ascending(vars, deps.reads().len()) {
            same_slot_in_ascending_runs(vars, deps.reads().len())
        } else {
            let mut order: Vec<usize> = (0..vars.len()).collect();
            order.sort_unstable_by_key(|&position| vars[position].index);
            order
                .windows(2)
                .map(|pair| (pair[0], pair[1]))
                .find(|&pair| same_slot(pair))
        };
        let Some((first, second)) = pair else {
            return Ok(());
        };
        if vars[first].generation != vars[second].generation {
            // At most one of them is current: the stale one is the error.
            for key in [vars[first], vars[second]] {
                drop(self.lock_current(key.var(self.id))?);
            }
        }
        let var = vars[second].var(self.id);
        Err(if deps.access(first) == deps.access(second) {
            GraphError::DuplicateVar { var }
        } else {
            GraphError::ReadWriteConflict { var }
        })
    }

    /// Completes a ready op: releases its vars (dispatching the ops that become ready) and
    /// returns its payload.
    ///
    /// `outcome` is recorded on every var the op wrote: a failure is stored there (replacing any
    /// older one) and a success clears the var's failure, since the write replaced the failed
    /// data. Read vars are left as they are.
    ///
    /// # Errors
    ///
    /// [`GraphError::ForeignOp`] if `op` came from another graph; the op is dropped, and that
    /// graph's vars stay held by it.
    pub fn complete<D>(
        &self,
        op: ReadyOp<T>,
        outcome: Result<(), E>,
        dispatch: &mut D,
    ) -> Result<T, GraphError>
    where
        D: Dispatch<T> + ?Sized,
        E: Clone,
    {
        if op.graph != self.id {
            return Err(GraphError::ForeignOp);
        }
        let ReadyOp { payload, deps, .. } = op;
        let failure = outcome.err();
        for (pos, &key) in deps.all().iter().enumerate() {
            self.release(
                key.index,
                deps.access(pos),
                Step::Complete(failure.as_ref()),
                &mut |_, _| {},
                dispatch,
            );
        }
        Ok(payload)
    }

    /// Launches a ready op whose work goes on after this call (a GPU op whose kernels run on a
    /// stream after its function returned): the ops behind it that wait for launch
    /// ([`Waits::Launch`]) may start now, and are dispatched; those that wait for completion
    /// stay behind it until [`complete_launched`](Self::complete_launched) (the var
    /// state machine's transitions 5 and 6, `docs/graph.md`). A var the op writes has its
    /// failure cleared, as by a successful write; the outcome of the work comes with the
    /// completion.
    ///
    /// `on_var(access, launched)` is called on each of the op's vars, with how the op uses it
    /// and the var's [`L`](Graph), under the var's lock, before the var releases anything: an
    /// op released by the launch finds there what it was given
    /// ([`launched_on`](Self::launched_on)). Under the lock, it must not call this graph (the
    /// lock is not reentrant) nor panic. What it leaves must be taken away by the op's
    /// `complete_launched`: a reclaimed var's `L` is reset.
    ///
    /// The graph does not look at the payload here or at the completion, so the op may carry
    /// another type than the graph's own (see [`ReadyOp::map`]) from its dispatch on.
    ///
    /// # Errors
    ///
    /// [`GraphError::ForeignOp`] if `op` came from another graph (`on_var` is not called); the op
    /// is dropped, and that graph's vars stay held by it.
    pub fn launch<U, D>(
        &self,
        op: ReadyOp<U>,
        mut on_var: impl FnMut(Access, &mut L),
        dispatch: &mut D,
    ) -> Result<LaunchedOp<U>, GraphError>
    where
        D: Dispatch<T> + ?Sized,
        E: Clone,
    {
        if op.graph != self.id {
            return Err(GraphError::ForeignOp);
        }
        let ReadyOp {
            graph,
            payload,
            deps,
        } = op;
        for (pos, &key) in deps.all().iter().enumerate() {
            self.release(
                key.index,
                deps.access(pos),
                Step::Launch,
                &mut on_var,
                dispatch,
            );
        }
        Ok(LaunchedOp {
            graph,
            payload,
            deps,
        })
    }

    /// Completes a launched op once its work is done: releases its vars to the ops that wait
    /// for completion (dispatching those that become ready) and returns its payload. A failure
    /// in `outcome` is stored on every var the op wrote (replacing any older one); a success
    /// leaves them as they are (the launch cleared their failures, and an op launched behind
    /// this one may have written them since). `on_var` is called as by [`launch`](Self::launch)
    /// (under the lock: no call of this graph, no panic), in the same section of each var's
    /// lock as the failure is stored: an op that looks at the var's `L` later finds the failure
    /// there instead.
    ///
    /// # Errors
    ///
    /// [`GraphError::ForeignOp`] if `op` came from another graph (`on_var` is not called); the op
    /// is dropped, and that graph's vars stay held by it.
    pub fn complete_launched<U, D>(
        &self,
        op: LaunchedOp<U>,
        outcome: Result<(), E>,
        mut on_var: impl FnMut(Access, &mut L),
        dispatch: &mut D,
    ) -> Result<U, GraphError>
    where
        D: Dispatch<T> + ?Sized,
        E: Clone,
    {
        if op.graph != self.id {
            return Err(GraphError::ForeignOp);
        }
        let LaunchedOp { payload, deps, .. } = op;
        let failure = outcome.err();
        for (pos, &key) in deps.all().iter().enumerate() {
            self.release(
                key.index,
                deps.access(pos),
                Step::CompleteLaunched(failure.as_ref()),
                &mut on_var,
                dispatch,
            );
        }
        Ok(payload)
    }

    /// Completes a ready op whose written vars end with outcomes of their own: as
    /// [`complete`](Self::complete), with the failure of each written var given by
    /// `failure_of(position)` (`None`: the var's failure is cleared, as by a success), where
    /// `position` is the var's place in the op's list of reads then writes, as pushed.
    ///
    /// For an op that stands for several ops run one after the other (the facade's bulk
    /// segments): each var ends as the last of them that wrote it left it.
    ///
    /// # Errors
    ///
    /// As [`complete`](Self::complete).
    pub fn complete_each<'f, D>(
        &self,
        op: ReadyOp<T>,
        failure_of: impl Fn(usize) -> Option<&'f E>,
        dispatch: &mut D,
    ) -> Result<T, GraphError>
    where
        D: Dispatch<T> + ?Sized,
        E: Clone + 'f,
    {
        if op.graph != self.id {
            return Err(GraphError::ForeignOp);
        }
        let ReadyOp { payload, deps, .. } = op;
        for (pos, &key) in deps.all().iter().enumerate() {
            let access = deps.access(pos);
            let failure = match access {
                Access::Write => failure_of(pos),
                Access::Read => None,
            };
            self.release(
                key.index,
                access,
                Step::Complete(failure),
                &mut |_, _| {},
                dispatch,
            );
        }
        Ok(payload)
    }

    /// Transition 3 or 4 (or 5, 6: `step`) on one var, then dispatch whatever it made ready;
    /// `on_var` for 5 and 6. Generic over it, not `dyn`: each caller (each its own hook type)
    /// gets its own copy, in which its constant `step` prunes the other transitions' branches.
    fn release<D>(
        &self,
        var: u32,
        access: Access,
        step: Step<'_, E>,
        on_var: &mut impl FnMut(Access, &mut L),
        dispatch: &mut D,
    ) where
        D: Dispatch<T> + ?Sized,
        E: Clone,
    {
        let Some((head, slot)) = self.vars.get_with_header(var) else {
            return;
        };
        // A completed read that takes a credit, and not the last one, has nothing to hand on
        // and needs no lock (`read_credits.rs`).
        let credit = match (access, step) {
            (Access::Read, Step::Complete(_)) => match head.credits.take() {
                Credit::Taken => return,
                credit => credit,
            },
            _ => Credit::NoneLeft,
        };
        // Ops this var grants, in release order, granted once the lock is released: each grant
        // touches the op's slot, a line the pusher wrote, a cache miss that need not lengthen
        // the var's critical section. The first `GRANT_ON_STACK` wait on the stack (so that a
        // release allocates nothing unless it grants more at once), the rest of a long run of
        // reads in `more`: granted and dispatched in one pass, each slot comes into the cache
        // once, not twice (`docs/decisions.md`, "A long run granted and dispatched in one
        // pass").
        let mut granted = [NIL; GRANT_ON_STACK];
        let mut buffered = 0;
        let mut more = Vec::new();
        let reclaimed = {
            let mut state = lock(&slot.state);
            if access == Access::Write {
                match step {
                    Step::Complete(failure) => self.record_outcome(&mut state, failure),
                    Step::Launch => self.record_outcome(&mut state, None),
                    Step::CompleteLaunched(Some(failure)) => {
                        self.record_outcome(&mut state, Some(failure));
                    }
                    Step::CompleteLaunched(None) => {}
                }
            }
            if let Step::Launch | Step::CompleteLaunched(_) = step {
                on_var(access, &mut state.queue.extra_or_default().for_launched);
            }
            let ops = &self.ops;
            let mut on_grant = |op| {
                if buffered < GRANT_ON_STACK {
                    if buffered < GRANT_PREFETCHED {
                        // Its lines (the pusher wrote them) travel while we finish here.
                        ops.prefetch(op);
                    }
                    granted[buffered] = op;
                    buffered += 1;
                } else {
                    more.push(op);
                }
            };
            // `false` (a request that was not granted, or not launched) cannot happen: the op
            // tokens (`ReadyOp`, `LaunchedOp`) come only from a grant or a launch.
            let credits = &head.credits;
            let _ = match step {
                Step::Complete(_) if credit == Credit::TookLast => {
                    state.queue.last_credit_taken(credits, &mut on_grant);
                    true
                }
                Step::Complete(_) => state.queue.complete(credits, access, &mut on_grant),
                Step::Launch => state.queue.launch(credits, access, &mut on_grant),
                Step::CompleteLaunched(_) => {
                    state
                        .queue
                        .complete_launched(credits, access, &mut on_grant)
                }
            };
            Self::settle(slot, &mut state, &mut on_grant);
            (state.life == Life::Deleted && state.queue.is_idle(credits))
                .then(|| self.reclaim(slot, &mut state))
        };
        if let Some(reclaimed) = reclaimed {
            self.finish_reclaim(var, reclaimed.reusable);
            if let Some(callback) = reclaimed.on_deleted {
                dispatch.reclaimed(callback);
            }
        }
        // The grant that reaches zero takes the op over (see `op_cell`). The parked payload was
        // published by the pusher's unlock of this var, which our lock acquired; granting after
        // our unlock keeps that order, and the op cannot leave its slot before this grant (it
        // waits for it), so the index stays valid.
        // No hint for those in `more`: a run's slots come in order, which the hardware
        // prefetcher follows.
        for &op in granted[..buffered].iter().chain(&more) {
            self.grant_and_dispatch(op, dispatch);
        }
    }

    /// Grants `op` (popped from a var's queue by the caller's release, after that var's
    /// unlock); the grant that reaches zero dispatches it.
    fn grant_and_dispatch<D>(&self, op: u32, dispatch: &mut D)
    where
        D: Dispatch<T> + ?Sized,
    {
        if let Some(op_slot) = self.ops.get(op)
            && op_slot.grant()
        {
            self.dispatch_parked(op, op_slot, dispatch);
        }
    }

    /// Appends `op` (whose grant took it over) to the list of ready ops threaded through the
    /// slots' links.
    fn thread_ready(ops: &Slab<OpSlot<T>>, op: u32, ready: &mut u32, last: &mut u32) {
        let Some(link) = ops.link(op) else {
            return;
        };
        // Relaxed: we own the op now; only this thread reads the links back.
        link.store(NIL, Ordering::Relaxed);
        match ops.link(*last) {
            Some(previous) => previous.store(op, Ordering::Relaxed),
            None => *ready = op,
        }
        *last = op;
    }

    /// Takes the op parked in slot `index` (owned by the caller's grant), frees the slot and
    /// dispatches the op.
    fn dispatch_parked<D>(&self, index: u32, op_slot: &OpSlot<T>, dispatch: &mut D)
    where
        D: Dispatch<T> + ?Sized,
    {
        let Parked { payload, deps } = op_slot.take();
        self.ops.free(index);
        dispatch.dispatch(ReadyOp {
            graph: self.id,
            payload,
            deps,
        });
    }

    fn record_outcome(&self, state: &mut VarState<E, L>, failure: Option<&E>)
    where
        E: Clone,
    {
        // Relaxed counter updates: each var's increment and decrement are ordered by its lock, and
        // readers only compare against zero after acquiring (through the op protocol) every
        // failure they must see; see `op_failure`.
        match failure {
            Some(error) => {
                if state.set_failure(error.clone()).is_none() {
                    self.failed_vars.fetch_add(1, Ordering::Relaxed);
                }
            }
            None => {
                if state.take_failure().is_some() {
                    self.failed_vars.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Gives `var`'s slot its last generation, so that its next reclaim retires it, and returns
    /// the var's handle at that generation: for the loom models of a retired slot.
    #[cfg(all(test, loom))]
    pub(crate) fn age_out(&self, var: Var) -> Var {
        if let Some(slot) = self.vars.get(var.index) {
            let mut state = lock(&slot.state);
            state.generation = u32::MAX;
            slot.incoming.reset(u32::MAX);
        }
        Var {
            generation: u32::MAX,
            ..var
        }
    }

    /// Reclaims an idle, deleted var (under its lock).
    fn reclaim(&self, slot: &VarSlot<E, L>, state: &mut VarState<E, L>) -> Reclaimed {
        if state.take_failure().is_some() {
            self.failed_vars.fetch_sub(1, Ordering::Relaxed);
        }
        state.queue.trim(KEEP_SPILL);
        // The next var at this index starts with nothing of this one's launched ops (the
        // caller's own `complete_launched` took everything away, unless it misused `on_var`).
        if let Some(cold) = state.queue.extra_mut() {
            cold.for_launched = L::default();
        }
        // A slot whose generation ran out is retired: it stays deleted forever, so no handle
        // can ever alias a later var.
        let reusable = state.generation != u32::MAX;
        if reusable {
            state.generation += 1;
            state.life = Life::Live;
            // Closed since `delete_var`; the next var's pushes must name its generation.
            slot.incoming.reset(state.generation);
        } else {
            state.life = Life::Retired;
        }
        Reclaimed {
            reusable,
            // Only a var deleted while busy stored a callback (and so has a cold part).
            on_deleted: state.queue.extra_mut().and_then(|c| c.on_deleted.take()),
        }
    }

    /// The part of reclaiming that happens after the var's lock is released.
    fn finish_reclaim(&self, index: u32, reusable: bool) {
        if let Some(header) = self.vars.header(index) {
            // Relaxed: a null word publishes nothing (a lookup that finds it returns `None`);
            // before `free` hands the slot on. A stale handle finds no word, never a dangling one.
            header
                .attachment
                .0
                .store(ptr::null_mut(), Ordering::Relaxed);
        }
        self.live_vars.fetch_sub(1, Ordering::Relaxed);
        if reusable {
            self.vars.free(index);
        }
    }

    /// Deletes `var` once every op already pushed on it has completed, then reclaims its slot.
    /// From now on, pushes naming `var` fail with [`GraphError::DeletedVar`].
    ///
    /// The graph never calls `on_deleted` itself (see [`Deletion`]): an idle var is reclaimed
    /// here and the callback comes back ([`Deletion::Reclaimed`]); a busy one keeps it until
    /// the completion of its last op hands it to that completion's dispatcher
    /// ([`Dispatch::reclaimed`]), after the var's lock is released.
    ///
    /// # Errors
    ///
    /// [`GraphError::ForeignVar`], or [`GraphError::DeletedVar`] if the var was already deleted;
    /// `on_deleted` is dropped uncalled.
    pub fn delete_var<F>(&self, var: Var, on_deleted: F) -> Result<Deletion<F>, GraphError>
    where
        F: FnOnce() + Send + 'static,
    {
        let reclaimed = {
            // Not while a push on several vars appends: it checked its vars live first.
            let _push_lock = lock(&self.push_lock);
            let (head, slot, mut state) = self.lock_slot(var)?;
            if state.life != Life::Live {
                return Err(GraphError::DeletedVar { var });
            }
            state.life = Life::Deleted;
            // No push may come in through the ring any more (a push that got in first was
            // pushed before the deletion, and is merged here).
            Self::close(slot, &mut state);
            slot.incoming.mark_deleted();
            if !state.queue.is_idle(&head.credits) {
                state.queue.extra_or_default().on_deleted = Some(Box::new(on_deleted));
                return Ok(Deletion::Pending);
            }
            self.reclaim(slot, &mut state)
        };
        self.finish_reclaim(var.index, reclaimed.reusable);
        Ok(Deletion::Reclaimed(on_deleted))
    }

    /// The state of `var`'s queue (also while its deletion is pending).
    ///
    /// # Errors
    ///
    /// [`GraphError::ForeignVar`], or [`GraphError::DeletedVar`] once the var was reclaimed.
    pub fn var_status(&self, var: Var) -> Result<VarStatus, GraphError> {
        let (head, slot, mut state) = self.lock_slot(var)?;
        Self::merge_behind_waiters(slot, &mut state);
        Ok(VarStatus {
            running_reads: state.queue.running_reads(&head.credits),
            write_running: state.queue.write_running(),
            waiting: state.queue.waiting_len(),
            deleted: state.life != Life::Live,
            failed: state.failure().is_some(),
            launched: {
                let launched = state.queue.launched();
                launched.reads + launched.writes
            },
        })
    }

    /// The ops waiting on `var`, in push order, for stall reports. What they wait for is the
    /// running work [`var_status`](Self::var_status) reports (the running write, or the running
    /// reads).
    ///
    /// # Errors
    ///
    /// As [`var_status`](Self::var_status).
    pub fn pending_ops(&self, var: Var) -> Result<Vec<PendingOp>, GraphError> {
        let state = self.lock_merged(var)?;
        Ok(self.waiting_ops(&state))
    }

    /// The ops waiting on `var`, in push order, and how many of the first ones wait only for
    /// the var's launched ops, not for its running ones (for `holds_back`): a run of reads at
    /// the front while no write runs, which a launch holds back (`var_queue.rs`, "Launched
    /// ops").
    pub(crate) fn waiting_behind_holders(
        &self,
        var: Var,
    ) -> Result<(Vec<PendingOp>, usize), GraphError> {
        let state = self.lock_merged(var)?;
        let waiting = self.waiting_ops(&state);
        let launch_held = if state.queue.write_running() {
            0
        } else {
            waiting
                .iter()
                .take_while(|op| op.access == Access::Read)
                .count()
        };
        Ok((waiting, launch_held))
    }

    /// The ops waiting in a var's FIFO (its ring merged), in push order (var lock held).
    fn waiting_ops(&self, state: &VarState<E, L>) -> Vec<PendingOp> {
        state
            .queue
            .waiting()
            .filter_map(|waiter| {
                let slot = self.ops.get(waiter.op)?;
                // Exact: the op waits on this var, whose lock we hold, so it stays parked.
                let generation = slot.generation();
                Some(PendingOp {
                    id: OpId {
                        index: waiter.op,
                        generation,
                    },
                    access: waiter.access,
                })
            })
            .collect()
    }

    /// Whether `var` is live and no op waits on it behind one that `is_last` accepts (given
    /// its payload): either none waits, or the last one waiting passes. For a caller that can
    /// make its op a continuation of that op, or of one holding `var` (the facade's chained
    /// replays, `run/replay/`): the answer holds while that op does not release `var`, which
    /// the caller must ensure; an op pushed on `var` after the look queues behind it. `is_last`
    /// runs under the var's lock: it must not call into this graph.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine_graph::Graph;
    ///
    /// let graph: Graph<&str> = Graph::new();
    /// let var = graph.new_var()?;
    /// let mut ready = Vec::new();
    /// graph.push(&[], &[var], "holder", &mut ready)?;
    /// assert!(graph.waits_last(var, |_| false));
    /// graph.push(&[var], &[], "waiter", &mut ready)?;
    /// assert!(graph.waits_last(var, |op| *op == "waiter"));
    /// assert!(!graph.waits_last(var, |op| *op == "holder"));
    /// # Ok::<(), depengine_graph::GraphError>(())
    /// ```
    pub fn waits_last(&self, var: Var, is_last: impl FnOnce(&T) -> bool) -> bool {
        let Ok(state) = self.lock_merged(var) else {
            return false;
        };
        if state.life != Life::Live {
            return false;
        }
        let Some(last) = state.queue.last_waiting() else {
            return true;
        };
        // The op waits on this var, whose lock we hold: it stays parked while we look, at the
        // slot's current generation.
        let _pin = self.ops.pin();
        self.ops.get(last.op).is_some_and(|slot| {
            slot.inspect(slot.generation(), |parked| is_last(&parked.payload))
                .unwrap_or(false)
        })
    }

    /// Every var with running or waiting requests, by slot index: what holds it and the ops
    /// waiting on it, in push order. For pictures of a stalled graph (the engine's
    /// `dump_pending`), not for the op path: it locks each var slot of the graph in turn, one
    /// at a time, and allocates the list.
    ///
    /// Not an atomic snapshot: each var is exact at the moment its lock is held, but ops run,
    /// complete and are pushed between two vars, so an op may be listed on one var and be gone
    /// from (or not yet on) another, and the ids of ops released meanwhile may name other ops
    /// when they are inspected. In a stalled graph, which is what it is for, nothing moves and
    /// the picture is exact.
    pub fn busy_vars(&self) -> Vec<BusyVar> {
        // No push on several vars halfway through its appends: see `parked_writer`.
        let _pushes = self.hold_pushes();
        let mut busy = Vec::new();
        // Var slots are never freed (only the op slab is trimmed), so every index below
        // `slots()` stays valid; a slot on the free list is idle and skipped.
        let slots = u32::try_from(self.vars.slots()).unwrap_or(u32::MAX);
        for index in 0..slots {
            let Some((head, slot)) = self.vars.get_with_header(index) else {
                continue;
            };
            let mut state = lock(&slot.state);
            Self::merge_behind_waiters(slot, &mut state);
            let var = Var {
                graph: self.id,
                index,
                generation: state.generation,
            };
            let waiting = self.waiting_ops(&state);
            let holder = if let Some(op) = state.queue.running_write_op() {
                Holder::Write {
                    op: self.parked_writer(var, op, &waiting),
                }
            } else if let Some(reads) = NonZeroU32::new(state.queue.running_reads(&head.credits)) {
                Holder::Reads(reads)
            } else if let Some(ops) = NonZeroU32::new({
                let launched = state.queue.launched();
                launched.reads + launched.writes
            }) {
                Holder::Launched(ops)
            } else if state.queue.is_idle(&head.credits) {
                continue;
            } else {
                // Nothing runs or is launched, yet requests wait: the last running read took
                // the last credit without the lock and is on its way to it, to grant the
                // front (`read_credits.rs`). It still holds the var.
                Holder::Reads(NonZeroU32::MIN)
            };
            busy.push(BusyVar {
                var,
                holder,
                waiting,
                deleted: state.life != Life::Live,
            });
        }
        busy
    }

    /// The id of the op that `var`'s running write was granted to, if that op is still
    /// parked (it waits for another var); `op` is the slot its request names, `waiting` the
    /// ops waiting on `var` (var lock held).
    ///
    /// Exact: a parked op's request names its slot, and the op stays parked or leaves, but
    /// while we hold `var`'s lock (and the push lock, so that no push on several vars is
    /// halfway through: such an op enters its slot before it appends to its later vars) no op
    /// that uses `var` can enter the slot it left unless it was appended to `var`'s queue
    /// before (then it is in `waiting` under that slot). A request of an op on several vars
    /// that never parked names the slot it took, which the op never entered. So the
    /// slot's op is the holder iff it writes `var` and does not wait on `var`. Its generation
    /// was published to us by `var`'s lock (the pusher parked it before unlocking `var`); for
    /// another op in the slot a stale generation only makes `inspect` refuse.
    fn parked_writer(&self, var: Var, op: u32, waiting: &[PendingOp]) -> Option<OpId> {
        if op == NO_OP || waiting.iter().any(|w| w.id.index == op) {
            return None;
        }
        // The op may have left the slot: no trim may free it under us meanwhile.
        let _pin = self.ops.pin();
        let slot = self.ops.get(op)?;
        let id = OpId {
            index: op,
            generation: slot.generation(),
        };
        let key = VarKey {
            index: var.index,
            generation: var.generation,
        };
        slot.inspect(id.generation, |parked| parked.deps.writes().contains(&key))?
            .then_some(id)
    }

    /// Calls `f` with the payload of the waiting op `id`; `None` if it is no longer waiting.
    ///
    /// The op cannot be dispatched while `f` runs (a thread that makes it ready waits for `f`):
    /// `f` must not call back into this graph.
    pub fn inspect_op<R>(&self, id: OpId, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.inspect_parked(id, |parked| f(&parked.payload))
    }

    /// Calls `f` with the waiting op `id` (payload and dependency list); `None` if it is no
    /// longer waiting. As [`inspect_op`](Self::inspect_op), `f` must not call into this graph.
    pub(crate) fn inspect_parked<R>(&self, id: OpId, f: impl FnOnce(&Parked<T>) -> R) -> Option<R> {
        // The op may have left the slot: no trim may free it under us meanwhile.
        let _pin = self.ops.pin();
        self.ops.get(id.index)?.inspect(id.generation, f)
    }

    /// This graph's id, which its vars carry.
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// `look` at what the caller keeps on `var` for the ops launched on it (the `L` that
    /// [`launch`](Self::launch) and [`complete_launched`](Self::complete_launched) change), under
    /// the var's lock (so `look` must not call this graph).
    ///
    /// ```
    /// use depengine_graph::{Graph, ReadyOp};
    ///
    /// // Each var keeps the names of the ops launched on it.
    /// let graph: Graph<&str, String, Vec<&str>> = Graph::new();
    /// let x = graph.new_var()?;
    /// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
    /// graph.push(&[], &[x], "kernel", &mut ready)?;
    /// let op = ready.pop().unwrap();
    /// let launched = graph.launch(op, |_, names| names.push("kernel"), &mut ready)?;
    /// assert_eq!(graph.launched_on(x, Clone::clone)?, ["kernel"]);
    /// let forget = |_, names: &mut Vec<&str>| names.retain(|&name| name != "kernel");
    /// graph.complete_launched(launched, Ok(()), forget, &mut ready)?;
    /// assert!(graph.launched_on(x, Vec::is_empty)?);
    /// # Ok::<(), depengine_graph::GraphError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`GraphError::DeletedVar`] for a stale handle (its slot holds another var now), and the
    /// errors of a handle of another graph.
    pub fn launched_on<R>(&self, var: Var, look: impl FnOnce(&L) -> R) -> Result<R, GraphError> {
        let state = self.lock_current(var)?;
        match state.queue.extra() {
            Some(cold) => Ok(look(&cold.for_launched)),
            None => Ok(look(&L::default())),
        }
    }

    /// The failure recorded on `var`, if any.
    ///
    /// # Errors
    ///
    /// As [`var_status`](Self::var_status).
    pub fn var_failure(&self, var: Var) -> Result<Option<E>, GraphError>
    where
        E: Clone,
    {
        Ok(self.lock_current(var)?.failure().cloned())
    }

    /// Clears the failure recorded on `var`, returning it.
    ///
    /// # Errors
    ///
    /// As [`var_status`](Self::var_status).
    pub fn clear_failure(&self, var: Var) -> Result<Option<E>, GraphError> {
        let failure = self.lock_current(var)?.take_failure();
        if failure.is_some() {
            self.failed_vars.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(failure)
    }

    /// The first failure held by a var `op` reads or writes, if any: the engine's cue to skip the
    /// op and pass the failure on.
    ///
    /// Stable while the op is ready: no other write can run on its vars until it completes. Costs
    /// one atomic load when no var of the graph holds a failure. The op's payload may have been
    /// converted ([`ReadyOp::map`]): only its vars are read.
    #[inline]
    pub fn op_failure<U>(&self, op: &ReadyOp<U>) -> Option<E>
    where
        E: Clone,
    {
        // Relaxed: every failure this op can observe was recorded (counter incremented) by a write
        // that completed before the op became ready, i.e. that happens-before this load through
        // the var lock and wait counter; coherence then guarantees we read a count that includes
        // it. Unrelated vars can only add to the count.
        if self.failed_vars.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.held_failure(op)
    }

    /// `op_failure` once some var of the graph holds a failure: looks at each of the op's vars.
    #[cold]
    fn held_failure<U>(&self, op: &ReadyOp<U>) -> Option<E>
    where
        E: Clone,
    {
        op.deps.all().iter().find_map(|key| {
            let slot = self.vars.get(key.index)?;
            lock(&slot.state).failure().cloned()
        })
    }

    /// A hint for the thread about to run `op`: starts moving the lines of the op's vars into
    /// its caches, so that completing the op finds them there (`docs/graph.md`, "Prefetch
    /// hints"). Changes nothing but timing. As with [`op_failure`](Self::op_failure), the payload
    /// may have been converted.
    pub fn prefetch_vars<U>(&self, op: &ReadyOp<U>) {
        self.prefetch_var_states(op.deps.all());
    }

    /// Asks for the locked-state line of each of `vars` (`depengine_slab::prefetch_line`).
    fn prefetch_var_states(&self, vars: &[VarKey]) {
        for key in vars {
            if let Some(slot) = self.vars.get(key.index) {
                depengine_slab::prefetch_line(std::ptr::from_ref(&slot.state));
            }
        }
    }

    /// Counters for leak checks (exact while no other thread uses the graph).
    pub fn stats(&self) -> GraphStats {
        let op_slots = self.ops.slots();
        let spare = usize::from(*lock(&self.push_lock) != NIL);
        let live = self.ops.in_use().saturating_sub(spare).min(op_slots);
        GraphStats {
            live_vars: self.live_vars.load(Ordering::Relaxed),
            var_slots: self.vars.slots(),
            live_op_blocks: live,
            pooled_op_blocks: op_slots - live,
            failed_vars: self.failed_vars.load(Ordering::Relaxed),
        }
    }

    /// Gives back the op storage a burst of waiting ops grew: if no op waits now and no other
    /// thread uses the op storage (a push, a completion or an [`inspect_op`](Self::inspect_op)
    /// in progress), frees the op slots beyond the first 992 (about 110 KiB with the engine's op
    /// record) and beyond what the bursts before this one used too (a program that repeats a
    /// burst keeps its storage; a burst more than four times the earlier ones gives all of it
    /// back: depengine-slab's `slab.rs`, "Trimming"), then asks the allocator to return free
    /// memory to the system (on glibc, `malloc_trim(0)`: the memory of the slots, and of the
    /// vars' queues, which give back a burst's spill as they drain); whether it freed anything.
    /// Cheap when there is nothing to give back (one load, or a few atomics while storage is
    /// kept for repeats); a later burst grows the storage again, as the first one did.
    ///
    /// Pushes wait while the free list is rebuilt over the slots kept, not while the memory goes
    /// back to the system, which takes the calling thread time in proportion to it. Ids of ops
    /// that waited before (see [`OpId`]) may name other ops once the storage grew back.
    #[allow(unsafe_code, reason = "the slab's trim: see the SAFETY comment")]
    pub fn trim(&self) -> bool {
        // The spare slot goes back to the slab, so that it neither counts as an op waiting nor
        // keeps its bucket.
        let spare = std::mem::replace(&mut *lock(&self.push_lock), NIL);
        if spare != NIL {
            self.ops.free(spare);
        }
        // SAFETY: the graph touches an op slot only while the slot is allocated (from the push
        // that parks an op in it to the `free` after the op is taken out: the pusher, the
        // releasers, which grant before the owner takes, `pending_ops` under the lock of a var
        // the op waits on) or under a pin (`inspect_parked`), as the slab's contract asks.
        unsafe {
            self.ops.trim_to_system(Keep::RecentUse {
                at_least: KEEP_OP_BUCKETS,
            })
        }
    }
}

#[cfg(all(test, not(loom), target_os = "linux", target_pointer_width = "64"))]
mod layout_tests {
    use depengine_sync::lock;

    use super::*;

    /// A var's locked state is exactly one cache line (std's futex mutex is 8 bytes before the
    /// state), its `Incoming` ring the next one; its slab entry adds the line of the link, the
    /// attachment and the read credits before them. Whatever the caller keeps for launched ops
    /// (`L`, in the cold part) adds nothing to them.
    #[test]
    fn var_slot_is_two_cache_lines_after_its_link_and_attachment() {
        assert_eq!(std::mem::align_of::<VarSlot<Failure, Vec<u64>>>(), 64);
        assert_eq!(
            std::mem::size_of::<Mutex<VarState<Failure, Vec<u64>>>>(),
            64
        );
        assert_eq!(std::mem::size_of::<Mutex<VarState<&'static str, ()>>>(), 64);
        assert_eq!(
            std::mem::offset_of!(VarSlot<Failure, Vec<u64>>, incoming),
            64
        );
        assert_eq!(std::mem::size_of::<VarSlot<Failure, Vec<u64>>>(), 128);
        // The slab's entry: the link, the attachment and the read credits on one line, then the
        // slot.
        assert_eq!(
            std::mem::size_of::<depengine_slab::Entry<VarSlot<Failure, Vec<u64>>>>(),
            192
        );
    }

    /// An op slot whose payload is 56 bytes (the engine's op record) is 112 bytes, link
    /// included (no line alignment: see `docs/graph.md`), and a ready op of it 104 bytes.
    #[test]
    fn op_slot_of_a_56_byte_payload_is_112_bytes() {
        type Payload = [u64; 7];
        assert_eq!(std::mem::size_of::<crate::op::DepList>(), 40);
        assert_eq!(
            std::mem::size_of::<depengine_slab::Entry<OpSlot<Payload>>>(),
            112
        );
        assert_eq!(std::mem::size_of::<ReadyOp<Payload>>(), 104);
    }

    /// A var that once had a long FIFO keeps at most `KEEP_SPILL` of spill once it is
    /// reclaimed, and its slot is reused with the cold part still there.
    #[test]
    fn reclaim_trims_the_spill() {
        let graph: Graph<u32, &'static str> = Graph::new();
        let var = graph.new_var().unwrap();
        let mut ready = Vec::new();
        for op in 0..500 {
            graph.push(&[], &[var], op, &mut ready).unwrap();
        }
        assert_eq!(graph.var_status(var).unwrap().waiting, 499);
        let spill = |index| {
            lock(&graph.vars.get(index).unwrap().state)
                .queue
                .spill_capacity()
        };
        assert!(spill(var.index) >= 500 - crate::var_queue::RING);
        graph.delete_var(var, || {}).unwrap().call_if_reclaimed();
        let mut done = Vec::new();
        while let Some(op) = ready.pop() {
            done.push(graph.complete(op, Ok(()), &mut ready).unwrap());
        }
        assert_eq!(done, (0..500).collect::<Vec<_>>());
        assert!(spill(var.index) <= KEEP_SPILL);
        let again = graph.new_var().unwrap();
        assert_eq!(again.index, var.index);
        assert!(graph.var_failure(again).unwrap().is_none());
    }
}
