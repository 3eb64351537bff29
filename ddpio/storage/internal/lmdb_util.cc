#include "ddpio/storage/internal/lmdb_util.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::storage::internal {

absl::Status LmdbError(int rc, std::string_view context) {
  if (rc == MDB_SUCCESS) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(context), ": ", mdb_strerror(rc));
  switch (rc) {
    case MDB_NOTFOUND:
      return absl::NotFoundError(message);
    case MDB_MAP_FULL:
    case MDB_READERS_FULL:
    case MDB_TXN_FULL:
    case MDB_DBS_FULL:
      return absl::ResourceExhaustedError(message);
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_BAD_VALSIZE:
      return absl::DataLossError(message);
    case MDB_VERSION_MISMATCH:
    case MDB_INCOMPATIBLE:
      return absl::FailedPreconditionError(message);
    case MDB_MAP_RESIZED:
      return absl::AbortedError(message);
    default:
      break;
  }
  if (rc > 0) return ErrnoToStatus(rc, context);
  return absl::InternalError(message);
}

absl::Status Txn::Begin(MDB_env* env, unsigned flags, std::string_view context) {
  Abort();
  return LmdbError(mdb_txn_begin(env, nullptr, flags, &txn_), context);
}

absl::Status Txn::Commit(std::string_view context) {
  int rc = mdb_txn_commit(txn_);  // frees the handle even on failure
  txn_ = nullptr;
  return LmdbError(rc, context);
}

void Txn::Abort() {
  if (txn_ != nullptr) mdb_txn_abort(txn_);
  txn_ = nullptr;
}

void Txn::Reset() {
  if (txn_ != nullptr) mdb_txn_reset(txn_);
}

absl::Status Txn::Renew(std::string_view context) {
  return LmdbError(mdb_txn_renew(txn_), context);
}

}  // namespace ddpio::storage::internal
