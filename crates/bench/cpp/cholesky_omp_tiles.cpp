// The `cholesky` group (../README.md, "The `cholesky` group") as the same tile graph as the
// depengine system (crates/bench/src/cholesky/tile_dag.rs) on OpenMP tasks with `depend`
// clauses, each tile kernel a call into OpenBLAS with OpenBLAS itself on one thread: POTRF
// LAPACKE_dpotrf, TRSM cblas_dtrsm, SYRK cblas_dsyrk, GEMM cblas_dgemm.
//
// Tiles: each tile (i, j), i >= j, of the lower triangle is its own column-major block
// (leading dimension its rows), as the depengine system's tiles are their own matrices; the
// last tile row and column are narrower when the tile does not divide n. A task names the
// first element of each tile it reads in `depend(in: ...)` and of the tile it writes in
// `depend(inout: ...)`, so the runtime orders the tasks as depengine orders its ops. Each
// task has the depengine op's priority, 2 * tiles - i - j for the tile (i, j) it writes;
// libgomp honors `priority` only up to OMP_MAX_TASK_PRIORITY (0 by default, read when the
// runtime loads), so an invocation without it becomes this executable again (execv, same pid)
// with it set.
//
// One `parallel` region of `threads` threads; its `single` thread creates every task of the
// factorization in the sequential order, then waits with `taskwait` (running tasks meanwhile).
// Each size is factored untimed for a warm-up (cholesky_common.hpp), then once timed: from
// before the first task is created to after the region's end.
//
// Build: g++ -O2 -std=c++17 -fopenmp cholesky_omp_tiles.cpp -o cholesky_omp_tiles -llapacke
//        -lopenblas

#include <lapacke.h>
#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <climits>

#include "cholesky_common.hpp"

namespace {

// The highest task priority libgomp is to honor; a task's priority is at most 2 * tiles.
constexpr const char* kMaxTaskPriority = "1000000";

// The lower tiles of an n x n matrix split into tiles of side `tile`.
class Tiles {
public:
    Tiles(std::size_t n, std::size_t tile) : n_(n), tile_(tile), count_((n + tile - 1) / tile) {
        tiles_.resize(count_ * (count_ + 1) / 2);
        for (std::size_t i = 0; i < count_; ++i)
            for (std::size_t j = 0; j <= i; ++j) {
                std::vector<double>& t = tiles_[index(i, j)];
                t.resize(len(i) * len(j));
                for (std::size_t c = 0; c < len(j); ++c)
                    for (std::size_t r = 0; r < len(i); ++r)
                        t[c * len(i) + r] = cholesky::entry(n, start(i) + r, start(j) + c);
            }
    }

    std::size_t count() const { return count_; }
    std::size_t start(std::size_t i) const { return i * tile_; }
    std::size_t len(std::size_t i) const { return std::min(tile_, n_ - start(i)); }
    double* at(std::size_t i, std::size_t j) { return tiles_[index(i, j)].data(); }

    // The whole factor, column-major with leading dimension n (its upper triangle zero, and
    // what the diagonal tiles hold above their diagonal left out).
    std::vector<double> assemble() {
        std::vector<double> factor(n_ * n_, 0.0);
        for (std::size_t i = 0; i < count_; ++i)
            for (std::size_t j = 0; j <= i; ++j) {
                const double* t = at(i, j);
                for (std::size_t c = 0; c < len(j); ++c)
                    for (std::size_t r = (i == j ? c : 0); r < len(i); ++r)
                        factor[(start(j) + c) * n_ + start(i) + r] = t[c * len(i) + r];
            }
        return factor;
    }

private:
    static std::size_t index(std::size_t i, std::size_t j) { return i * (i + 1) / 2 + j; }

