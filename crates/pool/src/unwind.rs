//! What happens to a panic in a task nobody waits for.

use crate::job::Panic;
use std::sync::Arc;

/// Receives the payload of a panic in a detached [`spawn`](crate::ThreadPool::spawn)ed
/// task. The worker that ran the task survives and goes on with the next one.
///
/// # Examples
///
/// ```
/// use depengine_pool::{PanicHandler, ThreadPool, panic_message};
/// use std::any::Any;
/// use std::sync::{Arc, mpsc};
///
/// let (tx, rx) = mpsc::channel();
/// let handler: PanicHandler = Arc::new(move |payload: Box<dyn Any + Send>| {
///     tx.send(panic_message(&*payload).to_owned()).unwrap();
/// });
/// let pool = ThreadPool::builder()
///     .threads(1)
///     .panic_handler(move |payload| handler(payload))
///     .build()?;
/// pool.spawn(|| panic!("task failed"));
/// assert_eq!(rx.recv().unwrap(), "task failed");
/// // The worker survived the panic and runs the next task.
/// assert_eq!(pool.install(|| 6 * 7), 42);
/// # Ok::<(), depengine_pool::BuildError>(())
/// ```
pub type PanicHandler = Arc<dyn Fn(Panic) + Send + Sync>;

/// The default handler: a `tracing` error event with the panic message.
#[expect(clippy::needless_pass_by_value, reason = "the PanicHandler signature")]
pub(crate) fn log_panic(payload: Panic) {
    tracing::error!(
        target: "depengine_pool",
        message = panic_message(&*payload),
        "a spawned task panicked"
    );
}

/// The message of a panic payload, when it is a string.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(message) = payload.downcast_ref::<&'static str>() {
        message
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message
    } else {
        "<non-string panic payload>"
    }
}
