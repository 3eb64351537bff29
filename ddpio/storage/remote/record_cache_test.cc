// The local record cache serves what it was given and keeps its budget, and trusts nothing it
// finds in its folder: a FIFO, a sparse giant or a file of the wrong size in a record's place is a
// miss (at once, without reading it) and is removed; a link in place of the dataset folder is
// refused, and a link in place of a <xx> folder or a record is never followed, so nothing is read,
// written or deleted outside the cache.
#include "ddpio/storage/remote/record_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage::remote {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Where the cache keeps record `index`: <folder>/<xx>/<index>.
std::string BucketOf(const RecordCache& cache, uint64_t index) {
  char xx[3];
  std::snprintf(xx, sizeof(xx), "%02x", static_cast<unsigned>(index % 256));
  return cache.folder() + "/" + xx;
}
std::string PathOf(const RecordCache& cache, uint64_t index) {
  return BucketOf(cache, index) + "/" + std::to_string(index);
}

void WriteFile(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}
std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Bytes this process has read so far (rchar of /proc/self/io); nullopt where not available.
std::optional<uint64_t> BytesReadSoFar() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  return std::nullopt;
}

TEST(RecordCacheTest, RoundTripsForgetsWhatIsGoneAndKeepsItsBudget) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto cache, RecordCache::Open(dir.path(), "ds-1", 1000));
  EXPECT_FALSE(cache->Get(7, 300).has_value());
  cache->Put(7, std::string(300, 'a'));
  cache->Put(8, std::string(300, 'b'));
  EXPECT_EQ(cache->Get(7, 300).value_or(""), std::string(300, 'a'));
  EXPECT_EQ(cache->bytes(), 600u);
  cache->Put(9, std::string(300, 'c'));
  cache->Put(10, std::string(300, 'd'));  // 1200 > 1000: the oldest (7) goes
  EXPECT_FALSE(cache->Get(7, 300).has_value());
  EXPECT_FALSE(Exists(PathOf(*cache, 7)));
  EXPECT_EQ(cache->Get(10, 300).value_or(""), std::string(300, 'd'));
  EXPECT_LE(cache->bytes(), 1000u);
  cache->Erase(8);
  EXPECT_FALSE(cache->Get(8, 300).has_value());
  EXPECT_FALSE(cache->Contains(8));
  // Deleted under it by someone else: a miss, and writing again makes the folders again.
  fs::remove_all(cache->folder());
  EXPECT_FALSE(cache->Get(9, 300).has_value());
  cache->Put(11, "again");
  EXPECT_EQ(cache->Get(11, 5).value_or(""), "again");
  // A new process finds what is there, oldest first.
  ASSERT_OK_AND_ASSIGN(auto reopened, RecordCache::Open(dir.path(), "ds-1", 1000));
  EXPECT_EQ(reopened->Get(11, 5).value_or(""), "again");
  EXPECT_EQ(reopened->bytes(), 5u);
  EXPECT_CODE(RecordCache::Open(dir.path(), "../escape", 10), kInvalidArgument);
  EXPECT_CODE(RecordCache::Open(dir.path(), "", 10), kInvalidArgument);
  EXPECT_CODE(RecordCache::Open("/proc/version", "x", 10), kInvalidArgument);
}

TEST(RecordCacheTest, AFifoInARecordsPlaceIsAMissAtOnceNotAHang) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto cache, RecordCache::Open(dir.path(), "ds", 1000));
  const std::string path = PathOf(*cache, 7);
  fs::create_directories(BucketOf(*cache, 7));
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  // A blocking open() of a FIFO waits for a writer, forever. Should Get still be inside after a
  // minute, the watchdog becomes that writer (O_RDWR never blocks on Linux), so the test fails
  // instead of hanging.
  std::mutex mu;
  std::condition_variable cv;
  bool returned = false, released = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (cv.wait_for(lock, std::chrono::seconds(60), [&] { return returned; })) return;
    released = true;
    const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    cv.wait(lock, [&] { return returned; });
    if (fd >= 0) ::close(fd);
  });
  const std::optional<std::string> got = cache->Get(7, 100);
  {
    std::lock_guard<std::mutex> lock(mu);
    returned = true;
  }
  cv.notify_all();
  watchdog.join();
  EXPECT_FALSE(released) << "Get blocked on the FIFO until a writer came";
  EXPECT_FALSE(got.has_value());
  EXPECT_FALSE(Exists(path)) << "the FIFO is still in the record's place";
  // And the record can be cached there now.
  cache->Put(7, std::string(100, 'r'));
  EXPECT_EQ(cache->Get(7, 100).value_or(""), std::string(100, 'r'));
}

