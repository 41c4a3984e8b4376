//! Named vars, and errors that name what the user knows: `var "weights" (#0.1)` for a named
//! var, `var #0.1` for another, and the op whose push failed.

use std::sync::mpsc;

use crate::common::{KINDS, engine};
use depengine::{Context, EngineError, EngineKind, Var};

/// How errors show `var`, created with `name`.
fn label(var: Var, name: &str) -> String {
    format!("var \"{name}\" (#{}.{})", var.index(), var.generation())
}

#[test]
fn a_var_keeps_the_name_it_was_created_with() {
    let engine = engine(EngineKind::ThreadedPerDevice, 1);
    let weights = engine.new_var_named("weights").unwrap();
    let owned = engine.new_var_named(format!("layer{}", 3)).unwrap();
    let plain = engine.new_var().unwrap();
    assert_eq!(engine.var_name(weights).as_deref(), Some("weights"));
    assert_eq!(engine.var_name(owned).as_deref(), Some("layer3"));
    assert_eq!(engine.var_name(plain), None);
    // Another engine's var is not ours to name, even in the same slot.
    let other = engine_with_vars(1);
    assert_eq!(
        (other.index(), other.generation()),
        (weights.index(), weights.generation())
    );
    assert_eq!(engine.var_name(other), None);
    // Deleted, the handle keeps its name for errors.
    engine.delete_var(weights, || {}).unwrap();
    assert_eq!(engine.var_name(weights).as_deref(), Some("weights"));
    let error = engine
        .op("late")
        .writes([weights])
        .push_sync(|_| {})
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("op `late`: {} was deleted", label(weights, "weights"))
    );
}

/// The `n`th var of a fresh engine (in the slot, and of the generation, of any engine's `n`th
/// var).
fn engine_with_vars(n: usize) -> Var {
    let engine = engine(EngineKind::Naive, 1);
    let vars: Vec<Var> = (0..n).map(|_| engine.new_var().unwrap()).collect();
    vars[n - 1]
}

#[test]
fn push_errors_name_the_var_and_the_op() {
    for kind in KINDS {
        let engine = engine(kind, 1);
        let weights = engine.new_var_named("weights").unwrap();
        let plain = engine.new_var().unwrap();

        let error = engine
            .op("sum")
            .reads([weights, weights])
            .push_sync(|_| {})
            .unwrap_err();
        assert!(
            matches!(&error, EngineError::DuplicateVar { var, var_name: Some(name), op: Some(op), .. }
                if *var == weights && &**name == "weights" && op == "sum"),
            "{kind}: {error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "op `sum`: {} is listed twice in the same access list of one op",
                label(weights, "weights")
            )
        );

        let error = engine
            .op(format!("update {}", 7))
            .reads([plain])
            .writes([plain])
            .push_sync(|_| {})
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "op `update 7`: var #{}.{} is both read and written by one op (list it only as \
                 a write)",
                plain.index(),
                plain.generation()
            ),
            "{kind}: an unnamed var shows its slot and generation"
        );

        let foreign = engine_with_vars(1);
        let message = engine
            .op("mixed")
            .reads([foreign])
            .push_sync(|_| {})
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("op `mixed`: var #")
                && message.ends_with("belongs to another engine"),
            "{kind}: {message}"
        );

        // A device that no machine has (the last id the engine accepts): refused with or
        // without the `cuda` feature and a GPU.
        let message = engine
            .op("on the gpu")
            .on(Context::gpu(63))
            .writes([weights])
            .push_sync(|_| {})
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("op `on the gpu`: gpu(63)"),
            "{kind}: {message}"
        );

        let error = engine
            .operator("reusable")
            .reads([weights])
            .writes([weights])
            .build_sync(|_| {})
            .unwrap_err();
        assert!(
            error.to_string().starts_with(&format!(
                "op `reusable`: {} is both read",
                label(weights, "weights")
            )),
            "{kind}: {error}"
        );
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn wait_errors_name_the_var() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let (a, b) = (
            engine.new_var_named("activations").unwrap(),
            engine.new_var_named("gradients").unwrap(),
        );
        let (tx, rx) = mpsc::channel();
        let inner = engine.clone();
        engine
            .op("waits inside")
            .writes([a])
            .push_sync(move |_| {
                let own = inner.wait_for_var(a).unwrap_err().to_string();
                // A child that needs `a`, which this op holds: waiting for it never returns.
                inner.op("child").reads([a]).writes([b]).push_sync(|_| {})?;
                let cycle = inner.wait_for_var(b).unwrap_err().to_string();
                tx.send((own, cycle))?;
                Ok(())
            })
            .unwrap();
        let (own, cycle) = rx.recv().unwrap();
        assert_eq!(
            own,
            format!(
                "waiting for {} from inside an op that uses it would deadlock",
                label(a, "activations")
            ),
            "{kind}"
        );
        assert!(
            cycle.starts_with(&format!(
                "waiting for {} from inside an op would deadlock",
                label(b, "gradients")
            )),
            "{kind}: {cycle}"
        );
        engine.wait_for_all().unwrap();
    }
}
