//! `Engine::dump_pending`: the DOT picture of a known stalled graph, parsed back, has exactly
//! the expected nodes and edges; an idle engine dumps an empty digraph; labels are escaped.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::{KINDS, engine, held_async_op, within};
use depengine::{Completion, Engine, FnProperty, Var};

/// The quoted strings of one DOT line, unescaped (`\"`, `\\`, `\n`).
fn quoted(line: &str) -> Vec<String> {
    let mut strings = Vec::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut text = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => text.push('\n'),
                    Some(other) => text.push(other),
                    None => {}
                },
                c => text.push(c),
            }
        }
        strings.push(text);
    }
    strings
}

/// The dump's edges as (from label, to label, edge label), node ids replaced by the nodes'
/// labels (an op's label without its id, which is checked against the node id instead).
fn edges(dot: &str) -> BTreeSet<(String, String, String)> {
    let lines: Vec<&str> = dot.lines().collect();
    assert_eq!(lines.first(), Some(&"digraph pending {"), "{dot}");
    assert_eq!(lines.last(), Some(&"}"), "{dot}");
    let mut labels = BTreeMap::new();
    let mut edges = Vec::new();
    for line in &lines[1..lines.len() - 1] {
        assert!(line.starts_with("  \"") && line.ends_with("];"), "{line}");
        let strings = quoted(line);
        if line.contains("\" -> \"") {
            assert_eq!(strings.len(), 3, "{line}");
            edges.push((strings[0].clone(), strings[1].clone(), strings[2].clone()));
        } else {
            assert_eq!(strings.len(), 2, "{line}");
            let (id, mut label) = (strings[0].clone(), strings[1].clone());
            if let Some(op) = id.strip_prefix("op ") {
                let suffix = format!(" (op#{op})");
                assert!(label.ends_with(&suffix), "{line}");
                label.truncate(label.len() - suffix.len());
            }
            assert!(labels.insert(id, label).is_none(), "one node per id: {dot}");
        }
    }
    let label = |id: &String| {
        labels
            .get(id)
            .cloned()
            .unwrap_or_else(|| panic!("{id}: {dot}"))
    };
    let set: BTreeSet<_> = edges
        .iter()
        .map(|(from, to, edge)| (label(from), label(to), edge.clone()))
        .collect();
    assert_eq!(set.len(), edges.len(), "no edge twice: {dot}");
    set
}

fn dump(engine: &Engine) -> String {
    let mut out = Vec::new();
    engine.dump_pending(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// An async op reading `var`, held by its `Completion`.
fn held_read(engine: &Engine, var: Var) -> Completion {
    let (tx, rx) = std::sync::mpsc::channel();
    engine
        .op("reader")
        .reads([var])
        .prop(FnProperty::Async)
        .push_async(move |_, done| tx.send(done).unwrap())
        .unwrap();
    rx.recv().unwrap()
}

fn edge(from: &str, to: &str, label: &str) -> (String, String, String) {
    (from.to_owned(), to.to_owned(), label.to_owned())
}

#[test]
fn a_stalled_graph_dumps_exactly_its_waits_and_holders() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let weights = engine.new_var_named("weights").unwrap();
            let bias = engine.new_var_named("bias").unwrap();
            let unnamed = engine.new_var().unwrap();
            let idle = engine.new_var_named("idle").unwrap();
            let writer = held_async_op(&engine, weights);
            let reader = held_read(&engine, unnamed);
            let push = |name: &'static str, reads: &[Var], writes: &[Var]| {
                engine
                    .op(name)
                    .reads(reads)
                    .writes(writes)
                    .push_sync(|_| {})
                    .unwrap();
            };
            // `bias` grants its write to `scale`, which `weights` holds back.
            push("scale", &[weights], &[bias]);
            push("update", &[], &[weights]);
            push("log", &[bias], &[]);
            push("clear", &[], &[unnamed]);
            push("mix", &[bias, unnamed], &[]);
            push("touch", &[], &[idle]);
            engine.wait_for_var(idle).unwrap();

            let dot = dump(&engine);
            let c = format!("#{}.{}", unnamed.index(), unnamed.generation());
            let expected: BTreeSet<_> = [
                edge("weights", "running write", "held by"),
                edge("scale", "weights", "1: read"),
                edge("update", "weights", "2: write"),
                edge("bias", "scale", "held by"),
                edge("log", "bias", "1: read"),
                edge("mix", "bias", "2: read"),
                edge(&c, "1 running read", "held by"),
                edge("clear", &c, "1: write"),
                edge("mix", &c, "2: read"),
            ]
            .into_iter()
            .collect();
            assert_eq!(edges(&dot), expected, "{kind}: {dot}");
            // Deterministic: the same state, the same text.
            assert_eq!(dump(&engine), dot, "{kind}");

            writer.ok();
            reader.ok();
            engine.wait_for_all().unwrap();
            assert_eq!(dump(&engine), "digraph pending {\n}\n", "{kind}");
        });
    }
}

#[test]
fn an_idle_engine_dumps_an_empty_digraph() {
    for kind in KINDS {
        let engine = engine(kind, 1);
        assert_eq!(dump(&engine), "digraph pending {\n}\n", "{kind}");
        let var = engine.new_var_named("v").unwrap();
        engine.op("op").writes([var]).push_sync(|_| {}).unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(dump(&engine), "digraph pending {\n}\n", "{kind}");
    }
}

#[test]
fn names_are_quoted_and_escaped() {
    let engine = engine(depengine::EngineKind::ThreadedPerDevice, 1);
    let name = "say \"hi\"\\\nthere";
    let var = engine.new_var_named(name).unwrap();
    let done = held_async_op(&engine, var);
    engine
        .op("a \"quoted\" op")
        .reads([var])
        .push_sync(|_| {})
        .unwrap();
    let dot = dump(&engine);
    assert!(
        dot.contains("label=\"say \\\"hi\\\"\\\\\\nthere\"]"),
        "{dot}"
    );
    assert!(dot.contains("label=\"a \\\"quoted\\\" op (op#"), "{dot}");
    let expected: BTreeSet<_> = [
        edge(name, "running write", "held by"),
        edge("a \"quoted\" op", name, "1: read"),
    ]
    .into_iter()
    .collect();
    assert_eq!(edges(&dot), expected, "{dot}");
    done.ok();
    engine.wait_for_all().unwrap();
}
