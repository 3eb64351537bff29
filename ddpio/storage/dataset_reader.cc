#include "ddpio/storage/dataset_reader.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ddpio/common/environment.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/internal/lmdb_check.h"
#include "ddpio/storage/internal/lmdb_util.h"
#include "ddpio/storage/internal/map_guard.h"
#include "ddpio/storage/s3/s3_config.h"
#include "ddpio/storage/shards.h"

namespace ddpio::storage {

using internal::LmdbError;
using internal::ToVal;
using internal::Txn;

namespace internal {

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

// Why the page at `offset` could not be read, from the file now against the file at open.
std::string MapFaultCause(const SharedEnv& env, uint64_t offset) {
  int fd = -1;
  struct stat now;
  const bool have_size =
      mdb_env_get_fd(env.env.get(), &fd) == MDB_SUCCESS && ::fstat(fd, &now) == 0;
  const uint64_t bytes = have_size ? static_cast<uint64_t>(now.st_size) : 0;
  if (have_size && bytes < env.opened_bytes) {
    return absl::StrCat("the file was truncated or replaced under the running process (", bytes,
                        " bytes now, ", env.opened_bytes, " when it was opened)");
  }
  struct stat named;
  if (::stat(env.data_file.c_str(), &named) != 0 || named.st_dev != env.opened_dev ||
      named.st_ino != env.opened_ino) {
    return "the file was truncated or replaced under the running process (its path names another "
           "file now, or none)";
  }
  if (!have_size || offset >= bytes) {
    return absl::StrCat("LMDB followed a page past the end of the file (", bytes,
                        " bytes): the file is corrupt (e.g. pages overwritten or swapped)");
  }
  // Inside a file that is whole: the kernel could not read the page.
  return "the file is whole but reading the page failed: its storage failed (an I/O error; the "
         "kernel log may "
         "say more)";
}

// Cold: after a fault only.
absl::Status MapFaultError(const SharedEnv& env, uint64_t offset, const std::string& what) {
  std::call_once(env.cause_once, [&] { env.cause = MapFaultCause(env, offset); });
  return absl::DataLossError(
      absl::StrCat(what, what.empty() ? "" : ": ", "dataset file ", env.data_file,
                   " became unreadable while mapped (bus error at byte ", offset, "): ", env.cause,
                   ". Every later read of it in this process fails too; check the file (`ddpio "
                   "inspect --verify` checks every "
                   "record), restore it and restart"));
}

// OK unless a bus error has hit env's map; then DataLoss as MapFaultError. `what` is built only
// then.
template <typename What>
absl::Status CheckMapped(const SharedEnv& env, What what) {
  uint64_t offset = 0;
  if (!env.Faulted(&offset)) return absl::OkStatus();
  return MapFaultError(env, offset, what());
}

// DataLoss unless the value lies inside the file's mapped bytes.
absl::Status CheckInsideMap(const SharedEnv& env, const MDB_val& v, const std::string& what) {
  if (env.map_begin == 0) return absl::OkStatus();  // unknown map: unguarded (logged at open)
  const uintptr_t p = reinterpret_cast<uintptr_t>(v.mv_data);
  if (p < env.map_begin || p > env.map_end || v.mv_size > env.map_end - p) {
    return absl::DataLossError(absl::StrCat(what, " points outside the file (", v.mv_size,
                                            " bytes): the dataset is structurally corrupt"));
  }
  return absl::OkStatus();
}

}  // namespace internal

namespace {

// The process is part of the key: a child of fork (a PyTorch DataLoader worker) inherits this
// table, and LMDB forbids using an environment opened before fork, so the child opens its own.
using EnvKey = std::tuple<pid_t, dev_t, ino_t>;

// std::mutex, not absl::Mutex: Debian's Abseil is not TSan-instrumented (see
// common/ordered_parallel_map.h).
std::mutex g_envs_mu;
// Guarded by g_envs_mu.
std::map<EnvKey, std::weak_ptr<internal::SharedEnv>>& Envs() {
  static auto* envs = new std::map<EnvKey, std::weak_ptr<internal::SharedEnv>>();
  return *envs;
}

// Whether `dir` holds a "shard-..." folder (a sharded conversion's output).
bool HasShardFolders(const std::string& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().rfind("shard-", 0) == 0) return true;
  }
  return false;
}

