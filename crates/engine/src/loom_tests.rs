//! Loom models of the facade's own synchronization: the completion counter that
//! `wait_for_all` and pushers held back by the pending bound sleep on (or a
//! `wait_for_all_async` future awaits), with the count of values' releases run after their ops
//! (`wait/releases.rs`), the one-shot `wait_for_var` blocks on, or abandons
//! (`api/blocking.rs`), or its future polls; and bulk execution's hand-overs: a segment's members
//! between the pushing thread and the runner, and the count of graph entries that tells a
//! join whether another entry came in between (with the real graph); and the counters that
//! release a replay's ops (`plan/release_counts.rs`).
//! Ready ops are queued in the CPU blocks' pools, whose hand-offs (the queues, a kept
//! successor, a stand-in) are modelled in depengine-pool's `tests/it/loom/pool.rs` and
//! `tests/it/loom/handoff.rs`.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p depengine
//! --lib --tests` (or `cargo xtask loom`).
//!
//! Each op's "effect" is a relaxed store to a flag before its `done()`: a waiter that returns
//! must see it, which checks both that it did not return early and that the op's effects
//! happen-before the return.

use std::future::poll_fn;
use std::task::{Context, Poll, Waker};

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

use crate::name::OpName;
use crate::op::segment::{Member, MemberVars, Segment};
use crate::run::GraphEntries;
use crate::wait::idle::{Admission, IdleCounter, IdleWaiter, PendingBound};
use crate::wait::one_shot::OneShot;
use crate::wait::releases::Releases;

/// An op: its effect, then its completion.
fn complete(counter: &IdleCounter, effect: &AtomicBool) {
    effect.store(true, Ordering::Relaxed);
    counter.done();
}

/// A counter with one op added, and the thread that runs it (effect, then completion).
fn one_pending_op() -> (Arc<IdleCounter>, Arc<AtomicBool>, thread::JoinHandle<()>) {
    let counter = Arc::new(IdleCounter::new());
    let effect = Arc::new(AtomicBool::new(false));
    let _ = counter.add();
    let completer = {
        let counter = Arc::clone(&counter);
        let effect = Arc::clone(&effect);
        thread::spawn(move || complete(&counter, &effect))
    };
    (counter, effect, completer)
}

/// A counter with two ops added, each completed on a thread of its own after setting its
/// effect: what the waiters of the models below wait for.
fn two_ops_completing() -> (
    Arc<IdleCounter>,
    Arc<[AtomicBool; 2]>,
    Vec<thread::JoinHandle<()>>,
) {
    let counter = Arc::new(IdleCounter::new());
    let effects = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let _ = counter.add();
    let _ = counter.add();
    let completers = (0..2)
        .map(|op| {
            let counter = Arc::clone(&counter);
            let effects = Arc::clone(&effects);
            thread::spawn(move || complete(&counter, &effects[op]))
        })
        .collect();
    (counter, effects, completers)
}

/// Two ops complete on two threads while a third waits for all: the waiter always wakes, and
/// only once both completed.
///
/// Catches: `done`'s release (its `AcqRel` weakened to `Acquire`) and the waiter's acquire
/// (`fetch_or` `Relaxed`): the waiter returns without seeing an op's effect.
#[test]
fn wait_idle_never_misses_the_last_completion() {
    loom::model(|| {
        let (counter, effects, completers) = two_ops_completing();
        counter.wait_idle();
        assert!(effects[0].load(Ordering::Relaxed));
        assert!(effects[1].load(Ordering::Relaxed));
        assert_eq!(counter.pending(), 0);
        for completer in completers {
            completer.join().unwrap();
        }
    });
}

/// An op pushes a child before it completes itself (as an op that pushes ops does): the
/// waiter, which only knew of the parent, must not return while the child is pending.
///
/// Catches: as `wait_idle_never_misses_the_last_completion`.
#[test]
fn wait_idle_waits_for_ops_pushed_by_ops() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        let effects = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let _ = counter.add();
        let parent = {
            let counter = Arc::clone(&counter);
            let effects = Arc::clone(&effects);
            thread::spawn(move || {
                let _ = counter.add();
                let child = {
                    let counter = Arc::clone(&counter);
                    let effects = Arc::clone(&effects);
                    thread::spawn(move || complete(&counter, &effects[1]))
                };
                complete(&counter, &effects[0]);
                child.join().unwrap();
            })
        };
        counter.wait_idle();
        assert!(
            effects[0].load(Ordering::Relaxed),
            "returned before the parent"
        );
        assert!(
            effects[1].load(Ordering::Relaxed),
            "returned before the child"
        );
        assert_eq!(counter.pending(), 0);
        parent.join().unwrap();
    });
}

