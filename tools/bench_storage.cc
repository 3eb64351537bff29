#include "tools/bench_storage.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/remote/remote_dataset.h"
#include "ddpio/storage/remote/remote_options.h"
#include "ddpio/storage/s3/s3_config.h"
#include "tools/bench_ceiling.h"  // Median
#include "tools/cli_util.h"

namespace ddpio::tools {
namespace {

using Clock = std::chrono::steady_clock;

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

std::vector<uint64_t> Order(uint64_t n, const BenchStorageOptions& o) {
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (o.random_order) {
    SplitMix64 rng(o.seed);
    for (uint64_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.Next() % i]);
  }
  return order;
}

// CPU seconds this process has used (every thread, user and system).
double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// A dataset in an object store: each round opens it afresh (nothing held from the round before)
// and reads every record in the order, each thread asking for its next kWindow records ahead as
// the loader does; the ceiling is the store itself, the same records fetched by one range GET
// each with as many in flight, nothing checked or kept (RemoteDataset::FetchRaw); and the store's
// bulk rate: every record in GETs of the block order's chunks (128 consecutive records, one GET
// each), as many in flight, nothing checked or decoded (RemoteDataset::FetchRawChunks).
absl::StatusOr<nlohmann::json> BenchRemote(const BenchStorageOptions& o) {
  constexpr uint64_t kWindow = 256;
  storage::ReaderOptions ro;
  ro.store_overrides = o.store;
  std::vector<double> ours, ceiling, ours_cpu, ceiling_cpu, ratios, bulk, bulk_cpu, bulk_mb;
  std::vector<uint64_t> requests;
  nlohmann::json store;
  uint64_t n = 0, payload = 0, file_bytes = 0;
  for (int round = 0; round < o.repeat; ++round) {
    DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(o.data, ro));
    n = reader->size();
    payload = reader->completion().payload_bytes;
    file_bytes = reader->file_bytes();
    const std::vector<uint64_t> order = Order(n, o);
    const uint64_t requests_before = reader->remote()->counters().requests;
    std::atomic<int> errors{0};
    absl::Status first_error;
    std::mutex mu;
    double cpu = CpuSeconds();
    ours.push_back(Timed(o.threads, [&](int t) {
      auto txn = reader->BeginRead();
      const uint64_t part = (n + o.threads - 1) / o.threads;
      const uint64_t begin = std::min(n, part * t), end = std::min(n, begin + part);
      auto fail = [&](const absl::Status& s) {
        std::lock_guard<std::mutex> lock(mu);
        if (errors++ == 0) first_error = s;
      };
      if (!txn.ok()) return fail(txn.status());
      auto ask = [&](uint64_t from) {
        if (from >= end) return;
        const uint64_t to = std::min(end, from + kWindow);
        if (auto s = txn->Prefetch(absl::MakeConstSpan(order).subspan(from, to - from)); !s.ok())
          fail(s.status());
      };
      ask(begin);
      for (uint64_t i = begin; i < end; ++i) {
        if ((i - begin) % kWindow == 0) ask(i + kWindow);
        if (auto r = txn->Get(order[i]); !r.ok()) fail(r.status());
      }
    }));
    ours_cpu.push_back(CpuSeconds() - cpu);
    if (errors > 0) return first_error;
    const storage::remote::RemoteCounters c = reader->remote()->counters();
    requests.push_back(c.requests - requests_before);
    store = {{"requests", c.requests},
             {"retries", c.retries},
             {"bytes", c.bytes},
             {"records_fetched", c.records_fetched},
             {"memory_hits", c.memory_hits},
             {"disk_hits", c.disk_hits},
             {"misses", c.misses}};
    cpu = CpuSeconds();
    const auto start = Clock::now();
    DDPIO_RETURN_IF_ERROR(reader->remote()->FetchRaw(order).status());
    ceiling.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    ceiling_cpu.push_back(CpuSeconds() - cpu);
    ratios.push_back(ceiling.back() / ours.back());
    cpu = CpuSeconds();
    const auto bulk_start = Clock::now();
    DDPIO_ASSIGN_OR_RETURN(
        const uint64_t bulk_bytes,
        reader->remote()->FetchRawChunks(storage::remote::kDefaultBlockChunkRecords));
    bulk.push_back(std::chrono::duration<double>(Clock::now() - bulk_start).count());
    bulk_cpu.push_back(CpuSeconds() - cpu);
    bulk_mb.push_back(static_cast<double>(bulk_bytes) / 1e6);
  }
  const double t_ours = Median(ours), t_ceiling = Median(ceiling), t_bulk = Median(bulk);
  return nlohmann::json{
      {"data", o.data},
      {"order", o.random_order ? "random" : "sequential"},
      {"threads", o.threads},
      {"repeat", o.repeat},
      {"records", n},
      {"payload_bytes", payload},
      {"file_bytes", file_bytes},
      {"records_per_s", n / t_ours},
      {"mb_per_s", payload / 1e6 / t_ours},
      {"cpu_ms_per_record", Median(ours_cpu) * 1e3 / std::max<uint64_t>(1, n)},
      {"requests_per_round", Median(std::vector<double>(requests.begin(), requests.end()))},
      {"ceiling_records_per_s", n / t_ceiling},
      {"ceiling_mb_per_s", payload / 1e6 / t_ceiling},
      {"ceiling_cpu_ms_per_record", Median(ceiling_cpu) * 1e3 / std::max<uint64_t>(1, n)},
      {"ratio", Median(ratios)},
      {"bulk_records_per_s", n / t_bulk},
      {"bulk_mb_per_s", Median(bulk_mb) / t_bulk},
      {"bulk_cpu_ms_per_record", Median(bulk_cpu) * 1e3 / std::max<uint64_t>(1, n)},
      {"bulk_rounds_seconds", bulk},
      {"store", store},
      {"rounds_seconds", ours},
      {"ceiling_rounds_seconds", ceiling}};
}

}  // namespace

