#include "ddpio/broadcast/feed_message.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::broadcast {
namespace {

constexpr char kMagic[4] = {'D', 'D', 'P', 'F'};
constexpr size_t kPrefixBytes = 16;
constexpr size_t kFixedBytes = 2 + 1 + 1 + 1 + 1 + 2 + 8 + 8 + 4 + 4;  // up to sample_shape
constexpr uint64_t kTag = 0xFEED;  // one tag: messages between two ranks pair up in order

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kBytes:
    case DType::kUint8:
      return 1;
    case DType::kFloat32:
    case DType::kUint32:
      return 4;
  }
  return 0;
}

absl::Status Bad(const std::string& what) {
  return absl::DataLossError(absl::StrCat("feed message: ", what));
}

// a * b, or false when it overflows.
bool MulOk(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return false;
  *out = a * b;
  return true;
}

// The prefix announcing a header of `header_bytes` and h.payload_bytes of payload.
void PutPrefix(uint8_t* prefix, uint32_t header_bytes, uint64_t payload_bytes) {
  std::memcpy(prefix, kMagic, 4);
  EncodeFixed32(prefix + 4, header_bytes);
  EncodeFixed64(prefix + 8, payload_bytes);
}

// Checks a received prefix against the limits before anything is sized from it; `from` names
// the sender. `header_room`: the most header bytes that can follow (a slot's size).
absl::Status CheckPrefix(const uint8_t* prefix, const FeedLimits& limits, const std::string& from,
                         uint64_t header_room, uint32_t* header_bytes, uint64_t* payload_bytes) {
  *header_bytes = DecodeFixed32(prefix + 4);
  *payload_bytes = DecodeFixed64(prefix + 8);
  if (std::memcmp(prefix, kMagic, 4) != 0)
    return Bad(absl::StrCat("no magic in the prefix from ", from));
  // The largest header the limits allow.
  const uint64_t max_header =
      std::min(header_room, kFixedBytes + 8 * uint64_t{limits.max_ndim} +
                                (8 + 4 + 1 + 8 + 8 + 8) * uint64_t{limits.max_samples} + 8);
  if (*header_bytes < kFixedBytes + 8 || *header_bytes > max_header) {
    return Bad(absl::StrCat("header of ", *header_bytes, " bytes from ", from, " (at most ",
                            max_header, " fit)"));
  }
  if (*payload_bytes > limits.max_payload_bytes) {
    return Bad(absl::StrCat("payload of ", *payload_bytes, " bytes from ", from,
                            ", more than the limit of ", limits.max_payload_bytes));
  }
  return absl::OkStatus();
}

// Every field is little-endian, as the format says (common/coding.h).
class Writer {
 public:
  template <typename T>
  void Put(T v) {
    PutLe(&out_, v);
  }
  template <typename T>
  void PutAll(const std::vector<T>& v) {
    PutLeAll(&out_, v);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : r_(in) {}
  template <typename T>
  bool Get(T* v) {
    return r_.Le(v);
  }
  // Reads n values; the caller has bounded n, and the length check comes before the resize.
  template <typename T>
  bool GetAll(size_t n, std::vector<T>* v) {
    return r_.LeAll(n, v);
  }
  size_t left() const { return r_.left(); }

 private:
  ByteReader r_;
};

}  // namespace

