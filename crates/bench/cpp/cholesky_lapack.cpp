// The `cholesky` group (../README.md, "The `cholesky` group") on LAPACK's dpotrf from OpenBLAS
// (Debian's libopenblas and liblapacke): the whole matrix, column-major, factored in place
// (lower triangle) by LAPACKE_dpotrf with OpenBLAS's own threads, `threads` of them
// (openblas_set_num_threads). The tile size does not apply: OpenBLAS blocks the matrix itself.
//
// Each size is factored untimed for a warm-up (cholesky_common.hpp), then once timed: the
// dpotrf call alone.
//
// Build: g++ -O2 -std=c++17 cholesky_lapack.cpp -o cholesky_lapack -llapacke -lopenblas

#include <lapacke.h>

#include "cholesky_common.hpp"

namespace {

// The test matrix of size n, column-major.
std::vector<double> test_matrix(std::size_t n) {
    std::vector<double> a(n * n);
    for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = 0; i < n; ++i) a[j * n + i] = cholesky::entry(n, i, j);
    return a;
}

// Factors `a` (n x n) in place; exits naming the pivot when it is not positive definite.
void dpotrf(std::size_t n, std::vector<double>& a) {
    const lapack_int info =
        LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', lapack_int(n), a.data(), lapack_int(n));
    if (info != 0) {
        std::fprintf(stderr, "LAPACKE_dpotrf(n = %zu) returned %d\n", n, int(info));
        std::exit(1);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const cholesky::Flags flags = cholesky::parse_flags(argc, argv);
    const unsigned threads = flags.common.threads;
    openblas_set_num_threads(int(threads));
    for (std::size_t n : flags.sizes) {
        const std::string workload = "n" + std::to_string(n);
        if (!flags.common.wants(workload.c_str())) continue;
        const auto warming = bench::Clock::now();
        do {
            std::vector<double> a = test_matrix(n);
            dpotrf(n, a);
        } while (bench::seconds_since(warming) < cholesky::kWarmUpSeconds);
        std::vector<double> a = test_matrix(n);
        const auto start = bench::Clock::now();
        dpotrf(n, a);
        const double seconds = bench::seconds_since(start);
        const double residual = cholesky::relative_residual(n, a, threads);
        cholesky::check_and_report("lapack", n, flags.tile, seconds, residual);
    }
    return 0;
}
