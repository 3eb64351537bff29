// A dataset on read-only media (or in a directory the reader cannot write) must still open:
// LMDB's lock file cannot be created or written there, so the reader falls back to no-lock mode.
// Runs in a forked child that drops root (root ignores permission bits).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "ddpio/storage/dataset_reader.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage {
namespace {

// Runs `body` in a child process without write access to `dir`; returns its exit code.
template <typename Fn>
int InReadOnlyChild(const std::filesystem::path& dir, Fn body) {
  namespace fs = std::filesystem;
  for (auto& entry : fs::recursive_directory_iterator(dir)) {
    fs::permissions(entry.path(),
                    fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read |
                        (entry.is_directory() ? fs::perms::owner_exec | fs::perms::group_exec |
                                                    fs::perms::others_exec
                                              : fs::perms::none));
  }
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                           fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(90);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(ReadOnlyDataset, OpensWithoutLockAndReadsEverything) {
  testing::TempDir tmp;
  // The parent of the dataset must be traversable by the unprivileged child.
  std::filesystem::permissions(tmp.path(), std::filesystem::perms::all);
  const std::string path = tmp.Sub("ds");
  ASSERT_OK(testing::WriteDataset(path, 64));
  int code = InReadOnlyChild(path, [&] {
    if (access(path.c_str(), W_OK) == 0) return 91;  // still writable: the test proves nothing
    auto reader = DatasetReader::Open(path);
    if (!reader.ok()) return 92;
    if (!(*reader)->no_lock()) return 93;
    for (uint64_t i = 0; i < 64; ++i) {
      auto r = (*reader)->ReadCopy(i);
      if (!r.ok() || r->payload != testing::MakeRecord(i).payload) return 94;
    }
    return 0;
  });
  EXPECT_EQ(code, 0) << "91 writable, 92 open failed, 93 not no-lock, 94 bad record";
}

TEST(ReadOnlyDataset, StrictLockingFailsClearly) {
  testing::TempDir tmp;
  std::filesystem::permissions(tmp.path(), std::filesystem::perms::all);
  const std::string path = tmp.Sub("ds");
  ASSERT_OK(testing::WriteDataset(path, 4));
  std::filesystem::remove(path + "/lock.mdb");  // so it has to be created
  int code = InReadOnlyChild(path, [&] {
    ReaderOptions o;
    o.locking = ReaderOptions::Locking::kLock;
    auto reader = DatasetReader::Open(path, o);
    if (reader.ok()) return 95;
    return reader.status().code() == absl::StatusCode::kPermissionDenied ? 0 : 96;
  });
  EXPECT_EQ(code, 0) << "95 opened anyway, 96 wrong error code";
}

}  // namespace
}  // namespace ddpio::storage
