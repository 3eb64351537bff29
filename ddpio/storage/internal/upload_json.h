// The JSON an upload (remote/upload.h) reads back from outside: its resume state file
// (DATASET/ddpio-upload.json or DATASET.ddpio-upload, left by an earlier run) and the body of the
// prefix's lock object fetched from the store (remote/upload_lock.h). Pure functions of the text,
// bounded in size and nesting (ParseJson), so that the fuzz targets upload_state_fuzz and
// upload_lock_fuzz feed them bytes. Private to storage/. Thread-safe (pure).
#ifndef DDPIO_STORAGE_INTERNAL_UPLOAD_JSON_H_
#define DDPIO_STORAGE_INTERNAL_UPLOAD_JSON_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ddpio::storage::internal {

// What a resumed upload needs to know: its lock token, and per object the multipart upload id
// it was sent under, or the ETag the store gave it when it was complete. Bound to the destination
// and to the dataset (its records' digest, index checksum and id), so that a state file of
// another upload is ignored; and an object marked done counts only while the store still holds
// it with that ETag (another upload in between writes other ETags).
struct UploadState {
  std::string url;
  std::string dataset;                            // records' digest, index checksum and id
  std::string token;                              // the lock's (upload_lock.h)
  std::map<std::string, std::string> upload_ids;  // object -> multipart upload id
  std::map<std::string, std::string> etags;       // object -> ETag of the complete object
};

// A state file is a few hundred bytes per object; read and parsed up to this.
inline constexpr uint64_t kMaxUploadStateBytes = 1 << 20;

// The state `text` holds when it is the upload's of `dataset` to `url`: its "url" and "dataset"
// are these strings and its "objects" is an object. nullopt otherwise (another upload's, an older
// ddpio's, damaged, over kMaxUploadStateBytes or nested too deep): the upload starts over. A
// missing or non-string "token" is empty; an object's "upload_id" or "etag" that is missing,
// empty or not a string is left out, so no id or ETag in the result is empty.
std::optional<UploadState> ParseUploadState(std::string_view text, const std::string& url,
                                            const std::string& dataset);

// Who holds an upload lock, as its object's body says.
struct UploadLockHolder {
  std::string token, host;  // each cut to kMaxUploadLockText bytes
  int64_t pid = 0, started = 0, expires = 0;
};

// A lock object's body is under 1 KiB; fetched and parsed up to this.
inline constexpr uint64_t kMaxUploadLockBytes = 64 << 10;
// The longest token or host name kept from a lock body (they go into error messages).
inline constexpr size_t kMaxUploadLockText = 256;

// The holder `body` names; nullopt when it is not a ddpio upload lock: not a JSON object (or over
// kMaxUploadLockBytes, or nested too deep), or "token" or "host" not a string, or "pid",
// "started" or "expires" not an integer that int64 holds (one beyond would wrap negative: a lock
// that looks expired, taken over).
std::optional<UploadLockHolder> ParseUploadLockHolder(std::string_view body);

}  // namespace ddpio::storage::internal

#endif  // DDPIO_STORAGE_INTERNAL_UPLOAD_JSON_H_
