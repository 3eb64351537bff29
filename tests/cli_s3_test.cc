// The object store as a newcomer meets it, with the real `ddpio` program against a real S3 server
// (Ceph's RADOS Gateway, scripts/object-store.sh; ctest label s3): convert, upload, inspect and
// verify by URL, then group feeding from the store under `ddpio launch` — every rank gets its
// sampler's records, and only the leaders fetch records from the store.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/rank_lines.h"
#include "tests/support/s3_cli_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

using testing::LastLine;
using testing::RankLines;
using testing::RunDdpio;

class CliS3 : public testing::S3CliTest {};

// `convert --out s3://…` converts into a staging folder, uploads it and removes the folder: the
// store then holds what a local conversion holds. A bad destination fails before any work; a
// failed upload keeps the converted dataset and says how to continue.
TEST_F(CliS3, ConvertStraightIntoTheStore) {
  testing::RunOptions tmp;
  tmp.env["TMPDIR"] = dir_.Sub("tmp");
  std::filesystem::create_directories(dir_.Sub("tmp"));
  auto c = RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", url_, "--json"}, tmp);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto j = nlohmann::json::parse(LastLine(c.out));
  EXPECT_EQ(j["records"], 60);
  EXPECT_EQ(j["out"], url_);
  EXPECT_TRUE(std::filesystem::is_empty(dir_.Sub("tmp"))) << "the staging folder was left behind";
  auto local = RunDdpio({"inspect", dir_.Sub("db"), "--json"});
  auto remote = RunDdpio({"inspect", url_, "--verify", "--json"});
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(nlohmann::json::parse(LastLine(remote.out))["content_digest"],
            nlohmann::json::parse(LastLine(local.out))["content_digest"]);

  // A malformed URL: a usage error before anything is converted.
  auto bad = RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", "s3://Bad_Bucket/x"}, tmp);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir_.Sub("tmp")));
  // A bucket that does not exist: converted, then the upload fails; the stage is kept and named.
  const std::string missing = "s3://" + bucket_ + "-none/train";
  auto failed = RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", missing, "--stage",
                          dir_.Sub("stage"), "--quiet"});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_NE(failed.err.find("the converted dataset is kept in " + dir_.Sub("stage")),
            std::string::npos)
      << failed.err;
  EXPECT_TRUE(std::filesystem::exists(dir_.Sub("stage")));
  // --create-bucket: the same command, resumed, finishes the job.
  auto resumed = RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", missing, "--stage",
                           dir_.Sub("stage"), "--resume", "--create-bucket", "--quiet"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("stage")));
  EXPECT_EQ(RunDdpio({"inspect", missing, "--verify", "--quiet"}).exit_code, 0);
}

