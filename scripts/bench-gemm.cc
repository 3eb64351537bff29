// The trainer's matrix products, OpenBLAS vs Eigen, on the MLP's shapes: forward Y = X W^T,
// backward dW = dY^T X and dX = dY W, for batch B, input width `in`, output width `out`.
// Ceiling: OpenBLAS on a large square product (1024^3) in the same run, the best GFLOP/s these
// cores give this library. Medians of 7. Built and run by scripts/bench-gemm.sh.
#include <cblas.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <vector>

using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class F>
double Median(F f) {
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[3];
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  openblas_set_num_threads(threads);
  Eigen::setNbThreads(threads);
  {
    const int n = 1024;
    M a = M::Random(n, n), b = M::Random(n, n), c(n, n);
    const double s = Median([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a.data(), n, b.data(), n,
                  0, c.data(), n);
    });
    std::printf("ceiling: OpenBLAS 1024^3, %d thread(s): %.1f GFLOP/s\n", threads,
                2.0 * n * n * n / s / 1e9);
  }
  std::printf("%5s %7s %5s  %10s %10s  %14s %14s  %s\n", "B", "in", "out", "eigen ms",
              "openblas ms", "eigen GFLOP/s", "openblas GFLOP/s", "eigen/openblas");
  for (auto [b, in, out] : {std::tuple{32, 3072, 256},
                            {64, 3072, 256},
                            {64, 12288, 256},
                            {32, 256, 128},
                            {256, 256, 128},
                            {64, 150528, 256}}) {
    M x = M::Random(b, in), w = M::Random(out, in), y(b, out), dy = M::Random(b, out), dw(out, in),
      dx(b, in);
    const double flops = 3 * 2.0 * b * in * out;
    const double eigen = Median([&] {
      y.noalias() = x * w.transpose();
      dw.noalias() = dy.transpose() * x;
      dx.noalias() = dy * w;
    });
    const double blas = Median([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, out, in, 1, x.data(), in, w.data(),
                  in, 0, y.data(), out);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, b, 1, dy.data(), out, x.data(),
                  in, 0, dw.data(), in);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, in, out, 1, dy.data(), out,
                  w.data(), in, 0, dx.data(), in);
    });
    std::printf("%5d %7d %5d  %10.2f %10.2f  %14.1f %14.1f  %.2f\n", b, in, out, eigen * 1e3,
                blas * 1e3, flops / eigen / 1e9, flops / blas / 1e9, eigen / blas);
  }
}
