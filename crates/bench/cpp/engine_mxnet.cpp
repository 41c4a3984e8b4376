// Engine workloads (crates/bench/src/engine.rs) on Apache MXNet 1.9.1's dependency engine, the
// design depengine follows, through its public C API only (<mxnet/c_api.h>: MXEnginePushSyncND,
// MXNDArrayWaitAll). libmxnet.so and the header come from the `mxnet==1.9.1` wheel on PyPI
// (`pip install --no-deps mxnet==1.9.1`); xtask finds the installed package and links it.
//
// The engine is MXNet's default, ThreadedEnginePerDevice, with `threads` CPU workers
// (MXNET_CPU_WORKER_NTHREADS); the main thread pushes, as the Rust engine's pusher does, and
// does not run ops. MXNet exposes its vars through NDArrays only: a var is a one-element CPU
// NDArray (MXNDArrayCreate, allocation delayed, so nothing is ever allocated), and an op is
// MXEnginePushSyncND of an empty (or 1 us spinning) C function with the arrays as const / mutable
// inputs on cpu(0). Waits are MXNDArrayWaitAll. Each push goes through the C API's conversion of
// the handles into the engine's var lists, as every MXNet frontend's push does.
//
// - MXNet reads MXNET_CPU_WORKER_NTHREADS when libmxnet.so loads, so an invocation whose
//   environment lacks the settings becomes this executable again (execve, same pid) with them.
//   `drain` (a one-worker engine) runs in a child process, `--workloads drain` with one worker,
//   after the other workloads; it dies with its parent. There a sync gate op writing one var
//   holds the only worker until the main thread opens it, with the N readers of the var pushed
//   behind it; timed from the opening (in the main thread, as the StarPU harness does) until
//   all have run.
//   (With the drain child run first instead, the engine that ran next fell into a regime of
//   ~16 us per op on `push_depsK` and `independent` in about half the runs here, against
//   ~1.7 us otherwise. Run last, it was never seen.)
// - `latency`: the main thread sleeps 2 ms, pushes one op and blocks (mutex + condition
//   variable, like the Rust side's channel) until the op signals it started.
//
// Build: g++ -O2 -std=c++17 -pthread -I<mxnet>/include engine_mxnet.cpp -o engine_mxnet
//        -L<mxnet> -lmxnet -Wl,-rpath,<mxnet>     (<mxnet>: the package's directory)

#include <mxnet/c_api.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "bench_common.hpp"

extern char** environ;

namespace {

using bench::Clock;
using bench::Flags;

// MXNet's `Context` as the C API reads it through a ContextHandle: {DeviceType, dev_id}, where
// DeviceType::kCPU is 1.
struct MxContext {
    int dev_type;
    int dev_id;
};

const MxContext kCpu0{1, 0};

std::atomic<std::uint64_t> g_ran{0};

void empty_op(void* run_context, void* param) {
    (void)run_context;
    (void)param;
    g_ran.fetch_add(1, std::memory_order_relaxed);
}

void spin_op(void* run_context, void* param) {
    (void)run_context;
    (void)param;
    bench::spin_1us();
    g_ran.fetch_add(1, std::memory_order_relaxed);
}

void check(const char* what, int ret) {
    if (ret != 0) {
        std::fprintf(stderr, "%s failed: %s\n", what, MXGetLastError());
        std::exit(1);
    }
}

// `count` vars, each a one-element CPU NDArray that is never allocated.
struct Vars {
    std::vector<NDArrayHandle> handles;

