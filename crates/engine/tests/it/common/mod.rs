//! Helpers shared by the test modules.
#![allow(dead_code, unreachable_pub, clippy::doc_markdown)]

pub mod isolated;

use depengine::{Completion, Engine, EngineConfig, EngineKind, FnProperty, Var};

pub const KINDS: [EngineKind; 3] = [
    EngineKind::Naive,
    EngineKind::ThreadedPooled,
    EngineKind::ThreadedPerDevice,
];

pub fn engine(kind: EngineKind, threads: usize) -> Engine {
    Engine::new(
        EngineConfig::default()
            .kind(kind)
            .cpu_worker_threads(threads)
            .cpu_priority_threads(threads)
            .gpu_copy_threads(threads),
    )
    .expect("engine starts")
}

/// SplitMix64: a small deterministic generator for workloads.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// An op of the random workloads (`random.rs`, `random_data.rs`).
#[derive(Clone)]
pub struct RandomOp {
    pub id: u64,
    pub reads: Vec<usize>,
    pub writes: Vec<usize>,
    pub fails: bool,
}

/// Ops over `vars` vars: 0 to 3 distinct reads, 1 or 2 distinct writes (disjoint from reads).
pub fn random_workload(
    seed: u64,
    ops: usize,
    vars: usize,
    first_id: u64,
    fail_rate: u64,
) -> Vec<RandomOp> {
    let mut rng = Rng(seed);
    (0..ops)
        .map(|i| {
            let mut pick = |count: usize, taken: &[usize]| {
                let mut out = Vec::new();
                while out.len() < count {
                    let v = rng.below(vars);
                    if !out.contains(&v) && !taken.contains(&v) {
                        out.push(v);
                    }
                }
                out
            };
            let n_writes = 1 + usize::from(i % 3 == 0);
            let writes = pick(n_writes, &[]);
            let n_reads = (seed as usize + i) % 4;
            let reads = pick(n_reads, &writes);
            let fails = fail_rate > 0 && rng.next().is_multiple_of(fail_rate);
            RandomOp {
                id: first_id + i as u64,
                reads,
                writes,
                fails,
            }
        })
        .collect()
}

pub fn mix(a: u64, b: u64) -> u64 {
    let mut r = Rng(a ^ b.rotate_left(17));
    r.next()
}

/// A `tracing` writer into a shared buffer (`log()` reads it).
#[derive(Clone, Default)]
pub struct Buffer(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buffer {
    type Writer = Buffer;

    fn make_writer(&'a self) -> Buffer {
        self.clone()
    }
}

impl Buffer {
    /// What was written so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// A subscriber that writes `WARN` and above into this buffer, without colors.
    pub fn warn_subscriber(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(self.clone())
            .finish()
    }
}

/// Runs `f` on its own thread and fails the test if it does not return within `secs` seconds
/// (the thread is left behind): for tests of what must not hang.
pub fn within<T: Send + 'static>(
    secs: u64,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: still running after {secs} s (a hang)")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            unreachable!("the thread sends before it ends")
        }
    }
}

/// An async op writing `var` whose completion the test holds: every later op on `var` waits
/// until the test completes it.
pub fn held_async_op(engine: &Engine, var: Var) -> Completion {
    let (tx, rx) = std::sync::mpsc::channel();
    engine
        .op("held")
        .writes([var])
        .prop(FnProperty::Async)
        .push_async(move |_, done| tx.send(done).unwrap())
        .unwrap();
    rx.recv().unwrap()
}
