//! How a failed op travels through the engine, and how a program recovers from it.
//!
//! ```text
//! cargo run --release -p depengine --example failure
//! ```
//!
//! Three small pipelines over named vars:
//!
//! 1. an op returns an `Err` (a parse error): its dependents are skipped, `wait_for_var`
//!    reports the failure on each var it reached and clears it there, and writing the var
//!    again recovers;
//! 2. an op panics: the panic is caught, reported the same way, this time by `wait_for_all`,
//!    which clears every failed var at once;
//! 3. misuse (a var both read and written by one op) is not a failure of an op: the push
//!    itself returns the error, and nothing is pushed.
//!
//! The engine orders ops; it does not hold data. Here each var's data lives beside it in an
//! `Arc<Mutex<_>>`: the engine already orders the ops that touch it, the lock is there for
//! Rust's sharing rules. Every step checks what the engine did and panics, naming the step,
//! if the engine misbehaved.

use std::error::Error;
use std::num::ParseIntError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use depengine::{Engine, EngineConfig, EngineError, FailureCause, OpFailure};

fn main() -> Result<(), Box<dyn Error>> {
    let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
    an_error_skips_the_dependents(&engine)?;
    a_panic_is_caught_and_reported_by_wait_for_all(&engine)?;
    misuse_is_the_error_of_the_push(&engine)?;
    // The engine is usable after every failure above; shutting it down waits for the last ops.
    engine.shutdown()?;
    println!("\nfailure example: every check passed");
    Ok(())
}

/// `load text -> parse number -> double`, where the text is not a number.
fn an_error_skips_the_dependents(engine: &Engine) -> Result<(), Box<dyn Error>> {
    println!("1. an op that returns an error");
    // Named vars: errors and stall warnings show `var "number" (#1.0)` instead of `var #1.0`.
    let text = engine.new_var_named("text")?;
    let number = engine.new_var_named("number")?;
    let doubled = engine.new_var_named("doubled")?;
    let text_data = Arc::new(Mutex::new(String::new()));
    let number_data = Arc::new(Mutex::new(0_i64));
    let doubled_data = Arc::new(Mutex::new(0_i64));

    push_load(engine, text, &text_data, "forty-two")?;
    push_parse(engine, text, number, &text_data, &number_data)?;
    // `double` reads `number`, which the failed parse wrote: it must not run.
    let double_ran = Arc::new(AtomicBool::new(false));
    let ran = Arc::clone(&double_ran);
    let (input, output) = (Arc::clone(&number_data), Arc::clone(&doubled_data));
    engine
        .op("double")
        .reads([number])
        .writes([doubled])
        .push_sync(move |_| {
            ran.store(true, Ordering::Relaxed);
            *output.lock().unwrap() = 2 * *input.lock().unwrap();
        })?;

    // Waiting on the last var of the chain reports the original failure: the op that failed
    // (`parse number`, not the skipped `double`) and its error.
    let failure = expect_failure(engine.wait_for_var(doubled), "wait_for_var(doubled)");
    println!("   wait_for_var(doubled): {failure}");
    assert_eq!(
        failure.op_name(),
        "parse number",
        "the original op is named"
    );
    assert!(
        !double_ran.load(Ordering::Relaxed),
        "`double` ran although its input failed"
    );
    // The error is the parse error itself, reachable for a program that wants to handle it.
    match failure.cause() {
        FailureCause::Error(error) => assert!(
            error.downcast_ref::<ParseIntError>().is_some(),
            "the cause is the ParseIntError the op returned, not {error:?}"
        ),
        other => panic!("expected the op's error as the cause, got {other:?}"),
    }

    // That wait cleared the failure on `doubled` only: `number` keeps the same failure until a
    // wait on it takes it too.
    engine.wait_for_var(doubled)?;
    let again = expect_failure(engine.wait_for_var(number), "wait_for_var(number)");
    println!("   wait_for_var(number):  {again}");
    assert!(again.same_failure(&failure), "one failure, on both vars");
    assert_eq!(engine.stats().failed_vars, 0, "both waits cleared theirs");

    // Recovery: the input is fixed and the vars written again; the chain runs through.
    push_load(engine, text, &text_data, "42")?;
    push_parse(engine, text, number, &text_data, &number_data)?;
    let (input, output) = (Arc::clone(&number_data), Arc::clone(&doubled_data));
    engine
        .op("double")
        .reads([number])
        .writes([doubled])
        .push_sync(move |_| {
            *output.lock().unwrap() = 2 * *input.lock().unwrap();
        })?;
    engine.wait_for_var(doubled)?;
    let result = *doubled_data.lock().unwrap();
    println!("   after writing the input again: doubled = {result}");
    assert_eq!(result, 84, "the recovered chain computes 2 * 42");
    Ok(())
}

/// Pushes `load text`: writes `contents` into `text`.
fn push_load(
    engine: &Engine,
    text: depengine::Var,
    text_data: &Arc<Mutex<String>>,
    contents: &'static str,
) -> depengine::Result<()> {
    let text_data = Arc::clone(text_data);
    engine.op("load text").writes([text]).push_sync(move |_| {
        *text_data.lock().unwrap() = String::from(contents);
    })
}

