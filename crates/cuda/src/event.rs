//! [`Event`]: the CUDA event recorded on a GPU worker's stream after its ops, recycled through
//! the worker's [`EventPool`].
//!
//! An event recorded on a stream after an op's work covers the op: other streams wait for it
//! (`fence.rs`) and the completer waits for it (`completer.rs`); when one is recorded is the
//! stream's tail's choice (`tail.rs`). Creating and destroying events on the op path costs more
//! than the launches they fence, as the threads that create and destroy them contend inside the
//! driver (`docs/decisions.md`, "Events recycled per stream"). So each worker keeps a pool: an
//! event is created once, and when its last holder (the completer, the stream's tail, which keeps
//! its last few, a worker whose stream waits for it, or `CudaRun::stream_wait`) drops it, it goes
//! back to the pool, to be recorded again on the worker's stream or a side stream of the same
//! context (`side_stream.rs`).
//!
//! # Why recording a recycled event is safe
//!
//! An event is recorded again only once nothing refers to it: no completer will wait for it
//! and no op will make its stream wait for it. A stream wait that was already enqueued on it
//! waits for the record made before that call, which a later record does not change (CUDA's
//! rule for `cuStreamWaitEvent`), and a host wait on it ended before its holder dropped it.
//!
//! # Flags
//!
//! The events are created with `CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING`: the
//! completer sleeps in the driver while it waits rather than spinning, and the events record
//! no timestamps, which would cost each record a write the engine never reads. cudarc's flag
//! type names one flag at a time, so the events are made through the driver's own call, and
//! this module owns them.

use std::sync::Arc;

use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::{CudaContext, CudaStream, DriverError, result};
use depengine_sync::{Mutex, lock};

use crate::current::MadeCurrent;

/// Free events a pool keeps; past this, an event dropped is destroyed. The events out are the
/// tail's last few (`tail.rs`), those of the ops the completer holds, and those of stream waits
/// in progress: a burst past this many returns the rest to the driver.
const MAX_FREE: usize = 1024;

/// A CUDA event handle.
#[derive(Clone, Copy)]
struct RawEvent(sys::CUevent);

// SAFETY: a CUDA event handle is a driver object that any thread may pass to the driver, whose
// API is thread-safe (cudarc's own `CudaEvent` is `Send` and `Sync` on the same ground); each
// call site makes current the context its call needs.
unsafe impl Send for RawEvent {}
// SAFETY: as for `Send`: the handle is only passed to the driver, which synchronizes its own
// use of the object.
unsafe impl Sync for RawEvent {}

/// The recycled events of one worker's stream and its side streams: see the module
/// documentation.
pub(crate) struct EventPool {
    context: Arc<CudaContext>,
    /// Events recorded before and no longer referred to. Pushed by whichever thread drops an
    /// [`Event`], popped by whichever records one on the stream or a side stream (`tail.rs`,
    /// `side_stream.rs`).
    free: Mutex<Vec<RawEvent>>,
}

impl EventPool {
    /// An empty pool for the streams of `context`.
    pub(crate) fn new(context: Arc<CudaContext>) -> Arc<Self> {
        Arc::new(EventPool {
            context,
            free: Mutex::new(Vec::new()),
        })
    }

    /// Records an event of the pool (a free one, or a new one) on `stream`, after the work
    /// launched on it so far. `stream` must belong to the pool's context (the same driver
    /// context, whichever `CudaContext` value made it).
    pub(crate) fn record(self: &Arc<Self>, stream: &CudaStream) -> Result<Event, DriverError> {
        debug_assert_eq!(
            stream.context().cu_ctx(),
            self.context.cu_ctx(),
            "a stream of another context"
        );
        // Not cudarc's bind, which would return an error another call stored (`stray.rs`).
        let _current = MadeCurrent::new(&self.context)?;
        let popped = lock(&self.free).pop();
        let raw = if let Some(raw) = popped {
            raw
        } else {
            let mut raw = std::ptr::null_mut();
            let flags = CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32
                | CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            // SAFETY: `raw` is a valid place for the handle, and the pool's context is current
            // (bound above), so the event is created in it.
            unsafe { sys::cuEventCreate(&raw mut raw, flags) }.result()?;
            RawEvent(raw)
        };
        // Made before the record, so that a failed record returns the event to the pool.
        let event = Event {
            raw,
            pool: Arc::clone(self),
        };
        // SAFETY: the event is alive (owned by `event`) and referred to by nothing else (see
        // "Why recording a recycled event is safe"); both it and `stream` belong to the pool's
        // context, which is current.
        unsafe { result::event::record(raw.0, stream.cu_stream()) }?;
        Ok(event)
    }

    /// The context the pool's events belong to.
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// Destroys `raw` (an event of the pool's context); a failure, which belongs to no op, is
    /// reported as a warning (`stray.rs`).
    fn destroy(&self, raw: RawEvent) {
        // Made current here, on whichever thread drops the event, and the context that
        // thread had, if any, made current again after.
        let current = MadeCurrent::new(&self.context);
        // SAFETY: `raw` was created in the pool's context, made current above, and nothing
        // refers to it any more.
        let destroyed = unsafe { result::event::destroy(raw.0) };
        if let Err(error) = current.map(drop).and(destroyed) {
            tracing::warn!(target: "depengine_cuda", %error, "destroying a CUDA event failed");
        }
    }
}

impl std::fmt::Debug for EventPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventPool")
            .field("free", &lock(&self.free).len())
            .finish_non_exhaustive()
    }
}

impl Drop for EventPool {
    fn drop(&mut self) {
        // Every `Event` holds the pool: these are all the pool's events.
        let free = std::mem::take(&mut *lock(&self.free));
        for raw in free {
            self.destroy(raw);
        }
    }
}

/// An event of an [`EventPool`], recorded on a stream of the pool's context; it returns to the
/// pool when dropped.
pub(crate) struct Event {
    raw: RawEvent,
    pool: Arc<EventPool>,
}

impl Event {
    /// The driver's handle: valid while `self` is.
    pub(crate) fn cu_event(&self) -> sys::CUevent {
        self.raw.0
    }

    /// The context the event belongs to.
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        self.pool.context()
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let mut free = lock(&self.pool.free);
        if free.len() < MAX_FREE {
            free.push(self.raw);
        } else {
            drop(free);
            self.pool.destroy(self.raw);
        }
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("raw", &self.raw.0)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu_or_skip::context_or_skip;

    #[test]
    fn a_dropped_event_is_recorded_again_for_the_next_op() {
        let Some(context) = context_or_skip() else {
            return;
        };
        let stream = context.new_stream().unwrap();
        let pool = EventPool::new(Arc::clone(&context));
        let first = pool.record(&stream).unwrap();
        let handle = first.cu_event();
        let second = pool.record(&stream).unwrap();
        assert_ne!(
            second.cu_event(),
            handle,
            "an event in use was handed out again"
        );
        stream.synchronize().unwrap();
        drop(first);
        assert_eq!(lock(&pool.free).len(), 1);
        let third = pool.record(&stream).unwrap();
        assert_eq!(third.cu_event(), handle, "the free event was not reused");
        stream.synchronize().unwrap();
        drop((second, third));
        assert_eq!(lock(&pool.free).len(), 2);
        // Past `MAX_FREE` free events, the ones dropped are destroyed.
        let many: Vec<Event> = (0..=MAX_FREE)
            .map(|_| pool.record(&stream).unwrap())
            .collect();
        stream.synchronize().unwrap();
        drop(many);
        assert_eq!(lock(&pool.free).len(), MAX_FREE);
        drop(pool);
        context.check_err().unwrap();
    }
}
