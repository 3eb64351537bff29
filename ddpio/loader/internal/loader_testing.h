// Tests only: ways into a Loader that its public header does not offer. A hook into its assembly
// of samples, with which loader_share_test.cc forces and watches the epoch-tail sharing (a worker
// holds one of its samples until a helper has done something); and a loader of another kind of
// sample than LoaderOptions names, with which loader_kind_test.cc checks the sample-kind seam.
// Not installed, and not for library code.
#ifndef DDPIO_LOADER_INTERNAL_LOADER_TESTING_H_
#define DDPIO_LOADER_INTERNAL_LOADER_TESTING_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ddpio/loader/loader.h"
#include "ddpio/loader/sample_kind.h"

namespace ddpio::loader::internal {

struct SampleEvent {
  uint64_t step = 0, position = 0;  // the batch and the sample's position in it
  bool helping = false;             // a worker other than the batch's own
  bool done = false;                // false: about to assemble it; true: its outcome is recorded
  absl::Status status;              // the outcome, when done
};
using SampleHook = std::function<void(const SampleEvent&)>;

// Calls `hook` on the worker assembling each sample of `loader`, before it (done false, no lock
// held: the hook may block) and once its outcome is recorded in its batch (done true). Set it with
// no epoch in flight (before StartEpoch); it must stay callable while epochs run.
void SetSampleHookForTest(Loader& loader, SampleHook hook);

// Loader::Create (dataset flavour, no device) whose samples `kind` makes instead of the kind
// `options` names; `options`' image fields are then unused. Loader::Create's errors.
absl::StatusOr<std::unique_ptr<Loader>> CreateLoaderWithKindForTest(
    const storage::DatasetReader* reader, const sampler::SamplerOptions& sampler, int rank,
    const LoaderOptions& options, std::unique_ptr<const SampleKind> kind);

}  // namespace ddpio::loader::internal

#endif  // DDPIO_LOADER_INTERNAL_LOADER_TESTING_H_
