// The `taskbench` group (../README.md, "The `taskbench` group") on OpenMP tasks with `depend`
// clauses, through the standard pragmas and <omp.h> only. The same source builds against GCC's
// libgomp (g++ -fopenmp -> taskbench_libgomp) and LLVM's libomp (clang++ -fopenmp ->
// taskbench_libomp).
//
// Everything runs in one `parallel` region of `threads` threads. Its `single` thread, for each
// run of the sweep, creates every task of the graph (all steps, in step order), then waits with
// `taskwait`, during which it runs tasks too; the other threads run tasks from the `single`'s
// barrier. `wall` is the time from before the first task is created to after the `taskwait`.
//
// Task (t, i) names the first byte of each tile it reads in `depend(in: ...)` and the first byte
// of the tile it writes in `depend(out: ...)`; the runtime orders it after the writers of its
// inputs (read after write), after the readers of the tile it overwrites (write after read) and
// after that tile's previous writer. The inputs vary in number (0 to `width`), so they go in one
// OpenMP 5 `depend(iterator(k = 0 : n), in: ...)` clause over an array of tile pointers, which
// both g++ and clang++ accept and which takes any width. `trivial` tasks have no clause and no
// tiles.
//
// A tile is `output` bytes, padded to whole cache lines so that the tiles of two points never
// share a line. Its first 16 bytes are the step and the point that wrote it (two little-endian
// u64); a task checks those of every tile it reads and stops the process on a mismatch, so a
// misordered graph fails the run instead of printing figures. Tiles start at step u64::MAX (and
// point = the tile's own point) before each run; after each run every tile of the last step must
// carry (steps - 1, i), which also shows that every task ran.
//
// Build: g++ -O2 -std=c++17 -fopenmp taskbench_omp.cpp -o taskbench_libgomp

#include <omp.h>

#include <array>
#include <cmath>
#include <limits>

#include "bench_common.hpp"

