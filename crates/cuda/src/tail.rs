//! [`StreamTail`]: a GPU worker's stream as the ops launched on it, numbered, and the events
//! that mark how far its work has gone, recorded only when someone needs one.
//!
//! A stream runs its work in order, so one event covers every op launched before it. The
//! worker numbers each op it launches (its place, the op's fence: `fence.rs`) and records an
//! event after it unless its launch released exactly one GPU op, kept to run next on this
//! worker, and fewer than [`UNRECORDED_MAX`] ops in a row went without one: a chain makes one
//! event every so many links, a branch or the chain's end one at once. Between, the ops need
//! one only if someone waits for them:
//!
//! - another stream, that waits for a fence: [`covering`](StreamTail::covering) gives the
//!   oldest of the last events that covers the fence's op, or records one now, on this
//!   stream, from the waiting worker's thread (it then waits for the later work too);
//! - the completer, whose newest ops came with no event (`completer.rs`): it records one when
//!   the worker has handed nothing for a while, so an op's completion never waits for a worker
//!   that blocks.
//!
//! # Why an event recorded by another thread covers the op
//!
//! The worker launches an op's work on the stream, then numbers it under the tail's lock, then
//! hands the number on (in the op's fence, or with the op to the completer). Whoever records
//! under the same lock after that sees the number, and records after the work: the launch was
//! made before the lock was released. An event is labelled with the count of ops numbered when
//! it is recorded, never more, so a later caller reuses it only for ops it covers.

use std::collections::VecDeque;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DriverError};
use depengine_device::DeviceError;
use depengine_sync::{Mutex, lock};

use crate::completer::{PointSource, device_error};
use crate::event::{Event, EventPool};
use crate::host_wait;

/// Ops a worker launches in a row, with more kept to run on it, before it records an event
/// anyway: its completer finds an event that fired at least this often.
pub(crate) const UNRECORDED_MAX: u64 = 8;

/// Events a tail keeps, newest last: a waiter takes the oldest that covers its fence, so that
/// it waits for as little of the stream's later work as it can.
const KEPT_EVENTS: usize = 8;

/// See the module documentation. Shared by its worker, its completer and the workers that
/// wait for its fences.
pub(crate) struct StreamTail {
    stream: Arc<CudaStream>,
    events: Arc<EventPool>,
    state: Mutex<Numbered>,
}

/// The ops numbered on a stream, and its latest events.
struct Numbered {
    /// Ops launched and numbered so far: the next one's number.
    launched: u64,
    /// The events recorded on the stream lately, oldest first, each with how many ops it
    /// covers (the ops numbered when it was recorded).
    recent: VecDeque<(u64, Arc<Event>)>,
}

impl Numbered {
    /// How many ops the newest event covers.
    fn covered(&self) -> u64 {
        self.recent.back().map_or(0, |(covers, _)| *covers)
    }
}

/// An event on a stream and how many of its ops it covers (numbers `0..covers`).
pub(crate) struct Covering {
    pub(crate) event: Arc<Event>,
    pub(crate) covers: u64,
}

impl StreamTail {
    /// The tail of `stream`, whose events come from `events` (of the stream's context).
    pub(crate) fn new(stream: Arc<CudaStream>, events: Arc<EventPool>) -> Arc<Self> {
        Arc::new(StreamTail {
            stream,
            events,
            state: Mutex::new(Numbered {
                launched: 0,
                recent: VecDeque::with_capacity(KEPT_EVENTS),
            }),
        })
    }

    /// The stream.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The recycled events of the stream's context.
    pub(crate) fn events(&self) -> &Arc<EventPool> {
        &self.events
    }

    /// Numbers the op whose work the calling worker just launched: its number, and how many
    /// ops before it no event covers.
    pub(crate) fn launch(&self) -> (u64, u64) {
        let mut state = lock(&self.state);
        let seq = state.launched;
        state.launched += 1;
        (seq, seq - state.covered())
    }

    /// An event after the work of op `seq` (numbered by [`launch`](Self::launch)): the oldest
    /// kept that covers it, else one recorded now.
    pub(crate) fn covering(&self, seq: u64) -> Result<Covering, DriverError> {
        let mut state = lock(&self.state);
        if let Some((covers, event)) = state.recent.iter().find(|(covers, _)| *covers > seq) {
            return Ok(Covering {
                event: Arc::clone(event),
                covers: *covers,
            });
        }
        self.record(&mut state)
    }

    /// Records an event after every op numbered so far, the newest from now on.
    fn record(&self, state: &mut Numbered) -> Result<Covering, DriverError> {
        let event = Arc::new(self.events.record(&self.stream)?);
        if state.recent.len() == KEPT_EVENTS {
            state.recent.pop_front();
        }
        state.recent.push_back((state.launched, Arc::clone(&event)));
        Ok(Covering {
            event,
            covers: state.launched,
        })
    }
}

impl PointSource<Arc<Event>> for StreamTail {
    /// An event after every op numbered so far: after the newest, which covers the others.
    fn record(&self) -> Result<Arc<Event>, DeviceError> {
        let newest = lock(&self.state).launched.saturating_sub(1);
        self.covering(newest)
            .map(|covering| covering.event)
            .map_err(device_error)
    }

    fn wait_all(&self) -> Result<(), DeviceError> {
        host_wait::stream(&self.stream).map_err(device_error)
    }
}

impl std::fmt::Debug for StreamTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamTail")
            .field("launched", &lock(&self.state).launched)
            .finish_non_exhaustive()
    }
}
