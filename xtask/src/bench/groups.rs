//! What each benchmark group runs: its systems, workloads and sizes. Adding a group (or a
//! system) is an entry here.

use super::cpp::{CppHarness, Library};

/// A set of systems compared on the same workloads, reported in one table.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) name: &'static str,
    /// The system the others are compared with (the `ratio` denominator).
    pub(crate) ours: &'static str,
    pub(crate) systems: &'static [System],
    /// Table row order; workloads not listed follow in the order the harnesses print them.
    pub(crate) workloads: &'static [&'static str],
    /// Size flags of the full (published) benchmark.
    pub(crate) full_sizes: &'static [&'static str],
    /// Size flags of `--quick`.
    pub(crate) quick_sizes: &'static [&'static str],
    /// Workloads whose measured phase runs one thread at a time (the others blocked, not
    /// spinning), so that they execute the same instructions on every run: what
    /// `bench-ab --instructions` counts unless told otherwise (`instructions.rs`).
    pub(crate) one_thread_workloads: &'static [&'static str],
    /// Workloads whose name contains one of these are the points of a curve (Task Bench's
    /// efficiency against granularity): in the JSON files and the charts, not in the summary
    /// table.
    pub(crate) curve_points: &'static [&'static str],
    /// The system whose first invocation of a run also writes a timeline of its ops
    /// (`--timeline <target>/bench/<file>`), for the timeline chart; `None` for most groups.
    pub(crate) timeline: Option<Timeline>,
    /// Whether the group needs hardware that not every machine has (a GPU): then
    /// `depengine-bench <group> --probe` prints `SKIP <reason>` where it cannot run, and every
    /// system of the group is skipped with that reason.
    pub(crate) probed: bool,
    /// Examples of our crates that its harness runs, as `(package, example)`: built (release)
    /// before the group runs; one that does not build skips the group.
    pub(crate) examples: &'static [(&'static str, &'static str)],
}

/// Where a group's timeline comes from and goes (see `Group::timeline`).
#[derive(Debug)]
pub(crate) struct Timeline {
    /// The system that records it.
    pub(crate) system: &'static str,
    /// Its file name, in the report's directory.
    pub(crate) file: &'static str,
}

/// The file of the `cholesky` group's timeline: one factorization on `depengine-perdevice`.
pub(crate) const CHOLESKY_TIMELINE: &str = "cholesky-timeline.json";

impl Group {
    /// Whether `workload` is a point of a curve rather than a row of the summary table.
    pub(crate) fn is_curve_point(&self, workload: &str) -> bool {
        self.curve_points.iter().any(|part| workload.contains(part))
    }
}

/// One contender of a group.
#[derive(Debug)]
pub(crate) struct System {
    pub(crate) name: &'static str,
    pub(crate) harness: Harness,
}

/// How a system is run.
#[derive(Debug)]
pub(crate) enum Harness {
    /// `depengine-bench <group> --system <name>`: our own binary, so a failure fails the bench.
    Rust,
    /// A C++ peer, built from `crates/bench/cpp/`; skipped when it cannot be built or fails.
    Cpp(&'static CppHarness),
}

impl Harness {
    /// Whether a failure of this system is a failure of the whole bench run.
    pub(crate) fn failure_is_fatal(&self) -> bool {
        matches!(self, Harness::Rust)
    }

    /// Whether this system calls `OpenBLAS`, whose kernels the bench may choose (`openblas.rs`).
    pub(crate) fn links_openblas(&self) -> bool {
        matches!(self, Harness::Cpp(harness) if harness.libs.contains(&"-lopenblas"))
    }
}

/// Every group, in the order `all` runs them.
pub(crate) const GROUPS: &[Group] = &[POOL, GRAPH, ENGINE, TASKBENCH, CHOLESKY, GPU, MPI];

/// The group called `name`.
pub(crate) fn find(name: &str) -> Option<&'static Group> {
    GROUPS.iter().find(|group| group.name == name)
}

