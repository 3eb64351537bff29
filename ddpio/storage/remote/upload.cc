#include "ddpio/storage/remote/upload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/checksum.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/internal/upload_json.h"
#include "ddpio/storage/record.h"
#include "ddpio/storage/remote/upload_lock.h"
#include "ddpio/storage/s3/object_store.h"
#include "ddpio/version.h"

namespace ddpio::storage::remote {
namespace {

namespace fs = std::filesystem;

using internal::UploadState;

// Reads `length` bytes at `offset` of an object being sent.
using ReadBytes = std::function<absl::StatusOr<std::string>(uint64_t offset, uint64_t length)>;

std::string StatePath(const std::string& local_path) {
  std::error_code ec;
  return fs::is_directory(local_path, ec) ? local_path + "/ddpio-upload.json"
                                          : local_path + ".ddpio-upload";
}

std::string DatasetKey(const RemoteManifest& m) {
  return absl::StrCat(absl::Hex(m.records_digest, absl::kZeroPad16), "-",
                      absl::Hex(m.index_crc32c, absl::kZeroPad8), "-", m.header.id);
}

// The state an earlier run of this upload left at `path`; a fresh one (no token, no object)
// when there is none, or it is another upload's, an older ddpio's, or damaged.
UploadState LoadState(const std::string& path, const std::string& url, const std::string& dataset) {
  absl::StatusOr<std::string> text =
      ReadRegularFile(path, internal::kMaxUploadStateBytes, "upload state");
  if (text.ok()) {
    if (std::optional<UploadState> state = internal::ParseUploadState(*text, url, dataset)) {
      return *std::move(state);
    }
  }
  UploadState state;
  state.url = url;
  state.dataset = dataset;
  return state;
}

// Best effort: an unwritable folder makes the upload not resumable, nothing worse.
void SaveState(const std::string& path, const UploadState& state) {
  nlohmann::json j;
  j["url"] = state.url;
  j["dataset"] = state.dataset;
  j["token"] = state.token;
  j["objects"] = nlohmann::json::object();
  for (const auto& [object, id] : state.upload_ids) j["objects"][object]["upload_id"] = id;
  for (const auto& [object, etag] : state.etags) j["objects"][object]["etag"] = etag;
  const std::string tmp = path + ".tmp";
  const std::string text = j.dump(1);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (::close(fd) == 0 && ok) ::rename(tmp.c_str(), path.c_str());
}

absl::StatusOr<std::string> ReadRange(int fd, uint64_t offset, uint64_t length,
                                      const std::string& path) {
  std::string bytes(length, '\0');
  for (uint64_t got = 0; got < length;) {
    const ssize_t n =
        ::pread(fd, bytes.data() + got, length - got, static_cast<off_t>(offset + got));
    if (n <= 0) {
      return absl::DataLossError(
          absl::StrCat("reading ", path, " at byte ", offset + got, ": ",
                       n == 0 ? "the file ends early" : std::strerror(errno)));
    }
    got += static_cast<uint64_t>(n);
  }
  return bytes;
}

class Uploader {
 public:
  Uploader(s3::ObjectStore& s3, const s3::S3Url& dest, const UploadOptions& options,
           UploadState& state, std::string state_path, UploadResult& result, UploadLock& lock)
      : s3_(s3),
        dest_(dest),
        options_(options),
        state_(state),
        state_path_(std::move(state_path)),
        result_(result),
        lock_(lock) {}

  absl::Status Progress(uint64_t total) {
    DDPIO_RETURN_IF_ERROR(lock_.Renew());
    if (options_.progress &&
        !options_.progress({"uploading", result_.bytes_sent + result_.bytes_skipped, total})) {
      return absl::CancelledError(
          absl::StrCat("the upload to ", dest_.ToString(),
                       " was stopped; run it again to resume where it stopped"));
    }
    return absl::OkStatus();
  }

