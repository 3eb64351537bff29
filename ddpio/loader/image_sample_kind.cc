#include "ddpio/loader/image_sample_kind.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ddpio::loader {

class ImageSampleKind::Worker : public SampleWorker {
 public:
  explicit Worker(const ImageSampleKind& kind) : kind_(kind) {
    if (kind.output_ == OutputFormat::kFloatNchw) hwc_.resize(kind.plane_ * 3);
  }

  absl::Status Fill(const storage::RecordView& record, uint64_t index, uint64_t epoch,
                    absl::Span<uint8_t> out, SampleNanos* nanos) override {
    const bool as_float = kind_.output_ == OutputFormat::kFloatNchw;
    const StageNanos before = processor_.nanos();
    absl::Status st = processor_.Process(record, index, epoch, kind_.seed_, kind_.augment_,
                                         kind_.decode_, as_float ? hwc_.data() : out.data());
    nanos->decode += processor_.nanos().decode - before.decode;
    nanos->augment += processor_.nanos().augment - before.augment;
    if (!st.ok() || !as_float) return st;
    const auto t0 = std::chrono::steady_clock::now();
    ToFloatNchw(reinterpret_cast<float*>(out.data()));
    nanos->collate += static_cast<uint64_t>((std::chrono::steady_clock::now() - t0).count());
    return absl::OkStatus();
  }

  void Zero(absl::Span<uint8_t> out) override { std::memset(out.data(), 0, out.size()); }

 private:
  // hwc_ (uint8 HWC) into normalised float planes (CHW).
  void ToFloatNchw(float* f) const {
    const size_t plane = kind_.plane_;
    const auto& lut = kind_.lut_;
    const uint8_t* p = hwc_.data();
    for (size_t i = 0; i < plane; ++i) {
      f[i] = lut[0][p[3 * i]];
      f[plane + i] = lut[1][p[3 * i + 1]];
      f[2 * plane + i] = lut[2][p[3 * i + 2]];
    }
  }

  const ImageSampleKind& kind_;
  SampleProcessor processor_;
  std::vector<uint8_t> hwc_;  // one sample, for float output
};

absl::StatusOr<std::unique_ptr<ImageSampleKind>> ImageSampleKind::Create(
    const LoaderOptions& options) {
  if (options.augment.size <= 0 || options.augment.height < 0) {
    return absl::InvalidArgumentError(absl::StrCat("output size must be positive (augment.size ",
                                                   options.augment.size, ", augment.height ",
                                                   options.augment.height, ")"));
  }
  return std::unique_ptr<ImageSampleKind>(new ImageSampleKind(options));
}

ImageSampleKind::ImageSampleKind(const LoaderOptions& options)
    : augment_(options.augment),
      decode_(options.decode),
      output_(options.output),
      seed_(options.seed),
      plane_(static_cast<size_t>(options.augment.out_width()) * options.augment.out_height()) {
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) lut_[c][v] = (v / 255.0f - options.mean[c]) / options.stddev[c];
  }
}

size_t ImageSampleKind::sample_bytes() const {
  return output_ == OutputFormat::kFloatNchw ? plane_ * 3 * sizeof(float) : plane_ * 3;
}

std::unique_ptr<SampleWorker> ImageSampleKind::NewWorker() const {
  return std::make_unique<Worker>(*this);
}

}  // namespace ddpio::loader
