#include "tools/bench_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"
#include "tools/cli_util.h"

namespace ddpio::tools {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Runs fn(thread_id) on `threads` threads; returns the wall time in seconds.
template <typename Fn>
double Timed(int threads, Fn fn) {
  auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(fn, t);
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Reads [0, file_bytes) of `path` with pread in 1 MiB chunks on `threads` threads.
absl::Status CopyFile(const std::string& path, uint64_t file_bytes, int threads, double* seconds) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("opening ", path));
  std::atomic<bool> failed{false};
  constexpr uint64_t kChunk = 1 << 20;
  *seconds = Timed(threads, [&](int t) {
    std::vector<uint8_t> buf(kChunk);
    uint64_t part = (file_bytes + threads - 1) / threads;
    uint64_t begin = part * t, end = std::min(file_bytes, begin + part);
    for (uint64_t off = begin; off < end; off += kChunk) {
      ssize_t n = ::pread(fd, buf.data(), std::min(kChunk, end - off), static_cast<off_t>(off));
      if (n <= 0) {
        failed = true;
        return;
      }
    }
  });
  ::close(fd);
  if (failed) return absl::InternalError(absl::StrCat("reading ", path));
  return absl::OkStatus();
}

// CopyFile over every data file of the dataset (one per shard), one after the other.
absl::Status CopyFiles(const storage::DatasetReader& reader, int threads, double* seconds) {
  *seconds = 0;
  for (const auto& file : reader.data_files()) {
    double s = 0;
    DDPIO_RETURN_IF_ERROR(CopyFile(file.path, file.bytes, threads, &s));
    *seconds += s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> BenchStorage(const BenchStorageOptions& options) {
  BenchStorageOptions o = options;
  if (o.threads == 0)
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.threads < 1 || o.repeat < 1)
    return absl::InvalidArgumentError("threads must be >= 0 and repeat >= 1");
  storage::ReaderOptions ro;
  ro.readahead = !o.random_order;
  DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(o.data, ro));
  storage::ReaderOptions lookup_ro = ro;
  lookup_ro.verify_checksums = false;
  DDPIO_ASSIGN_OR_RETURN(auto lookup_reader, storage::DatasetReader::Open(o.data, lookup_ro));

  const uint64_t n = reader->size();
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (o.random_order) {
    SplitMix64 rng(o.seed);
    for (uint64_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.Next() % i]);
  }
  // Each thread takes a contiguous part of the order.
  auto run_reader = [&](const storage::DatasetReader& r, std::atomic<int>* errors) {
    return Timed(o.threads, [&](int t) {
      auto txn = r.BeginRead();
      if (!txn.ok()) {
        ++*errors;
        return;
      }
      uint64_t part = (n + o.threads - 1) / o.threads;
      uint64_t begin = part * t, end = std::min(n, begin + part);
      for (uint64_t i = begin; i < end; ++i) {
        if (!txn->Get(order[i]).ok()) ++*errors;
      }
    });
  };
  std::atomic<int> errors{0};
  double warm = 0;
  DDPIO_RETURN_IF_ERROR(CopyFiles(*reader, o.threads, &warm));
  run_reader(*reader, &errors);  // warm-up pass, also verifies the whole dataset once
  if (errors > 0) {
    return absl::DataLossError(absl::StrCat(errors.load(), " record(s) of ", o.data,
                                            " failed to read; run `ddpio inspect --verify`"));
  }
  std::vector<double> ours, lookup, ceiling;
  for (int round = 0; round < o.repeat; ++round) {
    ours.push_back(run_reader(*reader, &errors));
    lookup.push_back(run_reader(*lookup_reader, &errors));
    double c = 0;
    DDPIO_RETURN_IF_ERROR(CopyFiles(*reader, o.threads, &c));
    ceiling.push_back(c);
  }
  const double payload_mb = reader->completion().payload_bytes / 1e6;
  const double file_mb = reader->file_bytes() / 1e6;
  std::vector<double> ratios;
  for (int i = 0; i < o.repeat; ++i)
    ratios.push_back((payload_mb / ours[i]) / (file_mb / ceiling[i]));
  const double t_ours = Median(ours), t_lookup = Median(lookup), t_ceiling = Median(ceiling);
  nlohmann::json j = {{"data", o.data},
                      {"order", o.random_order ? "random" : "sequential"},
                      {"threads", o.threads},
                      {"repeat", o.repeat},
                      {"records", n},
                      {"payload_bytes", reader->completion().payload_bytes},
                      {"file_bytes", reader->file_bytes()},
                      {"records_per_s", n / t_ours},
                      {"mb_per_s", payload_mb / t_ours},
                      {"lookup_records_per_s", n / t_lookup},
                      {"ceiling_mb_per_s", file_mb / t_ceiling},
                      {"ratio", Median(ratios)},
                      {"rounds_seconds", ours},
                      {"ceiling_rounds_seconds", ceiling}};
  return j;
}

std::string BenchStorageText(const nlohmann::json& j) {
  return absl::StrFormat(
      "bench storage: %d records (%s payload), %s order, %d thread(s), median of %d rounds\n"
      "  read + verify   %10.0f records/s  %8.0f MB/s\n"
      "  lookup only     %10.0f records/s  (no payload byte touched)\n"
      "  ceiling         %10s            %8.0f MB/s  (pread copy of the LMDB file, page cache)\n"
      "  ratio           %.2f of the ceiling\n",
      j["records"].get<uint64_t>(), HumanBytes(j["payload_bytes"].get<double>()),
      j["order"].get<std::string>(), j["threads"].get<int>(), j["repeat"].get<int>(),
      j["records_per_s"].get<double>(), j["mb_per_s"].get<double>(),
      j["lookup_records_per_s"].get<double>(), "", j["ceiling_mb_per_s"].get<double>(),
      j["ratio"].get<double>());
}

}  // namespace ddpio::tools
