//! [`RetiredData`]: typed data values whose release waits for the engine state's drop.

use depengine_sync::{Mutex, lock};

/// A value's release (role 4 of `data/cell.rs`), to run once no op of the engine is left.
pub(crate) type Release = Box<dyn FnOnce() + Send>;

/// Data values released when the engine state drops: those whose var was deleted by hand, so
/// that the last handle could not push the deletion that orders their release after their ops
/// (`data/handle.rs`). Misuse only: empty otherwise.
///
/// Threads: the thread that drops such a value's last handle keeps its release here; the
/// engine state's drop runs them all (no op of the engine is left then).
#[derive(Default)]
pub(crate) struct RetiredData {
    releases: Mutex<Vec<Release>>,
}

impl RetiredData {
    /// Keeps `release` until the engine state drops.
    pub(crate) fn keep(&self, release: Release) {
        lock(&self.releases).push(release);
    }
}

impl Drop for RetiredData {
    fn drop(&mut self) {
        // Taken out first: the releases run user `Drop`s, with no lock held.
        let releases = std::mem::take(&mut *lock(&self.releases));
        for release in releases {
            release();
        }
    }
}
