#include "ddpio/loader/host_memory.h"

#include <cstring>
#include <map>

#include "gtest/gtest.h"
#include "tests/support/fake_cuda.h"
#include "tests/support/status_matchers.h"

namespace ddpio::loader {
namespace {

TEST(HostMemory, WithoutCudaItIsLockedOrPlainAndWritable) {
  ASSERT_OK_AND_ASSIGN(HostBuffer b, AllocateHostBuffer(1 << 20, nullptr));
  EXPECT_NE(b.kind(), HostMemoryKind::kCudaPinned);
  EXPECT_EQ(b.size(), 1u << 20);
  std::memset(b.data(), 0xAB, b.size());
  EXPECT_EQ(b.data()[12345], 0xAB);
  ASSERT_OK_AND_ASSIGN(HostBuffer plain, AllocateHostBuffer(100, nullptr, /*try_lock=*/false));
  EXPECT_EQ(plain.kind(), HostMemoryKind::kPlain);
}

TEST(HostMemory, WithACudaDeviceItIsPinnedAndFreedByCuda) {
  testing::FakeCuda cuda;
  {
    ASSERT_OK_AND_ASSIGN(HostBuffer b, AllocateHostBuffer(4096, &cuda));
    EXPECT_EQ(b.kind(), HostMemoryKind::kCudaPinned);
    EXPECT_EQ(cuda.host_allocs, 1);
    HostBuffer moved = std::move(b);
    EXPECT_EQ(cuda.host_frees, 0);
  }
  EXPECT_EQ(cuda.host_frees, 1);  // exactly once, despite the move
}

}  // namespace
}  // namespace ddpio::loader