    explicit Vars(std::size_t count) : handles(count) {
        const std::uint32_t shape[1] = {1};
        for (auto& handle : handles)
            check("MXNDArrayCreate", MXNDArrayCreate(shape, 1, kCpu0.dev_type, kCpu0.dev_id,
                                                     /*delay_alloc=*/1, &handle));
    }
    ~Vars() {
        for (auto handle : handles) MXNDArrayFree(handle);
    }
    Vars(const Vars&) = delete;
    Vars& operator=(const Vars&) = delete;
};

// Pushes `func(param)` reading `reads` and writing `writes`.
void push(EngineSyncFunc func, void* param, NDArrayHandle* reads, int num_reads,
          NDArrayHandle* writes, int num_writes) {
    check("MXEnginePushSyncND",
          MXEnginePushSyncND(func, param, nullptr, const_cast<MxContext*>(&kCpu0), reads,
                             num_reads, writes, num_writes, nullptr, 0, "op"));
}

void finish(const char* workload, std::uint64_t expected) {
    check("MXNDArrayWaitAll", MXNDArrayWaitAll());
    bench::check_count(workload, g_ran.exchange(0), expected);
}

void push_deps(const char* workload, std::uint64_t n, int deps) {
    Vars pool(64);
    std::vector<std::array<NDArrayHandle, 4>> lists(64);
    for (std::size_t i = 0; i < 64; ++i)
        for (std::size_t j = 0; j < 4; ++j) lists[i][j] = pool.handles[(i + j * 7) % 64];
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i)
        push(empty_op, nullptr, lists[i % 64].data(), deps, nullptr, 0);
    const double seconds = bench::seconds_since(start);
    finish(workload, n);
    bench::report_ns_per_op(workload, seconds, n);
}

// The drain gate: holds the worker that runs it until the main thread opens it.
struct Gate {
    bench::Countdown open{1};
};

void gate_op(void* run_context, void* param) {
    (void)run_context;
    static_cast<Gate*>(param)->open.wait();
}

void drain(std::uint64_t n) {
    Vars gate_var(1);
    Gate gate;
    push(gate_op, &gate, nullptr, 0, gate_var.handles.data(), 1);
    for (std::uint64_t i = 0; i < n; ++i)
        push(empty_op, nullptr, gate_var.handles.data(), 1, nullptr, 0);
    const auto start = Clock::now();
    gate.open.done();
    finish("drain", n);
    bench::report_ns_per_op("drain", bench::seconds_since(start), n);
}

void independent(std::uint64_t n) {
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) push(empty_op, nullptr, nullptr, 0, nullptr, 0);
    finish("independent", n);
    bench::report_ns_per_op("independent", bench::seconds_since(start), n);
}

void chain(std::uint64_t n) {
    Vars var(1);
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i)
        push(empty_op, nullptr, nullptr, 0, var.handles.data(), 1);
    finish("chain", n);
    bench::report_ns_per_op("chain", bench::seconds_since(start), n);
}

double random(const bench::RandomGraph& graph, bool spin) {
    Vars pool(bench::kRandomVars);
    const EngineSyncFunc func = spin ? spin_op : empty_op;
    const auto start = Clock::now();
    for (const auto& op : graph.ops) {
        NDArrayHandle reads[2] = {pool.handles[op.reads[0]], pool.handles[op.reads[1]]};
        NDArrayHandle write = pool.handles[op.write];
        push(func, nullptr, reads, 2, &write, 1);
    }
    finish(spin ? "random_1us" : "random_empty", graph.ops.size());
    return bench::seconds_since(start);
}

// The latency probe: when the op started, and the wake-up of the waiting main thread.
struct Probe {
    Clock::time_point started_at;
    bench::Countdown started{1};
};

void probe_op(void* run_context, void* param) {
    (void)run_context;
    auto* probe = static_cast<Probe*>(param);
    probe->started_at = Clock::now();
    probe->started.done();
}

double latency() {
    std::vector<double> samples;
    for (int i = 0; i < 101; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        Probe probe;
        const auto pushed = Clock::now();
        push(probe_op, &probe, nullptr, 0, nullptr, 0);
        probe.started.wait();
        check("MXNDArrayWaitAll", MXNDArrayWaitAll());
        samples.push_back(
            std::chrono::duration<double, std::micro>(probe.started_at - pushed).count());
    }
    return bench::median(samples);
}

