//! The soak of depengine (`cargo xtask soak [--ops N] [--seconds S]`): one process runs every
//! engine kind in turn under a long random workload with faults injected at known rates, and
//! fails on any disagreement with a sequential model, any hang, any value dropped other than
//! exactly once, and resident memory that grows past its bound or does not come back.
//!
//! Each kind runs a series of engines ("epochs"), each with a random configuration (worker
//! counts, bulk execution on or off, a `max_pending` small enough to throttle, strict or
//! patient). Several pusher threads push random ops naming 1 to 8 vars, typed data and plain
//! vars mixed; an op may return an error or panic halfway through its writes, or be async and
//! be completed late, failed or dropped by a completer thread. Pushers look at their values
//! from their own thread and from lender threads: read and write guards (some dropped by a
//! panic), `read_async` futures (some dropped before they resolve), waits, takes; they
//! delete vars by hand, clone handles into ops and drop the last one there, make values that
//! own a clone of their engine, and race on shared accumulators. One epoch in four ends by
//! dropping the engine with work in flight.
//!
//! It prints the ops per second of each engine kind, the faults injected by kind, the peak and
//! final resident sizes with their bounds, and last `soak: N passed, M failed` (a round per
//! engine kind, and the memory check if it fails); a failure prints the seed and exits
//! non-zero. `--engine-in-values off` leaves out the values that own their engine.
//!
//! The checker (`model.rs`) replays each pusher's ops in push order under the crate's failure
//! rules and predicts every look; the ledger (`ledger.rs`) checks each value is dropped once,
//! with the content the model predicts; the watchdog (`watchdog.rs`) turns a hang into a
//! failure with the engine's `dump_pending`. The seed is printed: `--seed` replays every
//! random choice (the schedule, of course, differs).
//!
//! ```text
//! cargo run --release -p depengine-soak -- --ops 1000000
//! ```

mod args;
mod check;
mod completer;
mod epoch;
mod faults;
mod job;
mod ledger;
mod lender;
mod look;
mod model;
mod push;
mod pusher;
mod rng;
mod round;
mod rss;
mod value;
mod watchdog;
mod workload;

use std::process::ExitCode;
use std::time::Duration;

use crate::job::Injected;
use crate::round::Budget;

/// The bound on the peak resident size, in MiB.
const PEAK_BOUND_MIB: u64 = 64;
/// How far above its size at the start the resident size may end, in MiB (the allocator
/// keeps some of what it was given back).
const FINAL_MARGIN_MIB: u64 = 32;

fn main() -> ExitCode {
    if std::env::args().any(|arg| arg == "--help" || arg == "-h") {
        println!("{}", args::USAGE);
        return ExitCode::SUCCESS;
    }
    let options = match args::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("soak: {message}\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    quiet_injected_panics();
    let start_kib = rss::current().unwrap_or(0);
    watchdog::start(options.watchdog, options.seed);
    let kinds = options.kinds.len() as u64;
    println!(
        "soak: seed {} ({} ops over {kinds} engine kinds, {} pushers; --seed {} replays it)",
        options.seed, options.ops, options.pushers, options.seed
    );
    println!(
        "soak: bounds: peak RSS under {PEAK_BOUND_MIB} MiB; final RSS under the start's {:.0} \
         MiB + {FINAL_MARGIN_MIB} MiB; a hang is {} s without progress",
        rss::mib(start_kib),
        options.watchdog.as_secs()
    );
    let budget = Budget {
        seed: options.seed,
        ops: options.ops.div_ceil(kinds),
        time: options.time.map(|time| time / kinds as u32),
        pushers: options.pushers,
        engine_in_values: options.engine_in_values,
    };
    let (mut passed, mut failed) = (0, 0);
    for &kind in &options.kinds {
        let round = round::run(kind, &budget);
        let seconds = round.elapsed.as_secs_f64();
        println!(
            "soak: {:<17} {:>9} ops in {seconds:>6.1} s: {:>8.0} ops/s ({} engines)",
            kind.name(),
            round.ops,
            round.ops as f64 / seconds,
            round.engines
        );
        if round.failures.is_empty() {
            passed += 1;
        } else {
            failed += 1;
            for failure in &round.failures {
                println!("soak: FAILED ({kind}, seed {}): {failure}", options.seed);
            }
        }
    }
    println!("soak: faults injected, by kind:");
    faults::print(&mut std::io::stdout());
    if !memory_ok(start_kib) {
        failed += 1;
    }
    println!("soak: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Checks the peak and final resident sizes against their bounds, printing both.
fn memory_ok(start_kib: u64) -> bool {
    // Engines that were dropped by a thread of their own may still be joining theirs.
    std::thread::sleep(Duration::from_millis(200));
    let final_kib = rss::current().unwrap_or(0);
    let peak_kib = rss::high_water().unwrap_or(0).max(rss::peak_sampled());
    println!(
        "soak: RSS: start {:.1} MiB, peak {:.1} MiB (bound {PEAK_BOUND_MIB}), final {:.1} MiB \
         (bound {:.1})",
        rss::mib(start_kib),
        rss::mib(peak_kib),
        rss::mib(final_kib),
        rss::mib(start_kib + FINAL_MARGIN_MIB * 1024)
    );
    let mut ok = true;
    if peak_kib > PEAK_BOUND_MIB * 1024 {
        println!("soak: FAILED: the peak RSS is over its bound");
        ok = false;
    }
    if final_kib > start_kib + FINAL_MARGIN_MIB * 1024 {
        println!("soak: FAILED: the RSS did not come back after the run");
        ok = false;
    }
    ok
}

/// The default panic hook, silent for the panics the soak injects (thousands of them).
fn quiet_injected_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.payload().is::<Injected>() {
            default(info);
        }
    }));
}
