#include "ddpio/storage/dataset_writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "ddpio/common/fd.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"  // kShardManifest
#include "ddpio/storage/internal/lmdb_util.h"
#include "ddpio/storage/internal/writer_progress.h"

namespace ddpio::storage {

using internal::LmdbError;
using internal::ToVal;
using internal::Txn;

namespace {
constexpr char kWriterKey[] = "writer";  // {"records": n, "payload_bytes": b} per commit

// A header this writer may store: what DecodeHeader reads back (dataset_info.h's bounds). A source
// with more classes (a folder of a million subfolders, a synset file of ten million lines) is
// refused before the dataset is created, not stored unreadable.
absl::Status CheckHeaderFits(const std::string& path, const DatasetHeader& header,
                             size_t encoded_bytes) {
  const auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create ", path, ": ", why, " (docs/FORMAT.md, `meta`)"));
  };
  if (header.classes.size() > kMaxClasses) {
    return refuse(absl::StrCat("the source has ", header.classes.size(),
                               " classes; a ddpio dataset holds at most ", kMaxClasses));
  }
  for (size_t i = 0; i < header.classes.size(); ++i) {
    if (header.classes[i].size() > kMaxClassNameBytes) {
      return refuse(absl::StrCat("class ", i, "'s name is ", header.classes[i].size(),
                                 " bytes; a class name is at most ", kMaxClassNameBytes));
    }
  }
  if (encoded_bytes > kMaxHeaderBytes) {
    return refuse(absl::StrCat("its metadata would be ", encoded_bytes,
                               " bytes (class names and source path); at most ", kMaxHeaderBytes));
  }
  return absl::OkStatus();
}
}  // namespace

struct DatasetWriter::Lmdb {
  Fd writing;  // flock'ed LMDB lock file: this process writes the dataset (declared first: released
               // last)
  internal::EnvPtr env;
  MDB_dbi samples = 0;
  MDB_dbi meta = 0;
};

DatasetWriter::DatasetWriter(std::string path, WriterOptions options, std::unique_ptr<Lmdb> lmdb)
    : path_(std::move(path)), options_(options), lmdb_(std::move(lmdb)) {}

DatasetWriter::~DatasetWriter() {
  if (!finished_ && !pending_.empty()) {
    DDPIO_LOG(WARNING) << "dataset writer for " << path_ << " closed with " << pending_.size()
                       << " uncommitted records; they are not written (resume continues after "
                       << committed_ << " records)";
  }
}

