// The group's agreement on settings and dataset (group_agreement.h).
#include "ddpio/broadcast/internal/group_agreement.h"

#include <algorithm>
#include <array>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::broadcast::internal {

namespace {

// Everything the members of a group must agree on, by name, in a fixed order.
std::vector<std::pair<std::string, std::string>> FeederSettings(const FeederOptions& o,
                                                                const comm::GroupLayout& layout) {
  const loader::LoaderOptions& l = o.loader;
  const loader::AugmentOptions& a = l.augment;
  auto triple = [](const std::array<float, 3>& v) {
    return absl::StrCat(v[0], ",", v[1], ",", v[2]);
  };
  return {
      {"mode", FeedModeName(o.mode)},
      {"payload", FeedPayloadName(o.payload)},
      {"readers", FeedReadersName(o.readers)},
      {"relay", FeedRelayName(o.relay)},
      {"world_size", absl::StrCat(layout.world_size())},
      {"group_size", absl::StrCat(layout.group_size())},
      {"layout", comm::LayoutKindName(layout.kind())},
      {"shuffle", absl::StrCat(o.sampler.shuffle)},
      {"seed", absl::StrCat(o.sampler.seed)},
      {"padding", sampler::PaddingName(o.sampler.padding)},
      {"permutation", sampler::PermutationKindName(o.sampler.permutation)},
      {"order", sampler::OrderName(o.sampler.order)},
      {"block", absl::StrCat(o.sampler.block.chunk_records, "/", o.sampler.block.window, "/",
                             o.sampler.block.lanes)},
      {"batch_size", absl::StrCat(l.batch_size)},
      {"drop_last", absl::StrCat(l.drop_last)},
      {"output", absl::StrCat(static_cast<int>(l.output))},
      {"mean", triple(l.mean)},
      {"std", triple(l.stddev)},
      {"image_size", absl::StrCat(a.out_height(), "x", a.out_width())},
      {"train", absl::StrCat(a.train)},
      {"scale", absl::StrCat(a.scale_min, ",", a.scale_max)},
      {"ratio", absl::StrCat(a.ratio_min, ",", a.ratio_max)},
      {"flip", absl::StrCat(a.flip_probability)},
      {"resize_size", absl::StrCat(a.resize_size)},
      {"augment_seed", absl::StrCat(l.seed)},
      {"decode", loader::DecodeModeName(l.decode)},
      {"bad_samples", absl::StrCat(static_cast<int>(l.bad_samples))},
  };
}

// One member's side of the agreement: its settings, its dataset (identity or why it could not be
// opened) and the path it named, as lines "name=value" (values C-escaped).
std::string DescribeMember(const FeederOptions& o, const comm::GroupLayout& layout) {
  std::string text = absl::StrCat("dataset_path=", absl::CEscape(o.dataset.path), "\n");
  absl::StrAppend(&text, "dataset_error=", absl::CEscape(o.dataset.error), "\n");
  absl::StrAppend(&text, "dataset=", absl::CEscape(o.dataset.identity), "\n");
  for (const auto& [name, value] : FeederSettings(o, layout)) {
    absl::StrAppend(&text, name, "=", absl::CEscape(value), "\n");
  }
  return text;
}

std::vector<std::pair<std::string, std::string>> ParseMember(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> fields;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const size_t eq = line.find('=');
    std::string value;
    if (eq == absl::string_view::npos || !absl::CUnescape(line.substr(eq + 1), &value)) continue;
    fields.emplace_back(std::string(line.substr(0, eq)), std::move(value));
  }
  return fields;
}

std::string FieldOf(const std::vector<std::pair<std::string, std::string>>& fields,
                    const std::string& name) {
  for (const auto& [n, v] : fields) {
    if (n == name) return v;
  }
  return "";
}

}  // namespace

absl::Status CheckGroupAgreement(const std::vector<std::string>& described,
                                 const std::vector<int>& ranks) {
  std::vector<std::vector<std::pair<std::string, std::string>>> members;
  for (const std::string& d : described) members.push_back(ParseMember(d));
  // A member that could not open its dataset: every member says who and why (the code is that
  // member's own: NotFound for a missing dataset, and so on).
  for (size_t m = 0; m < members.size(); ++m) {
    const std::string error = FieldOf(members[m], "dataset_error");
    if (error.empty()) continue;
    const std::string path = FieldOf(members[m], "dataset_path");
    const absl::StatusCode code = static_cast<absl::StatusCode>(std::atoi(error.c_str()));
    return absl::Status(
        code == absl::StatusCode::kOk ? absl::StatusCode::kUnknown : code,
        absl::StrCat(MemberName(static_cast<int>(m), ranks[m]), " cannot open its dataset \"", path,
                     "\": ", error.substr(std::min(error.size(), error.find(' ') + 1))));
  }
  const auto& leader = members[0];
  for (size_t m = 1; m < members.size(); ++m) {
    std::vector<std::string> differences;
    bool dataset_differs = false;
    for (const auto& [name, value] : leader) {
      if (name == "dataset_path" || name == "dataset_error") continue;
      const std::string theirs = FieldOf(members[m], name);
      if (theirs == value) continue;
      if (name == "dataset") {
        dataset_differs = !value.empty() && !theirs.empty();
        continue;
      }
      differences.push_back(absl::StrCat(name, " ", theirs, " (the leader: ", value, ")"));
    }
    if (!dataset_differs && differences.empty()) continue;
    std::string message = absl::StrCat("group member ", m, " (rank ", ranks[m],
                                       ") and its leader (rank ", ranks[0], ") disagree: ");
    if (dataset_differs) {
      absl::StrAppend(&message, "it opened the dataset \"", FieldOf(members[m], "dataset_path"),
                      "\" (", FieldOf(members[m], "dataset"), "), the leader \"",
                      FieldOf(leader, "dataset_path"), "\" (", FieldOf(leader, "dataset"), ")",
                      differences.empty() ? "" : "; ");
    }
    if (!differences.empty())
      absl::StrAppend(&message, "its settings differ: ", absl::StrJoin(differences, ", "));
    absl::StrAppend(&message,
                    ". Every member of a group must name the same dataset (a copy at another path "
                    "is fine) with the "
                    "same settings; if every rank passes the same ones, the ranks created their "
                    "loaders (pipelines) "
                    "in different orders: create them in the same order on every rank");
    return absl::InvalidArgumentError(message);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> AgreeOnGroup(FeedContext& ctx) {
  // The dataset's size comes from the leader (in the group communicator's memory: the device's
  // over NCCL).
  const std::chrono::milliseconds timeout = ctx.options.timeout;
  if (ctx.options.dataset.identity.empty() && ctx.options.dataset.error.empty() &&
      ctx.reader != nullptr) {
    ctx.options.dataset.identity =
        storage::DatasetIdentity(ctx.reader->header(), ctx.reader->completion());
    ctx.options.dataset.path = ctx.reader->path();
  }
  absl::StatusOr<std::vector<std::string>> described =
      comm::AllGatherStrings(*ctx.group, DescribeMember(ctx.options, ctx.layout), timeout);
  if (!described.ok())
    return Annotate(described.status(), "agreeing on the group feeder's settings");
  DDPIO_RETURN_IF_ERROR(CheckGroupAgreement(*described, ctx.layout.members(ctx.rank)));
  uint64_t size = ctx.reader != nullptr ? ctx.reader->size() : 0;
  DDPIO_RETURN_IF_ERROR(Annotate(comm::BroadcastHost(*ctx.group, &size, sizeof(size), 0, timeout),
                                 "agreeing on the dataset's size"));
  return size;
}

}  // namespace ddpio::broadcast::internal
