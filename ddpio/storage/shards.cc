#include "ddpio/storage/shards.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/internal/json_parse.h"
#include "ddpio/storage/internal/json_fields.h"

namespace ddpio::storage {

std::string ShardName(size_t shard, size_t shards) {
  return absl::StrFormat("shard-%05d-of-%05d", shard, shards);
}

std::string EncodeShardManifest(const ShardManifest& m) {
  const bool digests = std::all_of(m.shards.begin(), m.shards.end(),
                                   [](const ShardEntry& e) { return !e.digest.empty(); });
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& s : m.shards) {
    nlohmann::json e = {{"path", s.path}, {"records", s.records}};
    if (digests) e["digest"] = s.digest;
    shards.push_back(std::move(e));
  }
  return nlohmann::json{{"format", kShardsFormatName},
                        {"format_version", digests ? 2 : 1},
                        {"source_fingerprint", m.source_fingerprint},
                        {"shards", shards}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<ShardManifest> DecodeShardManifest(std::string_view text) {
  const auto bad = [](const std::string& what) {
    return absl::DataLossError(absl::StrCat("shard manifest: ", what));
  };
  auto parsed = ParseJson(text, "shard manifest");  // too big, too deep or not JSON: DataLoss
  if (!parsed.ok()) return parsed.status();
  const nlohmann::json j = *std::move(parsed);
  if (!j.is_object()) return bad("not a JSON object");
  auto format = j.find("format");
  if (format == j.end() || !format->is_string()) return bad("no format name");
  if (format->get<std::string>() != kShardsFormatName) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard manifest of format '", format->get<std::string>(), "', not ", kShardsFormatName));
  }
  int version = 0;
  if (!internal::GetInt(j, "format_version", &version))
    return bad("format_version is not an integer");
  if (version < 1 || version > 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard manifest version ", version, " (this build of ddpio reads versions 1 and 2)"));
  }
  ShardManifest m;
  m.format_version = version;
  auto fp = j.find("source_fingerprint");
  if (fp == j.end() || !fp->is_string()) return bad("source_fingerprint is not a string");
  m.source_fingerprint = fp->get<std::string>();
  auto shards = j.find("shards");
  if (shards == j.end() || !shards->is_array() || shards->empty()) return bad("no shards");
  if (shards->size() > kMaxShards)
    return bad(absl::StrCat(shards->size(), " shards, more than ", kMaxShards));
  uint64_t total = 0;
  for (const auto& s : *shards) {
    ShardEntry e;
    auto path = s.is_object() ? s.find("path") : s.end();
    if (!s.is_object() || path == s.end() || !path->is_string())
      return bad("a shard without a path");
    e.path = path->get<std::string>();
    if (e.path.empty() || e.path == "." || e.path == ".." ||
        e.path.find('/') != std::string::npos || e.path.find('\0') != std::string::npos) {
      return bad(absl::StrCat("shard path '", e.path, "' is not a folder name inside the dataset"));
    }
    if (!internal::GetU64(s, "records", &e.records))
      return bad(absl::StrCat("shard ", e.path, ": records"));
    if (version >= 2) {
      auto digest = s.find("digest");
      if (digest == s.end() || !digest->is_string() || digest->get<std::string>().empty()) {
        return bad(absl::StrCat("shard ", e.path, ": no digest"));
      }
      e.digest = digest->get<std::string>();
    }
    if (total + e.records < total) return bad("record counts overflow");
    total += e.records;
    m.shards.push_back(std::move(e));
  }
  return m;
}

}  // namespace ddpio::storage
