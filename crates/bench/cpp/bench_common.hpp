// Shared pieces of the C++ peer harnesses: flag parsing, timing, the threads' CPU time, the RESULT
// line and the small synchronisation helpers every workload uses. See ../README.md for the
// protocol these harnesses follow.
#pragma once

#include <dirent.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace bench {

// Sizes of one invocation; the defaults are the full benchmark, like the Rust side.
struct Flags {
    unsigned threads = 2;
    std::uint64_t tasks = 1000000;
    unsigned depth = 20;
    std::uint64_t rounds = 1000;
    std::uint64_t idle_ms = 1000;
    std::uint64_t ops = 200000;  // graph / engine groups
    std::vector<std::string> workloads;  // empty: all

    bool wants(const char* workload) const {
        if (workloads.empty()) return true;
        for (const auto& w : workloads)
            if (w == workload) return true;
        return false;
    }

    // Chunks per parallel_for round: two per thread.
    std::uint64_t chunks() const { return 2 * static_cast<std::uint64_t>(threads); }

    // Tasks in a full binary tree of depth `depth`: 2^(depth+1) - 1.
    std::uint64_t tree_tasks() const { return (std::uint64_t{2} << depth) - 1; }
};

inline std::uint64_t parse_number(const char* flag, const char* text) {
    char* end = nullptr;
    unsigned long long value = std::strtoull(text, &end, 10);
    if (end == text || *end != '\0') {
        std::fprintf(stderr, "%s: `%s` is not a valid number\n", flag, text);
        std::exit(2);
    }
    return value;
}

inline double spin_cost_ns();

// Parses `--flag value` pairs; flags this harness does not know (and their values) are ignored.
// Measures the spin's cost when a `random_1us` bound will need it, before any runtime starts
// threads that would share the cores with the measurement.
inline Flags parse_flags(int argc, char** argv) {
    Flags flags;
    for (int i = 1; i + 1 < argc; ++i) {
        const char* flag = argv[i];
        const char* value = argv[i + 1];
        if (std::strcmp(flag, "--threads") == 0) {
            flags.threads = static_cast<unsigned>(parse_number(flag, value));
        } else if (std::strcmp(flag, "--tasks") == 0) {
            flags.tasks = parse_number(flag, value);
        } else if (std::strcmp(flag, "--depth") == 0) {
            flags.depth = static_cast<unsigned>(parse_number(flag, value));
        } else if (std::strcmp(flag, "--rounds") == 0) {
            flags.rounds = parse_number(flag, value);
        } else if (std::strcmp(flag, "--idle-ms") == 0) {
            flags.idle_ms = parse_number(flag, value);
        } else if (std::strcmp(flag, "--ops") == 0) {
            flags.ops = parse_number(flag, value);
        } else if (std::strcmp(flag, "--workloads") == 0) {
            std::stringstream list(value);
            std::string name;
            while (std::getline(list, name, ',')) flags.workloads.push_back(name);
        } else {
            continue;  // unknown flag or a value: not ours
        }
        ++i;
    }
    if (flags.threads == 0) {
        std::fprintf(stderr, "--threads must be at least 1\n");
        std::exit(2);
    }
    if (flags.depth > 40) {
        std::fprintf(stderr, "--depth %u is too deep\n", flags.depth);
        std::exit(2);
    }
    if (flags.wants("random_1us") || flags.wants("random_1us_overhead")) spin_cost_ns();
    return flags;
}

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Prints one measurement in the protocol's format.
inline void report(const char* workload, double value, const char* unit) {
    std::printf("RESULT %s %.3f %s\n", workload, value, unit);
    std::fflush(stdout);
}

inline void report_ns_per(const char* workload, double seconds, std::uint64_t items) {
    report(workload, seconds * 1e9 / double(items ? items : 1), "ns/task");
}

// The CPU clocks of every thread of the process but the calling one: each thread's own clock,
// not the process's `getrusage`, which counts a busy thread's runtime only up to its last
// scheduler tick or context switch, so that a reading taken right after a workload misses up
// to a tick of it and the next reading counts that as idle time (`OtherThreads` in
// `src/pool.rs`, which reads the same clocks). Linux: `/proc/self/task`, and the clock id
// `pthread_getcpuclockid` gives (the complement of the thread id, shifted by 3, with the
// per-thread bit 4 and the scheduler clock 2).
inline std::vector<clockid_t> other_thread_clocks() {
    std::vector<clockid_t> clocks;
    const pid_t me = static_cast<pid_t>(syscall(SYS_gettid));
    if (DIR* dir = opendir("/proc/self/task")) {
        while (const dirent* entry = readdir(dir)) {
            char* end = nullptr;
            const long tid = std::strtol(entry->d_name, &end, 10);
            if (end == entry->d_name || *end != '\0' || tid == me) continue;
            clocks.push_back(static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6u));
        }
        closedir(dir);
    }
    return clocks;
}

