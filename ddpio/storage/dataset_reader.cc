#include "ddpio/storage/dataset_reader.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/internal/lmdb_check.h"
#include "ddpio/storage/internal/lmdb_util.h"
#include "ddpio/storage/internal/map_guard.h"

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
  EnvPtr env;
  MDB_dbi samples = 0;
  MDB_dbi meta = 0;
  unsigned flags = 0;
  // The file's bytes in the memory map: every value LMDB hands out must lie inside them (a
  // damaged page can point anywhere; checked before a byte of it is read).
  uintptr_t map_begin = 0, map_end = 0;
};

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

absl::StatusOr<internal::EnvPtr> OpenEnvWithFlags(const std::string& path, unsigned flags,
                                                  unsigned max_readers, int* rc_out) {
  MDB_env* raw = nullptr;
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_create(&raw), "mdb_env_create"));
  internal::EnvPtr env(raw);
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_set_maxdbs(raw, 4), "mdb_env_set_maxdbs"));
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_set_maxreaders(raw, max_readers), "mdb_env_set_maxreaders"));
  *rc_out = mdb_env_open(raw, path.c_str(), flags, 0444);
  if (*rc_out != MDB_SUCCESS) return LmdbError(*rc_out, absl::StrCat("opening dataset ", path));
  return env;
}

absl::StatusOr<std::optional<std::string>> GetMeta(const internal::SharedEnv& env, MDB_txn* txn,
                                                   const char* key) {
  MDB_val k = ToVal(key, std::strlen(key)), v;
  int rc = mdb_get(txn, env.meta, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<std::string>();
  DDPIO_RETURN_IF_ERROR(LmdbError(rc, absl::StrCat("reading metadata '", key, "'")));
  DDPIO_RETURN_IF_ERROR(internal::CheckInsideMap(env, v, absl::StrCat("metadata '", key, "'")));
  return std::optional<std::string>(std::string(static_cast<const char*>(v.mv_data), v.mv_size));
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
          "dataset ", path, " is already open in this process with other reader options "
          "(LMDB allows one environment per process; open it once and share the reader)"));
    }
    return existing;
  }
  auto shared = std::make_shared<internal::SharedEnv>();
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
  // Where LMDB mapped the file: every value it hands out must lie in its first needed_bytes.
  const void* map = nullptr;
  size_t mapped = 0;
  if (internal::FindFileMapping(st.st_dev, st.st_ino, &map, &mapped)) {
    shared->map_begin = reinterpret_cast<uintptr_t>(map);
    shared->map_end = shared->map_begin + std::min<uint64_t>(layout.needed_bytes, mapped);
    internal::GuardMappedRegion(map, mapped, data_file);
  } else {
    DDPIO_LOG(WARNING) << "dataset " << path << ": cannot find its memory map in /proc/self/maps; reading it "
                       << "without the bounds and bus-error guards";
  }

  Txn txn;
  DDPIO_RETURN_IF_ERROR(txn.Begin(shared->env.get(), MDB_RDONLY, absl::StrCat("opening ", path)));
  for (auto [name, dbi] : {std::pair{kSamplesDb, &shared->samples}, std::pair{kMetaDb, &shared->meta}}) {
    int drc = mdb_dbi_open(txn.get(), name, 0, dbi);
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
};