namespace {

// Free bytes on the filesystem holding `path` (its directory when it does not exist yet).
uint64_t FreeBytes(const std::string& path) {
  struct statvfs fs;
  std::string where = path;
  while (!where.empty() && ::statvfs(where.c_str(), &fs) != 0) {
    where = std::filesystem::path(where).parent_path().string();
  }
  if (where.empty()) return UINT64_MAX;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

// LMDB needs room before a byte of data is written: its lock file is mapped and written through
// the map, which on a full filesystem is a SIGBUS inside liblmdb, not an error.
constexpr uint64_t kMinFreeBytes = 1 << 20;

// LMDB reports a short write — what a full disk gives — as EIO. Say what it is when the
// filesystem is (nearly) full.
absl::Status CommitError(int rc, const std::string& path, const std::string& context) {
  const uint64_t free = FreeBytes(path);
  if ((rc == EIO || rc == ENOSPC) && free < kMinFreeBytes) {
    return WithSetting(
        absl::ResourceExhaustedError(absl::StrCat(
            context, ": no space left on the filesystem of ", path, " (", free,
            " bytes free); every earlier batch is kept: free space, then resume the conversion")),
        "resume");
  }
  return LmdbError(rc, context);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatasetWriter>> DatasetWriter::OpenEnv(const std::string& path,
                                                                      const WriterOptions& options,
                                                                      bool create) {
  namespace fs = std::filesystem;
  std::error_code ec;
  unsigned flags = options.single_file ? MDB_NOSUBDIR : 0;
  if (create) {
    fs::path target = options.single_file ? fs::path(path).parent_path() : fs::path(path);
    if (!target.empty() && !fs::create_directories(target, ec) && ec) {
      return ErrnoToStatus(ec.value(), absl::StrCat("creating directory ", target.string()));
    }
  }
  if (const uint64_t free = FreeBytes(path); free < kMinFreeBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no space left on the filesystem of ", path, " (", free,
                     " bytes free; writing a dataset needs at least ", kMinFreeBytes, ")"));
  }
  auto lmdb = std::make_unique<Lmdb>();
  MDB_env* raw = nullptr;
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_create(&raw), "mdb_env_create"));
  lmdb->env.reset(raw);
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_set_maxdbs(raw, 4), "mdb_env_set_maxdbs"));
  DDPIO_RETURN_IF_ERROR(
      LmdbError(mdb_env_set_mapsize(raw, options.initial_map_size), "mdb_env_set_mapsize"));
  DDPIO_RETURN_IF_ERROR(
      LmdbError(mdb_env_open(raw, path.c_str(), flags, 0644), absl::StrCat("opening ", path)));
  // One writer per dataset for the writer's whole life, not only per transaction (LMDB's own
  // lock): two conversions resuming one output would each append after the same committed record,
  // and the second fail on a key the first wrote. flock on LMDB's lock file is separate from LMDB's
  // fcntl locks on it; it ends with the process, so a crashed writer never leaves it behind.
  const std::string lock_file = options.single_file ? path + "-lock" : path + "/lock.mdb";
  lmdb->writing.reset(::open(lock_file.c_str(), O_RDONLY | O_CLOEXEC));
  if (lmdb->writing.valid() && ::flock(lmdb->writing.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("another process is writing ", path,
                       " (a conversion of it is running): wait for it to finish, or stop it and "
                       "resume; two writers "
                       "cannot share one dataset"));
    }
    return ErrnoToStatus(errno, absl::StrCat("locking ", lock_file));
  }
  Txn txn;
  DDPIO_RETURN_IF_ERROR(txn.Begin(raw, 0, absl::StrCat("opening ", path)));
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_dbi_open(txn.get(), kSamplesDb, MDB_CREATE, &lmdb->samples),
                                  absl::StrCat("opening database 'samples' in ", path)));
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_dbi_open(txn.get(), kMetaDb, MDB_CREATE, &lmdb->meta),
                                  absl::StrCat("opening database 'meta' in ", path)));
  DDPIO_RETURN_IF_ERROR(txn.Commit(absl::StrCat("opening ", path)));
  auto writer = std::unique_ptr<DatasetWriter>(new DatasetWriter(path, options, std::move(lmdb)));
  MDB_envinfo info;
  mdb_env_info(raw, &info);
  writer->map_size_ = info.me_mapsize;
  return writer;
}

absl::StatusOr<std::unique_ptr<DatasetWriter>> DatasetWriter::Create(const std::string& path,
                                                                     const DatasetHeader& header,
                                                                     const WriterOptions& options) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    return WithSetting(
        absl::AlreadyExistsError(absl::StrCat(path,
                                              " already exists; resume the conversion to "
                                              "continue an interrupted one, or remove it")),
        "resume");
  }
  DatasetHeader stored = header;
  if (RecordsBound(stored) && stored.id.empty()) stored.id = NewDatasetId();
  std::string encoded = EncodeHeader(stored);
  DDPIO_RETURN_IF_ERROR(CheckHeaderFits(path, stored, encoded.size()));
  DDPIO_ASSIGN_OR_RETURN(auto writer, OpenEnv(path, options, /*create=*/true));
  // The header is committed at once: an interrupted conversion can then be resumed (and is
  // recognisably a ddpio dataset) even if it never got to its first batch.
  writer->pending_meta_.emplace_back(kDatasetKey, std::move(encoded));
  writer->bound_ = RecordsBound(stored);
  writer->salt_ = RecordSalt(stored);
  DDPIO_RETURN_IF_ERROR(writer->Commit());
  return writer;
}

