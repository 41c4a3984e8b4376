//! [`Completer`]: the thread that completes a stream's ops, in stream order, once the device
//! has done their work.
//!
//! A GPU worker runs an op's function (which launches work on the worker's stream), and hands
//! the op's completion to its stream's completer, with an event recorded after it or, while its
//! chain goes on, none (`tail.rs`); then it takes its next op. A stream runs its work in order,
//! so its events fire in the order they were recorded, and each covers the ops before it: once
//! one has fired, every op handed over before it is done.
//!
//! # Batched completion
//!
//! Each round, the completer asks whether the *newest* event handed to it has fired: if so,
//! every op handed over up to it completes, with no further driver call. If not, it completes
//! the oldest ops whose events fired, one query each, up to the first that has not (an op with
//! no event completes with the next event's outcome): each event is queried at most once a
//! round. When nothing was done, it polls again with backoff (spins, then yields), so that work
//! of a few microseconds completes without a sleep and a wake-up; once the backoff is spent, it sleeps in the driver on the oldest event
//! (a blocking-sync event) instead of burning a core. If its newest ops came with no event and
//! the worker hands nothing more for [`WORKER_GRACE`], it first records one itself
//! ([`PointSource`]): the worker may be blocked in a function that waits for them.
//!
//! Each op takes the outcome of the query of the first event after it: when the newest query
//! reports an error, the ones before it are queried one by one, so that the error fails the
//! ops that event covers and no earlier one (a sticky fault, which every query reports, fails
//! each op pending). An error that cudarc stored on the context is no op's: the queries are the
//! driver's own (`host_wait.rs`).
//!
//! # Values dropped after an op's work
//!
//! A value handed over with an op ([`CudaRun::drop_after_completion`](crate::CudaRun)) is
//! dropped here once the op completed: a buffer an op replaced is freed only once the work that
//! used it is done, whatever stream freeing it is queued on.
//!
//! # Shutdown
//!
//! Dropping the completer completes every op handed to it (waiting for events after them,
//! recording one if they came with none), then joins the thread; dropped on that very thread
//! (by a completion that released the last `CudaRun` holding it), it lets the thread finish
//! alone.
//!
//! The engine never makes a GPU worker wait for the device (a blocking cudarc call inside an
//! op's function, such as a copy from pageable host memory, still waits), and no CUDA host
//! callback runs engine code (a host callback may not call CUDA, and the completion of an op
//! may dispatch a GPU op).

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc as StdArc;
use std::thread::JoinHandle;
use std::time::Duration;

use cudarc::driver::sys::CUresult;
use depengine_device::{DeviceCompletion, DeviceError};
use depengine_sync::{Arc, Backoff, Condvar, Mutex, lock, wait, wait_timeout};

use crate::event::Event;
use crate::host_wait;

/// A point in a stream's work that a completer waits for: an event recorded after an op's
/// launches (a stand-in in the tests).
pub(crate) trait StreamPoint: Send + 'static {
    /// `Ok(true)` once the work before the point is done, `Ok(false)` while it runs, or the
    /// device's error.
    fn passed(&self) -> Result<bool, DeviceError>;

    /// Waits, asleep, until the work before the point is done.
    fn wait(&self) -> Result<(), DeviceError>;
}

impl StreamPoint for StdArc<Event> {
    fn passed(&self) -> Result<bool, DeviceError> {
        host_wait::query(self).map_err(device_error)
    }

    fn wait(&self) -> Result<(), DeviceError> {
        host_wait::event(self).map_err(device_error)
    }
}

/// How long the completer, whose newest ops came with no point, waits for the worker's next op
/// (which may bring one) before it records a point itself: longer than a worker takes to run
/// an op's function, far shorter than a blocked one.
const WORKER_GRACE: Duration = Duration::from_micros(200);