  // Sends `bytes` bytes as `object`, read through what `open` gives (called only when the store
  // does not hold the object from an earlier run already).
  absl::Status Object(const std::string& object, uint64_t bytes,
                      const std::function<absl::StatusOr<ReadBytes>()>& open, uint64_t total) {
    const std::string key = dest_.Key(object);
    if (auto done = state_.etags.find(object); done != state_.etags.end()) {
      // Sent by an earlier run: still there only if the store has it with the ETag it gave then.
      absl::StatusOr<s3::ObjectStore::ObjectInfo> there = s3_.Head(dest_.bucket, key);
      if (there.ok() && there->size == bytes && there->etag == done->second) {
        result_.bytes_skipped += bytes;
        return Progress(total);
      }
      state_.etags.erase(done);
    }
    DDPIO_ASSIGN_OR_RETURN(ReadBytes read, open());
    std::string etag;
    if (bytes <= options_.part_bytes) {
      DDPIO_ASSIGN_OR_RETURN(std::string body, read(0, bytes));
      DDPIO_ASSIGN_OR_RETURN(etag, s3_.PutWithEtag(dest_.bucket, key, std::move(body)));
      result_.bytes_sent += bytes;
    } else {
      DDPIO_ASSIGN_OR_RETURN(etag, Multipart(read, bytes, object, key, total));
    }
    state_.etags[object] = etag;
    state_.upload_ids.erase(object);
    SaveState(state_path_, state_);
    return Progress(total);
  }

  // Sends `bytes` (the index, the manifest) as `object`, keeping its ETag.
  absl::Status Small(const std::string& object, std::string bytes) {
    const uint64_t n = bytes.size();
    DDPIO_ASSIGN_OR_RETURN(state_.etags[object],
                           s3_.PutWithEtag(dest_.bucket, dest_.Key(object), std::move(bytes)));
    result_.bytes_sent += n;
    SaveState(state_path_, state_);
    return absl::OkStatus();
  }

