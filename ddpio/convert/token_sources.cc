// The Megatron and flat-file document sources (token_sources.h); JSON lines are in jsonl_source.cc.
#include "ddpio/convert/token_sources.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/internal/token_file.h"
#include "ddpio/convert/megatron_index.h"
#include "ddpio/convert/npy_file.h"

namespace ddpio::convert {
namespace {

using internal::IdType;
using internal::TokenFile;

// The largest .idx read: 16 GiB is an index of about a billion sequences.
constexpr uint64_t kMaxIndexBytes = uint64_t{16} << 30;
// Bytes read at a time when scanning a flat file for EOS.
constexpr uint64_t kScanBytes = uint64_t{16} << 20;

std::string BaseName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

class MegatronSource : public DocumentSource {
 public:
  MegatronSource(std::string prefix, TokenFile bin, MegatronIndex index, std::string idx_identity,
                 int64_t eos_id)
      : prefix_(std::move(prefix)),
        bin_(std::move(bin)),
        index_(std::move(index)),
        idx_identity_(std::move(idx_identity)),
        eos_id_(eos_id),
        type_{static_cast<int>(index_.element_bytes),
              index_.dtype == MegatronDType::kInt8 || index_.dtype == MegatronDType::kInt16 ||
                  index_.dtype == MegatronDType::kInt32 || index_.dtype == MegatronDType::kInt64},
        name_(BaseName(prefix_) + ".bin#") {}

  uint64_t size() const override { return index_.sequences(); }
  int width() const override { return internal::StoredWidth(type_); }
  int64_t eos_id() const override { return eos_id_; }
  uint64_t vocab_size() const override { return 0; }
  std::string kind() const override { return "megatron"; }
  std::string described() const override { return prefix_; }
  std::string fingerprint() const override {
    return absl::StrCat("megatron|", bin_.identity(), "|", idx_identity_, "|eos=", eos_id_);
  }
  uint64_t source_files() const override { return 2; }
  std::string Name(uint64_t i) const override { return absl::StrCat(name_, i); }

  absl::Status Read(uint64_t i, int /*worker*/, std::vector<uint8_t>* payload) const override {
    if (static_cast<uint64_t>(index_.lengths[i]) > kMaxDocumentTokens) {
      return absl::DataLossError(absl::StrCat(Name(i), ": a sequence of ", index_.lengths[i],
                                              " ids; a document is at most ", kMaxDocumentTokens));
    }
    std::vector<uint8_t> raw;
    DDPIO_RETURN_IF_ERROR(bin_.Read(static_cast<uint64_t>(index_.pointers[i]),
                                    uint64_t(index_.lengths[i]) * index_.element_bytes, &raw));
    return internal::ConvertIds(raw, type_, width(), Name(i), payload);
  }

 private:
  const std::string prefix_;
  const TokenFile bin_;
  const MegatronIndex index_;
  const std::string idx_identity_;
  const int64_t eos_id_;
  const IdType type_;
  const std::string name_;
};

class TokenFileSource : public DocumentSource {
 public:
  TokenFileSource(TokenFile file, uint64_t data_offset, IdType type, int64_t eos_id,
                  std::vector<uint64_t> ends)
      : file_(std::move(file)),
        data_offset_(data_offset),
        type_(type),
        eos_id_(eos_id),
        ends_(std::move(ends)),
        name_(BaseName(file_.path()) + "#") {}

  uint64_t size() const override { return ends_.size(); }
  int width() const override { return internal::StoredWidth(type_); }
  int64_t eos_id() const override { return eos_id_; }
  uint64_t vocab_size() const override { return 0; }
  std::string kind() const override { return "tokens"; }
  std::string described() const override { return file_.path(); }
  std::string fingerprint() const override {
    return absl::StrCat("tokens|", file_.identity(), "|", type_.bytes, type_.is_signed ? "i" : "u",
                        "|eos=", eos_id_);
  }
  uint64_t source_files() const override { return 1; }
  std::string Name(uint64_t i) const override { return absl::StrCat(name_, i); }

  absl::Status Read(uint64_t i, int /*worker*/, std::vector<uint8_t>* payload) const override {
    const uint64_t begin = i == 0 ? 0 : ends_[i - 1];
    std::vector<uint8_t> raw;
    DDPIO_RETURN_IF_ERROR(
        file_.Read(data_offset_ + begin * type_.bytes, (ends_[i] - begin) * type_.bytes, &raw));
    return internal::ConvertIds(raw, type_, width(), Name(i), payload);
  }

