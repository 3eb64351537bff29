#include "ddpio/storage/internal/upload_json.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ddpio/common/internal/json_parse.h"

namespace ddpio::storage::internal {

std::optional<UploadState> ParseUploadState(std::string_view text, const std::string& url,
                                            const std::string& dataset) {
  absl::StatusOr<nlohmann::json> parsed = ParseJson(text, "upload state", kMaxUploadStateBytes);
  if (!parsed.ok()) return std::nullopt;
  const nlohmann::json& j = *parsed;
  auto text_of = [&](const nlohmann::json& o, const char* key) {
    return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>()
                                                                  : std::string();
  };
  if (text_of(j, "url") != url || text_of(j, "dataset") != dataset || !j.contains("objects") ||
      !j["objects"].is_object()) {
    return std::nullopt;  // another upload's, an older ddpio's, or damaged: start over
  }
  UploadState state;
  state.url = url;
  state.dataset = dataset;
  state.token = text_of(j, "token");
  for (const auto& [object, o] : j["objects"].items()) {
    if (const std::string id = text_of(o, "upload_id"); !id.empty()) state.upload_ids[object] = id;
    if (const std::string etag = text_of(o, "etag"); !etag.empty()) state.etags[object] = etag;
  }
  return state;
}

std::optional<UploadLockHolder> ParseUploadLockHolder(std::string_view body) {
  absl::StatusOr<nlohmann::json> j = ParseJson(body, "upload lock", kMaxUploadLockBytes);
  if (!j.ok() || !j->is_object()) return std::nullopt;
  UploadLockHolder h;
  auto text = [&](const char* key, std::string* out) {
    auto it = j->find(key);
    if (it == j->end() || !it->is_string()) return false;
    *out = it->get<std::string>().substr(0, kMaxUploadLockText);
    return true;
  };
  auto number = [&](const char* key, int64_t* out) {
    auto it = j->find(key);
    if (it == j->end() || !it->is_number_integer()) return false;
    // (an unsigned beyond int64 would wrap negative: a junk lock "expired", taken over)
    if (it->is_number_unsigned() &&
        it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return false;
    *out = it->get<int64_t>();
    return true;
  };
  if (!text("token", &h.token) || !text("host", &h.host) || !number("pid", &h.pid) ||
      !number("started", &h.started) || !number("expires", &h.expires)) {
    return std::nullopt;
  }
  return h;
}

}  // namespace ddpio::storage::internal