namespace {

using bench::Clock;

// --- The patterns -------------------------------------------------------------------------------

enum class Pattern {
    trivial,
    no_comm,
    stencil_1d,
    stencil_1d_periodic,
    dom,
    tree,
    fft,
    all_to_all,
    nearest,
    spread,
    random_nearest,
};

struct NamedPattern {
    const char* name;
    Pattern pattern;
};

// In the README's table order, which is the order they run in.
constexpr std::array<NamedPattern, 11> kPatterns{{
    {"trivial", Pattern::trivial},
    {"no_comm", Pattern::no_comm},
    {"stencil_1d", Pattern::stencil_1d},
    {"stencil_1d_periodic", Pattern::stencil_1d_periodic},
    {"dom", Pattern::dom},
    {"tree", Pattern::tree},
    {"fft", Pattern::fft},
    {"all_to_all", Pattern::all_to_all},
    {"nearest", Pattern::nearest},
    {"spread", Pattern::spread},
    {"random_nearest", Pattern::random_nearest},
}};

std::uint64_t splitmix64(std::uint64_t x) {
    std::uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// The number of bits of `value` (0 for 0).
unsigned bit_length(std::uint64_t value) {
    unsigned bits = 0;
    while (value != 0) {
        ++bits;
        value >>= 1;
    }
    return bits;
}

// The dependency rule of one pattern over `width` points.
class Deps {
public:
    Deps(Pattern pattern, std::uint64_t width, std::uint64_t radix)
        : pattern_(pattern),
          width_(width),
          radix_(radix),
          fft_levels_(std::max(1u, bit_length(width - 1))),
          spread_stride_((width + radix - 1) / radix) {}

    // Fills `out` with deps(t, i): distinct points in increasing order; empty for t == 0.
    void of(std::uint64_t t, std::uint64_t i, std::vector<std::uint64_t>& out) const {
        out.clear();
        if (t == 0) return;
        const std::uint64_t w = width_;
        switch (pattern_) {
            case Pattern::trivial:
                return;
            case Pattern::no_comm:
                out.push_back(i);
                return;
            case Pattern::stencil_1d:
                if (i >= 1) out.push_back(i - 1);
                out.push_back(i);
                if (i + 1 < w) out.push_back(i + 1);
                return;
            case Pattern::stencil_1d_periodic:
                out.push_back((i + w - 1) % w);
                out.push_back(i);
                out.push_back((i + 1) % w);
                sort_distinct(out);
                return;
            case Pattern::dom:
                if (i >= 1) out.push_back(i - 1);
                out.push_back(i);
                return;
            case Pattern::tree:
                out.push_back(i / 2);
                return;
            case Pattern::fft: {
                const std::uint64_t s = (t - 1) % fft_levels_;
                const std::uint64_t partner = i ^ (std::uint64_t{1} << s);
                out.push_back(i);
                if (partner < w) out.push_back(partner);
                sort_distinct(out);
                return;
            }
            case Pattern::all_to_all:
                for (std::uint64_t j = 0; j < w; ++j) out.push_back(j);
                return;
            case Pattern::nearest:
                nearest(i, [&](std::uint64_t j) { out.push_back(j); });
                return;
            case Pattern::spread:
                for (std::uint64_t k = 0; k < radix_; ++k)
                    out.push_back((i + k * spread_stride_) % w);
                sort_distinct(out);
                return;
            case Pattern::random_nearest:
                nearest(i, [&](std::uint64_t j) {
                    if (j == i || (splitmix64(t << 32 ^ i << 16 ^ j) & 1) == 1) out.push_back(j);
                });
                return;
        }
    }

private:
    // Calls `visit` on the points i - (radix-1)/2 ..= i + radix/2 within [0, width), in order.
    template <typename Visit>
    void nearest(std::uint64_t i, Visit visit) const {
        const std::uint64_t below = (radix_ - 1) / 2, above = radix_ / 2;
        const std::uint64_t first = i >= below ? i - below : 0;
        const std::uint64_t last = std::min(i + above, width_ - 1);
        for (std::uint64_t j = first; j <= last; ++j) visit(j);
    }

    static void sort_distinct(std::vector<std::uint64_t>& points) {
        std::sort(points.begin(), points.end());
        points.erase(std::unique(points.begin(), points.end()), points.end());
    }

    Pattern pattern_;
    std::uint64_t width_;
    std::uint64_t radix_;
    std::uint64_t fft_levels_;     // L: the bits of width - 1, at least 1
    std::uint64_t spread_stride_;  // ceil(width / radix)
};

// --- Kernels ------------------------------------------------------------------------------------

enum class Kernel { compute_bound, busy_wait };

// 64 FLOPs per iteration on 32 f64 values; returns the integer part of their sum (its low byte
// fills the tile, as the README says).
std::uint64_t compute_bound(std::uint64_t seed, std::uint64_t iterations) {
    double a[32];
    for (int k = 0; k < 32; ++k) a[k] = double(seed + std::uint64_t(k));
    for (std::uint64_t n = 0; n < iterations; ++n)
        for (int k = 0; k < 32; ++k) a[k] = a[k] * 0.9999999 + 1e-7;
    double sum = 0;
    for (int k = 0; k < 32; ++k) sum += a[k];
    return std::uint64_t(sum);
}

// Spins reading the monotonic clock until 10 * iterations ns have passed; returns the number of
// clock reads.
std::uint64_t busy_wait(std::uint64_t iterations) {
    const auto start = Clock::now();
    const auto span = std::chrono::nanoseconds(10 * iterations);
    std::uint64_t reads = 0;
    do {
        ++reads;
    } while (Clock::now() - start < span);
    return reads;
}

// --- Tiles --------------------------------------------------------------------------------------

constexpr std::size_t kHeader = 16;
constexpr std::uint64_t kUnwritten = std::numeric_limits<std::uint64_t>::max();

void store_le64(unsigned char* at, std::uint64_t value) {
    for (int b = 0; b < 8; ++b) at[b] = static_cast<unsigned char>(value >> (8 * b));
}

std::uint64_t load_le64(const unsigned char* at) {
    std::uint64_t value = 0;
    for (int b = 0; b < 8; ++b) value |= std::uint64_t{at[b]} << (8 * b);
    return value;
}

struct alignas(64) Line {
    unsigned char bytes[64];
};

// The two fields of `width` tiles of `output` bytes, each tile on its own cache lines.
class Fields {
public:
    Fields(std::uint64_t width, std::uint64_t output)
        : width_(width),
          output_(output),
          lines_per_tile_((output + sizeof(Line) - 1) / sizeof(Line)),
          lines_(2 * width * lines_per_tile_) {}

    unsigned char* tile(std::uint64_t field, std::uint64_t point) {
        return lines_[(field * width_ + point) * lines_per_tile_].bytes;
    }

    std::uint64_t output() const { return output_; }

    // Every tile back to "never written": step u64::MAX, point = its own point.
    void reset() {
        for (std::uint64_t field = 0; field < 2; ++field)
            for (std::uint64_t point = 0; point < width_; ++point) {
                unsigned char* at = tile(field, point);
                std::memset(at, 0, output_);
                store_le64(at, kUnwritten);
                store_le64(at + 8, point);
            }
    }

private:
    std::uint64_t width_;
    std::uint64_t output_;
    std::uint64_t lines_per_tile_;
    std::vector<Line> lines_;
};

// Stops the process from any thread of the team (no exit handlers while tasks still run).
[[noreturn]] void stop_run() {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(1);
}

[[noreturn]] void fail_check(const char* pattern, std::uint64_t t, std::uint64_t i,
                             std::uint64_t field, std::uint64_t j, std::uint64_t got_step,
                             std::uint64_t got_point, std::uint64_t want_step) {
    std::fprintf(stderr,
                 "taskbench %s: task (%llu, %llu) read tile field[%llu][%llu] carrying (step %llu, "
                 "point %llu), expected (%llu, %llu): the tasks ran out of dependency order\n",
                 pattern, (unsigned long long)t, (unsigned long long)i, (unsigned long long)field,
                 (unsigned long long)j, (unsigned long long)got_step,
                 (unsigned long long)got_point, (unsigned long long)want_step,
                 (unsigned long long)j);
    stop_run();
}

// --- One run of a graph -------------------------------------------------------------------------

struct Config {
    unsigned threads = 2;
    std::uint64_t width = 0;  // 0: threads
    Kernel kernel = Kernel::compute_bound;
    std::uint64_t output = 16;
    std::uint64_t radix = 3;
    std::uint64_t max_iterations = 65536;
    std::uint64_t scale = 24;
    std::uint64_t max_steps = 10000;
    std::vector<NamedPattern> patterns;
};

// What every task of one run shares (read-only, but for the tiles each task owns in turn).
struct Graph {
    const char* name;
    Pattern pattern;
    Deps deps;
    Kernel kernel;
    std::uint64_t iterations;
    Fields* fields;
};

// Keeps a result that nothing stores (trivial's kernel) from being optimised away.
inline void keep(std::uint64_t value) { asm volatile("" : : "r"(value)); }

std::uint64_t run_kernel(const Graph& graph, std::uint64_t t, std::uint64_t i) {
    return graph.kernel == Kernel::compute_bound ? compute_bound(t + i, graph.iterations)
                                                 : busy_wait(graph.iterations);
}

// The body of task (t, i) of a pattern with tiles.
void run_task(const Graph& graph, std::uint64_t t, std::uint64_t i) {
    thread_local std::vector<std::uint64_t> inputs;
    graph.deps.of(t, i, inputs);
    Fields& fields = *graph.fields;
    const std::uint64_t read_field = (t + 1) % 2;  // (t - 1) mod 2
    for (std::uint64_t j : inputs) {
        const unsigned char* in = fields.tile(read_field, j);
        const std::uint64_t step = load_le64(in), point = load_le64(in + 8);
        if (step != t - 1 || point != j)
            fail_check(graph.name, t, i, read_field, j, step, point, t - 1);
    }
    const std::uint64_t result = run_kernel(graph, t, i);
    unsigned char* out = fields.tile(t % 2, i);
    store_le64(out, t);
    store_le64(out + 8, i);
    std::memset(out + kHeader, static_cast<unsigned char>(result), fields.output() - kHeader);
}

// Creates every task of `steps` steps and waits for them; returns the wall time in seconds.
// Runs on the `single` thread.
double run_graph(const Graph& graph, std::uint64_t width, std::uint64_t steps) {
    const Graph* g = &graph;
    Fields& fields = *graph.fields;
    std::vector<std::uint64_t> deps;
    deps.reserve(width);
    std::vector<unsigned char*> input_tiles(width);
    unsigned char** in = input_tiles.data();
    const auto start = Clock::now();
    for (std::uint64_t t = 0; t < steps; ++t) {
        for (std::uint64_t i = 0; i < width; ++i) {
            if (graph.pattern == Pattern::trivial) {
#pragma omp task firstprivate(g, t, i)
                keep(run_kernel(*g, t, i));
                continue;
            }
            graph.deps.of(t, i, deps);
            const int n = static_cast<int>(deps.size());
            for (int k = 0; k < n; ++k) in[k] = fields.tile((t + 1) % 2, deps[k]);
            unsigned char* out = fields.tile(t % 2, i);
#pragma omp task firstprivate(g, t, i) depend(iterator(k = 0 : n), in : *in[k]) depend(out : *out)
            run_task(*g, t, i);
        }
    }
#pragma omp taskwait
    return bench::seconds_since(start);
}

// Every tile of the last step carries (steps - 1, i).
void check_last_step(const Graph& graph, std::uint64_t width, std::uint64_t steps) {
    if (graph.pattern == Pattern::trivial) return;
    const std::uint64_t last = steps - 1, field = last % 2;
    for (std::uint64_t i = 0; i < width; ++i) {
        const unsigned char* at = graph.fields->tile(field, i);
        const std::uint64_t step = load_le64(at), point = load_le64(at + 8);
        if (step != last || point != i) {
            std::fprintf(stderr,
                         "taskbench %s: after the run, tile field[%llu][%llu] carries (step %llu, "
                         "point %llu), expected (%llu, %llu)\n",
                         graph.name, (unsigned long long)field, (unsigned long long)i,
                         (unsigned long long)step, (unsigned long long)point,
                         (unsigned long long)last, (unsigned long long)i);
            stop_run();
        }
    }
}

// --- The sweep and METG -------------------------------------------------------------------------

struct Run {
    std::uint64_t iterations;
    std::uint64_t steps;
    double wall;         // seconds
    double rate;         // work per second (FLOP/s or units/s)
    double granularity;  // us per task per core
};

std::uint64_t steps_for(const Config& config, std::uint64_t iterations) {
    const std::uint64_t per_step = std::max<std::uint64_t>(iterations, 1);
    const std::uint64_t steps = ((std::uint64_t{1} << config.scale) / config.width) / per_step;
    return std::min(std::max<std::uint64_t>(steps, 16), config.max_steps);
}

// The granularity where the efficiency falls below 0.5, found from the fine end over the runs
// with iterations >= 1 (sweep order is coarse first): the finest run at or above 0.5 and the
// next finer one, interpolated in log-granularity; the finest run's granularity if it is at or
// above 0.5; 0 if no run reaches 0.5.
double metg(const std::vector<Run>& runs, double peak) {
    std::vector<const Run*> working;
    for (const Run& run : runs)
        if (run.iterations != 0) working.push_back(&run);
    for (std::size_t k = working.size(); k-- > 0;) {
        const double e1 = working[k]->rate / peak;
        if (e1 < 0.5) continue;
        const double g1 = working[k]->granularity;
        if (k + 1 == working.size()) return g1;
        const double g2 = working[k + 1]->granularity, e2 = working[k + 1]->rate / peak;
        return g1 * std::pow(g2 / g1, (e1 - 0.5) / (e1 - e2));
    }
    return 0.0;
}

void sweep(const Config& config, const NamedPattern& named) {
    const std::uint64_t width = config.width;
    Fields fields(named.pattern == Pattern::trivial ? 0 : width, config.output);
    const bool flops = config.kernel == Kernel::compute_bound;
    std::vector<Run> runs;
    std::uint64_t iterations = config.max_iterations;
    while (true) {
        const Graph graph{named.name,  named.pattern, Deps(named.pattern, width, config.radix),
                          config.kernel, iterations,  &fields};
        const std::uint64_t steps = steps_for(config, iterations);
        const std::uint64_t tasks = width * steps;
        fields.reset();
        const double wall = run_graph(graph, width, steps);
        check_last_step(graph, width, steps);
        const double work_per_task = flops ? 64.0 * double(iterations) : double(iterations);
        const double rate = work_per_task * double(tasks) / wall;
        const double granularity = wall * 1e6 * double(config.threads) / double(tasks);
        runs.push_back(Run{iterations, steps, wall, rate, granularity});
        std::fprintf(stderr, "%s: iterations %llu steps %llu wall %.6f s gran %.3f us\n",
                     named.name, (unsigned long long)iterations, (unsigned long long)steps, wall,
                     granularity);
        if (iterations == 0) break;
        iterations /= 2;
    }
    double peak = 0;
    for (const Run& run : runs) peak = std::max(peak, run.rate);

    const std::string p = named.name;
    auto line = [&](const std::string& what, double value, const char* unit) {
        bench::report((p + "." + what).c_str(), value, unit);
    };
    line("metg", metg(runs, peak), "us");
    line("overhead", runs.back().granularity, "us");
    line("peak", peak * 1e-9, flops ? "GFLOP/s" : "Gunit/s");
    for (const Run& run : runs) {
        const std::string it = std::to_string(run.iterations);
        line("eff." + it, peak > 0 ? run.rate / peak : 0.0, "ratio");
        line("gran." + it, run.granularity, "us");
    }
}

// --- Flags --------------------------------------------------------------------------------------

[[noreturn]] void usage_error(const std::string& message) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::exit(2);
}

// The group's own flags; `--threads` and `--workloads` come from bench::parse_flags.
Config parse_config(int argc, char** argv) {
    const bench::Flags flags = bench::parse_flags(argc, argv);
    Config config;
    config.threads = flags.threads;
    bool width_given = false;
    for (int i = 1; i < argc; ++i) {
        const char* flag = argv[i];
        const bool ours = std::strcmp(flag, "--width") == 0 || std::strcmp(flag, "--kernel") == 0 ||
                          std::strcmp(flag, "--output") == 0 || std::strcmp(flag, "--radix") == 0 ||
                          std::strcmp(flag, "--max-iterations") == 0 ||
                          std::strcmp(flag, "--scale") == 0 ||
                          std::strcmp(flag, "--max-steps") == 0;
        if (!ours) continue;  // another harness flag, or a value
        if (i + 1 >= argc) usage_error(std::string(flag) + " needs a value");
        const char* value = argv[++i];
        if (std::strcmp(flag, "--kernel") == 0) {
            if (std::strcmp(value, "compute_bound") == 0) {
                config.kernel = Kernel::compute_bound;
            } else if (std::strcmp(value, "busy_wait") == 0) {
                config.kernel = Kernel::busy_wait;
            } else {
                usage_error(std::string(flag) + ": `" + value +
                            "` is not a kernel (compute_bound, busy_wait)");
            }
            continue;
        }
        const std::uint64_t number = bench::parse_number(flag, value);
        if (std::strcmp(flag, "--width") == 0) {
            config.width = number;
            width_given = true;
        } else if (std::strcmp(flag, "--output") == 0) {
            config.output = number;
        } else if (std::strcmp(flag, "--radix") == 0) {
            config.radix = number;
        } else if (std::strcmp(flag, "--max-iterations") == 0) {
            config.max_iterations = number;
        } else if (std::strcmp(flag, "--scale") == 0) {
            config.scale = number;
        } else {
            config.max_steps = number;
        }
    }
    if (!width_given) config.width = config.threads;
    auto require = [](bool ok, const char* flag, const char* range, std::uint64_t got) {
        if (!ok)
            usage_error(std::string(flag) + " must be " + range + ", got " + std::to_string(got));
    };
    require(config.width >= 1 && config.width <= (std::uint64_t{1} << 24), "--width",
            "between 1 and 2^24", config.width);
    require(config.output >= kHeader && config.output <= (std::uint64_t{1} << 30), "--output",
            "between 16 and 2^30 bytes", config.output);
    require(config.radix >= 1, "--radix", "at least 1", config.radix);
    require(config.max_iterations >= 1 && config.max_iterations <= (std::uint64_t{1} << 40),
            "--max-iterations", "between 1 and 2^40", config.max_iterations);
    require(config.scale <= 62, "--scale", "at most 62", config.scale);
    require(config.max_steps >= 16, "--max-steps", "at least 16", config.max_steps);
    // A workload names a pattern, or one of its records (`stencil_1d.metg`): the pattern runs.
    auto pattern_of = [](const std::string& name) { return name.substr(0, name.find('.')); };
    for (const std::string& name : flags.workloads) {
        bool known = false;
        for (const NamedPattern& named : kPatterns) known = known || pattern_of(name) == named.name;
        if (!known)
            usage_error("--workloads: `" + name +
                        "` is neither a taskbench pattern nor one of its records");
    }
    for (const NamedPattern& named : kPatterns) {
        bool wanted = flags.workloads.empty();
        for (const std::string& name : flags.workloads)
            wanted = wanted || pattern_of(name) == named.name;
        if (wanted) config.patterns.push_back(named);
    }
    return config;
}

}  // namespace

int main(int argc, char** argv) {
    const Config config = parse_config(argc, argv);
    omp_set_dynamic(0);
    const int threads = static_cast<int>(config.threads);
#pragma omp parallel num_threads(threads)
#pragma omp single
    for (const NamedPattern& named : config.patterns) sweep(config, named);
    return 0;
}