/// An unrelated thread adds and completes an op of its own while the waiter's op is pending:
/// the counts are not op identities, so the other op's completion must not stand in for the
/// waiter's (a target taken from `pushed` and compared with `completed` would return early).
///
/// Catches: `done`'s acquire (its `AcqRel` weakened to `Release`): the last completion, on
/// the waiter's op, loads a `pushed` without the other thread's add, whose `done` it counted,
/// finds the engine busy and notifies nobody (loom: deadlock, the waiter sleeps for good).
/// Also `done`'s release and the waiter's acquire, as the models above.
#[test]
fn wait_idle_is_not_fooled_by_a_concurrent_op() {
    loom::model(|| {
        let (counter, effect, completer) = one_pending_op();
        let other = {
            let counter = Arc::clone(&counter);
            thread::spawn(move || {
                let _ = counter.add();
                counter.done();
            })
        };
        counter.wait_idle();
        assert!(
            effect.load(Ordering::Relaxed),
            "returned before the waited op"
        );
        completer.join().unwrap();
        other.join().unwrap();
        assert_eq!(counter.pending(), 0);
    });
}

/// A thread that waits until idle, then checks it sees the op's effect.
fn spawn_waiter(counter: &Arc<IdleCounter>, effect: &Arc<AtomicBool>) -> thread::JoinHandle<()> {
    let (counter, effect) = (Arc::clone(counter), Arc::clone(effect));
    thread::spawn(move || {
        counter.wait_idle();
        assert!(effect.load(Ordering::Relaxed));
    })
}

/// Two threads wait at once while an op completes: both wake, neither early.
///
/// Catches: the waiter's acquire (`fetch_or` `Relaxed`).
#[test]
fn two_waiters_both_wake() {
    loom::model(|| {
        let (counter, effect, completer) = one_pending_op();
        let waiter = spawn_waiter(&counter, &effect);
        counter.wait_idle();
        assert!(effect.load(Ordering::Relaxed));
        waiter.join().unwrap();
        completer.join().unwrap();
        assert_eq!(counter.pending(), 0);
    });
}

/// A waiter that gives up (a timed wait whose time is up at once, as the stall warnings'
/// waits can be) while another waits for good: the one that keeps waiting still wakes, and
/// the one that comes back until it finds the engine idle sees the op's effect.
///
/// Catches: the waiter's acquire (`fetch_or` `Relaxed`).
#[test]
fn a_waiter_that_gives_up_loses_no_wake_up() {
    loom::model(|| {
        let (counter, effect, completer) = one_pending_op();
        let waiter = spawn_waiter(&counter, &effect);
        while !counter.wait_idle_for(Some(std::time::Duration::ZERO)) {
            thread::yield_now();
        }
        assert!(effect.load(Ordering::Relaxed));
        waiter.join().unwrap();
        completer.join().unwrap();
        assert_eq!(counter.pending(), 0);
    });
}

/// `pending` read while an op is added and completed concurrently: never underflows, and is
/// 0 or 1.
///
/// Catches: `pending`'s acquire load of `completed` (weakened to `Relaxed`): it counts the
/// op's completion without seeing its add (the loom build of `pending` asserts that, since
/// its `saturating_sub` would hide it).
#[test]
fn pending_never_underflows() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        let worker = {
            let counter = Arc::clone(&counter);
            thread::spawn(move || {
                let _ = counter.add();
                counter.done();
            })
        };
        assert!(counter.pending() <= 1);
        worker.join().unwrap();
        assert_eq!(counter.pending(), 0);
    });
}

/// A push over the bound (two ops pending, bound 2) is held back until at most one is, while
/// the two complete on two threads: the held-back pusher always wakes, and then sees the
/// effects of the ops it waited for.
///
/// Catches: the held-back pusher's acquire (`wait_below_for`'s `fetch_or` weakened to
/// `Relaxed`: it goes on without seeing the effect of the op whose completion let it go), and
/// a lost wake-up (a completion that notified without taking the mutex: loom reports the
/// deadlock).
#[test]
fn a_held_back_push_waits_for_the_low_water_mark() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::with_bound(Some(PendingBound::new(2, None))));
        let effects = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        assert_eq!(counter.add(), Admission::Admitted);
        assert_eq!(counter.add(), Admission::Admitted);
        let completers: Vec<_> = (0..2)
            .map(|op| {
                let counter = Arc::clone(&counter);
                let effects = Arc::clone(&effects);
                thread::spawn(move || complete(&counter, &effects[op]))
            })
            .collect();
        // `throttle::admit`, without the thread's state.
        while counter.add() == Admission::OverBound {
            counter.done();
            assert!(counter.wait_below_for(None));
        }
        // Admitted with 3 ops added: at least one of the first two completed, and its effect
        // happened-before the admission.
        assert!(
            effects.iter().any(|effect| effect.load(Ordering::Relaxed)),
            "admitted over the bound"
        );
        for completer in completers {
            completer.join().unwrap();
        }
        assert_eq!(counter.pending(), 1);
    });
}