TEST_F(CliS3, UploadInspectAndVerifyByUrl) {
  auto up = RunDdpio({"upload", dir_.Sub("db"), url_, "--json"});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  auto u = nlohmann::json::parse(LastLine(up.out));
  EXPECT_EQ(u["records"], 60);
  EXPECT_GT(u["bytes_sent"].get<uint64_t>(), 0u);

  auto local = RunDdpio({"inspect", dir_.Sub("db"), "--json"});
  auto remote = RunDdpio({"inspect", url_, "--verify", "--decode", "--json"});
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  auto l = nlohmann::json::parse(LastLine(local.out));
  auto r = nlohmann::json::parse(LastLine(remote.out));
  EXPECT_EQ(r["records"], 60);
  EXPECT_EQ(r["content_digest"], l["content_digest"])
      << "the store's records differ from the local ones";
  EXPECT_TRUE(r["bad"].empty());
  EXPECT_EQ(r["store"]["records_fetched"], 60);
  EXPECT_LT(r["store"]["requests"].get<uint64_t>(), 20u) << "records were not fetched coalesced";
  EXPECT_TRUE(l["store"].is_null());

  // Again: nothing is sent; a half-finished prefix and a missing one are clear errors.
  auto again = RunDdpio({"upload", dir_.Sub("db"), url_, "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(LastLine(again.out))["already_there"], true);
  // Without --verify: the manifest's summary, no record fetched (it used to fetch them all).
  auto plain = RunDdpio({"inspect", url_, "--json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto p = nlohmann::json::parse(LastLine(plain.out));
  EXPECT_EQ(p["records"], 60);
  EXPECT_EQ(p["records_read"], false);
  EXPECT_EQ(p["store"]["records_fetched"], 0) << "plain inspect downloaded the dataset";
  EXPECT_LE(p["store"]["requests"].get<uint64_t>(), 2u);
  ASSERT_EQ(p["classes"].size(), l["classes"].size());
  for (size_t c = 0; c < l["classes"].size(); ++c) {
    EXPECT_EQ(p["classes"][c]["name"], l["classes"][c]["name"]);
    EXPECT_TRUE(p["classes"][c]["count"].is_null());
  }
  EXPECT_TRUE(p["content_digest"].is_null());
  auto text = RunDdpio({"inspect", url_});
  EXPECT_NE(text.out.find("records       not read"), std::string::npos) << text.out;
  auto missing = RunDdpio({"inspect", "s3://" + bucket_ + "/nothing"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no dataset at s3://" + bucket_ + "/nothing"), std::string::npos)
      << missing.err;
  auto bad_url = RunDdpio({"upload", dir_.Sub("db"), "s3://Bad_Bucket/x"});
  EXPECT_EQ(bad_url.exit_code, 2) << bad_url.err;
}

// The layout flags: chunk objects spread over prefixes read back as the local records; the LMDB
// file as it is (--chunk-mb 0) too; spreading without chunks is refused before anything is sent.
TEST_F(CliS3, UploadInChunksSpreadOverPrefixesOrAsTheLmdbFile) {
  auto local = RunDdpio({"inspect", dir_.Sub("db"), "--json"});
  const auto digest = nlohmann::json::parse(LastLine(local.out))["content_digest"];
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{"--chunk-mb", "1", "--spread-prefixes", "4"},
        std::vector<std::string>{"--chunk-mb", "0"}}) {
    const std::string url = url_ + "-" + layout[1];
    std::vector<std::string> args = {"upload", dir_.Sub("db"), url, "--json"};
    args.insert(args.end(), layout.begin(), layout.end());
    auto up = RunDdpio(args);
    ASSERT_EQ(up.exit_code, 0) << up.err;
    auto u = nlohmann::json::parse(LastLine(up.out));
    EXPECT_EQ(u["chunked"], layout[1] != "0") << up.out;
    auto remote = RunDdpio({"inspect", url, "--verify", "--json"});
    ASSERT_EQ(remote.exit_code, 0) << remote.err;
    EXPECT_EQ(nlohmann::json::parse(LastLine(remote.out))["content_digest"], digest) << url;
  }
  auto refused = RunDdpio(
      {"upload", dir_.Sub("db"), url_ + "-x", "--chunk-mb", "0", "--spread-prefixes", "2"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("spreading over prefixes needs chunk objects"), std::string::npos)
      << refused.err;
}

// `bench storage` by URL: every record of each round fetched once from the store (a fresh reader
// a round), next to the store's own rate measured in the same run, with the process's CPU.
TEST_F(CliS3, BenchStorageByUrlMeasuresTheStoreBesideTheReader) {
  ASSERT_EQ(RunDdpio({"upload", dir_.Sub("db"), url_, "--quiet"}).exit_code, 0);
  auto bench = RunDdpio(
      {"bench", "storage", "--data", url_, "--order", "random", "--repeat", "2", "--json"});
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  auto j = nlohmann::json::parse(LastLine(bench.out));
  EXPECT_EQ(j["records"], 60);
  EXPECT_EQ(j["store"]["records_fetched"], 60) << "each round reads every record once";
  EXPECT_EQ(j["store"]["misses"].get<uint64_t>() + j["store"]["memory_hits"].get<uint64_t>(), 60u);
  EXPECT_GT(j["ceiling_records_per_s"].get<double>(), 0);
  EXPECT_GT(j["ratio"].get<double>(), 0);
  EXPECT_GT(j["cpu_ms_per_record"].get<double>(), 0);
  EXPECT_GE(j["requests_per_round"].get<double>(), 1);  // the records' GETs, after opening
  EXPECT_LT(j["requests_per_round"].get<double>(), 60) << "neighbouring records not coalesced";
}

// Replicate over the store: each group's two members get the group's stream, the sampler's, and
// the records come from the store to the leaders alone (peers read the manifest, no record).
// --cache-dir: the first run fills the folder from the store, a second process reads every record
// from it (no record fetched, the same digest); --cache-gb is checked as the command line is.
TEST_F(CliS3, ACacheFolderServesTheNextRun) {
  ASSERT_EQ(RunDdpio({"upload", dir_.Sub("db"), url_, "--quiet"}).exit_code, 0);
  const std::string cache = dir_.Sub("cache");
  auto first = RunDdpio({"inspect", url_, "--verify", "--cache-dir", cache, "--json"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto f = nlohmann::json::parse(LastLine(first.out));
  // Each record fetched once (a thread may read from the folder a record that another thread's
  // GET of its chunk put there).
  EXPECT_EQ(f["store"]["records_fetched"], 60);
  auto second = RunDdpio({"inspect", url_, "--verify", "--cache-dir", cache, "--json"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto s = nlohmann::json::parse(LastLine(second.out));
  EXPECT_EQ(s["store"]["records_fetched"], 0) << "the folder did not serve the second run";
  EXPECT_EQ(s["store"]["disk_hits"], 60);
  EXPECT_EQ(s["content_digest"], f["content_digest"]);
  // Without the flag nothing is read from the folder.
  auto without = RunDdpio({"inspect", url_, "--verify", "--json"});
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(nlohmann::json::parse(LastLine(without.out))["store"]["records_fetched"], 60);
  EXPECT_EQ(RunDdpio({"inspect", url_, "--cache-dir", cache, "--cache-gb", "0"}).exit_code, 2);
}

TEST_F(CliS3, GroupFeedingFromTheStoreOnlyLeadersFetchRecords) {
  ASSERT_EQ(RunDdpio({"upload", dir_.Sub("db"), url_, "--quiet"}).exit_code, 0);
  auto r = RunDdpio({"launch",
                     "--nproc-per-node",
                     "4",
                     "--",
                     testing::DdpioBin(),
                     "bench",
                     "feed",
                     "--data",
                     url_,
                     "--batch-size",
                     "4",
                     "--image-size",
                     "24",
                     "--workers",
                     "1",
                     "--epochs",
                     "2",
                     "--group-size",
                     "2",
                     "--mode",
                     "replicate",
                     "--indices-out",
                     dir_.Sub("idx"),
                     "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = RankLines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  auto idx = [&](int rank) {
    return testing::IndicesFile(dir_.Sub("idx.rank" + std::to_string(rank) + ".txt"));
  };
  EXPECT_EQ(idx(0), idx(1));
  EXPECT_EQ(idx(2), idx(3));
  auto local = RunDdpio(
      {"sampler", "--size", "60", "--world", "2", "--rank", "0", "--epoch", "0", "--json"});
  std::vector<uint64_t> expected = nlohmann::json::parse(LastLine(local.out))["indices"];
  const std::vector<uint64_t> group0 = idx(0);
  ASSERT_GE(group0.size(), expected.size());
  EXPECT_EQ(std::vector<uint64_t>(group0.begin(),
                                  group0.begin() + static_cast<std::ptrdiff_t>(expected.size())),
            expected);
  uint64_t leaders_fetched = 0;
  for (int rank = 0; rank < 4; ++rank) {
    const auto& j = lines[rank];
    ASSERT_TRUE(j.contains("store")) << j.dump();
    if (j["leader"] == true) {
      leaders_fetched += j["store"]["records_fetched"].get<uint64_t>();
    } else {
      EXPECT_EQ(j["store"]["records_fetched"], 0) << "rank " << rank << " is fed by its leader";
      EXPECT_LE(j["store"]["requests"].get<uint64_t>(), 1u)
          << "rank " << rank << " asked the store for more than the manifest";
    }
  }
  EXPECT_GE(leaders_fetched,
            60u);  // each group's leader fetched the whole dataset once an epoch at most
  EXPECT_LE(leaders_fetched, 2u * 60u * 2u);

  auto train = RunDdpio({"launch", "--nproc-per-node", "2", "--", testing::DdpioBin(), "train",
                         "--data", url_, "--epochs", "1", "--batch-size", "8", "--image-size", "24",
                         "--group-size", "2", "--json"});
  EXPECT_EQ(train.exit_code, 0) << train.err;
}

// The ranks of a node given one --cache-dir fetch each chunk once between them: the first to
// need a chunk fetches it into the folder, the others read it from there. Four ranks in shard mode
// (each its own samples, all from the same chunk of this small dataset): without a folder each
// rank fetches the whole chunk; with one, the dataset is fetched once in all.
TEST_F(CliS3, RanksSharingACacheFolderFetchEachChunkOnceBetweenThem) {
  ASSERT_EQ(RunDdpio({"upload", dir_.Sub("db"), url_, "--quiet"}).exit_code, 0);
  auto fetched = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"launch",
                                     "--nproc-per-node",
                                     "4",
                                     "--",
                                     testing::DdpioBin(),
                                     "bench",
                                     "feed",
                                     "--data",
                                     url_,
                                     "--batch-size",
                                     "4",
                                     "--image-size",
                                     "24",
                                     "--workers",
                                     "1",
                                     "--epochs",
                                     "1",
                                     "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = RunDdpio(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto lines = RankLines(r.out);
    EXPECT_EQ(lines.size(), 4u) << r.out;
    uint64_t records = 0, from_disk = 0;
    for (const auto& [rank, j] : lines) {
      records += j["store"]["records_fetched"].get<uint64_t>();
      from_disk += j["store"]["disk_hits"].get<uint64_t>();
    }
    return std::pair(records, from_disk);
  };
  const auto [alone, alone_disk] = fetched({});
  EXPECT_GE(alone, 2u * 60u) << "each rank fetched its records' chunk itself";
  EXPECT_EQ(alone_disk, 0u);
  const auto [shared, from_disk] = fetched({"--cache-dir", dir_.Sub("cache")});
  EXPECT_EQ(shared, 60u) << "the dataset fetched once by the node";
  EXPECT_GE(from_disk, 30u) << "the other ranks read the folder";
}

}  // namespace
}  // namespace ddpio