/// Pushes `parse number`: parses `text` into `number`, failing on text that is not a number.
fn push_parse(
    engine: &Engine,
    text: depengine::Var,
    number: depengine::Var,
    text_data: &Arc<Mutex<String>>,
    number_data: &Arc<Mutex<i64>>,
) -> depengine::Result<()> {
    let (input, output) = (Arc::clone(text_data), Arc::clone(number_data));
    engine
        .op("parse number")
        .reads([text])
        .writes([number])
        .push_sync(move |_| {
            // `?` turns the `ParseIntError` into the op's failure: no annotation needed.
            let parsed: i64 = input.lock().unwrap().trim().parse()?;
            *output.lock().unwrap() = parsed;
            Ok(())
        })
}

/// `pick sample -> summarize`, where the sample index is out of bounds.
fn a_panic_is_caught_and_reported_by_wait_for_all(engine: &Engine) -> Result<(), Box<dyn Error>> {
    println!("2. an op that panics");
    let samples = engine.new_var_named("samples")?;
    let picked = engine.new_var_named("picked")?;
    let summary = engine.new_var_named("summary")?;
    let samples_data = Arc::new(Mutex::new(vec![3_u32, 1, 4]));
    let picked_data = Arc::new(Mutex::new(0_u32));
    let summary_data = Arc::new(Mutex::new(String::new()));

    let push_pick = |index: usize| {
        let (input, output) = (Arc::clone(&samples_data), Arc::clone(&picked_data));
        engine
            .op("pick sample")
            .reads([samples])
            .writes([picked])
            .push_sync(move |_| {
                // Copied out first: a panic while a `std::sync::Mutex` is locked poisons it,
                // and the retry below could not lock it again.
                let samples = input.lock().unwrap().clone();
                // Indexing past the end panics; the engine catches the panic on its worker.
                *output.lock().unwrap() = samples[index];
            })
    };
    let push_summarize = || {
        let (input, output) = (Arc::clone(&picked_data), Arc::clone(&summary_data));
        engine
            .op("summarize")
            .reads([picked])
            .writes([summary])
            .push_sync(move |_| {
                *output.lock().unwrap() = format!("picked {}", input.lock().unwrap());
            })
    };

    // Rust's panic hook runs before the engine catches the panic: the default one prints the
    // panic (and a backtrace, with RUST_BACKTRACE set) on stderr. A program that reports its
    // ops' panics itself may install a quieter hook; this one prints a line.
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let message = info.payload_as_str().unwrap_or("(not a string)");
        let place = info.location().map(ToString::to_string).unwrap_or_default();
        eprintln!(
            "   panic hook: thread {:?} panicked at {place}: {message}",
            thread.name().unwrap_or("unnamed")
        );
    }));
    push_pick(7)?;
    push_summarize()?;
    // `wait_for_all` waits for every op and returns the first failure no wait returned yet
    // (the parse error of part 1 was returned by `wait_for_var`: it is not returned again).
    let failure = expect_failure(engine.wait_for_all(), "wait_for_all");
    println!("   wait_for_all: {failure}");
    assert_eq!(failure.op_name(), "pick sample");
    assert!(
        matches!(failure.cause(), FailureCause::Panic(message) if message.contains("index out of bounds")),
        "the cause is the panic's message: {failure}"
    );
    assert!(
        summary_data.lock().unwrap().is_empty(),
        "`summarize` ran although its input failed"
    );
    // `wait_for_all` cleared the failure on every var it reached (`picked` and `summary`), so
    // the vars can be written again at once, and a second `wait_for_all` has nothing to report.
    assert_eq!(
        engine.stats().failed_vars,
        0,
        "wait_for_all clears every var"
    );
    engine.wait_for_var(summary)?;
    engine.wait_for_all()?;

    push_pick(2)?;
    push_summarize()?;
    engine.wait_for_all()?;
    let result = summary_data.lock().unwrap().clone();
    println!("   after picking a valid index: {result}");
    assert_eq!(result, "picked 4");
    Ok(())
}

/// A var both read and written by one op: the push returns the error, naming op and var.
fn misuse_is_the_error_of_the_push(engine: &Engine) -> Result<(), Box<dyn Error>> {
    println!("3. misuse of the API");
    let weights = engine.new_var_named("weights")?;
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let pushed = engine
        .op("update")
        .reads([weights])
        .writes([weights])
        .push_sync(move |_| flag.store(true, Ordering::Relaxed));
    let error = pushed.expect_err("a var both read and written is refused at push");
    println!("   push: {error}");
    assert!(
        matches!(error, EngineError::ReadWriteConflict { .. }),
        "expected ReadWriteConflict, got {error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("op `update`") && message.contains("var \"weights\""),
        "the message names the op and the var: {message}"
    );
    // Nothing was pushed: no failure to wait for, and the closure was dropped unrun.
    engine.wait_for_all()?;
    assert!(!ran.load(Ordering::Relaxed), "a refused op never runs");
    Ok(())
}

/// The op failure inside `outcome`; panics naming `wait` if it is anything else.
fn expect_failure(outcome: depengine::Result<()>, wait: &str) -> OpFailure {
    match outcome {
        Err(EngineError::OpFailed(failure)) => failure,
        other => panic!("{wait}: expected an op failure, got {other:?}"),
    }
}
