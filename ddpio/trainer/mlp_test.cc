#include "ddpio/trainer/mlp.h"

#include <cmath>
#include <random>

#include "ddpio/trainer/blas.h"
#include "gtest/gtest.h"

namespace ddpio::trainer {
namespace {

double Loss(Mlp& m, const std::vector<float>& x, const std::vector<int32_t>& labels) {
  std::vector<float> saved = m.grads();
  const double loss = m.ForwardBackward(x.data(), labels.data(), static_cast<int>(labels.size()),
                                        1.0 / labels.size());
  m.grads() = saved;
  return loss;
}

// Backward's gradients equal finite differences of the loss, for every parameter of a small MLP.
TEST(Mlp, GradientsMatchFiniteDifferences) {
  Mlp m({6, 5, 4, 3}, 7);
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> x(4 * 6);
  for (float& v : x) v = n(rng);
  const std::vector<int32_t> labels = {0, 2, 1, -1};  // the last one is left out
  m.ZeroGrad();
  m.ForwardBackward(x.data(), labels.data(), 4, 1.0 / 4);
  const std::vector<float> grads = m.grads();
  int checked = 0;
  for (size_t i = 0; i < m.params().size(); ++i) {
    const float keep = m.params()[i], h = 1e-2f;
    m.params()[i] = keep + h;
    const double up = Loss(m, x, labels);
    m.params()[i] = keep - h;
    const double down = Loss(m, x, labels);
    m.params()[i] = keep;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(grads[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "parameter " << i;
    ++checked;
  }
  EXPECT_EQ(checked, 6 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3);
}

// Layers become ready from the last to the first; gradients accumulate until ZeroGrad.
// One-hot ids (the token model's embedding) give the loss and gradients of the same one-hot rows
// given densely, for every parameter; an id < 0 is no input.
TEST(Mlp, IdsGiveWhatTheirOneHotRowsGive) {
  constexpr int kSlot = 7, kPerRow = 2, kRows = 5;
  const std::vector<int32_t> ids = {3, 0, 6, 6, -1, 2, 1, -1, 5, 4};
  const std::vector<int32_t> labels = {1, 0, 2, -1, 2};
  std::vector<float> x(kRows * kPerRow * kSlot, 0.0f);
  for (int r = 0; r < kRows; ++r) {
    for (int s = 0; s < kPerRow; ++s) {
      const int32_t id = ids[r * kPerRow + s];
      if (id >= 0) x[(r * kPerRow + s) * kSlot + id] = 1.0f;
    }
  }
  Mlp dense({kPerRow * kSlot, 6, 3}, 5), sparse({kPerRow * kSlot, 6, 3}, 5);
  dense.ZeroGrad();
  sparse.ZeroGrad();
  const double a = dense.ForwardBackward(x.data(), labels.data(), kRows, 0.25);
  const double b = sparse.ForwardBackwardIds(ids.data(), kPerRow, labels.data(), kRows, 0.25);
  EXPECT_NEAR(a, b, 1e-6);
  ASSERT_EQ(dense.grads().size(), sparse.grads().size());
  int nonzero = 0;
  for (size_t i = 0; i < dense.grads().size(); ++i) {
    EXPECT_NEAR(dense.grads()[i], sparse.grads()[i], 1e-6) << "parameter " << i;
    nonzero += dense.grads()[i] != 0.0f;
  }
  EXPECT_GT(nonzero, 30);
}

TEST(Mlp, BackwardReportsLayersLastFirstAndAccumulates) {
  Mlp m({4, 3, 2}, 1);
  std::vector<float> x = {1, 2, 3, 4, -1, 0.5f, 2, 0};
  std::vector<int32_t> labels = {1, 0};
  std::vector<int> order;
  m.ZeroGrad();
  m.ForwardBackward(x.data(), labels.data(), 2, 0.5, [&](int l) { order.push_back(l); });
  EXPECT_EQ(order, (std::vector<int>{1, 0}));
  const std::vector<float> once = m.grads();
  m.ForwardBackward(x.data(), labels.data(), 2, 0.5);
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(m.grads()[i], 2 * once[i]);
  m.ZeroGrad();
  for (float g : m.grads()) EXPECT_EQ(g, 0.0f);
}

TEST(Mlp, SameSeedSameParametersAndChecksumSeesOneBit) {
  Mlp a({8, 4, 2}, 5), b({8, 4, 2}, 5), c({8, 4, 2}, 6);
  EXPECT_EQ(ParamChecksum(a.params()), ParamChecksum(b.params()));
  EXPECT_NE(ParamChecksum(a.params()), ParamChecksum(c.params()));
  b.params()[3] = std::nextafter(b.params()[3], 1.0f);
  EXPECT_NE(ParamChecksum(a.params()), ParamChecksum(b.params()));
}

}  // namespace
}  // namespace ddpio::trainer

namespace ddpio::trainer {
namespace {

// Every transpose combination against a plain triple loop (row-major, with leading dimensions
// wider than the matrices and beta = 1 accumulating).
TEST(MatMul, OpenBlasMatchesTheDefinition) {
  std::unique_ptr<MatMul> mm = MakeOpenBlas(1);
  const int m = 3, n = 4, k = 5, pad = 2;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
      std::vector<float> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c(m * ldc);
      for (float& v : a) v = u(rng);
      for (float& v : b) v = u(rng);
      for (float& v : c) v = u(rng);
      std::vector<float> want = c;
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double sum = 0;
          for (int p = 0; p < k; ++p)
            sum += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
          want[i * ldc + j] = static_cast<float>(2.0 * sum + c[i * ldc + j]);
        }
      }
      mm->Gemm(ta, tb, m, n, k, 2.0f, a.data(), lda, b.data(), ldb, 1.0f, c.data(), ldc);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j)
          EXPECT_NEAR(c[i * ldc + j], want[i * ldc + j], 1e-5) << ta << tb << i << j;
      }
    }
  }
  EXPECT_TRUE(mm->status().ok());
}

// Without a usable CUDA device (every CI machine): auto takes OpenBLAS and says why, cuda is a
// clear error, anything else is InvalidArgument.
TEST(MatMul, SelectionFallsBackToTheCpuAndSaysWhy) {
  const bool device = MakeCublas().ok();
  std::string why;
  auto a = SelectMatMul("auto", 1, &why);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(why.rfind(device ? "cuda:" : "cpu: OpenBLAS", 0), 0u) << why;
  if (!device) {
    EXPECT_NE(why.find("no cuBLAS"), std::string::npos) << why;
    EXPECT_EQ(SelectMatMul("cuda", 1, &why).status().code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_EQ(SelectMatMul("cpu", 1, &why).status().code(), absl::StatusCode::kOk);
  EXPECT_EQ(why.rfind("cpu: OpenBLAS", 0), 0u) << why;
  EXPECT_EQ(SelectMatMul("tpu", 1, &why).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ddpio::trainer
