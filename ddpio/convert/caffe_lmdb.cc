#include "ddpio/convert/caffe_lmdb.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/caffe_datum.h"
#include "ddpio/loader/jpeg.h"

namespace ddpio::convert {

absl::StatusOr<SourceListing> ListCaffeLmdb(const storage::LmdbFile& lmdb) {
  SourceListing listing;
  listing.kind = "caffe-lmdb";
  listing.root = lmdb.path();
  listing.described = lmdb.path();
  int32_t max_label = -1;
  DDPIO_RETURN_IF_ERROR(
      lmdb.ForEach([&](std::string_view key, absl::Span<const uint8_t> value) -> absl::Status {
        // A DUPSORT database holds several values under one key, listed one after the other; the
        // reader looks records up by key and would get the first every time: two samples with
        // the same pixels, one image lost. Refuse instead of mislabelling.
        if (!listing.entries.empty() && listing.entries.back().relative == key) {
          return absl::InvalidArgumentError(
              absl::StrCat("key '", std::string(key), "' of ", lmdb.path(),
                           " holds more than one Datum (a database with duplicate keys): ddpio "
                           "converts one Datum per key; "
                           "write the LMDB with unique keys"));
        }
        CaffeDatum datum;
        absl::Status parsed = ParseCaffeDatum(value, &datum);
        if (!parsed.ok())
          return Annotate(
              parsed, absl::StrCat("Datum under key '", std::string(key), "' of ", lmdb.path()));
        if (datum.label < 0 || datum.label >= kMaxListClasses) {
          return absl::InvalidArgumentError(
              absl::StrCat("Datum under key '", std::string(key), "' of ", lmdb.path(),
                           " has label ", datum.label, ", outside [0, ", kMaxListClasses, ")"));
        }
        listing.entries.push_back({std::string(key), datum.label});
        max_label = std::max(max_label, datum.label);
        return absl::OkStatus();
      }));
  if (listing.entries.empty())
    return absl::InvalidArgumentError(absl::StrCat("Caffe LMDB ", lmdb.path(), " is empty"));
  for (int32_t c = 0; c <= max_label; ++c) listing.classes.push_back(std::to_string(c));
  return listing;
}

std::string CaffeLmdbReader::Describe(const SourceEntry& entry) const {
  return absl::StrCat("key '", entry.relative, "' of ", lmdb_->path());
}

absl::StatusOr<SourceItem> CaffeLmdbReader::Read(uint64_t, const SourceEntry& entry) {
  SourceItem item;
  absl::Status st =
      lmdb_->Get(entry.relative, [&](std::string_view, absl::Span<const uint8_t> value) {
        CaffeDatum datum;
        DDPIO_RETURN_IF_ERROR(ParseCaffeDatum(value, &datum));
        if (datum.encoded) {
          item.bytes.assign(datum.data.begin(), datum.data.end());
          return absl::OkStatus();
        }
        item.raw_width = datum.width;
        item.raw_height = datum.height;
        return CaffeDatumToRgb(datum, loader::kDefaultMaxImagePixels, &item.bytes);
      });
  if (!st.ok()) return Annotate(st, Describe(entry));
  return item;
}

}  // namespace ddpio::convert