absl::StatusOr<internal::EnvPtr> OpenEnvWithFlags(const std::string& path, unsigned flags,
                                                  unsigned max_readers, int* rc_out) {
  MDB_env* raw = nullptr;
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_create(&raw), "mdb_env_create"));
  internal::EnvPtr env(raw);
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_set_maxdbs(raw, 4), "mdb_env_set_maxdbs"));
  DDPIO_RETURN_IF_ERROR(
      LmdbError(mdb_env_set_maxreaders(raw, max_readers), "mdb_env_set_maxreaders"));
  *rc_out = mdb_env_open(raw, path.c_str(), flags, 0444);
  if (*rc_out != MDB_SUCCESS) return LmdbError(*rc_out, absl::StrCat("opening dataset ", path));
  return env;
}

absl::StatusOr<std::optional<std::string>> GetMeta(const internal::SharedEnv& env, MDB_txn* txn,
                                                   const char* key) {
  MDB_val k = ToVal(key, std::strlen(key)), v;
  const int rc = mdb_get(txn, env.meta, &k, &v);
  absl::Status st;
  std::optional<std::string> value;
  if (rc != MDB_NOTFOUND) {
    st = LmdbError(rc, absl::StrCat("reading metadata '", key, "'"));
    if (st.ok()) st = internal::CheckInsideMap(env, v, absl::StrCat("metadata '", key, "'"));
    if (st.ok()) value.emplace(static_cast<const char*>(v.mv_data), v.mv_size);
  }
  // A fault while LMDB looked or the value was copied: zeros, whatever LMDB made of them.
  DDPIO_RETURN_IF_ERROR(
      internal::CheckMapped(env, [&] { return absl::StrCat("reading metadata '", key, "'"); }));
  if (!st.ok()) return st;
  return value;
}

