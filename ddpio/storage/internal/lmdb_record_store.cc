// The record store of one local LMDB file (record_store.h): zero-copy views into its memory map,
// every read checked against the map's bounds and bus errors (lmdb_env.h).
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/internal/lmdb_env.h"
#include "ddpio/storage/internal/record_store.h"

namespace ddpio::storage::internal {
namespace {

class LmdbStore final : public RecordStore {
 public:
  LmdbStore(std::string path, std::shared_ptr<SharedEnv> env, std::string data_file,
            uint64_t file_bytes, RecordBinding binding)
      : path_(std::move(path)),
        env_(std::move(env)),
        data_file_(std::move(data_file)),
        file_bytes_(file_bytes),
        binding_(binding) {}

  const std::string& path() const override { return path_; }
  bool no_lock() const override { return (env_->flags & MDB_NOLOCK) != 0; }
  std::vector<DatasetReader::DataFile> data_files() const override {
    return {{data_file_, file_bytes_}};
  }
  uint64_t file_bytes() const override { return file_bytes_; }
  size_t shard_count() const override { return 1; }
  const remote::RemoteDataset* remote() const override { return nullptr; }
  bool fetches_copies() const override { return false; }
  absl::Status CheckLocatable() const override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<RecordStoreTxn>> BeginRead() const override;

 private:
  friend class LmdbStoreTxn;
  // Constant after open.
  std::string path_;
  std::shared_ptr<SharedEnv> env_;
  std::string data_file_;
  uint64_t file_bytes_ = 0;
  // Format 3: records are bound to their keys with this salt (RecordSalt of the header).
  RecordBinding binding_;
};

class LmdbStoreTxn final : public RecordStoreTxn {
 public:
  explicit LmdbStoreTxn(const LmdbStore& store) : store_(store), env_(store.env_) {}
  absl::Status Begin() {
    return txn_.Begin(env_->env.get(), MDB_RDONLY, absl::StrCat("reading ", store_.path_));
  }

  absl::StatusOr<StoredRecord> Read(uint64_t index) override;
  absl::Status Finish(uint64_t index, absl::Status status) override;
  absl::Status CheckMapped() const override {
    return internal::CheckMapped(*env_, [] { return std::string(); });
  }
  absl::StatusOr<uint64_t> Prefetch(absl::Span<const uint64_t> indices) override;
  absl::StatusOr<remote::RecordLocation> Locate(uint64_t index,
                                                absl::Span<const uint8_t> stored) override;
  void Reset() override {
    if (txn_.active() && !reset_) {
      txn_.Reset();
      reset_ = true;
    }
  }

 private:
  // The snapshot renewed after a Reset.
  absl::Status Renew();