    std::size_t n_, tile_, count_;
    std::vector<std::vector<double>> tiles_;
};

// Creates the factorization's tasks; runs on the `single` thread. A POTRF that finds its tile
// not positive definite stores LAPACK's `info` in `*failed`.
void create_tasks(Tiles& tiles, std::atomic<int>* failed) {
    const std::size_t count = tiles.count();
    auto priority = [count](std::size_t i, std::size_t j) { return int(2 * count - i - j); };
    for (std::size_t k = 0; k < count; ++k) {
        double* akk = tiles.at(k, k);
        const int bk = int(tiles.len(k));
#pragma omp task depend(inout: akk[0]) priority(priority(k, k)) firstprivate(akk, bk, failed)
        {
            const lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', bk, akk, bk);
            if (info != 0) failed->store(int(info));
        }
        for (std::size_t i = k + 1; i < count; ++i) {
            double* aik = tiles.at(i, k);
            const int bi = int(tiles.len(i));
#pragma omp task depend(in: akk[0]) depend(inout: aik[0]) priority(priority(i, k)) \
    firstprivate(akk, aik, bi, bk)
            cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, bi, bk,
                        1.0, akk, bk, aik, bi);
        }
        for (std::size_t i = k + 1; i < count; ++i) {
            double* aik = tiles.at(i, k);
            double* aii = tiles.at(i, i);
            const int bi = int(tiles.len(i));
#pragma omp task depend(in: aik[0]) depend(inout: aii[0]) priority(priority(i, i)) \
    firstprivate(aik, aii, bi, bk)
            cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, bi, bk, -1.0, aik, bi, 1.0, aii,
                        bi);
            for (std::size_t j = k + 1; j < i; ++j) {
                double* ajk = tiles.at(j, k);
                double* aij = tiles.at(i, j);
                const int bj = int(tiles.len(j));
#pragma omp task depend(in: aik[0], ajk[0]) depend(inout: aij[0]) priority(priority(i, j)) \
    firstprivate(aik, ajk, aij, bi, bj, bk)
                cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, bi, bj, bk, -1.0, aik, bi,
                            ajk, bj, 1.0, aij, bi);
            }
        }
    }
#pragma omp taskwait
}

// Becomes this executable again with OMP_MAX_TASK_PRIORITY set, unless it is set.
void ensure_task_priorities(char** argv) {
    if (std::getenv("OMP_MAX_TASK_PRIORITY") != nullptr) return;
    setenv("OMP_MAX_TASK_PRIORITY", kMaxTaskPriority, 1);
    std::fflush(stdout);
    execv("/proc/self/exe", argv);
    std::perror("execv /proc/self/exe");
    std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
    ensure_task_priorities(argv);
    const cholesky::Flags flags = cholesky::parse_flags(argc, argv);
    const unsigned threads = flags.common.threads;
    omp_set_dynamic(0);
    const int team = int(threads);
    // The tile kernels run on one thread each; the team is the parallelism.
    openblas_set_num_threads(1);
    for (std::size_t n : flags.sizes) {
        const std::string workload = "n" + std::to_string(n);
        if (!flags.common.wants(workload.c_str())) continue;
        if ((n + flags.tile - 1) / flags.tile > std::size_t(INT_MAX) / 4) {
            std::fprintf(stderr, "n %zu tile %zu: too many tiles\n", n, flags.tile);
            return 2;
        }
        const auto warming = bench::Clock::now();
        bool timed = false;
        while (!timed) {
            // The warm-up's runs, untimed, then the timed run.
            timed = bench::seconds_since(warming) >= cholesky::kWarmUpSeconds;
            Tiles tiles(n, flags.tile);
            std::atomic<int> failed{0};
            const auto start = bench::Clock::now();
#pragma omp parallel num_threads(team)
#pragma omp single
            create_tasks(tiles, &failed);
            const double seconds = bench::seconds_since(start);
            if (failed.load() != 0) {
                std::fprintf(stderr, "n %zu: a diagonal tile's dpotrf returned %d\n", n,
                             failed.load());
                return 1;
            }
            if (timed) {
                // On one OpenBLAS thread: a pool of OpenBLAS's own threads would spin for a
                // while after the check, beside the next size's team.
                const double residual = cholesky::relative_residual(n, tiles.assemble(), 1);
                cholesky::check_and_report("omp-tiles", n, flags.tile, seconds, residual);
            }
        }
    }
    return 0;
}