absl::StatusOr<std::shared_ptr<internal::SharedEnv>> OpenShared(const std::string& path,
                                                                const ReaderOptions& options) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("dataset ", path));
  }
  unsigned flags = MDB_RDONLY | MDB_NOTLS;
  std::string data_file = path;
  if (S_ISDIR(st.st_mode)) {
    data_file = path + "/data.mdb";
    if (::stat(data_file.c_str(), &st) != 0) {
      if (HasShardFolders(path)) {
        return WithSetting(
            absl::FailedPreconditionError(absl::StrCat(
                "dataset ", path, " holds shards but no ", kShardManifest,
                ": its sharded conversion was interrupted (resume it, from the same source, to "
                "finish it)")),
            "resume_conversion");
      }
      return absl::NotFoundError(
          absl::StrCat("dataset ", path, " is a directory without data.mdb: not an LMDB dataset"));
    }
  } else {
    flags |= MDB_NOSUBDIR;
  }
  if (!options.readahead) flags |= MDB_NORDAHEAD;
  if (options.locking == ReaderOptions::Locking::kNoLock) flags |= MDB_NOLOCK;
  // What LMDB takes on trust: a file cut short would kill every reader with SIGBUS, a damaged
  // meta page could crash inside liblmdb.
  DDPIO_ASSIGN_OR_RETURN(internal::LmdbLayout layout, internal::CheckLmdbFile(data_file));

  std::lock_guard<std::mutex> lock(g_envs_mu);
  EnvKey key{getpid(), st.st_dev, st.st_ino};
  if (auto existing = Envs()[key].lock()) {
    unsigned want = flags & ~MDB_NOLOCK, have = existing->flags & ~MDB_NOLOCK;
    if (want != have) {
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset ", path,
          " is already open in this process with other reader options "
          "(LMDB allows one environment per process; open it once and share the reader)"));
    }
    DDPIO_RETURN_IF_ERROR(
        internal::CheckMapped(*existing, [&] { return absl::StrCat("opening ", path); }));
    return existing;
  }
  auto shared = std::make_shared<internal::SharedEnv>();
  // The file's maps before LMDB makes its own: LMDB's is the one that is new (a child of fork
  // also has its parent's, which LMDB's pointers never point into).
  const auto maps_before = internal::FileMappings(st.st_dev, st.st_ino);
  int rc = 0;
  auto env = OpenEnvWithFlags(path, flags, options.max_readers, &rc);
  if (!env.ok() && options.locking == ReaderOptions::Locking::kAuto &&
      (rc == EACCES || rc == EROFS || rc == EPERM)) {
    flags |= MDB_NOLOCK;
    env = OpenEnvWithFlags(path, flags, options.max_readers, &rc);
    if (env.ok()) {
      DDPIO_LOG(INFO) << "dataset " << path
                      << ": lock file not writable (read-only location); reading without "
                         "LMDB locking, which is safe for a complete dataset";
    }
  }
  if (!env.ok()) return env.status();
  shared->env = std::move(env).value();
  shared->flags = flags;
  shared->data_file = data_file;
  shared->opened_dev = st.st_dev;
  shared->opened_ino = st.st_ino;
  shared->opened_bytes = static_cast<uint64_t>(st.st_size);
  int fd = -1;
  struct stat
      mapped_file;  // the file LMDB opened, should data_file have changed since the stat above
  if (mdb_env_get_fd(shared->env.get(), &fd) == MDB_SUCCESS && ::fstat(fd, &mapped_file) == 0) {
    shared->opened_dev = mapped_file.st_dev;
    shared->opened_ino = mapped_file.st_ino;
    shared->opened_bytes = static_cast<uint64_t>(mapped_file.st_size);
  }
  // Where LMDB mapped the file: every value it hands out must lie in its first needed_bytes.
  const void* map = nullptr;
  size_t mapped = 0;
  int new_maps = 0;
  for (const auto& [base, bytes] : internal::FileMappings(st.st_dev, st.st_ino)) {
    if (std::find_if(maps_before.begin(), maps_before.end(),
                     [&](const auto& m) { return m.first == base; }) != maps_before.end()) {
      continue;
    }
    map = base;
    mapped = bytes;
    ++new_maps;
  }
  if (new_maps == 1) {
    shared->map_begin = reinterpret_cast<uintptr_t>(map);
    shared->map_end = shared->map_begin + std::min<uint64_t>(layout.needed_bytes, mapped);
    shared->fault = internal::GuardMappedRegion(map, mapped, data_file);
  } else {
    DDPIO_LOG(WARNING) << "dataset " << path << ": "
                       << (new_maps == 0 ? "cannot find its memory map in /proc/self/maps"
                                         : "more than one new memory map of it in /proc/self/maps")
                       << "; reading it without the bounds and bus-error guards";
  }

  Txn txn;
  DDPIO_RETURN_IF_ERROR(txn.Begin(shared->env.get(), MDB_RDONLY, absl::StrCat("opening ", path)));
  for (auto [name, dbi] :
       {std::pair{kSamplesDb, &shared->samples}, std::pair{kMetaDb, &shared->meta}}) {
    int drc = mdb_dbi_open(txn.get(), name, 0, dbi);
    DDPIO_RETURN_IF_ERROR(
        internal::CheckMapped(*shared, [&] { return absl::StrCat("opening ", path); }));
    if (drc == MDB_NOTFOUND) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is an LMDB database but not a ddpio dataset (no '", name,
                       "' database; convert the source with `ddpio convert`)"));
    }
    DDPIO_RETURN_IF_ERROR(LmdbError(drc, absl::StrCat("opening database '", name, "' in ", path)));
  }
  // Committing a read-only transaction makes its DBI handles usable by later transactions.
  DDPIO_RETURN_IF_ERROR(txn.Commit(absl::StrCat("opening ", path)));
  Envs()[key] = shared;
  return shared;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct ReadTxn::Impl {
  const DatasetReader* reader = nullptr;
  std::shared_ptr<internal::SharedEnv> env;
  bool verify = true;
  Txn txn;
  bool reset = false;
  std::vector<std::optional<ReadTxn>> shards;  // sharded: begun on first use
  // Sharded: the shards read since the last Reset (whose views may be alive), each once.
  std::vector<size_t> touched;
  std::vector<char> is_touched;
  // In an object store: the records whose views are alive until Reset.
  std::shared_ptr<remote::RemoteDataset> remote;
  std::vector<std::shared_ptr<const std::string>> held;
};

namespace {

std::string RecordName(uint64_t index, const std::string& path) {
  return absl::StrCat("record ", index, " (key ", IndexKeyHex(index), ") of ", path);
}

}  // namespace

