// CLI glue for `ddpio upload DATASET s3://BUCKET/PREFIX`: puts a local dataset into an object
// store so that every command (and the Python package) reads it by URL (docs/FORMAT.md, "In an
// object store").
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/str_format.h"
#include "ddpio/common/environment.h"
#include "ddpio/storage/remote/upload.h"
#include "ddpio/storage/s3/s3_config.h"
#include "tools/cli_commands.h"
#include "tools/cli_progress.h"
#include "tools/cli_upload.h"
#include "tools/cli_util.h"

namespace ddpio::tools {
namespace {

struct UploadFlags {
  std::string src, url;
  uint64_t part_mb = 32;
  UploadLayoutFlags layout;
  bool overwrite = false, create_bucket = false, quiet = false, json = false;
};

int Run(const UploadFlags& f) {
  absl::StatusOr<UploadTarget> target = CheckUploadTarget(f.url);
  if (!target.ok()) return ReportUsageError("upload", std::string(target.status().message()));
  storage::remote::UploadOptions o;
  o.part_bytes = f.part_mb << 20;
  f.layout.ApplyTo(o);
  o.overwrite = f.overwrite;
  o.create_bucket = f.create_bucket;
  absl::StatusOr<storage::remote::UploadResult> r =
      UploadWithProgress(f.src, *target, o, !f.quiet && !f.json);
  if (!r.ok()) return ReportError("upload", r.status());
  const storage::s3::S3Url* url = &target->url;
  if (f.json) {
    PrintJsonLine({{"url", url->ToString()},
                   {"records", r->manifest.completion.sample_count},
                   {"files", r->manifest.files.size()},
                   {"chunked", !r->manifest.files.empty() &&
                                   r->manifest.files.front().object.rfind("chunks/", 0) == 0},
                   {"bytes_sent", r->bytes_sent},
                   {"bytes_skipped", r->bytes_skipped},
                   {"already_there", r->already_there}});
  } else if (!f.quiet) {
    std::cout
        << (r->already_there
                ? absl::StrFormat("%s holds this dataset already (%d records): nothing sent\n",
                                  url->ToString(), r->manifest.completion.sample_count)
                : absl::StrFormat(
                      "uploaded %d records in %d object(s) to %s: %.1f MiB sent, %.1f MiB there "
                      "from an earlier run\n",
                      r->manifest.completion.sample_count, r->manifest.files.size(),
                      url->ToString(), r->bytes_sent / 1048576.0, r->bytes_skipped / 1048576.0));
  }
  return kExitOk;
}

}  // namespace

absl::StatusOr<UploadTarget> CheckUploadTarget(const std::string& url) {
  absl::StatusOr<storage::s3::S3Url> parsed = storage::s3::ParseS3Url(url);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<storage::s3::S3Config> config =
      storage::s3::S3ConfigFromEnvironment(CurrentEnvironment());
  if (!config.ok()) return config.status();
  return UploadTarget{*std::move(parsed), *std::move(config)};
}

absl::StatusOr<storage::remote::UploadResult> UploadWithProgress(const std::string& src,
                                                                 const UploadTarget& target,
                                                                 storage::remote::UploadOptions o,
                                                                 bool show) {
  if (show)
    std::cerr << "upload: to " << target.url.ToString() << " (" << target.config.Describe()
              << ")\n";
  std::optional<Progress> indexing, sending;
  uint64_t records = 0;
  o.progress = [&](const storage::remote::UploadProgress& p) {
    if (p.stage == "indexing") {
      records = p.total;
      if (!indexing) indexing.emplace("upload: index", p.total, show);
      indexing->Update(p.done);
    } else if (p.stage == "uploading") {
      if (indexing) {
        indexing->Finish(records);
        indexing.reset();
      }
      if (!sending) sending.emplace("upload: MiB", p.total >> 20, show);
      sending->Update(p.done >> 20);
    } else if (sending) {
      sending->Finish(p.total >> 20);
    }
    return true;
  };
  return storage::remote::Upload(src, target.url.ToString(), target.config, o);
}

void AddUploadLayoutFlags(CLI::App* app, UploadLayoutFlags* flags, const std::string& what) {
  app->add_option("--chunk-mb", flags->chunk_mb,
                  what +
                      "Records go into chunk objects of at most this many MiB (whole records; "
                      "fetched by few large GETs; the upload holds one in memory); 0: the LMDB "
                      "file(s) as they are, readable "
                      "by ddpio before chunk objects")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1024}))
      ->capture_default_str();
  app->add_option("--spread-prefixes", flags->spread_prefixes,
                  what +
                      "Spread the chunk objects over N key prefixes (PREFIX/chunks/00/ ...), "
                      "so that a store's per-prefix request limits (S3: ~5,500 GETs/s each) "
                      "multiply")
      ->check(CLI::Range(1, storage::remote::UploadOptions::kMaxSpreadPrefixes))
      ->capture_default_str();
}

void AddUploadCommand(CLI::App& root, std::vector<Command>* commands) {
  auto* app = root.add_subcommand("upload", "Put a dataset into an S3-compatible object store");
  app->footer(
      "Uploads a local dataset (a directory, an LMDB file or a sharded folder) to "
      "s3://BUCKET/PREFIX:\n"
      "its records in chunk objects of --chunk-mb (or its LMDB file(s) as they are), a record "
      "index\n"
      "and, last, a manifest (a prefix without one is an unfinished upload, never read). Every "
      "record\n"
      "is read and checked first. Interrupted? Run it again: what the store holds is not sent "
      "twice.\n"
      "Then any command reads the URL where it takes a dataset:\n"
      "  ddpio inspect s3://BUCKET/PREFIX --verify     ddpio train --data s3://BUCKET/PREFIX ...\n"
      "The store is configured as for the AWS tools: AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3),\n"
      "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, or the profile\n"
      "AWS_PROFILE of ~/.aws/credentials and ~/.aws/config. scripts/object-store.sh starts a local "
      "one.");
  auto f = std::make_shared<UploadFlags>();
  app->add_option("dataset", f->src, "The local dataset")->required();
  app->add_option("url", f->url, "Where to put it: s3://BUCKET/PREFIX")->required();
  app->add_option("--part-mb", f->part_mb, "Multipart part size for large files, MiB (5 to 5120)")
      ->check(CLI::Range(5, 5120))
      ->capture_default_str();
  AddUploadLayoutFlags(app, &f->layout, "");
  app->add_flag("--overwrite", f->overwrite, "Replace another dataset at the same prefix");
  app->add_flag("--create-bucket", f->create_bucket, "Create the bucket if it does not exist");
  app->add_flag("--quiet", f->quiet, "No progress");
  app->add_flag("--json", f->json, "One JSON line with what was sent");
  commands->push_back({app, [f] { return Run(*f); }});
}

}  // namespace ddpio::tools
