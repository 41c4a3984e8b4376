//! Counting pending ops ([`IdleCounter`]) for `wait_for_all` (blocking, or as a future) and for
//! the pending bound that holds back a pusher running too far ahead. (The one-shot
//! `wait_for_var` waits on is `one_shot.rs`.)
//!
//! # `IdleCounter` protocol
//!
//! Two counters, each alone on its cache lines, so that the pushing thread and the completing
//! threads write different lines: `pushed` counts `add()`s (written only by pushes) and
//! `completed` counts `done()`s (written only by completions and, rarely, by waiters, whose
//! mutex and condvar live on the same lines). The `completed` word also carries the `WAITER`
//! bit: `completed = dones * ONE | WAITER?`.
//!
//! Every op's `add()` happens-before its own `done()` (the engine adds before it publishes the
//! op; an op that pushes another adds the child before it completes itself). So a thread that
//! reads `completed` with a read-modify-write (acquire) and *then* loads `pushed` sees, in
//! `pushed`, the `add()` of every op whose `done()` it counted (a `done()` is a release RMW;
//! the RMWs of `completed` continue its release sequence). The ops counted in such a read of
//! `completed` are therefore a subset of the first `pushed` adds; if the two numbers are equal
//! the sets are equal: every op added so far, in particular every op whose `add()`
//! happened-before this thread's read, has completed. That is the only test of idleness. (The
//! opposite order, `pushed` first, could count a later op's completion in place of an earlier
//! pending one and return early; so could a target taken from `pushed` and compared with
//! `completed` alone, since completions of concurrently added ops are counted too.)
//!
//! - `add()`: `pushed += 1` (relaxed: the op's publication orders it before its `done()`).
//! - `done()`: `completed += ONE` (acq-rel RMW). Only if the old value has `WAITER` does it
//!   load `pushed`, and only if that equals the new count (the engine is idle) does it take the
//!   mutex and notify. While a waiter sleeps a completion costs one extra load of `pushed`, a
//!   line nobody writes while the only pusher waits.
//! - `wait_idle()`: holding the mutex, sets `WAITER` with a `fetch_or` (an RMW of `completed`),
//!   then loads `pushed`; returns if they are equal, else sleeps on the condvar (releasing the
//!   mutex atomically) and repeats. The last waiter to leave clears `WAITER`. The timed
//!   variant (`wait_idle_for`, for the stall warnings) leaves the same way when its time is
//!   up, so a waiter that gives up is one that left.
//!
//! No wake-up is lost, with no reliance on `SeqCst`: the waiter's `fetch_or` and every
//! completion's `fetch_add` are RMWs of the same word, hence totally ordered. Take the
//! completion `F` that makes the count equal to the number of ops ever added (the engine is
//! idle, and it is reached whenever the pushes stop). If `F` precedes the waiter's `fetch_or`,
//! the waiter reads that count and then a `pushed` that includes every counted add: equal, it
//! returns. If `F` follows it, `F` sees `WAITER` (cleared only once no waiter is registered),
//! and `F`'s load of `pushed` sees every add (each add happened-before its op's `done()`, each
//! of which precedes `F` in the RMW order of `completed`): equal, so `F` takes the mutex and
//! notifies. The waiter holds the mutex from its `fetch_or` until the condvar releases it as it
//! sleeps; had `F` taken the mutex before that, `F`'s `fetch_add` would happen-before the
//! `fetch_or` and precede it. So `F` gets the mutex only once the waiter sleeps (or has left),
//! and the notification, made after `F` drops the mutex, wakes it. The woken waiter checks
//! again with a new `fetch_or`, which follows `F`, and returns.
//!
//! # Async waiters
//!
//! A future (`wait_for_all_async`) waits as a thread does, with "stores its waker in the list
//! of wakers" for "sleeps on the condvar": `poll_idle`, holding the mutex, sets `WAITER` with
//! the same `fetch_or`, loads `pushed`, and returns `Ready` if they are equal; otherwise it
//! stores its waker (replacing the one of its previous poll) before it drops the mutex. A
//! registered future counts as a waiter until it returns `Ready` or is dropped, whichever
//! comes first, and the last waiter to leave, thread or future, clears `WAITER`. A completion
//! `F` that finds the engine idle takes the mutex, clones the wakers, drops the mutex, then
//! notifies the condvar and wakes each waker (outside the mutex, so a waker that polls inline
//! cannot deadlock on it).
//!
//! The argument above carries over: the poll holds the mutex from its `fetch_or` until its
//! waker is in the list, so `F`, which follows the `fetch_or` in the RMW order of
//! `completed` (else the poll returns `Ready`), sees `WAITER`, gets the mutex only once the
//! waker is stored, and wakes it. A woken future polls again with a new `fetch_or`, which
//! follows `F`, and returns. The model `async_wait_idle_never_misses_the_last_completion` in
//! `loom_tests.rs` checks it; storing the waker in a critical section of its own, after the
//! check, makes it fail.
//!
//! Semantics: `wait_idle` returns at a moment when every op added so far has completed — so
//! every op whose `add()` happened-before the call, and every op those ops pushed before
//! completing, has completed, and their effects happen-before the return. Ops added
//! concurrently with the wait are waited for too whenever they are counted before that moment;
//! other threads that keep pushing without the engine ever becoming idle delay the return
//! indefinitely (as with the single counter before the split). `Handle::drop` relies on the
//! children clause: no `Engine` clone is left, so only running ops can still push, and a
//! running op is pending, so at the idle moment nothing runs and nothing can be pushed any
//! more (a push that finds the engine shut down adds and completes at once). The loom
//! models in `loom_tests.rs` check this.
//!
//! # The pending bound (backpressure)
//!
//! With a bound (`EngineConfig::max_pending`), a push that would make more than `max` ops
//! pending is held back (`wait/throttle.rs`): it withdraws its op (a `done()` of the op it
//! added, which was never published) and waits until at most `low = max / 2` ops are pending,
//! then adds it again. The pusher may then run ahead by `max - low` ops before it can be held
//! back again, so a pusher that runs ahead sleeps and is woken once per `max - low` ops, not
//! once per op; and a held-back push does not count itself, so a bound of 1 works too.
//!
//! - **The check costs the push nothing it did not pay before.** Beside `pushed`, on the
//!   pusher's line, `limit` is the push count up to which pushes need not look at the
//!   completions: the completions last seen plus `max` (`usize::MAX` without a bound). A push
//!   whose count is at most `limit` is admitted: at least that many ops had completed, so at
//!   most `max` are pending. Only past it does the push read `completed` (the completers'
//!   line) and either move `limit` on or report the bound reached. Every value `limit` ever
//!   holds was right when it was computed and completions only grow, so any value a push
//!   reads is safe; a stale one only sends a push to the slow path early. Concurrent pushers
//!   can each be admitted at once, so the bound holds up to one op per pushing thread (and
//!   the ops that running ops push, which are never held back). The one exception is
//!   deliberate: the allowance below.
//! - `wait_below_for()`: as `wait_idle_for`, with the `THROTTLED` bit and its own condvar, and
//!   "at most `low` pending" for "none pending". A completion that finds `THROTTLED` set loads
//!   `pushed`; if the ops pending are now at most `low`, it clears `THROTTLED` and notifies
//!   under the mutex, so a crossing costs one notification, not one per completion until the
//!   pusher runs. No wake-up is lost, by the argument above: the completion `F` after which
//!   at most `low` ops are pending either precedes the waiter's `fetch_or` (the waiter then
//!   reads a count that includes `F`, and a `pushed` that is at most the true one: it finds
//!   at most `low` and returns) or follows it and sees `THROTTLED` (cleared only by a
//!   notification, which woke the waiter, or by the last throttled waiter leaving): `F`'s
//!   `pushed` is at most the true one too, so it finds at most `low` and notifies, after the
//!   waiter sleeps (the mutex). A stale `pushed` errs only towards waking the pusher early;
//!   it then checks again, and sleeps with `THROTTLED` set again if need be. A notification
//!   that came because of a stale `pushed` wakes a waiter that finds more than `low` ops
//!   pending: one is still to complete, and its completion checks again.
//! - **The allowance.** A held-back push that saw the ops make no progress for the bound's
//!   patience (`throttle.rs`: the ops may wait for something the pushing thread holds) calls
//!   `allow_more()`, which moves `limit` to `max` past the pushes counted so far: the next `max`
//!   pushes are admitted whatever is pending, and past them the slow path holds pushes back
//!   again. A pusher whose ops wait for it thus goes on, held back once per `max` pushes for
//!   one patience, and the ops pending grow by at most `max` per patience of such a stall. A
//!   `fetch_max`, as `raise_limit`'s, so neither undoes the other; `Relaxed`: `limit` stays a
//!   hint, read by the thread that moved it (or, by another pusher, late at worst: that push
//!   takes the slow path and is held back, as before the allowance).