/// Where the completer gets a point of its own, after every op handed to it: its stream's tail
/// (a stand-in in the tests).
pub(crate) trait PointSource<P>: Send + Sync + 'static {
    /// A point after all the work launched on the stream so far.
    fn record(&self) -> Result<P, DeviceError>;

    /// Waits until all the work launched on the stream so far is done: where `record` failed.
    fn wait_all(&self) -> Result<(), DeviceError>;
}

/// Values to drop once an op's work is done.
#[derive(Default)]
pub(crate) struct AfterWork(Vec<Box<dyn Send>>);

impl AfterWork {
    pub(crate) fn push(&mut self, value: Box<dyn Send>) {
        self.0.push(value);
    }

    /// Drops the values, each caught: a panic in one `Drop` (reported by the panic hook) must
    /// not keep the others alive, nor end the thread dropping them.
    pub(crate) fn drop_all(self) {
        for value in self.0 {
            let _ = catch_unwind(AssertUnwindSafe(move || drop(value)));
        }
    }
}

impl std::fmt::Debug for AfterWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AfterWork").field(&self.0.len()).finish()
    }
}

/// An op handed to the completer: the point after its work (or none: the next one covers it),
/// its completion, and what to drop once it completed.
struct Handed<P> {
    point: Option<P>,
    completion: DeviceCompletion,
    after: AfterWork,
}

impl<P> Handed<P> {
    /// Completes the op with `outcome`, then drops its values. The completion runs engine code
    /// and users' `Drop`s (a value released with its var): a panic there must not end the
    /// thread, which later ops of the stream wait on. It was reported by the panic hook.
    fn complete(self, outcome: Result<(), DeviceError>) {
        let Handed {
            point,
            completion,
            after,
        } = self;
        drop(point);
        let _ = catch_unwind(AssertUnwindSafe(move || completion.complete(outcome)));
        after.drop_all();
    }
}

/// Ops handed over and not yet taken by the completer thread, oldest first, and whether the
/// worker side is gone.
struct Launched<P> {
    ops: VecDeque<Handed<P>>,
    closed: bool,
}

/// What the completer thread and the worker share.
struct Shared<P> {
    launched: Mutex<Launched<P>>,
    /// Signaled when an op is handed over or the worker side closes.
    changed: Condvar,
}

/// A stream's completer: see the module documentation.
pub(crate) struct Completer<P: StreamPoint = StdArc<Event>> {
    shared: Arc<Shared<P>>,
    thread: Option<JoinHandle<()>>,
}

impl<P: StreamPoint> Completer<P> {
    /// Starts the completer thread of the stream of worker `name`, whose points `source`
    /// records.
    pub(crate) fn start(name: &str, source: StdArc<dyn PointSource<P>>) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            launched: Mutex::new(Launched {
                ops: VecDeque::new(),
                closed: false,
            }),
            changed: Condvar::new(),
        });
        let thread = std::thread::Builder::new()
            .name(format!("{name}-done"))
            .spawn({
                let shared = Arc::clone(&shared);
                move || complete_launched(&shared, &*source)
            })?;
        Ok(Completer {
            shared,
            thread: Some(thread),
        })
    }

    /// Hands over an op whose work was launched before `point` (or before the point of an op
    /// handed over later, or one the completer records), with the values to drop once it
    /// completed.
    pub(crate) fn launched(
        &self,
        point: Option<P>,
        completion: DeviceCompletion,
        after: AfterWork,
    ) {
        lock(&self.shared.launched).ops.push_back(Handed {
            point,
            completion,
            after,
        });
        self.shared.changed.notify_one();
    }
}

impl<P: StreamPoint> std::fmt::Debug for Completer<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completer")
            .field("launched", &lock(&self.shared.launched).ops.len())
            .finish_non_exhaustive()
    }
}

impl<P: StreamPoint> Drop for Completer<P> {
    fn drop(&mut self) {
        lock(&self.shared.launched).closed = true;
        self.shared.changed.notify_one();
        if let Some(thread) = self.thread.take() {
            if thread.thread().id() == std::thread::current().id() {
                // Dropped by a completion on the completer's own thread: it completes what is
                // left and ends by itself; a join would wait for itself.
                return;
            }
            // A panic there (in an op's completion) was already reported by the panic hook.
            let _ = thread.join();
        }
    }
}