// Sharded datasets: the shard holding global `index`, its transaction (begun on first use) and
// the index within the shard.
absl::StatusOr<ReadTxn*> DatasetReader::ShardTxn(ReadTxn::Impl& impl, uint64_t index, size_t* shard,
                                                 uint64_t* local) const {
  const size_t k =
      static_cast<size_t>(std::upper_bound(shard_starts_.begin(), shard_starts_.end(), index) -
                          shard_starts_.begin()) -
      1;
  *shard = k;
  if (!impl.shards[k].has_value()) {
    DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, shards_[k]->BeginRead());
    impl.shards[k].emplace(std::move(txn));
    impl.is_touched.resize(impl.shards.size(), 0);
  }
  if (!impl.is_touched[k]) {
    impl.is_touched[k] = 1;
    impl.touched.push_back(k);
  }
  *local = index - shard_starts_[k];
  return &*impl.shards[k];
}

ReadTxn::ReadTxn(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ReadTxn::ReadTxn(ReadTxn&&) noexcept = default;
ReadTxn& ReadTxn::operator=(ReadTxn&&) noexcept = default;
ReadTxn::~ReadTxn() = default;

void ReadTxn::Reset() {
  if (impl_ == nullptr) return;
  for (auto& shard : impl_->shards) {
    if (shard.has_value()) shard->Reset();
  }
  for (size_t k : impl_->touched) impl_->is_touched[k] = 0;
  impl_->touched.clear();
  impl_->held.clear();
  if (impl_->txn.active() && !impl_->reset) {
    impl_->txn.Reset();
    impl_->reset = true;
  }
}

absl::StatusOr<RecordView> ReadTxn::Get(uint64_t index, absl::Span<const uint8_t>* stored,
                                        RecordBinding* binding) {
  if (impl_ == nullptr) return absl::FailedPreconditionError("Get on a moved-from ReadTxn");
  const DatasetReader& reader = *impl_->reader;
  if (index >= reader.size()) {
    return absl::InvalidArgumentError(absl::StrCat("record index ", index, " out of range [0, ",
                                                   reader.size(), ") of ", reader.path()));
  }
  if (!impl_->shards.empty()) {
    size_t k = 0;
    uint64_t local = 0;
    DDPIO_ASSIGN_OR_RETURN(ReadTxn * shard, reader.ShardTxn(*impl_, index, &k, &local));
    absl::StatusOr<RecordView> view = shard->Get(local, stored, binding);
    if (!view.ok())
      return Annotate(view.status(), absl::StrCat("record ", index, " of ", reader.path()));
    return view;
  }
  if (impl_->remote != nullptr) return GetRemote(index, stored, binding);
  const internal::SharedEnv& env = *impl_->env;
  auto name = [&] { return RecordName(index, reader.path()); };
  // Poisoned by an earlier bus error: its pages may be zeros now, never to be read as records.
  DDPIO_RETURN_IF_ERROR(internal::CheckMapped(env, name));
  if (impl_->reset) {
    DDPIO_RETURN_IF_ERROR(impl_->txn.Renew("renewing read transaction"));
    impl_->reset = false;
  }
  IndexKey key = EncodeIndexKey(index);
  MDB_val k = ToVal(key.data(), key.size()), v;
  const int rc = mdb_get(impl_->txn.get(), env.samples, &k, &v);
  absl::Status st;
  RecordView view;
  if (rc == MDB_NOTFOUND) {
    st = absl::DataLossError(absl::StrCat("record ", index, " (key ", IndexKeyHex(index),
                                          ") is missing from ", reader.path()));
  } else if (rc != MDB_SUCCESS) {
    st = LmdbError(rc, absl::StrCat("reading ", name()));
  } else {
    st = internal::CheckInsideMap(env, v, name());
    if (st.ok()) {
      if (stored != nullptr) *stored = internal::FromVal(v);
      RecordBinding bound = reader.binding_;
      bound.key = index;
      if (binding != nullptr) *binding = bound;
      // With verify, the CRC reads every byte; in a format-3 dataset it also proves the record is
      // this key's of this file.
      st = DecodeRecord(internal::FromVal(v), impl_->verify, &view, &bound);
      if (!st.ok()) st = Annotate(st, name());
    }
  }
  // After LMDB walked its pages and the checksum read the record: a page that faulted read as
  // zeros, and whatever LMDB or the decoder made of them (MDB_CORRUPTED, a missing key, a bad
  // checksum, or a record) gives way to the fault.
  DDPIO_RETURN_IF_ERROR(internal::CheckMapped(env, name));
  if (!st.ok()) return st;
  return view;
}

absl::StatusOr<RecordView> ReadTxn::GetRemote(uint64_t index, absl::Span<const uint8_t>* stored,
                                              RecordBinding* binding) {
  remote::RemoteDataset& remote = *impl_->remote;
  const std::string& path = impl_->reader->path();
  RecordBinding bound = remote.Binding(index);
  if (binding != nullptr) *binding = bound;
  auto bytes_of = [](const std::string& b) {
    return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  };
  absl::StatusOr<std::shared_ptr<const std::string>> bytes = remote.Fetch(index);
  if (!bytes.ok()) return Annotate(bytes.status(), RecordName(index, path));
  RecordView view;
  // Always checked, whatever ReaderOptions::verify_checksums says: these bytes crossed a network
  // or lay in a cache folder anyone may write, and a CRC costs little next to either.
  absl::Status st = DecodeRecord(bytes_of(**bytes), /*verify=*/true, &view, &bound);
  if (!st.ok()) {
    // A cached copy or the transfer may be at fault, not the stored record: from the store once
    // more, every cached copy dropped.
    bytes = remote.Refetch(index);
    if (!bytes.ok()) return Annotate(bytes.status(), RecordName(index, path));
    st = DecodeRecord(bytes_of(**bytes), true, &view, &bound);
    if (!st.ok()) {
      return Annotate(st, absl::StrCat(RecordName(index, path), ", as stored at ",
                                       remote.Where(index), " (fetched twice)"));
    }
  }
  if (!st.ok()) return Annotate(st, RecordName(index, path));
  if (stored != nullptr) *stored = bytes_of(**bytes);
  impl_->held.push_back(*std::move(bytes));
  return view;
}

absl::StatusOr<remote::RecordLocation> ReadTxn::Locate(uint64_t index, RecordBinding* binding,
                                                       absl::Span<const uint8_t>* stored_out) {
  if (impl_ == nullptr) return absl::FailedPreconditionError("Locate on a moved-from ReadTxn");
  const DatasetReader& reader = *impl_->reader;
  if (impl_->remote != nullptr) {
    return absl::UnimplementedError(absl::StrCat(reader.path(),
                                                 " is in an object store: its records are located "
                                                 "by its own index"));
  }
  if (!impl_->shards.empty()) {
    if (index >= reader.size()) return Get(index).status();  // the range error
    size_t k = 0;
    uint64_t local = 0;
    DDPIO_ASSIGN_OR_RETURN(ReadTxn * shard, reader.ShardTxn(*impl_, index, &k, &local));
    absl::StatusOr<remote::RecordLocation> where = shard->Locate(local, binding, stored_out);
    if (!where.ok())
      return Annotate(where.status(), absl::StrCat("record ", index, " of ", reader.path()));
    where->file = static_cast<uint32_t>(k);
    return where;
  }
  absl::Span<const uint8_t> stored;
  DDPIO_RETURN_IF_ERROR(Get(index, &stored, binding).status());
  const auto* base = reinterpret_cast<const uint8_t*>(impl_->env->map_begin);
  if (stored.data() < base ||
      static_cast<uint64_t>(stored.data() - base) + stored.size() > reader.file_bytes()) {
    return absl::DataLossError(
        absl::StrCat(RecordName(index, reader.path()), " lies outside its file"));
  }
  remote::RecordLocation where;
  where.offset = static_cast<uint64_t>(stored.data() - base);
  where.length = static_cast<uint32_t>(stored.size());
  if (stored_out != nullptr) *stored_out = stored;
  return where;
}

absl::Status ReadTxn::CheckMapped() const {
  if (impl_ == nullptr) return absl::OkStatus();          // nothing read, nothing to check
  if (impl_->remote != nullptr) return absl::OkStatus();  // nothing mapped
  if (!impl_->shards.empty()) {
    for (size_t k : impl_->touched) DDPIO_RETURN_IF_ERROR(impl_->shards[k]->CheckMapped());
    return absl::OkStatus();
  }
  return internal::CheckMapped(*impl_->env, [] { return std::string(); });
}

absl::StatusOr<uint64_t> ReadTxn::Prefetch(absl::Span<const uint64_t> indices) {
  if (impl_ == nullptr) return absl::FailedPreconditionError("Prefetch on a moved-from ReadTxn");
  const DatasetReader& reader = *impl_->reader;
  if (!impl_->shards.empty()) return PrefetchShards(indices);
  if (impl_->remote != nullptr) {
    for (uint64_t index : indices) {
      if (index >= reader.size()) {
        return absl::InvalidArgumentError(absl::StrCat("record index ", index, " out of range [0, ",
                                                       reader.size(), ") of ", reader.path()));
      }
    }
    return impl_->remote->Prefetch(indices);
  }
  const internal::SharedEnv& env = *impl_->env;
  auto name = [&] { return absl::StrCat("prefetching records of ", reader.path()); };
  DDPIO_RETURN_IF_ERROR(internal::CheckMapped(env, name));
  if (impl_->reset) {
    DDPIO_RETURN_IF_ERROR(impl_->txn.Renew("renewing read transaction"));
    impl_->reset = false;
  }
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // [begin, end) page-aligned
  ranges.reserve(indices.size());
  for (uint64_t index : indices) {
    if (index >= reader.size()) {
      return absl::InvalidArgumentError(absl::StrCat("record index ", index, " out of range [0, ",
                                                     reader.size(), ") of ", reader.path()));
    }
    IndexKey key = EncodeIndexKey(index);
    MDB_val k = ToVal(key.data(), key.size()), v;
    if (mdb_get(impl_->txn.get(), impl_->env->samples, &k, &v) != MDB_SUCCESS) continue;
    if (!internal::CheckInsideMap(*impl_->env, v, "").ok()) continue;  // Get reports it
    const uintptr_t begin = reinterpret_cast<uintptr_t>(v.mv_data);
    ranges.emplace_back(begin & ~(page - 1), (begin + v.mv_size + page - 1) & ~(page - 1));
  }
  // LMDB walked the tree's pages for every key: one that faulted read as zeros.
  DDPIO_RETURN_IF_ERROR(internal::CheckMapped(env, name));
  std::sort(ranges.begin(), ranges.end());
  uint64_t hinted = 0;
  for (size_t i = 0; i < ranges.size();) {
    auto [begin, end] = ranges[i];
    for (++i; i < ranges.size() && ranges[i].first <= end; ++i)
      end = std::max(end, ranges[i].second);
    // Advice only: a failure costs speed, never correctness, so it is not an error.
    if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED) == 0)
      hinted += end - begin;
  }
  return hinted;
}

