//! [`Lazy`]: a value created on first use by a fallible initializer, then read without a lock.

use depengine_sync::{Mutex, OnceLock, lock};

pub(crate) struct Lazy<T> {
    cell: OnceLock<T>,
    init: Mutex<()>,
}

impl<T> Lazy<T> {
    pub(crate) fn new() -> Self {
        Lazy {
            cell: OnceLock::new(),
            init: Mutex::new(()),
        }
    }

    /// The value, if it was created.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        self.cell.get()
    }

    /// The value, created by `init` if this is the first successful call.
    pub(crate) fn get_or_try_init<E>(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        if let Some(value) = self.cell.get() {
            return Ok(value);
        }
        let _guard = lock(&self.init);
        if let Some(value) = self.cell.get() {
            return Ok(value);
        }
        let value = init()?;
        Ok(self.cell.get_or_init(|| value))
    }
}
