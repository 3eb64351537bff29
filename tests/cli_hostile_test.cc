// The `ddpio` program against what an attacker or an unlucky user hands it: file names that
// are not UTF-8, decompression bombs, records whose stored geometry lies, CMYK JPEGs, FIFOs and
// devices named like photos, a mangled resume entry, absurd arguments, a launcher killed with
// SIGKILL, a diverging run. Each case once aborted, hung, ran out of memory or passed silently;
// each must now end with exit 0, 1 or 2 and a message that names what and where.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ddpio/convert/convert_sources.h"
#include "gtest/gtest.h"
#include "tests/support/crashing_conversion.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/multiprocess.h"
#include "tests/support/status_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

namespace fs = std::filesystem;
using testing::RunDdpio;
using testing::RunResult;

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// Never a signal (an abort is 134, a crash 139), never a hang.
void ExpectNoCrash(const RunResult& r, const std::string& what) {
  EXPECT_FALSE(r.timed_out) << what;
  EXPECT_EQ(r.signal, 0) << what << ": died of signal " << r.signal << "\n" << r.err;
  EXPECT_TRUE(r.exit_code >= 0 && r.exit_code <= 2) << what << ": exit " << r.exit_code << "\n"
                                                    << r.err;
}

class CliHostile : public ::testing::Test {
 protected:
  // An ImageFolder with two classes of two real JPEGs each.
  std::string Folder(const std::string& name) {
    const std::string root = dir_.Sub(name);
    for (const char* c : {"cat", "dog"}) {
      fs::create_directories(root + "/" + c);
      for (int i = 0; i < 2; ++i) {
        WriteBytes(root + "/" + c + "/" + std::to_string(i) + ".jpg", testing::MakeJpeg(40, 32, i));
      }
    }
    return root;
  }
  testing::TempDir dir_;
};

