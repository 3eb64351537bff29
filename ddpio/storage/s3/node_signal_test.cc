// The signal a node's clients of one store share: a push-back one raises is what the others read,
// across processes (a forked child raises it), per store, and a file that is damaged or not this
// user's plain file is ignored or refused, never trusted.
#include "ddpio/storage/s3/node_signal.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage::s3 {
namespace {

using ::testing::HasSubstr;
using Clock = NodeSignal::Clock;

TEST(NodeSignal, APushBackOneClientRaisesIsWhatAnotherReads) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto a, NodeSignal::Open("http://store:7480", dir.path().string()));
  ASSERT_OK_AND_ASSIGN(auto b, NodeSignal::Open("http://store:7480", dir.path().string()));
  ASSERT_OK_AND_ASSIGN(auto other, NodeSignal::Open("http://other:7480", dir.path().string()));
  EXPECT_EQ(a->path(), b->path());
  EXPECT_NE(a->path(), other->path()) << "a store of its own";
  const Clock::time_point now = Clock::now();
  EXPECT_FALSE(b->Latest(now).has_value()) << "nothing raised yet";
  a->Raise(now);
  EXPECT_EQ(b->Latest(now), now);
  EXPECT_FALSE(other->Latest(now).has_value());
}

TEST(NodeSignal, AnotherProcessesPushBackIsRead) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto parent, NodeSignal::Open("http://store:7480", dir.path().string()));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto mine = NodeSignal::Open("http://store:7480", dir.path().string());
    if (!mine.ok()) ::_exit(2);
    (*mine)->Raise(Clock::now());
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const Clock::time_point now = Clock::now();
  std::optional<Clock::time_point> heard = parent->Latest(now);
  ASSERT_TRUE(heard.has_value()) << "the child's push-back";
  EXPECT_LE(*heard, now);
}

TEST(NodeSignal, ATimeInTheFutureIsIgnoredAndTheNextPushBackReplacesIt) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto signal, NodeSignal::Open("k", dir.path().string()));
  {
    std::fstream f(signal->path(), std::ios::in | std::ios::out | std::ios::binary);
    const char garbage[8] = {0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f};
    f.write(garbage, sizeof garbage);
  }
  const Clock::time_point now = Clock::now();
  EXPECT_FALSE(signal->Latest(now).has_value()) << "damaged: never a push-back";
  signal->Raise(now);
  EXPECT_EQ(signal->Latest(now), now);
}

TEST(NodeSignal, AFileThatIsNotThisUsersPlainFileIsRefusedNamingIt) {
  testing::TempDir dir;
  std::string path;
  {
    ASSERT_OK_AND_ASSIGN(auto signal, NodeSignal::Open("k", dir.path().string()));
    path = signal->path();
  }
  std::filesystem::remove(path);
  std::filesystem::create_symlink(dir.Sub("elsewhere"), path);
  auto linked = NodeSignal::Open("k", dir.path().string());
  EXPECT_CODE(linked, kFailedPrecondition);
  EXPECT_THAT(linked.status().message(), HasSubstr(path));
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("elsewhere"))) << "a symlink followed";
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  auto folder = NodeSignal::Open("k", dir.path().string());
  EXPECT_CODE(folder, kFailedPrecondition);
  EXPECT_THAT(folder.status().message(), HasSubstr(path));
  EXPECT_CODE(NodeSignal::Open("k", dir.Sub("missing")), kFailedPrecondition);
}

TEST(NodeSignal, TheLastClientToCloseRemovesTheFile) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto a, NodeSignal::Open("http://store:7480", dir.path().string()));
  ASSERT_OK_AND_ASSIGN(auto b, NodeSignal::Open("http://store:7480", dir.path().string()));
  const std::string path = a->path();
  ASSERT_TRUE(std::filesystem::exists(path));
  a.reset();
  EXPECT_TRUE(std::filesystem::exists(path)) << "b still uses it";
  b->Raise(Clock::now());
  b.reset();
  EXPECT_FALSE(std::filesystem::exists(path)) << "left behind by its last client";
}

TEST(NodeSignal, AFileAKilledClientLeftGoesWithTheNextLastClient) {
  testing::TempDir dir;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // opens the signal and dies without closing it
    auto mine = NodeSignal::Open("k", dir.path().string());
    ::_exit(mine.ok() ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_OK_AND_ASSIGN(auto next, NodeSignal::Open("k", dir.path().string()));
  const std::string path = next->path();
  ASSERT_TRUE(std::filesystem::exists(path)) << "the killed client's file, reused";
  next.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(NodeSignal, AClientWhoseFileWasReplacedLeavesTheNewOneToItsUsers) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto old_user, NodeSignal::Open("k", dir.path().string()));
  const std::string path = old_user->path();
  std::filesystem::remove(path);  // as its last user would have, had the lock not been held
  ASSERT_OK_AND_ASSIGN(auto new_user, NodeSignal::Open("k", dir.path().string()));
  old_user.reset();
  EXPECT_TRUE(std::filesystem::exists(path)) << "the new file, removed by a client not using it";
  new_user->Raise(Clock::now());
  new_user.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace ddpio::storage::s3
