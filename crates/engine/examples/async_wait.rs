//! Using the engine from async code: awaiting vars instead of blocking on them, and async ops
//! that complete from another thread or from another task.
//!
//! ```text
//! cargo run --release -p depengine --example async_wait
//! ```
//!
//! 1. With the smallest executor there is (`futures::executor::block_on`): an async op
//!    "downloads" bytes on a thread of its own and completes its [`Completion`] from there; a
//!    sync op checksums them; async code awaits `wait_for_var_async` and
//!    `wait_for_all_async`, and gets an async op's failure the way the blocking waits report
//!    it.
//! 2. On a single-threaded tokio runtime, one task awaits the engine while another task, on the
//!    same thread, holds the completion of an op the engine waits for: the wait resolves only
//!    because awaiting it blocked no thread.
//!
//! The engine's futures ([`depengine::WaitForVar`], [`depengine::WaitForAll`]) work with any
//! executor; the crate depends on none. Every step checks what the engine did and panics,
//! naming the step, if the engine misbehaved.

use std::error::Error;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use depengine::{Completion, Engine, EngineConfig, EngineError, FnProperty};

fn main() -> Result<(), Box<dyn Error>> {
    let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;

    println!("1. futures::executor::block_on");
    futures::executor::block_on(download_and_checksum(&engine))?;

    println!("2. a single-threaded tokio runtime");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    runtime.block_on(a_task_completes_what_another_awaits(engine.clone()))?;

    engine.shutdown()?;
    println!("\nasync_wait example: every check passed");
    Ok(())
}

/// Pushes an async download and a checksum of what it fetched, and awaits them.
async fn download_and_checksum(engine: &Engine) -> Result<(), EngineError> {
    let bytes = engine.new_var_named("bytes")?;
    let checksum = engine.new_var_named("checksum")?;
    let bytes_data = Arc::new(Mutex::new(Vec::<u8>::new()));
    let checksum_data = Arc::new(Mutex::new(0_u32));

    // An async op is done when its `Completion` is completed, not when its function returns:
    // the function starts the work (here a thread standing in for I/O) and hands the token over.
    // `FnProperty::Async` says the function only starts work: the engine may run it on the
    // pushing thread, skipping a trip through a worker.
    let download = Arc::clone(&bytes_data);
    engine
        .op("download")
        .writes([bytes])
        .prop(FnProperty::Async)
        .push_async(move |_, done: Completion| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                *download.lock().unwrap() = (0..=255).collect();
                // Until this call, `bytes` stays held, and `checksum` below waits.
                done.ok();
            });
        })?;
    let (input, output) = (Arc::clone(&bytes_data), Arc::clone(&checksum_data));
    engine
        .op("checksum")
        .reads([bytes])
        .writes([checksum])
        .push_sync(move |_| {
            *output.lock().unwrap() = input.lock().unwrap().iter().map(|&b| u32::from(b)).sum();
        })?;

    // The future resolves once every op pushed on `checksum` so far has completed; while it is
    // pending, the executor's thread is free for other tasks.
    engine.wait_for_var_async(checksum).await?;
    let sum = *checksum_data.lock().unwrap();
    println!("   checksum of the downloaded bytes: {sum}");
    assert_eq!(sum, (0..=255).sum::<u32>(), "`checksum` saw every byte");

    // An async op fails by passing an error to its completion (or by dropping it unused):
    // the futures report it as the blocking waits do, naming the op.
    engine
        .op("download mirror")
        .writes([bytes])
        .prop(FnProperty::Async)
        .push_async(|_, done| {
            std::thread::spawn(move || done.fail("connection refused"));
        })?;
    let outcome = engine.wait_for_all_async().await;
    match &outcome {
        Err(EngineError::OpFailed(failure)) => {
            println!("   wait_for_all_async: {failure}");
            assert_eq!(failure.op_name(), "download mirror");
            assert!(
                failure.to_string().contains("connection refused"),
                "{failure}"
            );
        }
        other => panic!("wait_for_all_async: expected the mirror's failure, got {other:?}"),
    }
    // Taken and cleared, as `wait_for_all` does: `bytes` can be awaited, and written, again.
    engine.wait_for_var_async(bytes).await?;
    Ok(())
}

/// How many timer ticks the ticker task waits before it completes `open gate`.
const TICKS: u32 = 3;

/// One task awaits the engine; another, on the same thread, completes the op it waits for.
async fn a_task_completes_what_another_awaits(engine: Engine) -> Result<(), Box<dyn Error>> {
    let gate = engine.new_var_named("gate")?;
    let result = engine.new_var_named("result")?;
    let result_data = Arc::new(Mutex::new(String::new()));

    // The op's function sends its completion to the ticker task below, which completes it after
    // a few ticks of a tokio timer.
    let (completion_tx, completion_rx) = tokio::sync::oneshot::channel::<Completion>();
    engine
        .op("open gate")
        .writes([gate])
        .prop(FnProperty::Async)
        .push_async(move |_, done| {
            // If the receiver is gone, the completion is dropped, which fails the op: an async
            // op never hangs because its token was lost.
            let _ = completion_tx.send(done);
        })?;
    let output = Arc::clone(&result_data);
    engine
        .op("after gate")
        .reads([gate])
        .writes([result])
        .push_sync(move |_| {
            *output.lock().unwrap() = String::from("ran after the gate opened");
        })?;

    let ticker = tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(10));
        for _ in 0..TICKS {
            interval.tick().await;
        }
        let done = completion_rx
            .await
            .expect("`open gate` ran and sent its completion");
        done.ok();
        TICKS
    });

    // This task awaits the whole engine. Had the wait blocked the runtime's only thread, the
    // ticker (timers and all) would stop with it and never complete `open gate`: the wait would
    // never end. A watchdog thread turns such a hang (or a lost wake-up) into a clear failure.
    let (resolved, watchdog) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = watchdog.recv_timeout(Duration::from_secs(30)) {
            eprintln!(
                "async_wait: wait_for_all_async has not resolved in 30 s: awaiting it blocked \
                 the runtime's thread, or its wake-up was lost"
            );
            std::process::exit(1);
        }
    });
    engine.wait_for_all_async().await?;
    drop(resolved);
    let ticks = ticker.await?;
    let message = result_data.lock().unwrap().clone();
    println!("   the ticker ticked {ticks} times, then opened the gate; `after gate` {message}");
    assert_eq!(message, "ran after the gate opened");

    // Many tasks may await vars at once; none of them holds a thread while it waits.
    let waits: Vec<_> = [gate, result]
        .into_iter()
        .map(|var| tokio::spawn(engine.wait_for_var_async(var)))
        .collect();
    for wait in waits {
        wait.await??;
    }
    Ok(())
}
