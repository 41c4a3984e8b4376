//! Loom models of the facade's own synchronization: the completion counter that
//! `wait_for_all` and pushers held back by the pending bound sleep on, the latch
//! `wait_for_var` blocks on, or abandons (`wait.rs`),
//! and the ready queue's drainer protocol behind `QueuedBlock` (`ready_queue.rs`).
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p depengine
//! --lib --tests` (or `cargo xtask loom`).
//!
//! Each op's "effect" is a relaxed store to a flag before its `done()`: a waiter that returns
//! must see it, which checks both that it did not return early and that the op's effects
//! happen-before the return.

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use crate::route::ready_queue::{ReadyQueue, Retire, Submit, sample_next_submit};
use crate::wait::idle::{Admission, IdleCounter, Latch, PendingBound};

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

/// Two ops complete on two threads while a third waits for all: the waiter always wakes, and
/// only once both completed.
///
/// Catches: `done`'s release (its `AcqRel` weakened to `Acquire`) and the waiter's acquire
/// (`fetch_or` `Relaxed`): the waiter returns without seeing an op's effect.
#[test]
fn wait_idle_never_misses_the_last_completion() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        let effects = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let _ = counter.add();
        let _ = counter.add();
        let completers: Vec<_> = (0..2)
            .map(|op| {
                let counter = Arc::clone(&counter);
                let effects = Arc::clone(&effects);
                thread::spawn(move || complete(&counter, &effects[op]))
            })
            .collect();
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
        let counter = Arc::new(IdleCounter::with_bound(Some(PendingBound::new(2))));
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
        // `throttle::admit`, without the thread context.
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
        let counter = Arc::new(IdleCounter::with_bound(Some(PendingBound::new(1))));
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

/// The latch hands its value over whether it is set before or after the wait begins.
///
/// Catches no ordering: the latch is a mutex and a condvar, with no atomics of its own.
#[test]
fn latch_hands_over_its_value() {
    loom::model(|| {
        let latch = Arc::new(Latch::new());
        let setter = {
            let latch = Arc::clone(&latch);
            thread::spawn(move || latch.set(7_u32))
        };
        assert_eq!(latch.wait(), 7);
        setter.join().unwrap();
    });
}

/// A waiter that abandons the latch races the setter's claim: either the waiter gave up and
/// the setter's side effect (taking the var's failure) never happens, or the setter claimed
/// first, and the waiter, refused, gets the value.
///
/// Catches no ordering: the latch is a mutex and a condvar, with no atomics of its own.
#[test]
fn latch_abandon_and_claim_exclude_each_other() {
    loom::model(|| {
        let latch = Arc::new(Latch::new());
        let taken = Arc::new(AtomicBool::new(false));
        let setter = {
            let (latch, taken) = (Arc::clone(&latch), Arc::clone(&taken));
            thread::spawn(move || {
                if latch.claim() {
                    taken.store(true, Ordering::Relaxed);
                }
                latch.set(7_u32);
            })
        };
        if latch.abandon() {
            setter.join().unwrap();
            assert!(!taken.load(Ordering::Relaxed));
            assert!(!latch.is_set());
        } else {
            assert_eq!(latch.wait(), 7);
            setter.join().unwrap();
            assert!(taken.load(Ordering::Relaxed));
        }
    });
}

/// A ready-queue model: the queue, and how many times each item was popped (or run inline).
struct Drained {
    queue: ReadyQueue<usize>,
    max_drainers: usize,
    runs: Vec<AtomicUsize>,
    /// Helper drainers that drainers started, for joining (bookkeeping only, not part of the
    /// modelled protocol: a std mutex, held for a push or a pop).
    helpers: std::sync::Mutex<Vec<thread::JoinHandle<()>>>,
    /// Every item but the last waits for the last to run (see `run_meeting`).
    meet: bool,
    /// Whether the last item ran, for `meet`: its runner sets it and wakes the others.
    last_ran: Mutex<bool>,
    last_ran_cv: Condvar,
}

