// Engine workloads (crates/bench/src/engine.rs) on OpenMP tasks with `depend` clauses, through
// the standard pragmas and <omp.h> only. The same source builds against GCC's libgomp
// (g++ -fopenmp -> engine_libgomp) and LLVM's libomp (clang++ -fopenmp -> engine_libomp).
//
// A var is one cache-line-sized object of an array; an op reading/writing it is a task with
// `depend(in: var)` / `depend(inout: var)`. Everything runs in one `parallel` region of `threads`
// threads: its `single` thread creates the tasks (the engine's pusher) and waits with `taskwait`,
// during which it runs tasks too; the other threads run tasks from the `single`'s barrier.
// So `threads` threads run tasks, as with the Rust systems' `threads` workers.
//
// - `push_depsK`: the task-creation loop only, while the other threads run the tasks. Both
//   runtimes throttle: past a bound on queued tasks (libgomp: 64 x threads) the creating thread
//   runs tasks itself, which is part of their creation cost here.
// - `drain` runs in its own region of 2 threads: the `single` thread creates the gate, a task
//   that stays incomplete until its `detach` event is fulfilled (OpenMP 5.0), then N tasks
//   reading the gate and a task that fulfills the event, and blocks until the N have run; so the
//   other thread is the one worker, and it releases the gate, as in engine.rs. (A one-thread team
//   would be closer to the letter, but libomp 14 aborts on a detached task in one.)
//   libgomp does not run it: creating a task that reads an address walks every earlier `in`
//   entry of that address still pending, so parking N readers behind the gate is quadratic
//   (80000 took 23 s to create here, 200000 would take minutes), which the bench cannot wait for.
//   The libomp build is told apart by its <omp.h> (KMP_VERSION_MAJOR).
// - `latency`: the `single` thread sleeps 2 ms, creates one task and blocks (mutex + condition
//   variable, like the Rust side's channel) until the task signals it started; it does not
//   `taskwait`, which would run the task itself, so another thread starts it.
//
// Build: g++ -O2 -std=c++17 -fopenmp engine_omp.cpp -o engine_libgomp

#include <omp.h>

#include <array>

#include "bench_common.hpp"

namespace {

using bench::Clock;
using bench::Flags;

// One var: the object `depend` clauses name, alone on its cache line.
struct alignas(64) Var {
    std::uint64_t value = 0;
};

std::atomic<std::uint64_t> g_ran{0};

inline void empty_op() { g_ran.fetch_add(1, std::memory_order_relaxed); }

inline void spin_op() {
    bench::spin_1us();
    g_ran.fetch_add(1, std::memory_order_relaxed);
}

// Waits for every task created so far and checks that `expected` ran.
void finish(const char* workload, std::uint64_t expected) {
#pragma omp taskwait
    bench::check_count(workload, g_ran.exchange(0), expected);
}

void push_deps(const char* workload, std::uint64_t n, int deps) {
    std::vector<Var> pool(64);
    [[maybe_unused]] Var* v = pool.data();  // used by the depend clauses only
    std::vector<std::array<std::size_t, 4>> lists(64);
    for (std::size_t i = 0; i < 64; ++i)
        for (std::size_t j = 0; j < 4; ++j) lists[i][j] = (i + j * 7) % 64;
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
        const auto& l = lists[i % 64];
        switch (deps) {
            case 0:
#pragma omp task
                empty_op();
                break;
            case 1:
#pragma omp task depend(in : v[l[0]])
                empty_op();
                break;
            case 2:
#pragma omp task depend(in : v[l[0]], v[l[1]])
                empty_op();
                break;
            default:
#pragma omp task depend(in : v[l[0]], v[l[1]], v[l[2]], v[l[3]])
                empty_op();
                break;
        }
    }
    const double seconds = bench::seconds_since(start);
    finish(workload, n);
    bench::report_ns_per_op(workload, seconds, n);
}

[[maybe_unused]] void drain(std::uint64_t n) {
    bench::Countdown drained(n);
    double seconds = 0;
#pragma omp parallel num_threads(2)
#pragma omp single
    {
        Var gate;
        omp_event_handle_t release;
#pragma omp task detach(release) depend(inout : gate)
        {
        }
        for (std::uint64_t i = 0; i < n; ++i) {
#pragma omp task depend(in : gate) shared(drained)
            drained.done();
        }
        const auto start = Clock::now();
#pragma omp task
        omp_fulfill_event(release);
        if (n > 0) drained.wait();
        seconds = bench::seconds_since(start);
#pragma omp taskwait
    }
    bench::check_count("drain", n - drained.remaining(), n);
    bench::report_ns_per_op("drain", seconds, n);
}

void independent(std::uint64_t n) {
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
#pragma omp task
        empty_op();
    }
    finish("independent", n);
    bench::report_ns_per_op("independent", bench::seconds_since(start), n);
}

void chain(std::uint64_t n) {
    Var var;
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
#pragma omp task depend(inout : var)
        empty_op();
    }
    finish("chain", n);
    bench::report_ns_per_op("chain", bench::seconds_since(start), n);
}

double random(const bench::RandomGraph& graph, bool spin) {
    std::vector<Var> pool(bench::kRandomVars);
    [[maybe_unused]] Var* v = pool.data();  // used by the depend clauses only
    const auto start = Clock::now();
    for (const auto& op : graph.ops) {
        const std::size_t r0 = op.reads[0], r1 = op.reads[1], w = op.write;
        if (spin) {
#pragma omp task depend(in : v[r0], v[r1]) depend(inout : v[w])
            spin_op();
        } else {
#pragma omp task depend(in : v[r0], v[r1]) depend(inout : v[w])
            empty_op();
        }
    }
    finish(spin ? "random_1us" : "random_empty", graph.ops.size());
    return bench::seconds_since(start);
}

double latency() {
    const bool alone = omp_get_num_threads() == 1;
    std::vector<double> samples;
    for (int i = 0; i < 101; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        bench::Countdown started(1);
        Clock::time_point started_at;
        const auto pushed = Clock::now();
#pragma omp task shared(started, started_at)
        {
            started_at = Clock::now();
            started.done();
        }
        if (alone) {
#pragma omp taskwait
        }
        started.wait();
#pragma omp taskwait
        samples.push_back(std::chrono::duration<double, std::micro>(started_at - pushed).count());
    }
    return bench::median(samples);
}

void run_all(const Flags& flags) {
    bench::run_engine_workloads(flags, push_deps, independent, chain,
                                [](const bench::RandomGraph& graph, bool spin) {
                                    return random(graph, spin);
                                },
                                latency);
}

}  // namespace

int main(int argc, char** argv) {
    const Flags flags = bench::parse_flags(argc, argv);
    omp_set_dynamic(0);
#ifdef KMP_VERSION_MAJOR
    if (flags.wants("drain")) drain(flags.ops);
#endif
    const int threads = static_cast<int>(flags.threads);
#pragma omp parallel num_threads(threads)
#pragma omp single
    run_all(flags);
    return 0;
}
