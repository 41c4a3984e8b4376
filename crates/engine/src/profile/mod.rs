//! The profiler: what it records per op ([`report`]) and how ([`recorder`]).

pub(crate) mod recorder;
pub(crate) mod report;