impl Drained {
    fn new(max_drainers: usize, items: usize) -> Arc<Self> {
        Self::with(max_drainers, usize::MAX, items, false)
    }

    /// `items` items, each but the last waiting for the last (see `run_meeting`).
    fn meeting(max_drainers: usize, items: usize) -> Arc<Self> {
        Self::with(max_drainers, usize::MAX, items, true)
    }

    fn with(max_drainers: usize, backlog: usize, items: usize, meet: bool) -> Arc<Self> {
        Arc::new(Drained {
            queue: ReadyQueue::new(max_drainers, backlog),
            max_drainers,
            runs: (0..items).map(|_| AtomicUsize::new(0)).collect(),
            helpers: std::sync::Mutex::new(Vec::new()),
            meet,
            last_ran: Mutex::new(false),
            last_ran_cv: Condvar::new(),
        })
    }

    fn run(&self, item: usize) {
        self.runs[item].fetch_add(1, Ordering::Relaxed);
    }

    /// As `run`; with `meet`, every item but the last is a long op: it returns only once
    /// the last item has run, which only another drainer can do meanwhile. A model where the
    /// last item waits behind a long one deadlocks (loom fails it).
    ///
    /// The long op blocks on a condvar rather than spinning: the queue's steal spins while a
    /// push is between claiming its slot and writing it, and two threads spinning at once can
    /// starve the pushing thread under loom (its scheduler may hand the turn back and forth
    /// between the spinners forever). The mutex orders the last item's run before the long
    /// op's return only: both items were popped by then.
    fn run_meeting(&self, item: usize) {
        self.run(item);
        if !self.meet {
            return;
        }
        let mut last_ran = self.last_ran.lock().unwrap();
        if item == self.runs.len() - 1 {
            *last_ran = true;
            self.last_ran_cv.notify_all();
        } else {
            while !*last_ran {
                last_ran = self.last_ran_cv.wait(last_ran).unwrap();
            }
        }
    }

    /// An enlisted drainer, as `Inner::drain` is: pops until the queue is empty, then retires,
    /// and goes on while `retire` says it stays enlisted, starting the helper it may enlist.
    ///
    /// Yields first: a spawned thread whose first access is a load followed by a
    /// compare-exchange (a pop) is otherwise never run before its spawner goes on
    /// (tokio-rs/loom#392), and the models would miss the schedules where it goes first.
    fn drain(model: &Arc<Self>) {
        thread::yield_now();
        loop {
            while let Some(item) = model.queue.pop() {
                model.run_meeting(item);
            }
            match model.queue.retire() {
                Retire::Retired => break,
                Retire::Stay { helpers } => {
                    // A drainer that stays may be slow to pop again: let the other threads
                    // run here. Loom explores schedules from conflicting accesses, not from
                    // fences, so without this point no schedule puts a submit between a
                    // spinner's count of the items and the next fence it issues (in its pop),
                    // the window a missing fence after the count leaves open.
                    thread::yield_now();
                    assert!(model.queue.drainers() <= model.max_drainers);
                    for _ in 0..helpers {
                        let helper = {
                            let model = Arc::clone(model);
                            thread::spawn(move || Drained::drain(&model))
                        };
                        model.helpers.lock().unwrap().push(helper);
                    }
                }
            }
        }
    }

    /// Submits `item`, sampling the queue length or not (`sampled`); starts a drainer thread
    /// if the queue enlisted one (as `QueuedBlock` spawns a pool task). Returns that drainer,
    /// for joining.
    fn submit(model: &Arc<Self>, item: usize, sampled: bool) -> Option<thread::JoinHandle<()>> {
        Self::submit_as(model, item, sampled, false)
    }

    /// As `submit`, from one of the queue's drainers (`drainer`) or not.
    fn submit_as(
        model: &Arc<Self>,
        item: usize,
        sampled: bool,
        drainer: bool,
    ) -> Option<thread::JoinHandle<()>> {
        sample_next_submit(sampled);
        match model.queue.submit(item, drainer) {
            Submit::Queued { enlist } => {
                assert!(model.queue.drainers() <= model.max_drainers);
                enlist.then(|| {
                    let model = Arc::clone(model);
                    thread::spawn(move || Drained::drain(&model))
                })
            }
            Submit::RunInline(item) => {
                assert!(drainer, "only a drainer gets an item handed back");
                model.run(item);
                None
            }
        }
    }

