#include "ddpio/storage/dataset_info.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/internal/json_parse.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/internal/json_fields.h"

namespace ddpio::storage {

using nlohmann::json;

namespace {

// The completion marker is three counts (well under 100 bytes); room to spare for fields to come.
constexpr uint64_t kMaxCompletionBytes = 64 << 10;

// The class list of a parsed header, bounded before anything is copied out of it (a header is a
// value from outside: a dataset file, a shard, a remote manifest).
absl::StatusOr<std::vector<std::string>> DecodeClasses(const json& classes) {
  if (!classes.is_array()) return absl::DataLossError("dataset metadata: classes is not a list");
  if (classes.size() > kMaxClasses) {
    return absl::DataLossError(absl::StrCat("dataset metadata names ", classes.size(),
                                            " classes; a valid one names at most ", kMaxClasses));
  }
  std::vector<std::string> names;
  names.reserve(classes.size());
  for (const json& name : classes) {
    if (!name.is_string()) {
      return absl::DataLossError(
          absl::StrCat("dataset metadata: class ", names.size(), " is not a name"));
    }
    const std::string& text = name.get_ref<const std::string&>();
    if (text.size() > kMaxClassNameBytes) {
      return absl::DataLossError(absl::StrCat("dataset metadata: class ", names.size(), " is a ",
                                              text.size(), "-byte name; a valid one is at most ",
                                              kMaxClassNameBytes, " bytes"));
    }
    names.push_back(text);
  }
  return names;
}

absl::Status DecodeTokens(const json& t, DatasetHeader* h) {
  const auto bad = [](const char* what) {
    return absl::DataLossError(absl::StrCat("dataset metadata: the tokens block's ", what));
  };
  if (!t.is_object()) return bad("is not an object");
  const std::string dtype = t.at("dtype").get<std::string>();
  if (dtype != "uint16" && dtype != "uint32") return bad("dtype is neither uint16 nor uint32");
  h->tokens.width = dtype == "uint16" ? 2 : 4;
  int64_t eos = 0;
  if (!t.at("eos_id").is_number_integer() || (eos = t.at("eos_id").get<int64_t>()) < -1 ||
      eos > int64_t{UINT32_MAX}) {
    return bad("eos_id is not an id or -1");
  }
  if (eos > (h->tokens.width == 2 ? int64_t{0xFFFF} : int64_t{UINT32_MAX}))
    return bad("eos_id does not fit the dtype");
  h->tokens.eos_id = eos;
  if (!internal::GetU64(t, "vocab_size", &h->tokens.vocab_size)) return bad("vocab_size");
  h->tokens.tokenizer = t.at("tokenizer").get<std::string>();
  return absl::OkStatus();
}

}  // namespace

std::string EncodeHeader(const DatasetHeader& h) {
  json j = {{"format", kFormatName},
            {"format_version", h.format_version},
            {"classes", h.classes},
            {"source",
             {{"kind", h.source_kind},
              {"path", h.source_path},
              {"fingerprint", h.source_fingerprint},
              {"files", h.source_files}}},
            {"tool_version", h.tool_version}};
  if (!h.id.empty()) j["id"] = h.id;
  if (h.shard_count > 0) {
    j["shard"] = {{"index", h.shard_index},
                  {"count", h.shard_count},
                  {"dataset_fingerprint", h.dataset_fingerprint}};
  }
  if (IsTokenDataset(h)) {
    j["tokens"] = {{"dtype", h.tokens.width == 2 ? "uint16" : "uint32"},
                   {"eos_id", h.tokens.eos_id},
                   {"vocab_size", h.tokens.vocab_size},
                   {"tokenizer", h.tokens.tokenizer}};
  }
  return j.dump(-1, ' ', false,
                nlohmann::json::error_handler_t::replace);  // names are bytes: never throw
}

absl::StatusOr<DatasetHeader> DecodeHeader(std::string_view text) {
  DDPIO_ASSIGN_OR_RETURN(json j, ParseJson(text, "dataset metadata", kMaxHeaderBytes));
  if (!j.is_object()) return absl::DataLossError("dataset metadata is not valid JSON");
  try {
    if (j.at("format").get<std::string>() != kFormatName) {
      return absl::FailedPreconditionError(
          absl::StrCat("not a ddpio dataset: format is '", j.at("format").get<std::string>(), "'"));
    }
    DatasetHeader h;
    if (!internal::GetInt(j, "format_version", &h.format_version)) {
      return absl::DataLossError("dataset metadata: format_version is not an integer");
    }
    if (h.format_version < kFormatVersion || h.format_version > kMaxFormatVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "unsupported dataset format version ", h.format_version,
          " (this build of ddpio reads versions ", kFormatVersion, " to ", kMaxFormatVersion, ")"));
    }
    DDPIO_ASSIGN_OR_RETURN(h.classes, DecodeClasses(j.at("classes")));
    const json& s = j.at("source");
    h.source_kind = s.at("kind").get<std::string>();
    h.source_path = s.at("path").get<std::string>();
    h.source_fingerprint = s.at("fingerprint").get<std::string>();
    if (!internal::GetU64(s, "files", &h.source_files)) {
      return absl::DataLossError("dataset metadata: source files is not a count");
    }
    h.tool_version = j.at("tool_version").get<std::string>();
    if (j.contains("id")) h.id = j.at("id").get<std::string>();
    if (j.contains("shard")) {
      const json& sh = j.at("shard");
      if (!internal::GetU64(sh, "index", &h.shard_index) ||
          !internal::GetU64(sh, "count", &h.shard_count) || h.shard_count == 0 ||
          h.shard_index >= h.shard_count) {
        return absl::DataLossError(
            "dataset metadata: the shard's index and count are not a place in a dataset");
      }
      h.dataset_fingerprint = sh.at("dataset_fingerprint").get<std::string>();
    }
    if (j.contains("tokens")) DDPIO_RETURN_IF_ERROR(DecodeTokens(j.at("tokens"), &h));
    if ((h.format_version >= kTokensFormatVersion) != IsTokenDataset(h)) {
      return absl::DataLossError(
          absl::StrCat("dataset metadata: format version ", h.format_version,
                       IsTokenDataset(h) ? " with a tokens block (a token dataset is version 4)"
                                         : " without the tokens block a token dataset has"));
    }
    return h;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("dataset metadata is malformed: ", e.what()));
  }
}

