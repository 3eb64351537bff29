#include "ddpio/storage/remote/remote_dataset.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/checksum.h"
#include "ddpio/storage/remote/get_plan.h"
#include "ddpio/storage/s3/object_store.h"

namespace ddpio::storage::remote {
namespace {

constexpr uint64_t kMaxRecordOverBudget = uint64_t{64} << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<s3::ObjectStore>> RemoteDataset::MakeClient(
    const s3::S3Config& config, const RemoteOptions& options) {
  s3::S3ClientOptions client_options;
  client_options.retry = options.retry;
  client_options.max_in_flight = std::max(1, options.max_in_flight);
  client_options.in_flight_limit = options.in_flight_limit;
  client_options.max_requests_per_s = options.max_requests_per_s;
  return s3::OpenObjectStore(config, client_options);
}

absl::StatusOr<std::shared_ptr<RemoteDataset>> RemoteDataset::Open(const std::string& url,
                                                                   const s3::S3Config& config,
                                                                   const RemoteOptions& options) {
  DDPIO_ASSIGN_OR_RETURN(s3::S3Url where, s3::ParseS3Url(url));
  auto d = std::shared_ptr<RemoteDataset>(new RemoteDataset());
  d->url_ = where.ToString();
  d->bucket_ = where.bucket;
  d->options_ = options;
  d->options_.preloaded.reset();  // not kept: the index is decoded below
  DDPIO_ASSIGN_OR_RETURN(d->client_, MakeClient(config, options));

  // The manifest and index another rank fetched, or fetched here; checked the same either way.
  RemoteIndexBytes fetched;
  const RemoteIndexBytes* bytes = options.preloaded.get();
  if (bytes == nullptr) {
    DDPIO_ASSIGN_OR_RETURN(fetched, d->FetchIndexBytes(where));
    bytes = &fetched;
  }
  DDPIO_RETURN_IF_ERROR(d->DecodeManifest(where, bytes->manifest));
  std::vector<uint64_t> file_bytes;
  for (const RemoteFile& f : d->manifest_.files) {
    d->keys_.push_back(where.Key(f.object));
    file_bytes.push_back(f.bytes);
  }
  const std::string& index_bytes = bytes->index;
  const std::string index_name = S3ClientName(where.bucket, where.Key(kRecordIndexObject));
  if (!d->manifest_.MatchesIndex(index_bytes)) {
    return absl::DataLossError(absl::StrCat(
        index_name, " is not the index its manifest was written with (", index_bytes.size(),
        " bytes, checksum ", absl::Hex(RecordIndexChecksum(index_bytes), absl::kZeroPad8),
        options.preloaded != nullptr ? "; as another rank of the job received it" : "",
        "; another upload over this one?)"));
  }
  DDPIO_ASSIGN_OR_RETURN(RecordIndex decoded,
                         DecodeRecordIndex(index_bytes, d->manifest_.completion.sample_count,
                                           file_bytes, d->manifest_.document_lengths, index_name));
  DDPIO_RETURN_IF_ERROR(
      CheckDocumentLengths(decoded, d->manifest_.header, d->manifest_.completion, index_name));
  d->index_ = std::move(decoded.locations);
  d->document_lengths_ = std::move(decoded.document_lengths);
  for (uint64_t i = 0; i < d->index_.size(); ++i) {
    const RemoteFile& f = d->manifest_.files[d->index_[i].file];
    if (i < f.first || i >= f.first + f.records) {
      return absl::DataLossError(absl::StrCat(index_name, ": record ", i, " is said to be in ",
                                              f.object, ", which holds records ", f.first, " to ",
                                              f.first + f.records));
    }
    // A record is fetched whole into memory: the budget may be passed by one record of up to
    // kMaxRecordOverBudget (a budget smaller than one ordinary record still works), no more (a
    // hostile index may declare a record of gigabytes).
    if (d->index_[i].length > std::max(options.memory_bytes, kMaxRecordOverBudget)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          index_name, ": record ", i, " is ", d->index_[i].length,
          " bytes, more than the memory for fetched records allows (",
          std::max(options.memory_bytes, kMaxRecordOverBudget),
          " bytes; DDPIO_S3_MEMORY_MB sets it): raise it if the dataset really holds such "
          "records"));
    }
  }
  d->MakeChunks();
  if (!options.cache_dir.empty()) {
    // The sub-folder is named by the dataset's content (records' digest, index, header), never
    // by something two datasets share: a record found there is taken as this dataset's (its
    // checksum is bound to the dataset only from format 3 on).
    const std::string name = d->manifest_.ContentName(RecordIndexChecksum(index_bytes));
    DDPIO_ASSIGN_OR_RETURN(d->disk_,
                           RecordCache::Open(options.cache_dir, name, options.cache_bytes));
  }
  return d;
}