/// The completer thread (see "Batched completion"), until the worker side is closed and
/// nothing is left. It moves the ops handed over into its own queue each round, so the worker
/// waits for the lock only while that move lasts.
fn complete_launched<P: StreamPoint>(shared: &Shared<P>, source: &dyn PointSource<P>) {
    let mut mine: VecDeque<Handed<P>> = VecDeque::new();
    let mut backoff = Backoff::new();
    loop {
        {
            let mut launched = lock(&shared.launched);
            while launched.ops.is_empty() && mine.is_empty() {
                if launched.closed {
                    return;
                }
                launched = wait(&shared.changed, launched);
            }
            mine.extend(launched.ops.drain(..));
        }
        if complete_done(&mut mine) {
            backoff = Backoff::new();
        } else if backoff.is_completed() {
            // Nothing came of the polling: asleep in the driver until the oldest is done, once
            // there is a point to sleep on (the worker's next op may bring one).
            if mine.iter().all(|op| op.point.is_none()) && handed_more_soon(shared) {
                backoff = Backoff::new();
                continue;
            }
            sleep_on_oldest(&mut mine, source);
            backoff = Backoff::new();
        } else {
            backoff.snooze();
        }
    }
}

/// Whether the worker hands over more ops within [`WORKER_GRACE`] (at once if it is closed).
fn handed_more_soon<P>(shared: &Shared<P>) -> bool {
    let mut launched = lock(&shared.launched);
    if launched.ops.is_empty() && !launched.closed {
        launched = wait_timeout(&shared.changed, launched, WORKER_GRACE).0;
    }
    !launched.ops.is_empty()
}

/// One look at `ops` (see "Batched completion"): completes those whose work is done; returns
/// whether it completed any. The newest point is queried first, once: if it passed, every op up
/// to it completes; else the points before it are queried, oldest first, up to the first still
/// running, and the newest's outcome is taken as it was found.
fn complete_done<P: StreamPoint>(ops: &mut VecDeque<Handed<P>>) -> bool {
    let Some(mut newest) = ops.iter().rposition(|op| op.point.is_some()) else {
        return false;
    };
    let newest_passed = ops[newest].point.as_ref().map_or(Ok(false), P::passed);
    if let Ok(true) = newest_passed {
        for op in ops.drain(..=newest) {
            op.complete(Ok(()));
        }
        return true;
    }
    // The newest still runs, or its query failed: each op of the passed prefix takes the
    // outcome of the first point after it.
    let mut any = false;
    while let Some(next) = ops.iter().position(|op| op.point.is_some()) {
        let passed = if next == newest {
            newest_passed.clone()
        } else {
            ops[next].point.as_ref().map_or(Ok(false), P::passed)
        };
        let outcome = match passed {
            Ok(false) => break,
            passed => passed.map(drop),
        };
        for op in ops.drain(..=next) {
            op.complete(outcome.clone());
        }
        any = true;
        if next == newest {
            break;
        }
        newest -= next + 1;
    }
    any
}

/// Sleeps in the driver until the oldest point of `ops` passed, then completes the ops up to
/// it. Without one, records one after them all first; if that fails, waits for the stream.
fn sleep_on_oldest<P: StreamPoint>(ops: &mut VecDeque<Handed<P>>, source: &dyn PointSource<P>) {
    if let Some(oldest) = ops.iter().position(|op| op.point.is_some()) {
        let outcome = ops[oldest].point.as_ref().map_or(Ok(()), P::wait);
        for op in ops.drain(..=oldest) {
            op.complete(outcome.clone());
        }
        return;
    }
    match source.record() {
        Ok(point) => {
            if let Some(newest) = ops.back_mut() {
                newest.point = Some(point);
            }
            return;
        }
        Err(error) => tracing::warn!(
            target: "depengine_cuda",
            %error,
            "the completer could not record an event; it waits for its stream",
        ),
    }
    let outcome = source.wait_all();
    for op in ops.drain(..) {
        op.complete(outcome.clone());
    }
}

