//! Typed data (`Data<T>`): ops that read and write it through `&T` / `&mut T`, guards and
//! `take` from outside, failures poisoning it, its release, and misuse.
#![allow(clippy::doc_markdown, reason = "tests")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{KINDS, engine, held_async_op};
use depengine::{Engine, EngineConfig, EngineError, EngineKind, TakeError};

#[test]
fn ops_read_and_write_typed_values_in_push_order() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let x = engine.data(vec![1_u64; 16]).unwrap();
        let y = engine.data_named("y", 0_u64).unwrap();
        let plain = engine.new_var().unwrap();
        let rounds = if cfg!(miri) { 4 } else { 50 };
        for round in 0..rounds {
            engine
                .op("scale")
                .write(&x)
                .push_sync(move |_, x| x.iter_mut().for_each(|v| *v += round))
                .unwrap();
            engine
                .op("sum")
                .read(&x)
                .write(&y)
                .reads([plain])
                .push_sync(|_, (x, y)| *y = x.iter().sum())
                .unwrap();
        }
        let expected = 16 * (1 + (0..rounds).sum::<u64>());
        assert_eq!(*engine.read(&y).unwrap(), expected, "{kind:?}");
        assert_eq!(engine.take(x).unwrap()[0], 1 + (0..rounds).sum::<u64>());
    }
}

/// A sync typed op's function finds each data's value on the data's var, among the op's vars
/// (`data/access.rs`): whatever plain vars the op names beside its data (replaced after data
/// were named, too), in whatever order of reads and writes the data are named, each reference
/// is that of its own data, of its own type; also for the ops of a bulk segment, whose vars
/// are positions in the segment's (a member's read may be one of the segment's writes).
#[test]
fn typed_accesses_are_matched_to_their_data_beside_plain_vars() {
    for kind in KINDS {
        for bulk in [0, 16] {
            let engine = Engine::new(
                EngineConfig::default()
                    .kind(kind)
                    .cpu_worker_threads(2)
                    .bulk_size(bulk),
            )
            .unwrap();
            let count = engine.data(1_u64).unwrap();
            let text = engine.data(String::from("x")).unwrap();
            let bytes = engine.data(vec![0_u8]).unwrap();
            let step = engine.data(2_i32).unwrap();
            let [p, q, r] = [(); 3].map(|()| engine.new_var().unwrap());
            // Holds every op back until all are pushed, so that a bulk engine joins them.
            let gate = held_async_op(&engine, p);
            for _ in 0..3 {
                // Plain reads replaced after a data read (`p` and `q` stay, before `count`),
                // plain writes named between data writes.
                engine
                    .op("mixed")
                    .reads([q])
                    .write(&text)
                    .read(&count)
                    .reads([p, q])
                    .writes([r])
                    .write(&bytes)
                    .read(&step)
                    .push_sync(|_, (text, count, bytes, step)| {
                        text.push_str(&count.to_string());
                        bytes.push(u8::try_from(*step).unwrap());
                    })
                    .unwrap();
                // Join the segment: their vars are the first op's, and they write only what
                // that op writes. The second reads a value the first op writes (a read whose
                // var is among the segment's writes).
                engine
                    .op("log count")
                    .reads([r])
                    .write(&bytes)
                    .read(&count)
                    .push_sync(|_, (bytes, count)| bytes.push(u8::try_from(*count).unwrap()))
                    .unwrap();
                engine
                    .op("log text")
                    .read(&text)
                    .write(&bytes)
                    .push_sync(|_, (text, bytes)| bytes.push(u8::try_from(text.len()).unwrap()))
                    .unwrap();
            }
            if bulk > 0 && kind != EngineKind::Naive {
                // The gate, and the nine ops in one segment.
                assert_eq!(engine.stats().pending_ops, 2, "{kind:?}: one segment");
            }
            gate.ok();
            assert_eq!(
                *engine.read(&text).unwrap(),
                "x111",
                "{kind:?}, bulk {bulk}"
            );
            assert_eq!(
                *engine.read(&bytes).unwrap(),
                [0, 2, 1, 2, 2, 1, 3, 2, 1, 4],
                "{kind:?}, bulk {bulk}"
            );
            assert_eq!(engine.take(count).unwrap(), 1, "{kind:?}, bulk {bulk}");
        }
    }
}