absl::StatusOr<uint64_t> ReadTxn::PrefetchShards(absl::Span<const uint64_t> indices) {
  const DatasetReader& reader = *impl_->reader;
  std::vector<std::vector<uint64_t>> per_shard(impl_->shards.size());
  for (uint64_t index : indices) {
    if (index >= reader.size()) {
      return absl::InvalidArgumentError(absl::StrCat("record index ", index, " out of range [0, ",
                                                     reader.size(), ") of ", reader.path()));
    }
    size_t shard = 0;
    uint64_t local = 0;
    DDPIO_RETURN_IF_ERROR(reader.ShardTxn(*impl_, index, &shard, &local).status());
    per_shard[shard].push_back(local);
  }
  uint64_t hinted = 0;
  for (size_t k = 0; k < per_shard.size(); ++k) {
    if (per_shard[k].empty()) continue;
    DDPIO_ASSIGN_OR_RETURN(uint64_t h, impl_->shards[k]->Prefetch(per_shard[k]));
    hinted += h;
  }
  return hinted;
}

// ---------------------------------------------------------------------------------------------

DatasetReader::~DatasetReader() = default;

bool DatasetReader::no_lock() const {
  if (remote_ != nullptr) return false;
  return shards_.empty() ? (env_->flags & MDB_NOLOCK) != 0 : shards_[0]->no_lock();
}

