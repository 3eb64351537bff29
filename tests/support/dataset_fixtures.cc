#include "tests/support/dataset_fixtures.h"

#include <lmdb.h>
#include <turbojpeg.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::testing {

storage::Record MakeRecord(uint64_t i) {
  storage::Record r;
  r.label = static_cast<int32_t>(i % 7);
  r.type = storage::ContentType::kJpeg;
  r.channels = 3;
  r.height = 10 + i % 5;
  r.width = 20 + i % 3;
  r.source_name = absl::StrCat("class_", i % 7, "/img_", i, ".jpg");
  r.payload.resize(100 + (i * 37) % 900);
  for (size_t k = 0; k < r.payload.size(); ++k) {
    r.payload[k] = static_cast<uint8_t>((i * 131 + k * 7) ^ (k >> 3));
  }
  return r;
}

storage::DatasetHeader MakeHeader(int classes) {
  storage::DatasetHeader h;
  for (int c = 0; c < classes; ++c) h.classes.push_back(absl::StrCat("class_", c));
  h.source_kind = "api";
  h.source_path = "test";
  h.source_fingerprint = "fixture";
  h.tool_version = "test";
  return h;
}

absl::Status WriteDataset(const std::string& path, uint64_t n,
                          const storage::WriterOptions& options, bool finish) {
  DDPIO_ASSIGN_OR_RETURN(auto writer, storage::DatasetWriter::Create(path, MakeHeader(), options));
  for (uint64_t i = 0; i < n; ++i) {
    storage::Record r = MakeRecord(i);
    DDPIO_RETURN_IF_ERROR(writer->Append(r.view()));
    if (writer->BatchFull()) DDPIO_RETURN_IF_ERROR(writer->Commit());
  }
  if (finish) return writer->Finish(0);
  return writer->Commit();
}

namespace {

// TurboJPEG at quality 90.
std::vector<uint8_t> Compress(const std::vector<uint8_t>& pixels, int width, int height, int format,
                              int subsampling) {
  tjhandle h = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  tjCompress2(h, pixels.data(), width, 0, height, format, &out, &size, subsampling, 90, 0);
  std::vector<uint8_t> jpeg(out, out + size);
  tjFree(out);
  tjDestroy(h);
  return jpeg;
}

}  // namespace

std::vector<uint8_t> MakeJpeg(int width, int height, uint64_t seed) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>((x * 255) / width + seed * 37);
      p[1] = static_cast<uint8_t>((y * 255) / height + seed * 11);
      p[2] = static_cast<uint8_t>(((x + y) * 7 + seed * 5) & 0xff);
    }
  }
  return Compress(rgb, width, height, TJPF_RGB, TJSAMP_420);
}

std::vector<uint8_t> MakeDetailedJpeg(int width, int height, uint64_t seed, int tj_subsampling) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const int noise = static_cast<int>(state >> 59);  // 0..31
      p[0] = static_cast<uint8_t>(((x / 3 + y / 5) % 2) * 200 +
                                  noise);  // colour edges every few pixels
      p[1] = static_cast<uint8_t>((x * 255) / width);
      p[2] = static_cast<uint8_t>(((y / 2) % 2) * 180 + noise);
    }
  }
  return Compress(rgb, width, height, TJPF_RGB, tj_subsampling);
}

std::vector<uint8_t> MakeJpegBomb(int width, int height) {
  std::vector<uint8_t> jpeg = MakeJpeg(16, 16, 1);
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && (jpeg[i + 1] == 0xC0 || jpeg[i + 1] == 0xC2)) {  // SOF0 / SOF2
      // FF Cx, length (2), precision (1), height (2), width (2)
      jpeg[i + 5] = static_cast<uint8_t>(height >> 8);
      jpeg[i + 6] = static_cast<uint8_t>(height);
      jpeg[i + 7] = static_cast<uint8_t>(width >> 8);
      jpeg[i + 8] = static_cast<uint8_t>(width);
      break;
    }
  }
  return jpeg;
}

std::vector<uint8_t> MakeCmykJpeg(int width, int height) {
  std::vector<uint8_t> cmyk(static_cast<size_t>(width) * height * 4);
  for (size_t i = 0; i < cmyk.size(); ++i) cmyk[i] = static_cast<uint8_t>(i * 13);
  return Compress(cmyk, width, height, TJPF_CMYK, TJSAMP_444);
}

storage::Record JpegRecord(const std::vector<uint8_t>& jpeg, int width, int height, int channels,
                           int32_t label) {
  storage::Record r;
  r.label = label;
  r.type = storage::ContentType::kJpeg;
  r.channels = static_cast<uint16_t>(channels);
  r.width = static_cast<uint32_t>(width);
  r.height = static_cast<uint32_t>(height);
  r.source_name = "fixture.jpg";
  r.payload = jpeg;
  return r;
}