void RemoteDataset::MakeChunks() {
  // An order's chunk is fetched by one GET up to kMaxOrderChunkBytes (a chunk of 64 records of
  // 200 KB is 12.5 MB); other chunks up to max_request_bytes.
  request_limit_ = options_.order_chunk_records > 0
                       ? std::max(options_.max_request_bytes, RemoteOptions::kMaxOrderChunkBytes)
                       : options_.max_request_bytes;
  ChunkTable table =
      MakeChunkTable(index_, {options_.coalesce_gap, request_limit_}, options_.order_chunk_records);
  chunk_begin_ = std::move(table.begin);
  const uint64_t total = table.total_bytes, largest = table.largest_bytes;
  const uint64_t budget = options_.cache_dir.empty() ? options_.memory_bytes : options_.cache_bytes;
  const bool few_at_a_time =
      options_.chunk_order_records > 0 && budget >= RemoteOptions::kMinChunksHeld * largest;
  const uint64_t in_use =
      index_.empty()
          ? 0
          : total / index_.size() * std::min<uint64_t>(options_.chunk_order_records, index_.size());
  if (options_.whole_chunks && few_at_a_time && total > budget && in_use > budget) {
    DDPIO_LOG(WARNING) << url_ << ": the block order keeps about " << (in_use >> 20)
                       << " MiB of records in use per reader ((block_window + 2) x block_chunk "
                       << "records and those read ahead), more than the " << (budget >> 20)
                       << " MiB "
                       << (options_.cache_dir.empty() ? "memory budget (DDPIO_S3_MEMORY_MB)"
                                                      : "cache folder's budget (cache_gb)")
                       << " holds: chunks will be fetched more than once; give a larger budget "
                       << "(or a cache folder) or a smaller block_window";
  }
  // In the exact order, whole chunks only when the reader needs enough of each (min_chunk_share).
  const double share =
      options_.cache_dir.empty() ? options_.chunk_share.alone : options_.chunk_share.folder;
  const bool enough_of_each = few_at_a_time || share >= options_.min_chunk_share;
  if (options_.whole_chunks && !enough_of_each && total <= budget) {
    DDPIO_LOG(INFO) << url_ << ": fetching the records asked for, not whole chunks: this "
                    << (options_.cache_dir.empty() ? "reader" : "node") << " needs "
                    << absl::StrFormat("%.3g", share)
                    << " of each chunk an epoch, and a whole chunk would bring "
                    << absl::StrFormat("%.3g", 1 / std::max(share, 1e-9))
                    << "x the bytes it needs (the order for many nodes is --order block; "
                    << "DDPIO_S3_WHOLE_CHUNKS=1 fetches whole chunks all the same)";
  }
  whole_chunks_ = options_.whole_chunks && enough_of_each && (total <= budget || few_at_a_time) &&
                  chunk_count() < index_.size();
  first_batch_left_ = whole_chunks_ ? options_.first_batch_records : 0;
  evict_served_ =
      whole_chunks_ && few_at_a_time && !options_.cache_dir.empty() && total > options_.cache_bytes;
  if (!whole_chunks_) return;
  chunk_of_.resize(index_.size());
  for (uint64_t c = 0; c < chunk_count(); ++c) {
    for (uint64_t i = chunk_begin_[c]; i < chunk_begin_[c + 1]; ++i) {
      chunk_of_[i] = static_cast<uint32_t>(c);
    }
  }
}