std::string EncodeCompletion(const DatasetCompletion& c) {
  json j = {
      {"sample_count", c.sample_count}, {"payload_bytes", c.payload_bytes}, {"skipped", c.skipped}};
  return j.dump(-1, ' ', false,
                nlohmann::json::error_handler_t::replace);  // names are bytes: never throw
}

absl::StatusOr<DatasetCompletion> DecodeCompletion(std::string_view text) {
  DDPIO_ASSIGN_OR_RETURN(json j, ParseJson(text, "completion marker", kMaxCompletionBytes));
  if (!j.is_object()) return absl::DataLossError("completion marker is not valid JSON");
  try {
    DatasetCompletion c;
    if (!internal::GetU64(j, "sample_count", &c.sample_count) ||
        !internal::GetU64(j, "payload_bytes", &c.payload_bytes) ||
        !internal::GetU64(j, "skipped", &c.skipped)) {
      return absl::DataLossError(
          "completion marker is malformed: counts must be non-negative integers");
    }
    return c;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("completion marker is malformed: ", e.what()));
  }
}

std::string TokenLengthsKey(uint64_t first) {
  return absl::StrCat(kTokenLengthsKeyPrefix, absl::Hex(first, absl::kZeroPad16));
}

IndexKey EncodeIndexKey(uint64_t index) {
  IndexKey key;
  EncodeBigEndian64(key.data(), index);
  return key;
}

uint64_t DecodeIndexKey(const uint8_t* key8) { return DecodeBigEndian64(key8); }

std::string IndexKeyHex(uint64_t index) { return absl::StrFormat("%016x", index); }

absl::Status CheckSameClasses(const std::vector<std::string>& train,
                              const std::vector<std::string>& val) {
  const size_t n = std::min(train.size(), val.size());
  for (size_t i = 0; i < n; ++i) {
    if (train[i] != val[i]) {
      return WithSetting(absl::InvalidArgumentError(absl::StrCat(
                             "the validation set's classes differ from the training set's: label ",
                             i, " is '", val[i], "' in the validation set but '", train[i],
                             "' in the training set (convert the validation set with "
                             "the training set's class folders, or with a validation labels file "
                             "(val_labels), so labels mean "
                             "the same classes)")),
                         "val_labels");
    }
  }
  if (train.size() != val.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the validation set has ", val.size(), " classes and the training set ",
                     train.size(), "; the first ", n, " agree, then ",
                     val.size() > n ? absl::StrCat("the validation set names '", val[n], "'")
                                    : absl::StrCat("the training set names '", train[n], "'"),
                     " (both must list the same classes in the same order)"));
  }
  return absl::OkStatus();
}

uint64_t RecordSalt(const DatasetHeader& header) {
  return Fnv1a64(absl::StrCat(kFormatName, "|", header.id, "|", header.source_fingerprint, "|",
                              header.shard_index, "/", header.shard_count));
}

std::string NewDatasetId() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&id, absl::Hex(random(), absl::kZeroPad8));
  return id;
}

std::string RecordProtection(const DatasetHeader& header) {
  if (RecordsBound(header)) {
    return absl::StrCat("CRC32C per record, bound to its key and its dataset (format ",
                        header.format_version, ")");
  }
  return absl::StrCat("CRC32C per record, not bound to its key (format ", header.format_version,
                      "): a record moved, swapped or copied from another dataset passes; "
                      "`ddpio convert --from dataset --src DB` upgrades it");
}

std::string ContentDigest(const DatasetHeader& header, const DatasetCompletion& completion) {
  const uint64_t digest =
      Fnv1a64(EncodeCompletion(completion), Fnv1a64(EncodeHeader(header) + "\n"));
  return absl::StrCat(absl::Hex(digest, absl::kZeroPad16));
}

std::string DatasetIdentity(const DatasetHeader& header, const DatasetCompletion& completion) {
  return absl::StrCat(kFormatName, " v", header.format_version, ", ", completion.sample_count,
                      " records, ", header.classes.size(), " classes, digest ",
                      ContentDigest(header, completion));
}

}  // namespace ddpio::storage