use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use depengine_sync::{
    AtomicUsize, CachePadded, Condvar, Mutex, Ordering, lock, wait, wait_timeout,
};

/// The idle-waiter bit of `IdleCounter::completed`.
const WAITER: usize = 1;
/// The throttled-pusher bit of `IdleCounter::completed`.
const THROTTLED: usize = 2;
/// One completed op in `IdleCounter::completed`.
const ONE: usize = 4;

/// How many ops may be pending before a push is held back, how few must be left before it
/// goes on, and how long it waits while the ops make no progress (see the module
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PendingBound {
    max: usize,
    low: usize,
    patience: Option<Duration>,
}

impl PendingBound {
    /// At most `max` ops pending (`max > 0`); a held-back push goes on once at most `max / 2`
    /// are, or, with a `patience`, once the ops made no progress for that long (`throttle.rs`).
    pub(crate) fn new(max: usize, patience: Option<Duration>) -> Self {
        debug_assert!(max > 0, "a bound of 0 would hold back every push");
        PendingBound {
            max,
            low: max / 2,
            patience,
        }
    }
}

/// Whether a push may go ahead (see [`IdleCounter::add`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub(crate) enum Admission {
    Admitted,
    /// More ops than the bound are pending: the pusher should wait (`wait_below_for`) unless
    /// it must not block.
    OverBound,
}

