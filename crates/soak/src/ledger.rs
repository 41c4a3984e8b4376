//! The ledger: every value made, the content its owner expects it to end with, and each drop
//! of it, so that an epoch ends knowing every value was dropped (or taken, then dropped)
//! exactly once, with the content the model predicts.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::watchdog;

/// One value's record.
#[derive(Default)]
struct Entry {
    /// The digest of the content the model predicts, once its owner let go of it.
    expected: Option<u64>,
    /// The digest of the content it was dropped with.
    actual: Option<u64>,
    drops: u32,
}

#[derive(Default)]
struct Book {
    entries: HashMap<u64, Entry>,
    /// Drops of values the book no longer lists: a second drop after `settle`, or a drop of a
    /// value that `settle` gave up on.
    strays: Vec<u64>,
}

static BOOK: Mutex<Option<Book>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn with_book<R>(f: impl FnOnce(&mut Book) -> R) -> R {
    // A panic with the lock held is a soak bug reported where it happened; the book stays
    // usable for the report.
    let mut book = BOOK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(book.get_or_insert_with(Book::default))
}

/// Registers a new value; returns its id.
pub(crate) fn created() -> u64 {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    with_book(|book| book.entries.insert(id, Entry::default()));
    id
}

/// The digest value `id` must be dropped with: its owner let go of it.
pub(crate) fn expect(id: u64, digest: u64) {
    with_book(|book| match book.entries.get_mut(&id) {
        Some(entry) => entry.expected = Some(digest),
        None => book.strays.push(id),
    });
}

/// Value `id` is dropped with content `digest`.
pub(crate) fn dropped(id: u64, digest: u64) {
    with_book(|book| match book.entries.get_mut(&id) {
        Some(entry) => {
            entry.drops += 1;
            entry.actual = Some(digest);
        }
        None => book.strays.push(id),
    });
}

/// Waits (up to `patience`) until every listed value was dropped, then checks each: dropped
/// once, with the content expected. Empties the book. Returns how many values it checked, or
/// what went wrong.
pub(crate) fn settle(patience: Duration) -> Result<usize, Vec<String>> {
    let deadline = Instant::now() + patience;
    loop {
        let waiting = with_book(|book| book.entries.values().filter(|e| e.drops == 0).count());
        if waiting == 0 || Instant::now() > deadline {
            break;
        }
        watchdog::tick();
        thread::sleep(Duration::from_millis(1));
    }
    let book = with_book(std::mem::take);
    let mut errors = Vec::new();
    for id in book.strays {
        errors.push(format!(
            "value {id} dropped after its epoch ended (a second drop?)"
        ));
    }
    let mut ids: Vec<_> = book.entries.keys().copied().collect();
    ids.sort_unstable();
    for id in ids {
        let entry = &book.entries[&id];
        match (entry.drops, entry.expected, entry.actual) {
            (0, ..) => errors.push(format!("value {id} was never dropped")),
            (1, Some(expected), Some(actual)) if expected == actual => {}
            (1, None, _) => errors.push(format!("value {id}: the soak set no expectation")),
            (1, Some(expected), actual) => errors.push(format!(
                "value {id} ended with content {actual:016x?}, the model says {expected:016x}"
            )),
            (drops, ..) => errors.push(format!("value {id} was dropped {drops} times")),
        }
    }
    if errors.is_empty() {
        Ok(book.entries.len())
    } else {
        Err(errors)
    }
}