  // Aborted naming the first object this upload wrote that the store now holds otherwise
  // (another writer at the prefix since); the store's errors otherwise.
  absl::Status CheckOwnObjects() {
    for (const auto& [object, etag] : state_.etags) {
      DDPIO_ASSIGN_OR_RETURN(s3::ObjectStore::ObjectInfo there,
                             s3_.Head(dest_.bucket, dest_.Key(object)));
      if (there.etag != etag) {
        return absl::AbortedError(
            absl::StrCat(s3::ObjectStore::Name(dest_.bucket, dest_.Key(object)),
                         " is no longer what this upload wrote (ETag ", there.etag, ", not ", etag,
                         "): another upload wrote to ", dest_.ToString(), " at the same time"));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<std::string> Multipart(const ReadBytes& read, uint64_t bytes,
                                        const std::string& object, const std::string& key,
                                        uint64_t total) {
    const uint64_t part_bytes = std::max<uint64_t>(options_.part_bytes, uint64_t{5} << 20);
    const int parts = static_cast<int>((bytes + part_bytes - 1) / part_bytes);
    std::map<int, std::string> etags;
    std::string id = state_.upload_ids[object];
    if (!id.empty()) {  // resumed: keep the parts of the right size
      absl::StatusOr<std::vector<s3::ObjectStore::Part>> held =
          s3_.ListParts(dest_.bucket, key, id);
      if (held.ok()) {
        for (const auto& p : *held) {
          const uint64_t want =
              std::min(part_bytes, bytes - static_cast<uint64_t>(p.number - 1) * part_bytes);
          if (p.number >= 1 && p.number <= parts && p.size == want) etags[p.number] = p.etag;
        }
      } else {
        id.clear();  // gone (completed, aborted or expired): start again
      }
    }
    if (id.empty()) {
      DDPIO_ASSIGN_OR_RETURN(id, s3_.CreateMultipartUpload(dest_.bucket, key));
      state_.upload_ids[object] = id;
      SaveState(state_path_, state_);
    }
    for (int part = 1; part <= parts; ++part) {
      const uint64_t offset = static_cast<uint64_t>(part - 1) * part_bytes;
      const uint64_t length = std::min(part_bytes, bytes - offset);
      if (etags.count(part) != 0) {
        result_.bytes_skipped += length;
        continue;
      }
      DDPIO_ASSIGN_OR_RETURN(std::string body, read(offset, length));
      DDPIO_ASSIGN_OR_RETURN(etags[part],
                             s3_.UploadPart(dest_.bucket, key, id, part, std::move(body)));
      result_.bytes_sent += length;
      DDPIO_RETURN_IF_ERROR(Progress(total));
    }
    std::vector<std::pair<int, std::string>> list(etags.begin(), etags.end());
    return s3_.CompleteMultipartUpload(dest_.bucket, key, id, list);
  }

  s3::ObjectStore& s3_;
  const s3::S3Url& dest_;
  const UploadOptions& options_;
  UploadState& state_;
  const std::string state_path_;
  UploadResult& result_;
  UploadLock& lock_;
};

// The object name of data file `k` of `reader`: "data.mdb", or the shard's folder and its file.
std::string ObjectOf(const DatasetReader& reader, size_t k) {
  if (reader.shard_count() == 1) return "data.mdb";
  const fs::path file(reader.data_files()[k].path);
  return (file.parent_path().filename() / "data.mdb").string();
}

// The CRC32C a record's stored bytes begin with (docs/FORMAT.md), 0 for fewer than 4 bytes.
uint32_t StoredChecksum(absl::Span<const uint8_t> stored) {
  return stored.size() < 4 ? 0 : DecodeFixed32(reinterpret_cast<const char*>(stored.data()));
}

// A token dataset's record `i` (its bytes `stored`, checked by the read that located them): the
// length of its document, in ids. DataLoss naming the record when it holds anything but a
// document of the dataset's ids, or not the length the dataset recorded for it (when it did:
// `recorded`) — the index carries the lengths the records hold, never a table that lies.
absl::StatusOr<uint32_t> DocumentLength(const DatasetReader& reader, uint64_t i,
                                        absl::Span<const uint8_t> stored,
                                        const std::vector<uint32_t>& recorded) {
  RecordView view;
  DDPIO_RETURN_IF_ERROR(DecodeRecord(stored, /*verify_checksum=*/false, &view));
  const int width = reader.header().tokens.width;
  if (TokenWidth(view.type) != width) {
    return absl::DataLossError(absl::StrCat(reader.path(), ": record ", i, " holds ",
                                            ContentTypeName(view.type), ", not the ", width,
                                            "-byte token ids of its dataset; nothing was sent"));
  }
  const uint32_t ids = static_cast<uint32_t>(view.payload.size() / static_cast<size_t>(width));
  if (!recorded.empty() && recorded[i] != ids) {
    return absl::DataLossError(
        absl::StrCat(reader.path(), ": record ", i, " holds ", ids,
                     " ids, but the dataset's recorded lengths say ", recorded[i],
                     " (`ddpio inspect --verify` lists every such record); nothing was sent"));
  }
  return ids;
}

// Chunk `c`'s object name: named by its layout (the index's checksum), so that another layout of
// the dataset (another chunk size) never writes over the objects a reader of this one reads, and
// under one of `spread` prefixes, chosen by a hash of its number.
std::string ChunkObject(uint64_t c, uint32_t layout, int spread) {
  const uint64_t prefix =
      spread <= 1 ? 0 : Fnv1a64(absl::StrCat(c)) % static_cast<uint64_t>(spread);
  return absl::StrFormat("chunks/%08x/%02x/%08d", layout, prefix, c);
}

// Where chunk objects begin: a new one at each LMDB file (shard) and before a record that would
// take the current one past chunk_bytes — moved back to the last multiple of
// kDefaultBlockChunkRecords in it when the chunk keeps at least half of chunk_bytes and the rest
// fits the next one, so that the block order's chunks (of that many records, or a divisor) lie in
// one object each and cost one GET.
std::vector<uint64_t> ChunkStarts(const UploadOptions& o,
                                  const std::vector<RecordLocation>& index) {
  std::vector<uint64_t> before(index.size() + 1, 0);  // bytes of the records before record i
  for (uint64_t i = 0; i < index.size(); ++i) before[i + 1] = before[i] + index[i].length;
  std::vector<uint64_t> starts;
  uint64_t start = 0;
  for (uint64_t i = 0; i < index.size(); ++i) {
    if (i == 0 || index[i].file != index[start].file) {
      start = i;
    } else if (before[i + 1] - before[start] > o.chunk_bytes) {
      const uint64_t aligned = i / kDefaultBlockChunkRecords * kDefaultBlockChunkRecords;
      const bool align = aligned > start &&
                         2 * (before[aligned] - before[start]) >= o.chunk_bytes &&
                         before[i + 1] - before[aligned] <= o.chunk_bytes;
      start = align ? aligned : i;
    } else {
      continue;
    }
    starts.push_back(start);
  }
  return starts;
}

// Turns the LMDB layout (m.files the LMDB files, `index` where records lie in them) into chunk
// objects (ChunkStarts): m.files becomes the chunks and `index` where records lie in them.
void LayOutChunks(const UploadOptions& o, std::vector<RecordLocation>& index, RemoteManifest& m) {
  const std::vector<uint64_t> starts = ChunkStarts(o, index);
  const std::vector<RemoteFile> lmdb = std::move(m.files);
  m.files.clear();
  m.version = kRemoteManifestVersionOfChunks;  // key_first: readers before chunks must refuse it
  for (size_t c = 0; c < starts.size(); ++c) {
    const uint64_t first = starts[c], end = c + 1 < starts.size() ? starts[c + 1] : index.size();
    const RemoteFile& from = lmdb[index[first].file];
    RemoteFile chunk;  // named once the index is written (ChunkObject)
    chunk.first = first;
    chunk.records = end - first;
    chunk.salt = from.salt;
    chunk.bound = from.bound;
    chunk.key_first = first - from.first;
    for (uint64_t i = first; i < end; ++i) {
      index[i] = RecordLocation{static_cast<uint32_t>(c), index[i].length, chunk.bytes};
      chunk.bytes += index[i].length;
    }
    m.files.push_back(std::move(chunk));
  }
}

// Whether two manifests' files are the same objects (names and sizes): another spread over
// prefixes is another layout, though its index is the same.
bool SameObjects(const std::vector<RemoteFile>& a, const std::vector<RemoteFile>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const RemoteFile& x, const RemoteFile& y) {
                      return x.object == y.object && x.bytes == y.bytes;
                    });
}

absl::Status CheckLayoutOptions(const UploadOptions& o) {
  if (o.spread_prefixes < 1 || o.spread_prefixes > UploadOptions::kMaxSpreadPrefixes) {
    return absl::InvalidArgumentError(absl::StrCat("upload: spread over ", o.spread_prefixes,
                                                   " prefixes: give 1 to ",
                                                   UploadOptions::kMaxSpreadPrefixes));
  }
  if (o.chunk_bytes == 0 && o.spread_prefixes > 1) {
    return absl::InvalidArgumentError(
        "upload: spreading over prefixes needs chunk objects (a chunk size above 0)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<UploadResult> Upload(const std::string& local_path, const std::string& url,
                                    const s3::S3Config& config, const UploadOptions& options) {
  DDPIO_ASSIGN_OR_RETURN(s3::S3Url dest, s3::ParseS3Url(url));
  DDPIO_RETURN_IF_ERROR(CheckLayoutOptions(options));
  if (s3::IsS3Url(local_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("upload: the source ", local_path, " is in an object store already"));
  }
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<DatasetReader> reader, DatasetReader::Open(local_path));
  UploadResult result;
  RemoteManifest& m = result.manifest;
  m.header = reader->header();
  m.completion = reader->completion();
  m.uploaded_by = DDPIO_VERSION;
  const std::vector<DatasetReader::DataFile> files = reader->data_files();
  for (size_t k = 0; k < files.size(); ++k) {
    RemoteFile f;
    f.object = ObjectOf(*reader, k);
    f.bytes = files[k].bytes;
    m.files.push_back(f);
  }

  // The index and the records' digest, every record read and checked on the way.
  std::vector<RecordLocation> index(reader->size());
  RecordsDigest digest;
  // Chunk objects, unless asked for the LMDB files as they are; a dataset of no records keeps its
  // (empty) LMDB file, since a manifest names at least one file.
  const bool chunked = options.chunk_bytes > 0 && reader->size() > 0;
  // With chunk objects, each record's checksum: a record whose bytes are not the same when its
  // chunk is read to be sent (the dataset changed under the upload) is refused, not sent.
  std::vector<uint32_t> checksums(chunked ? reader->size() : 0);
  // A token dataset's document lengths, carried by the index so that a reader of the store knows
  // them without fetching every record (as a local reader knows them from the dataset's metadata).
  const bool tokens = IsTokenDataset(reader->header()) && reader->size() > 0;
  std::vector<uint32_t> lengths(tokens ? reader->size() : 0);
  {
    DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, reader->BeginRead());
    for (uint64_t i = 0; i < reader->size(); ++i) {
      RecordBinding binding;
      absl::Span<const uint8_t> stored;
      DDPIO_ASSIGN_OR_RETURN(index[i], txn.Locate(i, &binding, &stored));
      digest.Add(stored);
      if (!checksums.empty()) checksums[i] = StoredChecksum(stored);
      if (tokens) {
        DDPIO_ASSIGN_OR_RETURN(
            lengths[i], DocumentLength(*reader, i, stored, reader->recorded_document_lengths()));
      }
      RemoteFile& f = m.files[index[i].file];
      if (f.records == 0) {
        f.first = i;
        f.salt = binding.salt;
        f.bound = binding.required;
      }
      ++f.records;
      if ((i + 1) % 4096 == 0) {
        DDPIO_RETURN_IF_ERROR(txn.CheckMapped());  // the digest read the map
        txn.Reset();
        if (options.progress && !options.progress({"indexing", i + 1, reader->size()})) {
          return absl::CancelledError("the upload was stopped while indexing; nothing was sent");
        }
      }
    }
    DDPIO_RETURN_IF_ERROR(txn.CheckMapped());
  }
  uint64_t next = 0;
  for (RemoteFile& f : m.files) {  // an empty shard holds no record: its place is where it stands
    if (f.records == 0) f.first = next;
    next = f.first + f.records;
  }
  if (chunked) LayOutChunks(options, index, m);
  if (tokens) {  // a larger index: readers before document lengths must refuse it
    m.version = kRemoteManifestVersionOfLengths;
    m.document_lengths = true;
  }
  const std::string index_bytes = EncodeRecordIndex(index, lengths);
  m.index_bytes = index_bytes.size();
  m.index_crc32c = RecordIndexChecksum(index_bytes);
  m.records_digest = digest.value();
  for (size_t c = 0; chunked && c < m.files.size(); ++c) {
    m.files[c].object = ChunkObject(c, m.index_crc32c, options.spread_prefixes);
  }
  const std::string manifest_text = EncodeRemoteManifest(m);
  if (manifest_text.size() > kMaxRemoteManifestBytes) {  // no reader would open it
    return absl::InvalidArgumentError(absl::StrCat(
        "upload: ", local_path, " in ", m.files.size(), " objects needs a manifest of ",
        manifest_text.size() >> 20, " MiB, more than the ", kMaxRemoteManifestBytes >> 20,
        " MiB a reader accepts: give a larger chunk size"));
  }

  s3::S3ClientOptions client_options;
  client_options.retry = options.retry;
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<s3::ObjectStore> s3,
                         s3::OpenObjectStore(config, client_options));
  if (options.create_bucket) DDPIO_RETURN_IF_ERROR(s3->CreateBucket(dest.bucket));
  const std::string manifest_key = dest.Key(kRemoteManifestObject);
  // What is at the destination: this dataset (nothing to do), nothing, or another dataset.
  auto existing_dataset = [&]() -> absl::StatusOr<bool> {
    absl::StatusOr<std::string> existing =
        s3->Get(dest.bucket, manifest_key, kMaxRemoteManifestBytes);
    if (absl::IsNotFound(existing.status())) return false;
    if (!existing.ok()) return existing.status();  // no bucket, no access, no store: said now
    absl::StatusOr<RemoteManifest> there = DecodeRemoteManifest(*existing, dest.ToString());
    if (there.ok() && there->identifies_records() && there->records_digest == m.records_digest &&
        there->index_crc32c == m.index_crc32c && there->header.id == m.header.id &&
        there->completion.sample_count == m.completion.sample_count &&
        SameObjects(there->files, m.files)) {
      result.already_there = true;
      return true;
    }
    if (!options.overwrite) {
      const bool relaid = there.ok() && there->identifies_records() &&
                          there->records_digest == m.records_digest &&
                          there->header.id == m.header.id;
      if (relaid && m.document_lengths && !there->document_lengths) {
        return absl::FailedPreconditionError(absl::StrCat(
            dest.ToString(), " holds this dataset already, uploaded without its document lengths",
            there->uploaded_by.empty() ? "" : absl::StrCat(" (by ddpio ", there->uploaded_by, ")"),
            ", so that its readers read every record to count them; replace it (overwrite) to "
            "store them"));
      }
      if (relaid) {
        return absl::FailedPreconditionError(absl::StrCat(
            dest.ToString(), " holds this dataset already in another layout (", there->files.size(),
            " objects, not ", m.files.size(),
            ": another chunk size or spread); upload with the same layout, or replace it "
            "(overwrite)"));
      }
      return absl::FailedPreconditionError(
          absl::StrCat(dest.ToString(), " holds another dataset already",
                       there.ok() && !there->identifies_records()
                           ? absl::StrCat(" (or this one, uploaded by ddpio ", there->uploaded_by,
                                          ", whose manifest cannot tell)")
                           : "",
                       "; choose another prefix, or replace it (overwrite)"));
    }
    return true;
  };
  DDPIO_ASSIGN_OR_RETURN(bool occupied, existing_dataset());
  if (result.already_there) return result;

