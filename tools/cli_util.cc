#include "tools/cli_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/pipeline/settings.h"

namespace ddpio::tools {

namespace {

// The library names settings (status_macros.h, WithSetting); the program says how to set them.
constexpr std::pair<std::string_view, std::string_view> kSettingFlags[] = {
    {"learning_rate", "--lr"},
    {"seed", "--seed"},
    {"data", "--data"},
    {"checkpoint_dir", "--checkpoint-dir"},
    {"resume", "--resume"},
    {"resume_conversion", "`ddpio convert --resume` with the same arguments"},
    {"backend", "--backend"},
    {"advertise_addr", "--advertise-addr"},
    {"max_decode_bytes", "--max-decode-mb"},
    {"device", "--device"},
    {"val_labels", "--val-labels"},
    {"shards", "--shards"},
    {"skip_invalid", "--skip-invalid"},
    {"synsets", "--synsets"},
    {"rank", "--rank"},
    {"world_size", "--world-size"},
};

std::string HowToSet(const absl::Status& status) {
  std::vector<std::string> flags;
  for (const std::string& setting : SettingsOf(status)) {
    for (const auto& [name, flag] : kSettingFlags) {
      if (setting == name && std::find(flags.begin(), flags.end(), flag) == flags.end())
        flags.emplace_back(flag);
    }
  }
  return flags.empty() ? "" : absl::StrCat(" (see ", absl::StrJoin(flags, ", "), ")");
}

}  // namespace

int ReportError(std::string_view command, const absl::Status& status) {
  std::fprintf(stderr, "ddpio %.*s: error: %.*s%s\n", static_cast<int>(command.size()),
               command.data(), static_cast<int>(status.message().size()), status.message().data(),
               HowToSet(status).c_str());
  return kExitRuntimeError;
}

int ReportUsageError(std::string_view command, std::string_view message) {
  std::fprintf(stderr, "ddpio %.*s: %.*s (see 'ddpio %.*s --help')\n",
               static_cast<int>(command.size()), command.data(), static_cast<int>(message.size()),
               message.data(), static_cast<int>(command.size()), command.data());
  return kExitUsageError;
}

int RunIsolated(std::string_view command, std::string_view what, const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return body();  // no child to spare: run here
  if (pid == 0) {
    const int code = body();
    std::fflush(nullptr);
    std::_Exit(code);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  std::fprintf(stderr,
               "ddpio %.*s: error: %.*s is structurally corrupt: reading it crashed the LMDB "
               "library (signal %d, "
               "%s); do not train on it — convert the source again\n",
               static_cast<int>(command.size()), command.data(), static_cast<int>(what.size()),
               what.data(), sig, strsignal(sig));
  return kExitRuntimeError;
}

void PrintJsonLine(const nlohmann::json& result) {
  // File and class names are bytes on Linux, not always UTF-8: replace what is not, never throw.
  std::cout << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

int PrintResult(bool as_json, const nlohmann::json& result,
                std::string (*text)(const nlohmann::json&)) {
  if (as_json) {
    PrintJsonLine(result);
  } else {
    std::cout << text(result) << std::flush;
  }
  return kExitOk;
}

bool ParseScaleRange(const std::string& text, double* min, double* max) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  return parts.size() == 2 && absl::SimpleAtod(parts[0], min) && absl::SimpleAtod(parts[1], max) &&
         *min > 0 && *max <= 1 && *min <= *max;
}

std::string HumanBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%.0f B", bytes)
                   : absl::StrFormat("%.1f %s", bytes, kUnits[unit]);
}

uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c) {
  SplitMix64 g(a);
  uint64_t x = g.Next() ^ b;
  SplitMix64 h(x);
  return h.Next() ^ (c * kSplitMix64Gamma);
}

nlohmann::json StoreCountersJson(const storage::remote::RemoteCounters& c) {
  return {{"requests", c.requests},
          {"retries", c.retries},
          {"bytes", c.bytes},
          {"records_fetched", c.records_fetched},
          {"memory_hits", c.memory_hits},
          {"disk_hits", c.disk_hits},
          {"misses", c.misses},
          {"refetches", c.refetches},
          {"chunk_records", c.chunk_records},
          {"peer_chunks", c.peer_chunks},
          {"served_evicted", c.served_evicted},
          {"throttles", c.throttles},
          {"rate_limit_per_s", c.rate_limit_per_s},
          {"in_flight_window_max", c.in_flight_window_max}};
}

std::string StoreCountersText(const storage::remote::RemoteCounters& c) {
  return absl::StrFormat(
      "%d requests (%d retried), %s received, %d records fetched (%d with their chunk); cache: %d "
      "from memory, %d from disk, %d waited for; %d fetched again after a checksum mismatch; %d "
      "chunks left to another process sharing the cache folder; %d records left the folder once "
      "served; %d signs of an overrun store%s",
      c.requests, c.retries, HumanBytes(static_cast<double>(c.bytes)), c.records_fetched,
      c.chunk_records, c.memory_hits, c.disk_hits, c.misses, c.refetches, c.peer_chunks,
      c.served_evicted, c.throttles,
      c.rate_limit_per_s > 0 ? absl::StrFormat(" (rate now %.0f/s)", c.rate_limit_per_s) : "");
}

nlohmann::json SettingsJson(const PipelineOptions& options,
                            std::initializer_list<std::string_view> names) {
  nlohmann::json j = nlohmann::json::object();
  for (std::string_view name : names) {
    const Setting* s = FindSetting(name);
    if (s == nullptr) {  // a caller's typo shows as null, never as a made-up value
      j[std::string(name)] = nullptr;
      continue;
    }
    j[std::string(name)] = std::visit(
        [](const auto& v) -> nlohmann::json {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) {
            return nullptr;
          } else {
            return v;
          }
        },
        s->get(options));
  }
  return j;
}

}  // namespace ddpio::tools
