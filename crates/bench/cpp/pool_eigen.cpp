// Pool workloads on Eigen's NonBlockingThreadPool (`Eigen::ThreadPool`), through its public API.
// `threads` workers; the main thread only spawns and waits. Eigen has no fork-join primitive, so
// `tree_join` is not reported.
//
// Build: g++ -O2 -std=c++17 -I/usr/include/eigen3 -pthread pool_eigen.cpp -o pool_eigen

#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/ThreadPool>

#include "bench_common.hpp"

namespace {

using bench::Clock;
using bench::Countdown;
using bench::Flags;

// N empty tasks scheduled from the main thread; the last one to finish wakes it.
void spawn_external(Eigen::ThreadPool& pool, const Flags& flags) {
    Countdown countdown(flags.tasks);
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < flags.tasks; ++i) pool.Schedule([&] { countdown.done(); });
    countdown.wait();
    bench::report_ns_per("spawn_external", bench::seconds_since(start), flags.tasks);
}

// One node of the fire-and-forget tree: schedules its children from inside the worker.
void tree_node(Eigen::ThreadPool& pool, Countdown& countdown, unsigned depth) {
    pool.Schedule([&pool, &countdown, depth] {
        if (depth > 0) {
            tree_node(pool, countdown, depth - 1);
            tree_node(pool, countdown, depth - 1);
        }
        countdown.done();
    });
}

void tree_spawn(Eigen::ThreadPool& pool, const Flags& flags) {
    Countdown countdown(flags.tree_tasks());
    const auto start = Clock::now();
    tree_node(pool, countdown, flags.depth);
    countdown.wait();
    bench::report_ns_per("tree_spawn", bench::seconds_since(start), flags.tree_tasks());
}

// Each round schedules one task per chunk and waits on a barrier for all of them.
void parallel_for(Eigen::ThreadPool& pool, const Flags& flags) {
    const std::uint64_t chunks = flags.chunks();
    std::vector<bench::Slot> slots(chunks);
    const auto start = Clock::now();
    for (std::uint64_t round = 0; round < flags.rounds; ++round) {
        Eigen::Barrier barrier(static_cast<unsigned>(chunks));
        for (std::uint64_t chunk = 0; chunk < chunks; ++chunk) {
            pool.Schedule([&, chunk] {
                bench::chunk_work(slots[chunk], chunk, round);
                barrier.Notify();
            });
        }
        barrier.Wait();
    }
    const double seconds = bench::seconds_since(start);
    bench::report_us_per_round("parallel_for", seconds, flags.rounds);
    bench::consume(slots);
}

}  // namespace

int main(int argc, char** argv) {
    const Flags flags = bench::parse_flags(argc, argv);
    Eigen::ThreadPool pool(static_cast<int>(flags.threads));
    if (flags.wants("spawn_external")) spawn_external(pool, flags);
    if (flags.wants("tree_spawn")) tree_spawn(pool, flags);
    if (flags.wants("parallel_for")) parallel_for(pool, flags);
    bench::measure_idle(flags);
    return 0;
}
