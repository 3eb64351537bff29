#include "tools/bench_ceiling.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "ddpio/common/status_macros.h"
#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_restart.h"

namespace ddpio::tools {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

absl::Status ForEachSegmentedJpeg(const storage::DatasetReader& reader, uint64_t n,
                                  const std::function<void(uint64_t, const storage::RecordView&,
                                                           const loader::RestartLayout&)>& fn) {
  DDPIO_ASSIGN_OR_RETURN(auto txn, reader.BeginRead());
  n = std::min<uint64_t>(n, reader.size());
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t i = SampledRecord(k, n, reader.size());
    auto rec = txn.Get(i);
    if (!rec.ok() || rec->type != storage::ContentType::kJpeg) continue;
    auto layout = loader::RecordRestartLayout(rec->payload, rec->segment_offsets);
    if (layout.ok()) fn(i, *rec, *layout);
  }
  return absl::OkStatus();
}

absl::StatusOr<CeilingImages> LoadCeilingImages(const storage::DatasetReader& reader, uint64_t n) {
  DDPIO_ASSIGN_OR_RETURN(auto txn, reader.BeginRead());
  CeilingImages images;
  n = std::min<uint64_t>(n, reader.size());
  for (uint64_t k = 0; k < n; ++k) {
    auto rec = txn.Get(SampledRecord(k, n, reader.size()));
    if (!rec.ok() || rec->type != storage::ContentType::kJpeg) continue;
    images.stored.emplace_back(rec->payload.begin(), rec->payload.end());
    images.plain.emplace_back();
    if (rec->segment_offsets.empty() && !loader::ReadRestartLayout(rec->payload).ok()) continue;
    // A JPEG whose coefficients cannot be written without markers (a DC difference across a
    // segment boundary beyond baseline's range) is timed as stored.
    absl::StatusOr<std::vector<uint8_t>> plain = loader::RemoveRestartMarkers(rec->payload);
    if (!plain.ok()) continue;
    images.plain.back() = *std::move(plain);
    ++images.restart_marked;
  }
  return images;
}

absl::StatusOr<double> FullDecodeRate(const CeilingImages& images, bool without_markers) {
  DDPIO_ASSIGN_OR_RETURN(auto decoder, loader::JpegDecoder::Create());
  std::vector<uint8_t> pixels;
  uint64_t decoded = 0;
  auto t0 = Clock::now();
  for (size_t i = 0; i < images.stored.size(); ++i) {
    const std::vector<uint8_t>& jpeg =
        without_markers && !images.plain[i].empty() ? images.plain[i] : images.stored[i];
    auto info = decoder.ReadInfo(jpeg);
    if (info.ok() && decoder.Decode(jpeg, *info, &pixels).ok()) ++decoded;
  }
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return decoded / s;
}

absl::StatusOr<double> ConcurrentFullDecodeRate(const CeilingImages& images, bool without_markers,
                                                int threads) {
  const size_t n = images.stored.size();
  if (n == 0 || threads < 1) return 0.0;
  std::vector<loader::JpegDecoder> decoders;
  for (int t = 0; t < threads; ++t) {
    DDPIO_ASSIGN_OR_RETURN(auto d, loader::JpegDecoder::Create());
    decoders.push_back(std::move(d));
  }
  std::atomic<uint64_t> decoded{0};
  std::mutex mu;
  std::condition_variable go;
  bool started = false;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      {
        std::unique_lock<std::mutex> lock(mu);
        go.wait(lock, [&] { return started; });
      }
      std::vector<uint8_t> pixels;
      uint64_t mine = 0;
      for (size_t k = 0; k < n; ++k) {
        const size_t i = (k + static_cast<size_t>(t) * n / threads) % n;
        const std::vector<uint8_t>& jpeg =
            without_markers && !images.plain[i].empty() ? images.plain[i] : images.stored[i];
        auto info = decoders[t].ReadInfo(jpeg);
        if (info.ok() && decoders[t].Decode(jpeg, *info, &pixels).ok()) ++mine;
      }
      decoded += mine;
    });
  }
  const auto t0 = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu);
    started = true;
  }
  go.notify_all();
  for (std::thread& th : pool) th.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return decoded.load() / s;
}

absl::StatusOr<double> MeasureConcurrentCeiling(const storage::DatasetReader& reader, uint64_t n,
                                                int threads) {
  DDPIO_ASSIGN_OR_RETURN(const CeilingImages images, LoadCeilingImages(reader, n));
  return ConcurrentFullDecodeRate(images, /*without_markers=*/true, threads);
}

std::vector<double> EpochRatios(const std::vector<double>& rates,
                                const std::vector<double>& rounds) {
  std::vector<double> ratios;
  for (size_t e = 0; e < rates.size() && e + 1 < rounds.size(); ++e) {
    const double around = (rounds[e] + rounds[e + 1]) / 2;
    ratios.push_back(around > 0 ? rates[e] / around : 0.0);
  }
  return ratios;
}

}  // namespace ddpio::tools