std::vector<uint64_t> RemoteDataset::ChunkMatesLocked(const std::vector<uint64_t>& wanted) {
  std::vector<uint64_t> mates;
  if (!whole_chunks_) return mates;
  std::vector<uint32_t> chunks;
  chunks.reserve(wanted.size());
  for (uint64_t i : wanted) chunks.push_back(chunk_of_[i]);
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  for (uint32_t c : chunks) {
    for (uint64_t j = chunk_begin_[c]; j < chunk_begin_[c + 1]; ++j) {
      if (slots_.count(j) != 0 || (disk_ != nullptr && disk_->Contains(j))) continue;
      Slot& slot = slots_[j];
      slot.pending = true;  // not ahead: held apart, evicted after the served records
      slot.mate = true;
      mates.push_back(j);
    }
  }
  counts_.chunk_records += mates.size();
  return mates;
}

std::vector<uint64_t> RemoteDataset::ClaimChunks(std::vector<uint64_t> wanted, Claims* claims) {
  std::vector<uint64_t> kept;
  std::vector<uint32_t> left;
  for (uint64_t i : wanted) {
    const uint32_t c = chunk_of_[i];
    auto it = claims->find(c);
    if (it == claims->end()) {
      std::optional<RecordCache::Claim> claim = disk_->TryClaim(chunk_begin_[c]);
      // Held by another process: left to it (held by this one: its GET is on the way, or a thread
      // is reading the folder).
      if (!claim.has_value() && !disk_->ClaimedHere(chunk_begin_[c])) left.push_back(c);
      it = claims
               ->emplace(c, claim.has_value()
                                ? std::make_shared<RecordCache::Claim>(*std::move(claim))
                                : nullptr)
               .first;
    }
    // Left to the process fetching it; or in the folder already (another process fetched it).
    if (it->second == nullptr || disk_->Holds(i, index_[i].length)) continue;
    kept.push_back(i);
  }
  if (!left.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (left_to_peer_.size() != chunk_count()) left_to_peer_.assign(chunk_count(), false);
    for (uint32_t c : left) {
      if (!left_to_peer_[c]) ++counts_.peer_chunks;
      left_to_peer_[c] = true;
    }
  }
  return kept;
}

std::chrono::milliseconds RemoteDataset::ClaimPatience() const {
  // A quarter of what one request may take with its retries (a job's timeout bounds that): a
  // chunk's GET takes well under a second; a holder much slower is stuck, and waiting for it
  // longer would outlast the peers waiting for this rank.
  const s3::RetryPolicy& r = options_.retry;
  const std::chrono::milliseconds request = r.give_up_after.count() > 0
                                                ? r.give_up_after + r.attempt_timeout
                                                : r.attempt_timeout * std::max(1, r.max_attempts);
  return std::max<std::chrono::milliseconds>(request / 4, std::chrono::seconds(10));
}

absl::StatusOr<std::string> RemoteDataset::FetchManifest(const s3::S3Url& where) {
  const std::string manifest_key = where.Key(kRemoteManifestObject);
  absl::StatusOr<std::string> text =
      client_->Get(where.bucket, manifest_key, kMaxRemoteManifestBytes);
  if (absl::IsNotFound(text.status())) {
    // Anything under the prefix? Then an upload that did not finish; else no dataset at all.
    absl::StatusOr<uint64_t> index_size =
        client_->Size(where.bucket, where.Key(kRecordIndexObject));
    absl::StatusOr<uint64_t> data_size = client_->Size(where.bucket, where.Key("data.mdb"));
    if (index_size.ok() || data_size.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the dataset at ", url_, " is incomplete: it has no ", kRemoteManifestObject,
                       ", which an upload writes last (an upload was interrupted or is still "
                       "running: run it again)"));
    }
    return absl::NotFoundError(absl::StrCat("no dataset at ", url_, " (", text.status().message(),
                                            "; upload one with `ddpio upload DATASET ", url_,
                                            "`)"));
  }
  return text;
}

absl::Status RemoteDataset::DecodeManifest(const s3::S3Url& where, const std::string& text) {
  DDPIO_ASSIGN_OR_RETURN(
      manifest_,
      DecodeRemoteManifest(text, S3ClientName(where.bucket, where.Key(kRemoteManifestObject))));
  return absl::OkStatus();
}

