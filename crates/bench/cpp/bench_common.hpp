// Shared pieces of the C++ peer harnesses: flag parsing, timing, process CPU time, the RESULT
// line and the small synchronisation helpers every workload uses. See ../README.md for the
// protocol these harnesses follow.
#pragma once

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
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

// Parses `--flag value` pairs; flags this harness does not know (and their values) are ignored.
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
    return flags;
}

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// User + system CPU time of the whole process so far, in seconds.
inline double process_cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Prints one measurement in the protocol's format.
inline void report(const char* workload, double value, const char* unit) {
    std::printf("RESULT %s %.3f %s\n", workload, value, unit);
    std::fflush(stdout);
}

inline void report_ns_per(const char* workload, double seconds, std::uint64_t items) {
    report(workload, seconds * 1e9 / double(items ? items : 1), "ns/task");
}

// The `idle` workload: sleeps the calling thread for the idle window with the pool alive and
// reports the CPU the process burnt meanwhile, in ms of CPU per second of wall time.
inline void measure_idle(const Flags& flags) {
    if (!flags.wants("idle")) return;
    const double cpu_before = process_cpu_seconds();
    const auto start = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(flags.idle_ms));
    const double wall = seconds_since(start);
    const double cpu = process_cpu_seconds() - cpu_before;
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

}  // namespace bench
