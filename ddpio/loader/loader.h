// Loader: turns a rank's sampler stream into ready batches, faster than a trainer consumes them.
//
// Pipeline: read (zero-copy from the dataset reader) -> decode (only the crop's region, or the
// full image in exact mode) -> augment (torchvision semantics, seeded per sample) -> collate into
// a batch slot in pinned host memory -> bounded prefetch -> consumer; optionally an asynchronous
// copy to the GPU on a dedicated stream. N worker threads each assemble whole batches; batches
// come out in sampler order whatever the worker count and timing, and are identical for any
// worker count. At an epoch's end a worker with no batch left to claim helps finish the others'
// sample by sample, so the last batches are not left to one worker each. Slots (window + 1 of them;
// the window, batches in flight at most, is max(prefetch, workers + 1), or max(prefetch, 1) with
// one worker) are allocated once and reused; a consumer that keeps batches (NextHeld) grows the
// pool by up to held_batches - 1 more. What a record becomes in its batch (decode, augment,
// output layout) is the sample kind's (sample_kind.h): images, from LoaderOptions' image fields
// (image_sample_kind.h).
//
//   auto loader = Loader::Create(reader.get(), sampler_options, rank, options);
//   for (uint64_t epoch = 0; epoch < epochs; ++epoch) {
//     DDPIO_RETURN_IF_ERROR((*loader)->StartEpoch(epoch));
//     for (;;) {
//       auto batch = (*loader)->Next();
//       if (absl::IsOutOfRange(batch.status())) break;    // end of epoch
//       DDPIO_RETURN_IF_ERROR(batch.status());
//       Train(*batch);
//     }
//   }
//
// Thread-safety: one consumer thread calls StartEpoch / Next / stats; workers are internal.
// Shutdown: StartEpoch or destruction mid-epoch stops the workers after the sample each is on.
#ifndef DDPIO_LOADER_LOADER_H_
#define DDPIO_LOADER_LOADER_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/device/cuda_runtime.h"
#include "ddpio/loader/augment.h"
#include "ddpio/loader/host_memory.h"
#include "ddpio/loader/record_source.h"
#include "ddpio/loader/sample_processor.h"
#include "ddpio/sampler/distributed_sampler.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::loader {

enum class OutputFormat {
  kUint8Nhwc,  // default: 4x less host-to-device traffic; normalise on the device
  kFloatNchw,  // float32, (x / 255 - mean) / std per channel
};
enum class BadSamplePolicy {
  kFail,  // default: Next() returns DataLoss naming index, key and source file
  kSkip,  // zero pixels, valid = 0, counted and listed in stats()
};
// "fail" / "skip".
std::string BadSamplePolicyName(BadSamplePolicy policy);
absl::StatusOr<BadSamplePolicy> ParseBadSamplePolicy(std::string_view name);
// "uint8" / "float".
std::string OutputFormatName(OutputFormat format);
absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name);

// Records a loader asks for ahead of the batch being assembled when they come from an object
// store: this many batches, at most this many records (a few tens of MB of a budget of 256 MiB).
inline constexpr uint64_t kRemoteLookaheadBatches = 8;
inline constexpr uint64_t kRemoteLookaheadRecords = 2048;
// The records a reader of `batch_size` keeps asked for ahead from an object store.
inline uint64_t RemoteLookaheadRecords(uint64_t batch_size) {
  return batch_size * kRemoteLookaheadBatches < kRemoteLookaheadRecords
             ? batch_size * kRemoteLookaheadBatches
             : kRemoteLookaheadRecords;
}

