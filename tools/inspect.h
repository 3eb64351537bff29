// `ddpio inspect`: what is in a dataset, and whether every record is intact.
//
// Scans every record on N threads (header fields; with verify, the CRC32C; with decode, a full
// strict JPEG decode whose geometry must match the stored one). Bad records are collected, not
// fatal, so one run lists all of them by index and key. Also computes a content digest (CRC32C
// over every record's fields and payload, in index order): two datasets with the same digest
// hold the same samples, whatever their LMDB page layout — e.g. a resumed and an uninterrupted
// conversion.
#ifndef DDPIO_TOOLS_INSPECT_H_
#define DDPIO_TOOLS_INSPECT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/record.h"
#include "ddpio/storage/remote/remote_dataset.h"
#include "ddpio/storage/store_settings.h"

namespace ddpio::tools {

struct InspectOptions {
  std::string path;
  bool verify = false;  // check every checksum
  bool decode = false;  // also decode every JPEG (implies verify)
  int threads = 0;      // 0: all cores
  bool progress = true;
  // A dataset in an object store: what the command line sets (--cache-dir, --cache-gb), winning
  // over the environment's (storage/store_settings.h).
  storage::StoreOverrides store;
};

struct BadRecord {
  uint64_t index = 0;
  std::string key;
  std::string reason;
};

struct MinMax {
  uint64_t min = 0, max = 0, sum = 0, count = 0;
  void Add(uint64_t v);
};

struct InspectReport {
  std::string path;
  storage::DatasetHeader header;
  storage::DatasetCompletion completion;
  uint64_t file_bytes = 0;
  bool no_lock = false;
  std::vector<uint64_t> class_counts;
  MinMax payload, width, height;
  uint64_t jpeg_records = 0, raw_records = 0;
  uint64_t segmented = 0;  // JPEGs the loader decodes from a crop's restart segments alone
  uint64_t shrunk = 0;     // records stored smaller by convert --max-side
  MinMax document_tokens;  // a token dataset: ids per document (records read)
  size_t shards = 1;
  std::vector<BadRecord> bad;
  bool verified = false;
  bool decoded = false;
  std::string content_digest;
  // False for a dataset in an object store inspected without --verify: summarised from its
  // manifest alone (counts per class, sizes and the digest need every record, so are not given).
  bool records_read = true;
  double seconds = 0;
  // A dataset in an object store: what the store was asked and what the caches answered.
  std::optional<storage::remote::RemoteCounters> store;
};

// Errors opening the dataset (NotFound, FailedPrecondition for incomplete / unknown version);
// bad records are reported in the result, not as an error. A dataset in an object store without
// verify or decode is summarised from its manifest and index (two GETs), no record read.
absl::StatusOr<InspectReport> Inspect(const InspectOptions& options);
nlohmann::json InspectJson(const InspectReport& report);
std::string InspectText(const InspectReport& report);

// Writes record `index`'s payload to `out_file` (a JPEG record: byte-identical to the source
// file; raw pixels: as a binary PPM; a token record: its ids, little-endian; written to a temporary
// name and renamed) and returns it. `store`: as InspectOptions::store.
absl::StatusOr<storage::Record> ExtractRecord(const std::string& path, uint64_t index,
                                              const std::string& out_file,
                                              const storage::StoreOverrides& store = {});

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_INSPECT_H_