    /// Once every thread is joined: each item ran exactly once, nothing is left queued, and
    /// every drainer retired.
    fn check(&self) {
        loop {
            let helper = self.helpers.lock().unwrap().pop();
            match helper {
                Some(helper) => helper.join().unwrap(),
                None => break,
            }
        }
        for (item, runs) in self.runs.iter().enumerate() {
            assert_eq!(
                runs.load(Ordering::Relaxed),
                1,
                "item {item} ran that many times"
            );
        }
        assert!(self.queue.is_empty(), "an item was stranded in the queue");
        assert_eq!(self.queue.drainers(), 0, "a drainer never retired");
    }
}

fn join(drainers: impl IntoIterator<Item = Option<thread::JoinHandle<()>>>) {
    for drainer in drainers.into_iter().flatten() {
        drainer.join().unwrap();
    }
}

/// A drainer (this thread) that finds the queue empty retires while a submitter queues an
/// item: either the submitter sees the retirement and enlists a drainer, or the retiring
/// drainer sees the item and stays enlisted. Up to two drainers; `sampled`: the submit samples
/// the queue length, so it may also enlist a second drainer.
///
/// Catches: the submit's fence and the retire's fence (either removed): the submitter reads
/// the count from before the decrement and the drainer's re-check misses the push, so the
/// item is never run ("item 0 ran that many times", 0).
fn retire_races_a_submit(sampled: bool) {
    loom::model(move || {
        let model = Drained::new(2, 1);
        assert!(model.queue.try_enlist());
        let submitter = {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                // As in `drain` (a push loads the tail, then swaps it): tokio-rs/loom#392.
                thread::yield_now();
                Drained::submit(&model, 0, sampled)
            })
        };
        Drained::drain(&model);
        let spawned = submitter.join().unwrap();
        join([spawned]);
        model.check();
    });
}

#[test]
fn ready_queue_retire_races_a_submit() {
    retire_races_a_submit(false);
}

#[test]
fn ready_queue_retire_races_a_sampled_submit() {
    retire_races_a_submit(true);
}

/// Two submitters, one drainer at most, none enlisted at first: each item is run exactly once,
/// the count never passes one, and the drainers enlisted all retire.
///
/// Catches no ordering of its own (the retire races above catch the fences); it checks the
/// bound on `drainers`.
#[test]
fn ready_queue_two_submitters_one_drainer() {
    loom::model(|| {
        let model = Drained::new(1, 2);
        let other = {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                // As in `drain`: tokio-rs/loom#392.
                thread::yield_now();
                Drained::submit(&model, 1, false)
            })
        };
        let spawned = Drained::submit(&model, 0, false);
        let other_spawned = other.join().unwrap();
        join([spawned, other_spawned]);
        model.check();
    });
}

/// Two enlisted drainers retire at once (one may spin, the other retires at once) while an
/// item is submitted: the `spinning` flag lets at most one spin, and the item is not stranded
/// whichever of them sees it.
///
/// Catches no fence with the preemption bound of `cargo xtask loom`; it checks the
/// one-spinner rule and the bound on `drainers`.
#[test]
fn ready_queue_two_drainers_retire_at_once() {
    loom::model(|| {
        let model = Drained::new(2, 1);
        assert!(model.queue.try_enlist());
        assert!(model.queue.try_enlist());
        let drainers: Vec<_> = (0..2)
            .map(|_| {
                let model = Arc::clone(&model);
                thread::spawn(move || Drained::drain(&model))
            })
            .collect();
        let spawned = Drained::submit(&model, 0, false);
        for drainer in drainers {
            drainer.join().unwrap();
        }
        join([spawned]);
        model.check();
    });
}

