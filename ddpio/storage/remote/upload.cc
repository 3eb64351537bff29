#include "ddpio/storage/remote/upload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/checksum.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/s3/s3_client.h"
#include "ddpio/version.h"

namespace ddpio::storage::remote {
namespace {

namespace fs = std::filesystem;

// What a resumed upload needs to know: per object, the multipart upload id it was sent under, or
// that it is complete. Bound to the destination and the dataset's index, so that a state file
// of another upload is ignored.
struct UploadState {
  std::string url;
  uint32_t index_crc32c = 0;
  std::map<std::string, std::string> upload_ids;  // object -> multipart upload id
  std::map<std::string, bool> done;               // object -> fully uploaded
};

std::string StatePath(const std::string& local_path) {
  std::error_code ec;
  return fs::is_directory(local_path, ec) ? local_path + "/ddpio-upload.json"
                                          : local_path + ".ddpio-upload";
}

UploadState LoadState(const std::string& path, const std::string& url, uint32_t index_crc32c) {
  UploadState state;
  state.url = url;
  state.index_crc32c = index_crc32c;
  absl::StatusOr<std::string> text = ReadRegularFile(path, 1 << 20, "upload state");
  if (!text.ok()) return state;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("url") || j["url"] != url || !j.contains("index_crc32c") ||
      j["index_crc32c"] != index_crc32c || !j.contains("objects") || !j["objects"].is_object()) {
    return state;  // another upload's, or damaged: start over
  }
  for (const auto& [object, o] : j["objects"].items()) {
    if (!o.is_object()) continue;
    if (o.contains("upload_id") && o["upload_id"].is_string())
      state.upload_ids[object] = o["upload_id"];
    if (o.contains("done") && o["done"].is_boolean()) state.done[object] = o["done"];
  }
  return state;
}

// Best effort: an unwritable folder makes the upload not resumable, nothing worse.
void SaveState(const std::string& path, const UploadState& state) {
  nlohmann::json j;
  j["url"] = state.url;
  j["index_crc32c"] = state.index_crc32c;
  j["objects"] = nlohmann::json::object();
  for (const auto& [object, id] : state.upload_ids) j["objects"][object]["upload_id"] = id;
  for (const auto& [object, done] : state.done) j["objects"][object]["done"] = done;
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
  Uploader(s3::S3Client& s3, const s3::S3Url& dest, const UploadOptions& options,
           UploadState& state, std::string state_path, UploadResult& result)
      : s3_(s3),
        dest_(dest),
        options_(options),
        state_(state),
        state_path_(std::move(state_path)),
        result_(result) {}

  absl::Status Progress(uint64_t total) {
    if (options_.progress &&
        !options_.progress({"uploading", result_.bytes_sent + result_.bytes_skipped, total})) {
      return absl::CancelledError(
          absl::StrCat("the upload to ", dest_.ToString(),
                       " was stopped; run it again to resume where it stopped"));
    }
    return absl::OkStatus();
  }

  // Sends `bytes` bytes of the file at `path` as `object`.
  absl::Status File(const std::string& path, uint64_t bytes, const std::string& object,
                    uint64_t total) {
    const std::string key = dest_.Key(object);
    if (state_.done[object]) {
      absl::StatusOr<uint64_t> size = s3_.Size(dest_.bucket, key);
      if (size.ok() && *size == bytes) {
        result_.bytes_skipped += bytes;
        return Progress(total);
      }
      state_.done[object] = false;
    }
    DDPIO_ASSIGN_OR_RETURN(Fd fd, OpenRegularFile(path, "dataset file"));
    if (bytes <= options_.part_bytes) {
      DDPIO_ASSIGN_OR_RETURN(std::string body, ReadRange(fd.get(), 0, bytes, path));
      DDPIO_RETURN_IF_ERROR(s3_.Put(dest_.bucket, key, std::move(body)));
      result_.bytes_sent += bytes;
    } else {
      DDPIO_RETURN_IF_ERROR(Multipart(fd.get(), path, bytes, object, key, total));
    }
    state_.done[object] = true;
    state_.upload_ids.erase(object);
    SaveState(state_path_, state_);
    return Progress(total);
  }

 private:
  absl::Status Multipart(int fd, const std::string& path, uint64_t bytes, const std::string& object,
                         const std::string& key, uint64_t total) {
    const uint64_t part_bytes = std::max<uint64_t>(options_.part_bytes, uint64_t{5} << 20);
    const int parts = static_cast<int>((bytes + part_bytes - 1) / part_bytes);
    std::map<int, std::string> etags;
    std::string id = state_.upload_ids[object];
    if (!id.empty()) {  // resumed: keep the parts of the right size
      absl::StatusOr<std::vector<s3::S3Client::Part>> held = s3_.ListParts(dest_.bucket, key, id);
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
      DDPIO_ASSIGN_OR_RETURN(std::string body, ReadRange(fd, offset, length, path));
      DDPIO_ASSIGN_OR_RETURN(etags[part],
                             s3_.UploadPart(dest_.bucket, key, id, part, std::move(body)));
      result_.bytes_sent += length;
      DDPIO_RETURN_IF_ERROR(Progress(total));
    }
    std::vector<std::pair<int, std::string>> list(etags.begin(), etags.end());
    return s3_.CompleteMultipartUpload(dest_.bucket, key, id, list);
  }

  s3::S3Client& s3_;
  const s3::S3Url& dest_;
  const UploadOptions& options_;
  UploadState& state_;
  const std::string state_path_;
  UploadResult& result_;
};

// The object name of data file `k` of `reader`: "data.mdb", or the shard's folder and its file.
std::string ObjectOf(const DatasetReader& reader, size_t k) {
  if (reader.shard_count() == 1) return "data.mdb";
  const fs::path file(reader.data_files()[k].path);
  return (file.parent_path().filename() / "data.mdb").string();
}

}  // namespace

