// The OpenBLAS probe of the bench (xtask/src/bench/openblas.rs): prints the kernels OpenBLAS
// chose on this CPU (its core name, which OPENBLAS_CORETYPE overrides) and its build
// configuration, one per line.
//
// Build: g++ -O2 -std=c++17 openblas_core.cpp -o openblas_core -lopenblas

#include <cblas.h>

#include <cstdio>

int main() {
    std::printf("%s\n%s\n", openblas_get_corename(), openblas_get_config());
    return 0;
}
