// PipelineOptions: everything a trainer sets to get its batches from a Pipeline (pipeline.h), in
// one flat struct. Each field says its default and what it is for; its type, range and help for
// the program's flags and the Python keywords are in the settings table (settings.h), whose check
// Pipeline::CheckOptions and Open run: a value out of range fails with InvalidArgument naming it.
// The pipeline builds the sampler's, loader's and group feeder's own settings from these. Plain
// values: no thread-safety concerns.
//
//   ddpio::PipelineOptions o;
//   o.data = "/data/train.lmdb";
//   o.batch_size = 256;
//   o.image_size = 176;
//   o.group_size = 4;
#ifndef DDPIO_PIPELINE_PIPELINE_OPTIONS_H_
#define DDPIO_PIPELINE_PIPELINE_OPTIONS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ddpio/broadcast/feeder_options.h"
#include "ddpio/comm/group_layout.h"
#include "ddpio/loader/loader.h"
#include "ddpio/sampler/distributed_sampler.h"
#include "ddpio/storage/store_settings.h"

namespace ddpio {

struct PipelineOptions {
  // --- The data and the group ---
  // Required: the dataset (`ddpio convert`'s output). Opened by the ranks that read it; every
  // other member opens it only to check that the group names the same data.
  std::string data;
  // Ranks per group; only the group's leader reads storage and feeds its peers. Default 1 (every
  // rank reads for itself); must divide the world size.
  int group_size = 1;
  // Which ranks form a group. Default contiguous (consecutive ranks: a group within a node);
  // strided puts one rank of each node in a group.
  comm::LayoutKind layout = comm::LayoutKind::kContiguous;
  // shard (default): rank r gets the DistributedSampler's share r; replicate: every member gets
  // its group's batches (the sampler runs over groups).
  broadcast::FeedMode mode = broadcast::FeedMode::kShard;
  // encoded (default): stored records travel and every rank decodes its own; decoded: the leader
  // decodes and augments for the group and sends ready batches (over NCCL, device to device).
  broadcast::FeedPayload payload = broadcast::FeedPayload::kEncoded;
  // leader (default): the leader reads for the group; all: every rank reads its own stream (the
  // baseline without group feeding: nothing crosses the network).
  broadcast::FeedReaders readers = broadcast::FeedReaders::kLeader;
  // replicate: chain (default; each member forwards to the next, every link carries the data
  // once) or star (the leader sends each member a copy).
  broadcast::FeedRelay relay = broadcast::FeedRelay::kChain;
  // Records a leader asks storage for ahead of the one it copies. Default 64; >= 0 (0: none).
  int read_ahead = 64;
  // Messages a leader may run ahead of each peer. Default 2; >= 1.
  int depth = 2;
  // A dataset in an object store (s3://; not the rendezvous store): how to reach it, as
  // storage::ReaderOptions::store_settings and store_overrides (storage/dataset_reader.h). Default:
  // no settings and no explicit value, so that opening resolves them from the process
  // environment (AWS_*, DDPIO_S3_*); each value set in store_overrides wins over the
  // environment's. Used by every rank that opens or identifies the dataset; ignored for a local
  // one.
  std::optional<storage::StoreSettings> store_settings;
  storage::StoreOverrides store_overrides;
  // Longest wait of any one send, receive or collective (and, for Open(options), of joining the
  // job). Default 120 s; > 0.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};

  // --- The sampler (torch's DistributedSampler) ---
  bool shuffle = true;  // default true
  // The sampler's seed: epoch e is shuffled with seed + e, as torch's. Default 0.
  uint64_t seed = 0;
  // A world that does not divide the dataset: pad (default, torch's), drop (drop_last=True),
  // none (uneven shares) or mask (padding flagged in Batch::valid: every sample exactly once).
  sampler::Padding padding = sampler::Padding::kPad;
  // The permutation: torch (default; current PyTorch's randperm), torch-legacy or feistel (no
  // memory: for datasets beyond 2^33 samples).
  sampler::PermutationKind permutation = sampler::PermutationKind::kTorch;
  // exact (default: torch's order, any record at any time) or block (chunks of records kept
  // together, a few per reader at a time: an object store read a whole chunk per GET with a
  // bounded cache; sampler/block_order.h).
  sampler::Order order = sampler::Order::kExact;
  // The block order: records per chunk (default 128; >= 1), chunks a reader's shuffle spreads over
  // (default 128; >= 1; a reader keeps about window + 2 chunks in its cache), lanes the chunks are
  // dealt to (default 0: one per reader of the world that plans the epoch; a job resumed on another
  // world size keeps the lanes it recorded).
  uint64_t block_chunk = storage::remote::kDefaultBlockChunkRecords;
  uint64_t block_window = 128;
  uint64_t block_lanes = 0;
  // Requests a second the whole job may send the object store of an s3:// dataset (default 0: no
  // cap); each reading rank takes an equal share. Either way each reader's rate falls when the
  // store answers 503 SlowDown, 429 or times out, and grows back after (s3/rate_governor.h).
  double store_max_requests_per_s = 0;
  // Log a warning when a shuffled epoch is started twice from its start (a forgotten epoch
  // change). Default on.
  bool warn_repeated_epoch = true;

