//! [`VarNames`]: the names users give vars (`Engine::new_var_named`), for errors and warnings.
//!
//! A var is a `Copy` handle of 12 bytes that every op carries in its dependency list; a name
//! there would cost every op. So a name is stored once, here, when its var is created, and
//! read only to describe a var: in an [`EngineError`](crate::EngineError), a stall warning, a
//! `Debug` print. Nothing on an op's path touches this map.
//!
//! The map is keyed by the var's slot index and holds the slot's generation with the name, so
//! that a handle is named only by the var it was created as: a stale handle (its var deleted)
//! keeps its name until a named var takes the slot, and a var created without a name in a slot
//! that once held a named one has none. An entry is replaced, never added, when a named var
//! reuses its slot, so the map holds at most one entry per var slot the graph has: it grows
//! with the most vars live at once, not with the vars ever created.
//!
//! Threads: `new_var_named`'s callers insert; threads that build an error, a warning or a
//! `Debug` print look up. Both take the lock, on cold paths only.

use std::collections::HashMap;
use std::sync::Arc;

use depengine_graph::Var;
use depengine_sync::{Mutex, lock};

/// The names of an engine's vars (see the module documentation).
#[derive(Default)]
pub(crate) struct VarNames {
    /// Slot index -> (generation, name).
    names: Mutex<HashMap<u32, (u32, Arc<str>)>>,
}

impl VarNames {
    /// Names `var`, a var just created.
    pub(crate) fn insert(&self, var: Var, name: Arc<str>) {
        lock(&self.names).insert(var.index(), (var.generation(), name));
    }

    /// The name `var` was created with, if any. `var` must be a var of this engine (a foreign
    /// one would be looked up as the var of ours in its slot).
    pub(crate) fn get(&self, var: Var) -> Option<Arc<str>> {
        let names = lock(&self.names);
        let (generation, name) = names.get(&var.index())?;
        (*generation == var.generation()).then(|| Arc::clone(name))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use depengine_graph::Graph;

    use super::*;

    #[test]
    fn a_name_belongs_to_its_var_and_not_to_the_next_var_in_its_slot() {
        let graph: Graph<()> = Graph::new();
        let names = VarNames::default();
        let weights = graph.new_var().unwrap();
        let unnamed = graph.new_var().unwrap();
        names.insert(weights, Arc::from("weights"));
        assert_eq!(names.get(weights).as_deref(), Some("weights"));
        assert_eq!(names.get(unnamed), None);

        graph
            .delete_var(weights, || {})
            .unwrap()
            .call_if_reclaimed();
        // A stale handle keeps its name; the var that reuses the slot has none.
        let reused = graph.new_var().unwrap();
        assert_eq!(reused.index(), weights.index());
        assert_eq!(names.get(weights).as_deref(), Some("weights"));
        assert_eq!(names.get(reused), None);
        // A named var that reuses a slot replaces its entry.
        graph.delete_var(reused, || {}).unwrap().call_if_reclaimed();
        let bias = graph.new_var().unwrap();
        assert_eq!(bias.index(), weights.index());
        names.insert(bias, Arc::from("bias"));
        assert_eq!(names.get(bias).as_deref(), Some("bias"));
        assert_eq!(names.get(weights), None);
        assert_eq!(lock(&names.names).len(), 1);
    }
}