/// A CUDA error as a device op's failure; a sticky one as the loss of the device.
pub(crate) fn device_error(error: cudarc::driver::DriverError) -> DeviceError {
    let (backend, message) = ("cuda".to_owned(), error.to_string());
    if is_sticky(error.0) {
        DeviceError::Lost { backend, message }
    } else {
        DeviceError::Failed { backend, message }
    }
}

/// Whether `code` is one of the errors after which, as the CUDA documentation says of each,
/// the context is in an inconsistent state and every later call returns the same error.
fn is_sticky(code: CUresult) -> bool {
    matches!(
        code,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
            | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            | CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUresult::CUDA_ERROR_INVALID_PC
    )
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// A stand-in stream: its points pass when the test says, in order, and it counts the
    /// calls the completer makes (what the driver calls would be).
    struct Stream {
        /// How many points passed; the rest still run.
        passed: AtomicUsize,
        /// The point from which on every call reports a fault (CUDA's sticky errors).
        fault_from: AtomicUsize,
        /// Held to change the two above, and by a sleeping `wait`.
        gate: std::sync::Mutex<()>,
        moved: std::sync::Condvar,
        calls: AtomicUsize,
        asleep: AtomicBool,
        /// The one point whose query, once it passed, reports an error of its own.
        failing: AtomicUsize,
        /// Ops handed over so far: their points are `0..handed`.
        handed: AtomicUsize,
        /// Points the completer recorded itself.
        records: AtomicUsize,
        /// Whether the completer's records fail (it then waits for the stream).
        records_fail: AtomicBool,
    }

    /// The completer's own points: each after every op handed over.
    impl PointSource<Point> for StdArc<Stream> {
        fn record(&self) -> Result<Point, DeviceError> {
            if self.records_fail.load(Ordering::SeqCst) {
                return Err(DeviceError::Failed {
                    backend: "stand-in".to_owned(),
                    message: "no event".to_owned(),
                });
            }
            self.records.fetch_add(1, Ordering::SeqCst);
            let newest = self.handed.load(Ordering::SeqCst).checked_sub(1);
            Ok(Point(
                StdArc::clone(self),
                newest.expect("an op was handed over"),
            ))
        }

        fn wait_all(&self) -> Result<(), DeviceError> {
            let newest = self.handed.load(Ordering::SeqCst).checked_sub(1);
            Point(StdArc::clone(self), newest.expect("an op was handed over")).wait()
        }
    }

    impl Stream {
        fn new() -> StdArc<Self> {
            StdArc::new(Stream {
                passed: AtomicUsize::new(0),
                fault_from: AtomicUsize::new(usize::MAX),
                gate: std::sync::Mutex::new(()),
                moved: std::sync::Condvar::new(),
                calls: AtomicUsize::new(0),
                asleep: AtomicBool::new(false),
                failing: AtomicUsize::new(usize::MAX),
                handed: AtomicUsize::new(0),
                records: AtomicUsize::new(0),
                records_fail: AtomicBool::new(false),
            })
        }

        fn pass(&self, points: usize) {
            let _gate = self.gate.lock().unwrap();
            self.passed.store(points, Ordering::SeqCst);
            self.moved.notify_all();
        }

        fn fault(&self, from: usize) {
            let _gate = self.gate.lock().unwrap();
            self.fault_from.store(from, Ordering::SeqCst);
            self.moved.notify_all();
        }

        /// The outcome for point `index`, if known.
        fn outcome(&self, index: usize) -> Option<Result<(), DeviceError>> {
            if index >= self.fault_from.load(Ordering::SeqCst) {
                return Some(Err(DeviceError::Lost {
                    backend: "stand-in".to_owned(),
                    message: "illegal address".to_owned(),
                }));
            }
            if index >= self.passed.load(Ordering::SeqCst) {
                return None;
            }
            if index == self.failing.load(Ordering::SeqCst) {
                return Some(Err(DeviceError::Failed {
                    backend: "stand-in".to_owned(),
                    message: "this point's own error".to_owned(),
                }));
            }
            Some(Ok(()))
        }

        /// Waits until the completer sleeps on a point.
        fn until_asleep(&self) {
            while !self.asleep.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Point number `.1` of stream `.0`.
    struct Point(StdArc<Stream>, usize);

    impl StreamPoint for Point {
        fn passed(&self) -> Result<bool, DeviceError> {
            self.0.calls.fetch_add(1, Ordering::SeqCst);
            self.0
                .outcome(self.1)
                .map_or(Ok(false), |outcome| outcome.map(|()| true))
        }

        fn wait(&self) -> Result<(), DeviceError> {
            self.0.calls.fetch_add(1, Ordering::SeqCst);
            let mut gate = self.0.gate.lock().unwrap();
            loop {
                if let Some(outcome) = self.0.outcome(self.1) {
                    self.0.asleep.store(false, Ordering::SeqCst);
                    return outcome;
                }
                self.0.asleep.store(true, Ordering::SeqCst);
                gate = self.0.moved.wait(gate).unwrap();
            }
        }
    }

    /// A completer of `stream`, which records its points there.
    fn start(name: &str, stream: &StdArc<Stream>) -> Completer<Point> {
        Completer::start(name, StdArc::new(StdArc::clone(stream))).unwrap()
    }

    /// Hands `count` ops to `completer`, on points `0..count` of `stream`; each reports its
    /// index and outcome to the receiver.
    fn hand_over(
        completer: &Completer<Point>,
        stream: &StdArc<Stream>,
        count: usize,
    ) -> mpsc::Receiver<(usize, bool)> {
        hand_over_with(completer, stream, &vec![true; count])
    }

    /// Hands an op to `completer` per entry of `points`, with its point (`true`) or none; each
    /// reports its index and outcome to the receiver.
    fn hand_over_with(
        completer: &Completer<Point>,
        stream: &StdArc<Stream>,
        points: &[bool],
    ) -> mpsc::Receiver<(usize, bool)> {
        let (tx, rx) = mpsc::channel();
        // Handed over together, as one batch: the completer never sees a part of them.
        let mut launched = lock(&completer.shared.launched);
        for (index, &point) in points.iter().enumerate() {
            let tx = tx.clone();
            stream.handed.fetch_add(1, Ordering::SeqCst);
            launched.ops.push_back(Handed {
                point: point.then(|| Point(StdArc::clone(stream), index)),
                completion: DeviceCompletion::new(move |outcome| {
                    tx.send((index, outcome.is_ok())).unwrap();
                }),
                after: AfterWork::default(),
            });
        }
        drop(launched);
        completer.shared.changed.notify_one();
        rx
    }

    #[test]
    fn ops_handed_with_no_point_complete_with_the_next_one() {
        let stream = Stream::new();
        let completer = start("no-point", &stream);
        let rx = hand_over_with(&completer, &stream, &[false, false, true, false, true]);
        stream.until_asleep();
        stream.pass(2);
        // Points 0 and 1 were never recorded: nothing tells that their ops are done.
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        stream.pass(3);
        let first: Vec<(usize, bool)> = rx.iter().take(3).collect();
        assert_eq!(first, [(0, true), (1, true), (2, true)]);
        stream.pass(5);
        let rest: Vec<(usize, bool)> = rx.iter().take(2).collect();
        assert_eq!(rest, [(3, true), (4, true)]);
        assert_eq!(stream.records.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn the_completer_records_a_point_after_its_newest_ops_handed_with_none() {
        let stream = Stream::new();
        let completer = start("records", &stream);
        let rx = hand_over_with(&completer, &stream, &[true, false, false]);
        stream.pass(1);
        assert_eq!(rx.recv().unwrap(), (0, true));
        // No op will come: the worker may be blocked waiting for these.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while stream.records.load(Ordering::SeqCst) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the completer recorded no point after ops handed with none"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        stream.pass(3);
        let rest: Vec<(usize, bool)> = (0..2)
            .map_while(|_| rx.recv_timeout(Duration::from_secs(20)).ok())
            .collect();
        if rest.len() < 2 {
            // Its thread would still wait for them: a drop would join it forever.
            std::mem::forget(completer);
        }
        assert_eq!(rest, [(1, true), (2, true)]);
    }

    #[test]
    fn ops_done_together_complete_on_one_look_at_the_newest() {
        let stream = Stream::new();
        let completer = start("batched", &stream);
        let ops = 100;
        let rx = hand_over(&completer, &stream, ops);
        stream.until_asleep();
        let before = stream.calls.load(Ordering::Relaxed);
        stream.pass(ops);
        let outcomes: Vec<(usize, bool)> = rx.iter().take(ops).collect();
        assert_eq!(
            outcomes,
            (0..ops).map(|index| (index, true)).collect::<Vec<_>>()
        );
        let calls = stream.calls.load(Ordering::Relaxed) - before;
        // The sleep's end, for the oldest, then one query of the newest for the others.
        assert!(calls <= 3, "{calls} calls for {ops} ops done together");
    }

    #[test]
    fn a_look_queries_each_point_at_most_once() {
        let stream = Stream::new();
        let (tx, rx) = mpsc::channel();
        let handed = |index: usize| {
            let tx = tx.clone();
            Handed {
                point: Some(Point(StdArc::clone(&stream), index)),
                completion: DeviceCompletion::new(move |outcome| {
                    tx.send((index, outcome.is_ok())).unwrap();
                }),
                after: AfterWork::default(),
            }
        };
        let calls = || stream.calls.load(Ordering::SeqCst);
        let mut ops: VecDeque<Handed<Point>> = (0..3).map(handed).collect();
        stream.pass(1);
        // The newest runs: the oldest is queried (passed), then the next (running).
        assert!(complete_done(&mut ops));
        assert_eq!(calls(), 3);
        assert_eq!(rx.try_recv(), Ok((0, true)));
        // Still running: the newest is queried, the one before it, and not the newest again.
        assert!(!complete_done(&mut ops));
        assert_eq!(calls(), 5);
        ops.pop_front().unwrap().complete(Ok(()));
        assert_eq!(rx.try_recv(), Ok((1, true)));
        // One point left, running: one query.
        assert!(!complete_done(&mut ops));
        assert_eq!(calls(), 6, "the newest point queried twice in one look");
        // Its query fails: one query, and its op fails with it.
        stream.fault(2);
        assert!(complete_done(&mut ops));
        assert_eq!(calls(), 7, "the newest point queried twice in one look");
        assert_eq!(rx.try_recv(), Ok((2, false)));
        assert!(ops.is_empty());
    }

    #[test]
    fn a_fault_fails_every_op_not_completed_in_stream_order() {
        let stream = Stream::new();
        let completer = start("fault", &stream);
        let rx = hand_over(&completer, &stream, 6);
        stream.pass(3);
        let before: Vec<(usize, bool)> = rx.iter().take(3).collect();
        assert_eq!(before, [(0, true), (1, true), (2, true)]);
        stream.fault(3);
        let after: Vec<(usize, bool)> = rx.iter().take(3).collect();
        assert_eq!(after, [(3, false), (4, false), (5, false)]);
    }

    #[test]
    fn an_error_of_the_newest_query_fails_its_own_op_only() {
        let stream = Stream::new();
        stream.failing.store(2, Ordering::SeqCst);
        stream.pass(3);
        let completer = start("own-error", &stream);
        let rx = hand_over(&completer, &stream, 3);
        let outcomes: Vec<(usize, bool)> = rx.iter().take(3).collect();
        assert_eq!(outcomes, [(0, true), (1, true), (2, false)]);
    }

    #[test]
    fn values_handed_with_an_op_are_dropped_after_its_completion() {
        struct Told(mpsc::Sender<&'static str>);
        impl Drop for Told {
            fn drop(&mut self) {
                self.0.send("dropped").unwrap();
            }
        }
        let stream = Stream::new();
        let completer = start("after-work", &stream);
        let (tx, rx) = mpsc::channel();
        let mut after = AfterWork::default();
        after.push(Box::new(Told(tx.clone())));
        stream.handed.store(1, Ordering::SeqCst);
        completer.launched(
            Some(Point(StdArc::clone(&stream), 0)),
            DeviceCompletion::new(move |_| tx.send("completed").unwrap()),
            after,
        );
        stream.until_asleep();
        assert!(rx.try_recv().is_err(), "dropped while the work ran");
        stream.pass(1);
        assert_eq!(
            rx.iter().take(2).collect::<Vec<_>>(),
            ["completed", "dropped"]
        );
    }

    #[test]
    fn a_completer_dropped_on_its_own_thread_finishes_alone() {
        let stream = Stream::new();
        let completer = StdArc::new(start("self-drop", &stream));
        let (tx, rx) = mpsc::channel();
        let last = StdArc::clone(&completer);
        stream.handed.store(1, Ordering::SeqCst);
        completer.launched(
            Some(Point(StdArc::clone(&stream), 0)),
            DeviceCompletion::new(move |_| {
                // The completion holds the last reference: the completer drops here, on its
                // own thread.
                drop(last);
                tx.send("dropped").unwrap();
            }),
            AfterWork::default(),
        );
        drop(completer);
        stream.pass(1);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(20)),
            Ok("dropped"),
            "the completer's drop on its own thread did not return"
        );
    }

    /// Passes `points` on `stream`, from another thread, once the completer sleeps on it.
    fn pass_once_asleep(stream: &StdArc<Stream>, points: usize) -> std::thread::JoinHandle<()> {
        let stream = StdArc::clone(stream);
        std::thread::spawn(move || {
            stream.until_asleep();
            stream.pass(points);
        })
    }

    #[test]
    fn dropping_the_completer_completes_every_op_it_holds() {
        let stream = Stream::new();
        let completer = start("drop", &stream);
        let rx = hand_over(&completer, &stream, 5);
        let passer = pass_once_asleep(&stream, 5);
        drop(completer);
        assert_eq!(rx.try_iter().count(), 5, "ops left uncompleted at the drop");
        passer.join().unwrap();
    }

    #[test]
    fn a_completer_whose_record_fails_waits_for_the_stream() {
        let stream = Stream::new();
        stream.records_fail.store(true, Ordering::SeqCst);
        let completer = start("record-fails", &stream);
        let rx = hand_over_with(&completer, &stream, &[false, false]);
        stream.until_asleep();
        assert!(rx.try_recv().is_err(), "completed while the work ran");
        stream.pass(2);
        let outcomes: Vec<(usize, bool)> = rx.iter().take(2).collect();
        assert_eq!(outcomes, [(0, true), (1, true)]);
    }

    #[test]
    fn dropping_the_completer_completes_the_ops_it_holds_with_no_point() {
        let stream = Stream::new();
        let completer = start("drop-no-point", &stream);
        let rx = hand_over_with(&completer, &stream, &[true, false, false]);
        let passer = pass_once_asleep(&stream, 3);
        drop(completer);
        assert_eq!(rx.try_iter().count(), 3, "ops left uncompleted at the drop");
        passer.join().unwrap();
    }

    #[test]
    fn faults_that_ruin_the_context_are_sticky_others_are_not() {
        assert!(is_sticky(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
        assert!(is_sticky(CUresult::CUDA_ERROR_LAUNCH_FAILED));
        assert!(!is_sticky(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        assert!(!is_sticky(CUresult::CUDA_ERROR_INVALID_VALUE));
    }
}
