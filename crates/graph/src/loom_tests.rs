//! Loom models: completions on a shared var from two threads while a third pushes.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p
//! depengine-graph --lib --tests`.

use loom::sync::Arc;
use loom::thread;

use crate::{Graph, GraphError, ReadyOp, Var};

type G = Graph<u32, &'static str>;

/// Completes everything in `ready` and whatever that releases, returning the payloads.
fn drain(graph: &G, mut ready: Vec<ReadyOp<u32>>) -> Vec<u32> {
    let mut done = Vec::new();
    while let Some(op) = ready.pop() {
        done.push(graph.complete(op, Ok(()), &mut ready).unwrap());
    }
    done
}

/// Completes `op` on a new model thread, which returns the ops the completion released.
fn complete_on_thread(graph: &Arc<G>, op: ReadyOp<u32>) -> thread::JoinHandle<Vec<ReadyOp<u32>>> {
    let graph = graph.clone();
    thread::spawn(move || {
        let mut released = Vec::new();
        graph.complete(op, Ok(()), &mut released).unwrap();
        released
    })
}

/// A model thread that pushed an op: the push's result and the ops it made ready.
type PushThread = thread::JoinHandle<(Result<(), GraphError>, Vec<ReadyOp<u32>>)>;

/// Pushes an op on a new model thread.
fn push_on_thread(graph: &Arc<G>, reads: &[Var], writes: &[Var], payload: u32) -> PushThread {
    let (graph, reads, writes) = (graph.clone(), reads.to_vec(), writes.to_vec());
    thread::spawn(move || {
        // Without it, loom 0.7 never runs first a thread whose first accesses are a load and a
        // compare-exchange (the ring push; tokio-rs/loom#392), and the ring's hand-overs to the
        // threads already running go unexplored.
        thread::yield_now();
        let mut released = Vec::new();
        let result = graph.push(&reads, &writes, payload, &mut released);
        (result, released)
    })
}

/// Joins a `push_on_thread` whose push must succeed.
fn pushed(handle: PushThread) -> Vec<ReadyOp<u32>> {
    let (result, released) = handle.join().unwrap();
    result.unwrap();
    released
}

/// Two ready ops: what `complete_two_while_pushing` completes.
type TwoOps = (ReadyOp<u32>, ReadyOp<u32>);

/// A graph with two vars, `a` and `b`, and a running write of each (ops 1 and 2).
fn two_running_writes() -> (Arc<G>, [Var; 2], TwoOps) {
    let graph = Arc::new(G::new());
    let a = graph.new_var().unwrap();
    let b = graph.new_var().unwrap();
    let mut ready = Vec::new();
    graph.push(&[], &[a], 1, &mut ready).unwrap();
    graph.push(&[], &[b], 2, &mut ready).unwrap();
    let write_b = ready.pop().unwrap();
    let write_a = ready.pop().unwrap();
    (graph, [a, b], (write_a, write_b))
}

/// Completes `first` and `second` on two model threads while a third pushes op `payload` (reads
/// `reads`, writes `writes`); returns what the three released, in that order.
fn complete_two_while_pushing(
    graph: &Arc<G>,
    (first, second): TwoOps,
    (reads, writes): (&[Var], &[Var]),
    payload: u32,
) -> Vec<ReadyOp<u32>> {
    let t1 = complete_on_thread(graph, first);
    let t2 = complete_on_thread(graph, second);
    let pusher = push_on_thread(graph, reads, writes, payload);
    let mut released = t1.join().unwrap();
    released.extend(t2.join().unwrap());
    released.extend(pushed(pusher));
    released
}

fn assert_each_once(mut done: Vec<u32>, expected: &[u32]) {
    done.sort_unstable();
    assert_eq!(done, expected);
}

/// Completes the ops in `released`, and those each completion releases, one at a time: writes
/// of `a`, each completion releasing at most the next. Returns their payloads in completion
/// order, once nothing is left pending on `a` or parked anywhere.
fn complete_writes_one_at_a_time(graph: &G, a: Var, mut released: Vec<ReadyOp<u32>>) -> Vec<u32> {
    let mut done = Vec::new();
    while let Some(op) = released.pop() {
        done.push(graph.complete(op, Ok(()), &mut released).unwrap());
        assert!(released.len() <= 1, "two writes of `a` ready at once");
    }
    assert_eq!(graph.var_status(a).unwrap().pending(), 0);
    assert_eq!(graph.stats().live_op_blocks, 0);
    done
}