TEST_F(CliHostile, NamesThatAreNotUtf8NeverAbort) {
  const std::string root = Folder("src");
  fs::create_directories(root + "/caf\xe9");  // Latin-1 class name
  WriteBytes(root + "/caf\xe9/x.jpg", testing::MakeJpeg(40, 32, 9));
  WriteBytes(root + "/cat/bad\xff\xfe.jpg", {'n', 'o', 't', ' ', 'j', 'p', 'e', 'g'});
  RunResult r =
      RunDdpio({"convert", "--src", root, "--out", dir_.Sub("db"), "--skip-invalid", "--json"});
  ExpectNoCrash(r, "convert");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(testing::LastLine(r.out), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;  // valid JSON (invalid bytes replaced)
  EXPECT_EQ(j["records"], 5);
  RunResult again =
      RunDdpio({"convert", "--src", root, "--out", dir_.Sub("db"), "--skip-invalid", "--resume"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  RunResult info = RunDdpio({"inspect", dir_.Sub("db"), "--json"});
  ExpectNoCrash(info, "inspect");
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_FALSE(nlohmann::json::parse(testing::LastLine(info.out), nullptr, false).is_discarded());
}

TEST_F(CliHostile, DecompressionBombsAreRefusedBeforeAllocating) {
  const std::string root = Folder("src");
  WriteBytes(root + "/cat/bomb.jpg", testing::MakeJpegBomb(65500, 65500));
  for (const char* mode : {"--skip-invalid", "--header-only"}) {
    const auto t0 = std::chrono::steady_clock::now();
    RunResult r =
        RunDdpio({"convert", "--src", root, "--out", dir_.Sub(std::string("db") + mode), mode});
    ExpectNoCrash(r, mode);
    if (std::string(mode) == "--skip-invalid") {
      EXPECT_EQ(r.exit_code, 0) << r.err;
    } else {
      EXPECT_EQ(r.exit_code, 1) << r.err;  // header-only still refuses a bomb
    }
    EXPECT_NE(r.err.find("more than the limit"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bomb.jpg"), std::string::npos) << r.err;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  }
  // A bomb that reached a dataset anyway (another tool wrote it): the loader refuses it too.
  ASSERT_OK(testing::WriteRecords(
      dir_.Sub("bombs"), {testing::JpegRecord(testing::MakeJpegBomb(65500, 65500), 64, 64, 3, 0)},
      1));
  RunResult load = RunDdpio({"bench", "loader", "--data", dir_.Sub("bombs"), "--workers", "1",
                             "--batch-size", "1", "--image-size", "16", "--epochs", "1"});
  ExpectNoCrash(load, "bench loader");
  EXPECT_EQ(load.exit_code, 1);
  EXPECT_NE(load.err.find("more than the limit"), std::string::npos) << load.err;
}

TEST_F(CliHostile, StoredGeometryLargerThanTheJpegIsDataLossNotACrash) {
  ASSERT_OK(testing::WriteRecords(
      dir_.Sub("liar"), {testing::JpegRecord(testing::MakeJpeg(40, 32, 1), 2000, 1500, 3, 0)}, 1));
  for (const char* decode : {"fast", "exact"}) {
    RunResult r =
        RunDdpio({"bench", "loader", "--data", dir_.Sub("liar"), "--workers", "1", "--batch-size",
                  "1", "--image-size", "16", "--epochs", "1", "--decode", decode});
    ExpectNoCrash(r, decode);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("stored geometry"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("sample 0"), std::string::npos) << r.err;
  }
  RunResult v = RunDdpio({"inspect", dir_.Sub("liar"), "--verify", "--decode"});
  EXPECT_EQ(v.exit_code, 1) << v.out;
  EXPECT_NE(v.out.find("stored geometry"), std::string::npos) << v.out;
}

TEST_F(CliHostile, VerifiedMeansLoadableForCmykJpegs) {
  ASSERT_OK(testing::WriteRecords(
      dir_.Sub("cmyk"), {testing::JpegRecord(testing::MakeCmykJpeg(32, 32), 32, 32, 4, 0)}, 1));
  RunResult load = RunDdpio({"bench", "loader", "--data", dir_.Sub("cmyk"), "--workers", "1",
                             "--batch-size", "1", "--image-size", "16", "--epochs", "1"});
  RunResult verify = RunDdpio({"inspect", dir_.Sub("cmyk"), "--verify", "--decode"});
  ExpectNoCrash(load, "loader");
  ExpectNoCrash(verify, "verify");
  // CMYK JPEGs load (converted to RGB as Pillow does), and inspect says so through the same path.
  EXPECT_EQ(load.exit_code, 0) << load.err;
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST_F(CliHostile, FifosAndDevicesNamedLikePhotosAreSkippedNotReadForever) {
  const std::string root = Folder("src");
  ASSERT_EQ(::mkfifo((root + "/cat/fifo.jpg").c_str(), 0644), 0);
  fs::create_symlink("/dev/zero", root + "/dog/zero.jpg");
  RunResult skip = RunDdpio({"convert", "--src", root, "--out", dir_.Sub("db"), "--skip-invalid"});
  ExpectNoCrash(skip, "skip");
  EXPECT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_NE(skip.err.find("FIFO"), std::string::npos) << skip.err;
  EXPECT_NE(skip.err.find("character device"), std::string::npos) << skip.err;
  RunResult stop = RunDdpio({"convert", "--src", root, "--out", dir_.Sub("db2")});
  ExpectNoCrash(stop, "stop");
  EXPECT_EQ(stop.exit_code, 1);
  EXPECT_NE(stop.err.find("not a regular file"), std::string::npos) << stop.err;
}

// Files named on the command line that are FIFOs, devices or absurdly large: refused at once,
// naming the file and what it is, never read forever or whole.
TEST_F(CliHostile, SpecialFilesAsCheckpointsAndLabelFilesAreRefusedNotReadForever) {
  const std::string ckpt = dir_.Sub("ckpt");
  fs::create_directories(ckpt);
  ASSERT_EQ(::mkfifo((ckpt + "/checkpoint.bin").c_str(), 0644), 0);
  RunResult fifo = RunDdpio({"checkpoint", ckpt}, {std::chrono::seconds(30)});
  ExpectNoCrash(fifo, "checkpoint FIFO");
  EXPECT_EQ(fifo.exit_code, 1);
  EXPECT_NE(fifo.err.find("is a FIFO, not a regular file"), std::string::npos) << fifo.err;
  fs::remove(ckpt + "/checkpoint.bin");
  fs::create_symlink("/dev/zero", ckpt + "/checkpoint.bin");
  RunResult zero = RunDdpio({"checkpoint", ckpt}, {std::chrono::seconds(30)});
  ExpectNoCrash(zero, "checkpoint /dev/zero");
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_NE(zero.err.find("character device"), std::string::npos) << zero.err;
  fs::remove(ckpt + "/checkpoint.bin");
  { std::ofstream sparse(ckpt + "/checkpoint.bin"); }
  ASSERT_EQ(::truncate((ckpt + "/checkpoint.bin").c_str(), int64_t{20} << 30),
            0);  // 20 GiB, nothing on disk
  RunResult huge = RunDdpio({"checkpoint", ckpt}, {std::chrono::seconds(30)});
  ExpectNoCrash(huge, "checkpoint 20 GiB");
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_NE(huge.err.find("21474836480 bytes"), std::string::npos) << huge.err;
  const std::string root = Folder("src");
  ASSERT_EQ(::mkfifo(dir_.Sub("labels.csv").c_str(), 0644), 0);
  RunResult labels = RunDdpio(
      {"convert", "--src", root, "--out", dir_.Sub("val"), "--val-labels", dir_.Sub("labels.csv")},
      {std::chrono::seconds(30)});
  ExpectNoCrash(labels, "--val-labels FIFO");
  EXPECT_EQ(labels.exit_code, 1) << labels.err;
  EXPECT_NE(labels.err.find("is a FIFO"), std::string::npos) << labels.err;
  ASSERT_EQ(::mkfifo(dir_.Sub("list.txt").c_str(), 0644), 0);
  RunResult list =
      RunDdpio({"convert", "--list", dir_.Sub("list.txt"), "--root", root, "--out", dir_.Sub("l")},
               {std::chrono::seconds(30)});
  ExpectNoCrash(list, "--list FIFO");
  EXPECT_EQ(list.exit_code, 1) << list.err;
  EXPECT_NE(list.err.find("is a FIFO"), std::string::npos) << list.err;
}

TEST_F(CliHostile, AMangledResumeEntryIsAClearError) {
  const std::string root = Folder("src");
  ASSERT_OK_AND_ASSIGN(convert::SourceListing listing, convert::ListImageFolder(root));
  convert::ConvertOptions o;
  o.out = dir_.Sub("db");
  o.writer.batch_records = 1;
  ASSERT_EQ(testing::ConvertCrashingAfterCommit(listing, o, 1), testing::kInjectedCrash);
  for (const std::string& garbage :
       {std::string("{\"next_source\": \"x\"}"), std::string("[1,2]"),
        std::string("{\"next_source\": 1, \"skipped\": [{\"index\": -3}]}"),
        std::string("\xff\x00", 2)}) {
    ASSERT_OK(testing::PokeValue(dir_.Sub("db"), "meta", "convert_progress", garbage));
    RunResult r = RunDdpio({"convert", "--src", root, "--out", dir_.Sub("db"), "--resume"});
    ExpectNoCrash(r, garbage);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("progress entry is malformed"), std::string::npos) << r.err;
  }
}

TEST_F(CliHostile, AbsurdArgumentsAreUsageErrors) {
  const std::vector<std::vector<std::string>> cases = {
      {"sampler", "--size", "9223372036854775808", "--world", "2", "--rank", "0"},
      {"sampler", "--size", "-1", "--world", "2", "--rank", "0"},
      {"sampler", "--size", "1000000000", "--world", "2", "--rank", "0"},
      {"sampler", "--size", "1000000000000", "--world", "2", "--rank", "0", "--permutation",
       "feistel"},
      {"train", "--data", "x", "--hidden", "1000000,1000000"},
      {"train", "--data", "x", "--image-size", "1024"},
      {"train", "--data", "x", "--lr", "nan"},
      {"train", "--data", "x", "--workers", "-1"},
      {"bench", "comm", "--size", "17179869184"},
      {"bench", "comm", "--group-size", "0"},
      {"bench", "loader", "--data", "x", "--workers", "-3"},
      {"convert", "--src", "x", "--out", "y", "--threads", "-1"},
  };
  for (const auto& args : cases) {
    RunResult r = RunDdpio(args);
    std::string what;
    for (const auto& a : args) what += a + " ";
    ExpectNoCrash(r, what);
    EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << what;
  }
  // Names of enum values are parsed by the library's own parser while the command line is parsed:
  // a wrong one is a usage error listing the accepted names (nothing dereferenced unchecked).
  const std::vector<std::pair<std::vector<std::string>, std::string>> names = {
      {{"sampler", "--size", "10", "--world", "2", "--rank", "0", "--permutation", "bogus"},
       "torch-legacy"},
      {{"bench", "sampler", "--permutation", "bogus"}, "feistel"},
      {{"sampler", "--size", "10", "--world", "2", "--rank", "0", "--padding", "bogus"}, "mask"},
      {{"bench", "loader", "--data", "x", "--decode", "bogus"}, "exact"},
      {{"train", "--data", "x", "--schedule", "bogus"}, "cosine"},
      {{"bench", "feed", "--data", "x", "--mode", "bogus"}, "replicate"},
      {{"bench", "loader", "--data", "x", "--crop-scale", "0.5,2"}, "0 < MIN <= MAX <= 1"},
  };
  for (const auto& [args, accepted] : names) {
    RunResult r = RunDdpio(args);
    ExpectNoCrash(r, args.back());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(accepted), std::string::npos) << r.err;
  }
  // A list file label that would build two billion class names.
  std::ofstream(dir_.Sub("list.txt")) << "a.jpg 0\nb.jpg 2000000000\n";
  RunResult list = RunDdpio({"convert", "--list", dir_.Sub("list.txt"), "--out", dir_.Sub("l")});
  ExpectNoCrash(list, "list");
  EXPECT_NE(list.exit_code, 0);
  EXPECT_NE(list.err.find("list.txt:2"), std::string::npos) << list.err;
}

// kill -9 of the launcher: the kernel stops its ranks (they used to train on with parent 1).
TEST_F(CliHostile, KillingTheLauncherStopsItsRanks) {
  const std::string pids = dir_.Sub("pids");
  fs::create_directories(pids);
  testing::RunOptions o;
  o.timeout = std::chrono::seconds(60);
  RunResult r = testing::Run(
      {"/bin/sh", "-c",
       testing::DdpioBin() + " launch --nproc-per-node 2 -- /bin/sh -c 'echo $$ > " + pids +
           "/$RANK; exec sleep 600' & launcher=$!; "
           "while [ ! -s " +
           pids + "/0 ] || [ ! -s " + pids +
           "/1 ]; do :; done; "
           "kill -9 $launcher; wait $launcher; "
           // the ranks must be gone: SIGKILL from the kernel arrives at once
           "for r in 0 1; do p=$(cat " +
           pids +
           "/$r); n=0; "
           "while kill -0 $p 2>/dev/null; do n=$((n+1)); [ $n -gt 2000000 ] && { echo alive $p; "
           "exit 3; }; done; done; "
           "echo gone"},
      o);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("gone"), std::string::npos) << r.out;
}

TEST_F(CliHostile, ADivergingRunFailsInsteadOfReportingNull) {
  ASSERT_OK(testing::WriteJpegDataset(dir_.Sub("db"), 48, 24, 3));
  RunResult r = RunDdpio({"train", "--data", dir_.Sub("db"), "--epochs", "5", "--batch-size", "8",
                          "--image-size", "8", "--hidden", "16", "--lr", "1000", "--momentum",
                          "0.9", "--workers", "1", "--json"});
  ExpectNoCrash(r, "train");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("diverged"), std::string::npos) << r.err;
}

TEST_F(CliHostile, LabelsOutsideTheClassesAreDataLoss) {
  std::vector<storage::Record> records;
  for (int i = 0; i < 8; ++i)
    records.push_back(testing::JpegRecord(testing::MakeJpeg(24, 24, i), 24, 24, 3, i == 5 ? 7 : 0));
  ASSERT_OK(testing::WriteRecords(dir_.Sub("db"), records, 2));
  RunResult r = RunDdpio({"train", "--data", dir_.Sub("db"), "--epochs", "1", "--batch-size", "4",
                          "--image-size", "8", "--hidden", "8", "--workers", "1"});
  ExpectNoCrash(r, "train");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("sample 5 has label 7, outside the dataset's 2 classes"), std::string::npos)
      << r.err;
}

// `inspect` of a file that is not a dataset is refused before LMDB opens it, so no FILE-lock
// appears beside it (LMDB creates one for any path it opens).
TEST_F(CliHostile, InspectingAnyFileLeavesNoLockFileBesideIt) {
  std::ofstream(dir_.Sub("notes.txt")) << "not a dataset, but more than a page long\n"
                                       << std::string(20000, 'x');
  RunResult r = RunDdpio({"inspect", dir_.Sub("notes.txt")});
  ExpectNoCrash(r, "inspect notes.txt");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no LMDB magic"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_.Sub("notes.txt-lock")));
}

// A rank stopped (SIGSTOP) mid-epoch, no launcher to clean up: the other rank exits within its
// --timeout plus a margin. It used to wait on the frozen store for 30 s more, or 60 s for the
// others to leave, after its own collective had timed out.
TEST_F(CliHostile, AStoppedRankDoesNotHoldTheOtherPastItsTimeout) {
  ASSERT_OK(testing::WriteJpegDataset(dir_.Sub("db"), 200, 16, 3));
  const std::string port = std::to_string(testing::FreeLoopbackPort());
  const std::string rank = "env MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port +
                           " WORLD_SIZE=2 DDPIO_STORE_TOKEN=t DDPIO_JOB_ID=j LOCAL_WORLD_SIZE=2 ";
  const std::string train =
      testing::DdpioBin() + " train --data " + dir_.Sub("db") +
      " --epochs 1000 --batch-size 4 --image-size 8 --hidden 4 --workers 1 --timeout 4"
      " --progress-every 1";
  testing::RunOptions o;
  o.timeout = std::chrono::seconds(120);
  RunResult r = testing::Run(
      {"/bin/sh", "-c",
       rank + "RANK=0 LOCAL_RANK=0 " + train + " 2> " + dir_.Sub("r0.err") + " & p0=$!; " + rank +
           "RANK=1 LOCAL_RANK=1 " + train + " 2> " + dir_.Sub("r1.err") +
           " & p1=$!; "
           // once rank 0 reports training steps, stop rank 1
           "while ! grep -q ' step ' " +
           dir_.Sub("r0.err") +
           " 2>/dev/null; do :; done; "
           "kill -STOP $p1; t0=$(date +%s%N); wait $p0; code=$?; t1=$(date +%s%N); kill -9 $p1; "
           "echo exit=$code ms=$(( (t1 - t0) / 1000000 ))"},
      o);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  const auto at = r.out.find("exit=");
  ASSERT_NE(at, std::string::npos) << r.out << r.err;
  int code = -1, ms = -1;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "exit=%d ms=%d", &code, &ms), 2) << r.out;
  EXPECT_EQ(code, 1);
  EXPECT_LT(ms, (4 + 6) * 1000) << "rank 0 took " << ms
                                << " ms to exit after rank 1 stopped (--timeout 4)";
}

