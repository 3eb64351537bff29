// The group feeder's wire format: every message is a fixed prefix, a self-describing header,
// then the payload. The receiver checks every field against hard limits before it allocates
// anything, and rejects an inconsistent or oversized message with DataLoss.
//
// Prefix (16 bytes, little-endian): magic "DDPF", u32 header bytes, u64 payload bytes.
// Header (little-endian, packed, exactly as long as the prefix says):
//   u16 version (FeedHeader::kVersion, 2) | u8 payload kind (0 encoded records, 1 decoded batch)
//   | u8 dtype (0 bytes, 1 uint8, 2 float32, 3 uint32) | u8 flags (bit 0: end of epoch, bit 1:
//   error, bit 2: payload CRC present, bit 3: records bound) | u8 ndim | u16 reserved (0) u64 epoch
//   | u64 step | u32 count | u32 payload_crc (0 unless flag bit 2) u64 sample_shape[ndim] decoded:
//   the shape of one sample (e.g. H, W, C) u64 indices[count] | i32 labels[count] | u8 valid[count]
//   (0 or 1) u64 sizes[count]                encoded only: each sample's stored bytes, in order u64
//   salts[count] | u64 keys[count]   encoded, flag bit 3 only: each record's binding u64
//   payload_bytes               = sum(sizes) (encoded) or count * prod(shape) * dtype size
// Payload: the samples' bytes back to back (encoded) or the collated batch (decoded), sent as
// chunks of kFeedChunkBytes (prefix and header are one message each).
// An end-of-epoch message has count 0 and no payload; a short last batch just has a smaller
// count; zero-size dimensions give a zero-byte payload. An error message (the sender failed, e.g.
// a corrupt record under the `fail` policy) has count 0 and a payload of u32 status code + the
// error text, at most kMaxErrorBytes (EncodeFeedError / DecodeFeedError).
#ifndef DDPIO_BROADCAST_FEED_MESSAGE_H_
#define DDPIO_BROADCAST_FEED_MESSAGE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/comm/communicator.h"

namespace ddpio::broadcast {

enum class PayloadKind : uint8_t { kEncoded = 0, kDecoded = 1 };
// kUint32: token sequences' ids (loader/token_sample_kind.h).
enum class DType : uint8_t { kBytes = 0, kUint8 = 1, kFloat32 = 2, kUint32 = 3 };

struct FeedLimits {
  uint32_t max_samples = 1 << 16;  // per message
  uint32_t max_ndim = 4;
  uint64_t max_dim = 1 << 25;                      // any one dimension (a token sequence)
  uint64_t max_sample_bytes = uint64_t{64} << 20;  // one encoded record
  uint64_t max_payload_bytes = uint64_t{4} << 30;  // one message
};

struct FeedHeader {
  // Version 2: encoded records carry their bindings (salt and key, storage/record.h), decoded
  // batches the CRC32C of their payload.
  static constexpr uint16_t kVersion = 2;
  PayloadKind payload = PayloadKind::kEncoded;
  DType dtype = DType::kBytes;
  bool end_of_epoch = false;
  bool error = false;
  uint64_t epoch = 0;
  uint64_t step = 0;
  std::vector<uint64_t> sample_shape;  // decoded only
  std::vector<uint64_t> indices;
  std::vector<int32_t> labels;
  std::vector<uint8_t> valid;
  std::vector<uint64_t> sizes;  // encoded only
  // Encoded only: each record's binding (its file's salt and its key there), so the receiver
  // checks a format-3 record's checksum as the reader did; 0, 0 for a record that is not bound.
  std::vector<uint64_t> salts, keys;
  // Decoded only, when has_crc: the CRC32C of the payload, checked on receipt (a batch damaged on
  // the way is DataLoss, never trained on). Not for payloads in device memory.
  bool has_crc = false;
  uint32_t payload_crc = 0;
  uint64_t payload_bytes = 0;

  size_t count() const { return indices.size(); }
};

// OK when every field is consistent and within `limits`; DataLoss naming the field otherwise.
absl::Status ValidateFeedHeader(const FeedHeader& h, const FeedLimits& limits);

// Serialises a header (which must validate under default limits: InvalidArgument otherwise).
absl::StatusOr<std::string> EncodeFeedHeader(const FeedHeader& h);
// Parses and validates; DataLoss for anything truncated, trailing, unknown or out of limits.
absl::StatusOr<FeedHeader> DecodeFeedHeader(std::string_view bytes, const FeedLimits& limits);

// An error message's header and payload, and the Status it carries (DataLoss for a malformed one).
inline constexpr uint64_t kMaxErrorBytes = 64 << 10;
FeedHeader FeedErrorHeader(uint64_t epoch, uint64_t step, const std::string& payload);
std::string EncodeFeedError(const absl::Status& status);
absl::Status DecodeFeedError(const std::vector<uint8_t>& payload, int from_rank);

// The payload travels in chunks of this many bytes (the last one shorter), so that a member of a
// chain can forward a message while it is still arriving (RelayFeedMessage).
inline constexpr size_t kFeedChunkBytes = size_t{1} << 20;

// Sends prefix, header and payload to `peer` (payload_bytes of `payload`).
// `wire_bytes` (optional) gets the bytes that travelled: prefix + header + payload.
absl::Status SendFeedMessage(comm::Communicator& comm, int peer, const FeedHeader& h,
                             const void* payload, std::chrono::milliseconds timeout,
                             uint64_t* wire_bytes = nullptr);
// Receives one message from `peer`: validates the prefix and the header before sizing `payload`.
absl::StatusOr<FeedHeader> RecvFeedMessage(comm::Communicator& comm, int peer,
                                           std::vector<uint8_t>* payload, const FeedLimits& limits,
                                           std::chrono::milliseconds timeout,
                                           uint64_t* wire_bytes = nullptr);

// Receives one message from `from` as RecvFeedMessage does and sends it on to `to` as it
// arrives: the prefix and the (validated) header first, then each payload chunk as soon as it is
// in. Replicate mode's pipelined chain: every link carries a group's data once. `wire_bytes`
// gets the bytes received (the same number went on to `to`).
absl::StatusOr<FeedHeader> RelayFeedMessage(comm::Communicator& comm, int from, int to,
                                            std::vector<uint8_t>* payload, const FeedLimits& limits,
                                            std::chrono::milliseconds timeout,
                                            uint64_t* wire_bytes = nullptr);

// Fixed-size header slots, for transports where a receive is posted with its size before the
// bytes arrive (NCCL): the prefix and the header as above, then zeros up to the slot's size, which
// both sides compute from the largest message they exchange. The payload follows as a message of
// its own, of the size the slot announces.
size_t FeedSlotBytes(uint32_t max_samples, uint32_t ndim);
// Fills `slot` (already of the slot size); InvalidArgument when the header does not fit.
absl::Status EncodeFeedSlot(const FeedHeader& h, std::vector<uint8_t>* slot);
// Parses and validates a received slot; DataLoss naming `from` for anything malformed.
absl::StatusOr<FeedHeader> DecodeFeedSlot(const std::vector<uint8_t>& slot,
                                          const FeedLimits& limits, const std::string& from);

}  // namespace ddpio::broadcast

#endif  // DDPIO_BROADCAST_FEED_MESSAGE_H_
