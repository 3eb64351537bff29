// A trainer's data loop with ddpio, built against the installed package: join the job from the
// environment (ddpio launch, torchrun, srun, mpirun — or alone), read one epoch of decoded
// batches, report what this rank received.
//   ddpio launch --nproc-per-node 2 -- consumer /path/to/dataset [GROUP_SIZE]
#include <cstdio>
#include <cstdlib>

// [readme] (README.md shows from here to [/readme]; the readme_example test keeps them equal)
#include "ddpio/pipeline/pipeline.h"

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: consumer DATASET [GROUP_SIZE]\n"), 2;
  // GROUP_SIZE ranks per group: one of them reads storage and feeds the others.
  auto pipeline = ddpio::Pipeline::Open(
      {.data = argv[1], .group_size = argc > 2 ? std::atoi(argv[2]) : 1, .batch_size = 16});
  absl::Status status = pipeline.ok() ? (*pipeline)->StartEpoch(0) : pipeline.status();
  unsigned long long images = 0, batches = 0;
  while (status.ok()) {
    absl::StatusOr<ddpio::loader::Batch> batch = (*pipeline)->Next();
    status = batch.status();
    for (uint64_t k = 0; batch.ok() && k < batch->size; ++k)
      images += batch->valid[k];  // not padding
    batches += batch.ok();
  }
  if (!absl::IsOutOfRange(status))
    return std::fprintf(stderr, "consumer: %s\n", status.ToString().c_str()), 1;
  std::printf("consumer rank %d: %llu images in %llu batches\n", (*pipeline)->rank(), images,
              batches);
  return 0;
}
// [/readme]
