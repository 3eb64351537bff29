#include "tools/bench_loader.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/environment.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/augment.h"
#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_huffman.h"
#include "ddpio/loader/jpeg_region.h"
#include "ddpio/loader/jpeg_restart.h"
#include "ddpio/pipeline/pipeline.h"
#include "ddpio/pipeline/settings.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/remote/remote_dataset.h"
#include "ddpio/storage/store_settings.h"
#include "tools/bench_ceiling.h"
#include "tools/bench_feed.h"
#include "tools/cli_util.h"

namespace ddpio::tools {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t CurrentRssBytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// Both single-thread ceilings (without markers, then as stored), from images loaded for this
// measurement only (held through the loader's epochs they would count in its memory figures).
struct Ceilings {
  double plain = 0, stored = 0;
  uint64_t restart_marked = 0;
};

absl::StatusOr<Ceilings> MeasureCeilings(const storage::DatasetReader& reader, uint64_t n) {
  DDPIO_ASSIGN_OR_RETURN(const CeilingImages images, LoadCeilingImages(reader, n));
  Ceilings c;
  DDPIO_ASSIGN_OR_RETURN(c.plain, FullDecodeRate(images, /*without_markers=*/true));
  DDPIO_ASSIGN_OR_RETURN(c.stored, FullDecodeRate(images, /*without_markers=*/false));
  c.restart_marked = images.restart_marked;
  return c;
}

// Single-thread decode of the crop's segments alone (the band the loader reads in the run's decode
// mode, decoded whole at full scale; geometry of epoch 0) over the segmented JPEG records among
// `n` records spread over the dataset (SampledRecord): images/s, and how many records were
// segmented; 0 / 0 without restart markers.
absl::StatusOr<std::pair<double, uint64_t>> CropDecodeRate(const storage::DatasetReader& reader,
                                                           uint64_t n,
                                                           const loader::LoaderOptions& o) {
  loader::RegionDecoder decoder;
  std::vector<uint8_t> sub, pixels;
  std::vector<uint32_t> offsets;
  uint64_t decoded = 0;
  double seconds = 0;
  DDPIO_RETURN_IF_ERROR(ForEachSegmentedJpeg(
      reader, n,
      [&](uint64_t i, const storage::RecordView& rec, const loader::RestartLayout& layout) {
        const loader::SampleGeometry g = loader::PlanSample(
            static_cast<int>(rec.width), static_cast<int>(rec.height), o.augment, o.seed, 0, i);
        const auto t0 = Clock::now();
        const loader::SegmentBand band =
            loader::BandFor(layout, g.box.x0, g.box.y0, g.box.x1, g.box.y1, o.augment.size,
                            /*exact_edges=*/o.decode == loader::DecodeMode::kExact);
        if (!loader::BuildSubJpeg(rec.payload, layout, band.row0, band.row1, band.col0, band.col1,
                                  &sub, &offsets)
                 .ok())
          return;
        loader::DecodedRegion region;
        const loader::ScanSegments segments{offsets, layout.interval};
        if (!decoder
                 .Decode(sub, loader::Box{0, 0, 1, 1}, 1, 1, false, true, false, &pixels, &region,
                         nullptr, &segments)
                 .ok())
          return;
        seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        ++decoded;
      }));
  return std::make_pair(seconds > 0 ? decoded / seconds : 0.0, decoded);
}

// Exact mode from the crop's segments against exact mode from the whole entropy stream, over the
// `n` records spread over the dataset, the run's own geometry (epochs 0 and 1) and the evaluation
// geometry: samples compared, how many took the segment path, how many differ (must be 0: exact
// mode promises torchvision's pixels whichever way it decodes).
absl::StatusOr<nlohmann::json> CheckSegmentsExact(const storage::DatasetReader& reader, uint64_t n,
                                                  const loader::LoaderOptions& o) {
  DDPIO_ASSIGN_OR_RETURN(auto txn, reader.BeginRead());
  loader::SampleProcessor segments, whole;
  whole.set_segment_decode(false);
  const size_t bytes = static_cast<size_t>(o.augment.size) * o.augment.size * 3;
  std::vector<uint8_t> a(bytes), b(bytes);
  loader::AugmentOptions eval = o.augment;
  eval.train = false;
  uint64_t compared = 0, used = 0, differ = 0;
  n = std::min<uint64_t>(n, reader.size());
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t i = SampledRecord(k, n, reader.size());
    auto rec = txn.Get(i);
    if (!rec.ok()) continue;
    for (const auto& [aug, epoch] :
         {std::pair{o.augment, uint64_t{0}}, std::pair{o.augment, uint64_t{1}},
          std::pair{eval, uint64_t{0}}}) {
      if (!segments.Process(*rec, i, epoch, o.seed, aug, loader::DecodeMode::kExact, a.data())
               .ok() ||
          !whole.Process(*rec, i, epoch, o.seed, aug, loader::DecodeMode::kExact, b.data()).ok()) {
        continue;
      }
      ++compared;
      used += segments.last_used_segments();
      differ += a != b;
    }
  }
  return nlohmann::json{{"samples", compared}, {"segment_decoded", used}, {"differ", differ}};
}