absl::StatusOr<RemoteIndexBytes> RemoteDataset::FetchIndexBytes(const s3::S3Url& where) {
  RemoteIndexBytes bytes;
  DDPIO_ASSIGN_OR_RETURN(bytes.manifest, FetchManifest(where));
  DDPIO_RETURN_IF_ERROR(DecodeManifest(where, bytes.manifest));
  DDPIO_ASSIGN_OR_RETURN(bytes.index, client_->Get(where.bucket, where.Key(kRecordIndexObject),
                                                   manifest_.index_bytes));
  return bytes;
}

absl::StatusOr<RemoteIndexBytes> RemoteDataset::FetchIndex(const std::string& url,
                                                           const s3::S3Config& config,
                                                           const RemoteOptions& options) {
  DDPIO_ASSIGN_OR_RETURN(s3::S3Url where, s3::ParseS3Url(url));
  RemoteDataset d;
  d.url_ = where.ToString();
  d.bucket_ = where.bucket;
  DDPIO_ASSIGN_OR_RETURN(d.client_, MakeClient(config, options));
  DDPIO_ASSIGN_OR_RETURN(RemoteIndexBytes bytes, d.FetchIndexBytes(where));
  if (!d.manifest_.MatchesIndex(bytes.index)) {
    return absl::DataLossError(absl::StrCat(
        S3ClientName(where.bucket, where.Key(kRecordIndexObject)),
        " is not the index its manifest was written with (another upload over this one?)"));
  }
  return bytes;
}

absl::StatusOr<RemoteManifest> RemoteDataset::ReadManifest(const std::string& url,
                                                           const s3::S3Config& config,
                                                           const RemoteOptions& options,
                                                           RemoteCounters* counters) {
  DDPIO_ASSIGN_OR_RETURN(s3::S3Url where, s3::ParseS3Url(url));
  RemoteDataset d;
  d.url_ = where.ToString();
  d.bucket_ = where.bucket;
  DDPIO_ASSIGN_OR_RETURN(d.client_, MakeClient(config, options));
  absl::Status loaded;
  if (options.preloaded != nullptr) {
    loaded = d.DecodeManifest(where, options.preloaded->manifest);  // asks the store nothing
  } else {
    absl::StatusOr<std::string> text = d.FetchManifest(where);
    loaded = text.ok() ? d.DecodeManifest(where, *text) : text.status();
  }
  if (counters != nullptr) *counters = d.counters();
  DDPIO_RETURN_IF_ERROR(loaded);
  return d.manifest_;
}

RemoteDataset::~RemoteDataset() {
  // The client's thread delivers what is in flight (or cancels it) before it ends: destroy it
  // while the slots its callbacks fill still exist.
  client_.reset();
}

std::string RemoteDataset::S3ClientName(const std::string& bucket, const std::string& key) {
  return s3::ObjectStore::Name(bucket, key);
}

RecordBinding RemoteDataset::Binding(uint64_t index) const {
  const RemoteFile& f = manifest_.files[index_[index].file];
  return RecordBinding{f.salt, f.key_first + (index - f.first), f.bound};
}

std::string RemoteDataset::Where(uint64_t index) const {
  const RecordLocation& r = index_[index];
  return absl::StrCat(s3::ObjectStore::Name(bucket_, keys_[r.file]), " bytes ", r.offset, "-",
                      r.offset + r.length - 1);
}

RemoteCounters RemoteDataset::counters() const {
  const s3::HttpCounters http = client_->counters();
  std::lock_guard<std::mutex> lock(mu_);
  RemoteCounters c = counts_;
  c.requests = http.requests;
  c.retries = http.retries;
  c.bytes = http.bytes_received;
  c.throttles = http.throttles;
  c.rate_limit_per_s = http.rate_limit_per_s;
  c.in_flight_window_max = http.in_flight_window_max;
  return c;
}

