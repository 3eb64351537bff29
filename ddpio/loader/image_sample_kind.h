// ImageSampleKind: the loader's kind of sample for JPEG records (sample_kind.h), configured by
// LoaderOptions' image fields: `augment` (geometry and output size), `decode`, `seed`, `output`,
// and `mean` / `stddev` for float output. Each worker decodes and augments through a
// SampleProcessor of its own (sample_processor.h: fast IDCT in fast mode, restart-segment
// decoding, both on), then writes the sample as
//   OutputFormat::kUint8Nhwc  out_height x out_width x 3 uint8 (HWC): sample_bytes = H * W * 3;
//   OutputFormat::kFloatNchw  3 planes of out_height x out_width float32, (x / 255 - mean) / std
//                             per channel (through a table of the 256 values): sample_bytes =
//                             H * W * 3 * 4.
// A skipped bad sample is all zero bytes. Stage times: decode, augment (crop, resample, flip) and
// collate (the float conversion; zero for uint8 output).
//
//   auto kind = ImageSampleKind::Create(options);   // InvalidArgument for a bad output size
//   auto worker = (*kind)->NewWorker();             // one per thread
//   DDPIO_RETURN_IF_ERROR(worker->Fill(record, index, epoch, out, &nanos));
//
// Thread-safety: as SampleKind (the kind is immutable; one worker per thread).
#ifndef DDPIO_LOADER_IMAGE_SAMPLE_KIND_H_
#define DDPIO_LOADER_IMAGE_SAMPLE_KIND_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "ddpio/loader/augment.h"
#include "ddpio/loader/loader.h"
#include "ddpio/loader/sample_kind.h"
#include "ddpio/loader/sample_processor.h"

namespace ddpio::loader {

class ImageSampleKind : public SampleKind {
 public:
  // InvalidArgument for an output size that is not positive (augment.size < 1 or
  // augment.height < 0). Reads only the image fields of `options`.
  static absl::StatusOr<std::unique_ptr<ImageSampleKind>> Create(const LoaderOptions& options);

  size_t sample_bytes() const override;
  std::unique_ptr<SampleWorker> NewWorker() const override;

 private:
  class Worker;
  explicit ImageSampleKind(const LoaderOptions& options);

  // Constant after construction; read by every worker.
  AugmentOptions augment_;
  DecodeMode decode_;
  OutputFormat output_;
  uint64_t seed_;
  size_t plane_;                                 // out_width * out_height: pixels per channel
  std::array<std::array<float, 256>, 3> lut_{};  // uint8 -> normalised float, per channel
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_IMAGE_SAMPLE_KIND_H_
