// ConvertTokens (convert.h): documents of token ids into a token dataset, through the conversion
// loop every source kind shares (internal/convert_driver.h).
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/convert.h"
#include "ddpio/convert/internal/convert_driver.h"
#include "ddpio/convert/token_sources.h"
#include "ddpio/version.h"

namespace ddpio::convert {
namespace {

absl::StatusOr<std::unique_ptr<DocumentSource>> OpenSource(const ConvertOptions& o, int workers) {
  const TokenConvertOptions& t = o.tokens;
  switch (o.source_kind) {
    case SourceKind::kJsonl: {
      JsonlOptions j;
      std::error_code ec;
      const std::filesystem::path model = std::filesystem::absolute(t.tokenizer, ec);
      j.tokenizer = ec ? t.tokenizer : model.lexically_normal().string();
      j.text_field = t.text_field;
      j.eos_id = t.eos_id;
      j.workers = workers;
      return OpenJsonlSource(o.source, j);
    }
    case SourceKind::kMegatron:
      return OpenMegatronSource(o.source, t.eos_id == -2 ? -1 : t.eos_id);
    case SourceKind::kTokens:
      return OpenTokenFileSource(o.source, t.dtype, t.eos_id == -2 ? -1 : t.eos_id);
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "a '", std::string(SourceKindName(o.source_kind)), "' source holds images, not tokens"));
  }
}

storage::DatasetHeader HeaderFor(const DocumentSource& source, const ConvertOptions& o) {
  storage::DatasetHeader header;
  header.format_version = storage::kTokensFormatVersion;
  header.source_kind = source.kind();
  header.source_path = source.described();
  header.source_files = source.source_files();
  header.source_fingerprint = absl::StrCat(
      absl::Hex(Fnv1a64(absl::StrCat(source.fingerprint(), "|documents=", source.size(),
                                     "|skip_invalid=", o.skip_invalid)),
                absl::kZeroPad16));
  header.tokens.width = source.width();
  header.tokens.eos_id = source.eos_id();
  header.tokens.vocab_size = source.vocab_size();
  header.tokens.tokenizer = source.tokenizer();
  header.tool_version = DDPIO_VERSION;
  return header;
}

}  // namespace

absl::StatusOr<ConvertSummary> ConvertTokens(const ConvertOptions& o,
                                             const ProgressCallback& callback) {
  if (o.shards > 1) {
    return WithSetting(absl::InvalidArgumentError(
                           "a token dataset is converted into one LMDB, not shards (its documents "
                           "are small records: one file holds billions of tokens)"),
                       "shards");
  }
  const int workers = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<DocumentSource> source, OpenSource(o, workers));
  const storage::ContentType type = storage::TokenType(source->width());
  internal::EntrySource entries;
  entries.count = source->size();
  entries.workers = workers;
  entries.load = [&](uint64_t i, int worker) {
    internal::LoadedEntry out;
    storage::Record r;
    r.type = type;
    r.source_name = source->Name(i);
    absl::Status read = source->Read(i, worker, &r.payload);
    out.bytes_read = r.payload.size();
    out.stored_as = absl::StrCat("documents of ", 8 * source->width(), "-bit token ids");
    if (read.ok()) {
      out.record = std::move(r);
    } else {
      out.record = read;
    }
    return out;
  };
  entries.name = [&](uint64_t i) { return source->Name(i); };
  // The document lengths, committed with their records (dataset_info.h, TokenLengthsKey).
  std::string lengths;
  entries.appended = [&](const storage::Record& r) {
    const uint32_t n = static_cast<uint32_t>(r.payload.size() / source->width());
    for (int b = 0; b < 4; ++b) lengths.push_back(static_cast<char>(n >> (8 * b)));
  };
  entries.before_commit = [&](storage::DatasetWriter& writer) -> absl::Status {
    if (lengths.empty()) return absl::OkStatus();
    DDPIO_RETURN_IF_ERROR(
        writer.PutMeta(storage::TokenLengthsKey(writer.committed_count()), std::move(lengths)));
    lengths.clear();
    return absl::OkStatus();
  };
  ConvertSummary summary;
  summary.source = source->described();
  summary.out = o.out;
  summary.entries = source->size();
  summary.token_dataset = true;
  DDPIO_ASSIGN_OR_RETURN(summary, internal::RunConversion(HeaderFor(*source, o), o, entries,
                                                          callback, std::move(summary)));
  summary.tokens = summary.payload_bytes / static_cast<uint64_t>(source->width());
  return summary;
}

}  // namespace ddpio::convert