void RemoteDataset::HoldLocked(uint64_t index, std::shared_ptr<const std::string> bytes) {
  Slot& slot = slots_[index];
  if (slot.bytes != nullptr) {
    held_bytes_ -= slot.bytes->size();
    ListOf(slot).erase(slot.place);
  }
  slot.pending = false;
  held_bytes_ += bytes->size();
  slot.bytes = std::move(bytes);
  std::list<uint64_t>& list = ListOf(slot);
  slot.place = list.insert(list.end(), index);
  // Served records go first, then chunk mates not asked for yet, then records fetched ahead.
  while (held_bytes_ > options_.memory_bytes &&
         ahead_.size() + mates_.size() + served_.size() > 1) {
    const std::list<uint64_t>& first = !served_.empty()  ? served_
                                       : !mates_.empty() ? mates_
                                                         : ahead_;
    DropLocked(slots_.find(first.front()));
  }
}

std::shared_ptr<const std::string> RemoteDataset::ServeLocked(
    std::unordered_map<uint64_t, Slot>::iterator it) {
  Slot& slot = it->second;
  if (first_batch_left_ > 0 && --first_batch_left_ == 0) fetched_alone_.clear();
  if (slot.ahead) {
    slot.ahead = false;
    ahead_bytes_ -= index_[it->first].length;
    served_.splice(served_.end(), ahead_, slot.place);
  } else if (slot.mate) {
    slot.mate = false;
    served_.splice(served_.end(), mates_, slot.place);
  } else {
    served_.splice(served_.end(), served_, slot.place);
  }
  return slot.bytes;
}

std::list<uint64_t>& RemoteDataset::ListOf(const Slot& slot) {
  return slot.ahead ? ahead_ : slot.mate ? mates_ : served_;
}

void RemoteDataset::DemoteStaleLocked() {
  for (auto place = ahead_.begin(); place != ahead_.end();) {
    auto it = slots_.find(*place++);
    Slot& slot = it->second;
    if (slot.asked + kStalePrefetchCalls >= prefetch_calls_) continue;
    slot.ahead = false;
    ahead_bytes_ -= index_[it->first].length;
    served_.splice(served_.begin(), ahead_, slot.place);  // the first to go
  }
}

void RemoteDataset::DropLocked(std::unordered_map<uint64_t, Slot>::iterator it) {
  Slot& slot = it->second;
  if (slot.ahead) ahead_bytes_ -= index_[it->first].length;
  if (slot.bytes != nullptr) {
    held_bytes_ -= slot.bytes->size();
    ListOf(slot).erase(slot.place);
  }
  slots_.erase(it);
}

absl::Status RemoteDataset::CheckIndex(uint64_t index) const {
  if (index < index_.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("record index ", index, " out of range [0, ", index_.size(), ") of ", url_));
}

absl::StatusOr<std::shared_ptr<const std::string>> RemoteDataset::Fetch(uint64_t index) {
  absl::StatusOr<std::shared_ptr<const std::string>> bytes = FetchAny(index);
  if (evict_served_ && bytes.ok()) {
    disk_->Erase(index);
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.served_evicted;
  }
  return bytes;
}

