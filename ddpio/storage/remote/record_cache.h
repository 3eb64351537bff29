// RecordCache: records of a remote dataset kept in a local folder, one file per record under
// DIR/<dataset>/<xx>/<index>, so a second epoch (or a restarted job) reads the disk instead of
// the store. Safe under several processes sharing DIR: a record is written to a temporary file
// and renamed into place, so a reader sees a whole file or none, and files deleted by someone
// else (another job's eviction, a user's rm -r) are misses, never errors. Nothing read from
// here is trusted: the caller verifies each record's checksum, bound to its key and dataset, and
// a mismatch erases the file.
//
// Nor is the folder itself trusted. DIR may be a symbolic link (the user chose it), but
// DIR/<dataset> must be a real folder, and it is held open from Open on: every file is reached
// from that descriptor without following any link (openat2 with RESOLVE_NO_SYMLINKS on the hit
// path, else O_NOFOLLOW one level at a time), so a <xx> folder or a record replaced by a
// symbolic link is never followed, and nothing is written or deleted outside
// DIR/<dataset> (no check-then-use window: a folder swapped for a link after a check is still
// refused). A record is opened without blocking (a FIFO in its place is a miss at once, not a
// hang), must be a regular file of exactly the length the caller expects, and no more than that
// is ever read (a sparse 2 GiB file in its place costs one fstat). What is found in the way — a
// file of the wrong size, a FIFO, a link in place of a record or of a <xx> folder — is removed
// (only the entry itself, never what a link points at) so the next Put can cache the record.
//
// Claims let the processes of a node that share the folder fetch each chunk of records once: a
// claim is an exclusive lock on one byte (the chunk's key) of DIR/<dataset>/claims, an
// open-file-description lock (fcntl F_OFD_SETLK), so it excludes every other RecordCache on the
// folder, in this process or another, and the kernel drops it when its process dies: a fetcher
// killed mid-GET never holds its peers up. A claim only saves requests — what is read from the
// folder is verified as always — so a folder where the lock cannot be taken (no claims file,
// a filesystem without locks) simply lets everyone fetch. A process forked after taking a claim
// shares its lock (one open file description): claims are for processes that open the folder
// themselves, as the ranks of a node do.
//
// The byte budget is kept by eviction, oldest written first, over what this process knows: the
// regular files found in the right <xx> folders when it opened the folder, and those it wrote
// since (two jobs sharing a folder may each fill it to the budget for a while). Thread-safe.
#ifndef DDPIO_STORAGE_REMOTE_RECORD_CACHE_H_
#define DDPIO_STORAGE_REMOTE_RECORD_CACHE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "absl/status/statusor.h"
#include "ddpio/common/fd.h"

namespace ddpio::storage::remote {

class RecordCache {
 public:
  // Creates DIR/<dataset> if needed and holds it open. InvalidArgument, naming the folder, for a
  // `dir` that is not a folder we can write, and for a DIR/<dataset> that is a symbolic link or
  // not a folder. `dataset` names the dataset's own sub-folder (letters, digits, '-'; not empty).
  static absl::StatusOr<std::unique_ptr<RecordCache>> Open(const std::string& dir,
                                                           const std::string& dataset,
                                                           uint64_t budget_bytes);
  // The record's cached bytes, read only if the file is a regular file of exactly
  // `expected_bytes` (the record's length from the dataset index); nullopt when absent,
  // unreadable, or anything else is in its place — that entry is erased. Never blocks on a
  // special file, never reads more than `expected_bytes`.
  std::optional<std::string> Get(uint64_t index, uint64_t expected_bytes) const;
  // Best effort: a full disk, or a folder that cannot be made or is a link, leaves the record
  // uncached (said once). A DIR/<dataset> deleted under the cache is made again.
  void Put(uint64_t index, std::string_view bytes);
  void Erase(uint64_t index);
  // Whether the record is believed to be in the folder (written or found at Open, not evicted or
  // erased since); Get may still find it missing or damaged (another process, a deleted file).
  bool Contains(uint64_t index) const;
  uint64_t bytes() const;
  // Whether a regular file of exactly `bytes` is in record `index`'s place, whoever wrote it (one
  // fstatat: Contains knows only this process's writes). Get may still fail (deleted meanwhile).
  bool Holds(uint64_t index, uint64_t bytes) const;

  // A claim on `key` while the object lives (see above); move-only.
  class Claim {
   public:
    Claim() = default;
    Claim(Claim&& other) noexcept { *this = std::move(other); }
    Claim& operator=(Claim&& other) noexcept;
    ~Claim() { Release(); }
    // Whether this process holds the lock (false: the folder cannot lock; go ahead regardless).
    bool locked() const { return cache_ != nullptr; }
    void Release();

   private:
    friend class RecordCache;
    const RecordCache* cache_ = nullptr;
    uint64_t key_ = 0;
  };
  // The claim on `key`, or nullopt while another holder (this process or another) has it.
  std::optional<Claim> TryClaim(uint64_t key) const;
  // The claim on `key`, waiting up to `patience` for its holder to release it (or die); after
  // that an unlocked Claim (whoever holds it is stuck: the caller goes ahead anyway).
  Claim WaitClaim(uint64_t key, std::chrono::milliseconds patience) const;
  // Whether this object holds the claim on `key` now.
  bool ClaimedHere(uint64_t key) const;
  // Whether claims lock here (a claims file that takes locks): else every Claim is unlocked.
  bool claims_work() const {
    return claims_.valid() && !locks_fail_.load(std::memory_order_relaxed);
  }

  // DIR/<dataset>, for messages and tests; the cache itself never resolves this path again
  // except to make the folder anew after it was deleted.
  const std::string& folder() const { return folder_; }

 private:
  RecordCache(std::string dir, std::string dataset, uint64_t budget, Fd folder_fd);
  // The descriptor of DIR/<dataset> in use; the caller keeps it alive while using it.
  std::shared_ptr<const Fd> FolderFd() const;
  std::optional<std::string> Read(uint64_t index, std::optional<uint64_t> expected_bytes) const;
  // Forgets `index`: its file is gone or was not what it should be.
  void ForgetLocked(uint64_t index) const;
  void EvictLocked();
  void Unclaim(uint64_t key) const;

  // Constant after construction.
  const std::string dir_;
  const std::string dataset_;
  const std::string folder_;
  const uint64_t budget_;

  mutable std::mutex mu_;
  // DIR/<dataset>, open; replaced by Put when the folder was deleted and made again.
  std::shared_ptr<const Fd> folder_fd_;  // guarded by mu_
  // Mutable: Get forgets a file it found damaged.
  std::deque<uint64_t> order_;  // guarded by mu_; oldest written first (may hold erased ones)
  mutable std::unordered_map<uint64_t, uint64_t> sizes_;  // guarded by mu_; believed there
  mutable uint64_t bytes_ = 0;                            // guarded by mu_
  bool warned_ = false;                                   // guarded by mu_
  Fd claims_;  // DIR/<dataset>/claims, open read-write; invalid when it could not be
  mutable std::unordered_set<uint64_t> claimed_;  // guarded by mu_; keys this object holds
  mutable std::atomic<bool> locks_fail_{false};   // the filesystem refused a lock
};

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_RECORD_CACHE_H_