absl::Status ValidateFeedHeader(const FeedHeader& h, const FeedLimits& limits) {
  const size_t n = h.count();
  if (n > limits.max_samples)
    return Bad(absl::StrCat(n, " samples, more than the limit of ", limits.max_samples));
  if (h.labels.size() != n || h.valid.size() != n) {
    return Bad(absl::StrCat(n, " indices but ", h.labels.size(), " labels and ", h.valid.size(),
                            " validity flags"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (h.valid[i] > 1)
      return Bad(absl::StrCat("validity flag ", int{h.valid[i]}, " for sample ", i));
  }
  if (h.end_of_epoch && (n != 0 || h.payload_bytes != 0 || h.error))
    return Bad("end-of-epoch message with samples");
  if (h.error) {
    if (n != 0 || h.payload != PayloadKind::kEncoded || h.dtype != DType::kBytes ||
        !h.sample_shape.empty() || !h.sizes.empty() || !h.salts.empty() || !h.keys.empty() ||
        h.has_crc || h.payload_bytes < 4 || h.payload_bytes > kMaxErrorBytes) {
      return Bad(absl::StrCat("error message with samples, a shape or a payload of ",
                              h.payload_bytes, " bytes"));
    }
    return absl::OkStatus();
  }
  if (h.payload_bytes > limits.max_payload_bytes) {
    return Bad(absl::StrCat("payload of ", h.payload_bytes, " bytes, more than the limit of ",
                            limits.max_payload_bytes));
  }
  if (h.payload == PayloadKind::kEncoded) {
    if (h.dtype != DType::kBytes || !h.sample_shape.empty())
      return Bad("encoded records with a dtype or a shape");
    if (h.sizes.size() != n) return Bad(absl::StrCat(n, " samples but ", h.sizes.size(), " sizes"));
    if (h.salts.size() != h.keys.size() || (!h.salts.empty() && h.salts.size() != n)) {
      return Bad(
          absl::StrCat(n, " samples but ", h.salts.size(), " salts and ", h.keys.size(), " keys"));
    }
    if (h.has_crc)
      return Bad("encoded records with a payload checksum (each record carries its own)");
    uint64_t sum = 0;
    for (size_t i = 0; i < n; ++i) {
      if (h.sizes[i] > limits.max_sample_bytes) {
        return Bad(absl::StrCat("sample ", i, " (index ", h.indices[i], ") of ", h.sizes[i],
                                " bytes, more than the limit of ", limits.max_sample_bytes));
      }
      sum += h.sizes[i];  // n * max_sample_bytes cannot overflow 64 bits with sane limits
    }
    if (sum != h.payload_bytes) {
      return Bad(absl::StrCat("sample sizes add up to ", sum, " bytes, the payload has ",
                              h.payload_bytes));
    }
  } else if (h.payload == PayloadKind::kDecoded) {
    if (DTypeSize(h.dtype) == 0 || h.dtype == DType::kBytes)
      return Bad("decoded batch without a tensor dtype");
    if (!h.sizes.empty() || !h.salts.empty() || !h.keys.empty()) {
      return Bad("decoded batch with per-sample sizes or bindings");
    }
    if (h.sample_shape.size() > limits.max_ndim) {
      return Bad(absl::StrCat(h.sample_shape.size(), " dimensions, more than the limit of ",
                              limits.max_ndim));
    }
    uint64_t bytes = DTypeSize(h.dtype);
    for (uint64_t d : h.sample_shape) {
      if (d > limits.max_dim)
        return Bad(absl::StrCat("dimension ", d, " over the limit of ", limits.max_dim));
      if (!MulOk(bytes, d, &bytes)) return Bad("shape overflows");
    }
    if (!MulOk(bytes, n, &bytes)) return Bad("shape overflows");
    if (bytes != h.payload_bytes) {
      return Bad(absl::StrCat(n, " samples of this shape and dtype are ", bytes,
                              " bytes, the payload has ", h.payload_bytes));
    }
  } else {
    return Bad(absl::StrCat("unknown payload kind ", static_cast<int>(h.payload)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> EncodeFeedHeader(const FeedHeader& h) {
  absl::Status valid = ValidateFeedHeader(h, FeedLimits{});
  if (!valid.ok()) return absl::InvalidArgumentError(valid.message());
  Writer w;
  w.Put<uint16_t>(FeedHeader::kVersion);
  w.Put<uint8_t>(static_cast<uint8_t>(h.payload));
  w.Put<uint8_t>(static_cast<uint8_t>(h.dtype));
  w.Put<uint8_t>((h.end_of_epoch ? 1 : 0) | (h.error ? 2 : 0) | (h.has_crc ? 4 : 0) |
                 (h.salts.empty() ? 0 : 8));
  w.Put<uint8_t>(static_cast<uint8_t>(h.sample_shape.size()));
  w.Put<uint16_t>(0);
  w.Put<uint64_t>(h.epoch);
  w.Put<uint64_t>(h.step);
  w.Put<uint32_t>(static_cast<uint32_t>(h.count()));
  w.Put<uint32_t>(h.payload_crc);
  w.PutAll(h.sample_shape);
  w.PutAll(h.indices);
  w.PutAll(h.labels);
  w.PutAll(h.valid);
  w.PutAll(h.sizes);
  w.PutAll(h.salts);
  w.PutAll(h.keys);
  w.Put<uint64_t>(h.payload_bytes);
  return w.take();
}

absl::StatusOr<FeedHeader> DecodeFeedHeader(std::string_view bytes, const FeedLimits& limits) {
  Reader r(bytes);
  FeedHeader h;
  uint16_t version = 0, reserved16 = 0;
  uint8_t payload = 0, dtype = 0, flags = 0, ndim = 0;
  uint32_t count = 0;
  if (!r.Get(&version) || !r.Get(&payload) || !r.Get(&dtype) || !r.Get(&flags) || !r.Get(&ndim) ||
      !r.Get(&reserved16) || !r.Get(&h.epoch) || !r.Get(&h.step) || !r.Get(&count) ||
      !r.Get(&h.payload_crc)) {
    return Bad(absl::StrCat("header of ", bytes.size(), " bytes is shorter than the fixed part (",
                            kFixedBytes, ")"));
  }
  if (version != FeedHeader::kVersion) {
    return Bad(absl::StrCat("format version ", version, " (this ddpio speaks ",
                            FeedHeader::kVersion, ")"));
  }
  if (payload > 1 || dtype > 3 || (flags & ~15u) != 0 || reserved16 != 0 ||
      ((flags & 4) == 0 && h.payload_crc != 0)) {
    return Bad("unknown payload kind, dtype, flag or reserved bits");
  }
  if (count > limits.max_samples)
    return Bad(absl::StrCat(count, " samples, more than the limit of ", limits.max_samples));
  if (ndim > limits.max_ndim)
    return Bad(absl::StrCat(int{ndim}, " dimensions, more than the limit of ", limits.max_ndim));
  h.payload = static_cast<PayloadKind>(payload);
  h.dtype = static_cast<DType>(dtype);
  h.end_of_epoch = (flags & 1) != 0;
  h.error = (flags & 2) != 0;
  h.has_crc = (flags & 4) != 0;
  const bool encoded = h.payload == PayloadKind::kEncoded;
  const size_t bound = (flags & 8) != 0 ? count : 0;
  if (!r.GetAll(ndim, &h.sample_shape) || !r.GetAll(count, &h.indices) ||
      !r.GetAll(count, &h.labels) || !r.GetAll(count, &h.valid) ||
      (encoded && !r.GetAll(count, &h.sizes)) || !r.GetAll(bound, &h.salts) ||
      !r.GetAll(bound, &h.keys) || !r.Get(&h.payload_bytes)) {
    return Bad(
        absl::StrCat("header of ", bytes.size(), " bytes is truncated for ", count, " samples"));
  }
  if (r.left() != 0) return Bad(absl::StrCat(r.left(), " unexpected bytes after the header"));
  DDPIO_RETURN_IF_ERROR(ValidateFeedHeader(h, limits));
  return h;
}

FeedHeader FeedErrorHeader(uint64_t epoch, uint64_t step, const std::string& payload) {
  FeedHeader h;
  h.error = true;
  h.epoch = epoch;
  h.step = step;
  h.payload_bytes = payload.size();
  return h;
}

std::string EncodeFeedError(const absl::Status& status) {
  std::string out;
  PutFixed32(&out, static_cast<uint32_t>(status.code()));
  const absl::string_view text = status.message();
  out.append(text.data(), std::min<size_t>(text.size(), kMaxErrorBytes - 4));
  return out;
}

absl::Status DecodeFeedError(const std::vector<uint8_t>& payload, int from_rank) {
  uint32_t code = 0;
  if (payload.size() < 4) return Bad("error message without a status code");
  code = DecodeFixed32(payload.data());
  if (code == 0 || code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return Bad(absl::StrCat("error message with status code ", code));
  }
  absl::string_view text(reinterpret_cast<const char*>(payload.data()) + 4, payload.size() - 4);
  return absl::Status(static_cast<absl::StatusCode>(code),
                      absl::StrCat("from rank ", from_rank, ": ", text));
}

absl::Status SendFeedMessage(comm::Communicator& comm, int peer, const FeedHeader& h,
                             const void* payload, std::chrono::milliseconds timeout,
                             uint64_t* wire_bytes) {
  if (comm.device_memory()) {
    return absl::UnimplementedError(
        "feed messages travel in host memory; this communicator wants device memory");
  }
  DDPIO_ASSIGN_OR_RETURN(std::string header, EncodeFeedHeader(h));
  uint8_t prefix[kPrefixBytes];
  PutPrefix(prefix, static_cast<uint32_t>(header.size()), h.payload_bytes);
  DDPIO_RETURN_IF_ERROR(comm.Send(prefix, kPrefixBytes, peer, kTag, timeout));
  DDPIO_RETURN_IF_ERROR(comm.Send(header.data(), header.size(), peer, kTag, timeout));
  // 0 bytes: nothing sent
  DDPIO_RETURN_IF_ERROR(
      comm.SendChunked(payload, h.payload_bytes, kFeedChunkBytes, peer, kTag, timeout));
  if (wire_bytes != nullptr) *wire_bytes = kPrefixBytes + header.size() + h.payload_bytes;
  return absl::OkStatus();
}

namespace {

// Receives and validates a message's prefix and header from `peer` (nothing is sized from the
// wire before it is checked against `limits`); `raw` gets the prefix and header as they came.
absl::StatusOr<FeedHeader> RecvPrefixAndHeader(comm::Communicator& comm, int peer,
                                               const FeedLimits& limits,
                                               std::chrono::milliseconds timeout,
                                               std::string* raw) {
  if (comm.device_memory()) {
    return absl::UnimplementedError(
        "feed messages travel in host memory; this communicator wants device memory");
  }
  uint8_t prefix[kPrefixBytes];
  DDPIO_RETURN_IF_ERROR(comm.Recv(prefix, kPrefixBytes, peer, kTag, timeout));
  uint32_t header_bytes = 0;
  uint64_t payload_bytes = 0;
  DDPIO_RETURN_IF_ERROR(CheckPrefix(prefix, limits, absl::StrCat("rank ", peer),
                                    std::numeric_limits<uint64_t>::max(), &header_bytes,
                                    &payload_bytes));
  raw->assign(reinterpret_cast<const char*>(prefix), kPrefixBytes);
  raw->resize(kPrefixBytes + header_bytes);
  DDPIO_RETURN_IF_ERROR(comm.Recv(raw->data() + kPrefixBytes, header_bytes, peer, kTag, timeout));
  DDPIO_ASSIGN_OR_RETURN(FeedHeader h,
                         DecodeFeedHeader(std::string_view(*raw).substr(kPrefixBytes), limits));
  if (h.payload_bytes != payload_bytes) {
    return Bad(absl::StrCat("prefix announces ", payload_bytes, " payload bytes, the header ",
                            h.payload_bytes));
  }
  return h;
}

}  // namespace

absl::StatusOr<FeedHeader> RecvFeedMessage(comm::Communicator& comm, int peer,
                                           std::vector<uint8_t>* payload, const FeedLimits& limits,
                                           std::chrono::milliseconds timeout,
                                           uint64_t* wire_bytes) {
  std::string raw;
  DDPIO_ASSIGN_OR_RETURN(FeedHeader h, RecvPrefixAndHeader(comm, peer, limits, timeout, &raw));
  payload->resize(h.payload_bytes);
  DDPIO_RETURN_IF_ERROR(
      comm.RecvChunked(payload->data(), h.payload_bytes, kFeedChunkBytes, peer, kTag, timeout));
  if (wire_bytes != nullptr) *wire_bytes = raw.size() + h.payload_bytes;
  return h;
}

absl::StatusOr<FeedHeader> RelayFeedMessage(comm::Communicator& comm, int from, int to,
                                            std::vector<uint8_t>* payload, const FeedLimits& limits,
                                            std::chrono::milliseconds timeout,
                                            uint64_t* wire_bytes) {
  std::string raw;
  DDPIO_ASSIGN_OR_RETURN(FeedHeader h, RecvPrefixAndHeader(comm, from, limits, timeout, &raw));
  // Only a header that validated travels on: a damaged message stops here, at the first
  // member that sees it.
  DDPIO_RETURN_IF_ERROR(comm.Send(raw.data(), kPrefixBytes, to, kTag, timeout));
  DDPIO_RETURN_IF_ERROR(
      comm.Send(raw.data() + kPrefixBytes, raw.size() - kPrefixBytes, to, kTag, timeout));
  payload->resize(h.payload_bytes);
  DDPIO_RETURN_IF_ERROR(
      comm.RecvForward(payload->data(), h.payload_bytes, kFeedChunkBytes, from, to, kTag, timeout));
  if (wire_bytes != nullptr) *wire_bytes = raw.size() + h.payload_bytes;
  return h;
}

size_t FeedSlotBytes(uint32_t max_samples, uint32_t ndim) {
  return kPrefixBytes + kFixedBytes + 8 * size_t{ndim} + (8 + 4 + 1 + 8) * size_t{max_samples} + 8;
}

absl::Status EncodeFeedSlot(const FeedHeader& h, std::vector<uint8_t>* slot) {
  DDPIO_ASSIGN_OR_RETURN(std::string header, EncodeFeedHeader(h));
  if (kPrefixBytes + header.size() > slot->size()) {
    return absl::InvalidArgumentError(absl::StrCat("a header of ", header.size(),
                                                   " bytes does not fit a slot of ", slot->size()));
  }
  PutPrefix(slot->data(), static_cast<uint32_t>(header.size()), h.payload_bytes);
  std::memcpy(slot->data() + kPrefixBytes, header.data(), header.size());
  std::fill(slot->begin() + kPrefixBytes + header.size(), slot->end(), 0);
  return absl::OkStatus();
}

absl::StatusOr<FeedHeader> DecodeFeedSlot(const std::vector<uint8_t>& slot,
                                          const FeedLimits& limits, const std::string& from) {
  if (slot.size() < kPrefixBytes)
    return Bad(absl::StrCat("a header slot of ", slot.size(), " bytes from ", from));
  uint32_t header_bytes = 0;
  uint64_t payload_bytes = 0;
  DDPIO_RETURN_IF_ERROR(CheckPrefix(slot.data(), limits, from, slot.size() - kPrefixBytes,
                                    &header_bytes, &payload_bytes));
  DDPIO_ASSIGN_OR_RETURN(
      FeedHeader h,
      DecodeFeedHeader(
          std::string_view(reinterpret_cast<const char*>(slot.data()) + kPrefixBytes, header_bytes),
          limits));
  if (h.payload_bytes != payload_bytes) {
    return Bad(absl::StrCat("prefix announces ", payload_bytes, " payload bytes, the header ",
                            h.payload_bytes));
  }
  return h;
}

}  // namespace ddpio::broadcast
