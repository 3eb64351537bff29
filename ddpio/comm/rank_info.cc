#include "ddpio/comm/rank_info.h"

#include <charconv>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

extern char** environ;

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
    return absl::InvalidArgumentError(absl::StrCat(field, " is ", **out, " from ", *out_where,
                                                   " but ", *value, " from ", where));
  }
  if (!out->has_value()) {
    *out = value;
    *out_where = where;
  }
  return absl::OkStatus();
}

}  // namespace

Environment CurrentEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

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

absl::StatusOr<RankInfo> DiscoverRank(const Environment& env, const RankFlags& flags) {
  std::optional<int> rank, world, local_rank, local_world;
  std::string rank_from, world_from, local_from, local_world_from;
  auto merge_all = [&](const std::string& where, std::optional<int> r, std::optional<int> w,
                       std::optional<int> lr, std::optional<int> lw) -> absl::Status {
    DDPIO_RETURN_IF_ERROR(Merge(r, where, "rank", &rank, &rank_from));
    DDPIO_RETURN_IF_ERROR(Merge(w, where, "world size", &world, &world_from));
    DDPIO_RETURN_IF_ERROR(Merge(lr, where, "local rank", &local_rank, &local_from));
    DDPIO_RETURN_IF_ERROR(Merge(lw, where, "local world size", &local_world, &local_world_from));
    return absl::OkStatus();
  };
  RankInfo info;
  // Flags first: they win, and any environment that disagrees is reported.
  DDPIO_RETURN_IF_ERROR(merge_all("the command line", flags.rank, flags.world_size,
                                  flags.local_rank, flags.local_world_size));
  if (flags.rank.has_value() || flags.world_size.has_value()) info.source = "flags";

  DDPIO_ASSIGN_OR_RETURN(auto t_rank, ReadInt(env, "RANK"));
  DDPIO_ASSIGN_OR_RETURN(auto t_world, ReadInt(env, "WORLD_SIZE"));
  DDPIO_ASSIGN_OR_RETURN(auto t_local, ReadInt(env, "LOCAL_RANK"));
  DDPIO_ASSIGN_OR_RETURN(auto t_local_world, ReadInt(env, "LOCAL_WORLD_SIZE"));
  DDPIO_RETURN_IF_ERROR(merge_all("torchrun's RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE",
                                  t_rank, t_world, t_local, t_local_world));
  if (info.source.empty() && t_rank.has_value()) info.source = "torchrun";

  DDPIO_ASSIGN_OR_RETURN(auto s_rank, ReadInt(env, "SLURM_PROCID"));
  DDPIO_ASSIGN_OR_RETURN(auto s_world, ReadInt(env, "SLURM_NTASKS"));
  DDPIO_ASSIGN_OR_RETURN(auto s_local, ReadInt(env, "SLURM_LOCALID"));
  std::optional<int> s_local_world;
  if (auto it = env.find("SLURM_NTASKS_PER_NODE"); it != env.end()) {
    // "4" or "4(x2)": the first number.
    int v = 0;
    auto [ptr, err] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
    if (err == std::errc()) s_local_world = v;
  }
  DDPIO_RETURN_IF_ERROR(merge_all("Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID", s_rank,
                                  s_world, s_local, s_local_world));
  if (info.source.empty() && s_rank.has_value()) info.source = "slurm";

  DDPIO_ASSIGN_OR_RETURN(auto o_rank, ReadInt(env, "OMPI_COMM_WORLD_RANK"));
  DDPIO_ASSIGN_OR_RETURN(auto o_world, ReadInt(env, "OMPI_COMM_WORLD_SIZE"));
  DDPIO_ASSIGN_OR_RETURN(auto o_local, ReadInt(env, "OMPI_COMM_WORLD_LOCAL_RANK"));
  DDPIO_ASSIGN_OR_RETURN(auto o_local_world, ReadInt(env, "OMPI_COMM_WORLD_LOCAL_SIZE"));
  DDPIO_RETURN_IF_ERROR(merge_all("Open MPI's OMPI_COMM_WORLD_*", o_rank, o_world, o_local,
                                  o_local_world));
  if (info.source.empty() && o_rank.has_value()) info.source = "openmpi";
  if (info.source.empty()) info.source = "single process";

  if (rank.has_value() != world.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        rank.has_value() ? "a rank (from " + rank_from + ") without a world size"
                         : "a world size (from " + world_from + ") without a rank",
        "; set both"));
  }
  info.rank = rank.value_or(0);
  info.world_size = world.value_or(1);
  info.local_rank = local_rank.value_or(info.source == "single process" ? 0 : info.rank);
  info.local_world_size = local_world.value_or(local_rank.has_value() ? 1 : info.world_size);
  if (info.world_size < 1 || info.rank < 0 || info.rank >= info.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", info.rank, " (from ", rank_from,
                                                   ") is outside the world of ", info.world_size));
  }
  if (info.local_rank < 0 || (local_world.has_value() && info.local_rank >= info.local_world_size)) {
    return absl::InvalidArgumentError(absl::StrCat("local rank ", info.local_rank,
                                                   " is outside the local world of ",
                                                   info.local_world_size));
  }
  if (!local_world.has_value() && !local_rank.has_value()) info.local_world_size = info.world_size;

  // Rendezvous address: flags, then MASTER_ADDR/MASTER_PORT, then Slurm's first node.
  if (flags.master_addr.has_value()) {
    info.master_addr = *flags.master_addr;
  } else if (auto it = env.find("MASTER_ADDR"); it != env.end() && !it->second.empty()) {
    info.master_addr = it->second;
  } else if (auto nl = env.find("SLURM_JOB_NODELIST"); nl != env.end() && !nl->second.empty()) {
    DDPIO_ASSIGN_OR_RETURN(info.master_addr, FirstSlurmHost(nl->second));
  }
  DDPIO_ASSIGN_OR_RETURN(auto env_port, ReadInt(env, "MASTER_PORT"));
  info.master_port = flags.master_port.value_or(env_port.value_or(29500));
  if (info.master_port <= 0 || info.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("master port ", info.master_port, " is not a TCP port"));
  }
  if (auto it = env.find("TORCHELASTIC_USE_AGENT_STORE"); it != env.end()) {
    info.agent_store = it->second == "True" || it->second == "true" || it->second == "1";
  }
  return info;
}

}  // namespace ddpio::comm
