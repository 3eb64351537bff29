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

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_RANK_LINES_H_