absl::StatusOr<std::shared_ptr<const std::string>> RemoteDataset::FetchAny(uint64_t index) {
  DDPIO_RETURN_IF_ERROR(CheckIndex(index));
  RecordCache::Claim claim;  // of the record's chunk, held while this thread fetches the record
  for (int round = 0;; ++round) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto it = slots_.find(index);
      if (it != slots_.end() && it->second.pending) {
        ++counts_.misses;
        arrived_.wait(lock, [&] {
          auto now = slots_.find(index);
          return now == slots_.end() || !now->second.pending;
        });
        // Gone: its GET failed; fetched again below, reporting its own error.
        it = slots_.find(index);
        if (it != slots_.end()) return ServeLocked(it);
      } else if (it != slots_.end()) {
        ++counts_.memory_hits;
        return ServeLocked(it);
      }
    }
    if (disk_ != nullptr) {
      if (std::optional<std::string> bytes = disk_->Get(index, index_[index].length);
          bytes.has_value()) {
        // Not held in memory: the folder is as near, and memory freed once the caller is done is
        // reused for the next record (held, every record would take fresh pages: ~24 page faults
        // for a 96 KB record, more than reading it).
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++counts_.disk_hits;
        }
        return std::make_shared<const std::string>(*std::move(bytes));
      }
    }
    if (!SharesChunks()) break;
    const uint32_t chunk = chunk_of_[index];
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stuck_.empty() && stuck_[chunk]) break;  // its holder was waited for in vain once
    }
    // Another process of the node may be fetching its chunk: wait for it, then read what it wrote.
    claim = disk_->WaitClaim(chunk_begin_[chunk], ClaimPatience());
    if (std::optional<std::string> bytes = disk_->Get(index, index_[index].length);
        bytes.has_value()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.disk_hits;
      return std::make_shared<const std::string>(*std::move(bytes));
    }
    if (!claim.locked() && disk_->claims_work()) {
      // Its holder is stuck (a process stopped, a GET queued behind a slow store): this process
      // fetches the chunk's records itself from now on, without waiting again.
      std::lock_guard<std::mutex> lock(mu_);
      if (stuck_.size() != chunk_count()) stuck_.assign(chunk_count(), false);
      stuck_[chunk] = true;
      break;
    }
    if (round > 0) break;
    // Nobody fetched it (nobody had asked for it yet, or its fetcher failed): this process fetches
    // the whole chunk, as asking ahead would, and waits for it above.
    claim.Release();
    PrefetchImpl(absl::MakeConstSpan(&index, 1), /*ahead=*/false);
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    ++counts_.misses;
    auto [it, added] = slots_.try_emplace(index);
    if (!added) {  // asked for meanwhile (a prefetch, another thread): wait for that one
      arrived_.wait(lock, [&] {
        auto now = slots_.find(index);
        return now == slots_.end() || !now->second.pending;
      });
      auto now = slots_.find(index);
      if (now != slots_.end()) return ServeLocked(now);
      slots_[index].pending = true;  // its GET failed: this thread asks the store itself
    } else {
      it->second.pending = true;  // a Prefetch of it now waits for this GET instead of sending one
    }
  }
  absl::StatusOr<std::shared_ptr<const std::string>> fetched = FetchNow(index);
  if (!fetched.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = slots_.find(index);
      if (it != slots_.end() && it->second.pending) DropLocked(it);
    }
    arrived_.notify_all();
  }
  return fetched;
}

absl::StatusOr<std::shared_ptr<const std::string>> RemoteDataset::FetchNow(uint64_t index) {
  const RecordLocation& r = index_[index];
  DDPIO_ASSIGN_OR_RETURN(std::string bytes,
                         client_->GetRange(bucket_, keys_[r.file], r.offset, r.length));
  if (disk_ != nullptr) disk_->Put(index, bytes);
  auto held = std::make_shared<const std::string>(std::move(bytes));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.records_fetched;
    HoldLocked(index, held);
  }
  arrived_.notify_all();
  return held;
}

absl::StatusOr<uint64_t> RemoteDataset::FetchRaw(absl::Span<const uint64_t> indices) const {
  std::vector<RawRange> ranges;
  ranges.reserve(indices.size());
  for (uint64_t index : indices) {
    DDPIO_RETURN_IF_ERROR(CheckIndex(index));
    const RecordLocation& r = index_[index];
    ranges.push_back({r.file, r.offset, r.length});
  }
  return GetRaw(ranges);
}

absl::StatusOr<uint64_t> RemoteDataset::FetchRawChunks(uint64_t records_per_get) const {
  if (records_per_get == 0) {
    return absl::InvalidArgumentError("FetchRawChunks: 0 records per GET");
  }
  // The chunks the block order's reader would cut (MakeChunks with order_chunk_records), a GET
  // each over its byte range.
  const ChunkTable table =
      MakeChunkTable(index_,
                     {options_.coalesce_gap,
                      std::max(options_.max_request_bytes, RemoteOptions::kMaxOrderChunkBytes)},
                     records_per_get);
  std::vector<RawRange> ranges;
  for (size_t c = 0; c + 1 < table.begin.size(); ++c) {
    const RecordLocation& first = index_[table.begin[c]];
    uint64_t lo = first.offset, hi = first.offset + first.length;
    for (uint64_t i = table.begin[c] + 1; i < table.begin[c + 1]; ++i) {
      lo = std::min<uint64_t>(lo, index_[i].offset);
      hi = std::max<uint64_t>(hi, index_[i].offset + index_[i].length);
    }
    ranges.push_back({first.file, lo, hi - lo});
  }
  return GetRaw(ranges);
}

