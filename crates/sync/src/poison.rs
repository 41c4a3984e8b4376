//! Lock helpers that ignore poisoning, under the condition stated in the crate documentation
//! ("Poisoning"): every critical section leaves the protected data consistent before anything
//! in it can panic.

use std::time::Duration;

use crate::{Condvar, Mutex, MutexGuard, WaitTimeoutResult};

/// Locks `mutex`, ignoring poisoning. Sound only for locks whose critical sections meet the
/// condition of the crate documentation ("Poisoning").
///
/// ```
/// use depengine_sync::{Mutex, lock};
///
/// let queue = Mutex::new(Vec::new());
/// lock(&queue).push(7);
/// assert_eq!(*lock(&queue), [7]);
/// ```
#[inline]
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits on `condvar`, releasing `guard` meanwhile, and ignoring poisoning as [`lock`] does.
/// Wake-ups may be spurious: wait in a loop on the condition.
///
/// ```
/// use depengine_sync::{Arc, Condvar, Mutex, lock, thread, wait};
///
/// let pending = Arc::new((Mutex::new(3_u32), Condvar::new()));
/// let worker = {
///     let pending = Arc::clone(&pending);
///     thread::spawn(move || {
///         for _ in 0..3 {
///             *lock(&pending.0) -= 1;
///             pending.1.notify_all();
///         }
///     })
/// };
/// let mut left = lock(&pending.0);
/// while *left > 0 {
///     left = wait(&pending.1, left);
/// }
/// drop(left);
/// worker.join().unwrap();
/// ```
#[inline]
pub fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// As [`wait`], giving up after about `timeout`: the guard, and whether the wait timed out.
/// Under loom, which has no clock, the timeout is ignored: the wait lasts until a notification
/// and never reports a timeout, so a model must notify every waiter it expects to return.
///
/// ```
/// use depengine_sync::{Condvar, Mutex, lock, wait_timeout};
/// use std::time::Duration;
///
/// let (done, changed) = (Mutex::new(false), Condvar::new());
/// let (guard, result) = wait_timeout(&changed, lock(&done), Duration::from_millis(1));
/// // Nobody sets `done`: the wait times out (or wakes spuriously).
/// assert!(!*guard);
/// # let _ = result.timed_out();
/// ```
#[inline]
pub fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Duration,
) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
    condvar
        .wait_timeout(guard, timeout)
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::{Duration, Instant};

    use super::{lock, wait, wait_timeout};
    use crate::{Arc, Condvar, Mutex, thread};

    /// A mutex poisoned by a thread that panicked while holding it, with the value the
    /// critical section had written (consistent) before the panic.
    fn poisoned(value: u32) -> Arc<(Mutex<u32>, Condvar)> {
        let shared = Arc::new((Mutex::new(0), Condvar::new()));
        let panicking = Arc::clone(&shared);
        let outcome = thread::spawn(move || {
            let mut guard = panicking.0.lock().unwrap();
            *guard = value;
            panic!("panics while holding the lock");
        })
        .join();
        assert!(outcome.is_err());
        assert!(shared.0.is_poisoned());
        shared
    }

    #[test]
    fn a_poisoned_mutex_still_locks_and_holds_the_last_write() {
        let shared = poisoned(7);
        assert!(shared.0.lock().is_err());
        let mut guard = lock(&shared.0);
        assert_eq!(*guard, 7);
        *guard = 8;
        drop(guard);
        assert_eq!(*lock(&shared.0), 8);
    }

    #[test]
    fn wait_on_a_poisoned_mutex_returns_once_notified() {
        let shared = poisoned(1);
        let notifier = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                *lock(&shared.0) = 0;
                shared.1.notify_all();
            })
        };
        let mut pending = lock(&shared.0);
        while *pending != 0 {
            pending = wait(&shared.1, pending);
        }
        drop(pending);
        notifier.join().unwrap();
    }

    #[test]
    fn wait_timeout_on_a_poisoned_mutex_times_out() {
        let shared = poisoned(1);
        let timeout = Duration::from_millis(20);
        let started = Instant::now();
        let mut guard = lock(&shared.0);
        // Spurious wake-ups return early: wait again until the deadline.
        loop {
            let (next, result) = wait_timeout(&shared.1, guard, timeout);
            guard = next;
            if result.timed_out() || started.elapsed() >= timeout {
                break;
            }
        }
        assert!(started.elapsed() >= timeout);
        assert_eq!(*guard, 1);
    }
}
