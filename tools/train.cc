#include "tools/train.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/comm/rendezvous.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/device/probe.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/trainer/train_model.h"
#include "tools/bench_feed.h"
#include "tools/cli_util.h"

namespace ddpio::tools {

namespace {

// Where this rank can open both datasets (a peer that reads nothing may have neither), their
// labels must name the same classes: an accuracy over mismatched labels is silently meaningless.
// `pipeline`: the object store's settings, for datasets there.
absl::Status CheckValidationClasses(const std::string& train_path, const std::string& val_path,
                                    const PipelineOptions& pipeline) {
  storage::ReaderOptions ro;
  ro.store_settings = pipeline.store_settings;
  ro.store_overrides = pipeline.store_overrides;
  // The headers alone (in an object store, the manifests: one GET each, no record index).
  auto train = storage::DatasetReader::Peek(train_path, ro);
  if (!train.ok()) return absl::OkStatus();
  auto val = storage::DatasetReader::Peek(val_path, ro);
  if (!val.ok()) return absl::OkStatus();
  return Annotate(storage::CheckSameClasses(train->header.classes, val->header.classes),
                  absl::StrCat("--val ", val_path, " against --data ", train_path));
}

}  // namespace

absl::StatusOr<std::string> ResolveTrainDevice(const std::string& device,
                                               const std::string& backend,
                                               const device::DeviceInfo& probe,
                                               bool device_model_compiled) {
  if (backend.empty()) return device.empty() ? std::string("cpu") : device;
  DDPIO_ASSIGN_OR_RETURN(comm::BackendKind asked, comm::ParseBackend(backend));
  if (asked == comm::BackendKind::kAuto && !device_model_compiled) asked = comm::BackendKind::kGloo;
  DDPIO_ASSIGN_OR_RETURN(comm::BackendChoice choice, comm::ChooseBackend(asked, probe));
  const std::string chosen = choice.kind == comm::BackendKind::kNccl ? "cuda" : "cpu";
  if (!device.empty() && device != chosen) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend ", backend, " trains with the model on the ", chosen,
        ", which contradicts --device ", device, " (gloo goes with cpu, nccl with cuda)"));
  }
  return chosen;
}

absl::StatusOr<nlohmann::json> RunTrain(const TrainCliOptions& cli) {
  TrainCliOptions o = cli;
  DDPIO_ASSIGN_OR_RETURN(
      const std::string device,
      ResolveTrainDevice(cli.device, cli.backend, device::Probe(), trainer::DeviceModelCompiled()));
  DDPIO_ASSIGN_OR_RETURN(o.train.device, trainer::ParseModelDevice(device));
  DDPIO_ASSIGN_OR_RETURN(comm::RankInfo info, comm::DiscoverRank(comm::CurrentEnvironment()));
  // Arguments and datasets first, before the network: a mistake fails every rank at once
  // instead of leaving the others waiting in the rendezvous.
  DDPIO_RETURN_IF_ERROR(Pipeline::Check(info, trainer::TrainPipelineOptions(o.train)));
  if (!o.train.val.empty()) {
    DDPIO_RETURN_IF_ERROR(Pipeline::Check(info, trainer::ValidationPipelineOptions(o.train)));
    DDPIO_RETURN_IF_ERROR(
        CheckValidationClasses(o.train.pipeline.data, o.train.val, o.train.pipeline));
  }
  comm::RendezvousOptions ro;
  ro.store = o.store;
  ro.advertise_addr = o.advertise_addr;
  // Where parameters and gradients live decides the world's backend: host memory -> Gloo, the
  // device -> NCCL (which fails here, on every rank, without a usable device).
  ro.backend = o.train.device == trainer::ModelDevice::kCuda ? comm::BackendKind::kNccl
                                                             : comm::BackendKind::kGloo;
  DDPIO_ASSIGN_OR_RETURN(
      auto job, JoinJob(info, ro, o.train.pipeline.timeout));  // every wait honours --timeout
  comm::LeaveGuard leave(*job);
  if (info.rank == 0) {
    DDPIO_LOG(INFO) << "train: " << info.world_size << " rank(s) ("
                    << comm::RankSourceName(info.source) << ") in groups of "
                    << o.train.pipeline.group_size << " ("
                    << comm::LayoutKindName(o.train.pipeline.layout) << "), "
                    << broadcast::FeedModeName(o.train.pipeline.mode) << ", "
                    << broadcast::FeedPayloadName(o.train.pipeline.payload) << " payload, batch "
                    << o.train.pipeline.batch_size << " per rank, " << o.train.epochs
                    << " epoch(s)";
  }
  auto trained =
      trainer::Train(*job, o.train, [](const std::string& line) { DDPIO_LOG(INFO) << line; });
  if (!trained.ok()) return job->WithCensus(trained.status());
  trainer::TrainResult r = std::move(trained).value();
  if (info.rank == 0) DDPIO_LOG(INFO) << "model path: " << r.path;
  nlohmann::json j{{"rank", info.rank},
                   {"world", info.world_size},
                   {"steps", r.steps},
                   {"train_loss", r.train_loss},
                   {"val_samples", r.val_samples},
                   {"samples_per_s", r.samples_per_s},
                   {"stall_fraction", r.stall_fraction},
                   {"param_checksum", absl::StrFormat("%016x", r.param_checksum)},
                   {"path", r.path}};
  j.update(SettingsJson(o.train.pipeline, {"group_size", "mode", "payload", "order"}));
  j.update(FeederCountersJson(r.feeder));
  if (r.store.has_value()) j["store"] = StoreCountersJson(*r.store);
  if (r.step_report.has_value()) j["step_report"] = StepReportJson(*r.step_report);
  j["val_accuracy"] =
      r.val_accuracy >= 0 ? nlohmann::json(r.val_accuracy) : nlohmann::json(nullptr);
  if (r.unigram_entropy >= 0) {
    j["tokens"] = {
        {"seq_len", o.train.pipeline.seq_len}, {"context", o.train.context},
        {"vocabulary", r.vocabulary},          {"unigram_entropy", r.unigram_entropy},
        {"unigram_labels", r.unigram_labels},  {"sequences_per_source", r.sequences_per_source}};
  }
  leave.Succeeded();
  return j;
}

