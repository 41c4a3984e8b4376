//! The watchdog: a thread that turns a hang into a failure. Every thread that makes progress
//! ticks a counter; if it stands still for the watchdog's period, the watchdog writes what
//! the live engine has pending (`Engine::dump_pending`), the fault counts and the seed, and
//! ends the process with a failure. It also samples the resident size.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use depengine::Engine;

use crate::{faults, rss};

/// The exit status of a hang.
const HUNG: i32 = 3;
/// How often the watchdog looks.
const PERIOD: Duration = Duration::from_millis(50);
/// How long the dump may take: the hang may hold a lock it needs.
const DUMP_PATIENCE: Duration = Duration::from_secs(10);

static PROGRESS: AtomicU64 = AtomicU64::new(0);

/// The engine of the epoch that runs, and where the run is. A clone of the engine keeps it
/// alive, so the epoch clears it before dropping its own.
static LIVE: Mutex<(Option<Engine>, String)> = Mutex::new((None, String::new()));

/// Progress: the watchdog waits again from now.
pub(crate) fn tick() {
    PROGRESS.fetch_add(1, Ordering::Relaxed);
}

/// Sets the engine to dump on a hang (`None` while none may be held), and where the run is.
pub(crate) fn set_live(engine: Option<Engine>, place: String) {
    let old = std::mem::replace(&mut *lock(), (engine, place));
    // Dropped outside the lock: the drop of an engine may wait for its work.
    drop(old);
}

fn lock() -> std::sync::MutexGuard<'static, (Option<Engine>, String)> {
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts the watchdog: a hang is `patience` without a tick.
pub(crate) fn start(patience: Duration, seed: u64) {
    thread::Builder::new()
        .name("soak-watchdog".to_owned())
        .spawn(move || watch(patience, seed))
        .expect("the watchdog thread starts");
}

fn watch(patience: Duration, seed: u64) {
    let mut last = PROGRESS.load(Ordering::Relaxed);
    let mut since = Instant::now();
    loop {
        thread::sleep(PERIOD);
        rss::sample();
        let now = PROGRESS.load(Ordering::Relaxed);
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= patience {
            hung(patience, seed);
        }
    }
}

fn hung(patience: Duration, seed: u64) -> ! {
    let (engine, place) = {
        let live = lock();
        (live.0.clone(), live.1.clone())
    };
    eprintln!(
        "soak: no progress for {} s ({place}); seed {seed}",
        patience.as_secs()
    );
    match engine {
        Some(engine) => {
            eprintln!("soak: what the engine has pending (dump_pending):");
            let (done, dumped) = std::sync::mpsc::channel();
            thread::spawn(move || {
                let mut stderr = std::io::stderr().lock();
                if let Err(error) = engine.dump_pending(&mut stderr) {
                    let _ = writeln!(stderr, "soak: dump_pending failed: {error}");
                }
                let _ = done.send(());
            });
            if dumped.recv_timeout(DUMP_PATIENCE).is_err() {
                eprintln!("soak: dump_pending did not finish in {DUMP_PATIENCE:?}");
            }
        }
        None => eprintln!("soak: no engine to dump (between engines, or one being dropped)"),
    }
    eprintln!("soak: faults injected so far:");
    faults::print(&mut std::io::stderr());
    eprintln!("soak: hung; rerun with --seed {seed}");
    std::process::exit(HUNG);
}
