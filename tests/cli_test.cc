// The `ddpio` program as users run it: real processes, exit codes, --help, --json last lines.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "ddpio/convert/convert_sources.h"
#include "ddpio/loader/jpeg.h"
#include "gtest/gtest.h"
#include "tests/support/crashing_conversion.h"
#include "tests/support/status_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

using testing::LastLine;
using testing::RunDdpio;
using testing::RunResult;

nlohmann::json JsonLast(const RunResult& r) {
  auto j = nlohmann::json::parse(LastLine(r.out), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "last stdout line is not JSON: " << r.out;
  return j;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    RunResult r = RunDdpio({"synth", "--out", dir_.Sub("src"), "--classes", "4", "--per-class",
                            "25", "--size", "32", "--quiet", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = JsonLast(r);
    ASSERT_EQ(j["images"], 100);
  }
  testing::TempDir dir_;
};

TEST_F(Cli, EverySubcommandHasHelpAndUsageErrorsExitTwo) {
  for (std::vector<std::string> cmd : {std::vector<std::string>{"synth"},
                                       {"convert"},
                                       {"inspect"},
                                       {"bench", "storage"},
                                       {"info"}}) {
    std::vector<std::string> help = cmd;
    help.push_back("--help");
    RunResult r = RunDdpio(help);
    EXPECT_EQ(r.exit_code, 0) << cmd[0];
    EXPECT_NE(r.out.find("--"), std::string::npos) << "no options listed for " << cmd[0];
    std::vector<std::string> bad = cmd;
    bad.push_back("--no-such-flag");
    EXPECT_EQ(RunDdpio(bad).exit_code, 2) << cmd[0];
  }
  EXPECT_EQ(RunDdpio({}).exit_code, 2);
  EXPECT_EQ(RunDdpio({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(RunDdpio({"synth", "--out", dir_.Sub("x"), "--classes", "0"}).exit_code, 2);
  EXPECT_EQ(RunDdpio({"convert", "--out", dir_.Sub("x")}).exit_code,
            2);  // neither --src nor --list
  EXPECT_EQ(RunDdpio({"convert", "--src", "a", "--list", "b", "--out", "c"}).exit_code, 2);
  EXPECT_EQ(RunDdpio({"bench", "storage", "--data", "x", "--order", "sideways"}).exit_code, 2);
}

TEST_F(Cli, InfoSaysWhichPathItTook) {
  RunResult r = RunDdpio({"info", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = JsonLast(r);
  EXPECT_TRUE(j["path"] == "cpu" || j["path"] == "gpu");
  if (j["path"] == "cpu") {
    EXPECT_FALSE(j["why"].get<std::string>().empty());
  }
  // Whether `train --device cuda` can work here: only where the CUDA toolkit was compiled in.
  ASSERT_TRUE(j["device_model_compiled"].is_boolean());
  if (!j["cuda_compiled"].get<bool>()) {
    EXPECT_FALSE(j["device_model_compiled"].get<bool>());
  }
  RunResult text = RunDdpio({"info"});
  EXPECT_NE(
      text.out.find(j["device_model_compiled"].get<bool>() ? "train --device cuda: compiled"
                                                           : "train --device cuda: not compiled"),
      std::string::npos)
      << text.out;
}

TEST_F(Cli, ConvertInspectGetRoundTrip) {
  RunResult c = RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("db"), "--json"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  nlohmann::json cj = JsonLast(c);
  EXPECT_EQ(cj["records"], 100);
  EXPECT_EQ(cj["classes"], 4);
  EXPECT_EQ(cj["skipped"], 0);
  EXPECT_GT(cj["bytes"].get<uint64_t>(), 0u);
  EXPECT_TRUE(cj.contains("seconds"));

  RunResult v = RunDdpio({"inspect", dir_.Sub("db"), "--verify", "--decode", "--json"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  nlohmann::json vj = JsonLast(v);
  EXPECT_EQ(vj["records"], 100);
  EXPECT_TRUE(vj["bad"].empty());
  EXPECT_EQ(vj["classes"][2]["count"], 25);
  EXPECT_EQ(vj["segment_decodable"], 100);  // the default adds restart markers to every JPEG

  // Record 30 is class 1's image 5: the 4 classes hold 25 sorted files each.
  RunResult g =
      RunDdpio({"inspect", dir_.Sub("db"), "--get", "30", "--out", dir_.Sub("x.jpg"), "--json"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  nlohmann::json gj = JsonLast(g);
  EXPECT_EQ(gj["label"], 1);
  EXPECT_EQ(gj["source"], "class_001/img_00005.jpg");
  std::ifstream a(dir_.Sub("x.jpg"), std::ios::binary),
      b(dir_.Sub("src/class_001/img_00005.jpg"), std::ios::binary);
  std::string sa((std::istreambuf_iterator<char>(a)), {}),
      sb((std::istreambuf_iterator<char>(b)), {});
  EXPECT_FALSE(sa.empty());
  EXPECT_NE(sa, sb);  // re-written with restart markers...
  ASSERT_OK_AND_ASSIGN(loader::JpegDecoder jpeg, loader::JpegDecoder::Create());
  const auto pixels = [&](const std::string& s) {
    const absl::Span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    std::vector<uint8_t> out;
    auto info = jpeg.ReadInfo(bytes);
    EXPECT_OK(info);
    if (info.ok()) {
      EXPECT_OK(jpeg.Decode(bytes, *info, &out));
    }
    return out;
  };
  EXPECT_EQ(pixels(sa), pixels(sb));  // ...losslessly: the same pixels

  // --restart-interval 0 keeps every JPEG byte for byte.
  ASSERT_EQ(RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("plain"),
                      "--restart-interval", "0", "--quiet"})
                .exit_code,
            0);
  ASSERT_EQ(
      RunDdpio({"inspect", dir_.Sub("plain"), "--get", "30", "--out", dir_.Sub("p.jpg")}).exit_code,
      0);
  std::ifstream p(dir_.Sub("p.jpg"), std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(p)), {}), sb);

  RunResult out_of_range =
      RunDdpio({"inspect", dir_.Sub("db"), "--get", "100", "--out", dir_.Sub("y.jpg")});
  EXPECT_EQ(out_of_range.exit_code, 1);
  EXPECT_NE(out_of_range.err.find("out of range"), std::string::npos) << out_of_range.err;

  RunResult bench = RunDdpio({"bench", "storage", "--data", dir_.Sub("db"), "--order", "random",
                              "--threads", "2", "--repeat", "1", "--json"});
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  nlohmann::json bj = JsonLast(bench);
  EXPECT_EQ(bj["records"], 100);
  EXPECT_GT(bj["records_per_s"].get<double>(), 0);
  EXPECT_GT(bj["ceiling_mb_per_s"].get<double>(), 0);
}

TEST_F(Cli, InspectVerifyExitsOneAndNamesEveryBadRecord) {
  // Original bytes, so the test finds record 3's payload in the file by its source's bytes.
  ASSERT_EQ(RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("db"),
                      "--restart-interval", "0", "--quiet"})
                .exit_code,
            0);
  // Flip one byte inside two records' payloads directly in the LMDB data file.
  std::string data_file = dir_.Sub("db") + "/data.mdb";
  std::fstream f(data_file, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  std::ifstream j1(dir_.Sub("src/class_000/img_00003.jpg"), std::ios::binary);
  std::string jpeg((std::istreambuf_iterator<char>(j1)), {});
  size_t at = bytes.find(jpeg.substr(jpeg.size() - 64));  // the tail of record 3's payload
  ASSERT_NE(at, std::string::npos);
  f.seekp(static_cast<std::streamoff>(at + 10));
  f.put(static_cast<char>(bytes[at + 10] ^ 0x55));
  f.close();
  RunResult v = RunDdpio({"inspect", dir_.Sub("db"), "--verify", "--json"});
  EXPECT_EQ(v.exit_code, 1);
  nlohmann::json vj = JsonLast(v);
  ASSERT_EQ(vj["bad"].size(), 1u) << v.out;
  EXPECT_EQ(vj["bad"][0]["index"], 3);
  EXPECT_EQ(vj["bad"][0]["key"], "0000000000000003");
  RunResult text = RunDdpio({"inspect", dir_.Sub("db"), "--verify", "--quiet"});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("bad record 3 (key 0000000000000003)"), std::string::npos) << text.out;
}

TEST_F(Cli, ConvertStopsAtABadFileOrSkipsIt) {
  std::ofstream(dir_.Sub("src/class_002/broken.jpg"), std::ios::binary)
      << "\xff\xd8\xff\xe0 truncated";
  RunResult strict =
      RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("a"), "--quiet"});
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_NE(strict.err.find("class_002/broken.jpg"), std::string::npos) << strict.err;
  EXPECT_NE(strict.err.find("--skip-invalid"), std::string::npos) << strict.err;
  RunResult lenient = RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("b"),
                                "--skip-invalid", "--quiet", "--json"});
  ASSERT_EQ(lenient.exit_code, 0) << lenient.err;
  nlohmann::json j = JsonLast(lenient);
  EXPECT_EQ(j["records"], 100);
  EXPECT_EQ(j["skipped"], 1);
  EXPECT_EQ(j["skipped_files"][0]["source"], "class_002/broken.jpg");
}

TEST_F(Cli, ListFileWithABadLineNamesTheLine) {
  std::ofstream(dir_.Sub("list.txt"))
      << "class_000/img_00000.jpg 0\nclass_000/img_00001.jpg zero\n";
  RunResult r = RunDdpio({"convert", "--list", dir_.Sub("list.txt"), "--root", dir_.Sub("src"),
                          "--out", dir_.Sub("db")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("list.txt:2:"), std::string::npos) << r.err;
  std::ofstream(dir_.Sub("good.txt")) << "class_003/img_00001.jpg 7\nclass_000/img_00000.jpg 0\n";
  RunResult ok = RunDdpio({"convert", "--list", dir_.Sub("good.txt"), "--root", dir_.Sub("src"),
                           "--out", dir_.Sub("db2"), "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(JsonLast(ok)["records"], 2);
  EXPECT_EQ(JsonLast(ok)["classes"], 8);
}

TEST_F(Cli, KilledConversionResumesToTheSameDigest) {
  // The converting process really dies (_exit after its 2nd commit, like kill -9), then
  // `ddpio convert --resume` finishes.
  ASSERT_EQ(RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("clean"), "--quiet"})
                .exit_code,
            0);
  ASSERT_OK_AND_ASSIGN(convert::SourceListing listing, convert::ListImageFolder(dir_.Sub("src")));
  convert::ConvertOptions o;
  o.out = dir_.Sub("db");
  o.writer.batch_records = 16;
  ASSERT_EQ(testing::ConvertCrashingAfterCommit(listing, o, 2), testing::kInjectedCrash);
  RunResult incomplete = RunDdpio({"inspect", dir_.Sub("db")});
  EXPECT_EQ(incomplete.exit_code, 1);
  EXPECT_NE(incomplete.err.find("incomplete"), std::string::npos) << incomplete.err;
  RunResult resumed = RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("db"),
                                "--batch-records", "16", "--resume", "--quiet", "--json"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(JsonLast(resumed)["resumed_from"], 32);
  auto digest = [&](const std::string& db) {
    RunResult r = RunDdpio({"inspect", db, "--json", "--quiet"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return JsonLast(r)["content_digest"].get<std::string>();
  };
  EXPECT_EQ(digest(dir_.Sub("db")), digest(dir_.Sub("clean")));
  RunResult again =
      RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("db"), "--resume"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.err.find("already complete"), std::string::npos) << again.err;
  RunResult overwrite = RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("db")});
  EXPECT_EQ(overwrite.exit_code, 1);
  EXPECT_NE(overwrite.err.find("--resume"), std::string::npos) << overwrite.err;
}

TEST_F(Cli, MissingDatasetIsAClearRuntimeError) {
  RunResult r = RunDdpio({"inspect", dir_.Sub("nothing-here")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("nothing-here"), std::string::npos) << r.err;
  RunResult s = RunDdpio({"convert", "--src", dir_.Sub("nope"), "--out", dir_.Sub("db")});
  EXPECT_EQ(s.exit_code, 1);
  EXPECT_NE(s.err.find("nope"), std::string::npos) << s.err;
}

// An ImageNet-style training folder (wnid class folders) and its flat validation folder labelled
// three ways — a list file, LOC_val_solution.csv, the devkit's ground truth with map_clsloc.txt —
// convert to the same labels; training accepts it, and refuses a validation set whose classes
// differ, naming the first difference.
TEST_F(Cli, ImagenetValidationLabelsInEveryLayoutAndTheClassCheck) {
  namespace fs = std::filesystem;
  const std::vector<std::string> wnids = {"n01440764", "n02100735", "n02119789"};  // sorted
  // The devkit's IDs are in another order: ID 1 = n02119789, 2 = n02100735, 3 = n01440764.
  const std::vector<int> val_ids = {3, 1, 2, 3, 1, 1};
  const std::map<int, int> label_of_id = {{1, 2}, {2, 1}, {3, 0}};
  std::vector<std::string> sources;
  for (const auto& e : fs::recursive_directory_iterator(dir_.Sub("src"))) {
    if (e.is_regular_file()) sources.push_back(e.path().string());
  }
  std::sort(sources.begin(), sources.end());
  for (size_t c = 0; c < wnids.size(); ++c) {
    fs::create_directories(dir_.Sub("train/" + wnids[c]));
    for (int k = 0; k < 4; ++k)
      fs::copy(sources[c * 4 + k],
               dir_.Sub("train/" + wnids[c] + "/" + std::to_string(k) + ".JPEG"));
  }
  fs::create_directories(dir_.Sub("val"));
  std::ofstream list(dir_.Sub("val.txt")), csv(dir_.Sub("LOC_val_solution.csv")),
      gt(dir_.Sub("gt.txt"));
  csv << "ImageId,PredictionString\n";
  for (size_t i = 0; i < val_ids.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "ILSVRC2012_val_%08zu", i + 1);
    fs::copy(sources[50 + i], dir_.Sub(std::string("val/") + name + ".JPEG"));
    const int label = label_of_id.at(val_ids[i]);
    list << "val/" << name << ".JPEG " << label << "\n";
    csv << name << "," << wnids[label] << " 1 2 3 4\n";
    gt << val_ids[i] << "\n";
  }
  list.close(), csv.close(), gt.close();
  std::ofstream(dir_.Sub("map_clsloc.txt"))
      << "n02119789 1 kit_fox\nn02100735 2 English_setter\nn01440764 3 tench\n";
  ASSERT_EQ(
      RunDdpio({"convert", "--src", dir_.Sub("train"), "--out", dir_.Sub("train.db"), "--quiet"})
          .exit_code,
      0);
  RunResult from_list = RunDdpio(
      {"convert", "--list", dir_.Sub("val.txt"), "--out", dir_.Sub("val-list.db"), "--quiet"});
  ASSERT_EQ(from_list.exit_code, 0) << from_list.err;
  RunResult from_csv =
      RunDdpio({"convert", "--src", dir_.Sub("val"), "--val-labels",
                dir_.Sub("LOC_val_solution.csv"), "--out", dir_.Sub("val-csv.db"), "--quiet"});
  ASSERT_EQ(from_csv.exit_code, 0) << from_csv.err;
  RunResult from_gt = RunDdpio({"convert", "--src", dir_.Sub("val"), "--val-labels",
                                dir_.Sub("gt.txt"), "--synsets", dir_.Sub("map_clsloc.txt"),
                                "--out", dir_.Sub("val-gt.db"), "--quiet"});
  ASSERT_EQ(from_gt.exit_code, 0) << from_gt.err;
  for (const std::string db : {"val-list.db", "val-csv.db", "val-gt.db"}) {
    for (size_t i = 0; i < val_ids.size(); ++i) {
      RunResult g = RunDdpio(
          {"inspect", dir_.Sub(db), "--get", std::to_string(i), "--out", dir_.Sub("x"), "--json"});
      ASSERT_EQ(g.exit_code, 0) << g.err;
      EXPECT_EQ(JsonLast(g)["label"], label_of_id.at(val_ids[i])) << db << " record " << i;
    }
  }
  // Labels by wnid mean the training set's classes; the list file's classes are "0", "1", "2".
  const std::vector<std::string> train = {"train",     "--data",   dir_.Sub("train.db"),
                                          "--epochs",  "1",        "--image-size",
                                          "8",         "--hidden", "4",
                                          "--workers", "1",        "--batch-size",
                                          "4",         "--val"};
  auto with = [&](const std::string& val) {
    std::vector<std::string> args = train;
    args.push_back(dir_.Sub(val));
    return RunDdpio(args);
  };
  EXPECT_EQ(with("val-csv.db").exit_code, 0);
  EXPECT_EQ(with("val-gt.db").exit_code, 0);
  RunResult mismatch = with("val-list.db");
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_NE(
      mismatch.err.find("label 0 is '0' in the validation set but 'n01440764' in the training set"),
      std::string::npos)
      << mismatch.err;
}

}  // namespace
}  // namespace ddpio
