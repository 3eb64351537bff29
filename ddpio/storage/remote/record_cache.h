// RecordCache: records of a remote dataset kept in a local folder, one file per record under
// DIR/<dataset>/<xx>/<index>, so a second epoch (or a restarted job) reads the disk instead of
// the store. Safe under several processes sharing DIR: a record is written to a temporary file
// and renamed into place, so a reader sees a whole file or none, and files deleted by someone
// else (another job's eviction, a user's rm -r) are misses, never errors. Nothing read from
// here is trusted: the caller verifies each record's checksum, bound to its key and dataset, and
// a mismatch erases the file.
//
// The byte budget is kept by eviction, oldest written first, over what this process knows: the
// files found when it opened the folder and those it wrote since (two jobs sharing a folder may
// each fill it to the budget for a while). Thread-safe.
#ifndef DDPIO_STORAGE_REMOTE_RECORD_CACHE_H_
#define DDPIO_STORAGE_REMOTE_RECORD_CACHE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/status/statusor.h"

namespace ddpio::storage::remote {

class RecordCache {
 public:
  // Creates DIR/<dataset> if needed; InvalidArgument for a `dir` that is not a folder we can
  // write, naming it. `dataset` names the dataset's own sub-folder (letters, digits, '-').
  static absl::StatusOr<std::unique_ptr<RecordCache>> Open(const std::string& dir,
                                                           const std::string& dataset,
                                                           uint64_t budget_bytes);
  // The record's cached bytes; nullopt when absent or unreadable.
  std::optional<std::string> Get(uint64_t index) const;
  // Best effort: a full disk or a vanished folder leaves the record uncached (said once).
  void Put(uint64_t index, std::string_view bytes);
  void Erase(uint64_t index);
  // Whether the record is believed to be in the folder (written or found at Open, not evicted or
  // erased since); Get may still find it missing or damaged (another process, a deleted file).
  bool Contains(uint64_t index) const;
  uint64_t bytes() const;
  const std::string& folder() const { return folder_; }

 private:
  RecordCache(std::string folder, uint64_t budget) : folder_(std::move(folder)), budget_(budget) {}
  std::string PathOf(uint64_t index) const;
  void EvictLocked();

  const std::string folder_;
  const uint64_t budget_;
  mutable std::mutex mu_;
  std::deque<uint64_t> order_;                    // oldest written first (may hold erased ones)
  std::unordered_map<uint64_t, uint64_t> sizes_;  // what is believed to be there
  uint64_t bytes_ = 0;
  bool warned_ = false;
};

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_RECORD_CACHE_H_
