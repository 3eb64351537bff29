#include "ddpio/storage/internal/lmdb_env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/internal/lmdb_check.h"

namespace ddpio::storage::internal {

namespace {

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

// The process is part of the key: a child of fork (a PyTorch DataLoader worker) inherits this
// table, and LMDB forbids using an environment opened before fork, so the child opens its own.
using EnvKey = std::tuple<pid_t, dev_t, ino_t>;

// std::mutex, not absl::Mutex: Debian's Abseil is not TSan-instrumented (see
// common/ordered_parallel_map.h).
std::mutex g_envs_mu;
// Guarded by g_envs_mu.
std::map<EnvKey, std::weak_ptr<SharedEnv>>& Envs() {
  static auto* envs = new std::map<EnvKey, std::weak_ptr<SharedEnv>>();
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

// The data file of the dataset at `path` (the file, or a directory's data.mdb) with its stat in
// *st; adds MDB_NOSUBDIR to *flags for a file.
absl::StatusOr<std::string> FindDataFile(const std::string& path, struct stat* st,
                                         unsigned* flags) {
  if (::stat(path.c_str(), st) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("dataset ", path));
  }
  if (!S_ISDIR(st->st_mode)) {
    *flags |= MDB_NOSUBDIR;
    return path;
  }
  std::string data_file = path + "/data.mdb";
  if (::stat(data_file.c_str(), st) != 0) {
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
  return data_file;
}

absl::StatusOr<EnvPtr> OpenEnvWithFlags(const std::string& path, unsigned flags,
                                        unsigned max_readers, int* rc_out) {
  MDB_env* raw = nullptr;
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_create(&raw), "mdb_env_create"));
  EnvPtr env(raw);
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_set_maxdbs(raw, 4), "mdb_env_set_maxdbs"));
  DDPIO_RETURN_IF_ERROR(
      LmdbError(mdb_env_set_maxreaders(raw, max_readers), "mdb_env_set_maxreaders"));
  *rc_out = mdb_env_open(raw, path.c_str(), flags, 0444);
  if (*rc_out != MDB_SUCCESS) return LmdbError(*rc_out, absl::StrCat("opening dataset ", path));
  return env;
}

// Opens the environment with *flags; under Locking::kAuto, without LMDB's lock (added to *flags)
// where the lock file cannot be written.
absl::StatusOr<EnvPtr> OpenEnv(const std::string& path, const ReaderOptions& options,
                               unsigned* flags) {
  int rc = 0;
  auto env = OpenEnvWithFlags(path, *flags, options.max_readers, &rc);
  if (!env.ok() && options.locking == ReaderOptions::Locking::kAuto &&
      (rc == EACCES || rc == EROFS || rc == EPERM)) {
    *flags |= MDB_NOLOCK;
    env = OpenEnvWithFlags(path, *flags, options.max_readers, &rc);
    if (env.ok()) {
      DDPIO_LOG(INFO) << "dataset " << path
                      << ": lock file not writable (read-only location); reading without "
                         "LMDB locking, which is safe for a complete dataset";
    }
  }
  return env;
}

// The file as it was opened: the one LMDB opened, should the data file have changed since `st`
// was taken.
void RecordOpenedFile(SharedEnv* shared, const struct stat& st) {
  shared->opened_dev = st.st_dev;
  shared->opened_ino = st.st_ino;
  shared->opened_bytes = static_cast<uint64_t>(st.st_size);
  int fd = -1;
  struct stat mapped_file;
  if (mdb_env_get_fd(shared->env.get(), &fd) == MDB_SUCCESS && ::fstat(fd, &mapped_file) == 0) {
    shared->opened_dev = mapped_file.st_dev;
    shared->opened_ino = mapped_file.st_ino;
    shared->opened_bytes = static_cast<uint64_t>(mapped_file.st_size);
  }
}

// Where LMDB mapped the file — the one map of it not among `maps_before` — guarded, and bounded
// by the layout's needed bytes: every value LMDB hands out must lie in them.
void GuardMap(SharedEnv* shared, const std::vector<std::pair<const void*, size_t>>& maps_before,
              const struct stat& st, const LmdbLayout& layout, const std::string& path) {
  const void* map = nullptr;
  size_t mapped = 0;
  int new_maps = 0;
  for (const auto& [base, bytes] : FileMappings(st.st_dev, st.st_ino)) {
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
    shared->fault = GuardMappedRegion(map, mapped, shared->data_file);
  } else {
    DDPIO_LOG(WARNING) << "dataset " << path << ": "
                       << (new_maps == 0 ? "cannot find its memory map in /proc/self/maps"
                                         : "more than one new memory map of it in /proc/self/maps")
                       << "; reading it without the bounds and bus-error guards";
  }
}

