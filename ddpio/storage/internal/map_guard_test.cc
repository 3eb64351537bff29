// The bus-error guard on a map the test makes itself: a file of one page mapped four pages long,
// so that reading the last pages is a real SIGBUS (the file ends before them).
#include "ddpio/storage/internal/map_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage::internal {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// `path` holding one page of 0xab, mapped read-only `pages` pages long (as LMDB maps a dataset:
// its map is larger than the file).
class ShortFileMap {
 public:
  ShortFileMap(const std::string& path, size_t pages) : bytes_(pages * kPage) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd, 0) << path;
    const std::vector<char> page(kPage, static_cast<char>(0xab));
    EXPECT_EQ(::write(fd, page.data(), page.size()), static_cast<ssize_t>(page.size()));
    void* map = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
    EXPECT_NE(map, MAP_FAILED);
    ::close(fd);
    base_ = static_cast<const char*>(map);
  }
  ~ShortFileMap() { ::munmap(const_cast<char*>(base_), bytes_); }
  const char* base() const { return base_; }
  size_t bytes() const { return bytes_; }
  // The byte at `offset`, read as a dataset reader reads it: a plain load from the map.
  uint8_t At(size_t offset) const {
    return *reinterpret_cast<const volatile uint8_t*>(base_ + offset);
  }

 private:
  size_t bytes_;
  const char* base_ = nullptr;
};

TEST(MapGuard, ABusErrorInAGuardedMapReadsZerosAndIsRecorded) {
  testing::TempDir dir;
  ShortFileMap map(dir.Sub("data.mdb"), 4);
  const MapFault* fault = GuardMappedRegion(map.base(), map.bytes(), dir.Sub("data.mdb"));
  ASSERT_NE(fault, nullptr);
  uint64_t offset = 0;
  EXPECT_EQ(map.At(17), 0xab);
  EXPECT_FALSE(fault->Faulted(&offset));

  // Past the end of the file: without the guard this read kills the process.
  EXPECT_EQ(map.At(2 * kPage + 5), 0);
  ASSERT_TRUE(fault->Faulted(&offset));
  EXPECT_EQ(offset, 2 * kPage + 5);
  // Only the page that faulted was replaced; a second fault keeps the first's offset.
  EXPECT_EQ(map.At(kPage - 1), 0xab);
  EXPECT_EQ(map.At(2 * kPage + 100), 0);
  EXPECT_EQ(map.At(3 * kPage), 0);
  ASSERT_TRUE(fault->Faulted(&offset));
  EXPECT_EQ(offset, 2 * kPage + 5);

  // A slot registered again starts clean.
  UnguardMappedRegion(map.base());
  const MapFault* again = GuardMappedRegion(map.base(), map.bytes(), dir.Sub("data.mdb"));
  ASSERT_NE(again, nullptr);
  EXPECT_FALSE(again->Faulted(&offset));
  UnguardMappedRegion(map.base());
}

TEST(MapGuard, ABusErrorOutsideGuardedMapsStillEndsTheProcess) {
  testing::TempDir dir;
  ShortFileMap guarded(dir.Sub("guarded"), 2);
  ShortFileMap other(dir.Sub("other"), 2);
  ASSERT_NE(GuardMappedRegion(guarded.base(), guarded.bytes(), dir.Sub("guarded")),
            nullptr);  // installs the handler
  // The previous SIGBUS disposition runs: the default kills with SIGBUS; a sanitizer's own handler
  // (chained to, as any earlier handler is) reports and aborts — ThreadSanitizer's ends the process
  // with its exit code, 66. Either way the process ends; it never goes on reading zeros.
  const auto ended_by_the_fault = [](int status) {
#if defined(__SANITIZE_THREAD__)
    if (WIFEXITED(status) && WEXITSTATUS(status) == 66) return true;
#endif
    return WIFSIGNALED(status) && (WTERMSIG(status) == SIGBUS || WTERMSIG(status) == SIGABRT);
  };
  EXPECT_EXIT((void)other.At(kPage + 1), ended_by_the_fault, "");
  UnguardMappedRegion(guarded.base());
}

}  // namespace
}  // namespace ddpio::storage::internal