/// A held-back pusher while another thread adds and completes an op (a push from inside an
/// op, which is never held back): the pusher's count of pending ops never underflows.
///
/// Catches: `wait_below_for`'s acquire (its `fetch_or` `Relaxed`): it counts the other op's
/// completion without seeing its add (asserted under loom); and a lost wake-up (a completion
/// that cleared `THROTTLED` and notified without taking the mutex: loom reports the deadlock).
#[test]
fn a_held_back_pusher_counts_every_add_it_saw_completed() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::with_bound(Some(PendingBound::new(1, None))));
        let (effect, completer) = {
            let effect = Arc::new(AtomicBool::new(false));
            assert_eq!(counter.add(), Admission::Admitted);
            let completer = {
                let counter = Arc::clone(&counter);
                let effect = Arc::clone(&effect);
                thread::spawn(move || complete(&counter, &effect))
            };
            (effect, completer)
        };
        let child = {
            let counter = Arc::clone(&counter);
            thread::spawn(move || {
                let _ = counter.add();
                counter.done();
            })
        };
        assert!(counter.wait_below_for(None));
        assert!(effect.load(Ordering::Relaxed));
        completer.join().unwrap();
        child.join().unwrap();
        assert_eq!(counter.pending(), 0);
    });
}

/// A held-back pusher that lost patience gets an allowance while the two pending ops complete
/// on another thread: however the completions and the allowance interleave, the push goes on,
/// and once the allowance is used up the bound holds again (a push past it is held back).
///
/// Catches an allowance that never ends (`limit` lifted for good) or admits more than `max`
/// pushes.
#[test]
fn an_allowance_ends_and_the_bound_holds_again() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::with_bound(Some(PendingBound::new(2, None))));
        assert_eq!(counter.add(), Admission::Admitted);
        assert_eq!(counter.add(), Admission::Admitted);
        let completer = {
            let counter = Arc::clone(&counter);
            thread::spawn(move || {
                counter.done();
                counter.done();
            })
        };
        if counter.add() == Admission::OverBound {
            // The held-back push gives up (`throttle::wait_below` after its patience).
            counter.done();
            counter.allow_more();
            assert_eq!(counter.add(), Admission::Admitted, "allowed");
        }
        completer.join().unwrap();
        // One op pending, and at most one push of the allowance left: two more pushes
        // make three pending, past the bound.
        assert_eq!(counter.pending(), 1);
        let _ = counter.add();
        assert_eq!(counter.add(), Admission::OverBound, "the bound holds again");
    });
}

/// The one-shot hands its value over whether it is set before or after the wait begins, or
/// while the waiter is about to sleep: the setter notifies only a waiter it finds asleep.
///
/// Catches no ordering: the one-shot is a mutex and a condvar, with no atomics of its own. It
/// fails (the waiter sleeps forever) if the waiter does not say it sleeps.
#[test]
fn one_shot_hands_over_its_value() {
    loom::model(|| {
        let one_shot = Arc::new(OneShot::new());
        let setter = {
            let one_shot = Arc::clone(&one_shot);
            thread::spawn(move || one_shot.set(7_u32))
        };
        assert_eq!(one_shot.wait(), 7);
        setter.join().unwrap();
    });
}

/// A waiter that abandons the one-shot races the setter's claim: either the waiter gave up and
/// the setter's side effect (taking the var's failure) never happens, or the setter claimed
/// first, and the waiter, refused, gets the value.
///
/// Catches no ordering: the one-shot is a mutex and a condvar, with no atomics of its own.
#[test]
fn one_shot_abandon_and_claim_exclude_each_other() {
    loom::model(|| {
        let one_shot = Arc::new(OneShot::new());
        let taken = Arc::new(AtomicBool::new(false));
        let setter = {
            let (one_shot, taken) = (Arc::clone(&one_shot), Arc::clone(&taken));
            thread::spawn(move || {
                if one_shot.claim() {
                    taken.store(true, Ordering::Relaxed);
                }
                one_shot.set(7_u32);
            })
        };
        if one_shot.abandon() {
            setter.join().unwrap();
            assert!(!taken.load(Ordering::Relaxed));
            assert!(!one_shot.is_set());
        } else {
            assert_eq!(one_shot.wait(), 7);
            setter.join().unwrap();
            assert!(taken.load(Ordering::Relaxed));
        }
    });
}

