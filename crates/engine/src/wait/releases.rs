//! [`Releases`]: the values' releases running now (the callbacks of vars that completions
//! reclaimed: a typed value's drop, a `delete_var` callback), so that `wait_for_all` returns
//! once the values whose ops it waited for are dropped.
//!
//! A release runs after its op is counted done (`run/dispatch.rs`), so the pending count alone
//! would let `wait_for_all` return while a value is still being dropped. The completion counts
//! the release in here when the graph hands it over, before it counts the op done: a waiter
//! that acquires the idle count (`idle.rs`) and then locks this count sees it (the increment
//! is sequenced before the op's `Release` decrement, and the lock after the waiter's
//! `Acquire`). A release that waits for every op itself waits for the ops only: a release
//! never waits for releases, so no two of them wait for each other.
//!
//! Threads: completers count releases in and out; `wait_for_all`'s callers (blocking, or
//! polling a future) wait for none to run.

use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use depengine_sync::{Condvar, Mutex, lock, wait, wait_timeout};

/// The releases running now; see the module documentation.
#[derive(Default)]
pub(crate) struct Releases {
    running: Mutex<Running>,
    /// Notified when the count drops to zero.
    none: Condvar,
}

#[derive(Default)]
struct Running {
    count: usize,
    /// Futures waiting for the count to drop to zero.
    wakers: Vec<Waker>,
}

impl Releases {
    /// A completion took a release over (before it counts its op done).
    pub(crate) fn begin(&self) {
        lock(&self.running).count += 1;
    }

    /// A release ended.
    pub(crate) fn end(&self) {
        let wakers = {
            let mut running = lock(&self.running);
            running.count -= 1;
            if running.count > 0 {
                return;
            }
            std::mem::take(&mut running.wakers)
        };
        self.none.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Blocks for about `timeout` at most (`None`: no limit) until no release runs: whether
    /// none does.
    pub(crate) fn wait_none_for(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.and_then(|timeout| Instant::now().checked_add(timeout));
        let mut running = lock(&self.running);
        while running.count > 0 {
            match deadline {
                None => running = wait(&self.none, running),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    running = wait_timeout(&self.none, running, deadline - now).0;
                }
            }
        }
        true
    }

    /// A future's `wait_none_for`: `Ready` once no release runs, else `Pending` with `cx`'s
    /// waker kept until then.
    pub(crate) fn poll_none(&self, cx: &Context<'_>) -> Poll<()> {
        let mut running = lock(&self.running);
        if running.count == 0 {
            return Poll::Ready(());
        }
        if !running
            .wakers
            .iter()
            .any(|waker| waker.will_wake(cx.waker()))
        {
            running.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;
    use std::task::{Context, Waker};
    use std::time::Duration;

    use super::Releases;

    #[test]
    fn waits_for_the_last_release_to_end() {
        let releases = Arc::new(Releases::default());
        assert!(releases.wait_none_for(Some(Duration::ZERO)));
        releases.begin();
        releases.begin();
        assert!(!releases.wait_none_for(Some(Duration::from_millis(1))));
        let cx = Context::from_waker(Waker::noop());
        assert!(releases.poll_none(&cx).is_pending());
        releases.end();
        assert!(releases.poll_none(&cx).is_pending(), "one still runs");
        let ender = {
            let releases = Arc::clone(&releases);
            std::thread::spawn(move || releases.end())
        };
        assert!(releases.wait_none_for(None));
        ender.join().unwrap();
        assert!(releases.poll_none(&cx).is_ready());
    }
}