absl::StatusOr<UploadResult> Upload(const std::string& local_path, const std::string& url,
                                    const s3::S3Config& config, const UploadOptions& options) {
  DDPIO_ASSIGN_OR_RETURN(s3::S3Url dest, s3::ParseS3Url(url));
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

  // The index, every record read and checked on the way.
  std::vector<RecordLocation> index(reader->size());
  {
    DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, reader->BeginRead());
    for (uint64_t i = 0; i < reader->size(); ++i) {
      RecordBinding binding;
      DDPIO_ASSIGN_OR_RETURN(index[i], txn.Locate(i, &binding));
      RemoteFile& f = m.files[index[i].file];
      if (f.records == 0) {
        f.first = i;
        f.salt = binding.salt;
        f.bound = binding.required;
      }
      ++f.records;
      if ((i + 1) % 4096 == 0) {
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
  const std::string index_bytes = EncodeRecordIndex(index);
  m.index_bytes = index_bytes.size();
  m.index_crc32c = Crc32c(index_bytes.data(), index_bytes.size());

  s3::S3ClientOptions client_options;
  client_options.retry = options.retry;
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<s3::S3Client> s3,
                         s3::S3Client::Create(config, client_options));
  if (options.create_bucket) DDPIO_RETURN_IF_ERROR(s3->CreateBucket(dest.bucket));
  const std::string manifest_key = dest.Key(kRemoteManifestObject);
  const std::string manifest_text = EncodeRemoteManifest(m);
  absl::StatusOr<std::string> existing =
      s3->Get(dest.bucket, manifest_key, kMaxRemoteManifestBytes);
  if (existing.ok()) {
    absl::StatusOr<RemoteManifest> there = DecodeRemoteManifest(*existing, dest.ToString());
    if (there.ok() && there->index_crc32c == m.index_crc32c && there->header.id == m.header.id) {
      result.already_there = true;
      return result;
    }
    if (!options.overwrite) {
      return absl::FailedPreconditionError(absl::StrCat(
          dest.ToString(),
          " holds another dataset already; choose another prefix, or replace it (overwrite)"));
    }
    DDPIO_RETURN_IF_ERROR(s3->Delete(dest.bucket, manifest_key));  // first: nobody reads a mix
  } else if (!absl::IsNotFound(existing.status())) {
    return existing.status();  // no bucket, no access, no store: said now, before any work
  }

  const std::string state_path = StatePath(local_path);
  UploadState state = LoadState(state_path, dest.ToString(), m.index_crc32c);
  uint64_t total = index_bytes.size() + manifest_text.size();
  for (const RemoteFile& f : m.files) total += f.bytes;
  Uploader up(*s3, dest, options, state, state_path, result);
  // The index first: a prefix holding it but no manifest is an upload under way or cut short,
  // which a reader then says.
  DDPIO_RETURN_IF_ERROR(s3->Put(dest.bucket, dest.Key(kRecordIndexObject), index_bytes));
  result.bytes_sent += index_bytes.size();
  for (size_t k = 0; k < files.size(); ++k) {
    DDPIO_RETURN_IF_ERROR(up.File(files[k].path, files[k].bytes, m.files[k].object, total));
  }
  DDPIO_RETURN_IF_ERROR(s3->Put(dest.bucket, manifest_key, manifest_text));  // last
  result.bytes_sent += manifest_text.size();
  ::unlink(state_path.c_str());
  if (options.progress) options.progress({"done", total, total});
  return result;
}

}  // namespace ddpio::storage::remote