std::vector<DatasetReader::DataFile> DatasetReader::data_files() const {
  if (remote_ != nullptr) {
    std::vector<DataFile> files;
    for (const remote::RemoteFile& f : remote_->manifest().files)
      files.push_back({path_ + "/" + f.object, f.bytes});
    return files;
  }
  if (shards_.empty()) return {{data_file_, file_bytes_}};
  std::vector<DataFile> files;
  for (const auto& shard : shards_) files.push_back({shard->data_file_, shard->file_bytes_});
  return files;
}

absl::StatusOr<std::unique_ptr<DatasetReader>> DatasetReader::Open(const std::string& path,
                                                                   const ReaderOptions& options) {
  if (s3::IsS3Url(path)) return OpenRemote(path, options);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
      ::stat((path + "/" + kShardManifest).c_str(), &st) == 0) {
    return OpenSharded(path, options);
  }
  auto reader = std::unique_ptr<DatasetReader>(new DatasetReader());
  reader->path_ = path;
  reader->options_ = options;
  DDPIO_ASSIGN_OR_RETURN(reader->env_, OpenShared(path, options));
  reader->data_file_ = S_ISDIR(st.st_mode) ? path + "/data.mdb" : path;
  MDB_envinfo info;
  mdb_env_info(reader->env_->env.get(), &info);
  MDB_stat env_stat;
  mdb_env_stat(reader->env_->env.get(), &env_stat);
  reader->file_bytes_ = static_cast<uint64_t>(info.me_last_pgno + 1) * env_stat.ms_psize;

  Txn txn;
  DDPIO_RETURN_IF_ERROR(
      txn.Begin(reader->env_->env.get(), MDB_RDONLY, absl::StrCat("opening ", path)));
  DDPIO_ASSIGN_OR_RETURN(auto header_text, GetMeta(*reader->env_, txn.get(), kDatasetKey));
  if (!header_text.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " has no dataset metadata: not a ddpio dataset"));
  }
  auto header = DecodeHeader(*header_text);
  if (!header.ok()) return Annotate(header.status(), path);
  reader->header_ = std::move(header).value();
  reader->binding_.salt = RecordSalt(reader->header_);
  reader->binding_.required = RecordsBound(reader->header_);
  DDPIO_ASSIGN_OR_RETURN(auto complete_text, GetMeta(*reader->env_, txn.get(), kCompleteKey));
  if (!complete_text.has_value()) {
    return WithSetting(absl::FailedPreconditionError(absl::StrCat(
                           "dataset ", path,
                           " is incomplete: its conversion was interrupted or is still running "
                           "(resume the conversion, from the same source, to finish it)")),
                       "resume_conversion");
  }
  auto completion = DecodeCompletion(*complete_text);
  if (!completion.ok()) return Annotate(completion.status(), path);
  reader->completion_ = *completion;
  MDB_stat ms;
  const int rc = mdb_stat(txn.get(), reader->env_->samples, &ms);
  DDPIO_RETURN_IF_ERROR(
      internal::CheckMapped(*reader->env_, [&] { return absl::StrCat("opening ", path); }));
  DDPIO_RETURN_IF_ERROR(LmdbError(rc, "mdb_stat"));
  if (ms.ms_entries != reader->completion_.sample_count) {
    return absl::DataLossError(absl::StrCat("dataset ", path, " holds ", ms.ms_entries,
                                            " records but its completion marker says ",
                                            reader->completion_.sample_count));
  }
  return reader;
}

