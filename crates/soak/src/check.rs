//! Disagreements with the model, from whichever thread saw them: collected here and reported
//! at the end of the epoch, which then fails the run.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// How many messages are kept: the first ones say what went wrong; the rest would be noise.
const KEPT: usize = 20;

static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());
static FAILED: AtomicBool = AtomicBool::new(false);

/// Records a disagreement.
pub(crate) fn fail(message: String) {
    FAILED.store(true, Ordering::Relaxed);
    let mut messages = MESSAGES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if messages.len() < KEPT {
        messages.push(message);
    }
}

/// Whether any disagreement was recorded: pushers stop early then.
pub(crate) fn failed() -> bool {
    FAILED.load(Ordering::Relaxed)
}

/// The messages recorded so far, which are forgotten: the next round starts clean.
pub(crate) fn take() -> Vec<String> {
    let messages = std::mem::take(
        &mut *MESSAGES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    FAILED.store(false, Ordering::Relaxed);
    messages
}
