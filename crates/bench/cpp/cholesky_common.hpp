// Shared pieces of the `cholesky` group's C++ peers (../README.md, "The `cholesky` group"): the
// flags, the test matrix (the same entries as crates/bench/src/cholesky/matrix.rs), the check
// of a factor and the RESULT line. The check uses OpenBLAS (cblas_dsyrk), which every peer of
// the group links.
#pragma once

#include <cblas.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace cholesky {

// The largest relative residual a factor may leave.
constexpr double kTolerance = 1e-12;

// How long a harness factors a size untimed (at least once) before the timed run, as the Rust
// systems do (crates/bench/src/cholesky/mod.rs, WARM_UP): first touches of memory, the
// libraries' buffers, where the OS puts the threads.
constexpr double kWarmUpSeconds = 0.2;

// The group's flags beyond bench::Flags: `--sizes a,b,..` and `--tile T`.
struct Flags {
    bench::Flags common;
    std::vector<std::size_t> sizes{1024, 2048, 4096};
    std::size_t tile = 256;
};

inline Flags parse_flags(int argc, char** argv) {
    Flags flags;
    flags.common = bench::parse_flags(argc, argv);
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--sizes") == 0) {
            flags.sizes.clear();
            std::stringstream list(argv[i + 1]);
            std::string size;
            while (std::getline(list, size, ','))
                flags.sizes.push_back(bench::parse_number("--sizes", size.c_str()));
            ++i;
        } else if (std::strcmp(argv[i], "--tile") == 0) {
            flags.tile = bench::parse_number("--tile", argv[i + 1]);
            ++i;
        }
    }
    if (flags.tile == 0) {
        std::fprintf(stderr, "--tile must be at least 1\n");
        std::exit(2);
    }
    for (std::size_t n : flags.sizes) {
        if (n == 0 || n > (std::size_t{1} << 31)) {
            std::fprintf(stderr, "--sizes: %zu is not a matrix size\n", n);
            std::exit(2);
        }
    }
    return flags;
}

// Sebastiano Vigna's splitmix64 finalizer, as the taskbench group defines it.
inline std::uint64_t splitmix64(std::uint64_t x) {
    std::uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Entry (i, j) of the n x n test matrix: symmetric, off the diagonal a value in [-0.5, 0.5) from
// a hash of the pair, on it n plus such a value (diagonally dominant, so positive definite).
inline double entry(std::size_t n, std::size_t i, std::size_t j) {
    const std::uint64_t low = i <= j ? i : j, high = i <= j ? j : i;
    const double unit = double(splitmix64((high << 32) ^ low) >> 11) * (1.0 / 9007199254740992.0);
    const double noise = unit - 0.5;
    return i == j ? double(n) + noise : noise;
}

// ||A - L L^T||_F / ||A||_F for the test matrix A and the lower triangle of the column-major
// n x n `factor` (leading dimension n; what is above its diagonal is not read), with OpenBLAS on
// `threads` threads.
inline double relative_residual(std::size_t n, const std::vector<double>& factor,
                                unsigned threads) {
    std::vector<double> lower(n * n, 0.0);
    for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = j; i < n; ++i) lower[j * n + i] = factor[j * n + i];
    std::vector<double> product(n * n, 0.0);
    openblas_set_num_threads(int(threads));
    const int size = int(n);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, size, size, 1.0, lower.data(), size,
                0.0, product.data(), size);
    // Both norms over the whole symmetric matrix from its lower half: an entry below the
    // diagonal stands for two.
    double error = 0.0, norm = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        for (std::size_t i = j; i < n; ++i) {
            const double weight = i == j ? 1.0 : 2.0;
            const double a = entry(n, i, j);
            const double difference = a - product[j * n + i];
            error += weight * difference * difference;
            norm += weight * a * a;
        }
    }
    return std::sqrt(error / norm);
}

// Checks the factor (exits with an error when it is not one) and reports the rate.
inline void check_and_report(const char* system, std::size_t n, std::size_t tile, double seconds,
                             double residual) {
    if (!(residual < kTolerance)) {
        std::fprintf(stderr,
                     "%s n %zu: relative residual ||A - L L^T||_F / ||A||_F = %.3e, above %g\n",
                     system, n, residual, kTolerance);
        std::exit(1);
    }
    const double size = double(n);
    const double gflops = size * size * size / 3.0 / seconds / 1e9;
    std::fprintf(stderr, "%s n %zu tile %zu: %.3f s, %.2f GFLOP/s, residual %.2e\n", system, n,
                 tile, seconds, gflops, residual);
    const std::string workload = "n" + std::to_string(n);
    bench::report(workload.c_str(), gflops, "GFLOP/s");
}

}  // namespace cholesky
