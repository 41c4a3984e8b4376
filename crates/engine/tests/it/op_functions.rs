//! What an op's function may return, written as a newcomer writes it: no annotations.
//!
//! This file only compiles where `|_| Ok(())` and friends infer their types (`IntoOpResult`);
//! the tests then check what each form makes of the op.

use std::fmt;

use crate::common::{KINDS, engine};
use depengine::{EngineError, FailureCause};

/// An error type of the user's own.
#[derive(Debug, PartialEq)]
struct OutOfMemory(usize);

impl fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "out of memory ({} bytes)", self.0)
    }
}

impl std::error::Error for OutOfMemory {}

fn allocate(bytes: usize) -> Result<Vec<u8>, OutOfMemory> {
    if bytes > 1 << 20 {
        Err(OutOfMemory(bytes))
    } else {
        Ok(vec![0; bytes])
    }
}

/// The user's error, as a failed op reports it.
fn cause_of(error: &EngineError) -> Option<&OutOfMemory> {
    match error {
        EngineError::OpFailed(failure) => match failure.cause() {
            FailureCause::Error(error) => error.downcast_ref(),
            _ => None,
        },
        _ => None,
    }
}

#[test]
fn sync_ops_return_unit_ok_or_any_error_through_question_mark() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let var = engine.new_var().unwrap();
        engine.op("unit").writes([var]).push_sync(|_| ()).unwrap();
        engine.op("block").writes([var]).push_sync(|_| {}).unwrap();
        engine.op("ok").writes([var]).push_sync(|_| Ok(())).unwrap();
        engine
            .op("small")
            .writes([var])
            .push_sync(|_| {
                allocate(16)?;
                Ok(())
            })
            .unwrap();
        assert!(engine.wait_for_var(var).is_ok(), "{kind}");

        engine
            .op("large")
            .writes([var])
            .push_sync(|_| {
                allocate(1 << 30)?;
                Ok(())
            })
            .unwrap();
        let error = engine.wait_for_var(var).unwrap_err();
        assert_eq!(cause_of(&error), Some(&OutOfMemory(1 << 30)), "{kind}");

        engine
            .op("message")
            .writes([var])
            .push_sync(|_| Err("no luck".into()))
            .unwrap();
        let error = engine.wait_for_var(var).unwrap_err();
        assert!(error.to_string().contains("no luck"), "{kind}: {error}");

        engine
            .op("typed")
            .writes([var])
            .push_sync(|_| allocate(1 << 21).map(drop).map_err(Into::into))
            .unwrap();
        let error = engine.wait_for_var(var).unwrap_err();
        assert_eq!(cause_of(&error), Some(&OutOfMemory(1 << 21)), "{kind}");
    }
}

#[test]
fn a_function_that_only_panics_needs_no_annotation() {
    let engine = engine(depengine::EngineKind::ThreadedPerDevice, 1);
    let var = engine.new_var().unwrap();
    engine
        .op("panics")
        .writes([var])
        .push_sync(|_| panic!("expected in this test"))
        .unwrap();
    let error = engine.wait_for_var(var).unwrap_err();
    assert!(
        error.to_string().contains("expected in this test"),
        "{error}"
    );
}

#[test]
fn operators_take_the_same_functions() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let var = engine.new_var().unwrap();
        let ok = engine
            .operator("ok")
            .writes([var])
            .build_sync(|_| Ok(()))
            .unwrap();
        let unit = engine
            .operator("unit")
            .writes([var])
            .build_sync(|_| {})
            .unwrap();
        let fails = engine
            .operator("fails")
            .writes([var])
            .build_sync(|_| {
                allocate(1 << 22)?;
                Ok(())
            })
            .unwrap();
        let context = depengine::Context::cpu(0);
        engine.push(&ok, context, 0).unwrap();
        engine.push(&unit, context, 0).unwrap();
        assert!(engine.wait_for_var(var).is_ok(), "{kind}");
        engine.push(&fails, context, 0).unwrap();
        let error = engine.wait_for_var(var).unwrap_err();
        assert_eq!(cause_of(&error), Some(&OutOfMemory(1 << 22)), "{kind}");
    }
}

#[test]
fn async_ops_complete_with_ok_or_a_typed_result() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let var = engine.new_var().unwrap();
        engine
            .op("ok")
            .writes([var])
            .push_async(|_, done| done.ok())
            .unwrap();
        assert!(engine.wait_for_var(var).is_ok(), "{kind}");
        engine
            .op("typed")
            .writes([var])
            .push_async(|_, done| done.complete(allocate(1 << 23).map(drop)))
            .unwrap();
        let error = engine.wait_for_var(var).unwrap_err();
        assert_eq!(cause_of(&error), Some(&OutOfMemory(1 << 23)), "{kind}");
    }
}