const POOL: Group = Group {
    name: "pool",
    ours: "depengine-pool",
    systems: &[
        rust("depengine-pool"),
        rust("simplepool"),
        rust("rayon"),
        cpp("eigen", &EIGEN),
        cpp("libgomp", &LIBGOMP),
        cpp("libomp", &LIBOMP),
        cpp("tbb", &TBB),
    ],
    workloads: &[
        "spawn_external",
        "tree_spawn",
        "tree_join",
        "parallel_for",
        "idle",
    ],
    full_sizes: &[
        "--tasks",
        "1000000",
        "--depth",
        "20",
        "--rounds",
        "1000",
        "--idle-ms",
        "1000",
    ],
    quick_sizes: &[
        "--tasks",
        "100000",
        "--depth",
        "16",
        "--rounds",
        "200",
        "--idle-ms",
        "200",
    ],
    one_thread_workloads: &[],
    curve_points: &[],
    timeline: None,
    probed: false,
    examples: &[],
};

const GRAPH: Group = Group {
    name: "graph",
    ours: "depengine-graph",
    systems: &[rust("depengine-graph")],
    workloads: &[],
    full_sizes: &["--ops", "200000"],
    quick_sizes: &["--ops", "20000"],
    one_thread_workloads: &[
        "push_complete_1var",
        "push_complete_2var",
        "push_complete_4var",
    ],
    curve_points: &[],
    timeline: None,
    probed: false,
    examples: &[],
};

const ENGINE: Group = Group {
    name: "engine",
    ours: "depengine-perdevice",
    systems: &[
        rust("depengine-perdevice"),
        rust("depengine-bulk"),
        rust("depengine-pooled"),
        rust("naive"),
        rust("serial"),
        rust("rayon"),
        cpp("libgomp", &ENGINE_LIBGOMP),
        cpp("libomp", &ENGINE_LIBOMP),
        cpp("starpu", &ENGINE_STARPU),
        cpp("mxnet", &ENGINE_MXNET),
        cpp("tbb-flow", &ENGINE_TBB_FLOW),
    ],
    workloads: &[
        "push_deps0",
        "push_deps1",
        "push_deps2",
        "push_deps4",
        "drain",
        "backlog",
        "push_queued",
        "push_parked",
        "chain_backlog",
        "independent",
        "chain",
        "chain_typed",
        "chain_shared",
        "chain_priority_overhead",
        "random_empty",
        "random_empty_typed",
        "random_empty_shared",
        "random_1us",
        "random_1us_overhead",
        "replay_chain",
        "replay_random_empty",
        "replay_random_1us",
        "replay_random_1us_overhead",
        "device_chain",
        "device_random_empty",
        "latency",
    ],
    full_sizes: &["--ops", "200000"],
    quick_sizes: &["--ops", "20000"],
    one_thread_workloads: &[
        "push_queued",
        "push_parked",
        "backlog",
        "chain_backlog",
        "drain",
    ],
    curve_points: &[],
    timeline: None,
    probed: false,
    examples: &[],
};

/// Task Bench's graphs (`crates/bench/README.md`, "The `taskbench` group"): per pattern, the
/// METG(50%), the overhead per task, the peak, and the efficiency curve's points.
const TASKBENCH: Group = Group {
    name: "taskbench",
    ours: "depengine-perdevice",
    systems: &[
        rust("depengine-perdevice"),
        rust("rayon"),
        cpp("libgomp", &TASKBENCH_LIBGOMP),
        cpp("libomp", &TASKBENCH_LIBOMP),
    ],
    workloads: &[
        "trivial.metg",
        "no_comm.metg",
        "stencil_1d.metg",
        "stencil_1d_periodic.metg",
        "dom.metg",
        "tree.metg",
        "fft.metg",
        "all_to_all.metg",
        "nearest.metg",
        "spread.metg",
        "random_nearest.metg",
        "trivial.overhead",
        "no_comm.overhead",
        "stencil_1d.overhead",
        "stencil_1d_periodic.overhead",
        "dom.overhead",
        "tree.overhead",
        "fft.overhead",
        "all_to_all.overhead",
        "nearest.overhead",
        "spread.overhead",
        "random_nearest.overhead",
    ],
    full_sizes: &["--scale", "24", "--max-iterations", "65536"],
    quick_sizes: &[
        "--scale",
        "18",
        "--max-iterations",
        "4096",
        "--max-steps",
        "2000",
    ],
    one_thread_workloads: &[],
    curve_points: &[".eff.", ".gran."],
    timeline: None,
    probed: false,
    examples: &[],
};

