//! Ops: the dependency list an op declares, the [`ReadyOp`] handed to the dispatcher, and the
//! slot a waiting op is parked in (MXNet's `OprBlock`).
//!
//! # Op lifecycle
//!
//! 1. `push` validates the op's vars and appends one request per var, under that var's lock (an
//!    op on several vars holds the graph's push lock meanwhile, `Graph::push_each`).
//! 2. If every var grants the op at once (the common case when nothing conflicts), the op never
//!    touches shared memory: it goes straight to the dispatcher as a [`ReadyOp`].
//! 3. Otherwise the op is *parked* in an op slot (`OpSlot`, module `op_cell`) at the first var
//!    that holds it back: its payload and dependency list go into the slot and its wait counter
//!    is set. An op on one var counts 1; an op on several counts that var, the vars after it and
//!    its pusher's hold (MXNet's `reads + writes + 1`), which the pusher gives back, with the
//!    grants of the later vars that did not hold it back, once it has appended everywhere. Each
//!    var that later grants the op decrements the counter; the one that brings it to zero takes
//!    the op out of the slot, frees the slot and dispatches the op. Exactly one decrement
//!    reaches zero, so the op is ready exactly once.
//! 4. The engine runs the op and hands the [`ReadyOp`] back to `complete`, which releases the
//!    op's vars and returns the payload.

use std::fmt;

use crate::deletion::OnDeleted;
use crate::var::{Access, Var};

/// Vars an op's dependency list holds inline (more than this: one allocation per push). Four
/// covers the common shapes (an op on one var, read two and write one, up to four inputs) in
/// 40 bytes, which keeps [`ReadyOp`] and the op slot small: both cross between cores once per
/// op, a cache line at a time.
pub(crate) const INLINE_DEPS: usize = 4;

/// The most vars one op may name: `2^31 - 2`, so that an op slot's wait count (`op_cell::COUNT`,
/// 31 bits) holds them and the hold of the op's pusher.
pub(crate) const MAX_DEPS: u32 = 0x7FFF_FFFE;

/// A var of this graph without the graph id (which the graph checked at push): 8 bytes, so the
/// inline dependency list stays small and cheap to move.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct VarKey {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl VarKey {
    const PLACEHOLDER: VarKey = VarKey {
        index: u32::MAX,
        generation: 0,
    };

    fn of(var: Var) -> Self {
        VarKey {
            index: var.index,
            generation: var.generation,
        }
    }

    pub(crate) fn var(self, graph: u32) -> Var {
        Var {
            graph,
            index: self.index,
            generation: self.generation,
        }
    }
}

/// The vars of one op: reads first, then writes. 40 bytes (the enum's tag fits beside the two
/// counts of the inline variant).
pub(crate) enum DepList {
    Inline {
        len: u8,
        reads: u8,
        keys: [VarKey; INLINE_DEPS],
    },
    Heap {
        reads: u32,
        keys: Box<[VarKey]>,
    },
}

impl DepList {
    /// Whether `reads` and `writes` fit in one list: at most [`MAX_DEPS`] vars.
    pub(crate) fn fits(reads: &[Var], writes: &[Var]) -> bool {
        reads.len() + writes.len() <= MAX_DEPS as usize
    }

    /// The list of no var (an op without vars).
    pub(crate) const EMPTY: DepList = DepList::Inline {
        len: 0,
        reads: 0,
        keys: [VarKey::PLACEHOLDER; INLINE_DEPS],
    };

    /// The list of `reads` then `writes`, which [`fits`](Self::fits). Not an `Option`: a list
    /// built and then moved out of one is copied field by field, and the wide loads of the next
    /// move of the op stall on those narrow stores.
    pub(crate) fn new(reads: &[Var], writes: &[Var]) -> Self {
        let len = reads.len() + writes.len();
        debug_assert!(Self::fits(reads, writes));
        let all = reads.iter().chain(writes).map(|&v| VarKey::of(v));
        if len <= INLINE_DEPS {
            let mut keys = [VarKey::PLACEHOLDER; INLINE_DEPS];
            for (slot, key) in keys.iter_mut().zip(all) {
                *slot = key;
            }
            DepList::Inline {
                len: len as u8,
                reads: reads.len() as u8,
                keys,
            }
        } else {
            DepList::Heap {
                reads: reads.len() as u32,
                keys: all.collect(),
            }
        }
    }

    /// All vars, reads first.
    pub(crate) fn all(&self) -> &[VarKey] {
        match self {
            DepList::Inline { len, keys, .. } => &keys[..usize::from(*len)],
            DepList::Heap { keys, .. } => keys,
        }
    }