absl::StatusOr<std::unique_ptr<DatasetWriter>> DatasetWriter::Resume(const std::string& path,
                                                                     const DatasetHeader& header,
                                                                     const WriterOptions& options) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoToStatus(errno, absl::StrCat("resuming ", path));
  WriterOptions opts = options;
  opts.single_file = S_ISREG(st.st_mode);
  // Opening LMDB would create data.mdb: a folder without one (a sharded dataset's, or any other)
  // holds nothing this writer can continue, and must not gain an empty database.
  struct stat data;
  if (!opts.single_file && ::stat((path + "/data.mdb").c_str(), &data) != 0) {
    const bool sharded = ::stat((path + "/" + kShardManifest).c_str(), &data) == 0;
    absl::Status refused = absl::FailedPreconditionError(absl::StrCat(
        "cannot resume ", path, ": it holds no data.mdb",
        sharded ? " (it is a sharded dataset: resume it with the same number of shards)" : "",
        "; remove it and start over"));
    return sharded ? WithSetting(refused, "shards") : refused;
  }
  DDPIO_ASSIGN_OR_RETURN(auto writer, OpenEnv(path, opts, /*create=*/false));
  DDPIO_ASSIGN_OR_RETURN(auto stored, writer->GetMeta(kDatasetKey));
  DDPIO_ASSIGN_OR_RETURN(auto complete, writer->GetMeta(kCompleteKey));
  // A finished dataset made by another ddpio version from the same source is still the same
  // dataset; one from another source or with other options is not, finished or not.
  DatasetHeader same = header;
  if (stored.has_value()) {
    if (auto decoded = DecodeHeader(*stored); decoded.ok()) {
      if (complete.has_value()) same.tool_version = decoded->tool_version;
      same.id = decoded->id;  // drawn when it was created: the resumed dataset is that one
    }
  }
  if (!stored.has_value() || *stored != EncodeHeader(same)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot resume ", path, ": it was ", complete.has_value() ? "made" : "started",
        " from another source or with other options (",
        stored.has_value() ? "stored: " + *stored : "no metadata", "); remove it and start over"));
  }
  if (complete.has_value()) {
    return absl::AlreadyExistsError(absl::StrCat(path, " is already complete"));
  }
  DDPIO_ASSIGN_OR_RETURN(auto progress, writer->GetMeta(kWriterKey));
  if (progress.has_value()) {
    absl::StatusOr<internal::WriterProgress> counts = internal::ParseWriterProgress(*progress);
    if (!counts.ok()) {
      return absl::DataLossError(absl::StrCat(path, ": ", counts.status().message()));
    }
    writer->committed_ = counts->records;
    writer->committed_payload_bytes_ = counts->payload_bytes;
  }
  // Cross-check against what is really there.
  Txn txn;
  DDPIO_RETURN_IF_ERROR(txn.Begin(writer->lmdb_->env.get(), MDB_RDONLY, "resume check"));
  MDB_stat ms;
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_stat(txn.get(), writer->lmdb_->samples, &ms), "mdb_stat"));
  if (ms.ms_entries != writer->committed_) {
    return absl::DataLossError(absl::StrCat(path, " holds ", ms.ms_entries,
                                            " records but its progress entry says ",
                                            writer->committed_));
  }
  writer->bound_ = RecordsBound(same);
  writer->salt_ = RecordSalt(same);
  DDPIO_LOG(INFO) << "resuming " << path << " after " << writer->committed_ << " records";
  return writer;
}

absl::Status DatasetWriter::Append(const RecordView& record) {
  if (finished_) return absl::FailedPreconditionError("Append after Finish");
  const RecordBinding binding{salt_, record_count(), true};
  DDPIO_RETURN_IF_ERROR(EncodeRecord(record, &scratch_, bound_ ? &binding : nullptr));
  arena_.append(scratch_);
  pending_.push_back(scratch_.size());
  pending_payload_bytes_ += record.payload.size();
  return absl::OkStatus();
}

