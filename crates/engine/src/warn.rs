//! How the engine tells the user what it cannot return as an error: a wait that stays blocked
//! (`wait/stall.rs`), a profile that the last clone's drop could not write
//! (`profile/recorder.rs`).
//!
//! A warning is a `WARN` event (target `depengine::stall` or `depengine::profiler`) when the
//! current `tracing` subscriber wants it; otherwise, and in particular with no subscriber
//! installed (the default), it is a line on stderr, `depengine: warning: ...`, so that a hang or
//! a lost profile is never silent. A program that collects `WARN` events from `depengine`
//! gets them there and nothing on stderr; one that filters them out gets stderr (to silence
//! stall warnings, set `EngineConfig::stall_warning` to `None`).

use std::fmt;
use std::io::Write as _;

/// The end of every stall warning: where to get the whole picture of what is pending.
pub(crate) const DUMP_HINT: &str =
    "Engine::dump_pending writes every pending op and what it waits for (Graphviz DOT)";

/// What a warning is about: its `tracing` target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topic {
    /// `depengine::stall`: a wait that stays blocked.
    Stall,
    /// `depengine::profiler`: the profiler's output.
    Profiler,
}

/// Warns the user about `message`: a `tracing` event if the subscriber wants it, else stderr.
#[cold]
pub(crate) fn warn(topic: Topic, message: fmt::Arguments<'_>) {
    // The targets are literals: `tracing`'s macros take them as constants.
    let delivered = match topic {
        Topic::Stall => {
            let wanted = tracing::enabled!(target: "depengine::stall", tracing::Level::WARN);
            if wanted {
                tracing::warn!(target: "depengine::stall", "{message}");
            }
            wanted
        }
        Topic::Profiler => {
            let wanted = tracing::enabled!(target: "depengine::profiler", tracing::Level::WARN);
            if wanted {
                tracing::warn!(target: "depengine::profiler", "{message}");
            }
            wanted
        }
    };
    if !delivered {
        // `writeln!`, not `eprintln!`: a closed stderr must not panic inside the engine.
        let _ = writeln!(std::io::stderr().lock(), "depengine: warning: {message}");
    }
}