struct LoaderOptions {
  int workers = 0;   // worker threads; 0: the cores available
  int prefetch = 2;  // batches assembled ahead of the consumer
  uint64_t batch_size = 64;
  bool drop_last = false;  // drop a short last batch (as DataLoader's drop_last)
  OutputFormat output = OutputFormat::kUint8Nhwc;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};  // kFloatNchw normalisation (ImageNet)
  std::array<float, 3> stddev = {0.229f, 0.224f, 0.225f};
  AugmentOptions augment;  // train (RandomResizedCrop + flip) or eval geometry, output size
  DecodeMode decode = DecodeMode::kFast;
  BadSamplePolicy bad_samples = BadSamplePolicy::kFail;
  uint64_t seed = 0;  // augmentation seed (the sampler has its own)
  // Token sequences instead of images (token_sample_kind.h): the records are packed sequences of
  // seq_len + 1 ids (storage/token_sequences.h), each sample their ids as uint32. 0 (default):
  // images, from the fields above.
  uint64_t seq_len = 0;
  bool copy_to_device = false;  // with a usable CUDA runtime: stage each batch on the GPU
  // Before reading a batch from the dataset, ask the OS to read all of its records at once
  // (storage::ReadTxn::Prefetch): one IO per record, a batch of them in flight, instead of one
  // 4 KiB page fault at a time. Default on; costs a lookup per record when the data is cached.
  bool prefetch_records = true;
  // Batches the consumer may hold at once through NextHeld() (Next() holds one at a time). The
  // pool of slots grows lazily, when a worker finds none free, up to window + held_batches slots
  // (the window: max(prefetch, workers + 1), or max(prefetch, 1) with one worker), and never
  // shrinks: held batches cost at most held_batches - 1 extra slots of batch_size samples each.
  int held_batches = 1;
  // NextHeld() with held_batches batches already held waits this long for one to be released
  // (by another thread), then fails ResourceExhausted — a slot is never reused while held.
  std::chrono::milliseconds held_timeout{std::chrono::seconds(10)};
  // What NextHeld() does with held_batches batches already held. kWait (default): waits
  // held_timeout as above. kCopy: hands out a copy of the next batch in memory of its own (plain,
  // not page-locked; no device copy) and reuses the slot at once, so a consumer that keeps every
  // batch (Python's list(loader)) never stalls — memory then grows with what it keeps, as for
  // any list. Not with copy_to_device (InvalidArgument).
  enum class HeldOverflow { kWait, kCopy };
  HeldOverflow held_overflow = HeldOverflow::kWait;
};
// "wait" / "copy".
std::string HeldOverflowName(LoaderOptions::HeldOverflow overflow);
absl::StatusOr<LoaderOptions::HeldOverflow> ParseHeldOverflow(std::string_view name);

// One batch. From Next(): valid until the next Next(), StartEpoch() or the loader's destruction.
// From NextHeld(): valid as long as its HeldBatch::hold.
struct Batch {
  uint64_t epoch = 0;
  uint64_t step = 0;              // batch number within this epoch's plan
  uint64_t size = 0;              // samples in this batch (<= batch_size)
  const uint8_t* data = nullptr;  // uint8 NHWC or float NCHW, size samples, in the slot
  size_t bytes = 0;
  const int32_t* labels = nullptr;
  const uint64_t* indices = nullptr;  // dataset indices
  const uint8_t* valid = nullptr;     // 0: sampler padding or a skipped bad sample
  void* device_data = nullptr;        // the same bytes on the GPU, when copied
};

// A batch its holder keeps as long as it likes: the memory behind `batch` is neither reused nor
// freed until the last copy of `hold` is gone — also after the loader itself is destroyed (a
// CudaRuntime given to the loader must outlive the holds).
struct HeldBatch {
  Batch batch;
  std::shared_ptr<void> hold;
};

// A copy of `batch` (its data, labels, indices and valid flags) in memory the returned hold owns:
// what NextHeld hands out past the held limit with HeldOverflow::kCopy. No device data.
HeldBatch CopyBatch(const Batch& batch);

struct SkippedSample {
  uint64_t index = 0;
  std::string reason;
};

