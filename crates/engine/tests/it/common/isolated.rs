//! Tests that need a process to themselves. The test binary runs its tests side by side on the
//! threads of one process, so a test that sets process-wide state (a global `tracing`
//! subscriber, environment variables), measures it (the resident memory, allocations), or that
//! process-wide caches would disturb (`tracing`'s callsite interest), runs again alone in a
//! child process: this test binary once more, with `--exact` naming the test, on one thread.
//! The child runs the test's body; the parent fails unless the child ran exactly that test and
//! it passed, and prints the child's output (shown for a failing test, or with `--nocapture`).
//!
//! A test without scenarios starts with `if !alone(test_name!(its_name)) { return; }`; one
//! that runs its child several ways, or reads what it wrote, uses [`run_child`] and
//! [`scenario`].

use std::process::Command;

/// Set in a child process: the name of the test it runs, a space, and its scenario.
const CHILD: &str = "DEPENGINE_TEST_CHILD";

/// The name libtest gives the test function `$name` of the calling module: the module path
/// without the crate's name, then the function's (`tracing::a_global_subscriber_...`).
macro_rules! test_name {
    ($name:ident) => {{
        // The test function is there, in this module.
        let _: fn() = $name;
        $crate::common::isolated::without_crate(concat!(module_path!(), "::", stringify!($name)))
    }};
}
pub(crate) use test_name;

/// `path` without its first segment (the crate's name).
pub fn without_crate(path: &'static str) -> &'static str {
    path.split_once("::").map_or(path, |(_, rest)| rest)
}

/// The scenario given to this process by [`run_child`] if it is the child that runs `test`;
/// `None` elsewhere (in the harness's own process).
pub fn scenario(test: &str) -> Option<String> {
    let value = std::env::var(CHILD).ok()?;
    let (name, scenario) = value.split_once(' ')?;
    (name == test).then(|| scenario.to_owned())
}

/// What a child process wrote.
pub struct Output {
    pub stdout: String,
    pub stderr: String,
}

/// Runs `test` (its name in this binary, [`test_name!`]) alone in a child process, in
/// `scenario` ([`scenario`] returns it there) and with `envs` set; fails unless the child ran
/// exactly that test, ignored or not, and it passed. Returns what the child wrote, which it
/// also prints.
pub fn run_child(test: &str, scenario: &str, envs: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("the test binary");
    let output = Command::new(exe)
        .args([test, "--exact", "--include-ignored", "--nocapture"])
        .arg("--test-threads=1")
        .env(CHILD, format!("{test} {scenario}"))
        .envs(envs.iter().copied())
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    print!("{stdout}");
    eprint!("{stderr}");
    // The child ran the test (the filter matched it), not zero tests, and it passed.
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed;"),
        "`{test}` in a child process (scenario `{scenario}`, {envs:?}): {}\n\
         --- its stdout:\n{stdout}\n--- its stderr:\n{stderr}",
        output.status
    );
    Output { stdout, stderr }
}

/// Whether the calling test is to run its body here: `true` in the child process that runs
/// `test` alone; in the harness's process, runs that child ([`run_child`], fails unless it
/// passed) and returns `false`.
#[must_use]
pub fn alone(test: &str) -> bool {
    if scenario(test).is_some() {
        return true;
    }
    run_child(test, "", &[]);
    false
}