/// Counts pending ops; lets threads wait until none is left, and pushers until few are.
pub(crate) struct IdleCounter {
    /// Written only by `add` (and, past `limit`, by the push that moves it on): the pusher's
    /// line.
    pushed: CachePadded<Pushes>,
    /// The completers' line: written by every `done`, and by waiters registering or leaving
    /// (rare). Keeping the mutex and condvars here, not on a third pair of lines, keeps the
    /// counter as large as the single word it replaced (two pairs of lines).
    completed: CachePadded<Completions>,
    bound: Option<PendingBound>,
}

/// `IdleCounter`'s push side.
struct Pushes {
    /// Ops added, ever (wrapping is out of reach of a `usize` of 64 bits).
    count: AtomicUsize,
    /// The push count up to which a push is admitted without looking at `completed`
    /// (`usize::MAX` without a bound; see the module documentation).
    limit: AtomicUsize,
}

/// `IdleCounter`'s completion side.
struct Completions {
    /// `ops completed, ever * ONE | THROTTLED? | WAITER?`.
    count: AtomicUsize,
    /// Threads inside `wait_idle_for` and `wait_below_for`, and futures inside `poll_idle`.
    waiters: Mutex<Waiters>,
    idle: Condvar,
    /// Where held-back pushers sleep.
    below: Condvar,
}

/// The threads and futures waiting on an `IdleCounter`, by what they wait for.
#[derive(Default)]
struct Waiters {
    /// Threads waiting for the engine to be idle.
    idle: usize,
    throttled: usize,
    /// Futures waiting for the engine to be idle: the waker of each one's latest poll, by key.
    /// Few at a time (one per `wait_for_all_async` awaited), so a list searched by key.
    wakers: Vec<(u64, Waker)>,
    /// The key of the next future to register.
    next_key: u64,
}

impl Waiters {
    /// Whether no thread or future waits for the engine to be idle: `WAITER` may be cleared.
    fn no_idle_waiter(&self) -> bool {
        self.idle == 0 && self.wakers.is_empty()
    }

    /// Removes the future registered as `key`.
    fn forget(&mut self, key: u64) {
        if let Some(at) = self
            .wakers
            .iter()
            .position(|(registered, _)| *registered == key)
        {
            self.wakers.swap_remove(at);
        }
    }
}

/// A future's registration as an idle waiter of an [`IdleCounter`] (see `poll_idle`): `None`
/// until its first `Pending`, and again once it returned `Ready`.
#[derive(Default)]
pub(crate) struct IdleWaiter(Option<u64>);