// A full disk (a 4 MiB tmpfs; needs root to mount, skipped otherwise): conversion stops with "no
// space left" naming the filesystem — LMDB reports a short write as EIO, and a full disk under
// its lock file used to kill the process with SIGBUS — and `inspect --get` leaves no .tmp.
TEST_F(CliHostile, AFullDiskIsNamedAndLeavesNothingHalfWritten) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const std::string disk = dir_.Sub("disk");
  fs::create_directories(disk);
  ASSERT_EQ(testing::Run({"/bin/mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", disk}).exit_code,
            0);
  struct Unmount {
    std::string path;
    ~Unmount() { testing::Run({"/bin/umount", path}); }
  } unmount{disk};
  ASSERT_EQ(RunDdpio({"synth", "--out", dir_.Sub("src"), "--classes", "2", "--per-class", "150",
                      "--size", "256", "--quiet"})
                .exit_code,
            0);
  RunResult first =
      RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", disk + "/db", "--quiet"});
  ExpectNoCrash(first, "convert onto a full disk");
  EXPECT_EQ(first.exit_code, 1);
  EXPECT_NE(first.err.find("no space left on the filesystem of " + disk + "/db"), std::string::npos)
      << first.err;
  RunResult second = RunDdpio(
      {"convert", "--src", dir_.Sub("src"), "--out", disk + "/one", "--single-file", "--quiet"});
  ExpectNoCrash(second, "convert onto a disk already full");
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("no space left"), std::string::npos) << second.err;
  ASSERT_OK(testing::WriteJpegDataset(dir_.Sub("small"), 4, 16));
  RunResult get = RunDdpio({"inspect", dir_.Sub("small"), "--get", "1", "--out", disk + "/x.jpg"});
  ExpectNoCrash(get, "inspect --get");
  EXPECT_EQ(get.exit_code, 1);
  EXPECT_FALSE(fs::exists(disk + "/x.jpg.tmp"));
}

}  // namespace
}  // namespace ddpio