// Each clock's time in seconds, or a negative value for a thread that has exited.
inline std::vector<double> thread_cpu_seconds(const std::vector<clockid_t>& clocks) {
    std::vector<double> seconds;
    for (clockid_t clock : clocks) {
        timespec time{};
        seconds.push_back(clock_gettime(clock, &time) == 0
                              ? double(time.tv_sec) + double(time.tv_nsec) * 1e-9
                              : -1.0);
    }
    return seconds;
}

// The `idle` workload: sleeps the calling thread for the idle window with the pool alive and
// reports the CPU its other threads burnt meanwhile, in ms of CPU per second of wall time.
inline void measure_idle(const Flags& flags) {
    if (!flags.wants("idle")) return;
    const std::vector<clockid_t> clocks = other_thread_clocks();
    const std::vector<double> before = thread_cpu_seconds(clocks);
    const auto start = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(flags.idle_ms));
    const double wall = seconds_since(start);
    const std::vector<double> after = thread_cpu_seconds(clocks);
    double cpu = 0.0;
    for (std::size_t i = 0; i < clocks.size(); ++i) {
        if (before[i] >= 0.0 && after[i] >= 0.0) cpu += after[i] - before[i];
    }
    report("idle", cpu * 1e3 / wall, "ms_cpu_per_s");
}

// Counts tasks down; the task that brings it to zero wakes the waiting thread.
class Countdown {
public:
    explicit Countdown(std::uint64_t count) : remaining_(count) {}

    void done() {
        if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<std::mutex> lock(mutex_);
            finished_ = true;
            cv_.notify_all();
        }
    }

    void wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return finished_; });
    }

    std::uint64_t remaining() const { return remaining_.load(std::memory_order_acquire); }

private:
    std::atomic<std::uint64_t> remaining_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool finished_ = false;
};

// One parallel_for chunk's output, alone on its cache line.
struct alignas(64) Slot {
    std::uint64_t value = 0;
};

// The trivial work of one parallel_for chunk: a few arithmetic ops into its own slot.
inline void chunk_work(Slot& slot, std::uint64_t chunk, std::uint64_t round) {
    slot.value = slot.value * 6364136223846793005ull + chunk + round;
}

// Keeps the parallel_for results observable so the work is not optimised away.
inline void consume(const std::vector<Slot>& slots) {
    std::uint64_t sum = 0;
    for (const auto& slot : slots) sum += slot.value;
    std::fprintf(stderr, "parallel_for checksum %llu\n", static_cast<unsigned long long>(sum));
}

// Exits with an error when a workload did not run the expected number of tasks.
inline void check_count(const char* workload, std::uint64_t got, std::uint64_t expected) {
    if (got != expected) {
        std::fprintf(stderr, "%s: ran %llu tasks, expected %llu\n", workload,
                     static_cast<unsigned long long>(got),
                     static_cast<unsigned long long>(expected));
        std::exit(1);
    }
}

// --- The engine group (crates/bench/src/engine.rs), ported exactly so that every system runs
// --- the same graphs.

// Vars of the random graphs.
constexpr std::size_t kRandomVars = 1024;