namespace {

// What the environment and the reader's options make of the remote options: the cache, request
// shaping and memory (for every program and the Python package without a flag of their own), how
// long a failing store is retried, and the bound a job's timeout puts on it.
// The store `options` name, else the environment's.
absl::StatusOr<s3::S3Config> StoreFor(const ReaderOptions& options, const Environment& env) {
  if (options.store.has_value()) return *options.store;
  return s3::S3ConfigFromEnvironment(env);
}

absl::StatusOr<remote::RemoteOptions> RemoteOptionsFor(const ReaderOptions& options,
                                                       const Environment& env) {
  remote::RemoteOptions ro = options.remote;
  if (ro.cache_dir.empty()) ro.cache_dir = EnvValue(env, "DDPIO_S3_CACHE_DIR");
  if (const std::string gib = EnvValue(env, "DDPIO_S3_CACHE_GB"); !gib.empty()) {
    double v = 0;
    if (!absl::SimpleAtod(gib, &v) || !(v > 0) || v > 1e6) {
      return absl::InvalidArgumentError(
          absl::StrCat("DDPIO_S3_CACHE_GB=", gib, " is not a size in GiB (> 0)"));
    }
    ro.cache_bytes = static_cast<uint64_t>(v * (1 << 30));
  }
  if (const std::string kib = EnvValue(env, "DDPIO_S3_COALESCE_KB"); !kib.empty()) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(kib, &v) || v > (uint64_t{1} << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("DDPIO_S3_COALESCE_KB=", kib, " is not a size in KiB"));
    }
    ro.coalesce_gap = v << 10;
  }
  if (const std::string mib = EnvValue(env, "DDPIO_S3_MEMORY_MB"); !mib.empty()) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(mib, &v) || v < 1 || v > (uint64_t{1} << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat("DDPIO_S3_MEMORY_MB=", mib,
                       " is not a size in MiB (1 or more): the fetched records "
                       "a process holds in memory"));
    }
    ro.memory_bytes = v << 20;
  }
  if (const std::string s = EnvValue(env, "DDPIO_S3_OUTAGE_SECONDS"); !s.empty()) {
    double v = 0;
    if (!absl::SimpleAtod(s, &v) || !(v > 0) || v > 7 * 86400) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DDPIO_S3_OUTAGE_SECONDS=", s,
          " is not a number of seconds (> 0, at most a week): how long reads retry a failing "
          "object store before the job fails"));
    }
    ro.retry.give_up_after = std::chrono::milliseconds(static_cast<int64_t>(v * 1000));
  }
  if (options.store_deadline.count() > 0) {
    const auto bound = [&](std::chrono::milliseconds& d) {
      if (d.count() == 0 || d > options.store_deadline) d = options.store_deadline;
    };
    bound(ro.retry.give_up_after);
    bound(ro.retry.attempt_timeout);
  }
  return ro;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatasetReader>> DatasetReader::OpenRemote(
    const std::string& url, const ReaderOptions& options) {
  const Environment env = CurrentEnvironment();
  DDPIO_ASSIGN_OR_RETURN(s3::S3Config config, StoreFor(options, env));
  DDPIO_ASSIGN_OR_RETURN(remote::RemoteOptions ro, RemoteOptionsFor(options, env));
  auto reader = std::unique_ptr<DatasetReader>(new DatasetReader());
  DDPIO_ASSIGN_OR_RETURN(reader->remote_, remote::RemoteDataset::Open(url, config, ro));
  reader->path_ = reader->remote_->url();
  reader->options_ = options;
  reader->header_ = reader->remote_->manifest().header;
  reader->completion_ = reader->remote_->manifest().completion;
  for (const remote::RemoteFile& f : reader->remote_->manifest().files)
    reader->file_bytes_ += f.bytes;
  return reader;
}

