// RAII handles and error conversion for LMDB. Private to storage/.
//
// LMDB return codes become absl::Status here and nowhere else: MDB_NOTFOUND -> NotFound,
// MDB_MAP_FULL / MDB_READERS_FULL / ENOSPC -> ResourceExhausted, MDB_CORRUPTED /
// MDB_PAGE_NOTFOUND / MDB_INVALID -> DataLoss, MDB_VERSION_MISMATCH -> FailedPrecondition,
// errno values via ErrnoToStatus. Each message carries the caller's context and mdb_strerror.
#ifndef DDPIO_STORAGE_INTERNAL_LMDB_UTIL_H_
#define DDPIO_STORAGE_INTERNAL_LMDB_UTIL_H_

#include <lmdb.h>

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace ddpio::storage::internal {

absl::Status LmdbError(int rc, std::string_view context);

struct EnvCloser {
  void operator()(MDB_env* env) const { mdb_env_close(env); }
};
using EnvPtr = std::unique_ptr<MDB_env, EnvCloser>;

// An LMDB transaction; aborted on destruction unless committed. Move-only. A read-only
// transaction may be Reset (releases its snapshot, keeps its reader slot) and Renewed.
class Txn {
 public:
  Txn() = default;
  ~Txn() { Abort(); }
  Txn(Txn&& other) noexcept : txn_(other.txn_) { other.txn_ = nullptr; }
  Txn& operator=(Txn&& other) noexcept {
    if (this != &other) {
      Abort();
      txn_ = other.txn_;
      other.txn_ = nullptr;
    }
    return *this;
  }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;

  absl::Status Begin(MDB_env* env, unsigned flags, std::string_view context);
  absl::Status Commit(std::string_view context);
  void Abort();
  void Reset();
  absl::Status Renew(std::string_view context);
  MDB_txn* get() const { return txn_; }
  // Gives up ownership (for a raw mdb_txn_commit whose return code the caller inspects).
  MDB_txn* release() {
    MDB_txn* t = txn_;
    txn_ = nullptr;
    return t;
  }
  bool active() const { return txn_ != nullptr; }

 private:
  MDB_txn* txn_ = nullptr;
};

inline MDB_val ToVal(const void* data, size_t size) {
  return MDB_val{size, const_cast<void*>(data)};
}
inline absl::Span<const uint8_t> FromVal(const MDB_val& v) {
  return absl::Span<const uint8_t>(static_cast<const uint8_t*>(v.mv_data), v.mv_size);
}

}  // namespace ddpio::storage::internal

#endif  // DDPIO_STORAGE_INTERNAL_LMDB_UTIL_H_