absl::StatusOr<uint64_t> RemoteDataset::GetRaw(const std::vector<RawRange>& ranges) const {
  DDPIO_ASSIGN_OR_RETURN(auto client, MakeClient(client_->config(), options_));
  std::mutex mu;
  std::condition_variable done;
  size_t left = ranges.size();
  uint64_t bytes = 0;
  absl::Status first;
  for (const RawRange& r : ranges) {
    client->GetRangeAsync(bucket_, keys_[r.file], r.offset, r.length,
                          [&](absl::StatusOr<std::string> got) {
                            std::lock_guard<std::mutex> lock(mu);
                            if (got.ok()) {
                              bytes += got->size();
                            } else if (first.ok()) {
                              first = got.status();
                            }
                            if (--left == 0) done.notify_all();
                          });
  }
  std::unique_lock<std::mutex> lock(mu);
  done.wait(lock, [&] { return left == 0; });
  DDPIO_RETURN_IF_ERROR(first);
  return bytes;
}

absl::StatusOr<std::shared_ptr<const std::string>> RemoteDataset::Refetch(uint64_t index) {
  if (index >= index_.size()) return Fetch(index);  // the range error
  if (disk_ != nullptr) disk_->Erase(index);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.refetches;
    auto it = slots_.find(index);
    if (it != slots_.end() && !it->second.pending) DropLocked(it);
  }
  return FetchNow(index);
}

uint64_t RemoteDataset::Prefetch(absl::Span<const uint64_t> indices) {
  return PrefetchImpl(indices, /*ahead=*/true);
}