// Fast vs exact on `n` records spread over the dataset with the loader's geometry: mean absolute
// difference per pixel value, the largest per-image mean, and the time of each mode (one thread).
absl::StatusOr<nlohmann::json> CompareModes(const storage::DatasetReader& reader, uint64_t n,
                                            const loader::LoaderOptions& o) {
  DDPIO_ASSIGN_OR_RETURN(auto txn, reader.BeginRead());
  loader::SampleProcessor fast, exact;
  const size_t bytes = static_cast<size_t>(o.augment.size) * o.augment.size * 3;
  std::vector<uint8_t> a(bytes), b(bytes);
  n = std::min<uint64_t>(n, reader.size());
  double sum = 0, worst = 0, t_fast = 0, t_exact = 0;
  const uint64_t first = n;
  n = 0;  // records compared: bad ones are the loader run's business (--bad-samples), not this
          // one's
  for (uint64_t k = 0; k < first; ++k) {
    const uint64_t i = SampledRecord(k, first, reader.size());
    auto rec = txn.Get(i);
    if (!rec.ok()) continue;
    auto t0 = Clock::now();
    if (!fast.Process(*rec, i, 0, o.seed, o.augment, loader::DecodeMode::kFast, a.data()).ok())
      continue;
    auto t1 = Clock::now();
    if (!exact.Process(*rec, i, 0, o.seed, o.augment, loader::DecodeMode::kExact, b.data()).ok())
      continue;
    auto t2 = Clock::now();
    ++n;
    t_fast += std::chrono::duration<double>(t1 - t0).count();
    t_exact += std::chrono::duration<double>(t2 - t1).count();
    double d = 0;
    for (size_t k = 0; k < bytes; ++k)
      d += std::abs(static_cast<int>(a[k]) - static_cast<int>(b[k]));
    d /= bytes;
    sum += d;
    worst = std::max(worst, d);
  }
  return nlohmann::json{{"images", n},
                        {"mean_abs_diff", n == 0 ? 0 : sum / n},
                        {"worst_image_mean_abs_diff", worst},
                        {"fast_ms_per_image", n == 0 ? 0 : t_fast * 1e3 / n},
                        {"exact_ms_per_image", n == 0 ? 0 : t_exact * 1e3 / n}};
}

}  // namespace