absl::Status WriteRecords(const std::string& path, const std::vector<storage::Record>& records,
                          int classes) {
  DDPIO_ASSIGN_OR_RETURN(auto writer,
                         storage::DatasetWriter::Create(path, MakeHeader(classes), {}));
  for (const storage::Record& r : records) DDPIO_RETURN_IF_ERROR(writer->Append(r.view()));
  return writer->Finish(0);
}

absl::Status WriteJpegDataset(const std::string& path, uint64_t n, int min_side, int classes,
                              const std::vector<uint64_t>& corrupt) {
  DDPIO_ASSIGN_OR_RETURN(auto writer,
                         storage::DatasetWriter::Create(path, MakeHeader(classes), {}));
  for (uint64_t i = 0; i < n; ++i) {
    const int w = min_side + static_cast<int>((i * 37) % min_side);
    const int h = min_side + static_cast<int>((i * 53) % min_side);
    storage::Record r;
    r.label = static_cast<int32_t>(i % classes);
    r.type = storage::ContentType::kJpeg;
    r.channels = 3;
    r.width = static_cast<uint32_t>(w);
    r.height = static_cast<uint32_t>(h);
    r.source_name = absl::StrCat("img_", i, ".jpg");
    r.payload = MakeJpeg(w, h, i);
    if (std::find(corrupt.begin(), corrupt.end(), i) != corrupt.end()) {
      r.payload.resize(r.payload.size() / 2);
    }
    DDPIO_RETURN_IF_ERROR(writer->Append(r.view()));
  }
  return writer->Finish(0);
}

namespace {

absl::Status Check(int rc, const std::string& what) {
  if (rc == MDB_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", mdb_strerror(rc)));
}

template <typename Fn>
absl::Status WithTxn(const std::string& path, const std::string& db, unsigned txn_flags, Fn fn) {
  MDB_env* env = nullptr;
  DDPIO_RETURN_IF_ERROR(Check(mdb_env_create(&env), "create"));
  mdb_env_set_maxdbs(env, 4);
  absl::Status status = Check(mdb_env_open(env, path.c_str(), 0, 0644), "open " + path);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  if (status.ok()) status = Check(mdb_txn_begin(env, nullptr, txn_flags, &txn), "begin");
  if (status.ok()) status = Check(mdb_dbi_open(txn, db.c_str(), 0, &dbi), "dbi " + db);
  if (status.ok()) status = fn(txn, dbi);
  if (txn != nullptr) {
    if (status.ok()) {
      status = Check(mdb_txn_commit(txn), "commit");
    } else {
      mdb_txn_abort(txn);
    }
  }
  mdb_env_close(env);
  return status;
}

}  // namespace

std::string SampleKey(uint64_t index) {
  storage::IndexKey k = storage::EncodeIndexKey(index);
  return std::string(k.begin(), k.end());
}

absl::Status DamageRecordChecksum(const std::string& path, uint64_t index) {
  std::string value;
  DDPIO_RETURN_IF_ERROR(ReadRawValue(path, "samples", SampleKey(index), &value));
  if (value.size() < 3) return absl::InternalError("record too short to damage");
  value[value.size() - 3] ^= 0x55;
  return PokeValue(path, "samples", SampleKey(index), value);
}

absl::Status PokeValue(const std::string& path, const std::string& db, const std::string& key,
                       const std::optional<std::string>& value) {
  return WithTxn(path, db, 0, [&](MDB_txn* txn, MDB_dbi dbi) {
    MDB_val k{key.size(), const_cast<char*>(key.data())};
    if (!value.has_value()) return Check(mdb_del(txn, dbi, &k, nullptr), "del");
    MDB_val v{value->size(), const_cast<char*>(value->data())};
    return Check(mdb_put(txn, dbi, &k, &v, 0), "put");
  });
}

absl::Status ReadRawValue(const std::string& path, const std::string& db, const std::string& key,
                          std::string* value) {
  return WithTxn(path, db, MDB_RDONLY, [&](MDB_txn* txn, MDB_dbi dbi) {
    MDB_val k{key.size(), const_cast<char*>(key.data())}, v;
    DDPIO_RETURN_IF_ERROR(Check(mdb_get(txn, dbi, &k, &v), "get"));
    value->assign(static_cast<const char*>(v.mv_data), v.mv_size);
    return absl::OkStatus();
  });
}

}  // namespace ddpio::testing
