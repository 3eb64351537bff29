// The LMDB environment of one dataset file, shared by every reader of that file in a process,
// and the guards on its memory map. Private to storage/ (lmdb_record_store.cc reads through it).
//
// LMDB allows one environment per file per process: OpenSharedEnv hands out the one already open
// (opened with the first reader's options) or opens it; a child of fork opens its own. Every
// value LMDB hands out is checked to lie inside the file's mapped bytes (CheckInsideMap) before a
// byte of it is read, and after every read of the map CheckMapped turns a bus error that hit it
// (map_guard.h) into DataLoss naming the file, the byte and the likely cause. Thread-safe.
#ifndef DDPIO_STORAGE_INTERNAL_LMDB_ENV_H_
#define DDPIO_STORAGE_INTERNAL_LMDB_ENV_H_

#include <lmdb.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/internal/lmdb_util.h"
#include "ddpio/storage/internal/map_guard.h"

namespace ddpio::storage::internal {

// One LMDB environment per dataset file per process, shared by every reader of it.
struct SharedEnv {
  ~SharedEnv() {
    if (map_begin != 0) UnguardMappedRegion(reinterpret_cast<const void*>(map_begin));
  }
  // Whether a bus error has hit the map (see map_guard.h); *offset is then the byte of the
  // first. One fence and one atomic load: checked after every read of the map.
  bool Faulted(uint64_t* offset) const { return fault != nullptr && fault->Faulted(offset); }

  EnvPtr env;
  MDB_dbi samples = 0;
  MDB_dbi meta = 0;
  unsigned flags = 0;
  // The file's bytes in the memory map: every value LMDB hands out must lie inside them (a
  // damaged page can point anywhere; checked before a byte of it is read).
  uintptr_t map_begin = 0, map_end = 0;
  // The map's bus-error record (null: unguarded), and the file as it was opened, to tell a file
  // cut short under the process from a corrupt one when a read of the map faults.
  const MapFault* fault = nullptr;
  std::string data_file;
  dev_t opened_dev = 0;
  ino_t opened_ino = 0;
  uint64_t opened_bytes = 0;
  // Why the map faulted, worked out at the first report and kept: the file may change again
  // (be restored, say) while the map keeps its zeroed pages. Written once under cause_once.
  mutable std::once_flag cause_once;
  mutable std::string cause;
};

// The environment of the dataset file at `path` (a directory with data.mdb, or the file), opened
// read-only with `options`' readahead, locking and reader slots, or the one this process has
// open already (FailedPrecondition when that one was opened with other options). NotFound when
// nothing or no LMDB data is there; FailedPrecondition for a sharded conversion that was
// interrupted or an LMDB database that is not a ddpio dataset; CheckLmdbFile's errors.
absl::StatusOr<std::shared_ptr<SharedEnv>> OpenSharedEnv(const std::string& path,
                                                         const ReaderOptions& options);

// DataLoss: the map faulted at `offset`. "WHAT: dataset file F became unreadable ..." (no prefix
// for an empty `what`). Cold: after a fault only.
absl::Status MapFaultError(const SharedEnv& env, uint64_t offset, const std::string& what);

// OK unless a bus error has hit env's map; then DataLoss as MapFaultError. `what` (a callable
// giving the string) is called only then.
template <typename What>
absl::Status CheckMapped(const SharedEnv& env, What what) {
  uint64_t offset = 0;
  if (!env.Faulted(&offset)) return absl::OkStatus();
  return MapFaultError(env, offset, what());
}

// DataLoss unless the value lies inside the file's mapped bytes ("WHAT points outside the
// file").
absl::Status CheckInsideMap(const SharedEnv& env, const MDB_val& v, const std::string& what);

// The metadata value under `key` (nullopt when there is none), read in `txn`.
absl::StatusOr<std::optional<std::string>> GetMeta(const SharedEnv& env, MDB_txn* txn,
                                                   const char* key);

}  // namespace ddpio::storage::internal

#endif  // DDPIO_STORAGE_INTERNAL_LMDB_ENV_H_
