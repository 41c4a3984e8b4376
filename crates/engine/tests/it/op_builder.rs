//! The op builder owns its var lists: it can be kept in a variable, changed in steps, and given
//! vars in any collection.
#![allow(
    clippy::needless_borrows_for_generic_args,
    reason = "the borrowed forms (`&[a]`, `&vec`) are what users write and what these tests check"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::{KINDS, engine};
use depengine::Var;

#[test]
fn a_builder_kept_in_a_variable_takes_temporary_lists() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
        let ran = Arc::new(AtomicUsize::new(0));
        let mut op = engine.op("stepwise");
        op = op.reads(&vec![a]);
        op = op.writes(vec![b]);
        let counter = Arc::clone(&ran);
        op.push_sync(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        engine.wait_for_var(b).unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 1, "{kind}");
    }
}

#[test]
fn lists_come_from_any_collection_and_the_last_call_wins() {
    let engine = engine(depengine::EngineKind::ThreadedPerDevice, 2);
    let vars: Vec<Var> = (0..6).map(|_| engine.new_var().unwrap()).collect();
    let [v0, v1, v2, v3, v4, v5] = vars[..] else {
        unreachable!()
    };
    engine
        .op("array")
        .reads([v0, v1])
        .writes(&[v2])
        .push_sync(|_| {})
        .unwrap();
    engine
        .op("empty")
        .reads(&[])
        .writes(&[])
        .push_sync(|_| {})
        .unwrap();
    engine
        .op("iterator")
        .reads(vars.iter().take(2))
        .writes(vars[2..].iter().copied())
        .push_sync(|_| {})
        .unwrap();
    // Beyond the inline capacity.
    engine.op("six").writes(&vars).push_sync(|_| {}).unwrap();
    // Replaced, not appended: with both lists, `v0` would be read and written (an error).
    engine
        .op("replaced")
        .writes([v0])
        .writes([v3, v4])
        .reads([v0])
        .reads([v5])
        .push_sync(|_| {})
        .unwrap();
    engine.wait_for_all().unwrap();
    let error = engine
        .op("conflict")
        .reads([v1])
        .writes(vec![v1])
        .push_sync(|_| {})
        .unwrap_err();
    assert!(
        matches!(error, depengine::EngineError::ReadWriteConflict { .. }),
        "{error}"
    );
}