/// A future polls the one-shot while the setter sets it: a poll from a task that then stops
/// waiting stores a waker that wakes nobody, then the awaiting task polls; the setter must
/// wake the latest waker, whether it sets before, between or after the polls.
///
/// Catches: storing the waker in a critical section of its own, after the check (the set
/// then falls in between, takes no waker, and the await never wakes: loom reports the
/// deadlock); and keeping a stale waker instead of replacing it.
#[test]
fn one_shot_poll_never_misses_the_set() {
    loom::model(|| {
        let one_shot = Arc::new(OneShot::new());
        let setter = {
            let one_shot = Arc::clone(&one_shot);
            thread::spawn(move || {
                assert!(one_shot.claim());
                one_shot.set(7_u32);
            })
        };
        let stale = one_shot.poll_take(&mut Context::from_waker(Waker::noop()));
        let value = match stale {
            Poll::Ready(value) => value,
            Poll::Pending => loom::future::block_on(poll_fn(|cx| one_shot.poll_take(cx))),
        };
        assert_eq!(value, 7);
        setter.join().unwrap();
    });
}

/// Two ops complete on two threads while a future awaits the engine idle (as
/// `wait_for_all_async` does): it always wakes, only once both completed, and leaves no
/// waiter registered.
///
/// Catches: storing the waker after the mutex was dropped and taken again (the last
/// completion falls in between and wakes nobody: loom reports the deadlock); the poll's
/// acquire (`fetch_or` `Relaxed`: the future resolves without seeing an op's effect).
#[test]
fn async_wait_idle_never_misses_the_last_completion() {
    loom::model(|| {
        let (counter, effects, completers) = two_ops_completing();
        let mut waiter = IdleWaiter::default();
        loom::future::block_on(poll_fn(|cx| counter.poll_idle(&mut waiter, cx)));
        assert!(effects[0].load(Ordering::Relaxed));
        assert!(effects[1].load(Ordering::Relaxed));
        assert_eq!(counter.pending(), 0);
        assert!(
            !counter.has_idle_waiter(),
            "a resolved future stays registered"
        );
        for completer in completers {
            completer.join().unwrap();
        }
    });
}

/// A ready op's job in the data models: the op's function, taken out to run it.
type Job = Option<crate::op::sync_fn::SyncFn>;

/// What a job sees of its op's vars: `run/held_vars.rs`'s `HeldVars`, for an op of the
/// models' graph.
struct ModelVars<'a> {
    graph: &'a depengine_graph::Graph<Job, ()>,
    op: &'a depengine_graph::ReadyOp<Job>,
}

impl crate::op::vars::OpVars for ModelVars<'_> {
    fn attachment(
        &self,
        access: depengine_graph::Access,
        from_end: usize,
    ) -> Option<std::ptr::NonNull<()>> {
        let vars: Vec<_> = match access {
            depengine_graph::Access::Read => self.op.reads().collect(),
            depengine_graph::Access::Write => self.op.writes().collect(),
        };
        let var = *vars.iter().rev().nth(from_end)?;
        self.graph.attachment(var)
    }
}

/// Runs each op of `ready` (its job, with the op's vars), completes it, and goes on with what
/// that released.
#[allow(unsafe_code, reason = "a job is called with its op's vars")]
fn run_ops(graph: &depengine_graph::Graph<Job, ()>, mut ready: Vec<depengine_graph::ReadyOp<Job>>) {
    let run = crate::context::RunContext {
        context: crate::context::Context::cpu(0),
        priority: 0,
        property: crate::context::FnProperty::Normal,
    };
    while let Some(mut op) = ready.pop() {
        if let Some(job) = op.payload_mut().take() {
            let vars = ModelVars { graph, op: &op };
            // SAFETY: the op's own vars, which it holds until completed below.
            unsafe { job.call(run, &vars) }.unwrap();
        }
        graph.complete(op, Ok(()), &mut ready).unwrap();
    }
}