  const LmdbStore& store_;
  // Declared before txn_, which it outlives: a transaction must end before its environment.
  std::shared_ptr<SharedEnv> env_;
  Txn txn_;
  bool reset_ = false;
};

absl::StatusOr<std::unique_ptr<RecordStoreTxn>> LmdbStore::BeginRead() const {
  auto txn = std::make_unique<LmdbStoreTxn>(*this);
  DDPIO_RETURN_IF_ERROR(txn->Begin());
  return txn;
}

absl::Status LmdbStoreTxn::Renew() {
  if (!reset_) return absl::OkStatus();
  DDPIO_RETURN_IF_ERROR(txn_.Renew("renewing read transaction"));
  reset_ = false;
  return absl::OkStatus();
}

absl::StatusOr<StoredRecord> LmdbStoreTxn::Read(uint64_t index) {
  const SharedEnv& env = *env_;
  const std::string& path = store_.path_;
  auto name = [&] { return RecordName(index, path); };
  // Poisoned by an earlier bus error: its pages may be zeros now, never to be read as records.
  DDPIO_RETURN_IF_ERROR(internal::CheckMapped(env, name));
  DDPIO_RETURN_IF_ERROR(Renew());
  IndexKey key = EncodeIndexKey(index);
  MDB_val k = ToVal(key.data(), key.size()), v;
  const int rc = mdb_get(txn_.get(), env.samples, &k, &v);
  if (rc == MDB_NOTFOUND) {
    return absl::DataLossError(
        absl::StrCat("record ", index, " (key ", IndexKeyHex(index), ") is missing from ", path));
  }
  if (rc != MDB_SUCCESS) return LmdbError(rc, absl::StrCat("reading ", name()));
  DDPIO_RETURN_IF_ERROR(CheckInsideMap(env, v, name()));
  RecordBinding binding = store_.binding_;
  binding.key = index;
  return StoredRecord{FromVal(v), binding, index, &path};
}

absl::Status LmdbStoreTxn::Finish(uint64_t index, absl::Status status) {
  // After LMDB walked its pages and the checksum read the record: a page that faulted read as
  // zeros, and whatever LMDB or the decoder made of them (MDB_CORRUPTED, a missing key, a bad
  // checksum, or a record) gives way to the fault.
  DDPIO_RETURN_IF_ERROR(
      internal::CheckMapped(*env_, [&] { return RecordName(index, store_.path_); }));
  return status;
}

// madvise(MADV_WILLNEED) over these page-aligned [begin, end) ranges, overlapping and adjacent
// ones merged, in address order; the bytes hinted.
uint64_t AdviseWillNeed(std::vector<std::pair<uintptr_t, uintptr_t>> ranges) {
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

absl::StatusOr<uint64_t> LmdbStoreTxn::Prefetch(absl::Span<const uint64_t> indices) {
  const SharedEnv& env = *env_;
  auto name = [&] { return absl::StrCat("prefetching records of ", store_.path_); };
  DDPIO_RETURN_IF_ERROR(internal::CheckMapped(env, name));
  DDPIO_RETURN_IF_ERROR(Renew());
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // [begin, end) page-aligned
  ranges.reserve(indices.size());
  for (uint64_t index : indices) {
    IndexKey key = EncodeIndexKey(index);
    MDB_val k = ToVal(key.data(), key.size()), v;
    if (mdb_get(txn_.get(), env.samples, &k, &v) != MDB_SUCCESS) continue;
    if (!CheckInsideMap(env, v, "").ok()) continue;  // Get reports it
    const uintptr_t begin = reinterpret_cast<uintptr_t>(v.mv_data);
    ranges.emplace_back(begin & ~(page - 1), (begin + v.mv_size + page - 1) & ~(page - 1));
  }
  // LMDB walked the tree's pages for every key: one that faulted read as zeros.
  DDPIO_RETURN_IF_ERROR(internal::CheckMapped(env, name));
  return AdviseWillNeed(std::move(ranges));
}

absl::StatusOr<remote::RecordLocation> LmdbStoreTxn::Locate(uint64_t index,
                                                            absl::Span<const uint8_t> stored) {
  const auto* base = reinterpret_cast<const uint8_t*>(env_->map_begin);
  if (stored.data() < base ||
      static_cast<uint64_t>(stored.data() - base) + stored.size() > store_.file_bytes_) {
    return absl::DataLossError(
        absl::StrCat(RecordName(index, store_.path_), " lies outside its file"));
  }
  remote::RecordLocation where;
  where.offset = static_cast<uint64_t>(stored.data() - base);
  where.length = static_cast<uint32_t>(stored.size());
  return where;
}

// A token dataset's document lengths from its metadata (dataset_info.h, TokenLengthsKey): empty
// when the first entry is missing (not recorded); DataLoss when the entries do not cover every
// record exactly or do not add up to the payload the completion marker counts.
absl::StatusOr<std::vector<uint32_t>> ReadTokenLengths(const SharedEnv& env, MDB_txn* txn,
                                                       const std::string& path,
                                                       const OpenedStore& opened) {
  std::vector<uint32_t> lengths;
  const uint64_t n = opened.completion.sample_count;
  uint64_t ids = 0;
  while (lengths.size() < n) {
    const std::string key = TokenLengthsKey(lengths.size());
    DDPIO_ASSIGN_OR_RETURN(std::optional<std::string> entry, GetMeta(env, txn, key.c_str()));
    if (!entry.has_value() && lengths.empty()) return lengths;  // not recorded
    if (!entry.has_value() || entry->empty() || entry->size() % 4 != 0 ||
        entry->size() / 4 > n - lengths.size()) {
      return absl::DataLossError(absl::StrCat(
          "dataset ", path, ": the document lengths stop at record ", lengths.size(), " of ", n,
          entry.has_value() ? " (a malformed entry)" : " (an entry is missing)"));
    }
    const auto* p = reinterpret_cast<const uint8_t*>(entry->data());
    for (size_t k = 0; k < entry->size(); k += 4) {
      lengths.push_back(DecodeFixed32(p + k));
      ids += lengths.back();
    }
  }
  if (ids * static_cast<uint64_t>(opened.header.tokens.width) != opened.completion.payload_bytes) {
    return absl::DataLossError(absl::StrCat(
        "dataset ", path, ": the document lengths add up to ", ids, " ids, but the records hold ",
        opened.completion.payload_bytes, " bytes of ", opened.header.tokens.width, "-byte ids"));
  }
  return lengths;
}

// The dataset's header and completion marker from the file's metadata, checked against its
// record count.
absl::Status ReadMetadata(const SharedEnv& env, const std::string& path, OpenedStore* opened) {
  Txn txn;
  DDPIO_RETURN_IF_ERROR(txn.Begin(env.env.get(), MDB_RDONLY, absl::StrCat("opening ", path)));
  DDPIO_ASSIGN_OR_RETURN(auto header_text, GetMeta(env, txn.get(), kDatasetKey));
  if (!header_text.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " has no dataset metadata: not a ddpio dataset"));
  }
  auto header = DecodeHeader(*header_text);
  if (!header.ok()) return Annotate(header.status(), path);
  opened->header = std::move(header).value();
  DDPIO_ASSIGN_OR_RETURN(auto complete_text, GetMeta(env, txn.get(), kCompleteKey));
  if (!complete_text.has_value()) {
    return WithSetting(absl::FailedPreconditionError(absl::StrCat(
                           "dataset ", path,
                           " is incomplete: its conversion was interrupted or is still running "
                           "(resume the conversion, from the same source, to finish it)")),
                       "resume_conversion");
  }
  auto completion = DecodeCompletion(*complete_text);
  if (!completion.ok()) return Annotate(completion.status(), path);
  opened->completion = *completion;
  MDB_stat ms;
  const int rc = mdb_stat(txn.get(), env.samples, &ms);
  DDPIO_RETURN_IF_ERROR(internal::CheckMapped(env, [&] { return absl::StrCat("opening ", path); }));
  DDPIO_RETURN_IF_ERROR(LmdbError(rc, "mdb_stat"));
  if (ms.ms_entries != opened->completion.sample_count) {
    return absl::DataLossError(absl::StrCat("dataset ", path, " holds ", ms.ms_entries,
                                            " records but its completion marker says ",
                                            opened->completion.sample_count));
  }
  if (IsTokenDataset(opened->header)) {
    DDPIO_ASSIGN_OR_RETURN(opened->document_lengths,
                           ReadTokenLengths(env, txn.get(), path, *opened));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenedStore> OpenLmdbStore(const std::string& path, const ReaderOptions& options) {
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<SharedEnv> env, OpenSharedEnv(path, options));
  struct stat st;
  const bool dir = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  MDB_envinfo info;
  mdb_env_info(env->env.get(), &info);
  MDB_stat env_stat;
  mdb_env_stat(env->env.get(), &env_stat);
  const uint64_t file_bytes = static_cast<uint64_t>(info.me_last_pgno + 1) * env_stat.ms_psize;

  OpenedStore opened;
  DDPIO_RETURN_IF_ERROR(ReadMetadata(*env, path, &opened));
  const RecordBinding binding{RecordSalt(opened.header), 0, RecordsBound(opened.header)};
  opened.store = std::make_unique<LmdbStore>(path, std::move(env), dir ? path + "/data.mdb" : path,
                                             file_bytes, binding);
  return opened;
}

}  // namespace ddpio::storage::internal