uint64_t RemoteDataset::PrefetchImpl(absl::Span<const uint64_t> indices, bool ahead) {
  std::vector<uint64_t> wanted;
  // Until the first batch is served (RemoteOptions::first_batch_records), the first records of
  // every call — a worker's batch, whichever worker asks first — come each by a GET of its own
  // ahead of their chunks; `again`: those already on the way in a chunk's GET (asked by an earlier
  // call as chunk mates), which get a GET of their own too.
  std::unordered_set<uint64_t> first;
  std::vector<uint64_t> again;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ahead) ++prefetch_calls_;
    const size_t first_n = ahead && first_batch_left_ > 0
                               ? std::min<size_t>(options_.first_batch_records, indices.size())
                               : 0;
    for (size_t k = 0; k < indices.size(); ++k) {
      const uint64_t i = indices[k];
      if (i >= index_.size()) continue;
      const bool alone = k < first_n && fetched_alone_.insert(i).second;
      if (alone) first.insert(i);
      auto it = slots_.find(i);
      if (it == slots_.end()) {
        wanted.push_back(i);
      } else {
        if (it->second.ahead) it->second.asked = prefetch_calls_;  // still wanted ahead
        if (alone && it->second.pending && it->second.mate) again.push_back(i);
      }
    }
  }
  // On local disk already: not asked of the store, and not read ahead either — Fetch reads each
  // from the folder in the thread that needs it (reading ahead here would read every record of the
  // window on one thread before its batch is decoded, and twice when two workers' windows overlap).
  // A record the folder turns out not to have is fetched by Fetch from the store.
  if (disk_ != nullptr) std::erase_if(wanted, [&](uint64_t i) { return disk_->Contains(i); });
  Claims claims;  // released when the GETs of their chunks are done (and the folder written)
  if (SharesChunks()) wanted = ClaimChunks(std::move(wanted), &claims);
  std::vector<uint64_t> first_batch;  // fetched one by one ahead of their chunks (and with them)
  {
    // As many as the budget holds, in the order they will be used (the rest when these are).
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<uint64_t> admitted;
    bool demoted = false;
    for (uint64_t i : wanted) {
      if (slots_.count(i) != 0) continue;  // asked meanwhile, or twice in `indices`
      const uint64_t length = index_[i].length;
      if (ahead_bytes_ > 0 && ahead_bytes_ + length > options_.memory_bytes) {
        if (demoted) break;
        DemoteStaleLocked();
        demoted = true;
        if (ahead_bytes_ > 0 && ahead_bytes_ + length > options_.memory_bytes) break;
      }
      Slot& slot = slots_[i];
      slot.pending = true;
      slot.ahead = true;
      slot.asked = prefetch_calls_;
      ahead_bytes_ += length;
      admitted.push_back(i);
    }
    // Their chunks come whole (when the dataset fits): the GETs below join each chunk into one.
    std::vector<uint64_t> mates = ChunkMatesLocked(admitted);
    // The first batch's records come first, each on its own (RemoteOptions::first_batch_records).
    if (!first.empty() && !mates.empty()) {
      for (uint64_t i : admitted) {
        if (first.count(i) != 0) first_batch.push_back(i);
      }
      std::erase_if(admitted, [&](uint64_t i) { return first.count(i) != 0; });
    }
    first_batch.insert(first_batch.end(), again.begin(), again.end());
    admitted.insert(admitted.end(), mates.begin(), mates.end());
    wanted = std::move(admitted);
  }
  // The first batch's records each by a GET of its own, and inside their chunks' GETs too, so
  // that a chunk still comes in one GET (their bytes twice, once); not those already in a chunk's
  // GET on the way (`again`).
  std::vector<uint64_t> spanned;
  for (uint64_t i : first_batch) {
    if (std::find(again.begin(), again.end(), i) == again.end()) spanned.push_back(i);
  }
  std::vector<PlannedGet> gets = PlanGets(index_, wanted, first_batch, spanned, chunk_of_,
                                          {options_.coalesce_gap, request_limit_});
  uint64_t asked = 0;
  for (PlannedGet& get : gets) {
    std::vector<uint64_t>& group = get.records;
    const RecordLocation& first = index_[group.front()];
    const RecordLocation& last = index_[group.back()];
    const uint64_t start = first.offset, length = last.offset + last.length - first.offset;
    asked += length;
    std::vector<std::shared_ptr<RecordCache::Claim>> held;  // of the chunks in this GET
    for (uint64_t i : group) {
      auto it = claims.find(chunk_of_.empty() ? 0 : chunk_of_[i]);
      if (it != claims.end() && std::find(held.begin(), held.end(), it->second) == held.end()) {
        held.push_back(it->second);
      }
    }
    client_->GetRangeAsync(bucket_, keys_[first.file], start, length,
                           [this, group = std::move(group), start,
                            held = std::move(held)](absl::StatusOr<std::string> bytes) mutable {
                             Fetched(group, start, std::move(bytes));
                             held.clear();  // the folder has the records: peers may read them
                           });
  }
  return asked;
}

void RemoteDataset::Fetched(const std::vector<uint64_t>& group, uint64_t start,
                            absl::StatusOr<std::string> bytes) {
  std::vector<std::pair<uint64_t, std::shared_ptr<const std::string>>> records;
  if (bytes.ok()) {
    if (group.size() == 1 && bytes->size() == index_[group[0]].length) {
      // One record in the GET (most of them): its bytes as they came, not a copy.
      records.emplace_back(group[0], std::make_shared<const std::string>(std::move(*bytes)));
    } else {
      for (uint64_t i : group) {
        const RecordLocation& r = index_[i];
        records.emplace_back(
            i, std::make_shared<const std::string>(bytes->substr(r.offset - start, r.length)));
      }
    }
    if (disk_ != nullptr) {
      for (const auto& [i, b] : records) disk_->Put(i, *b);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes.ok()) {
      counts_.records_fetched += records.size();
      for (auto& [i, b] : records) HoldLocked(i, std::move(b));
    } else {
      // Failed after its retries (or cancelled): the slots go, and a Fetch of one of them asks the
      // store itself and reports what it says.
      for (uint64_t i : group) {
        auto it = slots_.find(i);
        if (it != slots_.end() && it->second.pending) DropLocked(it);
      }
    }
  }
  arrived_.notify_all();
}

}  // namespace ddpio::storage::remote
