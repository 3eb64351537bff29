#include "tools/bench_sampler.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/internal/json_parse.h"
#include "ddpio/common/status_macros.h"
#include "tools/bench_ceiling.h"  // Median

namespace ddpio::tools {

namespace {

// Times PyTorch's list(DistributedSampler(...)) with the first Python that has torch.
std::optional<nlohmann::json> TimeTorch(const BenchSamplerOptions& o) {
  char path[] = "/tmp/ddpio_bench_sampler_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return std::nullopt;
  close(fd);
  std::ofstream(path) << absl::StrFormat(R"(
import json, time, statistics, torch
from torch.utils.data import DistributedSampler
s = DistributedSampler(range(%d), num_replicas=%d, rank=%d, shuffle=True, seed=0)
times = []
for e in range(%d):
    s.set_epoch(e)
    t = time.perf_counter(); x = list(s); times.append(time.perf_counter() - t)
print(json.dumps({"torch_version": torch.__version__, "median_ms": statistics.median(times) * 1e3, "count": len(x)}))
)",
                                         o.size, o.world, o.rank, o.repeat);
  std::optional<nlohmann::json> result;
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    std::string cmd = absl::StrCat(python, " ", path, " 2>/dev/null");
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) continue;
    std::string text;
    char buf[4096];
    while (size_t got = fread(buf, 1, sizeof(buf), p)) text.append(buf, got);
    if (pclose(p) == 0) {
      // Bounded like every JSON from outside the process (json_parse.h): another program's output.
      auto j = ParseJson(text, "torch's timing");
      if (j.ok() && j->is_object()) {  // operator[] on anything else throws
        (*j)["python"] = python;
        result = *std::move(j);
        break;
      }
    }
  }
  unlink(path);
  return result;
}

}  // namespace

absl::StatusOr<nlohmann::json> BenchSampler(const BenchSamplerOptions& o) {
  if (o.repeat < 1 || o.world < 1 || o.rank < 0 || o.rank >= o.world) {
    return absl::InvalidArgumentError("need --repeat >= 1 and 0 <= --rank < --world");
  }
  sampler::SamplerOptions so;
  so.dataset_size = o.size;
  so.num_replicas = o.world;
  so.permutation = o.permutation;
  DDPIO_ASSIGN_OR_RETURN(auto s, sampler::DistributedSampler::Create(so));
  std::vector<double> ms;
  uint64_t count = 0, memory = 0;
  for (int r = 0; r < o.repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    DDPIO_ASSIGN_OR_RETURN(auto plan, s.Plan(static_cast<uint64_t>(r)));
    sampler::RankStream stream = plan.Stream(o.rank);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    count = stream.indices.size();
    memory = plan.memory_bytes();
  }
  nlohmann::json j = {{"size", o.size},
                      {"world", o.world},
                      {"rank", o.rank},
                      {"repeat", o.repeat},
                      {"permutation", sampler::PermutationKindName(o.permutation)},
                      {"count", count},
                      {"median_ms", Median(ms)},
                      {"min_ms", *std::min_element(ms.begin(), ms.end())},
                      {"permutation_bytes_per_sample",
                       static_cast<double>(memory) / std::max<uint64_t>(o.size, 1)}};
  if (o.compare_torch) {
    if (auto torch = TimeTorch(o)) {
      j["torch"] = *torch;
      j["torch_over_ddpio"] = (*torch)["median_ms"].get<double>() / Median(ms);
    } else {
      j["torch"] = nullptr;
    }
  }
  return j;
}

std::string BenchSamplerText(const nlohmann::json& j) {
  std::string out = absl::StrFormat(
      "bench sampler: %d samples, %d ranks, rank %d's share (%d), %s permutation, median of %d\n"
      "  ddpio      %8.2f ms  (permutation + share; %.1f bytes/sample held)\n",
      j["size"].get<uint64_t>(), j["world"].get<int>(), j["rank"].get<int>(),
      j["count"].get<uint64_t>(), j["permutation"].get<std::string>(), j["repeat"].get<int>(),
      j["median_ms"].get<double>(), j["permutation_bytes_per_sample"].get<double>());
  if (j.contains("torch") && !j["torch"].is_null()) {
    absl::StrAppendFormat(&out,
                          "  PyTorch %s %8.2f ms  list(DistributedSampler(...)), same run\n"
                          "  ratio      %.1fx faster than PyTorch\n",
                          j["torch"]["torch_version"].get<std::string>(),
                          j["torch"]["median_ms"].get<double>(),
                          j["torch_over_ddpio"].get<double>());
  } else if (j.contains("torch")) {
    out +=
        "  PyTorch    not available (no python3 with torch; Debian: apt install python3-torch)\n";
  }
  return out;
}

}  // namespace ddpio::tools