absl::StatusOr<nlohmann::json> BenchLoader(const BenchLoaderOptions& o) {
  if (o.epochs < 1) return absl::InvalidArgumentError("--epochs must be >= 1");
  DDPIO_RETURN_IF_ERROR(Pipeline::CheckOptions(o.settings));
  loader::SetOwnHuffmanDefault(o.own_huffman);  // before any decoder is made
  const loader::LoaderOptions lo = LoaderOptionsOf(o.settings);
  storage::ReaderOptions ro;
  ro.store_overrides = ReaderStoreOverrides(o.settings, /*world_size=*/1);
  const auto opening = Clock::now();
  DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(o.data, ro));
  const double open_s = std::chrono::duration<double>(Clock::now() - opening).count();
  // The ceiling lines read records of their own: from an object store through a reader of their
  // own that fetches only those records (no whole chunks), so that the loader's reader starts its
  // first epoch cold and its counters are the loader's alone.
  std::unique_ptr<storage::DatasetReader> own_sample_reader;
  if (reader->remote() != nullptr) {
    DDPIO_ASSIGN_OR_RETURN(
        storage::StoreSettings settings,
        storage::ResolveStoreSettings(CurrentEnvironment(), o.settings.store_overrides));
    settings.remote.whole_chunks = false;
    settings.remote.cache_dir.clear();
    storage::ReaderOptions sample_options;
    sample_options.store_settings = settings;
    DDPIO_ASSIGN_OR_RETURN(own_sample_reader, storage::DatasetReader::Open(o.data, sample_options));
  }
  const storage::DatasetReader& sample_reader =
      own_sample_reader != nullptr ? *own_sample_reader : *reader;
  sampler::SamplerOptions so = SamplerOptionsOf(o.settings);
  so.dataset_size = reader->size();
  so.num_replicas = 1;
  std::string why;
  auto cuda = device::MakeCudaRuntime(&why);
  DDPIO_ASSIGN_OR_RETURN(auto ld, loader::Loader::Create(reader.get(), so, 0, lo, cuda.get()));
  // Single-thread ceilings before and after the loader runs (for reference); the concurrent
  // ceiling (as many decoders at once as the loader has workers) interleaved with the epochs:
  // before each and after the last, each epoch compared with the mean of the two around it.
  DDPIO_ASSIGN_OR_RETURN(const Ceilings before, MeasureCeilings(sample_reader, o.ceiling_images));
  const int threads = std::max(1, ld->stats().workers);  // the loader's workers, resolved
  // One epoch, numbered `e`, drained as fast as batches come: its images/s.
  // The time from each epoch's start to its first batch, in the order run (the first: the
  // process's first batch, from a reader that has fetched nothing).
  std::vector<double> first_batch_s;
  const auto run_epoch = [&](int e) -> absl::StatusOr<double> {
    auto t0 = Clock::now();
    DDPIO_RETURN_IF_ERROR(ld->StartEpoch(static_cast<uint64_t>(e)));
    uint64_t n = 0;
    for (;;) {
      auto batch = ld->Next();
      if (absl::IsOutOfRange(batch.status())) break;
      DDPIO_RETURN_IF_ERROR(batch.status());
      if (n == 0) first_batch_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      n += batch->size;
    }
    return n / std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // Warm-up epochs first (numbered from 0, as a training run starts): not in the figures.
  std::vector<double> warmup;
  for (int e = 0; e < o.warmup_epochs; ++e) {
    DDPIO_ASSIGN_OR_RETURN(const double rate, run_epoch(e));
    warmup.push_back(rate);
  }
  const loader::LoaderStats warm = ld->stats();
  std::vector<double> rates, rss, concurrent, ratios;
  for (int e = 0; e < o.epochs; ++e) {
    DDPIO_ASSIGN_OR_RETURN(const double c,
                           MeasureConcurrentCeiling(sample_reader, o.ceiling_images, threads));
    concurrent.push_back(c);
    DDPIO_ASSIGN_OR_RETURN(const double rate, run_epoch(o.warmup_epochs + e));
    rates.push_back(rate);
    rss.push_back(static_cast<double>(CurrentRssBytes()));
  }
  {
    DDPIO_ASSIGN_OR_RETURN(const double c,
                           MeasureConcurrentCeiling(sample_reader, o.ceiling_images, threads));
    concurrent.push_back(c);
  }
  for (size_t e = 0; e < rates.size(); ++e) {
    const double around = (concurrent[e] + concurrent[e + 1]) / 2;
    ratios.push_back(around > 0 ? rates[e] / around : 0.0);
  }
  DDPIO_ASSIGN_OR_RETURN(const Ceilings after, MeasureCeilings(sample_reader, o.ceiling_images));
  const double per_core = (before.plain + after.plain) / 2,
               stored_per_core = (before.stored + after.stored) / 2;
  DDPIO_ASSIGN_OR_RETURN(auto crop, CropDecodeRate(sample_reader, o.ceiling_images, lo));
  const loader::LoaderStats st = ld->stats();
  // Bad samples of the measured epochs only (the loader's list is in the order met, the warm-up
  // epochs' first).
  nlohmann::json skipped = nlohmann::json::array();
  for (size_t k = warm.skipped.size(); k < st.skipped.size(); ++k)
    skipped.push_back({{"index", st.skipped[k].index}, {"reason", st.skipped[k].reason}});
  const double ips = Median(rates);
  const int workers = st.workers;
  const double ceiling = Median(concurrent);
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  // Worker time per image over the measured epochs only.
  const uint64_t measured_images = st.images - warm.images;
  auto ms_per_image = [&](uint64_t ns, uint64_t warm_ns) {
    return measured_images == 0 ? 0.0 : (ns - warm_ns) / 1e6 / measured_images;
  };
  nlohmann::json j = {
      {"data", o.data},
      {"records", reader->size()},
      {"epochs", o.epochs},
      {"warmup_epochs", o.warmup_epochs},
      {"warmup_images_per_s", warmup},
      {"open_s", open_s},
      {"time_to_first_batch_s", first_batch_s.empty() ? 0.0 : first_batch_s.front()},
      {"epoch_first_batch_s", first_batch_s},
      {"workers", workers},
      {"images_per_s", ips},
      {"epoch_images_per_s", rates},
      {"mb_per_s", ips *
                       (static_cast<double>(reader->completion().payload_bytes) /
                        std::max<uint64_t>(reader->size(), 1)) /
                       1e6},
      {"ceiling_images_per_s", ceiling},
      {"ceiling_rounds_images_per_s", concurrent},
      {"ceiling_threads", threads},
      {"ceiling_per_core_images_per_s", per_core},
      {"ceiling_one_thread_times_workers_images_per_s", per_core * workers},
      {"ceiling_restart_marked_records", before.restart_marked},
      {"stored_full_decode_per_core_images_per_s", stored_per_core},
      {"ratio", Median(ratios)},
      {"huffman", o.own_huffman ? "ddpio" : "libjpeg"},
      {"epoch_ratios", ratios},
      {"ratio_one_thread_times_workers", ips / (per_core * workers)},
      {"crop_decode_images_per_s", crop.first * workers},
      {"crop_decode_per_core_images_per_s", crop.first},
      {"segmented_records_sampled", crop.second},
      {"ms_per_image",
       {{"read", ms_per_image(st.read_ns, warm.read_ns)},
        {"decode", ms_per_image(st.decode_ns, warm.decode_ns)},
        {"augment", ms_per_image(st.augment_ns, warm.augment_ns)},
        {"collate", ms_per_image(st.collate_ns, warm.collate_ns)}}},
      {"consumer_wait_s", st.wait_ns / 1e9},
      {"shared_samples", st.shared_samples - warm.shared_samples},
      {"slot_bytes", st.slot_bytes},
      {"slots", st.slots},
      {"host_memory", loader::HostMemoryKindName(st.memory)},
      {"peak_rss_bytes", static_cast<uint64_t>(ru.ru_maxrss) * 1024},
      {"epoch_rss_bytes", rss},
      {"bad_samples", st.bad_samples - warm.bad_samples},
      {"warmup_bad_samples", warm.bad_samples},
      {"skipped", skipped},
      {"device", cuda ? "cuda" : "none: " + why}};
  j.update(SettingsJson(o.settings, {"batch_size", "image_size", "decode", "output", "train"}));
  if (const storage::remote::RemoteDataset* remote = reader->remote(); remote != nullptr) {
    // What the loader's reader asked the store (the ceiling lines' reader not included).
    j["store"] = StoreCountersJson(remote->counters());
    j["store"]["chunks"] = remote->chunk_count();
    j["store"]["whole_chunks"] = remote->fetches_whole_chunks();
  }
  DDPIO_ASSIGN_OR_RETURN(j["fast_vs_exact"], CompareModes(sample_reader, o.ceiling_images, lo));
  DDPIO_ASSIGN_OR_RETURN(j["segments_vs_whole_exact"],
                         CheckSegmentsExact(sample_reader, o.ceiling_images, lo));
  return j;
}

