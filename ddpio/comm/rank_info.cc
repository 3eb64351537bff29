#include "ddpio/comm/rank_info.h"

#include <charconv>
#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {
namespace {

absl::StatusOr<std::optional<int>> ReadInt(const Environment& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::optional<int>();
  int value = 0;
  const std::string& text = it->second;
  auto [ptr, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (err != std::errc() || ptr != text.data() + text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "='", text, "' is not an integer"));
  }
  return std::optional<int>(value);
}

// Sets *field from (value, where) unless already set by another source; a disagreement with an
// earlier source is an error naming both.
absl::Status Merge(std::optional<int> value, const std::string& where, const char* field,
                   std::optional<int>* out, std::string* out_where) {
  if (!value.has_value()) return absl::OkStatus();
  if (out->has_value() && **out != *value) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", **out, " from ", *out_where, " but ", *value, " from ", where));
  }
  if (!out->has_value()) {
    *out = value;
    *out_where = where;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> FirstSlurmHost(const std::string& nodelist) {
  // The first comma at bracket depth 0 ends the first entry.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    if (nodelist[end] == '[') ++depth;
    if (nodelist[end] == ']') --depth;
    if (nodelist[end] == ',' && depth == 0) break;
  }
  std::string first = nodelist.substr(0, end);
  size_t open = first.find('[');
  if (open == std::string::npos) {
    if (first.empty()) return absl::InvalidArgumentError("empty Slurm node list");
    return first;
  }
  size_t close = first.find(']', open);
  if (close == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("malformed Slurm node list '", nodelist, "'"));
  }
  std::string range = first.substr(open + 1, close - open - 1);
  std::string head = range.substr(0, range.find_first_of(",-"));
  if (head.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("malformed Slurm node list '", nodelist, "'"));
  }
  return first.substr(0, open) + head + first.substr(close + 1);
}

namespace {

// The four counts as one source (the command line or a launcher's variables) gives them.
struct Counts {
  std::optional<int> rank, world, local_rank, local_world;
};

// Counts merged from several sources, each field remembering where it came from.
struct MergedCounts {
  Counts value;
  std::string rank_from, world_from, local_rank_from, local_world_from;

  absl::Status Add(const std::string& where, const Counts& c) {
    DDPIO_RETURN_IF_ERROR(Merge(c.rank, where, "rank", &value.rank, &rank_from));
    DDPIO_RETURN_IF_ERROR(Merge(c.world, where, "world size", &value.world, &world_from));
    DDPIO_RETURN_IF_ERROR(
        Merge(c.local_rank, where, "local rank", &value.local_rank, &local_rank_from));
    DDPIO_RETURN_IF_ERROR(
        Merge(c.local_world, where, "local world size", &value.local_world, &local_world_from));
    return absl::OkStatus();
  }
};

// A launcher's variables, in the order they are consulted.
struct Launcher {
  RankSource source;  // RankInfo::source when it gives the rank
  const char* where;  // named in errors
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;
  bool local_world_is_list;  // Slurm: "4" or "4(x2)", the first number counts
};
constexpr Launcher kLaunchers[] = {
    {RankSource::kTorchrun, "torchrun's RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE", "RANK",
     "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", false},
    {RankSource::kSlurm, "Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID", "SLURM_PROCID",
     "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", true},
    {RankSource::kOpenMpi, "Open MPI's OMPI_COMM_WORLD_*", "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", false},
};

absl::StatusOr<Counts> ReadCounts(const Environment& env, const Launcher& l) {
  Counts c;
  DDPIO_ASSIGN_OR_RETURN(c.rank, ReadInt(env, l.rank));
  DDPIO_ASSIGN_OR_RETURN(c.world, ReadInt(env, l.world));
  DDPIO_ASSIGN_OR_RETURN(c.local_rank, ReadInt(env, l.local_rank));
  if (!l.local_world_is_list) {
    DDPIO_ASSIGN_OR_RETURN(c.local_world, ReadInt(env, l.local_world));
  } else if (auto it = env.find(l.local_world); it != env.end()) {
    int v = 0;
    auto [ptr, err] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
    if (err == std::errc()) c.local_world = v;
  }
  return c;
}

// The command line first (it wins; any source that disagrees is reported), then each launcher.
// *source: who gave the rank.
absl::StatusOr<MergedCounts> CollectCounts(const Environment& env, const RankFlags& flags,
                                           RankSource* source) {
  MergedCounts merged;
  DDPIO_RETURN_IF_ERROR(
      merged.Add("the command line",
                 Counts{flags.rank, flags.world_size, flags.local_rank, flags.local_world_size}));
  std::optional<RankSource> found;
  if (flags.rank.has_value() || flags.world_size.has_value()) found = RankSource::kFlags;
  for (const Launcher& l : kLaunchers) {
    DDPIO_ASSIGN_OR_RETURN(Counts c, ReadCounts(env, l));
    DDPIO_RETURN_IF_ERROR(merged.Add(l.where, c));
    if (!found.has_value() && c.rank.has_value()) found = l.source;
  }
  *source = found.value_or(RankSource::kSingleProcess);
  return merged;
}

// Fills the counts of *info from the merged sources (defaults for what none gave) and checks them.
absl::Status ResolveCounts(const MergedCounts& m, RankInfo* info) {
  const Counts& c = m.value;
  if (c.rank.has_value() != c.world.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.rank.has_value() ? "a rank (from " + m.rank_from + ") without a world size"
                                        : "a world size (from " + m.world_from + ") without a rank",
                     ": a launcher (`ddpio launch`, torchrun, srun, mpirun) sets both for every "
                     "rank it starts; set both, "
                     "start the job with a launcher, or unset it to run alone"));
  }
  info->rank = c.rank.value_or(0);
  info->world_size = c.world.value_or(1);
  info->local_rank =
      c.local_rank.value_or(info->source == RankSource::kSingleProcess ? 0 : info->rank);
  info->local_world_size = c.local_world.value_or(c.local_rank.has_value() ? 1 : info->world_size);
  if (info->world_size < 1 || info->rank < 0 || info->rank >= info->world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", info->rank, " (from ", m.rank_from,
                                                   ") is outside the world of ", info->world_size));
  }
  if (info->local_rank < 0 ||
      (c.local_world.has_value() && info->local_rank >= info->local_world_size)) {
    return absl::InvalidArgumentError(absl::StrCat("local rank ", info->local_rank,
                                                   " is outside the local world of ",
                                                   info->local_world_size));
  }
  if (!c.local_world.has_value() && !c.local_rank.has_value())
    info->local_world_size = info->world_size;
  return absl::OkStatus();
}