impl IdleCounter {
    /// A counter without a bound.
    #[cfg(all(test, loom))]
    pub(crate) fn new() -> Self {
        Self::with_bound(None)
    }

    /// A counter whose pushes are held back past `bound` (none: never).
    pub(crate) fn with_bound(bound: Option<PendingBound>) -> Self {
        IdleCounter {
            pushed: CachePadded::new(Pushes {
                count: AtomicUsize::new(0),
                limit: AtomicUsize::new(bound.map_or(usize::MAX, |bound| bound.max)),
            }),
            completed: CachePadded::new(Completions {
                count: AtomicUsize::new(0),
                waiters: Mutex::new(Waiters::default()),
                idle: Condvar::new(),
                below: Condvar::new(),
            }),
            bound,
        }
    }

    /// One more pending op; [`Admission::OverBound`] if more than the bound are pending now.
    /// The op counts as pending either way: the caller goes on with its push, or withdraws the
    /// op (`done`) before it waits (`wait_below_for`) and adds it again.
    #[inline]
    pub(crate) fn add(&self) -> Admission {
        // Relaxed: whoever counts this op's `done()` sees this add through the op's own
        // release/acquire chain (add, publish, run, `done`), and a later reader of `pushed` on
        // this thread sees it by coherence.
        let pushed = self.pushed.count.fetch_add(1, Ordering::Relaxed) + 1;
        // Relaxed: `limit` is a hint that only decides when to look at the completions; every
        // value it ever holds is safe to act on (see the module documentation).
        if pushed <= self.pushed.limit.load(Ordering::Relaxed) {
            Admission::Admitted
        } else {
            self.admit()
        }
    }

    /// `add` past `limit`: looks at the completions, and moves `limit` on if the bound allows.
    #[cold]
    fn admit(&self) -> Admission {
        let Some(bound) = self.bound else {
            return Admission::Admitted;
        };
        let (pushed, completed) = self.counts();
        if pushed - completed <= bound.max {
            self.raise_limit(completed, bound);
            Admission::Admitted
        } else {
            Admission::OverBound
        }
    }

    /// Lets pushes through without a look until `completed + max` (Relaxed: see `add`).
    fn raise_limit(&self, completed: usize, bound: PendingBound) {
        self.pushed
            .limit
            .fetch_max(completed.saturating_add(bound.max), Ordering::Relaxed);
    }

    /// How long a held-back push waits while the ops make no progress (`None`: as long as it
    /// takes; also without a bound).
    pub(crate) fn patience(&self) -> Option<Duration> {
        self.bound.and_then(|bound| bound.patience)
    }

    /// Admits the next `max` pushes whatever is pending: for a held-back push that saw the
    /// ops make no progress for the bound's patience (they may wait for something its thread
    /// holds). Past them the bound holds again.
    #[cold]
    pub(crate) fn allow_more(&self) {
        let Some(bound) = self.bound else {
            return;
        };
        // Relaxed, and `fetch_max`, as `raise_limit`: a hint that only ever grows. This value
        // is the one that is not a valid limit (see the module documentation).
        let pushed = self.pushed.count.load(Ordering::Relaxed);
        self.pushed
            .limit
            .fetch_max(pushed.saturating_add(bound.max), Ordering::Relaxed);
    }

    /// One pending op completed; wakes the waiters if the engine is now idle, and held-back
    /// pushers if few enough ops are pending. Whether it woke threads waiting for the engine
    /// to be idle (the engine was idle then).
    #[inline]
    pub(crate) fn done(&self) -> bool {
        // Release: the op's effects (and the adds of the ops it pushed) happen-before whoever
        // reads this count or a later one (a waiter, or a later completer that checks
        // `pushed`). Acquire: if `WAITER` is set, the adds counted by every earlier `done`
        // happen-before the `pushed` load in `wake`.
        let old = self.completed.count.fetch_add(ONE, Ordering::AcqRel);
        old & (WAITER | THROTTLED) != 0 && self.wake(old)
    }

