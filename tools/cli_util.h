// Shared pieces of the `ddpio` subcommands: exit codes, error reporting, JSON result lines,
// human-readable numbers, and the random number generator the tools use for determinism.
#ifndef DDPIO_TOOLS_CLI_UTIL_H_
#define DDPIO_TOOLS_CLI_UTIL_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "ddpio/common/splitmix64.h"
#include "ddpio/storage/remote/remote_dataset.h"
#include "ddpio/version.h"

namespace ddpio {
struct PipelineOptions;
}  // namespace ddpio

namespace ddpio::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitUsageError = 2;

inline constexpr char kVersion[] = DDPIO_VERSION;  // ddpio/version.h, from CMakeLists.txt

// Prints "ddpio <command>: error: <message>" on stderr; returns kExitRuntimeError.
int ReportError(std::string_view command, const absl::Status& status);
// Prints "ddpio <command>: <message> (see 'ddpio <command> --help')"; returns kExitUsageError.
int ReportUsageError(std::string_view command, std::string_view message);

// Runs `body` in a child process and returns its exit code. If the child dies of a signal —
// liblmdb trusts its pages, and a structurally corrupt file can crash it in places no check
// reaches — prints "ddpio <command>: error: <what> is structurally corrupt: ..." and returns
// kExitRuntimeError. Call it before starting any thread.
int RunIsolated(std::string_view command, std::string_view what, const std::function<int()>& body);

// Prints `result` as one line on stdout and flushes: the last line of a --json run.
void PrintJsonLine(const nlohmann::json& result);

// A dataset in an object store: what the store was asked and what the caches answered, as JSON
// ({"requests", "retries", "bytes", "records_fetched", "memory_hits", "disk_hits", "misses",
// "refetches"}) and as one line of text.
nlohmann::json StoreCountersJson(const storage::remote::RemoteCounters& c);
// The named settings of `options` as --json reports them: the settings table's names and values
// (ddpio/pipeline/settings.h): {"batch_size": 64, "mode": "shard", "cache_gb": null, ...}.
nlohmann::json SettingsJson(const PipelineOptions& options,
                            std::initializer_list<std::string_view> names);
std::string StoreCountersText(const storage::remote::RemoteCounters& c);

// The end of a reporting command: the JSON line with --json, otherwise text(result) on stdout.
// Returns kExitOk.
int PrintResult(bool as_json, const nlohmann::json& result,
                std::string (*text)(const nlohmann::json&));

// "0.08,1" -> {0.08, 1}: a RandomResizedCrop scale range, 0 < MIN <= MAX <= 1. False if malformed.
bool ParseScaleRange(const std::string& text, double* min, double* max);

// 1536 -> "1.5 KiB".
std::string HumanBytes(double bytes);

// Mixes several values into one seed.
uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_CLI_UTIL_H_