  // --- Batches ---
  // A token dataset (documents of token ids, for a language model): its documents packed into
  // sequences of seq_len + 1 ids (storage/token_sequences.h), each sample one sequence's ids as
  // uint32 (loader/token_sample_kind.h); the sampler deals sequences as it deals images. Required
  // for a token dataset, 0 (default) for an image one; at most 2^24.
  uint64_t seq_len = 0;
  uint64_t batch_size = 64;  // samples per batch on this rank. Default 64; >= 1
  bool drop_last = false;    // drop a short last batch (DataLoader's drop_last). Default false
  int workers = 0;           // decoding threads on this rank. Default 0: the cores available
  int prefetch = 2;          // batches assembled ahead of the consumer. Default 2; >= 1
  // uint8 NHWC (default: the stored pixels, 4x less host-to-device traffic) or float32 NCHW
  // normalised with mean and stddev.
  loader::OutputFormat output = loader::OutputFormat::kUint8Nhwc;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};    // float output; default ImageNet's
  std::array<float, 3> stddev = {0.229f, 0.224f, 0.225f};  // float output; no 0
  // fast (default: only the crop's region, DCT-scaled) or exact (torchvision's pixels).
  loader::DecodeMode decode = loader::DecodeMode::kFast;
  // A record that cannot be decoded: fail (default: Next() is DataLoss naming it) or skip (zero
  // pixels, Batch::valid 0, counted in the counters).
  loader::BadSamplePolicy bad_samples = loader::BadSamplePolicy::kFail;

  // --- Augmentation (torchvision's geometry) ---
  // true (default): RandomResizedCrop + horizontal flip; false: Resize + CenterCrop (evaluation).
  bool train = true;
  int image_size = 224;  // output width, and height unless image_height is set. >= 1
  int image_height = 0;  // output height; default 0: image_size (square)
  int resize_size =
      0;  // evaluation: shorter side before the crop; 0: the larger output side * 256 / 224
  double scale_min = 0.08;  // RandomResizedCrop area range: 0 < scale_min <= scale_max <= 1
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;  // RandomResizedCrop aspect-ratio range: 0 < min <= max
  double ratio_max = 4.0 / 3.0;
  double flip_probability = 0.5;  // in [0, 1]; 0 disables the flip
  // The augmentation's seed (crops and flips of sample i in epoch e depend on it, i and e only).
  // Default 0.
  uint64_t augment_seed = 0;

  // --- Memory and the device ---
  // Ask the OS for a batch's records at once before reading them. Default on.
  bool prefetch_records = true;
  // Batches the consumer may hold at once through NextHeld(). Default 1; >= 1.
  int held_batches = 1;
  // NextHeld() with held_batches held: wait this long for a release, then ResourceExhausted
  // (held_overflow kWait, the default), or hand out a copy at once (kCopy; not with
  // copy_to_device). Default 10 s.
  std::chrono::milliseconds held_timeout{std::chrono::seconds(10)};
  loader::LoaderOptions::HeldOverflow held_overflow = loader::LoaderOptions::HeldOverflow::kWait;
  // The CUDA runtime (device/cuda_runtime.h) of this rank's device, or null (default). Given, batch
  // slots are page-locked memory it knows, and with copy_to_device (encoded payload only) every
  // batch is also staged on the device (Batch::device_data). Must outlive the pipeline and every
  // batch held from it.
  device::CudaRuntime* cuda = nullptr;
  bool copy_to_device = false;
  // Not a setting: a flag another thread raises to give up opening a dataset in an object store
  // (its requests end at once, Open fails Cancelled) — a front end's answer to Ctrl-C while a
  // pipeline opens against a failing store. Null (default): Open rides the outage out.
  std::shared_ptr<const std::atomic<bool>> cancel;
};

}  // namespace ddpio

#endif  // DDPIO_PIPELINE_PIPELINE_OPTIONS_H_