struct LoaderStats {
  uint64_t images = 0, batches = 0, bad_samples = 0;
  std::vector<SkippedSample> skipped;                                   // first 100
  uint64_t read_ns = 0, decode_ns = 0, augment_ns = 0, collate_ns = 0;  // summed over workers
  uint64_t wait_ns = 0;        // consumer time blocked in Next()
  uint64_t payload_bytes = 0;  // stored bytes read
  uint64_t slot_bytes = 0;     // host bytes in batch slots (slots x batch bytes)
  int slots = 0;
  int workers = 0;
  HostMemoryKind memory = HostMemoryKind::kPlain;
  uint64_t slot_allocations = 0;  // host buffers ever allocated (grows only with NextHeld)
  int held = 0;                   // batches the consumer holds now
  uint64_t copied = 0;            // batches handed out as copies (HeldOverflow::kCopy)
  // Samples assembled by a worker for another worker's batch: at the end of an epoch a worker
  // with no batch left to claim takes samples of the batches still being assembled.
  uint64_t shared_samples = 0;
};

namespace internal {
struct LoaderAccess;  // internal/loader_impl.h
}  // namespace internal

class Loader {
 public:
  // `reader` must outlive the loader. `cuda` may be null (CPU). InvalidArgument for a rank
  // outside the sampler's world, a zero batch size or output size; ResourceExhausted when slot
  // memory cannot be allocated.
  static absl::StatusOr<std::unique_ptr<Loader>> Create(const storage::DatasetReader* reader,
                                                        const sampler::SamplerOptions& sampler,
                                                        int rank, const LoaderOptions& options,
                                                        device::CudaRuntime* cuda = nullptr);
  // Records come from `source` (which must outlive the loader) instead of a dataset: batch b of
  // an epoch is source->Fetch(epoch, b), checked index by index against this loader's sampler
  // and checksummed. `sampler.dataset_size` is the dataset's size as the source knows it.
  static absl::StatusOr<std::unique_ptr<Loader>> Create(RecordSource* source,
                                                        const sampler::SamplerOptions& sampler,
                                                        int rank, const LoaderOptions& options,
                                                        device::CudaRuntime* cuda = nullptr);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts `epoch` from `start` entries of its order already consumed (0: the whole epoch;
  // resume with ResumePosition()). Stops an epoch in flight. Logs a warning if a shuffled
  // epoch is started twice in a row (a forgotten epoch increment).
  absl::Status StartEpoch(uint64_t epoch, uint64_t start = 0);

  // The next batch in sampler order. OutOfRange at the end of the epoch; DataLoss naming index
  // and key for a bad sample under kFail; FailedPrecondition before StartEpoch.
  absl::StatusOr<Batch> Next();
  // The same, but the caller keeps the batch until it drops the hold (zero-copy: the batch is the
  // slot). Up to held_batches at once, counting the one Next() holds; beyond that waits up to
  // held_timeout for a release, then ResourceExhausted naming the limit (IsHeldLimit,
  // hold_gate.h: nothing was consumed; call again once a batch is released).
  absl::StatusOr<HeldBatch> NextHeld();
  // Whether the next batch is assembled (or the epoch has none left, or none was started),
  // waiting up to `timeout`; consumes nothing. A caller that must see signals (Python's Ctrl-C)
  // waits in slices before NextHeld, which may then still wait for a held batch's release.
  bool WaitReady(std::chrono::milliseconds timeout);

  // Stops the epoch in flight (workers finish the sample they are on); Next() then fails until
  // the next StartEpoch.
  void Stop();

  // Batches in the current epoch plan.
  uint64_t NumBatches() const;
  // The current plan (after StartEpoch).
  const std::optional<sampler::EpochPlan>& plan() const;
  // The sampler position to store in a checkpoint after the batches delivered so far: pass it
  // to StartEpoch(epoch, position) to continue exactly there (any world size).
  uint64_t ResumePosition() const;

  LoaderStats stats() const;
  // Bytes of one sample in a batch's data (uint8 HWC or float CHW, as `output` asks).
  size_t sample_bytes() const;

 private:
  class Impl;  // internal/loader_impl.h
  friend struct internal::LoaderAccess;
  explicit Loader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_LOADER_H_
