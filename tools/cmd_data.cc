// CLI glue for `ddpio synth`, `ddpio convert` and `ddpio inspect`.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/convert/convert.h"
#include "tools/cli_commands.h"
#include "tools/cli_flags.h"
#include "tools/cli_progress.h"
#include "tools/cli_upload.h"
#include "tools/cli_util.h"
#include "tools/inspect.h"
#include "tools/synth.h"

namespace ddpio::tools {
namespace {

void AddSynth(CLI::App& root, std::vector<Command>* commands) {
  auto* app = root.add_subcommand(
      "synth", "Write a synthetic, learnable ImageFolder of JPEGs (class = shape + colour)");
  app->footer("Example: ddpio synth --out /tmp/synth --classes 10 --per-class 500 --size 64");
  auto o = std::make_shared<SynthOptions>();
  auto json = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  app->add_option("--out", o->out, "Folder to create (must not exist)")->required();
  app->add_option("--classes", o->classes, "Number of classes")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app->add_option("--per-class", o->per_class, "Images per class")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  app->add_option("--size", o->size, "Nominal image side in pixels (each image 0.8-1.25x)")
      ->capture_default_str()
      ->check(CLI::Range(8, 4096));
  app->add_option("--seed", o->seed, "Seed: same seed, same images")->capture_default_str();
  app->add_option("--quality", o->quality, "JPEG quality")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  AddThreadsFlag(app, &o->threads, "Encoding threads");
  AddJsonFlag(app, json.get());
  app->add_flag("--quiet", *quiet, "No progress on stderr");
  commands->push_back({app, [o, json, quiet] {
                         o->progress = !*quiet;
                         auto summary = RunSynth(*o);
                         if (!summary.ok()) return ReportError("synth", summary.status());
                         if (*json) {
                           PrintJsonLine({{"out", o->out},
                                          {"images", summary->images},
                                          {"classes", o->classes},
                                          {"bytes", summary->bytes},
                                          {"seconds", summary->seconds}});
                         } else {
                           std::cout << absl::StrFormat(
                               "wrote %d JPEGs in %d classes to %s (%s) in %.1f s\n",
                               summary->images, o->classes, o->out,
                               HumanBytes(static_cast<double>(summary->bytes)), summary->seconds);
                         }
                         return kExitOk;
                       }});
}

void PrintConvertSummary(const convert::ConvertSummary& summary, bool json) {
  if (summary.already_complete) {
    std::cerr << "ddpio convert: " << summary.out << " is already complete; nothing to do\n";
    if (json) PrintJsonLine({{"records", nullptr}, {"already_complete", true}});
    return;
  }
  const double rate =
      summary.seconds > 0 ? (summary.entries - summary.resumed_from) / summary.seconds : 0;
  const bool tokens = summary.token_dataset;
  if (json) {
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& s : summary.skipped)
      skipped.push_back({{"source", s.relative}, {"reason", s.reason}});
    PrintJsonLine({{"out", summary.out},
                   {"records", summary.records},
                   {"classes", summary.classes},
                   {"bytes", summary.payload_bytes},
                   {"skipped", summary.skipped.size()},
                   {"skipped_files", skipped},
                   {"resumed_from", summary.resumed_from},
                   {"seconds", summary.seconds},
                   {tokens ? "documents_per_s" : "images_per_s", rate},
                   {"tokens", tokens ? nlohmann::json(summary.tokens) : nlohmann::json()},
                   {"stored_as", summary.stored_as}});
    return;
  }
  const std::string what =
      tokens ? absl::StrFormat("%d documents, %d tokens", summary.records, summary.tokens)
             : absl::StrFormat("%d records in %d classes", summary.records, summary.classes);
  std::cout << absl::StrFormat(
      "converted %s -> %s: %s, %s payload, %.1f s (%.0f %s/s)%s\n", summary.source, summary.out,
      what, HumanBytes(static_cast<double>(summary.payload_bytes)), summary.seconds, rate,
      tokens ? "documents" : "images",
      summary.resumed_from > 0 ? absl::StrFormat(", resumed after %d entries", summary.resumed_from)
                               : "");
  for (const auto& [how, count] : summary.stored_as)
    std::cout << "  " << count << " stored as " << how << "\n";
  if (!summary.skipped.empty()) {
    std::cout << "skipped " << summary.skipped.size() << " file(s):\n";
    for (const auto& s : summary.skipped) std::cout << "  " << s.reason << "\n";
  }
}

struct StoreFlags {
  std::string stage;
  bool keep = false, create_bucket = false, overwrite = false;
  UploadLayoutFlags layout;
};

// Where `convert --out s3://B/P` converts first: one folder per destination, so that --resume
// (and an interrupted upload, run again) find it.
std::string DefaultStage(const storage::s3::S3Url& url) {
  const char* tmp = std::getenv("TMPDIR");
  std::string name = absl::StrCat("ddpio-stage-", url.bucket, "-", url.prefix);
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/var/tmp", "/", name);
}

// The upload half of `convert --out s3://`: the staged dataset goes up (resumable), then the
// staging folder is removed unless kept. A failed upload keeps it and says how to go on.
int UploadConverted(convert::ConvertSummary summary, const UploadTarget& target,
                    const StoreFlags& store, bool quiet, bool json) {
  const std::string stage = summary.out;
  storage::remote::UploadOptions uo;
  uo.create_bucket = store.create_bucket;
  uo.overwrite = store.overwrite;
  store.layout.ApplyTo(uo);
  absl::StatusOr<storage::remote::UploadResult> up =
      UploadWithProgress(stage, target, uo, !quiet && !json);
  if (!up.ok()) {
    return ReportError(
        "convert",
        absl::Status(up.status().code(),
                     absl::StrCat(up.status().message(), " (the converted dataset is kept in ",
                                  stage, ": `ddpio upload ", stage, " ", target.url.ToString(),
                                  "` continues the upload)")));
  }
  std::error_code ec;
  if (!store.keep) std::filesystem::remove_all(stage, ec);
  if (ec && !quiet)
    std::cerr << "convert: could not remove the staging folder " << stage << ": " << ec.message()
              << "\n";
  if (!summary.already_complete) summary.out = target.url.ToString();
  PrintConvertSummary(summary, json);
  if (!json && !quiet) {
    std::cout << absl::StrFormat("uploaded to %s: %.1f MiB sent%s; staging folder %s %s\n",
                                 target.url.ToString(), up->bytes_sent / 1048576.0,
                                 up->already_there ? " (it was there already)" : "", stage,
                                 store.keep ? "kept" : "removed");
  }
  return kExitOk;
}

// Everything `ddpio convert` parses.
struct ConvertFlags {
  convert::ConvertOptions o;
  std::string src, list, from;
  bool json = false, quiet = false, header_only = false;
  uint64_t map_mb = 1024, decode_mb = 0;
  StoreFlags store;
};

constexpr char kConvertFooter[] =
    "Samples, labels and order follow torchvision.datasets.ImageFolder (sorted class folders, "
    "sorted\n"
    "files; .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp in any case). JPEGs are re-written "
    "losslessly\n"
    "with restart markers (every 4 MCUs; checked pixel for pixel), so the loader decodes only a "
    "crop's\n"
    "segments; --restart-interval 0 keeps their bytes. Other formats are stored as the RGB "
    "pixels\n"
    "Pillow's convert('RGB') gives.\n"
    "Examples:\n"
    "  ddpio convert --src /data/imagenet/train --out /data/train.lmdb --threads 8\n"
    "  ddpio convert --src /data/imagenet/val --val-labels LOC_val_solution.csv --out "
    "/data/val.lmdb\n"
    "  ddpio convert --src /data/imagenet/val --val-labels "
    "ILSVRC2012_validation_ground_truth.txt \\\n"
    "                --synsets map_clsloc.txt --out /data/val.lmdb\n"
    "  ddpio convert --list train.txt --root /data/images --out /data/train.lmdb\n"
    "  ddpio convert --from caffe-lmdb --src /data/caffe_train_lmdb --out /data/train.lmdb\n"
    "  ddpio convert --from dataset --src /data/train.lmdb   # upgrade an older dataset in place "
    "(restart markers)\n"
    "Token datasets for language models (one record per document of token ids):\n"
    "  ddpio convert --from jsonl --src /data/web.jsonl --tokenizer spm.model --out /data/web.tok\n"
    "  ddpio convert --from megatron --src /data/wiki_text_document --out /data/wiki.tok\n"
    "  ddpio convert --from tokens --src train.bin --dtype uint16 --eos 50256 --out /data/owt.tok\n"
    "  ddpio convert --src DIR --out DB --resume     # continue after a crash or Ctrl-C\n"
    "  ddpio convert --src DIR --out s3://BUCKET/train --create-bucket   # into an object "
    "store:\n"
    "      converted in a local staging folder (--stage), then uploaded as `ddpio upload` does;\n"
    "      the store is configured as for the AWS tools (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, "
    "...)";

// `ddpio convert` once its flags are parsed: the combinations CLI11 cannot check, the store's
// destination (before any work), the conversion with progress, then the summary or the upload.
int RunConvert(ConvertFlags flags) {
  convert::ConvertOptions* o = &flags.o;
  const StoreFlags& store = flags.store;
  if (flags.src.empty() == flags.list.empty())
    return ReportUsageError("convert", "give exactly one of --src or --list");
  if (o->out.empty() && flags.from != "dataset") {
    return ReportUsageError(
        "convert", "--out is required (only --from dataset may omit it, to upgrade in place)");
  }
  if (flags.from == "caffe-lmdb" && (flags.src.empty() || !o->val_labels.empty())) {
    return ReportUsageError("convert",
                            "--from caffe-lmdb needs --src LMDB (and no --list or --val-labels)");
  }
  if (!o->val_labels.empty() && flags.src.empty()) {
    return ReportUsageError("convert", "--val-labels labels the flat folder given with --src");
  }
  if (flags.from == "dataset" && (flags.src.empty() || !o->val_labels.empty())) {
    return ReportUsageError("convert",
                            "--from dataset needs --src DATASET (and no --list or --val-labels)");
  }
  const bool tokens = flags.from == "jsonl" || flags.from == "megatron" || flags.from == "tokens";
  if (tokens && (flags.src.empty() || !o->val_labels.empty())) {
    return ReportUsageError(
        "convert",
        absl::StrCat("--from ", flags.from, " needs --src ",
                     flags.from == "megatron" ? "PREFIX (of PREFIX.bin and PREFIX.idx)" : "FILE",
                     " (and no --list or --val-labels)"));
  }
  if (flags.from == "jsonl" && o->tokens.tokenizer.empty()) {
    return ReportUsageError("convert",
                            "--from jsonl needs --tokenizer MODEL.model (a SentencePiece model)");
  }
  std::optional<UploadTarget> target;
  if (absl::StartsWith(o->out, "s3://")) {
    absl::StatusOr<UploadTarget> t = CheckUploadTarget(o->out);
    if (!t.ok()) return ReportUsageError("convert", std::string(t.status().message()));
    target = *std::move(t);
    o->out = store.stage.empty() ? DefaultStage(target->url) : store.stage;
    if (!flags.quiet && !flags.json)
      std::cerr << "convert: into " << o->out << ", then up to " << target->url.ToString() << "\n";
  } else if (!store.stage.empty() || store.keep || store.create_bucket || store.overwrite) {
    return ReportUsageError(
        "convert", "--stage, --keep-stage, --create-bucket and --overwrite go with --out s3://");
  }
  o->full_decode = !flags.header_only;
  o->writer.initial_map_size = flags.map_mb << 20;
  o->max_decode_bytes = flags.decode_mb << 20;
  absl::StatusOr<convert::SourceKind> kind = convert::ParseSourceKind(flags.from);
  if (!kind.ok()) return ReportUsageError("convert", std::string(kind.status().message()));
  o->source = flags.list.empty() ? flags.src : flags.list;
  o->source_kind = flags.list.empty() ? *kind : convert::SourceKind::kList;
  std::unique_ptr<Progress> progress;  // made once the total is known
  auto summary = convert::Convert(*o, [&](const convert::ConvertProgress& p) {
    if (progress == nullptr)
      progress = std::make_unique<Progress>("convert", p.entries_total, !flags.quiet);
    if (p.final) {
      progress->Finish(p.entries_done);
    } else {
      progress->Update(p.entries_done);
    }
    return true;
  });
  if (!summary.ok()) return ReportError("convert", summary.status());
  if (!target) {
    PrintConvertSummary(*summary, flags.json);
    return kExitOk;
  }
  return UploadConverted(*summary, *target, store, flags.quiet, flags.json);
}

void AddConvert(CLI::App& root, std::vector<Command>* commands) {
  auto* app = root.add_subcommand("convert",
                                  "Convert an ImageFolder, a list file, an ImageNet validation "
                                  "folder or a Caffe LMDB into a ddpio dataset; JSON lines, a "
                                  "Megatron dataset or a token file into a token dataset");
  app->footer(kConvertFooter);
  auto f = std::make_shared<ConvertFlags>();
  convert::ConvertOptions* o = &f->o;
  f->decode_mb = o->max_decode_bytes >> 20;
  f->from = convert::SourceKindName(o->source_kind);
  auto* src_opt = app->add_option(
      "--src", f->src,
      "ImageFolder root (one sub-folder per class), a flat validation folder "
      "with --val-labels, the LMDB with --from caffe-lmdb, a ddpio dataset with --from dataset; "
      "a JSON lines file or folder (--from jsonl), a Megatron PREFIX (--from megatron) or a token "
      "file (--from tokens)");
  app->add_option(
         "--from", f->from,
         "What --src is: imagefolder, caffe-lmdb (Caffe/DALI Datum LMDB), or dataset (a ddpio "
         "dataset, rewritten with this run's options: into --out, or in place without --out, "
         "resumable); for a token dataset (language models): jsonl (JSON lines, tokenized with "
         "--tokenizer), megatron (Megatron-LM's PREFIX.bin/.idx, taken as is, one record per "
         "sequence) or tokens (a flat file of ids, raw with --dtype or a .npy, split at --eos)")
      ->capture_default_str()
      ->check(
          CLI::IsMember({"imagefolder", "caffe-lmdb", "dataset", "jsonl", "megatron", "tokens"}));
  app->add_option("--tokenizer", o->tokens.tokenizer,
                  "With --from jsonl: the SentencePiece model (.model) to tokenize the text with");
  app->add_option("--text-field", o->tokens.text_field,
                  "With --from jsonl: the field of each JSON line holding the document's text")
      ->capture_default_str();
  app->add_option("--eos", o->tokens.eos_id,
                  "The end-of-document id. jsonl: appended to every document (default: the "
                  "model's EOS; -1: none); tokens: where the file is split into documents "
                  "(default none: documents of 65536 ids, no boundaries); megatron: recorded")
      ->check(CLI::Range(int64_t{-1}, int64_t{UINT32_MAX}));
  app->add_option("--dtype", o->tokens.dtype,
                  "With --from tokens and a raw file: its ids, uint16 (nanoGPT's train.bin) or "
                  "uint32 (a .npy says its own)")
      ->check(CLI::IsMember({"uint16", "uint32"}));
  auto* labels_opt = app->add_option(
      "--val-labels", o->val_labels,
      "ImageNet validation labels for the flat folder --src: LOC_val_solution.csv, or "
      "ILSVRC2012_validation_ground_truth.txt with --synsets");
  app->add_option(
         "--synsets", o->synsets,
         "With the devkit's ground truth: its ID order, as map_clsloc.txt or one wnid per line")
      ->needs(labels_opt);
  auto* list_opt =
      app->add_option("--list", f->list, "List file of 'relative/path label' lines (Caffe style)");
  src_opt->excludes(list_opt);
  labels_opt->excludes(list_opt);
  app->add_option("--root", o->list_root,
                  "With --list: folder the paths are relative to (default: the list file's folder)")
      ->needs(list_opt);
  app->add_option(
      "--out", o->out,
      "Dataset to create (a directory, or a file with --single-file), or s3://BUCKET/PREFIX");
  StoreFlags* store = &f->store;
  app->add_option("--stage", store->stage,
                  "With --out s3://: the local folder converted into before the upload (default: "
                  "$TMPDIR or /var/tmp, ddpio-stage-BUCKET-PREFIX; --resume continues it)");
  app->add_flag("--keep-stage", store->keep,
                "With --out s3://: keep the staging folder after the upload");
  app->add_flag("--create-bucket", store->create_bucket,
                "With --out s3://: create the bucket if it does not exist");
  app->add_flag("--overwrite", store->overwrite,
                "With --out s3://: replace another dataset at the same prefix");
  AddUploadLayoutFlags(app, &store->layout, "With --out s3://: ");
  AddThreadsFlag(app, &o->threads, "Reading/validating threads");
  app->add_flag("--resume", o->resume, "Continue an interrupted conversion of the same source");
  app->add_flag(
      "--skip-invalid", o->skip_invalid,
      "Skip unreadable, non-JPEG or corrupt files (listed in the summary) instead of stopping");
  app->add_flag("--header-only", f->header_only,
                "Validate JPEG headers only, not a full decode (faster; corrupt data found later)");
  auto* max_side =
      app->add_option(
             "--max-side", o->shrink.max_side,
             "Store images whose longer side exceeds N at a longer side of N (antialiased, "
             "re-encoded JPEG; never upscaled; original size recorded)")
          ->check(CLI::Range(16, 65535));
  app->add_option("--quality", o->shrink.quality,
                  "With --max-side: JPEG quality of the re-encoded images")
      ->capture_default_str()
      ->check(CLI::Range(1, 100))
      ->needs(max_side);
  app->add_option("--restart-interval", o->restart_interval,
                  "Restart marker every N MCUs (a lossless transcode, checked pixel for pixel), so "
                  "the loader "
                  "decodes only the segments a crop needs (the default, 4, is the measured choice: "
                  "docs/PERFORMANCE.md); "
                  "0 keeps every JPEG byte for byte and converts ~2x faster")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app->add_option("--shards", o->shards,
                  "Write K shards in parallel (one dataset folder, read as one in the same order)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app->add_flag("--single-file", o->writer.single_file,
                "Write one LMDB file instead of a directory");
  app->add_option("--batch-records", o->writer.batch_records, "Records per committed transaction")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000000));
  app->add_option("--max-decode-mb", f->decode_mb,
                  "Most memory, in MiB, one thread may use to decode a PNG, TIFF, BMP, WebP or PPM "
                  "image (estimated "
                  "from its header before decoding); larger images are refused (skip them with "
                  "--skip-invalid). Peak "
                  "decoding memory is about --threads x N")
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  app->add_option("--map-size-mb", f->map_mb, "Initial LMDB map size in MiB (grows automatically)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  AddJsonFlag(app, &f->json);
  app->add_flag("--quiet", f->quiet, "No progress on stderr");
  commands->push_back({app, [f] { return RunConvert(*f); }});
}
void AddInspect(CLI::App& root, std::vector<Command>* commands) {
  auto* app = root.add_subcommand("inspect", "Describe a dataset; --verify checks every record");
  app->footer(
      "Examples:\n"
      "  ddpio inspect /data/train.lmdb --verify           # exit 1 if any record is bad\n"
      "  ddpio inspect /data/train.lmdb --get 17 --out x.jpg\n"
      "  ddpio inspect s3://bucket/train                   # the manifest only: two GETs\n"
      "  ddpio inspect s3://bucket/train --verify          # every record, with class counts\n"
      "A local dataset is scanned whole (class counts, sizes, digest). A dataset in an object\n"
      "store is summarised from its manifest unless --verify, which fetches every record.");
  auto o = std::make_shared<InspectOptions>();
  auto json = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  auto get = std::make_shared<int64_t>(-1);
  auto out = std::make_shared<std::string>();
  app->add_option("db", o->path, "Dataset path")->required();
  AddCacheFlags(app, &o->store);
  app->add_flag("--verify", o->verify,
                "Check every record's checksum; list bad records; exit 1 if any");
  app->add_flag("--decode", o->decode, "With --verify: also fully decode every JPEG");
  AddThreadsFlag(app, &o->threads, "Scanning threads");
  auto* get_opt =
      app->add_option("--get", *get, "Write record INDEX's payload to --out and describe it")
          ->check(CLI::NonNegativeNumber);
  auto* out_opt = app->add_option("--out", *out, "File for --get");
  get_opt->needs(out_opt);
  out_opt->needs(get_opt);
  AddJsonFlag(app, json.get());
  app->add_flag("--quiet", *quiet, "No progress on stderr");
  commands->push_back(
      {app, [=] {
         if (*get >= 0) {
           auto record = ExtractRecord(o->path, static_cast<uint64_t>(*get), *out, o->store);
           if (!record.ok()) return ReportError("inspect", record.status());
           if (*json) {
             PrintJsonLine({{"index", *get},
                            {"label", record->label},
                            {"source", record->source_name},
                            {"bytes", record->payload.size()},
                            {"width", record->width},
                            {"height", record->height},
                            {"channels", record->channels},
                            {"out", *out},
                            {"type", storage::ContentTypeName(record->type)},
                            {"original_width", record->original_width},
                            {"original_height", record->original_height}});
           } else if (const int width = storage::TokenWidth(record->type); width != 0) {
             std::cout << absl::StrFormat(
                 "record %d: source %s, %s, %d ids -> %s (little-endian: "
                 "numpy.fromfile(path, '<u%d'))\n",
                 *get, record->source_name, storage::ContentTypeName(record->type),
                 record->payload.size() / width, *out, width);
           } else {
             std::cout << absl::StrFormat(
                 "record %d: label %d, source %s, %s %dx%dx%d%s, %d bytes -> %s%s\n", *get,
                 record->label, record->source_name, storage::ContentTypeName(record->type),
                 record->width, record->height, record->channels,
                 record->original_width != 0
                     ? absl::StrFormat(" (shrunk from %dx%d)", record->original_width,
                                       record->original_height)
                     : "",
                 record->payload.size(), *out,
                 record->type == storage::ContentType::kRawUint8 ? " (as a binary PPM)" : "");
           }
           return kExitOk;
         }
         if (o->decode) o->verify = true;
         o->progress = !*quiet;
         // In a child: a structurally corrupt file that crashes liblmdb becomes a report, not a
         // dead tool.
         return RunIsolated("inspect", o->path, [&] {
           auto report = Inspect(*o);
           if (!report.ok()) return ReportError("inspect", report.status());
           if (*json) {
             PrintJsonLine(InspectJson(*report));
           } else {
             std::cout << InspectText(*report) << std::flush;
           }
           if (!report->bad.empty()) {
             std::fprintf(stderr, "ddpio inspect: %zu bad record(s) in %s\n", report->bad.size(),
                          o->path.c_str());
             return kExitRuntimeError;
           }
           return kExitOk;
         });
       }});
}

}  // namespace

void AddDataCommands(CLI::App& root, std::vector<Command>* commands) {
  AddSynth(root, commands);
  AddConvert(root, commands);
  AddInspect(root, commands);
}

}  // namespace ddpio::tools
