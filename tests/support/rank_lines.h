// The per-rank JSON result lines of a `ddpio launch ... --json` run: launch prefixes each rank's
// output with "[rank r] "; the JSON object follows it. Lines of a multi-node run through
// scripts/sim-cluster.sh carry "[node n] " first.
#ifndef DDPIO_TESTS_SUPPORT_RANK_LINES_H_
#define DDPIO_TESTS_SUPPORT_RANK_LINES_H_

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace ddpio::testing {

// rank -> its JSON line (the last one when a rank printed several).
inline std::map<int, nlohmann::json> RankLines(const std::string& out) {
  std::map<int, nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[node ", 0) == 0 && line.find("] ") != std::string::npos)
      line = line.substr(line.find("] ") + 2);
    const auto brace = line.find("] {");
    if (line.rfind("[rank ", 0) != 0 || brace == std::string::npos) continue;
    auto j = nlohmann::json::parse(line.substr(brace + 2));
    lines[j["rank"].get<int>()] = j;
  }
  return lines;
}

// The indices a rank wrote with --indices-out (whitespace-separated), in order.
inline std::vector<uint64_t> IndicesFile(const std::string& path) {
  std::ifstream in(path);
  std::vector<uint64_t> v;
  for (uint64_t i; in >> i;) v.push_back(i);
  return v;
}

#ifdef DDPIO_SOURCE_DIR
// scripts/tally-indices.py over the `--indices-out PREFIX` logs of a run of `epochs` epochs on a
// dataset of `samples`: its JSON ("ok": every sample of every epoch exactly once, counting only
// the steps a checkpoint kept when the run was resumed).
inline nlohmann::json TallyIndices(const std::string& prefix, int samples, int epochs) {
  auto r =
      Run({"/usr/bin/python3", DDPIO_SOURCE_DIR "/scripts/tally-indices.py", prefix, "--samples",
           std::to_string(samples), "--epochs", std::to_string(epochs), "--json"});
  EXPECT_LE(r.exit_code, 1) << r.err;
  return r.out.empty() ? nlohmann::json() : nlohmann::json::parse(LastLine(r.out));
}
#endif

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_RANK_LINES_H_
