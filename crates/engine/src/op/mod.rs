//! What an op is: its name, the record the graph stores for it (function, context, route), the
//! [`Completion`] an async op completes, the shared part of a reusable operator, what an op's
//! function may return, and the ops of a bulk segment.

pub(crate) mod completion;
pub(crate) mod operator;
pub(crate) mod record;
pub(crate) mod result;
pub(crate) mod segment;