ReadTxn::ReadTxn(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ReadTxn::ReadTxn(ReadTxn&&) noexcept = default;
ReadTxn& ReadTxn::operator=(ReadTxn&&) noexcept = default;
ReadTxn::~ReadTxn() = default;

void ReadTxn::Reset() {
  if (impl_ != nullptr && !impl_->reset) {
    impl_->txn.Reset();
    impl_->reset = true;
  }
}

absl::StatusOr<RecordView> ReadTxn::Get(uint64_t index, absl::Span<const uint8_t>* stored) {
  if (impl_ == nullptr) return absl::FailedPreconditionError("Get on a moved-from ReadTxn");
  const DatasetReader& reader = *impl_->reader;
  if (index >= reader.size()) {
    return absl::InvalidArgumentError(absl::StrCat("record index ", index, " out of range [0, ",
                                                   reader.size(), ") of ", reader.path()));
  }
  if (impl_->reset) {
    DDPIO_RETURN_IF_ERROR(impl_->txn.Renew("renewing read transaction"));
    impl_->reset = false;
  }
  IndexKey key = EncodeIndexKey(index);
  MDB_val k = ToVal(key.data(), key.size()), v;
  int rc = mdb_get(impl_->txn.get(), impl_->env->samples, &k, &v);
  if (rc == MDB_NOTFOUND) {
    return absl::DataLossError(absl::StrCat("record ", index, " (key ", IndexKeyHex(index),
                                            ") is missing from ", reader.path()));
  }
  DDPIO_RETURN_IF_ERROR(LmdbError(rc, absl::StrCat("reading record ", index, " (key ",
                                                   IndexKeyHex(index), ") of ", reader.path())));
  DDPIO_RETURN_IF_ERROR(internal::CheckInsideMap(
      *impl_->env, v, absl::StrCat("record ", index, " (key ", IndexKeyHex(index), ") of ", reader.path())));
  RecordView view;
  if (stored != nullptr) *stored = internal::FromVal(v);
  absl::Status decoded = DecodeRecord(internal::FromVal(v), impl_->verify, &view);
  if (!decoded.ok()) {
    return Annotate(decoded, absl::StrCat("record ", index, " (key ", IndexKeyHex(index), ") of ",
                                          reader.path()));
  }
  return view;
}

absl::StatusOr<uint64_t> ReadTxn::Prefetch(absl::Span<const uint64_t> indices) {
  if (impl_ == nullptr) return absl::FailedPreconditionError("Prefetch on a moved-from ReadTxn");
  const DatasetReader& reader = *impl_->reader;
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
  std::sort(ranges.begin(), ranges.end());
  uint64_t hinted = 0;
  for (size_t i = 0; i < ranges.size();) {
    auto [begin, end] = ranges[i];
    for (++i; i < ranges.size() && ranges[i].first <= end; ++i) end = std::max(end, ranges[i].second);
    // Advice only: a failure costs speed, never correctness, so it is not an error.
    if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED) == 0) hinted += end - begin;
  }
  return hinted;
}

// ---------------------------------------------------------------------------------------------

DatasetReader::~DatasetReader() = default;

bool DatasetReader::no_lock() const { return (env_->flags & MDB_NOLOCK) != 0; }

absl::StatusOr<std::unique_ptr<DatasetReader>> DatasetReader::Open(const std::string& path,
                                                                   const ReaderOptions& options) {
  auto reader = std::unique_ptr<DatasetReader>(new DatasetReader());
  reader->path_ = path;
  reader->options_ = options;
  DDPIO_ASSIGN_OR_RETURN(reader->env_, OpenShared(path, options));
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
  DDPIO_ASSIGN_OR_RETURN(auto complete_text, GetMeta(*reader->env_, txn.get(), kCompleteKey));
  if (!complete_text.has_value()) {
    return WithSetting(absl::FailedPreconditionError(absl::StrCat(
                           "dataset ", path, " is incomplete: its conversion was interrupted or is still running "
                           "(resume the conversion, from the same source, to finish it)")),
                       "resume_conversion");
  }
  auto completion = DecodeCompletion(*complete_text);
  if (!completion.ok()) return Annotate(completion.status(), path);
  reader->completion_ = *completion;
  MDB_stat ms;
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_stat(txn.get(), reader->env_->samples, &ms), "mdb_stat"));
  if (ms.ms_entries != reader->completion_.sample_count) {
    return absl::DataLossError(absl::StrCat("dataset ", path, " holds ", ms.ms_entries,
                                            " records but its completion marker says ",
                                            reader->completion_.sample_count));
  }
  return reader;
}

absl::StatusOr<ReadTxn> DatasetReader::BeginRead() const {
  auto impl = std::make_unique<ReadTxn::Impl>();
  impl->reader = this;
  impl->env = env_;
  impl->verify = options_.verify_checksums;
  DDPIO_RETURN_IF_ERROR(
      impl->txn.Begin(env_->env.get(), MDB_RDONLY, absl::StrCat("reading ", path_)));
  return ReadTxn(std::move(impl));
}

absl::StatusOr<Record> DatasetReader::ReadCopy(uint64_t index) const {
  DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, BeginRead());
  DDPIO_ASSIGN_OR_RETURN(RecordView view, txn.Get(index));
  return Record::FromView(view);
}

}  // namespace ddpio::storage