absl::Status DatasetWriter::PutMeta(std::string key, std::string value) {
  if (finished_) return absl::FailedPreconditionError("PutMeta after Finish");
  if (key == kDatasetKey || key == kCompleteKey || key == kWriterKey) {
    return absl::InvalidArgumentError(absl::StrCat("metadata key '", key, "' is reserved"));
  }
  pending_meta_.emplace_back(std::move(key), std::move(value));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> DatasetWriter::GetMeta(const std::string& key) const {
  Txn txn;
  DDPIO_RETURN_IF_ERROR(txn.Begin(lmdb_->env.get(), MDB_RDONLY, "reading metadata"));
  MDB_val k = ToVal(key.data(), key.size()), v;
  int rc = mdb_get(txn.get(), lmdb_->meta, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<std::string>();
  DDPIO_RETURN_IF_ERROR(LmdbError(rc, absl::StrCat("reading metadata '", key, "' of ", path_)));
  return std::optional<std::string>(std::string(static_cast<const char*>(v.mv_data), v.mv_size));
}

bool DatasetWriter::BatchFull() const {
  return pending_payload_bytes_ >= options_.batch_bytes ||
         pending_.size() >= options_.batch_records;
}

absl::Status DatasetWriter::Commit() {
  if (finished_) return absl::FailedPreconditionError("Commit after Finish");
  return CommitPending(std::nullopt);
}

absl::Status DatasetWriter::Finish(uint64_t skipped) {
  if (finished_) return absl::FailedPreconditionError("Finish called twice");
  DatasetCompletion completion;
  completion.sample_count = record_count();
  completion.payload_bytes = committed_payload_bytes_ + pending_payload_bytes_;
  completion.skipped = skipped;
  DDPIO_RETURN_IF_ERROR(CommitPending(completion));
  DDPIO_RETURN_IF_ERROR(
      LmdbError(mdb_env_sync(lmdb_->env.get(), 1), absl::StrCat("syncing ", path_)));
  finished_ = true;
  return absl::OkStatus();
}

absl::Status DatasetWriter::Grow() {
  uint64_t next = map_size_ * 2;
  DDPIO_RETURN_IF_ERROR(LmdbError(mdb_env_set_mapsize(lmdb_->env.get(), next),
                                  absl::StrCat("growing the LMDB map of ", path_)));
  DDPIO_LOG(INFO) << "LMDB map of " << path_ << " full at " << map_size_ << " bytes; grown to "
                  << next;
  map_size_ = next;
  return absl::OkStatus();
}

absl::Status DatasetWriter::CommitPending(const std::optional<DatasetCompletion>& completion) {
  const uint64_t first = committed_;
  const uint64_t last = committed_ + pending_.size();
  const std::string context =
      absl::StrCat("committing records [", first, ", ", last, ") to ", path_);
  nlohmann::json progress = {{"records", last},
                             {"payload_bytes", committed_payload_bytes_ + pending_payload_bytes_}};
  const std::string progress_text =
      progress.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (;;) {
    Txn txn;
    DDPIO_RETURN_IF_ERROR(txn.Begin(lmdb_->env.get(), 0, context));
    int rc = MDB_SUCCESS;
    size_t offset = 0;
    for (size_t i = 0; i < pending_.size() && rc == MDB_SUCCESS; ++i) {
      IndexKey key = EncodeIndexKey(first + i);
      MDB_val k = ToVal(key.data(), key.size());
      MDB_val v = ToVal(arena_.data() + offset, pending_[i]);
      rc = mdb_put(txn.get(), lmdb_->samples, &k, &v, MDB_APPEND);
      offset += pending_[i];
    }
    auto put_meta = [&](const std::string& key, const std::string& value) {
      if (rc != MDB_SUCCESS) return;
      MDB_val k = ToVal(key.data(), key.size());
      MDB_val v = ToVal(value.data(), value.size());
      rc = mdb_put(txn.get(), lmdb_->meta, &k, &v, 0);
    };
    for (const auto& [key, value] : pending_meta_) put_meta(key, value);
    put_meta(kWriterKey, progress_text);
    if (completion.has_value()) put_meta(kCompleteKey, EncodeCompletion(*completion));
    if (rc == MDB_SUCCESS) {
      rc = mdb_txn_commit(txn.release());  // frees the transaction whatever the outcome
      if (rc == MDB_SUCCESS) break;
    }
    txn.Abort();
    if (rc != MDB_MAP_FULL) return CommitError(rc, path_, context);
    DDPIO_RETURN_IF_ERROR(Grow());
  }
  committed_ = last;
  committed_payload_bytes_ += pending_payload_bytes_;
  pending_payload_bytes_ = 0;
  pending_.clear();
  arena_.clear();
  pending_meta_.clear();
  return absl::OkStatus();
}

}  // namespace ddpio::storage