/// A tiled Cholesky factorization (`crates/bench/README.md`, "The `cholesky` group"): GFLOP/s
/// per matrix size (higher is better), each run checked by its residual.
const CHOLESKY: Group = Group {
    name: "cholesky",
    ours: "depengine-perdevice",
    systems: &[
        rust("depengine-perdevice"),
        rust("depengine-1worker"),
        rust("depengine-replay"),
        rust("faer"),
        cpp("lapack", &CHOLESKY_LAPACK),
        cpp("omp-tiles", &CHOLESKY_OMP_TILES),
    ],
    workloads: &["n512", "n1024", "n2048", "n4096"],
    full_sizes: &["--sizes", "1024,2048,4096", "--tile", "256"],
    quick_sizes: &["--sizes", "512", "--tile", "128"],
    one_thread_workloads: &[],
    curve_points: &[],
    timeline: Some(Timeline {
        system: "depengine-perdevice",
        file: CHOLESKY_TIMELINE,
    }),
    probed: false,
    examples: &[],
};

/// GPU ops through the engine against the same launches made directly (`crates/bench/src/gpu.rs`).
const GPU: Group = Group {
    name: "gpu",
    ours: "depengine-cuda",
    systems: &[rust("depengine-cuda"), rust("raw-cuda")],
    workloads: &[
        "kernel_chain",
        "kernel_chain_cpu",
        "kernel_chain_pusher_cpu",
        "kernel_chain_streams",
        "graph_chain",
        "empty_chain",
        "kernel5_chain",
        "kernel5_busy",
        "latency_cpu",
        "overlap",
    ],
    full_sizes: &["--ops", "20000"],
    quick_sizes: &["--ops", "2000"],
    one_thread_workloads: &[],
    curve_points: &[],
    timeline: None,
    probed: true,
    examples: &[],
};

/// An allreduce through the engine against a direct blocking `MPI_Allreduce`, on 2 ranks, and
/// the `data_parallel` example's step with and without overlap (`crates/bench/src/mpi.rs`).
const MPI: Group = Group {
    name: "mpi",
    ours: "depengine-mpi",
    systems: &[rust("depengine-mpi"), rust("mpi-blocking")],
    workloads: &[
        "allreduce_4KiB",
        "allreduce_64KiB",
        "allreduce_1MiB",
        "allreduce_16MiB",
        "allreduce_64MiB",
        "data_parallel_step",
        "data_parallel_hidden",
    ],
    full_sizes: &["--rounds", "2000"],
    quick_sizes: &["--rounds", "16"],
    one_thread_workloads: &[],
    curve_points: &[],
    timeline: None,
    probed: true,
    examples: &[("depengine-mpi", "data_parallel")],
};

const EIGEN: CppHarness = CppHarness {
    binary: "pool_eigen",
    source: "pool_eigen.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17", "-I/usr/include/eigen3", "-pthread"],
    libs: &[],
    library: Library::System,
};

const LIBGOMP: CppHarness = CppHarness {
    binary: "pool_libgomp",
    source: "pool_omp.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17", "-fopenmp"],
    libs: &[],
    library: Library::System,
};

/// The same OpenMP source against LLVM's runtime: clang++ `-fopenmp` links libomp.
const LIBOMP: CppHarness = CppHarness {
    binary: "pool_libomp",
    source: "pool_omp.cpp",
    compiler: "clang++",
    flags: &["-O2", "-std=c++17", "-fopenmp"],
    libs: &[],
    library: Library::System,
};

const TBB: CppHarness = CppHarness {
    binary: "pool_tbb",
    source: "pool_tbb.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17", "-pthread"],
    libs: &["-ltbb"],
    library: Library::System,
};

/// The replay workloads on oneTBB's flow graph (`libtbb-dev`): a graph built once, run again
/// each round.
const ENGINE_TBB_FLOW: CppHarness = CppHarness {
    binary: "engine_tbb_flow",
    source: "engine_tbb_flow.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17", "-pthread"],
    libs: &["-ltbb"],
    library: Library::System,
};