// The engine settings this harness runs MXNet with. MXNet reads MXNET_CPU_WORKER_NTHREADS when
// libmxnet.so loads (its engine itself starts on the first call), so they must be in the
// environment the process starts with.
std::vector<std::string> engine_settings(unsigned workers) {
    return {"MXNET_ENGINE_TYPE=ThreadedEnginePerDevice",
            "MXNET_CPU_WORKER_NTHREADS=" + std::to_string(workers)};
}

// Names the process that started a drain child, which dies with it.
constexpr const char* kParentVar = "DEPENGINE_BENCH_MXNET_PARENT";

// Whether this process was started with `engine_settings(workers)`.
bool started_with(unsigned workers) {
    for (const auto& setting : engine_settings(workers)) {
        const auto eq = setting.find('=');
        const char* value = std::getenv(setting.substr(0, eq).c_str());
        if (value == nullptr || setting.substr(eq + 1) != value) return false;
    }
    return true;
}

// Our environment with `settings` (`NAME=value`) added or replaced; `pointers` is what exec
// takes, valid while this lives.
struct Environment {
    std::vector<std::string> settings;
    std::vector<char*> pointers;

    explicit Environment(std::vector<std::string> added) : settings(std::move(added)) {
        for (char** var = environ; *var != nullptr; ++var) {
            const bool replaced = std::any_of(settings.begin(), settings.end(), [&](const auto& s) {
                return std::strncmp(*var, s.c_str(), s.find('=') + 1) == 0;
            });
            if (!replaced) pointers.push_back(*var);
        }
        for (auto& setting : settings) pointers.push_back(setting.data());
        pointers.push_back(nullptr);
    }
};

// Becomes this executable again, with `engine_settings(workers)` in the environment. The pid
// stays, so whoever runs us (and may kill us on a timeout) still holds the right process.
[[noreturn]] void exec_with_workers(char** argv, unsigned workers) {
    std::fflush(stdout);
    Environment env(engine_settings(workers));
    execve("/proc/self/exe", argv, env.pointers.data());
    std::perror("execve /proc/self/exe");
    std::exit(1);
}

// Runs `drain` in a child process with a one-worker engine, and waits for it; its RESULT line
// goes to our stdout.
void drain_in_child(const char* self, std::uint64_t n) {
    std::fflush(stdout);
    std::vector<std::string> settings = engine_settings(1);
    settings.push_back(std::string(kParentVar) + "=" + std::to_string(getpid()));
    Environment env(std::move(settings));
    const std::string ops = std::to_string(n);
    const char* const argv[] = {self, "--ops", ops.c_str(), "--workloads", "drain", nullptr};
    pid_t child = 0;
    if (posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, const_cast<char**>(argv),
                    env.pointers.data()) != 0) {
        std::perror("posix_spawn");
        std::exit(1);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "the drain child failed (status %d)\n", status);
        std::exit(1);
    }
}

// In a drain child: dies with the parent, so that a timeout that kills the parent cannot leave
// it running (holding the output pipes open).
void die_with_parent() {
    const char* parent = std::getenv(kParentVar);
    if (parent == nullptr) return;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died before the prctl.
    if (std::to_string(getppid()) != parent) std::_Exit(1);
}

}  // namespace

int main(int argc, char** argv) {
    const Flags flags = bench::parse_flags(argc, argv);
    const bool drain_only = flags.workloads.size() == 1 && flags.wants("drain");
    const unsigned workers = drain_only ? 1 : flags.threads;
    if (!started_with(workers)) exec_with_workers(argv, workers);
    const std::uint64_t n = flags.ops;
    if (drain_only) {
        die_with_parent();
        drain(n);
        return 0;
    }
    bench::run_engine_workloads(flags, push_deps, independent, chain,
                                [](const bench::RandomGraph& graph, bool spin) {
                                    return random(graph, spin);
                                },
                                latency);
    check("MXNotifyShutdown", MXNotifyShutdown());
    if (flags.wants("drain")) drain_in_child(argv[0], n);
    return 0;
}