    /// How many of the vars are reads.
    fn read_count(&self) -> usize {
        match self {
            DepList::Inline { reads, .. } => usize::from(*reads),
            DepList::Heap { reads, .. } => *reads as usize,
        }
    }

    pub(crate) fn reads(&self) -> &[VarKey] {
        &self.all()[..self.read_count()]
    }

    pub(crate) fn writes(&self) -> &[VarKey] {
        &self.all()[self.read_count()..]
    }

    /// How the op uses its `position`-th var.
    pub(crate) fn access(&self, position: usize) -> Access {
        if position < self.read_count() {
            Access::Read
        } else {
            Access::Write
        }
    }
}

/// An op whose dependencies are all satisfied: the dispatcher runs it and hands it back to
/// [`Graph::complete`](crate::Graph::complete).
///
/// Dropping a `ReadyOp` without completing it leaves its vars held forever (every later op on them
/// stalls), just like an op that never finishes.
///
/// # Examples
///
/// ```
/// use depengine_graph::{Graph, ReadyOp};
///
/// let graph: Graph<String> = Graph::new();
/// let (src, dst) = (graph.new_var()?, graph.new_var()?);
/// let mut ready: Vec<ReadyOp<String>> = Vec::new();
/// graph.push(&[src], &[dst], "copy".to_string(), &mut ready)?;
/// let mut op = ready.pop().expect("nothing holds the op back");
/// assert_eq!(op.reads().collect::<Vec<_>>(), [src]);
/// assert_eq!(op.writes().collect::<Vec<_>>(), [dst]);
/// op.payload_mut().push_str(" (done)");
/// assert_eq!(graph.complete(op, Ok(()), &mut ready)?, "copy (done)");
/// assert_eq!(graph.var_status(dst)?.pending(), 0);
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
///
/// A ready op is completed once: `complete` takes it by value, and it is neither `Clone` nor
/// `Copy`, so a second completion, which would release its vars twice, does not compile:
///
/// ```compile_fail,E0382
/// # use depengine_graph::{Graph, ReadyOp};
/// # let graph: Graph<&str> = Graph::new();
/// # let x = graph.new_var()?;
/// # let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[x], "write", &mut ready)?;
/// let op = ready.pop().unwrap();
/// graph.complete(op, Ok(()), &mut ready)?;
/// graph.complete(op, Ok(()), &mut ready)?; // `op` was moved by the first completion
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
pub struct ReadyOp<T> {
    pub(crate) graph: u32,
    pub(crate) payload: T,
    pub(crate) deps: DepList,
}

/// The accessors that [`ReadyOp`] and [`LaunchedOp`] share: each holds an op's payload and its
/// vars, as pushed, in fields of the same names.
macro_rules! op_accessors {
    ($op:ident) => {
        impl<T> $op<T> {
            /// The payload given to [`Graph::push`](crate::Graph::push).
            pub fn payload(&self) -> &T {
                &self.payload
            }

            /// Mutable access to the payload.
            pub fn payload_mut(&mut self) -> &mut T {
                &mut self.payload
            }

            /// The vars the op reads, as pushed.
            pub fn reads(&self) -> impl ExactSizeIterator<Item = Var> + '_ {
                self.deps.reads().iter().map(|key| key.var(self.graph))
            }

            /// The vars the op writes, as pushed.
            pub fn writes(&self) -> impl ExactSizeIterator<Item = Var> + '_ {
                self.deps.writes().iter().map(|key| key.var(self.graph))
            }
        }
    };
}

op_accessors!(ReadyOp);
op_accessors!(LaunchedOp);

impl<T> ReadyOp<T> {
    /// The same op with its payload converted by `f`: its vars stay as they are, and
    /// [`Graph::complete`](crate::Graph::complete) takes it back once converted to the graph's
    /// payload type again.
    ///
    /// ```
    /// use depengine_graph::{Graph, ReadyOp};
    ///
    /// let graph: Graph<u32> = Graph::new();
    /// let var = graph.new_var()?;
    /// let mut ready: Vec<ReadyOp<u32>> = Vec::new();
    /// graph.push(&[], &[var], 7, &mut ready)?;
    /// let op: ReadyOp<String> = ready.pop().unwrap().map(|n| n.to_string());
    /// assert_eq!(op.payload(), "7");
    /// let payload = graph.complete(op.map(|text| text.len() as u32), Ok(()), &mut ready)?;
    /// assert_eq!(payload, 1);
    /// # Ok::<(), depengine_graph::GraphError>(())
    /// ```
    #[inline]
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> ReadyOp<U> {
        let ReadyOp {
            graph,
            payload,
            deps,
        } = self;
        ReadyOp {
            graph,
            payload: f(payload),
            deps,
        }
    }

