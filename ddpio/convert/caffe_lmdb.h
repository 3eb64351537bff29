// `ddpio convert --from caffe-lmdb SRC`: a Caffe/DALI LMDB of Datum messages
// (ddpio/convert/caffe_datum.h) as a conversion source. Entries are the LMDB's keys in key order
// (Caffe's convert_imageset writes "%08d_<path>" keys, so key order is its insertion order); labels
// come from the Datums. Encoded Datums hand over their image file bytes (JPEGs are stored as they
// are, other formats decoded like files); raw Datums hand over their pixels as RGB.
#ifndef DDPIO_CONVERT_CAFFE_LMDB_H_
#define DDPIO_CONVERT_CAFFE_LMDB_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/convert/convert_sources.h"
#include "ddpio/convert/source_reader.h"
#include "ddpio/storage/lmdb_file.h"

namespace ddpio::convert {

// Lists every key with its Datum's label; classes are "0" to the largest label. DataLoss naming
// the key for a Datum that does not parse; InvalidArgument for a label outside
// [0, kMaxListClasses) or an empty LMDB.
absl::StatusOr<SourceListing> ListCaffeLmdb(const storage::LmdbFile& lmdb);

class CaffeLmdbReader : public SourceReader {
 public:
  explicit CaffeLmdbReader(const storage::LmdbFile* lmdb) : lmdb_(lmdb) {}  // not owned
  absl::StatusOr<SourceItem> Read(uint64_t index, const SourceEntry& entry) override;
  std::string Describe(const SourceEntry& entry) const override;

 private:
  const storage::LmdbFile* const lmdb_;
};

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_CAFFE_LMDB_H_
