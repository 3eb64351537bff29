// CLI glue for `ddpio sampler`.
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "ddpio/pipeline/settings.h"
#include "tools/cli_commands.h"
#include "tools/cli_flags.h"
#include "tools/cli_util.h"
#include "tools/sampler.h"

namespace ddpio::tools {

void AddSamplerCommand(CLI::App& root, std::vector<Command>* commands) {
  auto* app = root.add_subcommand("sampler", "Print the sample indices a rank sees in an epoch");
  app->footer(
      "Same indices as torch.utils.data.DistributedSampler(dataset, num_replicas=R, rank=r,\n"
      "shuffle, seed, drop_last) after set_epoch(E). Padding '*'-marked.\n"
      "Examples:\n"
      "  ddpio sampler --size 1281167 --world 64 --rank 3 --epoch 5\n"
      "  ddpio sampler --size 1000 --world 8 --rank 0 --padding mask --batch-size 32\n"
      "  ddpio sampler --size 1000 --world 8 --rank 1 --consumed 400 --new-world 4  # elastic\n"
      "  ddpio sampler --size 1000 --world 8 --rank 0 --order block --block-chunk 16\n"
      "  ddpio sampler --size 1281167 --world 64 --order block --quality 1000  # vs exact");
  auto q = std::make_shared<SamplerQuery>();
  auto no_shuffle = std::make_shared<bool>(false);
  auto new_world = std::make_shared<int>(0);
  auto json = std::make_shared<bool>(false);
  auto quality = std::make_shared<uint64_t>(0);
  app->add_option("--size", q->options.dataset_size, "Dataset size (samples)")
      ->required()
      ->check(CLI::Range(uint64_t{1}, sampler::kMaxSamples));
  app->add_option("--world", q->options.num_replicas, "World size (num_replicas)")
      ->required()
      ->check(CLI::Range(1, 1 << 24));
  CLI::Option* rank = app->add_option("--rank", q->rank, "Rank (required, but with --quality)")
                          ->check(CLI::NonNegativeNumber);
  app->add_option("--seed", q->options.seed, "Seed (PyTorch: seed + epoch seeds the generator)")
      ->capture_default_str();
  app->add_option("--epoch", q->epoch, "Epoch (set_epoch)")->capture_default_str();
  app->add_flag("--no-shuffle", *no_shuffle, "Sequential order (shuffle=False)");
  AddEnumOption(app, "--padding", &q->options.padding, sampler::ParsePadding, sampler::PaddingName,
                "pad (PyTorch default), drop (drop_last), none (uneven, no duplicates), "
                "mask (pad, duplicates flagged)");
  AddEnumOption(app, "--permutation", &q->options.permutation, sampler::ParsePermutationKind,
                sampler::PermutationKindName,
                "torch (current PyTorch), torch-legacy (PyTorch <= 1.13 for >= 214,748,364 "
                "samples), feistel (O(1) memory, not PyTorch's order)");
  AddEnumOption(app, "--order", &q->options.order, sampler::ParseOrder, sampler::OrderName,
                std::string(FindSetting("order")->help));
  app->add_option("--block-chunk", q->options.block.chunk_records,
                  std::string(FindSetting("block_chunk")->help))
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  app->add_option("--block-window", q->options.block.window,
                  std::string(FindSetting("block_window")->help))
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  app->add_option("--block-lanes", q->options.block.lanes,
                  std::string(FindSetting("block_lanes")->help))
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 24));
  app->add_option("--quality", *quality,
                  "Instead of indices: the epoch's shuffle quality over every rank for a dataset "
                  "stored sorted into this many classes (ImageNet: 1000), beside the exact order "
                  "and i.i.d. draws (batches of --batch-size, default 256)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app->add_option("--batch-size", q->batch_size,
                  "Also group into batches as PyTorch's BatchSampler");
  app->add_flag("--drop-last-batch", q->drop_last_batch,
                "With --batch-size: drop a short last batch");
  app->add_option(
      "--consumed", q->consumed,
      "Resume: entries of this epoch's order already consumed (k steps on R ranks: k*R)");
  app->add_option("--new-world", *new_world, "Elastic resume: the new world size (--rank is in it)")
      ->check(CLI::Range(1, 1 << 24));
  AddJsonFlag(app, json.get());
  commands->push_back(
      {app, [=] {
         q->options.shuffle = !*no_shuffle;
         if (*new_world > 0) q->new_world = *new_world;
         if (*quality == 0 && rank->count() == 0) {
           return ReportUsageError("sampler", "--rank is required (but with --quality)");
         }
         if (*quality > 0) {
           auto answer = QueryShuffleQuality(*q, *quality);
           if (!answer.ok())
             return ReportUsageError("sampler", std::string(answer.status().message()));
           return PrintResult(*json, *answer, ShuffleQualityText);
         }
         // This command prints a rank's indices: tens of millions of lines help nobody.
         constexpr uint64_t kMaxPrinted = 10'000'000;
         const uint64_t share =
             q->options.dataset_size / static_cast<uint64_t>(q->options.num_replicas);
         if (share > kMaxPrinted) {
           return ReportUsageError(
               "sampler", absl::StrCat("rank ", q->rank, " would print ", share,
                                       " indices (more than ", kMaxPrinted,
                                       "); for datasets this large use the library "
                                       "(sampler/distributed_sampler.h) or `ddpio bench sampler`"));
         }
         auto answer = QuerySampler(*q);
         if (!answer.ok()) {
           return answer.status().code() == absl::StatusCode::kInvalidArgument
                      ? ReportUsageError("sampler", std::string(answer.status().message()))
                      : ReportError("sampler", answer.status());
         }
         return PrintResult(*json, *answer, SamplerText);
       }});
}

}  // namespace ddpio::tools
