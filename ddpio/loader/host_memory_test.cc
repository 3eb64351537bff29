#include "ddpio/loader/host_memory.h"

#include <cstring>

#include "gtest/gtest.h"
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

}  // namespace
}  // namespace ddpio::loader