 private:
  const TokenFile file_;
  const uint64_t data_offset_;
  const IdType type_;
  const int64_t eos_id_;
  const std::vector<uint64_t> ends_;  // one past each document's last id
  const std::string name_;
};

// Where each document of `count` ids ends: after every `eos_id`, or every kUnmarkedDocumentTokens
// ids without one. The ids after the last EOS are a last document.
absl::StatusOr<std::vector<uint64_t>> DocumentEnds(const TokenFile& file, uint64_t data_offset,
                                                   uint64_t count, IdType type, int64_t eos_id) {
  std::vector<uint64_t> ends;
  if (eos_id < 0) {
    for (uint64_t at = kUnmarkedDocumentTokens; at < count; at += kUnmarkedDocumentTokens)
      ends.push_back(at);
    if (count > 0) ends.push_back(count);
    return ends;
  }
  const uint64_t per_read = kScanBytes / type.bytes;
  std::vector<uint8_t> buffer;
  uint64_t start = 0;  // of the current document
  for (uint64_t at = 0; at < count; at += per_read) {
    const uint64_t n = std::min(per_read, count - at);
    DDPIO_RETURN_IF_ERROR(file.Read(data_offset + at * type.bytes, n * type.bytes, &buffer));
    for (uint64_t k = 0; k < n; ++k) {
      uint64_t raw = 0;
      std::memcpy(&raw, buffer.data() + k * type.bytes, static_cast<size_t>(type.bytes));
      if (raw == static_cast<uint64_t>(eos_id)) {
        ends.push_back(at + k + 1);
        start = at + k + 1;
      } else if (at + k + 1 - start > kMaxDocumentTokens) {
        return absl::InvalidArgumentError(absl::StrCat(
            file.path(), ": ", kMaxDocumentTokens, " ids from id ", start,
            " without the end-of-document id ", eos_id,
            ": is that the right EOS id? (without one the file is cut into documents of ",
            kUnmarkedDocumentTokens, " ids)"));
      }
    }
  }
  if (start < count) ends.push_back(count);
  return ends;
}

absl::StatusOr<IdType> RawDType(const std::string& dtype, const std::string& path) {
  if (dtype == "uint16") return IdType{2, false};
  if (dtype == "uint32") return IdType{4, false};
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is a raw token file: say how its ids are stored, dtype uint16 or uint32",
                   dtype.empty() ? "" : absl::StrCat(" (not '", dtype, "')")));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DocumentSource>> OpenMegatronSource(const std::string& prefix,
                                                                   int64_t eos_id) {
  const std::string bin_path = prefix + ".bin", idx_path = prefix + ".idx";
  DDPIO_ASSIGN_OR_RETURN(TokenFile bin, TokenFile::Open(bin_path, "Megatron data file"));
  DDPIO_ASSIGN_OR_RETURN(TokenFile idx, TokenFile::Open(idx_path, "Megatron index"));
  DDPIO_ASSIGN_OR_RETURN(std::string bytes,
                         ReadRegularFile(idx_path, kMaxIndexBytes, "Megatron index"));
  DDPIO_ASSIGN_OR_RETURN(
      MegatronIndex index,
      ParseMegatronIndex(
          absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
          bin.size(), idx_path));
  if (index.dtype == MegatronDType::kFloat32 || index.dtype == MegatronDType::kFloat64) {
    return absl::InvalidArgumentError(absl::StrCat(
        idx_path, " holds ", MegatronDTypeName(index.dtype), " values, not token ids"));
  }
  const int width = index.element_bytes <= 2 ? 2 : 4;
  if (eos_id > (width == 2 ? int64_t{0xFFFF} : int64_t{UINT32_MAX})) {
    return absl::InvalidArgumentError(absl::StrCat("the EOS id ", eos_id, " does not fit ",
                                                   idx_path, "'s ", 8 * width, "-bit ids"));
  }
  std::string idx_identity = idx.identity();
  return std::make_unique<MegatronSource>(prefix, std::move(bin), std::move(index),
                                          std::move(idx_identity), eos_id);
}

absl::StatusOr<std::unique_ptr<DocumentSource>> OpenTokenFileSource(const std::string& path,
                                                                    const std::string& dtype,
                                                                    int64_t eos_id) {
  DDPIO_ASSIGN_OR_RETURN(TokenFile file, TokenFile::Open(path, "token file"));
  std::vector<uint8_t> magic;
  const bool npy = file.size() >= sizeof(kNpyMagic) &&
                   file.Read(0, sizeof(kNpyMagic), &magic).ok() &&
                   std::memcmp(magic.data(), kNpyMagic, sizeof(kNpyMagic)) == 0;
  IdType type;
  uint64_t data_offset = 0, count = 0;
  if (npy) {
    DDPIO_ASSIGN_OR_RETURN(NpyArrayInfo info, ReadNpyFile(path));
    if (info.is_float) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " holds ", info.descr, " floats, not token ids"));
    }
    if (info.shape.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " is a .npy of ", info.shape.size(),
                       " dimensions: a token file is one dimension of ids (numpy: a.ravel())"));
    }
    type = IdType{info.item_bytes, info.is_signed};
    const std::string own = absl::StrCat(info.is_signed ? "int" : "uint", 8 * info.item_bytes);
    if (!dtype.empty() && dtype != own) {
      return absl::InvalidArgumentError(absl::StrCat(path, " is a .npy of ", own, " ids (",
                                                     info.descr, "), not ", dtype,
                                                     ": leave the dtype out"));
    }
    data_offset = info.data_offset;
    count = info.element_count;
  } else {
    DDPIO_ASSIGN_OR_RETURN(type, RawDType(dtype, path));
    if (file.size() % type.bytes != 0) {
      return absl::DataLossError(absl::StrCat(path, " is ", file.size(),
                                              " bytes, not a whole number of ", dtype,
                                              " ids: cut short, or not ", dtype));
    }
    count = file.size() / type.bytes;
  }
  if (eos_id >= 0 && static_cast<uint64_t>(eos_id) >
                         (type.bytes >= 8 ? UINT64_MAX : (uint64_t{1} << (8 * type.bytes)) - 1)) {
    return absl::InvalidArgumentError(absl::StrCat("the EOS id ", eos_id, " does not fit ", path,
                                                   "'s ", 8 * type.bytes, "-bit ids"));
  }
  DDPIO_ASSIGN_OR_RETURN(std::vector<uint64_t> ends,
                         DocumentEnds(file, data_offset, count, type, eos_id));
  return std::make_unique<TokenFileSource>(std::move(file), data_offset, type, eos_id,
                                           std::move(ends));
}

}  // namespace ddpio::convert
