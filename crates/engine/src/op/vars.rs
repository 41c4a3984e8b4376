//! [`OpVars`]: the vars of the op whose function runs, as that function may look at them. A
//! typed op's function finds its data here (`data/access.rs`): each data's var carries the
//! pointer to the value's cell (`Graph::new_attached_var`), so the function's record holds no
//! pointer per access, and a small typed op's function fits in the record (`sync_fn.rs`).

use std::ptr::NonNull;

use depengine_graph::Access;

// Defined with what an op is (and re-exported by `data/access.rs`), so that the code that runs
// ops sizes its inline lists by it without importing the typed-data layer above it.
/// The most typed accesses one op takes: its access list is a tuple of at most this many.
///
/// ```compile_fail,E0599
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// let d: Vec<_> = (0..9_u64).map(|i| engine.data(i)).collect::<Result<_, _>>()?;
/// let op = engine.op("nine").read(&d[0]).read(&d[1]).read(&d[2]).read(&d[3]);
/// let op = op.read(&d[4]).read(&d[5]).read(&d[6]).read(&d[7]).read(&d[8]); // a ninth
/// # Ok::<(), depengine::EngineError>(())
/// ```
pub const MAX_ACCESSES: usize = 8;

/// The vars of the op being run (an op, or one op of a bulk segment), in the order it named
/// them: its reads, then its writes. Implemented where ops run (`run/`), for the duration of
/// a sync function's call.
pub(crate) trait OpVars {
    /// The attachment of the var that the op named `from_end + 1`-th last in its list of
    /// `access`es (`0`: the last read, or the last write); `None` if the list is shorter or
    /// that var carries none.
    ///
    /// The op holds the var while its function runs, so the var cannot be reclaimed and the
    /// word is the one it was created with (`Graph::attachment`).
    fn attachment(&self, access: Access, from_end: usize) -> Option<NonNull<()>>;
}

/// The vars of an op that names none: for a sync function called with no op around it.
#[cfg(all(test, not(loom)))]
pub(crate) struct NoVars;

#[cfg(all(test, not(loom)))]
impl OpVars for NoVars {
    fn attachment(&self, _: Access, _: usize) -> Option<NonNull<()>> {
        None
    }
}
