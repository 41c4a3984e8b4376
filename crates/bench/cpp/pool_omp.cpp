// Pool workloads on OpenMP tasks, through the standard pragmas and <omp.h> only. The same source
// builds against GCC's libgomp (g++ -fopenmp -> pool_libgomp) and LLVM's libomp
// (clang++ -fopenmp -> pool_libomp).
//
// OpenMP has no pool outside a parallel region: the "outside" thread of `spawn_external` is the
// team's `single` thread, and waiting for all tasks is the region's closing barrier. The team has
// `threads` threads, the spawning one included, which is also how many run tasks.
// Idle is measured after the last region ends, while the runtime keeps its threads alive.
//
// Build: g++ -O2 -std=c++17 -fopenmp pool_omp.cpp -o pool_libgomp

#include <omp.h>

#include "bench_common.hpp"

namespace {

using bench::Clock;
using bench::Flags;

void spawn_external(const Flags& flags) {
    std::atomic<std::uint64_t> ran{0};
    const int threads = static_cast<int>(flags.threads);
    const auto start = Clock::now();
#pragma omp parallel num_threads(threads)
#pragma omp single
    for (std::uint64_t i = 0; i < flags.tasks; ++i) {
#pragma omp task shared(ran)
        ran.fetch_add(1, std::memory_order_relaxed);
    }
    const double seconds = bench::seconds_since(start);
    bench::check_count("spawn_external", ran.load(), flags.tasks);
    bench::report_ns_per("spawn_external", seconds, flags.tasks);
}

// One node of the fire-and-forget tree: spawns its children as tasks and returns at once.
void tree_node(std::atomic<std::uint64_t>& ran, unsigned depth) {
    if (depth > 0) {
#pragma omp task shared(ran)
        tree_node(ran, depth - 1);
#pragma omp task shared(ran)
        tree_node(ran, depth - 1);
    }
    ran.fetch_add(1, std::memory_order_relaxed);
}

void tree_spawn(const Flags& flags) {
    std::atomic<std::uint64_t> ran{0};
    const int threads = static_cast<int>(flags.threads);
    const auto start = Clock::now();
#pragma omp parallel num_threads(threads)
#pragma omp single
    tree_node(ran, flags.depth);
    const double seconds = bench::seconds_since(start);
    bench::check_count("tree_spawn", ran.load(), flags.tree_tasks());
    bench::report_ns_per("tree_spawn", seconds, flags.tree_tasks());
}

// Fork-join: one child becomes a task, the other runs inline, then taskwait joins them.
std::uint64_t join_node(unsigned depth) {
    if (depth == 0) return 1;
    std::uint64_t left = 0;
#pragma omp task shared(left)
    left = join_node(depth - 1);
    const std::uint64_t right = join_node(depth - 1);
#pragma omp taskwait
    return 1 + left + right;
}

void tree_join(const Flags& flags) {
    std::uint64_t ran = 0;
    const int threads = static_cast<int>(flags.threads);
    const auto start = Clock::now();
#pragma omp parallel num_threads(threads)
#pragma omp single
    ran = join_node(flags.depth);
    const double seconds = bench::seconds_since(start);
    bench::check_count("tree_join", ran, flags.tree_tasks());
    bench::report_ns_per("tree_join", seconds, flags.tree_tasks());
}

// Each round is one `parallel for` over the chunks; its closing barrier is the caller's wait.
void parallel_for(const Flags& flags) {
    const auto chunks = static_cast<std::int64_t>(flags.chunks());
    std::vector<bench::Slot> slots(flags.chunks());
    const int threads = static_cast<int>(flags.threads);
    const auto start = Clock::now();
    for (std::uint64_t round = 0; round < flags.rounds; ++round) {
#pragma omp parallel for num_threads(threads) schedule(static, 1)
        for (std::int64_t chunk = 0; chunk < chunks; ++chunk)
            bench::chunk_work(slots[chunk], static_cast<std::uint64_t>(chunk), round);
    }
    const double seconds = bench::seconds_since(start);
    bench::report_us_per_round("parallel_for", seconds, flags.rounds);
    bench::consume(slots);
}

}  // namespace

int main(int argc, char** argv) {
    const Flags flags = bench::parse_flags(argc, argv);
    omp_set_dynamic(0);
    omp_set_num_threads(static_cast<int>(flags.threads));
    // Start the runtime's threads before anything is timed, as the other systems do.
#pragma omp parallel
    { (void)omp_get_thread_num(); }
    if (flags.wants("spawn_external")) spawn_external(flags);
    if (flags.wants("tree_spawn")) tree_spawn(flags);
    if (flags.wants("tree_join")) tree_join(flags);
    if (flags.wants("parallel_for")) parallel_for(flags);
    bench::measure_idle(flags);
    return 0;
}
