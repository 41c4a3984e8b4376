//! [`OtherThreads`]: the CPU time of the threads of the process other than the calling one,
//! and [`own_cpu_time`], the calling thread's.

use std::time::Duration;

/// The CPU clocks of every thread of the process but the calling one (the pool's threads,
/// for `idle`, whose measuring thread only sleeps; the engine's, for the `gpu` group).
///
/// Each thread's own CPU clock, not the process's `getrusage`: Linux brings a thread's
/// runtime up to date in the process total only at a scheduler tick or a context switch, so
/// a `getrusage` taken while a worker is still busy with the previous workload misses up to a
/// tick of that work (a millisecond here), which the one taken after the idle window then
/// counts as idle time. Reading a thread's own clock brings its runtime up to date first, so
/// the window holds what the threads burnt in it and nothing from before (`docs/decisions.md`,
/// "`idle` read by each thread's CPU clock"). The C++ harnesses read the same clocks
/// (`bench_common.hpp`).
pub(crate) struct OtherThreads {
    clocks: Vec<libc::clockid_t>,
}

impl OtherThreads {
    /// The threads alive now, from Linux's `/proc/self/task` (the bench runs on Linux).
    pub(crate) fn now() -> Self {
        // SAFETY: `gettid` has no preconditions.
        let me = unsafe { libc::gettid() };
        let tids = std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .filter_map(|entry| {
                entry
                    .ok()?
                    .file_name()
                    .to_str()?
                    .parse::<libc::pid_t>()
                    .ok()
            });
        OtherThreads {
            // Linux's clock id of a thread's CPU clock (what `pthread_getcpuclockid` returns):
            // the complement of its id, shifted by 3, with the per-thread bit (4) and the
            // scheduler clock (2).
            clocks: tids
                .filter(|&tid| tid != me)
                .map(|tid| ((!tid) << 3) | 6)
                .collect(),
        }
    }

    /// Each thread's CPU time so far; `None` for a thread that has exited.
    pub(crate) fn cpu_times(&self) -> Vec<Option<Duration>> {
        self.clocks
            .iter()
            .map(|&clock| {
                let mut time = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: `clock_gettime` writes one `timespec` into the value we pass.
                let read = unsafe { libc::clock_gettime(clock, &raw mut time) };
                (read == 0).then(|| {
                    Duration::new(
                        u64::try_from(time.tv_sec).unwrap_or(0),
                        u32::try_from(time.tv_nsec).unwrap_or(0),
                    )
                })
            })
            .collect()
    }

    /// The CPU time the threads used between two readings (threads alive at both).
    pub(crate) fn used_since(before: &[Option<Duration>], after: &[Option<Duration>]) -> Duration {
        before
            .iter()
            .zip(after)
            .filter_map(|(before, after)| Some(after.as_ref()?.saturating_sub((*before)?)))
            .sum()
    }
}

/// The calling thread's CPU time so far (its own clock; zero if it cannot be read).
pub(crate) fn own_cpu_time() -> Duration {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one `timespec` into the value we pass.
    let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut time) };
    if read != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(time.tv_sec).unwrap_or(0),
        u32::try_from(time.tv_nsec).unwrap_or(0),
    )
}
