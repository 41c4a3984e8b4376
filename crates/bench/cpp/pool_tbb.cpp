// Pool workloads on oneTBB, through its public API: a `task_arena` of `threads` slots under a
// `global_control` limit of `threads`, `task_group::run` for spawns, `parallel_invoke` for
// fork-join and `parallel_for` over a `blocked_range`.
//
// TBB counts the thread that waits on a `task_group` as one of the arena's threads: it executes
// tasks while it waits. So the main thread spawns and then joins the work through
// `task_group::wait`, and `threads` threads run tasks in total, as with the other systems.
//
// Build: g++ -O2 -std=c++17 pool_tbb.cpp -o pool_tbb -ltbb -pthread

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_invoke.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include "bench_common.hpp"

namespace {

using bench::Clock;
using bench::Flags;

void spawn_external(tbb::task_arena& arena, const Flags& flags) {
    std::atomic<std::uint64_t> ran{0};
    const auto start = Clock::now();
    arena.execute([&] {
        tbb::task_group group;
        for (std::uint64_t i = 0; i < flags.tasks; ++i)
            group.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
        group.wait();
    });
    const double seconds = bench::seconds_since(start);
    bench::check_count("spawn_external", ran.load(), flags.tasks);
    bench::report_ns_per("spawn_external", seconds, flags.tasks);
}

// One node of the fire-and-forget tree: spawns its children into the shared group and returns.
void tree_node(tbb::task_group& group, std::atomic<std::uint64_t>& ran, unsigned depth) {
    if (depth > 0) {
        group.run([&group, &ran, depth] { tree_node(group, ran, depth - 1); });
        group.run([&group, &ran, depth] { tree_node(group, ran, depth - 1); });
    }
    ran.fetch_add(1, std::memory_order_relaxed);
}

void tree_spawn(tbb::task_arena& arena, const Flags& flags) {
    std::atomic<std::uint64_t> ran{0};
    const auto start = Clock::now();
    arena.execute([&] {
        tbb::task_group group;
        group.run([&] { tree_node(group, ran, flags.depth); });
        group.wait();
    });
    const double seconds = bench::seconds_since(start);
    bench::check_count("tree_spawn", ran.load(), flags.tree_tasks());
    bench::report_ns_per("tree_spawn", seconds, flags.tree_tasks());
}

std::uint64_t join_node(unsigned depth) {
    if (depth == 0) return 1;
    std::uint64_t left = 0;
    std::uint64_t right = 0;
    tbb::parallel_invoke([&] { left = join_node(depth - 1); },
                         [&] { right = join_node(depth - 1); });
    return 1 + left + right;
}

void tree_join(tbb::task_arena& arena, const Flags& flags) {
    std::uint64_t ran = 0;
    const auto start = Clock::now();
    arena.execute([&] { ran = join_node(flags.depth); });
    const double seconds = bench::seconds_since(start);
    bench::check_count("tree_join", ran, flags.tree_tasks());
    bench::report_ns_per("tree_join", seconds, flags.tree_tasks());
}

// Each round is one `parallel_for` split down to single chunks by the simple partitioner.
void parallel_for(tbb::task_arena& arena, const Flags& flags) {
    const std::size_t chunks = flags.chunks();
    std::vector<bench::Slot> slots(chunks);
    const auto start = Clock::now();
    arena.execute([&] {
        for (std::uint64_t round = 0; round < flags.rounds; ++round) {
            tbb::parallel_for(
                tbb::blocked_range<std::size_t>(0, chunks, 1),
                [&](const tbb::blocked_range<std::size_t>& range) {
                    for (std::size_t chunk = range.begin(); chunk != range.end(); ++chunk)
                        bench::chunk_work(slots[chunk], chunk, round);
                },
                tbb::simple_partitioner());
        }
    });
    const double seconds = bench::seconds_since(start);
    bench::report_us_per_round("parallel_for", seconds, flags.rounds);
    bench::consume(slots);
}

}  // namespace

int main(int argc, char** argv) {
    const Flags flags = bench::parse_flags(argc, argv);
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, flags.threads);
    tbb::task_arena arena(static_cast<int>(flags.threads));
    arena.initialize();
    if (flags.wants("spawn_external")) spawn_external(arena, flags);
    if (flags.wants("tree_spawn")) tree_spawn(arena, flags);
    if (flags.wants("tree_join")) tree_join(arena, flags);
    if (flags.wants("parallel_for")) parallel_for(arena, flags);
    bench::measure_idle(flags);
    return 0;
}
