#include "tools/cli_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <variant>

#include "absl/strings/str_cat.h"
#include "ddpio/comm/group_layout.h"
#include "ddpio/loader/loader.h"
#include "ddpio/pipeline/pipeline_options.h"
#include "ddpio/pipeline/settings.h"
#include "ddpio/storage/store_settings.h"
#include "tools/cli_util.h"

namespace ddpio::tools {

const CLI::Validator& FiniteNumber() {
  static const CLI::Validator* v = new CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(x))
          return "must be a finite number";
        return "";
      },
      "FINITE");
  return *v;
}

CLI::Option* AddThreadsFlag(CLI::App* app, int* threads, const std::string& what) {
  return app->add_option("--threads", *threads, what + " (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
}

namespace {

constexpr char kLayoutHelp[] =
    "Group layout: contiguous (consecutive ranks, groups within a node) or strided (one rank per "
    "node in each group)";

std::string TypeName(const Setting& s) {
  switch (s.type) {
    case SettingType::kInt:
    case SettingType::kUnsigned:
      return "INT";
    case SettingType::kNumber:
      return "NUMBER";
    case SettingType::kSeconds:
      return "SECONDS";
    case SettingType::kChoice: {
      std::string names;
      for (std::string_view c : s.choices) {
        if (!names.empty()) names += "|";
        names += c;
      }
      return names;
    }
    case SettingType::kTriple:
      return "R,G,B";
    case SettingType::kText:
      return s.name == "cache_dir" ? "DIR" : "TEXT";
    case SettingType::kBool:
      break;
  }
  return "";
}

std::string FlagOf(const Setting& s) {
  std::string flag = "--" + std::string(s.name);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

// The setting's own message ("batch_size must be ...") in the command line's terms
// ("--batch-size must be ...").
std::string InFlagTerms(const Setting& s, absl::string_view message) {
  std::string text(message);
  if (text.compare(0, s.name.size(), s.name) == 0) text.replace(0, s.name.size(), FlagOf(s));
  return text;
}

// An option for one setting that parses and checks its text as the table says and hands the
// value to `put`.
CLI::Option* AddParsedOption(CLI::App* app, const Setting& s,
                             std::function<void(const SettingValue&)> put) {
  const bool ranged = s.type != SettingType::kChoice && s.type != SettingType::kText;
  return app
      ->add_option_function<std::string>(
          FlagOf(s),
          [&s, put](const std::string& text) {
            absl::StatusOr<SettingValue> v = ParseSetting(s, text);
            if (!v.ok()) throw CLI::ValidationError(InFlagTerms(s, v.status().message()));
            put(*v);
          },
          absl::StrCat(std::string(s.help), ranged ? absl::StrCat(" (", SettingRange(s), ")") : ""))
      ->type_name(TypeName(s));
}

// A flag for one setting: its name with '-' for '_', its help and range from the table, its
// default the value *options holds now (a command may set its own before adding the flag). A
// bool is a flag that turns it off (--no-shuffle) when it is on, or on (--drop-last) when off.
void AddSettingFlag(CLI::App* app, const Setting& s, PipelineOptions* options) {
  const SettingValue now = s.get(*options);
  if (s.type == SettingType::kBool) {
    const bool on = std::holds_alternative<bool>(now) ? std::get<bool>(now) : true;
    app->add_flag_callback(
        on ? "--no-" + FlagOf(s).substr(2) : FlagOf(s), [&s, options, on] { s.put(*options, !on); },
        absl::StrCat(std::string(s.help), on ? " (on by default: this turns it off)" : ""));
    return;
  }
  AddParsedOption(app, s, [&s, options](const SettingValue& v) {
    s.put(*options, v);
  })->default_str(std::holds_alternative<std::monostate>(now) ? "" : SettingText(now));
}

}  // namespace

void AddSettingFlags(CLI::App* app, PipelineOptions* options,
                     std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    const Setting* s = FindSetting(name);
    if (s == nullptr) throw std::logic_error(absl::StrCat("no setting named ", std::string(name)));
    AddSettingFlag(app, *s, options);
  }
}

void AddLoaderFlags(CLI::App* app, PipelineOptions* o) {
  AddSettingFlags(app, o,
                  {"batch_size", "image_size", "workers", "prefetch", "decode", "bad_samples"});
  // Two shorthands, checked by the same table: --crop-scale MIN,MAX and --no-flip.
  app->add_option_function<std::string>(
         "--crop-scale",
         [o](const std::string& text) {
           PipelineOptions p = *o;
           if (!ParseScaleRange(text, &p.scale_min, &p.scale_max) ||
               !SetSetting(&p, "scale_min", p.scale_min).ok() ||
               !SetSetting(&p, "scale_max", p.scale_max).ok()) {
             throw CLI::ValidationError("--crop-scale", "takes MIN,MAX with 0 < MIN <= MAX <= 1");
           }
           o->scale_min = p.scale_min;
           o->scale_max = p.scale_max;
         },
         "RandomResizedCrop scale range MIN,MAX (scale_min, scale_max)")
      ->default_str(absl::StrCat(o->scale_min, ",", o->scale_max));
  app->add_flag_callback(
      "--no-flip", [o] { o->flip_probability = 0.0; }, "No random horizontal flip");
}

CLI::Option* AddLayoutFlag(CLI::App* app, std::string* layout) {
  return app->add_option("--layout", *layout, kLayoutHelp)
      ->capture_default_str()
      ->check(ParsedBy(comm::ParseLayoutKind, "contiguous|strided"));
}

CLI::Option* AddLayoutFlag(CLI::App* app, comm::LayoutKind* layout) {
  return AddEnumOption(app, "--layout", layout, comm::ParseLayoutKind, comm::LayoutKindName,
                       kLayoutHelp);
}

void AddJsonFlag(CLI::App* app, bool* json, bool per_rank) {
  app->add_flag("--json", *json,
                per_rank ? "Print one JSON object per rank as its last stdout line"
                         : "Print one JSON object as the last stdout line");
}

void AddCacheFlags(CLI::App* app, PipelineOptions* options) {
  AddSettingFlags(app, options,
                  {"cache_dir", "cache_gb", "whole_chunks", "store_max_requests_per_s"});
}

void AddCacheFlags(CLI::App* app, storage::StoreOverrides* store) {
  // The same two settings for a command that opens a dataset without a pipeline: each value,
  // checked by the table, is put into a PipelineOptions holding *store and copied back.
  for (std::string_view name : {"cache_dir", "cache_gb"}) {
    const Setting& s = *FindSetting(name);
    AddParsedOption(app, s, [&s, store](const SettingValue& v) {
      PipelineOptions held;
      held.store_overrides = *store;
      s.put(held, v);
      *store = held.store_overrides;
    });
  }
  app->add_flag_callback(
      "--no-whole-chunks", [store] { store->whole_chunks = false; },
      std::string(FindSetting("whole_chunks")->help) + " (on by default: this turns it off)");
}

void AddRendezvousFlags(CLI::App* app, std::string* store, std::string* advertise_addr) {
  app->add_option("--store", *store,
                  "Rendezvous store: default TCP on rank 0 (MASTER_ADDR:MASTER_PORT), or file:DIR");
  app->add_option(
      "--advertise-addr", *advertise_addr,
      "Address peers reach this rank on (default: DDPIO_ADVERTISE_ADDR, else GLOO_SOCKET_IFNAME's "
      "address, else this host's route to MASTER_ADDR)");
}

void AddOrderFlags(CLI::App* app, PipelineOptions* o) {
  AddSettingFlags(app, o, {"order", "block_chunk", "block_window", "block_lanes"});
}

void AddFeederFlags(CLI::App* app, PipelineOptions* o) {
  AddSettingFlags(app, o,
                  {"group_size", "layout", "mode", "payload", "readers", "relay", "read_ahead",
                   "depth", "timeout"});
}

}  // namespace ddpio::tools