TEST(RecordCacheTest, ASparseGiantInARecordsPlaceIsAMissWithoutReadingIt) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto cache, RecordCache::Open(dir.path(), "ds", 1 << 20));
  const std::string path = PathOf(*cache, 7);
  fs::create_directories(BucketOf(*cache, 7));
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{1} << 31), 0);  // 2 GiB, no block written
    ::close(fd);
  }
  const std::optional<uint64_t> before = BytesReadSoFar();
  EXPECT_FALSE(cache->Get(7, 2700).has_value());
  const std::optional<uint64_t> after = BytesReadSoFar();
  if (before.has_value() && after.has_value()) {
    EXPECT_LT(*after - *before, uint64_t{1} << 20) << "read the 2 GiB file for a 2.7 KB record";
  }
  EXPECT_FALSE(Exists(path)) << "the sparse file is still in the record's place";
}

TEST(RecordCacheTest, AFileOfTheWrongSizeIsAMissAndErased) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto cache, RecordCache::Open(dir.path(), "ds", 1 << 20));
  cache->Put(7, std::string(2700, 'r'));
  EXPECT_EQ(cache->Get(7, 2700).value_or(""), std::string(2700, 'r'));
  WriteFile(PathOf(*cache, 7), std::string(100, 'x'));  // cut short by someone
  EXPECT_FALSE(cache->Get(7, 2700).has_value());
  EXPECT_FALSE(Exists(PathOf(*cache, 7)));
  EXPECT_FALSE(cache->Contains(7));
  EXPECT_EQ(cache->bytes(), 0u);
  WriteFile(PathOf(*cache, 8), std::string(3000, 'x'));  // longer than the record
  EXPECT_FALSE(cache->Get(8, 2700).has_value());
  EXPECT_FALSE(Exists(PathOf(*cache, 8)));
}

TEST(RecordCacheTest, ALinkInARecordsPlaceIsNotFollowed) {
  testing::TempDir dir;
  WriteFile(dir.Sub("outside/secret"), "secret");
  ASSERT_OK_AND_ASSIGN(auto cache, RecordCache::Open(dir.Sub("cache"), "ds", 1000));
  fs::create_directories(BucketOf(*cache, 7));
  fs::create_symlink(dir.Sub("outside/secret"), PathOf(*cache, 7));
  EXPECT_FALSE(cache->Get(7, 6).has_value());
  EXPECT_EQ(ReadFile(dir.Sub("outside/secret")), "secret");
  EXPECT_FALSE(Exists(PathOf(*cache, 7))) << "the link is still in the record's place";
}

TEST(RecordCacheTest, PutThroughALinkedBucketWritesNothingOutside) {
  testing::TempDir dir;
  WriteFile(dir.Sub("outside/7"), "victim");
  ASSERT_OK_AND_ASSIGN(auto cache, RecordCache::Open(dir.Sub("cache"), "ds", 1000));
  fs::create_symlink(dir.Sub("outside"), BucketOf(*cache, 7));
  cache->Put(7, "record");
  EXPECT_EQ(ReadFile(dir.Sub("outside/7")), "victim");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.Sub("outside")), fs::directory_iterator()), 1)
      << "a file was written outside the cache";
  // The link was replaced by a real folder, and the record cached there.
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(BucketOf(*cache, 7))));
  EXPECT_EQ(cache->Get(7, 6).value_or(""), "record");
}

TEST(RecordCacheTest, EraseAndEvictionThroughALinkedBucketDeleteNothingOutside) {
  testing::TempDir dir;
  WriteFile(dir.Sub("outside/7"), "victim 7");
  WriteFile(dir.Sub("outside/263"), "victim 263");
  ASSERT_OK_AND_ASSIGN(auto cache, RecordCache::Open(dir.Sub("cache"), "ds", 1000));
  cache->Put(7, std::string(600, 'a'));    // folder 07
  cache->Put(263, std::string(300, 'b'));  // 263 % 256 = 7: folder 07 too
  // The <xx> folder swapped for a link to where the victims live.
  fs::remove_all(BucketOf(*cache, 7));
  fs::create_symlink(dir.Sub("outside"), BucketOf(*cache, 7));
  cache->Erase(263);
  EXPECT_FALSE(cache->Get(263, 10).has_value());
  cache->Put(8, std::string(600, 'c'));  // 1200 > 1000: 7 is evicted
  EXPECT_FALSE(cache->Contains(7));
  EXPECT_LE(cache->bytes(), 1000u);
  EXPECT_EQ(ReadFile(dir.Sub("outside/7")), "victim 7");
  EXPECT_EQ(ReadFile(dir.Sub("outside/263")), "victim 263");
}

TEST(RecordCacheTest, ALinkedDatasetFolderIsRefusedButALinkedCacheFolderIsNot) {
  testing::TempDir dir;
  fs::create_directories(dir.Sub("outside"));
  fs::create_directories(dir.Sub("cache"));
  fs::create_symlink(dir.Sub("outside"), dir.Sub("cache/ds"));
  const auto linked = RecordCache::Open(dir.Sub("cache"), "ds", 1000);
  EXPECT_CODE(linked, kInvalidArgument);
  EXPECT_THAT(linked.status().message(), HasSubstr(dir.Sub("cache/ds")));
  EXPECT_THAT(linked.status().message(), HasSubstr("symbolic link"));
  WriteFile(dir.Sub("cache/file"), "x");
  EXPECT_CODE(RecordCache::Open(dir.Sub("cache"), "file", 1000), kInvalidArgument);
  // DIR itself is the user's choice, link or not.
  fs::create_directory_symlink(dir.Sub("cache"), dir.Sub("cache-link"));
  ASSERT_OK_AND_ASSIGN(auto cache, RecordCache::Open(dir.Sub("cache-link"), "real", 1000));
  cache->Put(1, "one");
  EXPECT_EQ(ReadFile(dir.Sub("cache/real/01/1")), "one");
}

