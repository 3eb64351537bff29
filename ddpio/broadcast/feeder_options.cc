// Names of the feeder's settings, and the streams' sampler options.
#include "ddpio/broadcast/feeder_options.h"

#include "ddpio/common/enum_names.h"

namespace ddpio::broadcast {

namespace {
constexpr EnumName<FeedMode> kModes[] = {{FeedMode::kShard, "shard"},
                                         {FeedMode::kReplicate, "replicate"}};
constexpr EnumName<FeedPayload> kPayloads[] = {{FeedPayload::kEncoded, "encoded"},
                                               {FeedPayload::kDecoded, "decoded"}};
constexpr EnumName<FeedReaders> kReaders[] = {{FeedReaders::kLeader, "leader"},
                                              {FeedReaders::kAll, "all"}};
constexpr EnumName<FeedRelay> kRelays[] = {{FeedRelay::kChain, "chain"},
                                           {FeedRelay::kStar, "star"}};
}  // namespace

std::string FeedModeName(FeedMode mode) { return NameOf(kModes, mode); }
absl::StatusOr<FeedMode> ParseFeedMode(std::string_view name) {
  return ParseName(kModes, name, "feed mode");
}
std::string FeedPayloadName(FeedPayload payload) { return NameOf(kPayloads, payload); }
absl::StatusOr<FeedPayload> ParseFeedPayload(std::string_view name) {
  return ParseName(kPayloads, name, "payload");
}
std::string FeedReadersName(FeedReaders readers) { return NameOf(kReaders, readers); }
absl::StatusOr<FeedReaders> ParseFeedReaders(std::string_view name) {
  return ParseName(kReaders, name, "readers");
}
std::string FeedRelayName(FeedRelay relay) { return NameOf(kRelays, relay); }
absl::StatusOr<FeedRelay> ParseFeedRelay(std::string_view name) {
  return ParseName(kRelays, name, "relay");
}

sampler::SamplerOptions StreamSamplerOptions(const sampler::SamplerOptions& world, FeedMode mode,
                                             const comm::GroupLayout& layout) {
  sampler::SamplerOptions s = world;
  s.num_replicas = mode == FeedMode::kShard ? layout.world_size() : layout.group_ws();
  return s;
}

}  // namespace ddpio::broadcast
