//! [`StreamFence`]: the fence a GPU worker reports once an op's work was launched, and the waits
//! that order the work of the ops released behind it.
//!
//! An op's fence is its place on its worker's stream: the stream's tail and the op's number
//! there (`tail.rs`). The engine releases the GPU ops behind the op at once
//! (`depengine-device`'s `DeviceCompletion::launched`), each with the fences of the launched ops
//! it depends on; before running such an op, its worker makes its own stream wait for them
//! (`cuStreamWaitEvent` on an event that covers the fence: the device waits, not the host). A
//! stream runs its work in order, so
//!
//! - a fence of the worker's own stream needs no wait, and no event;
//! - of several fences of one stream, the newest covers the others: one wait per stream;
//! - a fence no newer than one the worker's stream already waited for is covered by that wait,
//!   since everything launched on the stream since runs after it ([`StreamOrder`] keeps, per
//!   other stream, the newest fence waited for).

use std::sync::Arc;

use cudarc::driver::sys::CUevent_wait_flags;
use cudarc::driver::{CudaStream, DriverError, result};
use depengine_device::Fence;

use crate::current::MadeCurrent;
use crate::event::Event;
use crate::host_wait;
use crate::tail::StreamTail;

/// The fence of a launched GPU op: its stream's tail, and its number there.
pub(crate) struct StreamFence {
    pub(crate) tail: Arc<StreamTail>,
    pub(crate) seq: u64,
}

/// A stream's identity, for [`StreamOrder`]: an `Arc` held in the order keeps its stream's
/// address from being reused by a new stream while the order still names it.
pub(crate) trait SameStream {
    fn same(&self, other: &Self) -> bool;
}

impl SameStream for Arc<CudaStream> {
    fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(self, other)
    }
}

/// What one worker's stream is ordered after (see the module documentation): per other stream
/// `S`, the newest fence its work waits for. Only its worker touches it.
#[derive(Debug)]
pub(crate) struct StreamOrder<S> {
    /// Per other stream, the newest of its fences this one waited for.
    waited: Vec<(S, u64)>,
}

impl<S> Default for StreamOrder<S> {
    fn default() -> Self {
        StreamOrder { waited: Vec::new() }
    }
}

impl<S: SameStream + Clone> StreamOrder<S> {
    /// Calls `wait` for each of `fences` that this stream `own` must wait for: not its own,
    /// the newest of its stream among `fences` (the first, of equal ones), and newer than what
    /// this stream waited for on that stream. A wait `wait` reports done (`Some(last)`, at least
    /// the fence's own place) covers its stream's fences up to `last` from then on. A fence with
    /// no place here (`Placed`) is skipped.
    fn wait_for<F: Placed<S>>(
        &mut self,
        own: &S,
        fences: &[F],
        mut wait: impl FnMut(&F) -> Option<u64>,
    ) {
        for (index, fence) in fences.iter().enumerate() {
            let Some((stream, seq)) = fence.place() else {
                continue;
            };
            if stream.same(own) {
                continue;
            }
            let newer_beside = fences.iter().enumerate().any(|(other, beside)| {
                beside.place().is_some_and(|(beside, later)| {
                    beside.same(stream) && (later > seq || (later == seq && other < index))
                })
            });
            if newer_beside {
                continue;
            }
            let waited = self.waited.iter_mut().find(|(known, _)| known.same(stream));
            if waited.as_ref().is_some_and(|(_, newest)| *newest >= seq) {
                continue;
            }
            if let Some(last) = wait(fence) {
                let last = last.max(seq);
                match waited {
                    Some((_, newest)) => *newest = last,
                    None => self.waited.push((stream.clone(), last)),
                }
            }
        }
    }
}

/// Where a fence was recorded, for [`StreamOrder`]: its stream and the op's number on that
/// stream (`tail.rs`); `None` for a fence of another backend (an engine has one, so none comes).
pub(crate) trait Placed<S> {
    fn place(&self) -> Option<(&S, u64)>;
}

impl Placed<Arc<CudaStream>> for Fence {
    fn place(&self) -> Option<(&Arc<CudaStream>, u64)> {
        let point = self.downcast_ref::<StreamFence>()?;
        Some((point.tail.stream(), point.seq))
    }
}

/// Makes `stream`'s next work start after each of `fences` of another stream, but for those
/// `order` finds covered ([`order_after`]: a host wait where CUDA refuses, not counted as
/// covering, so the next op waits again); only if that fails too is the error returned, the
/// op's own (`executor.rs` fails the op with it). The failure of the work behind a fence reaches
/// the ops behind it through the engine, which completes them with it (`docs/cuda.md`,
/// failures), whether or not their own work fails too (it does on the same device: CUDA's
/// errors are sticky within a context). Fences of another backend carry no order this backend
/// knows: there are none, as an engine has one backend.
pub(crate) fn wait_for(
    stream: &Arc<CudaStream>,
    order: &mut StreamOrder<Arc<CudaStream>>,
    fences: &[Fence],
) -> Result<(), DriverError> {
    let mut failed = Ok(());
    order.wait_for(stream, fences, |fence| {
        let point = fence.downcast_ref::<StreamFence>()?;
        let covering = point.tail.covering(point.seq);
        let event = covering.as_ref().map(|covering| &*covering.event);
        match order_after(stream, point.tail.stream(), event.map_err(|error| *error)) {
            // The event covers the stream's ops up to `covers - 1`.
            Ok(Ordered::OnDevice) => covering.ok().map(|covering| covering.covers - 1),
            Ok(Ordered::ByHost) => None,
            Err(error) => {
                failed = failed.and(Err(error));
                None
            }
        }
    });
    failed
}