/// A stand-in (`stand_in.rs`) pops items without being enlisted while an enlisted drainer
/// retires and a submitter queues the next item: every item runs exactly once, none is
/// stranded, and every enlisted drainer retires.
///
/// Catches: the submit's fence and the retire's fence (either removed): an item is stranded.
#[test]
fn ready_queue_a_stand_in_only_pops() {
    loom::model(|| {
        let model = Drained::new(1, 2);
        let first = Drained::submit(&model, 0, false);
        let stand_in = {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                // As in `drain`: tokio-rs/loom#392.
                thread::yield_now();
                while let Some(item) = model.queue.pop() {
                    model.run(item);
                }
            })
        };
        let second = Drained::submit(&model, 1, false);
        stand_in.join().unwrap();
        join([first, second]);
        model.check();
    });
}

/// Submits items 0 and 1 (unsampled), then joins `drainer` and every drainer started, and
/// checks the model.
fn submit_two_then_check(model: &Arc<Drained>, drainer: thread::JoinHandle<()>) {
    let first = Drained::submit(model, 0, false);
    let second = Drained::submit(model, 1, false);
    drainer.join().unwrap();
    join([first, second]);
    model.check();
}

/// A spinning drainer takes an item while a second one is submitted, or just after: the
/// submit sees the spinner (and counts on it) or sees it gone (and enlists a drainer itself),
/// and a spinner that finds more than it takes enlists helpers. Item 0 is long (it waits for
/// item 1): in no interleaving may item 1 wait behind it while a second drainer could run it.
/// Each item runs once, the drainers never outnumber the maximum, and all of them retire.
///
/// Catches: the submit's fence (removed): the submit of item 1 reads `spinning` from before
/// the spinner cleared it while the spinner's count misses item 1, which then waits behind
/// item 0 (loom: deadlock).
#[test]
fn ready_queue_spinner_takes_an_item_while_another_is_submitted() {
    loom::model(|| {
        let model = Drained::meeting(2, 2);
        assert!(model.queue.try_enlist());
        let spinner = {
            let model = Arc::clone(&model);
            thread::spawn(move || Drained::drain(&model))
        };
        submit_two_then_check(&model, spinner);
    });
}

/// A spinner whose look finds the queue empty while items arrive before it stops spinning:
/// the submits see it spinning and enlist nobody, so the spinner, staying for them, must
/// enlist a helper for the second. The first item is long (it waits for the second).
///
/// Catches: the fence after a spinner that found items clears `spinning`, and the retire's
/// fence (which follows the clearing when it found none), either removed: the second submit
/// reads `spinning` still set while the spinner's count misses the second item, which then
/// waits behind the first (loom: deadlock).
#[test]
fn ready_queue_spinner_that_found_nothing_still_spreads_what_came() {
    loom::model(|| {
        let model = Drained::meeting(2, 2);
        assert!(model.queue.try_enlist());
        let spinner_done = Arc::new(AtomicBool::new(false));
        let spinner = {
            let (model, spinner_done) = (Arc::clone(&model), Arc::clone(&spinner_done));
            thread::spawn(move || {
                Drained::drain(&model);
                spinner_done.store(true, Ordering::SeqCst);
            })
        };
        // Submit while the drainer spins (or once it is gone).
        while !model.queue.is_spinning() && !spinner_done.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        submit_two_then_check(&model, spinner);
    });
}

/// The backlog (one item here): a drainer's submit that samples the queue while an item is
/// still queued gets its item handed back and runs it itself, one that samples it empty queues
/// it; another thread's submit always queues (`submit_as` checks). Either way each item runs
/// once.
///
/// Catches no ordering: it checks the backlog rule.
#[test]
fn ready_queue_hands_back_over_the_backlog_to_drainers_only() {
    loom::model(|| {
        let model = Drained::with(1, 1, 3, false);
        let first = Drained::submit(&model, 0, false);
        assert!(
            first.is_some(),
            "the first submit enlists the first drainer"
        );
        let second = Drained::submit_as(&model, 1, true, true);
        let third = Drained::submit_as(&model, 2, true, false);
        join([first, second, third]);
        model.check();
    });
}