    /// `done` found waiters registered (`old`: the count before it); whether it woke idle
    /// waiters.
    #[cold]
    fn wake(&self, old: usize) -> bool {
        // Relaxed: the acquire in `done` makes every add this comparison depends on
        // happen-before this load (see the module docs); a stale value only means "not
        // idle yet", and then a later completion is the one that finds it idle (for the
        // held-back pushers, a stale value errs towards waking them, see the module docs).
        let pending = self
            .pushed
            .count
            .load(Ordering::Relaxed)
            .saturating_sub(old / ONE + 1);
        let idle = old & WAITER != 0 && pending == 0;
        if idle {
            // Taking the mutex waits until a waiter that registered is asleep on the
            // condvar, or has stored its waker, so the notification cannot fall between its
            // check and its sleep. The wakers are woken after the mutex is dropped.
            let waiters = lock(&self.completed.waiters);
            let wakers: Vec<Waker> = waiters
                .wakers
                .iter()
                .map(|(_, waker)| waker.clone())
                .collect();
            drop(waiters);
            self.completed.idle.notify_all();
            for waker in wakers {
                waker.wake();
            }
        }
        if old & THROTTLED != 0 && self.bound.is_some_and(|bound| pending <= bound.low) {
            // Under the mutex, as above; clearing the bit leaves this crossing to this one
            // notification (a pusher that sleeps again sets it again first). Relaxed: the
            // bit only asks completions to look; the mutex orders the rest.
            let waiters = lock(&self.completed.waiters);
            self.completed
                .count
                .fetch_and(!THROTTLED, Ordering::Relaxed);
            drop(waiters);
            self.completed.below.notify_all();
        }
        idle
    }

    /// `(pushed, completed)` for a comparison: `completed` first, with acquire, so that the
    /// adds of the ops it counts happen-before the `pushed` load, which is therefore at least
    /// as large.
    fn counts(&self) -> (usize, usize) {
        let completed = self.completed.count.load(Ordering::Acquire) / ONE;
        let pushed = self.pushed.count.load(Ordering::Relaxed);
        // The models check the claim itself, which the callers' arithmetic relies on.
        #[cfg(loom)]
        assert!(pushed >= completed, "more completions seen than adds");
        (pushed.max(completed), completed)
    }

    /// Ops pushed and not completed: exact when quiescent. While ops are pushed or complete
    /// concurrently it may over-count (ops pushed, or completed, between the two loads) but
    /// never underflows.
    pub(crate) fn pending(&self) -> usize {
        let (pushed, completed) = self.counts();
        pushed - completed
    }

    /// Ops completed so far: it only grows, so a change is progress.
    pub(crate) fn completed(&self) -> usize {
        self.counts().1
    }

    /// The bound pushes are held back at, if any.
    pub(crate) fn bound(&self) -> Option<usize> {
        self.bound.map(|bound| bound.max)
    }

    /// Blocks until every op added so far has completed (see the module docs for the exact
    /// semantics with concurrent pushes). The engine calls `wait_idle_for` (`stall.rs`); the
    /// models call this.
    #[cfg(all(test, loom))]
    pub(crate) fn wait_idle(&self) {
        self.wait_idle_for(None);
    }

