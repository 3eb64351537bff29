#include "ddpio/storage/lmdb_file.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/internal/lmdb_check.h"
#include "ddpio/storage/internal/lmdb_util.h"

namespace ddpio::storage {

using internal::FromVal;
using internal::LmdbError;
using internal::ToVal;

struct LmdbFile::Env {
  internal::EnvPtr env;
  MDB_dbi dbi = 0;
};

LmdbFile::LmdbFile(std::string path, std::unique_ptr<Env> env)
    : path_(std::move(path)), env_(std::move(env)) {}
LmdbFile::~LmdbFile() = default;

namespace {

absl::StatusOr<internal::EnvPtr> OpenEnv(const std::string& path, unsigned flags, int* rc) {
  MDB_env* raw = nullptr;
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_create(&raw), "mdb_env_create"));
  internal::EnvPtr env(raw);
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_set_maxdbs(raw, 8), "mdb_env_set_maxdbs"));
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_set_maxreaders(raw, 1024), "mdb_env_set_maxreaders"));
  *rc = mdb_env_open(raw, path.c_str(), flags, 0444);
  if (*rc != MDB_SUCCESS) return LmdbError(*rc, absl::StrCat("opening LMDB ", path));
  return env;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LmdbFile>> LmdbFile::Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoToStatus(errno, absl::StrCat("LMDB ", path));
  unsigned flags = MDB_RDONLY | MDB_NOTLS;
  std::string data_file = path;
  if (S_ISDIR(st.st_mode)) {
    data_file = path + "/data.mdb";
    if (::stat(data_file.c_str(), &st) != 0) {
      return absl::NotFoundError(
          absl::StrCat(path, " is a directory without data.mdb: not an LMDB"));
    }
  } else {
    flags |= MDB_NOSUBDIR;
  }
  DDPIO_RETURN_IF_ERROR(internal::CheckLmdbFile(data_file).status());
  int rc = 0;
  auto env = OpenEnv(path, flags, &rc);
  if (!env.ok() && (rc == EACCES || rc == EROFS || rc == EPERM))
    env = OpenEnv(path, flags | MDB_NOLOCK, &rc);
  if (!env.ok()) return env.status();
  auto state = std::make_unique<Env>();
  state->env = std::move(env).value();
  internal::Txn txn;
  DDPIO_RETURN_IF_ERROR(txn.Begin(state->env.get(), MDB_RDONLY, absl::StrCat("opening ", path)));
  DDPIO_RETURN_IF_ERROR(
      LmdbError(mdb_dbi_open(txn.get(), nullptr, 0, &state->dbi), absl::StrCat("opening ", path)));
  return std::unique_ptr<LmdbFile>(new LmdbFile(path, std::move(state)));
}

absl::Status LmdbFile::ForEach(const Visitor& fn) const {
  internal::Txn txn;
  DDPIO_RETURN_IF_ERROR(txn.Begin(env_->env.get(), MDB_RDONLY, absl::StrCat("reading ", path_)));
  MDB_cursor* cursor = nullptr;
  DDPIO_RETURN_IF_ERROR(
      LmdbError(mdb_cursor_open(txn.get(), env_->dbi, &cursor), absl::StrCat("reading ", path_)));
  std::unique_ptr<MDB_cursor, void (*)(MDB_cursor*)> close(cursor, mdb_cursor_close);
  MDB_val k, v;
  for (int rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST);;
       rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
    if (rc == MDB_NOTFOUND) return absl::OkStatus();
    DDPIO_RETURN_IF_ERROR(LmdbError(rc, absl::StrCat("reading ", path_)));
    DDPIO_RETURN_IF_ERROR(
        fn(std::string_view(static_cast<const char*>(k.mv_data), k.mv_size), FromVal(v)));
  }
}

absl::Status LmdbFile::Get(std::string_view key, const Visitor& fn) const {
  internal::Txn txn;
  DDPIO_RETURN_IF_ERROR(txn.Begin(env_->env.get(), MDB_RDONLY, absl::StrCat("reading ", path_)));
  MDB_val k = ToVal(key.data(), key.size()), v;
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_get(txn.get(), env_->dbi, &k, &v),
                                  absl::StrCat("key '", std::string(key), "' of ", path_)));
  return fn(key, FromVal(v));
}

}  // namespace ddpio::storage