#[test]
fn concurrent_reads_see_the_same_value_and_writes_wait_for_them() {
    let engine = engine(depengine::EngineKind::ThreadedPerDevice, 4);
    let data = engine.data(7_u64).unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    for _ in 0..8 {
        let seen = Arc::clone(&seen);
        engine
            .op("read")
            .read(&data)
            .push_sync(move |_, value| {
                std::thread::sleep(Duration::from_millis(2));
                assert_eq!(*value, 7);
                seen.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
    }
    let seen_by_write = Arc::clone(&seen);
    engine
        .op("write")
        .write(&data)
        .push_sync(move |_, value| {
            assert_eq!(seen_by_write.load(Ordering::Relaxed), 8);
            *value = 8;
        })
        .unwrap();
    assert_eq!(*engine.read(&data).unwrap(), 8);
}

#[test]
fn an_async_op_completes_its_held_data_from_another_thread() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let (a, b) = (engine.data(20_u64).unwrap(), engine.data(0_u64).unwrap());
        engine
            .op("add")
            .read(&a)
            .write(&b)
            .push_async(|_, mut held| {
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    let (a, b) = held.refs();
                    *b = *a + 22;
                    held.ok();
                });
            })
            .unwrap();
        engine
            .op("double")
            .write(&b)
            .push_sync(|_, b| *b *= 2)
            .unwrap();
        assert_eq!(*engine.read(&b).unwrap(), 84, "{kind:?}");
    }
}

#[test]
fn a_failed_writer_poisons_the_data_until_a_read_returns_the_failure() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let data = engine.data(1_u64).unwrap();
        engine
            .op("fails")
            .write(&data)
            .push_sync(|_, value| {
                *value = 2;
                Err("no".into())
            })
            .unwrap();
        engine
            .op("skipped")
            .write(&data)
            .push_sync(|_, _| unreachable!("a write of failed data does not run"))
            .unwrap();
        let error = engine.read(&data).unwrap_err();
        assert!(error.to_string().contains("op `fails` failed"), "{error}");
        // Returned once and cleared, as `wait_for_var` does; the value is as the op left it.
        assert_eq!(*engine.read(&data).unwrap(), 2, "{kind:?}");
    }
}

#[test]
fn a_panicking_op_and_a_write_guard_dropped_by_a_panic_poison_the_data() {
    let engine = engine(depengine::EngineKind::ThreadedPerDevice, 1);
    let data = engine.data(0_u64).unwrap();
    engine
        .op("panics")
        .write(&data)
        .push_sync(|_, _| panic!("boom"))
        .unwrap();
    assert!(matches!(engine.read(&data), Err(EngineError::OpFailed(_))));

    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut guard = engine.write(&data).unwrap();
        *guard = 5;
        panic!("while writing");
    }));
    assert!(caught.is_err());
    let error = engine.read(&data).unwrap_err();
    assert!(error.to_string().contains("half-written"), "{error}");
    assert_eq!(*engine.read(&data).unwrap(), 5);
}

#[test]
fn guards_hold_the_data_against_ops() {
    let engine = engine(depengine::EngineKind::ThreadedPerDevice, 2);
    let data = engine.data(0_u64).unwrap();
    let mut guard = engine.write(&data).unwrap();
    engine
        .op("after the guard")
        .write(&data)
        .push_sync(|_, value| *value *= 10)
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // The op waits for the guard: the value is still ours to change.
    *guard += 4;
    drop(guard);
    let reader = engine.read(&data).unwrap();
    assert_eq!(*reader, 40);
    // A second reader alongside the first.
    assert_eq!(*engine.read(&data).unwrap(), 40);
}

#[test]
fn read_async_resolves_with_any_executor() {
    let engine = engine(depengine::EngineKind::ThreadedPerDevice, 1);
    let data = engine.data(String::from("a")).unwrap();
    engine
        .op("slow append")
        .write(&data)
        .push_sync(|_, text| {
            std::thread::sleep(Duration::from_millis(10));
            text.push('b');
        })
        .unwrap();
    let text = futures::executor::block_on(async {
        engine.read_async(&data).await.map(|guard| guard.clone())
    });
    assert_eq!(text.unwrap(), "ab");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    engine
        .op("fails")
        .write(&data)
        .push_sync(|_, _| Err("no".into()))
        .unwrap();
    let failed = runtime.block_on(async { engine.read_async(&data).await.map(|_| ()) });
    assert!(matches!(failed, Err(EngineError::OpFailed(_))));
    let text =
        runtime.block_on(async { engine.read_async(&data).await.map(|guard| guard.clone()) });
    assert_eq!(text.unwrap(), "ab");
}

