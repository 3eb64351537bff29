// The group feeder's settings (sampler, loader, feeding) built from a PipelineOptions: the one
// place that knows where each of the user's flat settings goes. Private to the pipeline module.
#ifndef DDPIO_PIPELINE_INTERNAL_FEEDER_OPTIONS_H_
#define DDPIO_PIPELINE_INTERNAL_FEEDER_OPTIONS_H_

#include "absl/status/status.h"
#include "ddpio/broadcast/feeder_options.h"
#include "ddpio/pipeline/pipeline_options.h"

namespace ddpio::internal {

// InvalidArgument naming the first setting out of the range the settings table gives it
// (settings.h), or a range whose two ends are crossed (the dataset itself is checked by opening
// it).
absl::Status ValidatePipelineOptions(const PipelineOptions& options);

// Every field but the dataset's identity, which the pipeline fills in once it has opened it.
broadcast::FeederOptions FeederOptionsFor(const PipelineOptions& options);

}  // namespace ddpio::internal

#endif  // DDPIO_PIPELINE_INTERNAL_FEEDER_OPTIONS_H_