absl::StatusOr<DatasetReader::Summary> DatasetReader::Peek(const std::string& path,
                                                           const ReaderOptions& options) {
  if (s3::IsS3Url(path)) {
    const Environment env = CurrentEnvironment();
    DDPIO_ASSIGN_OR_RETURN(s3::S3Config config, StoreFor(options, env));
    DDPIO_ASSIGN_OR_RETURN(remote::RemoteOptions ro, RemoteOptionsFor(options, env));
    remote::RemoteCounters counters;
    DDPIO_ASSIGN_OR_RETURN(remote::RemoteManifest m,
                           remote::RemoteDataset::ReadManifest(path, config, ro, &counters));
    return Summary{std::move(m.header), m.completion, counters};
  }
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<DatasetReader> reader, Open(path, options));
  return Summary{reader->header(), reader->completion(), std::nullopt};
}

absl::StatusOr<ReadTxn> DatasetReader::BeginRead() const {
  auto impl = std::make_unique<ReadTxn::Impl>();
  impl->reader = this;
  if (remote_ != nullptr) {
    impl->remote = remote_;
    impl->verify = options_.verify_checksums;
    return ReadTxn(std::move(impl));
  }
  if (!shards_.empty()) {
    impl->shards.resize(shards_.size());
    return ReadTxn(std::move(impl));
  }
  impl->env = env_;
  impl->verify = options_.verify_checksums;
  DDPIO_RETURN_IF_ERROR(
      impl->txn.Begin(env_->env.get(), MDB_RDONLY, absl::StrCat("reading ", path_)));
  return ReadTxn(std::move(impl));
}

absl::StatusOr<Record> DatasetReader::ReadCopy(uint64_t index) const {
  DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, BeginRead());
  DDPIO_ASSIGN_OR_RETURN(RecordView view, txn.Get(index));
  Record copy = Record::FromView(view);
  // The copy read the map again: a page lost since Get verified it read as zeros.
  absl::Status mapped = txn.CheckMapped();
  if (!mapped.ok()) return Annotate(mapped, RecordName(index, path_));
  return copy;
}

}  // namespace ddpio::storage
