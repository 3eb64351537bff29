// ConvertSharded (convert.h): K contiguous parts of the listing converted in parallel, then the
// manifest that makes them one dataset.
#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/convert.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/shards.h"

namespace ddpio::convert {
namespace fs = std::filesystem;
namespace {

// Writes `text` to `path` so that a crash leaves either the old state or the whole file.
absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return ErrnoToStatus(errno, absl::StrCat("writing ", tmp));
  }
  int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return ErrnoToStatus(err, absl::StrCat("syncing ", tmp));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return ErrnoToStatus(errno, absl::StrCat("renaming ", tmp));
  const std::string dir = fs::path(path).parent_path().string();
  fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  return absl::OkStatus();
}

// Whether o.out already holds this conversion's finished dataset (true), is to be created or
// continued (false), or is something else (an error).
absl::StatusOr<bool> CheckExisting(const std::string& fingerprint, const ConvertOptions& o) {
  std::error_code ec;
  if (!fs::exists(o.out, ec)) {
    fs::create_directories(o.out, ec);
    if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("creating ", o.out));
    return false;
  }
  if (!o.resume) {
    return WithSetting(absl::AlreadyExistsError(absl::StrCat(
                           o.out,
                           " already exists; resuming continues an interrupted conversion, or "
                           "remove it")),
                       "resume");
  }
  if (!fs::is_directory(o.out, ec) || fs::exists(o.out + "/data.mdb", ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat(o.out,
                     " holds an unsharded dataset (or is a file): a sharded conversion cannot "
                     "continue it; convert into "
                     "another folder"));
  }
  const std::string manifest = o.out + "/" + storage::kShardManifest;
  if (!fs::exists(manifest, ec)) return false;
  DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(o.out));
  if (reader->header().source_fingerprint != fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot resume ", o.out, ": it was made from another source or with other options"));
  }
  return true;
}

}  // namespace

absl::StatusOr<ConvertSummary> ConvertSharded(const SourceListing& listing, const ConvertOptions& o,
                                              const ProgressCallback& callback) {
  const auto start = std::chrono::steady_clock::now();
  const size_t k = static_cast<size_t>(o.shards);
  if (k > storage::kMaxShards || k > listing.entries.size()) {
    return WithSetting(absl::InvalidArgumentError(absl::StrCat(
                           k, " shards: at most ", storage::kMaxShards,
                           " and at most one per source entry (", listing.entries.size(), ")")),
                       "shards");
  }
  const std::string fingerprint = ConvertFingerprint(listing, o);
  ConvertSummary summary;
  summary.source = listing.described;
  summary.out = o.out;
  summary.entries = listing.entries.size();
  summary.classes = listing.classes.size();
  DDPIO_ASSIGN_OR_RETURN(summary.already_complete, CheckExisting(fingerprint, o));
  if (summary.already_complete) return summary;

  const int all = o.threads > 0
                      ? o.threads
                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ConvertCounters counters;
  std::atomic<bool> stop{false};  // set when the callback or o.cancel asks to stop
  std::vector<absl::StatusOr<ConvertSummary>> results(k, absl::UnknownError("not run"));
  std::vector<uint64_t> first(k + 1);
  for (size_t s = 0; s <= k; ++s) first[s] = listing.entries.size() * s / k;
  std::mutex mu;
  std::condition_variable cv;
  size_t finished = 0;  // guarded by mu
  // The parts report through `counters`; this thread hands their sum to the callback.
  const auto report = [&](bool final) {
    const uint64_t done = counters.entries.load(std::memory_order_relaxed);
    const uint64_t skipped = counters.skipped.load(std::memory_order_relaxed);
    return callback(ConvertProgress{done, listing.entries.size(), done - skipped, skipped,
                                    counters.source_bytes.load(std::memory_order_relaxed), final});
  };
  // The first report comes before any part starts, so a callback that stops at once stops every
  // part before its first entry.
  bool go_on = !callback || report(false);
  if (!go_on || (o.cancel != nullptr && o.cancel->load())) stop = true;
  std::vector<std::thread> workers;
  for (size_t s = 0; s < k; ++s) {
    workers.emplace_back([&, s] {
      SourceListing part = listing;
      part.entries.assign(listing.entries.begin() + static_cast<ptrdiff_t>(first[s]),
                          listing.entries.begin() + static_cast<ptrdiff_t>(first[s + 1]));
      ConvertOptions so = o;
      so.out = o.out + "/" + storage::ShardName(s, k);
      so.shards = 1;
      so.shard_index = s;
      so.shard_count = k;
      so.dataset_fingerprint = fingerprint;
      so.threads = std::max(1, all / static_cast<int>(k));
      so.observer = nullptr;
      so.counters = &counters;
      so.cancel = &stop;
      results[s] = Convert(part, so);
      std::lock_guard<std::mutex> lock(mu);
      ++finished;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (!go_on || (o.cancel != nullptr && o.cancel->load(std::memory_order_relaxed))) stop = true;
      if (cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return finished == k; })) break;
      if (callback && !stop) {
        lock.unlock();
        go_on = report(false);
        lock.lock();
      }
    }
  }
  for (auto& t : workers) t.join();

  // A part stopped on request leaves the whole stopped (the other parts may have finished: a
  // resumed conversion finds them complete).
  for (size_t s = 0; s < k; ++s) {
    if (results[s].status().code() == absl::StatusCode::kCancelled) {
      const uint64_t done = counters.entries.load(std::memory_order_relaxed);
      return WithSetting(
          absl::CancelledError(absl::StrCat("conversion into ", o.out, " cancelled after ", done,
                                            " of ", listing.entries.size(),
                                            " source entries; the dataset is "
                                            "incomplete: convert again with resume to continue")),
          "resume_conversion");
    }
  }
  storage::ShardManifest manifest;
  manifest.source_fingerprint = fingerprint;
  for (size_t s = 0; s < k; ++s) {
    if (!results[s].ok()) {
      return WithSetting(
          Annotate(results[s].status(),
                   absl::StrCat("shard ", s, " of ", k, " (source entries ", first[s], " to ",
                                first[s + 1], "; resuming continues every shard)")),
          "resume");
    }
    const ConvertSummary& r = *results[s];
    summary.payload_bytes += r.payload_bytes;
    summary.source_bytes_read += r.source_bytes_read;
    summary.resumed_from += r.resumed_from;
    for (const auto& [how, n] : r.stored_as) summary.stored_as[how] += n;
    for (SkippedFile f : r.skipped) {
      f.source_index += first[s];
      summary.skipped.push_back(std::move(f));
    }
    const std::string shard = storage::ShardName(s, k);
    DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(o.out + "/" + shard));
    manifest.shards.push_back(
        {shard, reader->size(), storage::ContentDigest(reader->header(), reader->completion())});
    summary.records += reader->size();
  }
  DDPIO_RETURN_IF_ERROR(WriteFileAtomically(o.out + "/" + storage::kShardManifest,
                                            storage::EncodeShardManifest(manifest)));
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (callback) report(true);
  return summary;
}

}  // namespace ddpio::convert