/// Typed data handed over by the graph (role 3 of `data/cell.rs`): two writers on two threads
/// each write a value, and the op that reads both runs on whichever thread grants it last. The
/// ops' functions are those of typed ops (`sync_op`): each finds its data's cells on its vars
/// (each var made with its cell attached), and reaches the values through them, in loom's
/// cell, which fails the model on any access not ordered after the other thread's write.
///
/// Catches: the op slot's `grant` weakened to `Relaxed` (depengine-graph's `op_cell.rs`): the
/// thread that grants last, and runs the reader, sees the other writer's value only through
/// the first grant's release and its own `take`'s acquire (it never locks the other var).
#[test]
#[allow(
    unsafe_code,
    reason = "the model plays the engine's part in the data's roles"
)]
fn data_is_handed_over_by_the_graph() {
    use crate::data::access::{ReadAccess, WriteAccess, sync_op};
    use crate::data::cell::CellPtr;

    /// The reading op's accesses: both written values, and the sum it writes.
    type Reader = (ReadAccess<u64>, ReadAccess<u64>, WriteAccess<u64>);

    loom::model(|| {
        let graph = Arc::new(depengine_graph::Graph::<Job, ()>::new());
        let (cell_a, cell_b, cell_sum) = (
            CellPtr::new(0_u64),
            CellPtr::new(0_u64),
            CellPtr::new(0_u64),
        );
        let (a, b, sum) = (
            graph.new_attached_var(cell_a.erased()).unwrap(),
            graph.new_attached_var(cell_b.erased()).unwrap(),
            graph.new_attached_var(cell_sum.erased()).unwrap(),
        );
        let mut ready_a = Vec::new();
        let job = sync_op::<WriteAccess<u64>, _, _>(|_, a| *a = 1);
        graph.push(&[], &[a], Some(job), &mut ready_a).unwrap();
        let mut ready_b = Vec::new();
        let job = sync_op::<WriteAccess<u64>, _, _>(|_, b| *b = 2);
        graph.push(&[], &[b], Some(job), &mut ready_b).unwrap();
        let job = sync_op::<Reader, _, _>(|_, (a, b, sum)| *sum = *a + *b);
        let mut none = Vec::new();
        graph.push(&[a, b], &[sum], Some(job), &mut none).unwrap();
        assert!(none.is_empty(), "the reader waits for both writers");

        let threads: Vec<_> = [ready_a, ready_b]
            .into_iter()
            .map(|ready| {
                let graph = Arc::clone(&graph);
                thread::spawn(move || run_ops(&graph, ready))
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        // SAFETY: every op completed (joined); this thread is the only one left.
        unsafe {
            assert_eq!(cell_sum.with(|sum| *sum), 3);
            cell_a.release();
            cell_b.release();
            cell_sum.release();
        }
    });
}

/// A member of a segment named `name` (its function is never called here).
fn member(name: &'static str) -> Member {
    Member {
        name: OpName::from(std::borrow::Cow::Borrowed(name)),
        func: crate::op::sync_fn::SyncFn::new(|_| Ok(())),
        profiled: false,
        vars: MemberVars::first(0, 1).unwrap(),
    }
}

/// The pushing thread appends two members to a segment while its runner takes and closes it:
/// every member an append accepted is taken exactly once, in push order, and an append after
/// the close is refused (`op/segment.rs`).
///
/// Catches no ordering: the segment is a mutex, with no atomics of its own. It fails (a member
/// accepted and never taken) when the runner closes the segment in a critical section of its
/// own, after the one that found it empty.
#[test]
fn segment_runs_every_member_an_append_accepted() {
    loom::model(|| {
        let segment = Arc::new(Segment::new(member("0")));
        let pusher = {
            let segment = Arc::clone(&segment);
            thread::spawn(move || {
                ["1", "2"]
                    .into_iter()
                    .filter(|&name| segment.append(member(name)).is_ok())
                    .collect::<Vec<_>>()
            })
        };
        let mut taken = Vec::new();
        let mut batch = Vec::new();
        while segment.take_into(&mut batch) {
            taken.extend(
                batch
                    .drain(..)
                    .map(|member| member.name.as_str().to_owned()),
            );
        }
        let accepted = pusher.join().unwrap();
        let expected: Vec<String> = std::iter::once("0")
            .chain(accepted)
            .map(str::to_owned)
            .collect();
        assert_eq!(taken, expected);
        assert!(segment.append(member("late")).is_err(), "closed");
    });
}

/// The count of graph entries (`run/bulk/entries.rs`), with the real graph: one thread pushes
/// an op X on `v` alone (through `v`'s ring, open behind a parked write), counts it and tells
/// the segment's pusher; the pusher, once told, reads the count, pushes its segment S on `v`
/// and `w` (through the locks, merging the ring), counts it, and checks whether an op may
/// still join S. If it may, X must be ahead of S on `v`: a join would otherwise put an op
/// pushed after X (its push happens-after X's) ahead of X.
///
/// The pusher first learns that X was pushed from a `Relaxed` flag, which orders nothing (and
/// it yields only while it has read nothing of `v`'s ring, since loom never shows a thread a
/// value older than one it read before yielding); the same flag read with `Acquire` after S's
/// push stands for the user's channel that makes X's push happen-before the join.
///
/// Catches: `entered`'s `Release` or `before_segment`'s `Acquire` weakened to `Relaxed` (the
/// pusher reads X's count, but its merge misses X's reservation: S goes ahead of X and the
/// join is allowed).
#[test]
fn a_join_is_refused_after_an_entry_behind_the_segment() {
    use depengine_graph::{Graph, ReadyOp};

    type G = Graph<u32, &'static str>;

    loom::model(|| {
        let graph = Arc::new(G::new());
        let entries = Arc::new(GraphEntries::new());
        let (v, w) = (graph.new_var().unwrap(), graph.new_var().unwrap());
        // A running write of `v` and one parked behind it, which opens `v`'s ring.
        let mut ready: Vec<ReadyOp<u32>> = Vec::new();
        graph.push(&[], &[v], 0, &mut ready).unwrap();
        graph.push(&[], &[v], 1, &mut ready).unwrap();
        let told = Arc::new(AtomicBool::new(false));
        let other = {
            let (graph, entries, told) = (graph.clone(), entries.clone(), told.clone());
            thread::spawn(move || {
                let mut released = Vec::new();
                graph.push(&[], &[v], 3, &mut released).unwrap();
                entries.entered();
                told.store(true, Ordering::Release);
                released
            })
        };
        let pusher = {
            let (graph, entries, told) = (graph.clone(), entries.clone(), told.clone());
            thread::spawn(move || {
                while !told.load(Ordering::Relaxed) {
                    thread::yield_now();
                }
                let before = entries.before_segment();
                let mut released = Vec::new();
                graph.push(&[], &[v, w], 2, &mut released).unwrap();
                entries.entered();
                let joinable = told.load(Ordering::Acquire) && entries.now() == before + 1;
                (joinable, released)
            })
        };
        ready.extend(other.join().unwrap());
        let (joinable, released) = pusher.join().unwrap();
        ready.extend(released);
        // Complete everything, one op at a time, in the order the graph releases them.
        let mut order = Vec::new();
        while let Some(op) = ready.pop() {
            order.push(graph.complete(op, Ok(()), &mut ready).unwrap());
        }
        let at = |id| order.iter().position(|&done| done == id).unwrap();
        assert!(
            !joinable || at(3) < at(2),
            "a join allowed though X, told of, is behind the segment: {order:?}"
        );
    });
}

/// A completion takes a value's release over, counts its op done, then runs the release (a
/// value's drop, `run/dispatch.rs`), while `wait_for_all` waits for the ops, then for the
/// releases: it returns only once the value is dropped.
///
/// Catches: the release counted in after the op is counted done (swap `begin` and `done`):
/// the waiter sees the engine idle and no release running, and returns before the drop.
#[test]
fn wait_for_all_sees_a_release_counted_before_its_op() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        let releases = Arc::new(Releases::default());
        let dropped = Arc::new(AtomicBool::new(false));
        let _ = counter.add();
        let completer = {
            let (counter, releases, dropped) = (
                Arc::clone(&counter),
                Arc::clone(&releases),
                Arc::clone(&dropped),
            );
            thread::spawn(move || {
                releases.begin();
                counter.done();
                dropped.store(true, Ordering::Relaxed);
                releases.end();
            })
        };
        counter.wait_idle();
        assert!(releases.wait_none_for(None));
        assert!(dropped.load(Ordering::Relaxed), "returned before the drop");
        completer.join().unwrap();
    });
}