#[test]
fn a_read_future_dropped_before_it_resolves_releases_the_data() {
    let engine = engine(depengine::EngineKind::ThreadedPerDevice, 1);
    let data = engine.data(0_u64).unwrap();
    let guard = engine.write(&data).unwrap();
    let future = engine.read_async(&data);
    drop(guard);
    drop(future);
    engine
        .op("then")
        .write(&data)
        .push_sync(|_, v| *v = 1)
        .unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(engine.take(data).unwrap(), 1);
}

#[test]
fn take_needs_the_last_handle_and_returns_a_failed_value_with_its_failure() {
    let engine = engine(depengine::EngineKind::ThreadedPerDevice, 1);
    let data = engine.data(vec![1, 2, 3]).unwrap();
    let other = data.clone();
    let Err(TakeError::Refused { error, data }) = engine.take(data) else {
        panic!("a shared value cannot be taken");
    };
    assert!(matches!(error, EngineError::DataShared));
    drop(other);
    engine
        .op("fails")
        .write(&data)
        .push_sync(|_, values| {
            values.push(4);
            Err("late".into())
        })
        .unwrap();
    match engine.take(data) {
        Err(TakeError::Failed { error, value }) => {
            assert!(error.to_string().contains("late"), "{error}");
            assert_eq!(value, [1, 2, 3, 4]);
        }
        other => panic!("expected the failure with the value, got {other:?}"),
    }
    assert_eq!(engine.stats().live_vars, 0);
}

/// Counts its drops.
struct Tracked(Arc<AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_value_is_dropped_once_after_the_last_handle_and_its_ops() {
    for kind in KINDS {
        let drops = Arc::new(AtomicUsize::new(0));
        let engine = engine(kind, 2);
        let data = engine.data(Tracked(Arc::clone(&drops))).unwrap();
        // An async op holds the gate until the test completes it.
        let gate = engine.new_var().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        engine
            .op("gate")
            .writes([gate])
            .push_async(move |_, completion| sender.send(completion).unwrap())
            .unwrap();
        engine
            .op("waits for the gate")
            .reads([gate])
            .write(&data)
            .push_sync(|_, _| {})
            .unwrap();
        drop(data);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            0,
            "dropped while an op uses it"
        );
        receiver.recv().unwrap().ok();
        engine.wait_for_all().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1, "{kind:?}");
        assert_eq!(engine.stats().live_vars, 1, "the data's var is deleted");
    }
}

#[test]
fn values_outliving_the_engine_or_deleted_by_hand_are_dropped() {
    let drops = Arc::new(AtomicUsize::new(0));
    let engine = engine(depengine::EngineKind::ThreadedPerDevice, 1);
    let outliving = engine.data(Tracked(Arc::clone(&drops))).unwrap();
    let deleted = engine.data(Tracked(Arc::clone(&drops))).unwrap();
    engine.delete_var(deleted.var(), || {}).unwrap();
    let error = engine
        .op("after")
        .write(&deleted)
        .push_sync(|_, _| {})
        .unwrap_err();
    assert!(matches!(error, EngineError::DeletedVar { .. }), "{error}");
    drop(deleted);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "kept until the engine drops"
    );
    drop(engine);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(outliving);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

