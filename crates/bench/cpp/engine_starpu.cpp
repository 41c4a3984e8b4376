// Engine workloads (crates/bench/src/engine.rs) on StarPU 1.3, through its public C API only.
//
// StarPU runs `threads` CPU workers (STARPU_NCPU, no CUDA/OpenCL); the main thread submits, as
// the Rust engine's pusher does, and does not run tasks. A var is a data handle registered on one
// uint64_t (`starpu_variable_data_register`); an op is `starpu_task_insert` of a codelet whose CPU
// function is empty (or spins 1 us), with STARPU_R / STARPU_RW on its vars, and StarPU's default
// sequential consistency orders the tasks like the engine's vars. Waits are
// `starpu_task_wait_for_all`. The runtime keeps its default settings (scheduler included).
//
// - `drain`: a one-worker StarPU (started and shut down before the main one): the main thread
//   takes the gate handle with `starpu_data_acquire(STARPU_W)`, submits N tasks reading it, then
//   `starpu_data_release` frees them at once; timed from the release until all have run. (The
//   Rust side releases from an op on the worker; StarPU has no other way to hold a var.)
// - `latency`: the main thread sleeps 2 ms, submits one task and blocks until it has started.
//
// Build: g++ -O2 -std=c++17 -pthread $(pkg-config --cflags starpu-1.3) engine_starpu.cpp
//        -o engine_starpu $(pkg-config --libs starpu-1.3)

#include <starpu.h>

#include <array>

#include "bench_common.hpp"

namespace {

using bench::Clock;
using bench::Flags;

std::atomic<std::uint64_t> g_ran{0};

void empty_cpu(void* buffers[], void* arg) {
    (void)buffers;
    (void)arg;
    g_ran.fetch_add(1, std::memory_order_relaxed);
}

void spin_cpu(void* buffers[], void* arg) {
    (void)buffers;
    (void)arg;
    bench::spin_1us();
    g_ran.fetch_add(1, std::memory_order_relaxed);
}

// The latency probe: when the task started, and the wake-up of the waiting main thread.
struct Probe {
    Clock::time_point started_at;
    bench::Countdown started{1};
};

void probe_cpu(void* buffers[], void* arg) {
    (void)buffers;
    auto* probe = static_cast<Probe*>(arg);
    probe->started_at = Clock::now();
    probe->started.done();
}

starpu_codelet make_codelet(starpu_cpu_func_t func, const char* name) {
    starpu_codelet cl;
    starpu_codelet_init(&cl);
    cl.where = STARPU_CPU;
    cl.cpu_funcs[0] = func;
    cl.nbuffers = STARPU_VARIABLE_NBUFFERS;
    cl.name = name;
    return cl;
}

starpu_codelet g_empty;
starpu_codelet g_spin;
starpu_codelet g_probe;

void check(const char* what, int ret) {
    if (ret != 0) {
        std::fprintf(stderr, "%s failed: %d\n", what, ret);
        std::exit(1);
    }
}

// `count` vars, each a handle on its own uint64_t.
struct Vars {
    std::vector<std::uint64_t> values;
    std::vector<starpu_data_handle_t> handles;