// The rendezvous address: flags, then MASTER_ADDR/MASTER_PORT, then Slurm's first node.
absl::Status ResolveMaster(const Environment& env, const RankFlags& flags, RankInfo* info) {
  if (flags.master_addr.has_value()) {
    info->master_addr = *flags.master_addr;
  } else if (std::string addr = EnvValue(env, "MASTER_ADDR"); !addr.empty()) {
    info->master_addr = addr;
  } else if (std::string nodes = EnvValue(env, "SLURM_JOB_NODELIST"); !nodes.empty()) {
    DDPIO_ASSIGN_OR_RETURN(info->master_addr, FirstSlurmHost(nodes));
  }
  DDPIO_ASSIGN_OR_RETURN(auto env_port, ReadInt(env, "MASTER_PORT"));
  info->master_port = flags.master_port.value_or(env_port.value_or(29500));
  if (info->master_port <= 0 || info->master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("master port ", info->master_port, " is not a TCP port"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string RankSourceName(RankSource source) {
  static constexpr EnumName<RankSource> kNames[] = {
      {RankSource::kCaller, ""},
      {RankSource::kSingleProcess, "single process"},
      {RankSource::kFlags, "flags"},
      {RankSource::kTorchrun, "torchrun"},
      {RankSource::kSlurm, "slurm"},
      {RankSource::kOpenMpi, "openmpi"},
      {RankSource::kTorchDistributed, "torch.distributed"},
  };
  return NameOf(kNames, source);
}

absl::StatusOr<RankInfo> DiscoverRank(const Environment& env, const RankFlags& flags) {
  RankInfo info;
  DDPIO_ASSIGN_OR_RETURN(MergedCounts counts, CollectCounts(env, flags, &info.source));
  DDPIO_RETURN_IF_ERROR(ResolveCounts(counts, &info));
  DDPIO_RETURN_IF_ERROR(ResolveMaster(env, flags, &info));
  const std::string agent = EnvValue(env, "TORCHELASTIC_USE_AGENT_STORE");
  info.agent_store = agent == "True" || agent == "true" || agent == "1";
  info.torchrun_rendezvous = !agent.empty() && !info.agent_store;
  return info;
}

}  // namespace ddpio::comm
