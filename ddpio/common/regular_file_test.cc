// Files named by users: special files are refused without blocking, oversized ones before a byte
// is read.
#include "ddpio/common/regular_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

TEST(RegularFile, ReadsARegularFileWhole) {
  ddpio::testing::TempDir dir;
  const std::string path = dir.Sub("a.txt");
  std::ofstream(path) << "hello";
  ASSERT_OK_AND_ASSIGN(std::string text, ReadRegularFile(path, 5, "label file"));
  EXPECT_EQ(text, "hello");
}

TEST(RegularFile, AFifoIsRefusedAtOnceNotWaitedOn) {
  ddpio::testing::TempDir dir;
  const std::string fifo = dir.Sub("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Without a writer, a blocking open of a FIFO never returns: this returning at all is the test.
  auto read = ReadRegularFile(fifo, 1 << 20, "checkpoint");
  EXPECT_CODE(read, kInvalidArgument);
  EXPECT_THAT(read.status().message(), ::testing::HasSubstr("is a FIFO, not a regular file"));
  EXPECT_CODE(OpenRegularFile(fifo, "label file"), kInvalidArgument);
}

TEST(RegularFile, DevicesAndDirectoriesAreRefused) {
  auto zero = ReadRegularFile("/dev/zero", 1 << 20, "checkpoint");
  EXPECT_CODE(zero, kInvalidArgument);
  EXPECT_THAT(zero.status().message(), ::testing::HasSubstr("character device"));
  EXPECT_CODE(ReadRegularFile("/", 1 << 20, "checkpoint"), kInvalidArgument);
  EXPECT_CODE(ReadRegularFile("/no/such/file", 1 << 20, "checkpoint"), kNotFound);
}

TEST(RegularFile, AFileLargerThanItsFormatAllowsIsRefusedBeforeReading) {
  ddpio::testing::TempDir dir;
  const std::string path = dir.Sub("sparse");
  { std::ofstream out(path); }
  ASSERT_EQ(::truncate(path.c_str(), int64_t{20} << 30), 0);  // 20 GiB, sparse: nothing on disk
  auto read = ReadRegularFile(path, 64 << 20, "checkpoint");
  EXPECT_CODE(read, kInvalidArgument);
  EXPECT_THAT(read.status().message(), ::testing::HasSubstr("21474836480 bytes"));
  EXPECT_THAT(read.status().message(), ::testing::HasSubstr("at most 67108864"));
}

}  // namespace
}  // namespace ddpio
