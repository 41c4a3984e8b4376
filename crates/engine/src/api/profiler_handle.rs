//! [`Profiler`]: the user's handle on an engine's profiler (`profile/` records the ops).

use crate::profile::recorder::{ProfileMode, ProfilerState};
use crate::profile::report::Profile;

/// The profiler of an [`Engine`](crate::Engine), from [`Engine::profiler`](crate::Engine::profiler).
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let var = engine.new_var()?;
/// engine.profiler().start();
/// for step in 0..3 {
///     engine.op("step").writes([var]).push_sync(move |_| {
///         std::thread::sleep(std::time::Duration::from_millis(step));
///     })?;
/// }
/// engine.wait_for_all()?;
/// let profile = engine.profiler().take();
/// assert_eq!(profile.summary()[0].runs, 3);
/// println!("{profile}"); // per-name table: calls, total, mean, min, max
/// // profile.write_chrome_trace(std::fs::File::create("trace.json")?)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct Profiler<'e> {
    state: &'e ProfilerState,
}

impl<'e> Profiler<'e> {
    pub(crate) fn new(state: &'e ProfilerState) -> Self {
        Profiler { state }
    }

    /// Starts recording (ops whose function starts from now on; a running profiler stays on).
    pub fn start(&self) {
        self.state.set_running(true);
    }

    /// Stops recording; ops already started are still recorded when they complete. What was
    /// recorded stays until [`take`](Self::take).
    pub fn stop(&self) {
        self.state.set_running(false);
    }

    /// Whether it records.
    pub fn is_running(&self) -> bool {
        self.state.is_running()
    }

    /// Which ops it records.
    pub fn mode(&self) -> ProfileMode {
        self.state.mode()
    }

    /// Sets which ops it records.
    pub fn set_mode(&self, mode: ProfileMode) {
        self.state.set_mode(mode);
    }

    /// The ops recorded since the last `take` (those completed by now), in completion order.
    /// Call [`Engine::wait_for_all`](crate::Engine::wait_for_all) first to include every op
    /// pushed so far.
    #[must_use = "take empties the recorded ops: keep or write the profile"]
    pub fn take(&self) -> Profile {
        self.state.take()
    }
}

impl std::fmt::Debug for Profiler<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("running", &self.is_running())
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}
