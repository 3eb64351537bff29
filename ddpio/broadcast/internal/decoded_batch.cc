// Decoded batches on the wire (decoded_batch.h).
#include "ddpio/broadcast/internal/decoded_batch.h"

#include "absl/strings/str_cat.h"
#include "ddpio/storage/checksum.h"

namespace ddpio::broadcast::internal {

FeedHeader DecodedHeader(const loader::Batch& batch, const loader::LoaderOptions& options) {
  FeedHeader h;
  h.payload = PayloadKind::kDecoded;
  const uint64_t w = static_cast<uint64_t>(options.augment.out_width());
  const uint64_t ht = static_cast<uint64_t>(options.augment.out_height());
  if (options.seq_len > 0) {  // a token sequence's ids
    h.dtype = DType::kUint32;
    h.sample_shape = {options.seq_len + 1};
  } else if (options.output == loader::OutputFormat::kUint8Nhwc) {
    h.dtype = DType::kUint8;
    h.sample_shape = {ht, w, 3};
  } else {
    h.dtype = DType::kFloat32;
    h.sample_shape = {3, ht, w};
  }
  h.indices.assign(batch.indices, batch.indices + batch.size);
  h.labels.assign(batch.labels, batch.labels + batch.size);
  h.valid.assign(batch.valid, batch.valid + batch.size);
  h.payload_bytes = batch.bytes;
  if (batch.data != nullptr) {  // decoded in host memory: checked on receipt
    h.has_crc = true;
    h.payload_crc = storage::Crc32c(batch.data, batch.bytes);
  }
  return h;
}

absl::Status CheckDecoded(const FeedHeader& h, const sampler::EpochPlan& plan, int stream_rank,
                          uint64_t step, const sampler::BatchRange& range,
                          const loader::LoaderOptions& options, const std::string& from) {
  loader::Batch shape_of;
  const FeedHeader want = DecodedHeader(shape_of, options);
  const uint64_t n = range.end - range.begin;
  if (h.payload != PayloadKind::kDecoded || h.dtype != want.dtype ||
      h.sample_shape != want.sample_shape) {
    return absl::DataLossError(
        absl::StrCat("batch ", step, " from ", from,
                     " is not a decoded batch of this rank's output shape and type"));
  }
  if (h.epoch != plan.epoch() || h.step != step || h.count() != n) {
    return absl::DataLossError(absl::StrCat(
        "out of step with ", from, ": expected epoch ", plan.epoch(), " batch ", step, " of ", n,
        " samples, got epoch ", h.epoch, " batch ", h.step, " of ", h.count()));
  }
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t expected = plan.IndexAt(stream_rank, range.begin + k);
    if (h.indices[k] != expected) {
      return absl::DataLossError(absl::StrCat("out of step with ", from, ": batch ", step,
                                              " position ", k, " holds sample ", h.indices[k],
                                              ", this rank's sampler expects ", expected));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDecodedPayload(const FeedHeader& h, const std::vector<uint8_t>& payload,
                                 uint64_t step, const std::string& from) {
  if (!h.has_crc) return absl::OkStatus();
  const uint32_t crc = storage::Crc32c(payload.data(), payload.size());
  if (crc == h.payload_crc) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("decoded batch ", step, " of epoch ", h.epoch, " from ",
                                          from, " is damaged: its payload's CRC32C is ",
                                          absl::Hex(crc, absl::kZeroPad8), ", the sender's ",
                                          absl::Hex(h.payload_crc, absl::kZeroPad8)));
}

}  // namespace ddpio::broadcast::internal
