//! Where each op runs: the worker block of its context and property, per engine kind, seen
//! through the names of the threads that run the ops.

use std::sync::mpsc;

use crate::common::engine;
use depengine::{Context, Engine, EngineError, EngineKind, FnProperty};

/// What `probe` returns on the thread that runs one op pushed with `context` and `property`.
fn on_worker<R: Send + 'static>(
    engine: &Engine,
    context: Context,
    property: FnProperty,
    probe: fn() -> R,
) -> R {
    let (tx, rx) = mpsc::channel();
    engine
        .op("where")
        .on(context)
        .prop(property)
        .push_sync(move |_| {
            // The receiver waits below: the send cannot fail.
            let _ = tx.send(probe());
        })
        .unwrap();
    engine.wait_for_all().unwrap();
    rx.recv().unwrap()
}

/// The name of the thread that ran one op pushed with `context` and `property`.
fn runs_on(engine: &Engine, context: Context, property: FnProperty) -> String {
    on_worker(engine, context, property, || {
        std::thread::current().name().unwrap_or("").to_owned()
    })
}

#[test]
fn per_device_runs_each_device_on_its_own_block() {
    let engine = engine(EngineKind::ThreadedPerDevice, 2);
    let here = std::thread::current().name().unwrap_or("").to_owned();
    let cases = [
        (Context::cpu(0), FnProperty::Normal, "depengine-cpu0-"),
        (Context::cpu(3), FnProperty::Normal, "depengine-cpu3-"),
        (
            Context::cpu_pinned(3),
            FnProperty::Normal,
            "depengine-cpu3-",
        ),
        (
            Context::cpu(3),
            FnProperty::CpuPrioritized,
            "depengine-cpu-priority-",
        ),
    ];
    for (context, property, prefix) in cases {
        let name = runs_on(&engine, context, property);
        assert!(
            name.starts_with(prefix),
            "{context} {property:?} ran on `{name}`"
        );
    }
    // `DeleteVar` ops, ready at push time, run on the pushing thread.
    assert_eq!(
        runs_on(&engine, Context::cpu(0), FnProperty::DeleteVar),
        here
    );
    let error = engine
        .op("too far")
        .on(Context::cpu(64))
        .push_sync(|_| Ok(()))
        .unwrap_err();
    assert!(
        matches!(error, EngineError::DeviceIdOutOfRange { limit: 64, .. }),
        "{error}"
    );
}

#[test]
fn pooled_runs_copies_on_the_copy_block() {
    let engine = engine(EngineKind::ThreadedPooled, 2);
    let normal = runs_on(&engine, Context::cpu(5), FnProperty::Normal);
    assert!(
        normal.starts_with("depengine-pooled-") && !normal.starts_with("depengine-pooled-copy"),
        "a normal op ran on `{normal}`"
    );
    for property in [FnProperty::CopyToGpu, FnProperty::CopyFromGpu] {
        let name = runs_on(&engine, Context::cpu(0), property);
        assert!(
            name.starts_with("depengine-pooled-copy-"),
            "{property:?} ran on `{name}`"
        );
    }
}

#[test]
fn naive_runs_everything_on_the_pushing_thread() {
    let engine = engine(EngineKind::Naive, 2);
    let here = std::thread::current().name().unwrap_or("").to_owned();
    for (context, property) in [
        (Context::cpu(0), FnProperty::Normal),
        (Context::cpu(7), FnProperty::CpuPrioritized),
        (Context::cpu(0), FnProperty::CopyToGpu),
    ] {
        assert_eq!(
            runs_on(&engine, context, property),
            here,
            "{context} {property:?}"
        );
    }
}

/// The cores the thread running an op pushed with `context` and `property` may run on.
fn cores_of_worker(engine: &Engine, context: Context, property: FnProperty) -> usize {
    on_worker(engine, context, property, || {
        core_affinity::get_core_ids().map_or(0, |cores| cores.len())
    })
}

/// `EngineConfig::pin_workers`: the CPU block's workers each run on one core; the priority
/// block's workers are left where they are. (Skipped on a machine that cannot report
/// affinity, or with a single core, where pinning changes nothing.)
#[test]
fn pinned_cpu_workers_run_on_one_core_each() {
    let cores = core_affinity::get_core_ids().map_or(0, |cores| cores.len());
    if cores < 2 {
        eprintln!("skipped: {cores} core(s) visible, pinning is not observable");
        return;
    }
    for kind in [EngineKind::ThreadedPerDevice, EngineKind::ThreadedPooled] {
        let pinned = Engine::new(
            depengine::EngineConfig::default()
                .kind(kind)
                .cpu_worker_threads(2)
                .pin_workers(true),
        )
        .unwrap();
        assert_eq!(
            cores_of_worker(&pinned, Context::cpu(0), FnProperty::Normal),
            1,
            "{kind:?}"
        );
        let free = Engine::new(
            depengine::EngineConfig::default()
                .kind(kind)
                .cpu_worker_threads(2),
        )
        .unwrap();
        assert_eq!(
            cores_of_worker(&free, Context::cpu(0), FnProperty::Normal),
            cores,
            "{kind:?}"
        );
    }
    let pinned = Engine::new(
        depengine::EngineConfig::default()
            .kind(EngineKind::ThreadedPerDevice)
            .cpu_worker_threads(2)
            .pin_workers(true),
    )
    .unwrap();
    assert_eq!(
        cores_of_worker(&pinned, Context::cpu(0), FnProperty::CpuPrioritized),
        cores
    );
}