  const std::string state_path = StatePath(local_path);
  UploadState state = LoadState(state_path, dest.ToString(), DatasetKey(m));
  if (state.token.empty()) state.token = NewDatasetId();
  SaveState(state_path, state);
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<UploadLock> lock,
                         UploadLock::Acquire(*s3, dest, state.token, options.lock));
  absl::Status status = [&]() -> absl::Status {
    // Looked at again under the lock: an upload that ended meanwhile may have put one there.
    DDPIO_ASSIGN_OR_RETURN(occupied, existing_dataset());
    if (result.already_there) return absl::OkStatus();
    if (occupied) {
      DDPIO_RETURN_IF_ERROR(s3->Delete(dest.bucket, manifest_key));  // first: nobody reads a mix
    }
    uint64_t total = index_bytes.size() + manifest_text.size();
    for (const RemoteFile& f : m.files) total += f.bytes;
    Uploader up(*s3, dest, options, state, state_path, result, *lock);
    // The index first: a prefix holding it but no manifest is an upload under way or cut short,
    // which a reader then says.
    DDPIO_RETURN_IF_ERROR(up.Small(kRecordIndexObject, index_bytes));
    if (!chunked) {
      for (size_t k = 0; k < files.size(); ++k) {
        const std::string& path = files[k].path;
        auto open = [&path]() -> absl::StatusOr<ReadBytes> {
          DDPIO_ASSIGN_OR_RETURN(Fd fd, OpenRegularFile(path, "dataset file"));
          auto shared = std::make_shared<Fd>(std::move(fd));
          return ReadBytes([shared, &path](uint64_t offset, uint64_t length) {
            return ReadRange(shared->get(), offset, length, path);
          });
        };
        DDPIO_RETURN_IF_ERROR(up.Object(m.files[k].object, files[k].bytes, open, total));
      }
    }
    for (size_t c = 0; chunked && c < m.files.size(); ++c) {
      const RemoteFile& chunk = m.files[c];
      auto open = [&]() -> absl::StatusOr<ReadBytes> {
        auto body = std::make_shared<std::string>();
        body->reserve(chunk.bytes);
        DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, reader->BeginRead());
        for (uint64_t i = chunk.first; i < chunk.first + chunk.records; ++i) {
          RecordBinding binding;
          absl::Span<const uint8_t> stored;
          DDPIO_RETURN_IF_ERROR(txn.Locate(i, &binding, &stored).status());
          if (stored.size() != index[i].length || StoredChecksum(stored) != checksums[i]) {
            return absl::AbortedError(absl::StrCat(
                local_path, ": record ", i, " changed while it was uploaded (", stored.size(),
                " bytes, ", index[i].length,
                " when indexed); nothing of it was sent: upload again once it stays put"));
          }
          body->append(reinterpret_cast<const char*>(stored.data()), stored.size());
        }
        DDPIO_RETURN_IF_ERROR(txn.CheckMapped());
        return ReadBytes([body](uint64_t offset, uint64_t length) -> absl::StatusOr<std::string> {
          // The whole chunk (one PUT, read once): handed over, not copied — a chunk is up to
          // --chunk-mb of memory already.
          if (offset == 0 && length == body->size()) return std::move(*body);
          return body->substr(offset, length);
        });
      };
      DDPIO_RETURN_IF_ERROR(up.Object(chunk.object, chunk.bytes, open, total));
    }
    // Everything this upload wrote is still its own, and so is the lock: then the manifest, and
    // the same checks again, so that a writer that slipped in meanwhile (a store ignoring the
    // lock's conditions) is caught and the manifest withdrawn rather than left over a mix.
    DDPIO_RETURN_IF_ERROR(lock->Renew(/*force=*/true));
    DDPIO_RETURN_IF_ERROR(up.CheckOwnObjects());
    DDPIO_RETURN_IF_ERROR(s3->Put(dest.bucket, manifest_key, manifest_text));  // last
    result.bytes_sent += manifest_text.size();
    absl::Status after = lock->Check();
    if (after.ok()) after = up.CheckOwnObjects();
    if (after.ok()) {
      absl::StatusOr<std::string> published =
          s3->Get(dest.bucket, manifest_key, kMaxRemoteManifestBytes);
      if (!published.ok()) {
        after = published.status();
      } else if (*published != manifest_text) {
        return absl::AbortedError(absl::StrCat(
            "another upload wrote its manifest to ", dest.ToString(),
            " at the same time as this one; this upload's dataset is not what is there"));
      }
    }
    if (!after.ok()) {
      absl::StatusOr<std::string> published =
          s3->Get(dest.bucket, manifest_key, kMaxRemoteManifestBytes);
      if (published.ok() && *published == manifest_text) {
        (void)s3->Delete(dest.bucket, manifest_key);  // ours, over what is not all ours
      }
      return Annotate(after, "the manifest was withdrawn");
    }
    if (options.progress) options.progress({"done", total, total});
    return absl::OkStatus();
  }();
  if (lock->Check().ok()) lock->Release();  // not when another upload holds it now
  DDPIO_RETURN_IF_ERROR(status);
  ::unlink(state_path.c_str());
  return result;
}

}  // namespace ddpio::storage::remote