#[test]
fn misuse_gets_typed_errors_and_loses_nothing() {
    let first = engine(depengine::EngineKind::ThreadedPerDevice, 1);
    let second = engine(depengine::EngineKind::ThreadedPerDevice, 1);
    let data = first.data_named("weights", 1_u64).unwrap();

    let error = second
        .op("foreign")
        .read(&data)
        .push_sync(|_, _| {})
        .unwrap_err();
    assert!(matches!(error, EngineError::ForeignData { .. }), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("op `foreign`: the data of var #"),
        "{error}"
    );
    assert!(matches!(
        second.read(&data),
        Err(EngineError::ForeignData { .. })
    ));
    let Err(TakeError::Refused { data, .. }) = second.take(data) else {
        panic!("foreign take");
    };

    let error = first
        .op("twice")
        .read(&data)
        .write(&data)
        .push_sync(|_, _| {})
        .unwrap_err();
    assert!(
        matches!(error, EngineError::ReadWriteConflict { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("\"weights\""), "{error}");
    let error = first
        .op("twice")
        .write(&data)
        .write(&data)
        .push_sync(|_, _| {})
        .unwrap_err();
    assert!(matches!(error, EngineError::DuplicateVar { .. }), "{error}");

    let inner = first.clone();
    let inside = data.clone();
    let (sender, receiver) = std::sync::mpsc::channel();
    first
        .op("guard inside")
        .push_sync(move |_| {
            sender
                .send(inner.read(&inside).map(|_| ()).unwrap_err())
                .unwrap();
        })
        .unwrap();
    assert!(matches!(
        receiver.recv().unwrap(),
        EngineError::DataInsideOp
    ));

    first.clone().shutdown().unwrap();
    let refused = first.data(vec![9_u8; 3]).unwrap_err();
    assert!(matches!(refused.error, EngineError::ShutDown));
    assert_eq!(refused.value, [9, 9, 9]);
    assert_eq!(
        first.take(data).unwrap(),
        1,
        "taking back works after a shutdown"
    );
}

/// A var deleted by hand refuses `take`, on a shut-down engine as on a live one, and the
/// handle comes back.
#[test]
fn take_of_data_deleted_by_hand_is_refused_after_a_shutdown_too() {
    for shut_down in [false, true] {
        let engine = engine(EngineKind::ThreadedPerDevice, 1);
        let data = engine.data(1_u64).unwrap();
        engine.delete_var(data.var(), || {}).unwrap();
        if shut_down {
            engine.clone().shutdown().unwrap();
        }
        match engine.take(data) {
            Err(TakeError::Refused {
                error: EngineError::DeletedVar { .. },
                ..
            }) => {}
            other => panic!("shut down: {shut_down}: expected a refusal, got {other:?}"),
        }
    }
}

/// `take` whose hold was skipped (the data failed) and whose engine shut down meanwhile
/// returns the data's failure, not the shutdown; one whose var was deleted by hand meanwhile
/// is refused, with the handle back.
#[test]
fn take_reports_a_shutdown_or_a_deletion_during_its_wait_as_such() {
    for delete in [false, true] {
        let engine = engine(EngineKind::ThreadedPerDevice, 1);
        let data = engine.data(1_u64).unwrap();
        let var = data.var();
        let held = held_async_op(&engine, var);
        let taker = {
            let engine = engine.clone();
            std::thread::spawn(move || engine.take(data))
        };
        while engine.stats().waiting_ops == 0 {
            std::thread::yield_now();
        }
        let closer = if delete {
            engine.delete_var(var, || {}).unwrap();
            None
        } else {
            let closer = engine.clone();
            let closer = std::thread::spawn(move || closer.shutdown());
            while !engine.is_shut_down() {
                std::thread::yield_now();
            }
            Some(closer)
        };
        held.fail("broken");
        match (delete, taker.join().unwrap()) {
            (true, Err(TakeError::Refused { error, .. })) => {
                assert!(matches!(error, EngineError::DeletedVar { .. }), "{error}");
            }
            // The failure goes to the take, or, taken by the shutdown's wait first, to it.
            (false, Err(TakeError::Failed { error, value })) => {
                assert!(matches!(error, EngineError::OpFailed(_)), "{error}");
                assert_eq!(value, 1);
            }
            (false, Ok(value)) => assert_eq!(value, 1),
            (_, other) => panic!("deleted: {delete}: got {other:?}"),
        }
        if let Some(closer) = closer {
            let _ = closer.join().unwrap();
        }
    }
}

#[test]
fn an_op_takes_up_to_eight_typed_accesses() {
    let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2)).unwrap();
    let data: Vec<_> = (0..8_u64).map(|i| engine.data(i).unwrap()).collect();
    engine
        .op("eight")
        .read(&data[0])
        .read(&data[1])
        .read(&data[2])
        .read(&data[3])
        .read(&data[4])
        .read(&data[5])
        .read(&data[6])
        .write(&data[7])
        .push_sync(|_, (a, b, c, d, e, f, g, h)| *h += a + b + c + d + e + f + g)
        .unwrap();
    assert_eq!(*engine.read(&data[7]).unwrap(), 28);
}

/// The handles, guards, futures and async tokens cross threads as `&T` and `&mut T` would.
#[test]
fn handles_guards_and_tokens_are_send_and_sync_as_their_references_are() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<depengine::Data<std::cell::Cell<u64>>>();
    sync::<depengine::Data<std::cell::Cell<u64>>>();
    send::<depengine::WriteGuard<'static, std::cell::Cell<u64>>>();
    send::<depengine::ReadGuard<'static, u64>>();
    sync::<depengine::ReadGuard<'static, u64>>();
    sync::<depengine::WriteGuard<'static, u64>>();
    send::<depengine::ReadData<'static, u64>>();
    send::<depengine::Held<(depengine::ReadAccess<u64>, depengine::WriteAccess<u64>)>>();
    send::<depengine::Held<depengine::WriteAccess<std::cell::Cell<u64>>>>();
}
