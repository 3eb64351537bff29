// The dataset file itself, damaged the ways files get damaged — cut short by an interrupted
// copy, a meta page overwritten, random pages scribbled on — read by `ddpio inspect --verify
// --decode` and by the loader (`ddpio bench loader`), each a real process. Every outcome is a
// clean pass or a clean error (exit 1 with a message): never a signal, never a hang. Before the
// checks, a truncated file killed every reader with SIGBUS and no message, and a damaged meta or
// branch page could crash inside liblmdb.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

namespace fs = std::filesystem;

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs the two readers on `db`; both must end with 0 or 1, and 1 must come with a message naming
// the dataset.
void ExpectCleanOutcome(const std::string& db, const std::string& what) {
  testing::RunOptions o;
  o.timeout = std::chrono::seconds(60);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"inspect", db, "--verify", "--decode", "--quiet", "--threads",
                                 "2"},
        std::vector<std::string>{"bench", "loader", "--data", db, "--workers", "1", "--batch-size",
                                 "8", "--image-size", "16", "--epochs", "1"}}) {
    testing::RunResult r = testing::RunDdpio(args, o);
    EXPECT_FALSE(r.timed_out) << what << ": " << args[0] << " hung";
    EXPECT_EQ(r.signal, 0) << what << ": " << args[0] << " " << args[1] << " died of signal "
                           << r.signal << "\n"
                           << r.err;
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << what << ": exit " << r.exit_code << "\n"
                                                      << r.err;
    if (r.exit_code == 1) {
      EXPECT_NE(r.err.find(db), std::string::npos) << what << ": no message naming the dataset\n"
                                                   << r.err;
    }
  }
}

class DatasetDamage : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(testing::WriteJpegDataset(dir_.Sub("good"), 40, 24));
    good_ = ReadAll(dir_.Sub("good") + "/data.mdb");
    ASSERT_GT(good_.size(), 16384u);
  }
  // A copy of the good dataset whose data.mdb is `bytes`.
  std::string Damaged(const std::vector<char>& bytes) {
    const std::string db = dir_.Sub("damaged" + std::to_string(copies_++));
    fs::create_directories(db);
    WriteAll(db + "/data.mdb", bytes);
    return db;
  }
  testing::TempDir dir_;
  std::vector<char> good_;
  int copies_ = 0;
};

TEST_F(DatasetDamage, TruncatedFilesAreNamedNotFatal) {
  for (size_t keep : {size_t{0}, size_t{100}, size_t{4096}, size_t{8192}, size_t{12288},
                      good_.size() / 2, good_.size() - 4096, good_.size() - 1}) {
    std::vector<char> cut(good_.begin(), good_.begin() + static_cast<std::ptrdiff_t>(keep));
    const std::string db = Damaged(cut);
    ExpectCleanOutcome(db, "truncated to " + std::to_string(keep));
    testing::RunResult r = testing::RunDdpio({"inspect", db});
    EXPECT_EQ(r.exit_code, 1) << "truncated to " << keep << ": " << r.err;
    if (keep >= 8192) {
      EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("was the copy interrupted"), std::string::npos) << r.err;
    }
  }
}

TEST_F(DatasetDamage, DamagedMetaPagesAreRefusedBeforeLmdbSeesThem) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 24; ++trial) {
    std::vector<char> bytes = good_;
    // Each of the two meta pages' interesting fields: magic, version, page size, roots, last
    // page, txnid — overwritten with random values.
    const size_t page = (trial % 2) * 4096;
    const size_t fields[] = {16, 20, 40, 80, 128, 136, 144};
    const size_t at = page + fields[trial % 7];
    for (int k = 0; k < 8; ++k) bytes[at + k] = static_cast<char>(rng());
    ExpectCleanOutcome(Damaged(bytes), "meta field at " + std::to_string(at));
  }
}

TEST_F(DatasetDamage, ScribbledPagesGiveCleanErrorsOrCleanPasses) {
  std::mt19937_64 rng(11);
  const size_t pages = good_.size() / 4096;
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<char> bytes = good_;
    const size_t page = 2 + rng() % (pages - 2);  // past the meta pages
    const int flips = 1 + static_cast<int>(rng() % 64);
    for (int k = 0; k < flips; ++k) bytes[page * 4096 + rng() % 4096] = static_cast<char>(rng());
    ExpectCleanOutcome(Damaged(bytes),
                       "page " + std::to_string(page) + ", " + std::to_string(flips) + " bytes");
  }
}

// A file truncated under a running reader: the SIGBUS is reported with the dataset's name.
TEST_F(DatasetDamage, TruncatedUnderARunningReaderSaysWhichDataset) {
  const std::string db = Damaged(good_);
  // bench loader maps the file, then the file shrinks while it runs (a shell truncates it as soon
  // as the loader has started reading).
  testing::RunOptions o;
  o.timeout = std::chrono::seconds(60);
  testing::RunResult r =
      testing::Run({"/bin/sh", "-c",
                    testing::DdpioBin() + " bench loader --data " + db +
                        " --workers 1 --batch-size 4 --image-size 16 --epochs 1000 & pid=$!; "
                        "while ! grep -q data.mdb /proc/$pid/maps 2>/dev/null; do :; done; "
                        "truncate -s 8192 " +
                        db + "/data.mdb; wait $pid"},
                   o);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("became unreadable while mapped"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(db), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ddpio