/// A replay's op with two dependencies (`plan/release_counts.rs`): each writes its effect
/// (`Relaxed`), then counts down; the one that takes the counter to zero runs the dependent,
/// which must see both effects, whichever finished last. Two replays of one plan have counters
/// of their own, so no reset is modelled.
///
/// Catches: the count-down weakened to `Release` (the last one does not take in the other's
/// effect) or to `Acquire` (the other's effect is not published).
#[test]
fn replay_dependent_sees_every_dependency() {
    use crate::plan::release_counts::ReleaseCounts;

    loom::model(|| {
        let counts = Arc::new(ReleaseCounts::new([2]));
        let effects = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let finish = |index: usize| {
            let (counts, effects) = (Arc::clone(&counts), Arc::clone(&effects));
            thread::spawn(move || {
                effects[index].store(true, Ordering::Relaxed);
                if counts.release(0) {
                    // This thread runs the dependent.
                    assert!(
                        effects.iter().all(|effect| effect.load(Ordering::Relaxed)),
                        "the dependent ran before a dependency's effect"
                    );
                    true
                } else {
                    false
                }
            })
        };
        let (a, b) = (finish(0), finish(1));
        let released = u8::from(a.join().unwrap()) + u8::from(b.join().unwrap());
        assert_eq!(released, 1, "the dependent is released exactly once");
    });
}