/// Two reads of `a` run; two threads complete them while a third pushes a write of `a` (which
/// must become ready exactly once, after both reads, on whichever thread releases it).
#[test]
fn two_completing_reads_and_a_pushed_write() {
    loom::model(|| {
        let graph = Arc::new(G::new());
        let a = graph.new_var().unwrap();
        let b = graph.new_var().unwrap();
        let mut ready = Vec::new();
        graph.push(&[a], &[], 1, &mut ready).unwrap();
        graph.push(&[a, b], &[], 2, &mut ready).unwrap();
        let second = ready.pop().unwrap();
        let first = ready.pop().unwrap();

        let released = complete_two_while_pushing(&graph, (first, second), (&[b], &[a]), 3);
        let ids: Vec<u32> = released.iter().map(|op| *op.payload()).collect();
        assert_eq!(ids, [3], "the write is dispatched exactly once");
        assert_each_once(drain(&graph, released), &[3]);
        assert_eq!(graph.var_status(a).unwrap().pending(), 0);
        assert_eq!(graph.var_status(b).unwrap().pending(), 0);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}

/// The var's data, as the reads and the write of the models below use it: loom reports a
/// read and a write not ordered by happens-before as a data race.
#[derive(Default)]
struct Data(loom::cell::UnsafeCell<u32>);

// SAFETY: the cell's accesses go through loom's `with` and `with_mut` only, which touch no
// data and report two accesses that happens-before does not order: sharing it is the point.
#[allow(unsafe_code)]
unsafe impl Sync for Data {}

impl Data {
    /// A read of the data by an op that reads the var (the access alone: loom checks it).
    fn read(&self) {
        self.0.with(|_| ());
    }

    /// A write of the data by an op that writes the var.
    fn write(&self) {
        self.0.with_mut(|_| ());
    }
}

/// Starts the op with payload `writer` if `released` holds it, as a worker would: writes the
/// data. Returns the ops released.
fn run_writer(data: &Data, released: Vec<ReadyOp<u32>>, writer: u32) -> Vec<ReadyOp<u32>> {
    if released.iter().any(|op| *op.payload() == writer) {
        data.write();
    }
    released
}

/// The payload of the write that `credited_run` queues behind the run.
const WRITE_BEHIND: u32 = 4;

/// A graph with vars `a` and `b` and two reads of both (ops 2 and 3), which the completion of a
/// write of `a` (op 1) granted as a run, with a credit each on `a`; with `write_behind`, a write
/// of `a` (op `WRITE_BEHIND`) waits behind them. Returns the graph, its vars and the reads. (The
/// reads also read `b`, so that they are pushed under the locks, into `a`'s FIFO: pushed alone
/// on `a`, the second would come in through the ring and be granted when a completion merges
/// it, without a credit.)
fn credited_run(write_behind: bool) -> (Arc<G>, [Var; 2], Vec<ReadyOp<u32>>) {
    let graph = Arc::new(G::new());
    let a = graph.new_var().unwrap();
    let b = graph.new_var().unwrap();
    let mut ready = Vec::new();
    graph.push(&[], &[a], 1, &mut ready).unwrap();
    graph.push(&[a, b], &[], 2, &mut ready).unwrap();
    graph.push(&[a, b], &[], 3, &mut ready).unwrap();
    if write_behind {
        graph.push(&[], &[a], WRITE_BEHIND, &mut ready).unwrap();
    }
    let first_write = ready.pop().unwrap();
    graph.complete(first_write, Ok(()), &mut ready).unwrap();
    assert_eq!(ready.len(), 2, "the run of reads");
    (graph, [a, b], ready)
}

/// Each of `reads` on a model thread that reads the data and completes the read, then starts
/// the write `writer` if that released it; each thread returns what its completion released.
fn read_on_threads(
    graph: &Arc<G>,
    data: &Arc<Data>,
    reads: Vec<ReadyOp<u32>>,
    writer: u32,
) -> Vec<thread::JoinHandle<Vec<ReadyOp<u32>>>> {
    reads
        .into_iter()
        .map(|read| {
            let (graph, data) = (graph.clone(), data.clone());
            thread::spawn(move || {
                data.read();
                let mut released = Vec::new();
                graph.complete(read, Ok(()), &mut released).unwrap();
                run_writer(&data, released, writer)
            })
        })
        .collect()
}

/// A write of `a` completes and grants the two reads queued behind it as a run (with a credit
/// each); a write queued behind them waits. Two threads read the data and complete one read
/// each, without `a`'s lock; the one that takes the last credit takes the lock and starts the
/// write (writing the data), once.
///
/// Catches: `ReadCredits::take` weakened to `Relaxed` (the write, granted after the last take,
/// races the other read), and a last taker that does not look under the lock (the write never
/// starts).
#[test]
fn a_run_of_reads_completes_without_the_lock_then_grants_the_write() {
    loom::model(|| {
        let (graph, [a, _], reads) = credited_run(true);
        let data = Arc::new(Data::default());
        let readers = read_on_threads(&graph, &data, reads, WRITE_BEHIND);
        let released: Vec<_> = readers
            .into_iter()
            .flat_map(|reader| reader.join().unwrap())
            .collect();
        let ids: Vec<u32> = released.iter().map(|op| *op.payload()).collect();
        assert_eq!(ids, [WRITE_BEHIND], "the write is dispatched exactly once");
        assert_each_once(drain(&graph, released), &[WRITE_BEHIND]);
        assert_eq!(graph.var_status(a).unwrap().pending(), 0);
    });
}

/// A write of `a` completes and grants the two reads behind it as a run (with a credit each);
/// the first reads the data and completes here, taking a credit. One thread reads the data
/// and completes the second, taking the last credit without the lock, while another pushes a
/// write of `a`: the write starts at once (on the pusher, writing the data) if the last credit
/// was taken, and otherwise when the read that took it finds the write waiting under the lock.
///
/// Catches: `ReadCredits::left` weakened to `Relaxed` (the push finds no credit left and grants
/// the write without taking in the reads' ends: the write races a read), a push that does not
/// look at the credits (`would_wait`: the write starts beside the reads), and an `append` that
/// looks at them again after `would_wait` did (the push parks the write, which the append then
/// grants: it is never dispatched).
#[test]
fn a_write_pushed_as_the_last_credited_read_completes_starts_after_it() {
    loom::model(|| {
        let (graph, [a, _], mut reads) = credited_run(false);
        let data = Arc::new(Data::default());
        let first = reads.pop().unwrap();
        data.read();
        let mut released = Vec::new();
        graph.complete(first, Ok(()), &mut released).unwrap();
        assert!(released.is_empty());
        let reader = read_on_threads(&graph, &data, reads, WRITE_BEHIND);
        let pusher = {
            let data = data.clone();
            let pusher = push_on_thread(&graph, &[], &[a], WRITE_BEHIND);
            thread::spawn(move || run_writer(&data, pushed(pusher), WRITE_BEHIND))
        };
        for reader in reader {
            released.extend(reader.join().unwrap());
        }
        released.extend(pusher.join().unwrap());
        let ids: Vec<u32> = released.iter().map(|op| *op.payload()).collect();
        assert_eq!(ids, [WRITE_BEHIND], "the write is dispatched exactly once");
        assert_each_once(drain(&graph, released), &[WRITE_BEHIND]);
        assert_eq!(graph.var_status(a).unwrap().pending(), 0);
    });
}

/// A write of `a` completes and grants the two reads behind it as a run (with a credit each).
/// Two threads read the data and complete one read each while a third deletes `a`, whose
/// callback (the data's owner freeing it) writes the data. The var is reclaimed once: by the
/// deletion if both credits were taken, or by a completion. With `retired`, `a`'s generation
/// has run out, so the reclaim retires the slot for good. Returns the var (`a`, with the
/// generation deleted).
fn delete_during_a_credited_run(retired: bool) -> (Arc<G>, Var) {
    use loom::sync::atomic::{AtomicU32, Ordering};

    let (graph, [a, _], reads) = credited_run(false);
    let a = if retired { graph.age_out(a) } else { a };
    let data = Arc::new(Data::default());
    let reclaimed = Arc::new(AtomicU32::new(0));
    // No write: nothing the reads release is run.
    let readers = read_on_threads(&graph, &data, reads, WRITE_BEHIND);
    {
        let (data, reclaimed) = (data.clone(), reclaimed.clone());
        graph
            .delete_var(a, move || {
                data.write();
                reclaimed.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap()
            .call_if_reclaimed();
    }
    for reader in readers {
        assert!(reader.join().unwrap().is_empty());
    }
    assert_eq!(reclaimed.load(Ordering::Relaxed), 1);
    assert_eq!(graph.stats().live_vars, 1, "only `b` is left");
    (graph, a)
}

/// `delete_during_a_credited_run`: the slot, reclaimed, takes the next generation.
///
/// Catches: `ReadCredits::take` or `left` weakened to `Relaxed` (the callback races a read),
/// and a deleted var that the last credit's taker does not reclaim (never reclaimed).
#[test]
fn a_deleted_var_is_reclaimed_after_its_last_credited_read() {
    loom::model(|| {
        let (graph, a) = delete_during_a_credited_run(false);
        assert_eq!(graph.var_status(a), Err(GraphError::DeletedVar { var: a }));
    });
}

/// `delete_during_a_credited_run` with a slot whose generation ran out: reclaimed once, though
/// the read that took the last credit may lock it after the deletion reclaimed it.
///
/// Catches: a retired slot that stays `Deleted` (the late reader reclaims it again: `live_vars`
/// counts it gone twice).
#[test]
fn a_retired_var_is_reclaimed_once_after_its_last_credited_read() {
    loom::model(|| {
        let (graph, a) = delete_during_a_credited_run(true);
        assert!(graph.var_status(a).unwrap().deleted, "retired for good");
    });
}

/// A write of `a` runs with a read parked behind it; one thread completes the write (releasing
/// the parked read) while another completes an unrelated read of `a`'s neighbour `b` that the
/// parked op also waits for, and a third pushes a write of `a`.
#[test]
fn releases_race_with_a_push_on_the_same_var() {
    loom::model(|| {
        let (graph, [a, b], writes) = two_running_writes();
        // Parked: waits for both writes.
        graph.push(&[a], &[b], 3, &mut Vec::new()).unwrap();

        let released = complete_two_while_pushing(&graph, writes, (&[], &[a]), 4);
        // Op 4 may have been pushed before op 1 completed (then it waits for op 3's read) or
        // after (same), so only op 3 can be ready here; op 4 follows once op 3 completes.
        let ids: Vec<u32> = released.iter().map(|op| *op.payload()).collect();
        assert_eq!(ids, [3]);
        assert_each_once(drain(&graph, released), &[3, 4]);
        assert_eq!(graph.var_status(a).unwrap().pending(), 0);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}

/// A write of `a` runs with three reads parked behind it, the last of them also behind a
/// running write of `b`. One thread completes `a`'s write: its release grants the run of three
/// reads after the unlock, the third from the heap buffer (`GRANT_ON_STACK` is 2 under loom).
/// Another completes `b`'s write, granting the third read too, and a third thread pushes a write
/// of `a`. Each read must be dispatched exactly once, and the pushed write only after all three.
#[test]
fn a_long_run_of_reads_granted_after_the_unlock_races_another_grant() {
    loom::model(|| {
        let (graph, [a, b], writes) = two_running_writes();
        // Parked: the first two wait for `a`'s write, the third for both writes.
        let mut parked = Vec::new();
        graph.push(&[a], &[], 3, &mut parked).unwrap();
        graph.push(&[a], &[], 4, &mut parked).unwrap();
        graph.push(&[a, b], &[], 5, &mut parked).unwrap();
        assert!(parked.is_empty());

        let released = complete_two_while_pushing(&graph, writes, (&[], &[a]), 6);
        let mut ids: Vec<u32> = released.iter().map(|op| *op.payload()).collect();
        ids.sort_unstable();
        assert_eq!(ids, [3, 4, 5], "the three reads, each dispatched once");
        assert_each_once(drain(&graph, released), &[3, 4, 5, 6]);
        assert_eq!(graph.var_status(a).unwrap().pending(), 0);
        assert_eq!(graph.var_status(b).unwrap().pending(), 0);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}

/// The lock-free hand-over (`op_cell`): an op with a heap payload parks behind two running reads
/// of different vars; two threads complete the reads while a third inspects the parked op. The op
/// is dispatched exactly once, with its payload intact, and the slot is recycled.
#[test]
fn parked_op_hand_over_with_an_inspector() {
    loom::model(|| {
        let graph: Arc<Graph<String, &'static str>> = Arc::new(Graph::new());
        let a = graph.new_var().unwrap();
        let b = graph.new_var().unwrap();
        let mut ready = Vec::new();
        graph
            .push(&[a], &[], "read a".to_owned(), &mut ready)
            .unwrap();
        graph
            .push(&[b], &[], "read b".to_owned(), &mut ready)
            .unwrap();
        graph
            .push(&[], &[a, b], "write".to_owned(), &mut ready)
            .unwrap();
        assert_eq!(ready.len(), 2);
        let id = graph.pending_ops(a).unwrap()[0].id;
        let read_b = ready.pop().unwrap();
        let read_a = ready.pop().unwrap();

        let completer = |op: ReadyOp<String>| {
            let graph = graph.clone();
            thread::spawn(move || {
                let mut released = Vec::new();
                graph.complete(op, Ok(()), &mut released).unwrap();
                released
            })
        };
        let t1 = completer(read_a);
        let t2 = completer(read_b);
        let inspected = graph.inspect_op(id, String::clone);
        assert!(
            inspected.as_deref().is_none_or(|p| p == "write"),
            "{inspected:?}"
        );
        let mut released = t1.join().unwrap();
        released.extend(t2.join().unwrap());
        assert_eq!(released.len(), 1, "the write is dispatched exactly once");
        assert_eq!(released[0].payload(), "write");
        assert_eq!(graph.inspect_op(id, String::clone), None);
        assert_eq!(graph.stats().live_op_blocks, 0);
        let op = released.pop().unwrap();
        assert_eq!(graph.complete(op, Ok(()), &mut released).unwrap(), "write");
        assert!(released.is_empty());
    });
}

/// An inspector holding the id of an op that has left its slot races with a completion that
/// frees the slot and a push that parks a new op in it. The inspector must never read the new
/// op: it sees the slot's new generation whenever it sees the new op's wait count (the park's
/// `Release` store and the pin's `Acquire` compare-exchange in `op_cell.rs`), and it never reads
/// the payload while the owner takes it (the unpin's `Release` and the take's `Acquire` wait).
#[test]
fn inspector_with_a_stale_id_races_the_slot_being_reused() {
    loom::model(|| {
        let graph = Arc::new(G::new());
        let a = graph.new_var().unwrap();
        let running = running_write_and_a_parked_one(&graph, a);
        let parked = graph.pending_ops(a).unwrap()[0].id;
        // Completing the running write takes the parked one out of its slot and frees it; the
        // push parks behind that write, in the freed slot if it comes back in time.
        let completer = complete_on_thread(&graph, running);
        let pusher = push_on_thread(&graph, &[], &[a], 2);
        let inspected = graph.inspect_op(parked, |payload| *payload);
        assert!(
            inspected.is_none_or(|payload| payload == 1),
            "{inspected:?}"
        );
        let mut released = completer.join().unwrap();
        released.extend(pushed(pusher));
        assert_each_once(drain(&graph, released), &[1, 2]);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}

/// A push through the ring parks its op in a slot that a completion on another thread may just
/// have freed (so the slot's generation changed); then the main thread lists `a`'s pending ops,
/// merging the ring. Every op listed is the op that waits there: its id carries the slot's
/// current generation, which reaches the lock holder only through the ring entry (the pusher's
/// `Release` store and the drain's `Acquire` load in `incoming.rs`). The main thread learns that
/// the push is done from a `Relaxed` flag, which orders nothing.
#[test]
fn pending_ops_names_an_op_pushed_through_the_ring_exactly() {
    use loom::sync::atomic::{AtomicBool, Ordering};

    loom::model(|| {
        let graph = Arc::new(G::new());
        let (a, b) = (graph.new_var().unwrap(), graph.new_var().unwrap());
        let running_a = running_write_and_a_parked_one(&graph, a);
        // A slot that a completion on another thread empties and frees (bumping its generation).
        let running_b = running_write_and_a_parked_one(&graph, b);
        let completer = complete_on_thread(&graph, running_b);
        let done = Arc::new(AtomicBool::new(false));
        let pusher = {
            let (graph, done) = (graph.clone(), done.clone());
            thread::spawn(move || {
                let mut released = Vec::new();
                graph.push(&[], &[a], 2, &mut released).unwrap();
                done.store(true, Ordering::Relaxed);
                released
            })
        };
        while !done.load(Ordering::Relaxed) {
            thread::yield_now();
        }
        // The flag orders nothing: the merge may not see the push's reservation yet.
        let pending = graph.pending_ops(a).unwrap();
        assert!((1..=2).contains(&pending.len()), "{pending:?}");
        for op in pending {
            assert!(
                graph.inspect_op(op.id, |_| ()).is_some(),
                "{} is listed but not found",
                op.id
            );
        }
        let mut released = completer.join().unwrap();
        assert!(pusher.join().unwrap().is_empty());
        released.push(running_a);
        assert_each_once(drain(&graph, released), &[0, 1, 1, 2]);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}

/// Pushes a write of `a` that runs (payload 0) and one that parks behind it (payload 1), which
/// opens `a`'s `Incoming` ring (see `incoming.rs`). Returns the running write.
fn running_write_and_a_parked_one(graph: &G, a: crate::Var) -> ReadyOp<u32> {
    let mut ready = Vec::new();
    graph.push(&[], &[a], 0, &mut ready).unwrap();
    graph.push(&[], &[a], 1, &mut ready).unwrap();
    assert_eq!(ready.len(), 1);
    ready.pop().unwrap()
}

/// The ring: two threads push writes of `a` alone (through the ring, or through the lock once
/// the ring closed) while a third completes the running write, which releases the parked one and,
/// finding no op waiting after it, merges and closes the ring. Every op is dispatched exactly
/// once, one write at a time, and nothing is left behind.
#[test]
fn ring_pushes_race_with_the_completion_that_closes_it() {
    loom::model(|| {
        let graph = Arc::new(G::new());
        let a = graph.new_var().unwrap();
        let running = running_write_and_a_parked_one(&graph, a);
        let p2 = push_on_thread(&graph, &[], &[a], 2);
        let p3 = push_on_thread(&graph, &[], &[a], 3);
        let completer = complete_on_thread(&graph, running);
        let mut released = completer.join().unwrap();
        released.extend(pushed(p2));
        released.extend(pushed(p3));
        let ids: Vec<u32> = released.iter().map(|op| *op.payload()).collect();
        assert_eq!(ids, [1], "only the parked write is ready");
        // One write at a time: completing each releases exactly the next.
        let done = complete_writes_one_at_a_time(&graph, a, released);
        assert_each_once(done, &[1, 2, 3]);
    });
}

/// A launched op's completion (transition 6) races a push through the ring: a write of `a`
/// launched; a write that waits for completion parks behind it (opening `a`'s ring); one thread
/// completes the launched write, which grants the parked one and settles the ring, while
/// another pushes a second such write alone on `a`, through the ring or the lock. The parked
/// write is released exactly once, by the completion, and the pushed one only after it.
#[test]
fn a_launched_completion_races_a_ring_push() {
    loom::model(|| {
        let graph = Arc::new(G::new());
        let a = graph.new_var().unwrap();
        let mut ready = Vec::new();
        graph
            .push_with(crate::Waits::Launch, &[], &[a], 0, &mut ready)
            .unwrap();
        let launched = graph
            .launch(ready.pop().unwrap(), |_, &mut ()| {}, &mut ready)
            .unwrap();
        assert!(ready.is_empty());
        graph.push(&[], &[a], 1, &mut ready).unwrap();
        assert!(ready.is_empty(), "the launched write holds it back");
        let pusher = push_on_thread(&graph, &[], &[a], 2);
        let completer = {
            let graph = graph.clone();
            thread::spawn(move || {
                let mut released = Vec::new();
                graph
                    .complete_launched(launched, Ok(()), |_, &mut ()| {}, &mut released)
                    .unwrap();
                released
            })
        };
        let mut released = completer.join().unwrap();
        released.extend(pushed(pusher));
        let ids: Vec<u32> = released.iter().map(|op| *op.payload()).collect();
        assert_eq!(ids, [1], "only the parked write is ready");
        // The ring holds the pushed write only while the FIFO holds a waiting op (the
        // completion settled it): reading the FIFO merges it (a debug assertion checks it).
        let status = graph.var_status(a).unwrap();
        assert!(status.write_running && status.launched == 0);
        let done = complete_writes_one_at_a_time(&graph, a, released);
        assert_each_once(done, &[1, 2]);
    });
}

/// What a launched op leaves on its var for the ops released behind it (`Graph::launch`'s
/// `on_var`) and the failure its completion stores there change in one section of the var's
/// lock: a write of `a` launches, noting itself on `a`; a write pushed behind it, released at
/// once, looks at `a`'s notes and then at its own failure, while another thread completes the
/// launched write with a failure, removing its note. The released write finds the note or the
/// failure, never neither (with the note removed in a section of its own before the failure's,
/// it can find neither).
#[test]
fn a_launched_ops_note_and_its_failure_change_together() {
    type Noting = Graph<u32, &'static str, Vec<u32>>;
    loom::model(|| {
        let graph = Arc::new(Noting::new());
        let a = graph.new_var().unwrap();
        let mut ready = Vec::new();
        graph
            .push_with(crate::Waits::Launch, &[], &[a], 0, &mut ready)
            .unwrap();
        let write = ready.pop().unwrap();
        let launched = graph
            .launch(write, |_, noted| noted.push(0), &mut ready)
            .unwrap();
        graph
            .push_with(crate::Waits::Launch, &[], &[a], 1, &mut ready)
            .unwrap();
        let behind = ready.pop().expect("released behind the launched write");
        let completer = {
            let graph = graph.clone();
            thread::spawn(move || {
                let mut released = Vec::new();
                graph
                    .complete_launched(
                        launched,
                        Err("fault"),
                        |_, noted| noted.retain(|&op| op != 0),
                        &mut released,
                    )
                    .unwrap();
            })
        };
        let noted = graph.launched_on(a, |noted| noted.contains(&0)).unwrap();
        let failed = graph.op_failure(&behind).is_some();
        completer.join().unwrap();
        assert!(
            noted || failed,
            "the released write found neither the launched write's note nor its failure"
        );
        graph.complete(behind, Ok(()), &mut ready).unwrap();
    });
}

/// The ring wraps (its `CAPACITY` is 2 under loom): two writes of `a` fill it behind a parked
/// one; then a thread inspects `a` (which merges the ring, freeing both entries) while another
/// pushes a third write, which may reserve entry 0 again at once. The merge's emptying of that
/// entry must happen before the pusher's request lands in it (the `Release` head update and the
/// `Acquire` reservation of `incoming.rs`): otherwise the entry can end up empty after the
/// request was written, and the next merge waits for it forever (loom: "Model exceeded maximum
/// number of branches"), with the op lost.
#[test]
fn ring_wraps_while_a_merge_frees_the_entry_a_push_reuses() {
    assert_eq!(
        crate::incoming::CAPACITY,
        2,
        "the model needs a ring it can fill"
    );
    loom::model(|| {
        let graph = Arc::new(G::new());
        let a = graph.new_var().unwrap();
        let running = running_write_and_a_parked_one(&graph, a);
        let mut ready = Vec::new();
        // Through the ring (open behind the parked write): entries 0 and 1, now full.
        graph.push(&[], &[a], 2, &mut ready).unwrap();
        graph.push(&[], &[a], 3, &mut ready).unwrap();
        assert!(ready.is_empty());
        let inspector = {
            let graph = graph.clone();
            thread::spawn(move || graph.var_status(a).unwrap().waiting)
        };
        let pusher = push_on_thread(&graph, &[], &[a], 4);
        let waiting = inspector.join().unwrap();
        assert!((3..=4).contains(&waiting), "{waiting} ops waiting");
        assert!(
            pushed(pusher).is_empty(),
            "the write waits behind the others"
        );
        // Each completion releases exactly the next write (and merges what the ring holds).
        let done = complete_writes_one_at_a_time(&graph, a, vec![running]);
        assert_eq!(done, [0, 1, 2, 3, 4], "in push order");
    });
}

/// A completion that leaves ops waiting merges the ring (every such completion does under loom:
/// `MERGE_EVERY` is 1, see `graph.rs`) while the main thread pushes a write of `a` through it.
/// Writes 1 and 2 wait in the FIFO (an inspection merged 2), so the completion of 0 releases 1
/// and merges behind 2; the push lands in the ring before or after that merge. Every op runs
/// once, one at a time, in push order (a merge that dropped what it drained loses op 3 here).
#[test]
fn a_completion_merges_the_ring_behind_waiting_ops_while_a_push_appends() {
    loom::model(|| {
        let graph = Arc::new(G::new());
        let a = graph.new_var().unwrap();
        let running = running_write_and_a_parked_one(&graph, a);
        let mut ready = Vec::new();
        // Through the ring, then merged into the FIFO by the inspection.
        graph.push(&[], &[a], 2, &mut ready).unwrap();
        assert_eq!(graph.var_status(a).unwrap().waiting, 2);
        let completer = complete_on_thread(&graph, running);
        graph.push(&[], &[a], 3, &mut ready).unwrap();
        assert!(ready.is_empty(), "the write waits behind the others");
        let done = complete_writes_one_at_a_time(&graph, a, completer.join().unwrap());
        assert_eq!(done, [1, 2, 3], "in push order, after 0");
    });
}

/// The ring and deletion: a thread pushes a write of `a` alone while another deletes `a`. The
/// push either gets in before the deletion (and runs) or fails with `DeletedVar`; the var is
/// reclaimed once, after its last op.
#[test]
fn ring_push_races_with_delete_var() {
    use loom::sync::atomic::{AtomicUsize, Ordering};

    loom::model(|| {
        let graph = Arc::new(G::new());
        let a = graph.new_var().unwrap();
        let running = running_write_and_a_parked_one(&graph, a);
        let reclaimed = Arc::new(AtomicUsize::new(0));
        let pusher = push_on_thread(&graph, &[], &[a], 2);
        let deleter = {
            let (graph, reclaimed) = (graph.clone(), reclaimed.clone());
            thread::spawn(move || {
                graph
                    .delete_var(a, move || {
                        reclaimed.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap()
                    .call_if_reclaimed();
            })
        };
        let (push_result, released) = pusher.join().unwrap();
        assert!(released.is_empty(), "the write waits behind two others");
        deleter.join().unwrap();
        let expected: &[u32] = match push_result {
            Ok(()) => &[0, 1, 2],
            Err(error) => {
                assert_eq!(error, GraphError::DeletedVar { var: a });
                &[0, 1]
            }
        };
        assert_eq!(reclaimed.load(Ordering::SeqCst), 0, "ops are still pending");
        assert_each_once(drain(&graph, vec![running]), expected);
        assert_eq!(reclaimed.load(Ordering::SeqCst), 1);
        assert_eq!(graph.stats().live_vars, 0);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}

/// A stale handle never finds the word of the var that took its slot: one thread creates the
/// slot's next var with its word while another looks the old var's word up.
///
/// Catches: the word's store (`Release`, in `create_var`) or its load (`Acquire`, in
/// `attachment`) weakened to `Relaxed`: the lookup finds the new word beside the old
/// generation, and hands a stale handle another var's word.
#[test]
fn a_stale_handle_never_finds_its_slot_s_next_word() {
    static WORDS: [u64; 2] = [1, 2];
    let word = |at: usize| std::ptr::NonNull::from(&WORDS[at]).cast::<()>();
    loom::model(move || {
        let graph = Arc::new(G::new());
        let first = graph.new_attached_var(word(0)).unwrap();
        graph.delete_var(first, || {}).unwrap().call_if_reclaimed();
        let creator = {
            let graph = Arc::clone(&graph);
            thread::spawn(move || graph.new_attached_var(word(1)).unwrap())
        };
        assert_eq!(
            graph.attachment(first),
            None,
            "a stale handle finds no word"
        );
        let second = creator.join().unwrap();
        assert_eq!(second.index(), first.index(), "the slot is reused");
        assert_eq!(graph.attachment(second), Some(word(1)));
    });
}

/// Two threads push a write of `a` and `b` each (in opposite list orders) while nothing runs:
/// whichever op comes first on one var must come first on the other, or each waits for the
/// other there, a deadlock.
///
/// Catches: pushes on several vars that do not hold the push lock while they append
/// (`push_each`): neither op is ever released.
#[test]
fn two_pushes_on_two_shared_vars_are_ordered_alike_on_both() {
    loom::model(|| {
        let graph = Arc::new(G::new());
        let a = graph.new_var().unwrap();
        let b = graph.new_var().unwrap();
        let first = push_on_thread(&graph, &[], &[a, b], 1);
        let second = push_on_thread(&graph, &[], &[b, a], 2);
        let mut released = pushed(first);
        released.extend(pushed(second));
        assert_eq!(
            released.len(),
            1,
            "one write runs, the other waits for it on both vars"
        );
        assert_each_once(drain(&graph, released), &[1, 2]);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}

/// A push of a write of `a` and `b` races `delete_var(b)` while both are idle: the push is
/// either whole and before the deletion (which then waits for the op) or refused with
/// `DeletedVar`, and then `a` holds nothing of it.
///
/// Catches: `delete_var` without the push lock: the push finds `b` live, the deletion reclaims
/// it at once, and the push appends to the reclaimed slot (the debug assertion there fails; and
/// the push succeeds with `b` reclaimed).
#[test]
fn a_push_on_two_vars_races_delete_var_on_the_second() {
    use loom::sync::atomic::{AtomicUsize, Ordering};

    loom::model(|| {
        let graph = Arc::new(G::new());
        let a = graph.new_var().unwrap();
        let b = graph.new_var().unwrap();
        let reclaimed = Arc::new(AtomicUsize::new(0));
        let pusher = push_on_thread(&graph, &[], &[a, b], 1);
        let deleter = {
            let (graph, reclaimed) = (graph.clone(), reclaimed.clone());
            thread::spawn(move || {
                graph
                    .delete_var(b, move || {
                        reclaimed.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap()
                    .call_if_reclaimed();
            })
        };
        let (push_result, released) = pusher.join().unwrap();
        deleter.join().unwrap();
        match push_result {
            Ok(()) => {
                assert_eq!(reclaimed.load(Ordering::SeqCst), 0, "the op holds `b`");
                assert_each_once(drain(&graph, released), &[1]);
            }
            Err(error) => {
                assert_eq!(error, GraphError::DeletedVar { var: b });
                assert!(released.is_empty());
                assert_eq!(
                    graph.var_status(a).unwrap().pending(),
                    0,
                    "`a` holds nothing"
                );
            }
        }
        assert_eq!(reclaimed.load(Ordering::SeqCst), 1);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}

/// Op 3 reads `b` and writes `a`: pushed while writes of both run (ops 1 and 2), it parks at
/// `b`; if op 1 completed meanwhile, `a` grants it at append, and the thread that completes op 2
/// may then take it. Each op that runs touches its vars' data.
///
/// Catches: the pusher's `release_hold` weakened to `Relaxed`: the thread that takes op 3 after
/// the hold is given back does not see op 1's write of `a`'s data (a data race).
#[test]
fn a_var_granted_at_append_hands_its_data_to_the_op() {
    loom::model(|| {
        let (graph, [a, b], (write_a, write_b)) = two_running_writes();
        let data = Arc::new([Data::default(), Data::default()]);
        // Runs op 3 if `released` holds it: reads `b`'s data, writes `a`'s.
        let run = |data: &[Data; 2], released: Vec<ReadyOp<u32>>| {
            if released.iter().any(|op| *op.payload() == 3) {
                data[1].read();
                data[0].write();
            }
            released
        };
        let completer = |op: ReadyOp<u32>, writes: usize| {
            let (graph, data) = (graph.clone(), data.clone());
            thread::spawn(move || {
                data[writes].write();
                let mut released = Vec::new();
                graph.complete(op, Ok(()), &mut released).unwrap();
                run(&data, released)
            })
        };
        let on_a = completer(write_a, 0);
        let on_b = completer(write_b, 1);
        let pusher = {
            let (graph, data) = (graph.clone(), data.clone());
            thread::spawn(move || {
                let mut released = Vec::new();
                graph.push(&[b], &[a], 3, &mut released).unwrap();
                run(&data, released)
            })
        };
        let mut released = on_a.join().unwrap();
        released.extend(on_b.join().unwrap());
        released.extend(pusher.join().unwrap());
        let ids: Vec<u32> = released.iter().map(|op| *op.payload()).collect();
        assert_eq!(ids, [3], "op 3 is released once");
        assert_each_once(drain(&graph, released), &[3]);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}

/// An op slot passes from the thread that takes a parked op out of it, through a push whose op
/// no var holds back (it keeps the slot as the spare, under the push lock), to a push that parks
/// its op there: the parking push's writes must follow the take's reads (loom reports a data
/// race otherwise), and every op runs once.
#[test]
fn a_spare_op_slot_passes_from_push_to_push() {
    loom::model(|| {
        let (graph, [a, b], (write_a, write_b)) = two_running_writes();
        // The vars only ops 3, 4 and 5 write.
        let [out3, out4, also_out4, out5] = [(); 4].map(|()| graph.new_var().unwrap());
        // Op 3 parks behind op 1; its slot is freed when op 1's completion takes it out.
        graph.push(&[a], &[out3], 3, &mut Vec::new()).unwrap();
        let completer = complete_on_thread(&graph, write_a);
        // Op 4 is ready at push, so it leaves the slot it took as the spare.
        let ready_pusher = push_on_thread(&graph, &[], &[out4, also_out4], 4);
        // Op 5 waits behind op 2, so it parks, in the spare slot if op 4 left it.
        let parking_pusher = push_on_thread(&graph, &[], &[b, out5], 5);
        let mut released = completer.join().unwrap();
        released.extend(pushed(ready_pusher));
        released.extend(pushed(parking_pusher));
        released.push(write_b);
        assert_each_once(drain(&graph, released), &[2, 3, 4, 5]);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}

/// A walk of what running ops hold back (`holds_back`) races a push on two vars: op 2 writes
/// `a` and `p`, while op 1 runs holding `p`; another thread pushes op 3, a write of `a`, then
/// walks from `p`. If op 3 waits, it waits behind op 2 on `a`, which waits behind op 1 on `p`:
/// the walk must find it.
///
/// Catches: a walk that does not hold off pushes on several vars: op 2 is on `a` and not yet
/// on `p` when the walk copies `p`'s queue, and the walk misses it (a deadlock the engine's
/// check would not see).
#[test]
fn a_walk_sees_a_push_on_several_vars_whole() {
    use crate::Visit;

    loom::model(|| {
        let graph = Arc::new(G::new());
        let a = graph.new_var().unwrap();
        let p = graph.new_var().unwrap();
        let mut ready = Vec::new();
        graph.push(&[], &[p], 1, &mut ready).unwrap();
        let holder = ready.pop().unwrap();
        let pusher = push_on_thread(&graph, &[], &[a, p], 2);
        let walker = {
            let graph = graph.clone();
            thread::spawn(move || {
                let mut released = Vec::new();
                graph.push(&[], &[a], 3, &mut released).unwrap();
                let found = graph.holds_back(&[p], |_, op| {
                    if *op == 3 {
                        Visit::Found
                    } else {
                        Visit::Continue
                    }
                });
                (released, found.is_some())
            })
        };
        let mut released = pushed(pusher);
        let (released_3, found) = walker.join().unwrap();
        assert_eq!(
            found,
            released_3.is_empty(),
            "op 3 is found if and only if it waits"
        );
        released.extend(released_3);
        released.push(holder);
        assert_each_once(drain(&graph, released), &[1, 2, 3]);
        assert_eq!(graph.stats().live_op_blocks, 0);
    });
}
