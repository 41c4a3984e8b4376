//! What an op is: its name, the record the graph stores for it (function, context, route), the
//! [`Completion`] an async op completes, and the shared part of a reusable operator.

pub(crate) mod completion;
pub(crate) mod operator;
pub(crate) mod record;