namespace {

std::string WarmupText(const nlohmann::json& j) {
  const auto& rates = j["warmup_images_per_s"];
  if (rates.empty()) return "";
  std::string list;
  for (const auto& r : rates)
    absl::StrAppend(&list, list.empty() ? "" : ", ", absl::StrFormat("%.0f", r.get<double>()));
  return absl::StrFormat(
      "                (after %d warm-up epoch(s), not in the figures: %s images/s)\n",
      j["warmup_epochs"].get<int>(), list);
}

}  // namespace

std::string BenchLoaderText(const nlohmann::json& j) {
  const auto& ms = j["ms_per_image"];
  return absl::StrFormat(
             "bench loader: %d records, %d worker(s), batch %d, %dpx, %s decode, %s output, %s, %d "
             "epoch(s)\n"
             "  loader        %8.0f images/s  %6.1f MB/s   (median over epochs)\n"
             "%s"
             "  ceiling       %8.0f images/s  (tjDecompress2 full decode, %d decoders at once, "
             "before each epoch and after the last: median)\n"
             "                (one decoder alone: %.0f/s; x %d = %.0f/s, of which the decoders "
             "at once reach %.2f)\n"
             "  ratio         %.2f of the ceiling (median of each epoch against the ceilings "
             "around it; %.2f against one decoder x %d)\n"
             "%s"
             "%s"
             "  per image     read %.3f ms, decode %.3f ms, augment %.3f ms, collate %.3f ms "
             "(worker time; %d sample(s) helped\n"
             "                into another worker's batch at epochs' ends)\n"
             "  consumer wait %.2f s; slots %d x batch = %.1f MiB %s host memory; peak RSS %.0f "
             "MiB\n"
             "  fast vs exact %.2f mean |diff| per pixel value (worst image %.2f); %.3f vs %.3f "
             "ms/image\n"
             "  exact mode, segments vs whole stream: %d of %d samples differ (%d decoded from "
             "segments)\n",
             j["records"].get<uint64_t>(), j["workers"].get<int>(), j["batch_size"].get<uint64_t>(),
             j["image_size"].get<int>(), j["decode"].get<std::string>(),
             j["output"].get<std::string>(),
             j["train"].get<bool>() ? "train augmentation" : "eval geometry",
             j["epochs"].get<int>(), j["images_per_s"].get<double>(), j["mb_per_s"].get<double>(),
             WarmupText(j), j["ceiling_images_per_s"].get<double>(),
             j["ceiling_threads"].get<int>(), j["ceiling_per_core_images_per_s"].get<double>(),
             j["workers"].get<int>(),
             j["ceiling_one_thread_times_workers_images_per_s"].get<double>(),
             j["ceiling_images_per_s"].get<double>() /
                 std::max(1.0, j["ceiling_one_thread_times_workers_images_per_s"].get<double>()),
             j["ratio"].get<double>(), j["ratio_one_thread_times_workers"].get<double>(),
             j["workers"].get<int>(),
             j["ceiling_restart_marked_records"].get<uint64_t>() == 0
                 ? std::string()
                 : absl::StrFormat("                (the ceiling decodes %d restart-marked records "
                                   "without their markers; "
                                   "as stored, the same images decode at %.0f/s per core)\n",
                                   j["ceiling_restart_marked_records"].get<uint64_t>(),
                                   j["stored_full_decode_per_core_images_per_s"].get<double>()),
             j["segmented_records_sampled"].get<uint64_t>() == 0
                 ? std::string("  crop-decode   n/a (no record has restart markers: convert "
                               "--restart-interval)\n")
                 : absl::StrFormat("  crop-decode   %8.0f images/s  (the crop's segments alone, "
                                   "%.0f/s per core x %d "
                                   "workers)\n",
                                   j["crop_decode_images_per_s"].get<double>(),
                                   j["crop_decode_per_core_images_per_s"].get<double>(),
                                   j["workers"].get<int>()),
             ms["read"].get<double>(), ms["decode"].get<double>(), ms["augment"].get<double>(),
             ms["collate"].get<double>(), j["shared_samples"].get<uint64_t>(),
             j["consumer_wait_s"].get<double>(), j["slots"].get<int>(),
             j["slot_bytes"].get<uint64_t>() / 1048576.0, j["host_memory"].get<std::string>(),
             j["peak_rss_bytes"].get<uint64_t>() / 1048576.0,
             j["fast_vs_exact"]["mean_abs_diff"].get<double>(),
             j["fast_vs_exact"]["worst_image_mean_abs_diff"].get<double>(),
             j["fast_vs_exact"]["fast_ms_per_image"].get<double>(),
             j["fast_vs_exact"]["exact_ms_per_image"].get<double>(),
             j["segments_vs_whole_exact"]["differ"].get<uint64_t>(),
             j["segments_vs_whole_exact"]["samples"].get<uint64_t>(),
             j["segments_vs_whole_exact"]["segment_decoded"].get<uint64_t>()) +
         SkippedText(j);
}

}  // namespace ddpio::tools