/// A replayed sync GPU op released at its predecessor's launch (`plan/launches.rs`): its own
/// part and its predecessor's finish, which passes its failure on first, race; whichever
/// counts the op's join to zero finishes it, and must find its part and the failure.
///
/// Catches: the join's count-down weakened to `Release` or `Acquire` (as
/// `replay_dependent_sees_every_dependency`: the finisher misses the failure, or the part).
#[test]
fn a_launch_released_gpu_op_finishes_once_with_its_part_and_failure() {
    use crate::plan::launches::Launches;

    loom::model(|| {
        // Op 1 waits for op 0 along an at-launch edge.
        let launches = Arc::new(Launches::<u32>::new(&[Box::from([]), Box::from([0])]));
        let failed = Arc::new(AtomicBool::new(false));
        let own = {
            let (launches, failed) = (Arc::clone(&launches), Arc::clone(&failed));
            thread::spawn(move || {
                launches
                    .own_done(1, 7)
                    .then(|| (launches.take_part(1), failed.load(Ordering::Relaxed)))
            })
        };
        let upstream = {
            let (launches, failed) = (Arc::clone(&launches), Arc::clone(&failed));
            thread::spawn(move || {
                failed.store(true, Ordering::Relaxed);
                launches
                    .upstream_done(1)
                    .then(|| (launches.take_part(1), failed.load(Ordering::Relaxed)))
            })
        };
        let finishes: Vec<_> = [own.join().unwrap(), upstream.join().unwrap()]
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(
            finishes,
            [(Some(7), true)],
            "finished once, with its part and failure"
        );
    });
}

/// A replay racing a dynamic push on one of its vars: the replay's op holds the var while its
/// two plan ops run on two threads; the thread that counts the last one finished completes the
/// replay's op in the graph, while a third thread pushes a read of the var. The read runs on
/// whichever thread releases it (the pusher, if the replay completed first; else the thread
/// that completes the replay) and must see both plan ops' effects.
///
/// Catches: the count-down weakened to `Release` (the completing thread has not taken in the
/// other plan op's effect, and the graph hands the read only what that thread saw) or to
/// `Acquire` (the other thread's effect is not published).
#[test]
fn a_read_pushed_during_a_replay_sees_every_plan_op() {
    use crate::plan::release_counts::ReleaseCounts;
    use depengine_graph::{Graph, ReadyOp};
    use loom::sync::Mutex;

    /// Runs the ops `ready` holds (only the read can be there): checks it sees both effects.
    fn run_read(graph: &Graph<u8, ()>, ready: Vec<ReadyOp<u8>>, effects: &[AtomicBool; 2]) {
        for op in ready {
            assert!(
                effects.iter().all(|effect| effect.load(Ordering::Relaxed)),
                "the read ran before a plan op's effect"
            );
            graph.complete(op, Ok(()), &mut Vec::new()).unwrap();
        }
    }

    loom::model(|| {
        let graph = Arc::new(Graph::<u8, ()>::new());
        let var = graph.new_var().unwrap();
        let mut ready = Vec::new();
        graph.push(&[], &[var], 0, &mut ready).unwrap();
        let replay = Arc::new(Mutex::new(ready.pop()));
        let end = Arc::new(ReleaseCounts::new([2]));
        let effects = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let plan_op = {
            let (graph, replay, end, effects) = (
                Arc::clone(&graph),
                Arc::clone(&replay),
                Arc::clone(&end),
                Arc::clone(&effects),
            );
            move |index: usize| {
                effects[index].store(true, Ordering::Relaxed);
                if end.release(0) {
                    let op = replay.lock().unwrap().take().unwrap();
                    let mut released = Vec::new();
                    graph.complete(op, Ok(()), &mut released).unwrap();
                    run_read(&graph, released, &effects);
                }
            }
        };
        let pusher = {
            let (graph, effects) = (Arc::clone(&graph), Arc::clone(&effects));
            thread::spawn(move || {
                let mut ready = Vec::new();
                graph.push(&[var], &[], 1, &mut ready).unwrap();
                run_read(&graph, ready, &effects);
            })
        };
        let other = {
            let plan_op = plan_op.clone();
            thread::spawn(move || plan_op(0))
        };
        plan_op(1);
        other.join().unwrap();
        pusher.join().unwrap();
        assert!(graph.var_status(var).is_ok());
    });
}