// Spins for 1 us, reading the clock like engine.rs's `spin_1us`.
inline void spin_1us() {
    const auto start = Clock::now();
    while (Clock::now() - start < std::chrono::microseconds(1)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

// What one `spin_1us` costs here, in ns, as engine.rs's `spin_cost_ns`: the work of an op that
// spins, for the `random_1us_overhead` bound. The median of 7 batches of 1000 spins, once.
inline double spin_cost_ns() {
    static const double cost = [] {
        constexpr int kSpins = 1000;
        std::array<double, 7> batches{};
        for (double& batch : batches) {
            const auto start = Clock::now();
            for (int i = 0; i < kSpins; ++i) spin_1us();
            batch = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kSpins;
        }
        std::sort(batches.begin(), batches.end());
        return batches[batches.size() / 2];
    }();
    return cost;
}

// The seeded random graph of engine.rs: op i reads `reads[i]` and writes `writes[i]`.
struct RandomGraph {
    struct Op {
        std::size_t reads[2];
        std::size_t write;
    };
    std::vector<Op> ops;

    explicit RandomGraph(std::uint64_t n) {
        std::uint64_t state = 0x5EED0FDE9E4D1E01ull;
        auto next = [&state]() -> std::size_t {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            return static_cast<std::size_t>(state % kRandomVars);
        };
        ops.reserve(n);
        for (std::uint64_t i = 0; i < n; ++i) {
            const std::size_t w = next();
            std::size_t r0 = next();
            while (r0 == w) r0 = next();
            std::size_t r1 = next();
            while (r1 == w || r1 == r0) r1 = next();
            ops.push_back(Op{{r0, r1}, w});
        }
    }

    // max(total work / workers, critical path) in ns, each op costing what a spin costs here.
    double ideal_ns(unsigned workers) const {
        std::vector<std::uint64_t> last_write(kRandomVars, 0), last_read(kRandomVars, 0);
        std::uint64_t depth = 0;
        for (const Op& op : ops) {
            std::uint64_t start = std::max(last_write[op.write], last_read[op.write]);
            for (std::size_t r : op.reads) start = std::max(start, last_write[r]);
            const std::uint64_t finish = start + 1;
            for (std::size_t r : op.reads) last_read[r] = std::max(last_read[r], finish);
            last_write[op.write] = finish;
            last_read[op.write] = finish;
            depth = std::max(depth, finish);
        }
        const double spin = spin_cost_ns();
        const double work = double(ops.size()) * spin / double(workers ? workers : 1);
        return std::max(work, double(depth) * spin);
    }
};

// Reports `random_1us` and `random_1us_overhead` as engine.rs does.
inline void report_random_1us(const RandomGraph& graph, double seconds, unsigned workers) {
    const double n = double(graph.ops.empty() ? 1 : graph.ops.size());
    const double measured = seconds * 1e9 / n;
    report("random_1us", measured, "ns/op");
    report("random_1us_overhead", measured - graph.ideal_ns(workers) / n, "ns/op");
}

inline void report_ns_per_op(const char* workload, double seconds, std::uint64_t ops) {
    report(workload, seconds * 1e9 / double(ops ? ops : 1), "ns/op");
}

// parallel_for's unit: wall time of all rounds in microseconds, divided by the rounds.
inline void report_us_per_round(const char* workload, double seconds, std::uint64_t rounds) {
    report(workload, seconds * 1e6 / double(rounds ? rounds : 1), "us/round");
}

// The engine group's push-cost workloads: calls `push(name, deps)` for each selected
// `push_depsK` (K dependencies per op).
template <typename Push>
void for_each_push_deps(const Flags& flags, Push push) {
    static constexpr std::array<const char*, 4> names{"push_deps0", "push_deps1", "push_deps2",
                                                     "push_deps4"};
    static constexpr std::array<int, 4> deps{0, 1, 2, 4};
    for (std::size_t k = 0; k < names.size(); ++k)
        if (flags.wants(names[k])) push(names[k], deps[k]);
}

// Runs and reports the selected engine workloads other than `drain`, in the order engine.rs
// runs them. The harness's functions: `push_deps(name, n, deps)`, `independent(n)`, `chain(n)`
// (each reports itself), `random(graph, spin)` (returns seconds) and `latency()` (returns the
// median in us).
template <typename PushDeps, typename Independent, typename Chain, typename Random,
          typename Latency>
void run_engine_workloads(const Flags& flags, PushDeps push_deps, Independent independent,
                          Chain chain, Random random, Latency latency) {
    const std::uint64_t n = flags.ops;
    for_each_push_deps(flags, [&](const char* name, int deps) { push_deps(name, n, deps); });
    if (flags.wants("independent")) independent(n);
    if (flags.wants("chain")) chain(n);
    const RandomGraph graph(n);
    if (flags.wants("random_empty")) report_ns_per_op("random_empty", random(graph, false), n);
    if (flags.wants("random_1us") || flags.wants("random_1us_overhead"))
        report_random_1us(graph, random(graph, true), flags.threads);
    if (flags.wants("latency")) report("latency", latency(), "us");
}

// The median of the samples (sorted in place), as engine.rs's `latency` takes it.
inline double median(std::vector<double>& samples) {
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
}

}  // namespace bench