    /// The same op with its payload sorted by `f` into one of two types: `Ok(ReadyOp<U>)` if
    /// `f` returns `Ok`, `Err(ReadyOp<V>)` if it returns `Err`. A dispatcher whose payloads
    /// are of two kinds (ops to run, and markers it handles itself) hands each kind on as a
    /// type that holds only that kind.
    ///
    /// # Errors
    ///
    /// `Err` holds the op when `f` sorts its payload into the second type: not a failure, the
    /// other kind of op.
    ///
    /// ```
    /// use depengine_graph::{Graph, ReadyOp};
    ///
    /// enum Payload {
    ///     Run(&'static str),
    ///     Marker(u32),
    /// }
    ///
    /// let graph: Graph<Payload> = Graph::new();
    /// let var = graph.new_var()?;
    /// let mut ready: Vec<ReadyOp<Payload>> = Vec::new();
    /// graph.push(&[], &[var], Payload::Marker(3), &mut ready)?;
    /// let sorted = ready.pop().unwrap().try_map(|payload| match payload {
    ///     Payload::Run(name) => Ok(name),
    ///     Payload::Marker(marker) => Err(marker),
    /// });
    /// let marker: ReadyOp<u32> = sorted.err().expect("a marker was pushed");
    /// assert_eq!(*marker.payload(), 3);
    /// graph.complete(marker.map(Payload::Marker), Ok(()), &mut ready)?;
    /// # Ok::<(), depengine_graph::GraphError>(())
    /// ```
    #[inline]
    pub fn try_map<U, V>(
        self,
        f: impl FnOnce(T) -> Result<U, V>,
    ) -> Result<ReadyOp<U>, ReadyOp<V>> {
        let ReadyOp {
            graph,
            payload,
            deps,
        } = self;
        match f(payload) {
            Ok(payload) => Ok(ReadyOp {
                graph,
                payload,
                deps,
            }),
            Err(payload) => Err(ReadyOp {
                graph,
                payload,
                deps,
            }),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for ReadyOp<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadyOp")
            .field("payload", &self.payload)
            .field("reads", &self.reads().collect::<Vec<_>>())
            .field("writes", &self.writes().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// An op that launched ([`Graph::launch`](crate::Graph::launch)): the ops that wait for launch
/// ([`Waits::Launch`](crate::Waits::Launch)) may start behind it, the others wait until
/// [`Graph::complete_launched`](crate::Graph::complete_launched) takes it back. Only a launch
/// makes one, so only a launched op can complete as launched.
///
/// Dropping a `LaunchedOp` without completing it leaves its vars held forever for the ops that
/// wait for completion, as a `ReadyOp` does.
///
/// ```
/// use depengine_graph::{Graph, LaunchedOp, ReadyOp};
///
/// let graph: Graph<&str> = Graph::new();
/// let x = graph.new_var()?;
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[x], "kernel", &mut ready)?;
/// let op = ready.pop().unwrap();
/// let launched: LaunchedOp<&str> = graph.launch(op, |_, &mut ()| {}, &mut ready)?;
/// assert_eq!(launched.writes().collect::<Vec<_>>(), [x]);
/// assert_eq!(graph.var_status(x)?.launched, 1);
/// assert_eq!(graph.complete_launched(launched, Ok(()), |_, &mut ()| {}, &mut ready)?, "kernel");
/// assert_eq!(graph.var_status(x)?.pending(), 0);
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[must_use = "a launched op holds its vars for the ops that wait for completion until it completes"]
pub struct LaunchedOp<T> {
    pub(crate) graph: u32,
    pub(crate) payload: T,
    pub(crate) deps: DepList,
}

impl<T> LaunchedOp<T> {
    /// The same op with its payload converted by `f` (see [`ReadyOp::map`]).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> LaunchedOp<U> {
        let LaunchedOp {
            graph,
            payload,
            deps,
        } = self;
        LaunchedOp {
            graph,
            payload: f(payload),
            deps,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for LaunchedOp<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaunchedOp")
            .field("payload", &self.payload)
            .field("reads", &self.reads().collect::<Vec<_>>())
            .field("writes", &self.writes().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Where ready ops go. The graph calls it, outside every lock, for each op that becomes ready in
/// [`Graph::push`](crate::Graph::push), [`Graph::complete`](crate::Graph::complete),
/// [`Graph::launch`](crate::Graph::launch) or
/// [`Graph::complete_launched`](crate::Graph::complete_launched).
///
/// Implemented for closures and for `Vec<ReadyOp<T>>` (which collects them).
///
/// # Examples
///
/// ```
/// use std::collections::VecDeque;
///
/// use depengine_graph::{Dispatch, Graph, ReadyOp};
///
/// /// Runs ready ops first in, first out, counting them.
/// #[derive(Default)]
/// struct Fifo {
///     queue: VecDeque<ReadyOp<u32>>,
///     dispatched: usize,
/// }
///
/// impl Dispatch<u32> for Fifo {
///     fn dispatch(&mut self, op: ReadyOp<u32>) {
///         self.dispatched += 1;
///         self.queue.push_back(op);
///     }
/// }
///
/// let graph: Graph<u32> = Graph::new();
/// let x = graph.new_var()?;
/// let mut fifo = Fifo::default();
/// for step in 0..3 {
///     graph.push(&[], &[x], step, &mut fifo)?;
/// }
/// assert_eq!(fifo.dispatched, 1, "writes of one var run one at a time");
/// let mut order = Vec::new();
/// while let Some(op) = fifo.queue.pop_front() {
///     order.push(graph.complete(op, Ok(()), &mut fifo)?);
/// }
/// assert_eq!((order, fifo.dispatched), (vec![0, 1, 2], 3));
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
pub trait Dispatch<T> {
    /// Takes one ready op. It may call back into the graph (push, complete) freely.
    fn dispatch(&mut self, op: ReadyOp<T>);

    /// Takes the callback of a var whose deletion waited for the op being completed (or
    /// launched), reclaimed now, after the var's lock was released. The default calls it at
    /// once; a dispatcher whose caller still has work to finish for the op (the engine counts
    /// it done) keeps it and calls it after that.
    fn reclaimed(&mut self, on_deleted: OnDeleted) {
        on_deleted();
    }
}

impl<T, F: FnMut(ReadyOp<T>)> Dispatch<T> for F {
    fn dispatch(&mut self, op: ReadyOp<T>) {
        self(op);
    }
}

impl<T> Dispatch<T> for Vec<ReadyOp<T>> {
    fn dispatch(&mut self, op: ReadyOp<T>) {
        self.push(op);
    }
}

/// Identifies a waiting (parked) op, for stall reports. Ids are only meaningful while the op
/// waits: once it is dispatched its slot is recycled under a new generation. Ordered by slot,
/// then generation (an order for listings, not push order).
///
/// # Examples
///
/// ```
/// use depengine_graph::{Graph, OpId, ReadyOp};
///
/// let graph: Graph<&str> = Graph::new();
/// let x = graph.new_var()?;
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[x], "write", &mut ready)?;
/// graph.push(&[x], &[], "read", &mut ready)?;
/// let id: OpId = graph.pending_ops(x)?[0].id;
/// assert_eq!(id.to_string(), format!("op#{}.{}", id.index(), id.generation()));
/// assert_eq!(graph.inspect_op(id, |name| *name), Some("read"));
///
/// // Once the read is dispatched, the id names no waiting op.
/// graph.complete(ready.pop().unwrap(), Ok(()), &mut ready)?;
/// assert_eq!(graph.inspect_op(id, |name| *name), None);
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl OpId {
    /// The op slot this op waits in.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The slot's generation while this op waits in it.
    pub fn generation(self) -> u32 {
        self.generation
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op#{}.{}", self.index, self.generation)
    }
}

/// A waiting op as listed by [`Graph::pending_ops`](crate::Graph::pending_ops).
///
/// # Examples
///
/// ```
/// use depengine_graph::{Access, Graph, PendingOp, ReadyOp};
///
/// let graph: Graph<&str> = Graph::new();
/// let x = graph.new_var()?;
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[x], "write", &mut ready)?;
/// graph.push(&[x], &[], "read", &mut ready)?;
/// graph.push(&[], &[x], "write again", &mut ready)?;
///
/// // The running write is not listed; the waiting ops are, in push order.
/// let pending: Vec<PendingOp> = graph.pending_ops(x)?;
/// let listed: Vec<_> = pending
///     .iter()
///     .map(|op| (op.access, graph.inspect_op(op.id, |name| *name)))
///     .collect();
/// assert_eq!(listed, [(Access::Read, Some("read")), (Access::Write, Some("write again"))]);
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingOp {
    /// The op.
    pub id: OpId,
    /// How it uses the var it waits on.
    pub access: Access,
}

/// What a parked op leaves in its slot.
pub(crate) struct Parked<T> {
    pub(crate) payload: T,
    pub(crate) deps: DepList,
}
