#include "ddpio/loader/token_sample_kind.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::loader {
namespace {

inline constexpr uint64_t kMaxSeqLen = uint64_t{1} << 24;

class Worker : public SampleWorker {
 public:
  explicit Worker(uint64_t seq_len) : seq_len_(seq_len) {}

  absl::Status Fill(const storage::RecordView& record, uint64_t, uint64_t, absl::Span<uint8_t> out,
                    SampleNanos* nanos) override {
    const auto start = std::chrono::steady_clock::now();
    const int width = storage::TokenWidth(record.type);
    const uint64_t ids = width == 0 ? 0 : record.payload.size() / static_cast<size_t>(width);
    if (width == 0 || ids != seq_len_ + 1 || out.size() != ids * sizeof(uint32_t)) {
      return absl::DataLossError(absl::StrCat(
          "a sequence of ", seq_len_ + 1, " token ids was expected, the record holds ",
          width == 0 ? absl::StrCat("content type ", storage::ContentTypeName(record.type))
                     : absl::StrCat(ids, " ids")));
    }
    for (uint64_t i = 0; i < ids; ++i) {
      const uint32_t id = storage::TokenAt(record.payload, width, i);
      std::memcpy(out.data() + i * sizeof(uint32_t), &id, sizeof(id));  // little-endian hosts
    }
    nanos->collate += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now() - start)
                                                .count());
    return absl::OkStatus();
  }
  void Zero(absl::Span<uint8_t> out) override { std::memset(out.data(), 0, out.size()); }

 private:
  uint64_t seq_len_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TokenSampleKind>> TokenSampleKind::Create(uint64_t seq_len) {
  if (seq_len == 0 || seq_len > kMaxSeqLen) {
    return WithSetting(absl::InvalidArgumentError(absl::StrCat("seq_len must be from 1 to ",
                                                               kMaxSeqLen, ", not ", seq_len)),
                       "seq_len");
  }
  return std::unique_ptr<TokenSampleKind>(new TokenSampleKind(seq_len));
}

std::unique_ptr<SampleWorker> TokenSampleKind::NewWorker() const {
  return std::make_unique<Worker>(seq_len_);
}

}  // namespace ddpio::loader