// Opens the samples and meta databases: FailedPrecondition for an LMDB database without them.
absl::Status OpenDatabases(SharedEnv* shared, const std::string& path) {
  Txn txn;
  DDPIO_RETURN_IF_ERROR(txn.Begin(shared->env.get(), MDB_RDONLY, absl::StrCat("opening ", path)));
  for (auto [name, dbi] :
       {std::pair{kSamplesDb, &shared->samples}, std::pair{kMetaDb, &shared->meta}}) {
    int drc = mdb_dbi_open(txn.get(), name, 0, dbi);
    DDPIO_RETURN_IF_ERROR(CheckMapped(*shared, [&] { return absl::StrCat("opening ", path); }));
    if (drc == MDB_NOTFOUND) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is an LMDB database but not a ddpio dataset (no '", name,
                       "' database; convert the source with `ddpio convert`)"));
    }
    DDPIO_RETURN_IF_ERROR(LmdbError(drc, absl::StrCat("opening database '", name, "' in ", path)));
  }
  // Committing a read-only transaction makes its DBI handles usable by later transactions.
  return txn.Commit(absl::StrCat("opening ", path));
}

}  // namespace

absl::Status MapFaultError(const SharedEnv& env, uint64_t offset, const std::string& what) {
  std::call_once(env.cause_once, [&] { env.cause = MapFaultCause(env, offset); });
  return absl::DataLossError(
      absl::StrCat(what, what.empty() ? "" : ": ", "dataset file ", env.data_file,
                   " became unreadable while mapped (bus error at byte ", offset, "): ", env.cause,
                   ". Every later read of it in this process fails too; check the file (`ddpio "
                   "inspect --verify` checks every "
                   "record), restore it and restart"));
}

absl::Status CheckInsideMap(const SharedEnv& env, const MDB_val& v, const std::string& what) {
  if (env.map_begin == 0) return absl::OkStatus();  // unknown map: unguarded (logged at open)
  const uintptr_t p = reinterpret_cast<uintptr_t>(v.mv_data);
  if (p < env.map_begin || p > env.map_end || v.mv_size > env.map_end - p) {
    return absl::DataLossError(absl::StrCat(what, " points outside the file (", v.mv_size,
                                            " bytes): the dataset is structurally corrupt"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> GetMeta(const SharedEnv& env, MDB_txn* txn,
                                                   const char* key) {
  MDB_val k = ToVal(key, std::strlen(key)), v;
  const int rc = mdb_get(txn, env.meta, &k, &v);
  absl::Status st;
  std::optional<std::string> value;
  if (rc != MDB_NOTFOUND) {
    st = LmdbError(rc, absl::StrCat("reading metadata '", key, "'"));
    if (st.ok()) st = CheckInsideMap(env, v, absl::StrCat("metadata '", key, "'"));
    if (st.ok()) value.emplace(static_cast<const char*>(v.mv_data), v.mv_size);
  }
  // A fault while LMDB looked or the value was copied: zeros, whatever LMDB made of them.
  DDPIO_RETURN_IF_ERROR(
      CheckMapped(env, [&] { return absl::StrCat("reading metadata '", key, "'"); }));
  if (!st.ok()) return st;
  return value;
}

absl::StatusOr<std::shared_ptr<SharedEnv>> OpenSharedEnv(const std::string& path,
                                                         const ReaderOptions& options) {
  struct stat st;
  unsigned flags = MDB_RDONLY | MDB_NOTLS;
  DDPIO_ASSIGN_OR_RETURN(std::string data_file, FindDataFile(path, &st, &flags));
  if (!options.readahead) flags |= MDB_NORDAHEAD;
  if (options.locking == ReaderOptions::Locking::kNoLock) flags |= MDB_NOLOCK;
  // What LMDB takes on trust: a file cut short would kill every reader with SIGBUS, a damaged
  // meta page could crash inside liblmdb.
  DDPIO_ASSIGN_OR_RETURN(LmdbLayout layout, CheckLmdbFile(data_file));

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
    DDPIO_RETURN_IF_ERROR(CheckMapped(*existing, [&] { return absl::StrCat("opening ", path); }));
    return existing;
  }
  auto shared = std::make_shared<SharedEnv>();
  // The file's maps before LMDB makes its own: LMDB's is the one that is new (a child of fork
  // also has its parent's, which LMDB's pointers never point into).
  const auto maps_before = FileMappings(st.st_dev, st.st_ino);
  DDPIO_ASSIGN_OR_RETURN(shared->env, OpenEnv(path, options, &flags));
  shared->flags = flags;
  shared->data_file = data_file;
  RecordOpenedFile(shared.get(), st);
  GuardMap(shared.get(), maps_before, st, layout, path);
  DDPIO_RETURN_IF_ERROR(OpenDatabases(shared.get(), path));
  Envs()[key] = shared;
  return shared;
}

}  // namespace ddpio::storage::internal
