//! `Engine::dump_pending`: a picture of what is pending, as Graphviz DOT.
//!
//! The graph lists its busy vars (`Graph::busy_vars`: each var's holder and the ops waiting
//! on it, in push order); this module names them as the user knows them (var names, op names
//! read from the waiting ops' records) and writes one digraph:
//!
//! - a node per busy var (`"var 3.0"`, an ellipse labelled with its name, or `#3.0` without
//!   one), with an edge `var -> holder` labelled "held by" to what holds it: the op, when the
//!   graph still holds it (a write granted to an op that waits for another var), else a node
//!   of its own (`"var 3.0 held"`, dashed: "running write" or "N running reads", and the var
//!   its op waits for when that op is blocked in a `wait_for_var` inside its function);
//! - a node per waiting op (`"op 5.1"`, labelled with its name and id), with an edge
//!   `op -> var` for each var it waits on, labelled with its place in that var's queue and its
//!   access (`1: write`).
//!
//! Nodes come first (vars by slot, then ops by id), then the edges (by var, in queue order),
//! so two dumps of the same state are the same text. Labels are quoted and escaped. The graph
//! is read one var at a time, not atomically (see `Graph::busy_vars`): on an engine that is
//! stalled, the case this is for, the picture is exact.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};

use depengine_graph::{Access, BusyVar, Holder, OpId, Var};

use crate::error::VarLabel;
use crate::run::EngineState;

/// Writes the DOT picture of `state`'s pending ops to `out` (see the module documentation).
pub(crate) fn write_pending<W: Write + ?Sized>(state: &EngineState, out: &mut W) -> io::Result<()> {
    let graph = state.graph();
    let busy = graph.busy_vars();
    // The waiting ops' labels, read once per op; an op released since the listing is left out.
    let mut ops: BTreeMap<OpId, Option<String>> = BTreeMap::new();
    let holders = busy.iter().filter_map(|var| match var.holder {
        Holder::Write { op } => op,
        Holder::Reads(_) | Holder::Launched(_) => None,
    });
    let waiting = busy
        .iter()
        .flat_map(|var| var.waiting.iter().map(|op| op.id));
    for id in waiting.chain(holders) {
        ops.entry(id).or_insert_with(|| {
            graph.inspect_op(id, |payload| format!("{} ({id})", payload.name()))
        });
    }
    let named = |id: &OpId| matches!(ops.get(id), Some(Some(_)));
    let var_label = |var: Var| match state.var_names().get(var) {
        Some(name) => name.to_string(),
        None => format!("#{}.{}", var.index(), var.generation()),
    };

    writeln!(out, "digraph pending {{")?;
    for BusyVar {
        var,
        holder,
        deleted,
        ..
    } in &busy
    {
        let mut label = var_label(*var);
        if *deleted {
            label.push_str("\n(deleted)");
        }
        writeln!(
            out,
            "  {} [shape=ellipse, label={}];",
            VarNode(*var),
            Quoted(&label)
        )?;
        if let Holder::Write { op: Some(op) } = holder
            && named(op)
        {
            continue;
        }
        writeln!(
            out,
            "  {} [shape=box, style=dashed, label={}];",
            HolderNode(*var),
            Quoted(&running_holder(state, *var, *holder))
        )?;
    }
    for (id, label) in &ops {
        if let Some(label) = label {
            writeln!(
                out,
                "  {} [shape=box, label={}];",
                OpNode(*id),
                Quoted(label)
            )?;
        }
    }
    for busy in &busy {
        match busy.holder {
            Holder::Write { op: Some(op) } if named(&op) => writeln!(
                out,
                "  {} -> {} [label=\"held by\"];",
                VarNode(busy.var),
                OpNode(op)
            )?,
            _ => writeln!(
                out,
                "  {} -> {} [label=\"held by\"];",
                VarNode(busy.var),
                HolderNode(busy.var)
            )?,
        }
        for (place, op) in busy.waiting.iter().enumerate() {
            if !named(&op.id) {
                continue;
            }
            let access = match op.access {
                Access::Read => "read",
                Access::Write => "write",
            };
            writeln!(
                out,
                "  {} -> {} [label=\"{}: {access}\"];",
                OpNode(op.id),
                VarNode(busy.var),
                place + 1
            )?;
        }
    }
    writeln!(out, "}}")
}

/// The label of what holds `var` when the graph does not hold that op: the kind of hold, and
/// the var its op waits for if it is blocked in a `wait_for_var` inside its function.
fn running_holder(state: &EngineState, var: Var, holder: Holder) -> String {
    let held_by = match holder {
        Holder::Write { .. } => "running write".to_owned(),
        Holder::Reads(reads) if reads.get() == 1 => "1 running read".to_owned(),
        Holder::Reads(reads) => format!("{reads} running reads"),
        Holder::Launched(ops) if ops.get() == 1 => "1 launched device op".to_owned(),
        Holder::Launched(ops) => format!("{ops} launched device ops"),
    };
    match state.blocked_waits().holder_waits_for(var) {
        Some(waited_for) => {
            let name = state.var_names().get(waited_for);
            format!(
                "{held_by}\nblocked in wait_for_var({})",
                VarLabel(waited_for, &name)
            )
        }
        None => held_by,
    }
}

/// A var's node id: `"var 3.0"` (slot, generation).
struct VarNode(Var);

impl fmt::Display for VarNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"var {}.{}\"", self.0.index(), self.0.generation())
    }
}

/// The node id of what holds a var: `"var 3.0 held"`.
struct HolderNode(Var);

impl fmt::Display for HolderNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"var {}.{} held\"", self.0.index(), self.0.generation())
    }
}

/// A waiting op's node id: `"op 5.1"` (slot, generation).
struct OpNode(OpId);

impl fmt::Display for OpNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"op {}.{}\"", self.0.index(), self.0.generation())
    }
}

/// A DOT quoted string: `"` and `\` escaped, a line break as DOT's `\n`, other control
/// characters as spaces (so each statement stays on one line).
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"")?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                c if c.is_control() => f.write_str(" ")?,
                c => write!(f, "{c}")?,
            }
        }
        f.write_str("\"")
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Quoted;

    #[test]
    fn quoted_strings_escape_quotes_backslashes_and_line_breaks() {
        assert_eq!(Quoted("plain").to_string(), "\"plain\"");
        assert_eq!(
            Quoted("a \"b\" \\c\nd\te").to_string(),
            "\"a \\\"b\\\" \\\\c\\nd e\""
        );
    }
}
