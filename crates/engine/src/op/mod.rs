//! What an op is: its name, the record the graph stores for it (function, context, route), the
//! [`Completion`] an async op completes, the shared part of a reusable operator, what an op's
//! function may return, the ops of a bulk segment, a captured plan (`plan.rs`) and its GPU ops
//! made device graphs (`gpu_graphs.rs`), how a sync op's function is stored (`sync_fn.rs`,
//! inline in the record when small), and what it sees of its vars (`vars.rs`).

pub(crate) mod block_key;
pub(crate) mod completion;
pub(crate) mod gpu_graphs;
pub(crate) mod plan;
pub(crate) mod record;
pub(crate) mod result;
pub(crate) mod segment;
#[allow(
    unsafe_code,
    reason = "a small op function stored in the record: its safety argument is sync_fn.rs"
)]
pub(crate) mod sync_fn;
pub(crate) mod vars;