    explicit Vars(std::size_t count) : values(count, 0), handles(count) {
        for (std::size_t i = 0; i < count; ++i)
            starpu_variable_data_register(&handles[i], STARPU_MAIN_RAM,
                                          reinterpret_cast<uintptr_t>(&values[i]),
                                          sizeof(std::uint64_t));
    }
    ~Vars() {
        for (auto handle : handles) starpu_data_unregister(handle);
    }
    Vars(const Vars&) = delete;
    Vars& operator=(const Vars&) = delete;
};

void finish(const char* workload, std::uint64_t expected) {
    check("starpu_task_wait_for_all", starpu_task_wait_for_all());
    bench::check_count(workload, g_ran.exchange(0), expected);
}

void start_starpu(unsigned workers) {
    const std::string ncpu = std::to_string(workers);
    setenv("STARPU_NCPU", ncpu.c_str(), 1);
    setenv("STARPU_NCUDA", "0", 1);
    setenv("STARPU_NOPENCL", "0", 1);
    starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncpus = static_cast<int>(workers);
    conf.ncuda = 0;
    conf.nopencl = 0;
    check("starpu_init", starpu_init(&conf));
}

void push_deps(const char* workload, std::uint64_t n, int deps) {
    Vars pool(64);
    std::vector<std::array<starpu_data_handle_t, 4>> lists(64);
    for (std::size_t i = 0; i < 64; ++i)
        for (std::size_t j = 0; j < 4; ++j) lists[i][j] = pool.handles[(i + j * 7) % 64];
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
        const auto& l = lists[i % 64];
        int ret = 0;
        switch (deps) {
            case 0:
                ret = starpu_task_insert(&g_empty, 0);
                break;
            case 1:
                ret = starpu_task_insert(&g_empty, STARPU_R, l[0], 0);
                break;
            case 2:
                ret = starpu_task_insert(&g_empty, STARPU_R, l[0], STARPU_R, l[1], 0);
                break;
            default:
                ret = starpu_task_insert(&g_empty, STARPU_R, l[0], STARPU_R, l[1], STARPU_R,
                                         l[2], STARPU_R, l[3], 0);
                break;
        }
        check("starpu_task_insert", ret);
    }
    const double seconds = bench::seconds_since(start);
    finish(workload, n);
    bench::report_ns_per_op(workload, seconds, n);
}

void drain(std::uint64_t n) {
    Vars gate(1);
    check("starpu_data_acquire", starpu_data_acquire(gate.handles[0], STARPU_W));
    for (std::uint64_t i = 0; i < n; ++i)
        check("starpu_task_insert", starpu_task_insert(&g_empty, STARPU_R, gate.handles[0], 0));
    const auto start = Clock::now();
    starpu_data_release(gate.handles[0]);
    finish("drain", n);
    bench::report_ns_per_op("drain", bench::seconds_since(start), n);
}

void independent(std::uint64_t n) {
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i)
        check("starpu_task_insert", starpu_task_insert(&g_empty, 0));
    finish("independent", n);
    bench::report_ns_per_op("independent", bench::seconds_since(start), n);
}

void chain(std::uint64_t n) {
    Vars var(1);
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i)
        check("starpu_task_insert", starpu_task_insert(&g_empty, STARPU_RW, var.handles[0], 0));
    finish("chain", n);
    bench::report_ns_per_op("chain", bench::seconds_since(start), n);
}

double random(const bench::RandomGraph& graph, bool spin) {
    Vars pool(bench::kRandomVars);
    starpu_codelet* cl = spin ? &g_spin : &g_empty;
    const auto start = Clock::now();
    for (const auto& op : graph.ops)
        check("starpu_task_insert",
              starpu_task_insert(cl, STARPU_R, pool.handles[op.reads[0]], STARPU_R,
                                 pool.handles[op.reads[1]], STARPU_RW, pool.handles[op.write],
                                 0));
    finish(spin ? "random_1us" : "random_empty", graph.ops.size());
    return bench::seconds_since(start);
}

double latency() {
    std::vector<double> samples;
    for (int i = 0; i < 101; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        Probe probe;
        const auto pushed = Clock::now();
        check("starpu_task_insert", starpu_task_insert(&g_probe, STARPU_CL_ARGS_NFREE, &probe,
                                                       sizeof(Probe), 0));
        probe.started.wait();
        check("starpu_task_wait_for_all", starpu_task_wait_for_all());
        samples.push_back(
            std::chrono::duration<double, std::micro>(probe.started_at - pushed).count());
    }
    return bench::median(samples);
}

}  // namespace

int main(int argc, char** argv) {
    const Flags flags = bench::parse_flags(argc, argv);
    setenv("STARPU_SILENT", "1", 0);
    g_empty = make_codelet(empty_cpu, "empty");
    g_spin = make_codelet(spin_cpu, "spin_1us");
    g_probe = make_codelet(probe_cpu, "latency");
    const std::uint64_t n = flags.ops;
    if (flags.wants("drain")) {
        start_starpu(1);
        drain(n);
        starpu_shutdown();
    }
    start_starpu(flags.threads);
    bench::run_engine_workloads(flags, push_deps, independent, chain,
                                [](const bench::RandomGraph& graph, bool spin) {
                                    return random(graph, spin);
                                },
                                latency);
    starpu_shutdown();
    return 0;
}