TEST(RecordCacheTest, OpenCountsOnlyRegularFilesInTheirOwnFolder) {
  testing::TempDir dir;
  const std::string folder = dir.Sub("cache/ds");
  WriteFile(folder + "/07/7", std::string(100, 'a'));          // a record
  WriteFile(folder + "/00/7", std::string(50, 'a'));           // not where 7 belongs
  WriteFile(dir.Sub("outside/8"), std::string(500, 'b'));      //
  fs::create_directories(folder + "/08");                      //
  fs::create_symlink(dir.Sub("outside/8"), folder + "/08/8");  // a link to a file
  fs::create_directories(folder + "/09");
  ASSERT_EQ(::mkfifo((folder + "/09/9").c_str(), 0644), 0);  // a FIFO
  WriteFile(dir.Sub("outside/10"), std::string(400, 'c'));
  fs::create_symlink(dir.Sub("outside"), folder + "/0a");      // a link to a folder
  WriteFile(folder + "/0b/11", std::string(5000, 'd'));        // larger than the budget
  WriteFile(folder + "/0c/12.tmp-1-2", std::string(10, 'e'));  // a writer's leftover
  ASSERT_OK_AND_ASSIGN(auto cache, RecordCache::Open(dir.Sub("cache"), "ds", 1000));
  EXPECT_EQ(cache->bytes(), 100u);
  EXPECT_TRUE(cache->Contains(7));
  for (uint64_t i : {8, 9, 10, 11, 12}) EXPECT_FALSE(cache->Contains(i)) << i;
  EXPECT_EQ(cache->Get(7, 100).value_or(""), std::string(100, 'a'));
  EXPECT_EQ(ReadFile(dir.Sub("outside/8")), std::string(500, 'b'));
  EXPECT_EQ(ReadFile(dir.Sub("outside/10")), std::string(400, 'c'));
}

TEST(RecordCacheTest, AClaimExcludesEveryOtherHolderUntilReleasedOrItsProcessDies) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto one, RecordCache::Open(dir.path(), "ds", 1 << 20));
  ASSERT_OK_AND_ASSIGN(auto two, RecordCache::Open(dir.path(), "ds", 1 << 20));
  std::optional<RecordCache::Claim> held = one->TryClaim(7);
  ASSERT_TRUE(held.has_value());
  ASSERT_TRUE(held->locked());
  EXPECT_FALSE(one->TryClaim(7).has_value()) << "held by this very cache";
  EXPECT_FALSE(two->TryClaim(7).has_value()) << "held by another open of the folder";
  EXPECT_TRUE(two->TryClaim(8).has_value()) << "another chunk's claim is free";
  EXPECT_FALSE(two->WaitClaim(7, std::chrono::milliseconds(0)).locked())
      << "a stuck holder is waited for only so long";
  held.reset();
  EXPECT_TRUE(two->TryClaim(7).has_value()) << "released with its object";

  // A claim held by another process goes when that process is killed.
  int ready[2], hold[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(hold), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto mine = RecordCache::Open(dir.path(), "ds", 1 << 20);
    std::optional<RecordCache::Claim> c;
    if (mine.ok()) c = (*mine)->TryClaim(9);
    const char ok = c.has_value() && c->locked() ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    char never;
    (void)!::read(hold[0], &never, 1);  // until killed
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  EXPECT_FALSE(two->TryClaim(9).has_value()) << "held by the child";
  // Waiting for it ends when the child dies (well within the patience).
  std::optional<RecordCache::Claim> waited;
  std::thread waiter([&] { waited = two->WaitClaim(9, std::chrono::minutes(2)); });
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  waiter.join();
  EXPECT_TRUE(waited.has_value() && waited->locked()) << "the dead holder's lock is gone";
  for (int fd : {ready[0], ready[1], hold[0], hold[1]}) ::close(fd);
}

TEST(RecordCacheTest, HoldsSeesWhatAnotherOpenOfTheFolderWrote) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto one, RecordCache::Open(dir.path(), "ds", 1 << 20));
  ASSERT_OK_AND_ASSIGN(auto two, RecordCache::Open(dir.path(), "ds", 1 << 20));
  one->Put(3, "three");
  EXPECT_FALSE(two->Contains(3)) << "Contains knows only its own writes";
  EXPECT_TRUE(two->Holds(3, 5));
  EXPECT_FALSE(two->Holds(3, 4)) << "a file of another size is not the record";
  EXPECT_FALSE(two->Holds(4, 5));
}

}  // namespace
}  // namespace ddpio::storage::remote
