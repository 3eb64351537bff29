// Fixtures for tests that need ddpio datasets: deterministic records, a writer loop, and raw
// LMDB access to damage a dataset the way a bad disk or an interrupted job would.
#ifndef DDPIO_TESTS_SUPPORT_DATASET_FIXTURES_H_
#define DDPIO_TESTS_SUPPORT_DATASET_FIXTURES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/dataset_writer.h"
#include "ddpio/storage/record.h"

namespace ddpio::testing {

// Record i: label i % 7, a payload of 100 + (i * 37) % 900 bytes derived from i.
storage::Record MakeRecord(uint64_t i);

storage::DatasetHeader MakeHeader(int classes = 7);

// Writes records [0, n) and finishes (unless finish is false).
absl::Status WriteDataset(const std::string& path, uint64_t n,
                          const storage::WriterOptions& options = {}, bool finish = true);

// Raw LMDB access, bypassing ddpio: set or delete a value in database `db` ("samples" or
// "meta") of the dataset at `path` (a directory). `value` nullopt deletes.
absl::Status PokeValue(const std::string& path, const std::string& db, const std::string& key,
                       const std::optional<std::string>& value);
absl::Status ReadRawValue(const std::string& path, const std::string& db, const std::string& key,
                          std::string* value);
std::string SampleKey(uint64_t index);

// Flips a byte near the end of record `index`'s stored value (its payload), so that its CRC32C no
// longer matches: a record every read reports as DataLoss.
absl::Status DamageRecordChecksum(const std::string& path, uint64_t index);

// A w x h RGB JPEG (4:2:0, quality 90) of a smooth pattern that depends on `seed`.
std::vector<uint8_t> MakeJpeg(int width, int height, uint64_t seed);

// A w x h RGB JPEG (quality 90, TurboJPEG subsampling `tj_subsampling`, e.g. TJSAMP_422) of a
// pattern with strong chroma detail and noise, where chroma upsampling's edge effects show.
std::vector<uint8_t> MakeDetailedJpeg(int width, int height, uint64_t seed, int tj_subsampling);

// A JPEG whose frame header (SOF) claims width x height while its data is that of a small image:
// a decompression bomb a few hundred bytes long.
std::vector<uint8_t> MakeJpegBomb(int width, int height);

// A w x h four-channel (CMYK/YCCK) JPEG.
std::vector<uint8_t> MakeCmykJpeg(int width, int height);

// A JPEG record of `jpeg` whose stored geometry is width x height x channels (what the converter
// would have written, or a lie), label `label`.
storage::Record JpegRecord(const std::vector<uint8_t>& jpeg, int width, int height, int channels,
                           int32_t label);

// A finished dataset of exactly these records, with `classes` classes.
absl::Status WriteRecords(const std::string& path, const std::vector<storage::Record>& records,
                          int classes);

// A dataset of n JPEG records: record i is MakeJpeg(w_i, h_i, i) with sizes varying in
// [min_side, 2 * min_side) and label i % classes. Records listed in `corrupt` hold a JPEG
// truncated to half (checksums are still valid: the damage is in the image itself).
absl::Status WriteJpegDataset(const std::string& path, uint64_t n, int min_side, int classes = 5,
                              const std::vector<uint64_t>& corrupt = {});

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_DATASET_FIXTURES_H_