const ENGINE_LIBGOMP: CppHarness = CppHarness {
    binary: "engine_libgomp",
    source: "engine_omp.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17", "-fopenmp"],
    libs: &[],
    library: Library::System,
};

/// The same OpenMP source against LLVM's runtime: clang++ `-fopenmp` links libomp.
const ENGINE_LIBOMP: CppHarness = CppHarness {
    binary: "engine_libomp",
    source: "engine_omp.cpp",
    compiler: "clang++",
    flags: &["-O2", "-std=c++17", "-fopenmp"],
    libs: &[],
    library: Library::System,
};

/// The `StarPU` 1.3 peer (Debian `libstarpu-dev`): include and link flags from `pkg-config`.
const ENGINE_STARPU: CppHarness = CppHarness {
    binary: "engine_starpu",
    source: "engine_starpu.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17", "-pthread"],
    libs: &[],
    library: Library::PkgConfig("starpu-1.3"),
};

/// Apache `MXNet` 1.9.1's engine (the `mxnet==1.9.1` wheel from `PyPI`, which carries
/// `libmxnet.so` and its C API header).
const ENGINE_MXNET: CppHarness = CppHarness {
    binary: "engine_mxnet",
    source: "engine_mxnet.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17", "-pthread"],
    libs: &[],
    library: Library::PythonPackage {
        package: "mxnet",
        lib: "mxnet",
    },
};

const TASKBENCH_LIBGOMP: CppHarness = CppHarness {
    binary: "taskbench_libgomp",
    source: "taskbench_omp.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17", "-fopenmp"],
    libs: &[],
    library: Library::System,
};

/// The same OpenMP source against LLVM's runtime: clang++ `-fopenmp` links libomp.
const TASKBENCH_LIBOMP: CppHarness = CppHarness {
    binary: "taskbench_libomp",
    source: "taskbench_omp.cpp",
    compiler: "clang++",
    flags: &["-O2", "-std=c++17", "-fopenmp"],
    libs: &[],
    library: Library::System,
};

/// LAPACK's `dpotrf` from Debian's `OpenBLAS` (`libopenblas-dev`, `liblapacke-dev`).
const CHOLESKY_LAPACK: CppHarness = CppHarness {
    binary: "cholesky_lapack",
    source: "cholesky_lapack.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17"],
    libs: &["-llapacke", "-lopenblas"],
    library: Library::System,
};

/// The tile graph on `OpenMP` `depend` (libgomp), `OpenBLAS` kernels on one thread each.
const CHOLESKY_OMP_TILES: CppHarness = CppHarness {
    binary: "cholesky_omp_tiles",
    source: "cholesky_omp_tiles.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17", "-fopenmp"],
    libs: &["-llapacke", "-lopenblas"],
    library: Library::System,
};

const fn rust(name: &'static str) -> System {
    System {
        name,
        harness: Harness::Rust,
    }
}

const fn cpp(name: &'static str, harness: &'static CppHarness) -> System {
    System {
        name,
        harness: Harness::Cpp(harness),
    }
}

#[cfg(test)]
mod tests {
    use super::{GROUPS, Harness};

    #[test]
    fn every_group_contains_its_reference_system() {
        for group in GROUPS {
            assert!(
                group.systems.iter().any(|s| s.name == group.ours),
                "{} lacks {}",
                group.name,
                group.ours
            );
        }
    }

    #[test]
    fn reference_systems_are_ours() {
        for group in GROUPS {
            let ours = group.systems.iter().find(|s| s.name == group.ours).unwrap();
            assert!(matches!(ours.harness, Harness::Rust));
        }
    }

    /// `--timeline` is a flag of our own binary: only a Rust system of the group records one.
    #[test]
    fn timelines_are_recorded_by_our_own_systems() {
        for group in GROUPS {
            if let Some(timeline) = &group.timeline {
                let system = group.systems.iter().find(|s| s.name == timeline.system);
                assert!(
                    matches!(system.map(|s| &s.harness), Some(Harness::Rust)),
                    "{}: {}",
                    group.name,
                    timeline.system
                );
            }
        }
    }
}