absl::StatusOr<nlohmann::json> BenchStorage(const BenchStorageOptions& options) {
  BenchStorageOptions o = options;
  if (o.threads == 0)
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.threads < 1 || o.repeat < 1)
    return absl::InvalidArgumentError("threads must be >= 0 and repeat >= 1");
  if (storage::s3::IsS3Url(o.data)) return BenchRemote(o);
  storage::ReaderOptions ro;
  ro.readahead = !o.random_order;
  DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(o.data, ro));
  storage::ReaderOptions lookup_ro = ro;
  lookup_ro.verify_checksums = false;
  DDPIO_ASSIGN_OR_RETURN(auto lookup_reader, storage::DatasetReader::Open(o.data, lookup_ro));

  const uint64_t n = reader->size();
  const std::vector<uint64_t> order = Order(n, o);
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
  if (j.contains("store")) {
    return absl::StrFormat(
        "bench storage: %d records (%s payload) of %s, %s order, %d thread(s), median of %d "
        "rounds\n"
        "  read + verify   %10.0f records/s  %8.0f MB/s  %.0f requests a round, "
        "%.3f ms CPU a record (this process)\n"
        "  ceiling         %10.0f records/s  %8.0f MB/s  (the store: one range GET a record, "
        "as many in flight, nothing checked; %.3f ms CPU a record)\n"
        "  ratio           %.2f of the ceiling\n"
        "  bulk            %10.0f records/s  %8.0f MB/s  (the store: a GET a block-order chunk "
        "of %d records, as many in flight, nothing checked; %.3f ms CPU a record)\n",
        j["records"].get<uint64_t>(), HumanBytes(j["payload_bytes"].get<double>()),
        j["data"].get<std::string>(), j["order"].get<std::string>(), j["threads"].get<int>(),
        j["repeat"].get<int>(), j["records_per_s"].get<double>(), j["mb_per_s"].get<double>(),
        j["requests_per_round"].get<double>(), j["cpu_ms_per_record"].get<double>(),
        j["ceiling_records_per_s"].get<double>(), j["ceiling_mb_per_s"].get<double>(),
        j["ceiling_cpu_ms_per_record"].get<double>(), j["ratio"].get<double>(),
        j["bulk_records_per_s"].get<double>(), j["bulk_mb_per_s"].get<double>(),
        static_cast<int>(storage::remote::kDefaultBlockChunkRecords),
        j["bulk_cpu_ms_per_record"].get<double>());
  }
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
