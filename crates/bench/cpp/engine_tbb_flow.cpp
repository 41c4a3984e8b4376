// The engine group's replay workloads on oneTBB's flow graph, through its public API: the first
// kPlanOps ops of `chain` and of the seeded random graph (bench_common.hpp) built once as a graph
// of `continue_node`s, its edges from the same rules as depengine's plans (a read waits for the
// var's last writer, a write for the reads since and for that writer), then run again each
// round (`try_put` on a `broadcast_node` that feeds the roots, `wait_for_all`) until N ops ran:
// TBB's way to re-run a static graph. A `task_arena` of `threads` slots under a
// `global_control` limit of `threads`; the thread in `wait_for_all` runs nodes too, so
// `threads` threads run them in all.
//
// Build: g++ -O2 -std=c++17 engine_tbb_flow.cpp -o engine_tbb_flow -ltbb -pthread

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <memory>
#include <set>

#include "bench_common.hpp"

namespace {

using bench::Clock;
using Node = tbb::flow::continue_node<tbb::flow::continue_msg>;

// Ops per graph, as `PLAN_OPS` in engine.rs.
constexpr std::size_t kPlanOps = 1000;

// One op of a graph: the vars it reads and the one it writes.
struct PlanOp {
    std::vector<std::size_t> reads;
    std::size_t write;
};

// A flow graph of `ops`, each node running `body`, built once and run `rounds` times.
class Plan {
public:
    Plan(const std::vector<PlanOp>& ops, std::size_t vars, void (*body)())
        : start_(graph_) {
        std::vector<std::set<std::size_t>> preds(ops.size());
        std::vector<long> last_writer(vars, -1);
        std::vector<std::vector<std::size_t>> reads_since(vars);
        for (std::size_t i = 0; i < ops.size(); ++i) {
            for (std::size_t r : ops[i].reads) {
                if (last_writer[r] >= 0) preds[i].insert(std::size_t(last_writer[r]));
                reads_since[r].push_back(i);
            }
            const std::size_t w = ops[i].write;
            for (std::size_t r : reads_since[w])
                if (r != i) preds[i].insert(r);
            reads_since[w].clear();
            if (last_writer[w] >= 0) preds[i].insert(std::size_t(last_writer[w]));
            last_writer[w] = long(i);
        }
        nodes_.reserve(ops.size());
        for (std::size_t i = 0; i < ops.size(); ++i)
            nodes_.push_back(std::make_unique<Node>(
                graph_, [body](const tbb::flow::continue_msg&) { body(); }));
        for (std::size_t i = 0; i < ops.size(); ++i) {
            if (preds[i].empty()) tbb::flow::make_edge(start_, *nodes_[i]);
            for (std::size_t p : preds[i]) tbb::flow::make_edge(*nodes_[p], *nodes_[i]);
        }
    }

    std::size_t size() const { return nodes_.size(); }

    void run() {
        start_.try_put(tbb::flow::continue_msg());
        graph_.wait_for_all();
    }

private:
    tbb::flow::graph graph_;
    tbb::flow::broadcast_node<tbb::flow::continue_msg> start_;
    std::vector<std::unique_ptr<Node>> nodes_;
};

void empty_op() {}

// Runs `plan` until `n` ops ran (at least once); reports ns per op as `workload`.
void replay(tbb::task_arena& arena, Plan& plan, std::uint64_t n, const char* workload) {
    const std::uint64_t rounds = std::max<std::uint64_t>(n / plan.size(), 1);
    const auto start = Clock::now();
    arena.execute([&] {
        for (std::uint64_t i = 0; i < rounds; ++i) plan.run();
    });
    bench::report_ns_per_op(workload, bench::seconds_since(start), rounds * plan.size());
}

}  // namespace

int main(int argc, char** argv) {
    const bench::Flags flags = bench::parse_flags(argc, argv);
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, flags.threads);
    tbb::task_arena arena(int(flags.threads));
    const std::size_t plan_ops = std::min<std::size_t>(kPlanOps, std::max<std::uint64_t>(flags.ops, 1));
    if (flags.wants("replay_chain")) {
        std::vector<PlanOp> ops(plan_ops, PlanOp{{}, 0});
        Plan plan(ops, 1, empty_op);
        replay(arena, plan, flags.ops, "replay_chain");
    }
    if (flags.wants("replay_random_empty") || flags.wants("replay_random_1us")) {
        const bench::RandomGraph graph(plan_ops);
        std::vector<PlanOp> ops;
        for (const auto& op : graph.ops) ops.push_back(PlanOp{{op.reads[0], op.reads[1]}, op.write});
        if (flags.wants("replay_random_empty")) {
            Plan plan(ops, bench::kRandomVars, empty_op);
            replay(arena, plan, flags.ops, "replay_random_empty");
        }
        if (flags.wants("replay_random_1us")) {
            Plan plan(ops, bench::kRandomVars, bench::spin_1us);
            replay(arena, plan, flags.ops, "replay_random_1us");
        }
    }
    return 0;
}
