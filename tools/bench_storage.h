// `ddpio bench storage`: how fast the reader delivers records, next to what the machine allows.
//
// Every figure is a median over --repeat rounds, and each round measures, back to back on the
// same threads, (1) ddpio: ReadTxn::Get with CRC32C verification (touches every payload byte),
// (2) lookup only: Get without verification (B-tree walk, no payload byte touched) and (3) the
// ceiling: plain pread() copies of the LMDB data file from the page cache into a private buffer,
// the same bytes a reader has to bring in. Data are warmed into the page cache first: this
// measures the software path, not the disk (see docs/PERFORMANCE.md for cold-cache notes).
// A dataset in an object store (s3://): each round opens it afresh and reads every record, each
// thread asking a window ahead; the ceiling is the store, measured in the same round — the same
// records, one range GET each, as many in flight, nothing checked (RemoteDataset::FetchRaw); the
// store's bulk rate, one GET a block-order chunk (RemoteDataset::FetchRawChunks); and the
// process's CPU a record for each.
#ifndef DDPIO_TOOLS_BENCH_STORAGE_H_
#define DDPIO_TOOLS_BENCH_STORAGE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/storage/store_settings.h"

namespace ddpio::tools {

struct BenchStorageOptions {
  std::string data;
  bool random_order = false;
  int threads = 1;  // 0: all cores
  int repeat = 5;
  uint64_t seed = 0;
  // s3://: what the command line sets (--cache-dir, --cache-gb), winning over the environment's.
  storage::StoreOverrides store;
};

// JSON result with records_per_s, mb_per_s, lookup_records_per_s, ceiling_mb_per_s, ratio and
// the per-round figures. NotFound / FailedPrecondition from opening the dataset.
absl::StatusOr<nlohmann::json> BenchStorage(const BenchStorageOptions& options);
std::string BenchStorageText(const nlohmann::json& result);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_BENCH_STORAGE_H_