/// A replay queued on its plan's last pushed replay (`plan/chain.rs`) while another thread
/// pushes a read of the plan's var: the tail replay's op holds the var; one thread ends it
/// (starting a replay queued on it, if any, then completing the op in the graph), one queues
/// a replay if nothing waits behind the tail (checked outside the chain's lock; pushing it
/// otherwise, under the lock), one pushes the read. A queued replay must run, and run before
/// the read.
///
/// Catches: a tail that ends without clearing itself, that looks for a queued replay and ends
/// in two steps of the lock, or a queueing that does not look again, under the lock, whether
/// the tail checked is still the tail: each way a replay is queued on a tail that ended, and
/// never runs.
#[test]
fn a_chained_replay_runs_or_is_pushed() {
    use crate::plan::chain::{Chain, ReplayLink};
    use depengine_graph::{Graph, ReadyOp};
    use loom::sync::atomic::AtomicU32;

    loom::model(|| {
        let graph = Arc::new(Graph::<u8, ()>::new());
        let var = graph.new_var().unwrap();
        let mut ready = Vec::new();
        // The var's side entrance opened once here, by an op that waited: its entries are
        // allocated through a `std` `OnceLock`, which loom cannot see order a pusher after.
        for _ in 0..2 {
            graph.push(&[], &[var], 9, &mut ready).unwrap();
        }
        while let Some(op) = ready.pop() {
            graph.complete(op, Ok(()), &mut ready).unwrap();
        }
        let chain = Arc::new(Chain::default());
        // The tail: op 0, holding the var.
        let tail = std::sync::Arc::new(ReplayLink::default());
        graph.push(&[], &[var], 0, &mut ready).unwrap();
        let running = ready.pop().unwrap();
        chain.lock().pushed(&tail);
        // Replays queued on the tail run so far, and what the read saw of it when it ran.
        let chained = Arc::new(AtomicU32::new(0));
        let seen = Arc::new(AtomicU32::new(u32::MAX));
        let run = {
            let (graph, chained, seen) =
                (Arc::clone(&graph), Arc::clone(&chained), Arc::clone(&seen));
            move |ready: Vec<ReadyOp<u8>>| {
                for op in ready {
                    if *op.payload() == 2 {
                        seen.store(chained.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                    graph.complete(op, Ok(()), &mut Vec::new()).unwrap();
                }
            }
        };
        let ender = {
            let (graph, chain, chained, run) = (
                Arc::clone(&graph),
                Arc::clone(&chain),
                Arc::clone(&chained),
                run.clone(),
            );
            thread::spawn(move || {
                while chain.pass_on(&tail) {
                    chained.fetch_add(1, Ordering::Relaxed);
                }
                let mut released = Vec::new();
                graph.complete(running, Ok(()), &mut released).unwrap();
                run(released);
            })
        };
        let reader = {
            let (graph, run) = (Arc::clone(&graph), run.clone());
            thread::spawn(move || {
                let mut ready = Vec::new();
                graph.push(&[var], &[], 2, &mut ready).unwrap();
                run(ready);
            })
        };
        // Checked outside the chain's lock, then queued or pushed under it (taken for each), as
        // `push_replay` does.
        let checked = chain
            .tail()
            .filter(|_| graph.waits_last(var, |&op| op == 0));
        let queued = checked.is_some_and(|tail| chain.lock().try_queue(&tail));
        let mut ready = Vec::new();
        if !queued {
            let mut locked = chain.lock();
            graph.push(&[], &[var], 1, &mut ready).unwrap();
            locked.pushed(&std::sync::Arc::new(ReplayLink::default()));
        }
        run(ready);
        ender.join().unwrap();
        reader.join().unwrap();
        let chained = chained.load(Ordering::Relaxed);
        assert_eq!(chained, u32::from(queued), "a queued replay did not run");
        if queued {
            assert_eq!(
                seen.load(Ordering::Relaxed),
                1,
                "the read ran before the queued replay"
            );
        }
    });
}