/// How [`order_after`] ordered a stream after another's work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ordered {
    /// The stream waits on the device (`cuStreamWaitEvent`).
    OnDevice,
    /// CUDA refused that, and the calling thread waited until the work was done.
    ByHost,
}

/// Makes `waiting`'s next work start after the work before `event`, recorded on `on` (or, if
/// recording it failed, all the work queued on `on`): on the device, or where CUDA refuses, by
/// a host wait on this failure path only (warned), so that the order holds either way. If the
/// host wait fails too (as it must in a stream capture), the device's refusal, the cause, is
/// returned and the host wait's error warned. One mechanism for the engine's fence waits and
/// [`CudaRun::stream_wait`](crate::CudaRun::stream_wait).
pub(crate) fn order_after(
    waiting: &CudaStream,
    on: &CudaStream,
    event: Result<&Event, DriverError>,
) -> Result<Ordered, DriverError> {
    let (refused, host_waited) = match event {
        Ok(event) => match device_wait(waiting, event) {
            Ok(()) => return Ok(Ordered::OnDevice),
            Err(refused) => (refused, host_wait::event(event)),
        },
        Err(refused) => (refused, host_wait::stream(on)),
    };
    if let Err(error) = host_waited {
        tracing::warn!(
            target: "depengine_cuda",
            %error,
            "a host wait, in place of a stream wait CUDA refused, failed too",
        );
        return Err(refused);
    }
    tracing::warn!(
        target: "depengine_cuda",
        error = %refused,
        "a stream could not wait for another's work on the device; the thread waited for it",
    );
    Ok(Ordered::ByHost)
}

/// Makes `stream`'s next work wait (on the device) for `event`.
fn device_wait(stream: &CudaStream, event: &Event) -> Result<(), DriverError> {
    // Not cudarc's bind, which would return an error another call stored (`stray.rs`).
    let _current = MadeCurrent::new(stream.context())?;
    // SAFETY: both are alive (borrowed); the stream belongs to the context made current above,
    // and the event may belong to another (a fence of another GPU), which `cuStreamWaitEvent`
    // allows.
    unsafe {
        result::stream::wait_event(
            stream.cu_stream(),
            event.cu_event(),
            CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{Placed, SameStream, StreamOrder};

    /// A stand-in stream: its number.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Stream(u32);

    impl SameStream for Stream {
        fn same(&self, other: &Self) -> bool {
            self == other
        }
    }

    /// A stand-in fence: its stream and place there.
    impl Placed<Stream> for (Stream, u64) {
        fn place(&self) -> Option<(&Stream, u64)> {
            Some((&self.0, self.1))
        }
    }

    const OWN: Stream = Stream(0);

    /// The fences of `fences` that `order` waits for (each wait succeeds).
    fn waits(order: &mut StreamOrder<Stream>, fences: &[(Stream, u64)]) -> Vec<(Stream, u64)> {
        let mut waited = Vec::new();
        order.wait_for(&OWN, fences, |&fence| {
            waited.push(fence);
            Some(fence.1)
        });
        waited
    }

    #[test]
    fn one_wait_per_stream_for_its_newest_fence_and_none_for_its_own() {
        let mut order = StreamOrder::default();
        let fences = [
            (Stream(1), 3),
            (OWN, 9),
            (Stream(2), 1),
            (Stream(1), 5),
            (Stream(1), 5),
        ];
        assert_eq!(waits(&mut order, &fences), [(Stream(2), 1), (Stream(1), 5)]);
    }

    #[test]
    fn a_fence_an_earlier_wait_covers_is_skipped_and_a_newer_one_waited_for() {
        let mut order = StreamOrder::default();
        assert_eq!(waits(&mut order, &[(Stream(1), 4)]), [(Stream(1), 4)]);
        assert_eq!(waits(&mut order, &[(Stream(1), 4), (Stream(1), 2)]), []);
        assert_eq!(waits(&mut order, &[(Stream(1), 6)]), [(Stream(1), 6)]);
        assert_eq!(waits(&mut order, &[(Stream(1), 5)]), []);
        // Another stream's places are its own.
        assert_eq!(waits(&mut order, &[(Stream(2), 0)]), [(Stream(2), 0)]);
    }

    #[test]
    fn a_wait_on_an_event_that_covers_later_fences_covers_them_too() {
        let mut order = StreamOrder::default();
        order.wait_for(&OWN, &[(Stream(1), 2)], |_| Some(6));
        assert_eq!(waits(&mut order, &[(Stream(1), 5)]), []);
        assert_eq!(waits(&mut order, &[(Stream(1), 7)]), [(Stream(1), 7)]);
    }

    #[test]
    fn a_wait_that_failed_covers_nothing() {
        let mut order = StreamOrder::default();
        order.wait_for(&OWN, &[(Stream(1), 4)], |_| None);
        assert_eq!(waits(&mut order, &[(Stream(1), 4)]), [(Stream(1), 4)]);
    }
}