nlohmann::json StepReportJson(const trainer::StepReport& report) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const trainer::RankSteps& r : report.ranks) {
    nlohmann::json stages = nlohmann::json::object();
    for (int s = 0; s < trainer::kStages; ++s) {
      const auto stage = static_cast<trainer::Stage>(s);
      stages[trainer::StageName(stage)] = {{"share", r.share(stage)},
                                           {"p50_ms", r.at(stage).p50_ms},
                                           {"p99_ms", r.at(stage).p99_ms}};
    }
    ranks.push_back({{"rank", r.rank},
                     {"node", r.node},
                     {"fed_by", r.leader},
                     {"steps", r.steps},
                     {"step_ms", r.steps > 0 ? r.step_s * 1e3 / r.steps : 0.0},
                     {"own_ms", r.own_ms()},
                     {"stages", stages}});
  }
  return {{"epoch", report.epoch},
          {"first_step", report.first_step},
          {"last_step", report.last_step},
          {"straggler", report.straggler},
          {"bottleneck", report.bottleneck},
          {"line", report.line},
          {"ranks", ranks}};
}

std::string TrainText(const nlohmann::json& j) {
  const std::string acc =
      j.contains("tokens")
          ? absl::StrFormat("the data's unigram entropy %.4f nats/token (the loss to beat)",
                            j["tokens"]["unigram_entropy"].get<double>())
      : j["val_accuracy"].is_null()
          ? std::string("no validation set")
          : absl::StrFormat("validation accuracy %.4f over %d samples",
                            j["val_accuracy"].get<double>(), j["val_samples"].get<uint64_t>());
  return absl::StrFormat(
             "train rank %d: %d steps, loss %.4f, %s; %.0f samples/s, data stall %.1f%%; params "
             "%s; read %d records, "
             "sent %.1f MB, received %.1f MB\n",
             j["rank"].get<int>(), j["steps"].get<uint64_t>(), j["train_loss"].get<double>(), acc,
             j["samples_per_s"].get<double>(), 100 * j["stall_fraction"].get<double>(),
             j["param_checksum"].get<std::string>(), j["records_read"].get<uint64_t>(),
             j["bytes_sent"].get<uint64_t>() / 1e6, j["bytes_received"].get<uint64_t>() / 1e6) +
         SkippedText(j);
}

}  // namespace ddpio::tools
