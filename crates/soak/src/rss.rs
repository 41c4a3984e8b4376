//! Resident memory, from `/proc/self/status`: the current size (`VmRSS`), sampled through the
//! run, and the kernel's peak (`VmHWM`).

use std::sync::atomic::{AtomicU64, Ordering};

/// The largest `VmRSS` sampled, in KiB.
static PEAK_SAMPLED: AtomicU64 = AtomicU64::new(0);

/// A field of `/proc/self/status`, in KiB (`None` where there is no such file).
fn field(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(name))?;
    line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The resident size now, in KiB.
pub(crate) fn current() -> Option<u64> {
    field("VmRSS:")
}

/// The kernel's record of the largest resident size, in KiB.
pub(crate) fn high_water() -> Option<u64> {
    field("VmHWM:")
}

/// Samples the resident size (the watchdog does, periodically).
pub(crate) fn sample() {
    if let Some(now) = current() {
        PEAK_SAMPLED.fetch_max(now, Ordering::Relaxed);
    }
}

/// The largest resident size sampled, in KiB.
pub(crate) fn peak_sampled() -> u64 {
    PEAK_SAMPLED.load(Ordering::Relaxed)
}

/// KiB as MiB, for the report.
pub(crate) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