    /// As `wait_idle`, giving up after about `timeout` (`None`: never): whether the engine
    /// was found idle. A waiter that gives up leaves as one that returns does.
    pub(crate) fn wait_idle_for(&self, timeout: Option<Duration>) -> bool {
        // A timeout too long to add to the clock waits without a deadline.
        let deadline = timeout.and_then(|timeout| Instant::now().checked_add(timeout));
        let mut waiters = lock(&self.completed.waiters);
        waiters.idle += 1;
        let idle = loop {
            // An RMW, not a load: it is ordered with every completion's `fetch_add` (the
            // handshake). Acquire: the adds of the counted ops, and the ops' effects,
            // happen-before what follows (the return included). No release is needed: a
            // completer needs only the bit's value, and the mutex orders its notification.
            let completed = self.completed.count.fetch_or(WAITER, Ordering::Acquire) / ONE;
            // Loaded after the RMW (see the module docs for why not before). Relaxed: the
            // adds it must see happen-before it, either because they happened-before the call
            // or through the acquire above (the adds of the ops it counted).
            if self.pushed.count.load(Ordering::Relaxed) == completed {
                break true;
            }
            match deadline {
                None => waiters = wait(&self.completed.idle, waiters),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break false;
                    }
                    waiters = wait_timeout(&self.completed.idle, waiters, deadline - now).0;
                }
            }
        };
        waiters.idle -= 1;
        self.leave_idle(&waiters);
        idle
    }

    /// An idle waiter left: clears `WAITER` if it was the last.
    fn leave_idle(&self, waiters: &Waiters) {
        if waiters.no_idle_waiter() {
            // Under the mutex, so no waiter registers in between. Relaxed: it only stops
            // completions from checking `pushed`; a completion that still sees the bit
            // notifies nobody in particular.
            self.completed.count.fetch_and(!WAITER, Ordering::Relaxed);
        }
    }

    /// The future's `wait_idle`: `Ready` once every op added so far has completed (the same
    /// check as `wait_idle_for`); otherwise stores `cx`'s waker, registering `waiter` as an
    /// idle waiter until it returns `Ready` or is dropped ([`forget_idle`](Self::forget_idle)).
    /// See "Async waiters" in the module docs.
    pub(crate) fn poll_idle(&self, waiter: &mut IdleWaiter, cx: &mut Context<'_>) -> Poll<()> {
        let mut waiters = lock(&self.completed.waiters);
        // As in `wait_idle_for`: an RMW ordered with every completion's `fetch_add`, acquire.
        let completed = self.completed.count.fetch_or(WAITER, Ordering::Acquire) / ONE;
        // Relaxed, after the RMW: as in `wait_idle_for`.
        if self.pushed.count.load(Ordering::Relaxed) == completed {
            if let Some(key) = waiter.0.take() {
                waiters.forget(key);
            }
            self.leave_idle(&waiters);
            return Poll::Ready(());
        }
        // Stored before the mutex is dropped: the completion that finds the engine idle
        // wakes it (see the module docs).
        let key = *waiter.0.get_or_insert_with(|| {
            let key = waiters.next_key;
            waiters.next_key += 1;
            key
        });
        match waiters.wakers.iter_mut().find(|(at, _)| *at == key) {
            // Replaces the waker of the previous poll, unless it wakes the same task.
            Some((_, waker)) => waker.clone_from(cx.waker()),
            None => waiters.wakers.push((key, cx.waker().clone())),
        }
        Poll::Pending
    }

    /// Whether `WAITER` is set (the models check that the last waiter to leave clears it).
    #[cfg(all(test, loom))]
    pub(crate) fn has_idle_waiter(&self) -> bool {
        self.completed.count.load(Ordering::Relaxed) & WAITER != 0
    }

    /// A future waiting in `poll_idle` was dropped: unregisters it.
    pub(crate) fn forget_idle(&self, waiter: &mut IdleWaiter) {
        if let Some(key) = waiter.0.take() {
            let mut waiters = lock(&self.completed.waiters);
            waiters.forget(key);
            self.leave_idle(&waiters);
        }
    }

    /// For a push that `add` found over the bound, and that withdrew its op: blocks until at
    /// most the bound's low-water mark of ops are pending, giving up after about `timeout` (`None`: never); whether it got
    /// there. Without a bound, returns `true` at once.
    pub(crate) fn wait_below_for(&self, timeout: Option<Duration>) -> bool {
        let Some(bound) = self.bound else {
            return true;
        };
        // A timeout too long to add to the clock waits without a deadline.
        let deadline = timeout.and_then(|timeout| Instant::now().checked_add(timeout));
        let mut waiters = lock(&self.completed.waiters);
        waiters.throttled += 1;
        let below = loop {
            // As in `wait_idle_for`: an RMW ordered with every completion's `fetch_add`.
            // Acquire: the adds of the ops it counts happen-before the `pushed` load, which
            // therefore does not fall below the count (checked under loom).
            let completed = self.completed.count.fetch_or(THROTTLED, Ordering::Acquire) / ONE;
            let pushed = self.pushed.count.load(Ordering::Relaxed);
            #[cfg(loom)]
            assert!(pushed >= completed, "more completions seen than adds");
            if pushed.saturating_sub(completed) <= bound.low {
                self.raise_limit(completed, bound);
                break true;
            }
            match deadline {
                None => waiters = wait(&self.completed.below, waiters),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break false;
                    }
                    waiters = wait_timeout(&self.completed.below, waiters, deadline - now).0;
                }
            }
        };
        waiters.throttled -= 1;
        if waiters.throttled == 0 {
            // As for `WAITER`: under the mutex, Relaxed.
            self.completed
                .count
                .fetch_and(!THROTTLED, Ordering::Relaxed);
        }
        below
    }
}
