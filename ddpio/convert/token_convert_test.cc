// Token conversions end to end: Megatron datasets, flat token files and JSON lines tokenized with
// SentencePiece, into token datasets read back record by record.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/strings/str_cat.h"
#include "ddpio/convert/convert.h"
#include "ddpio/convert/internal/spm_tokenizer.h"
#include "ddpio/convert/megatron_index.h"
#include "ddpio/convert/spm_train_for_tests.h"
#include "ddpio/convert/token_sources.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/dataset_writer.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::convert {
namespace {

using Docs = std::vector<std::vector<uint32_t>>;

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

struct ReadBack {
  storage::DatasetHeader header;
  Docs docs;
  std::vector<std::string> names;
};

ReadBack ReadDataset(const std::string& path) {
  ReadBack out;
  auto reader = storage::DatasetReader::Open(path);
  EXPECT_OK(reader);
  if (!reader.ok()) return out;
  out.header = (*reader)->header();
  for (uint64_t i = 0; i < (*reader)->size(); ++i) {
    auto r = (*reader)->ReadCopy(i);
    EXPECT_OK(r);
    if (!r.ok()) break;
    const int width = storage::TokenWidth(r->type);
    EXPECT_EQ(width, out.header.tokens.width) << i;
    std::vector<uint32_t> ids;
    for (size_t k = 0; k < r->payload.size() / width; ++k)
      ids.push_back(storage::TokenAt(absl::MakeConstSpan(r->payload), width, k));
    out.docs.push_back(ids);
    out.names.push_back(r->source_name);
  }
  // The lengths the conversion recorded beside the records are theirs, every one.
  std::vector<uint32_t> lengths;
  for (const auto& d : out.docs) lengths.push_back(static_cast<uint32_t>(d.size()));
  EXPECT_EQ((*reader)->recorded_document_lengths(), lengths) << path;
  return out;
}

Docs RandomDocs(int n, uint32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  Docs docs(n);
  for (auto& d : docs) {
    d.resize(1 + rng() % 300);
    for (auto& id : d) id = rng() % vocab;
  }
  return docs;
}

// PREFIX.bin / PREFIX.idx as Megatron's IndexedDatasetBuilder writes them: one sequence per
// document, ids of type T back to back.
template <typename T>
void WriteMegatron(const std::string& prefix, const Docs& docs, MegatronDType dtype) {
  std::vector<T> bin;
  std::vector<int32_t> lengths;
  std::vector<int64_t> doc_index = {0};
  for (const auto& d : docs) {
    for (uint32_t id : d) bin.push_back(static_cast<T>(id));
    lengths.push_back(static_cast<int32_t>(d.size()));
    doc_index.push_back(static_cast<int64_t>(lengths.size()));
  }
  WriteFile(prefix + ".bin", Bytes(bin));
  std::vector<uint8_t> idx = WriteMegatronIndex(dtype, lengths, doc_index);
  WriteFile(prefix + ".idx", std::string(idx.begin(), idx.end()));
}

ConvertOptions Options(SourceKind kind, const std::string& src, const std::string& out) {
  ConvertOptions o;
  o.source_kind = kind;
  o.source = src;
  o.out = out;
  o.threads = 2;
  return o;
}

TEST(TokenConvert, AMegatronDatasetIsTakenAsItIsOneRecordPerSequence) {
  ddpio::testing::TempDir dir;
  const Docs small = RandomDocs(200, 50000, 1);
  WriteMegatron<uint16_t>(dir.Sub("wiki_text_document"), small, MegatronDType::kUint16);
  ConvertOptions o = Options(SourceKind::kMegatron, dir.Sub("wiki_text_document"), dir.Sub("a"));
  o.tokens.eos_id = 0;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(o));
  EXPECT_EQ(s.records, 200u);
  uint64_t tokens = 0;
  for (const auto& d : small) tokens += d.size();
  EXPECT_EQ(s.tokens, tokens);
  ReadBack back = ReadDataset(dir.Sub("a"));
  EXPECT_EQ(back.docs, small);
  EXPECT_EQ(back.names[7], "wiki_text_document.bin#7");
  EXPECT_EQ(back.header.format_version, storage::kTokensFormatVersion);
  EXPECT_EQ(back.header.tokens.width, 2);
  EXPECT_EQ(back.header.tokens.eos_id, 0);
  EXPECT_EQ(back.header.source_kind, "megatron");

  // A vocabulary over 65,536: Megatron's int32 ids, stored 4 bytes wide.
  const Docs large = RandomDocs(50, 250000, 2);
  WriteMegatron<int32_t>(dir.Sub("big"), large, MegatronDType::kInt32);
  ASSERT_OK(Convert(Options(SourceKind::kMegatron, dir.Sub("big"), dir.Sub("b"))));
  back = ReadDataset(dir.Sub("b"));
  EXPECT_EQ(back.docs, large);
  EXPECT_EQ(back.header.tokens.width, 4);
  EXPECT_EQ(back.header.tokens.eos_id, -1);
}

TEST(TokenConvert, ANegativeMegatronIdStopsNamingItsSequenceOrIsSkipped) {
  ddpio::testing::TempDir dir;
  Docs docs = RandomDocs(20, 1000, 3);
  WriteMegatron<int32_t>(dir.Sub("m"), docs, MegatronDType::kInt32);
  // Sequence 5's third id becomes -7.
  std::vector<int32_t> bin;
  for (const auto& d : docs)
    for (uint32_t id : d) bin.push_back(static_cast<int32_t>(id));
  size_t at = 2;
  for (int k = 0; k < 5; ++k) at += docs[k].size();
  bin[at] = -7;
  WriteFile(dir.Sub("m.bin"), Bytes(bin));
  absl::StatusOr<ConvertSummary> s =
      Convert(Options(SourceKind::kMegatron, dir.Sub("m"), dir.Sub("a")));
  EXPECT_CODE(s, kDataLoss);
  EXPECT_NE(s.status().message().find("m.bin#5: id 2 is -7"), std::string::npos) << s.status();
  ConvertOptions o = Options(SourceKind::kMegatron, dir.Sub("m"), dir.Sub("b"));
  o.skip_invalid = true;
  ASSERT_OK_AND_ASSIGN(ConvertSummary skipped, Convert(o));
  EXPECT_EQ(skipped.records, 19u);
  ASSERT_EQ(skipped.skipped.size(), 1u);
  EXPECT_EQ(skipped.skipped[0].source_index, 5u);
}

TEST(TokenConvert, AFlatFileIsSplitAfterEveryEosAndItsTailIsALastDocument) {
  ddpio::testing::TempDir dir;
  const uint32_t eos = 50256;
  std::vector<uint16_t> flat = {5, 6, eos, eos, 7, 8, 9, eos, 10, 11};
  WriteFile(dir.Sub("train.bin"), Bytes(flat));
  ConvertOptions o = Options(SourceKind::kTokens, dir.Sub("train.bin"), dir.Sub("a"));
  o.tokens.dtype = "uint16";
  o.tokens.eos_id = eos;
  ASSERT_OK(Convert(o));
  ReadBack back = ReadDataset(dir.Sub("a"));
  EXPECT_EQ(back.docs, (Docs{{5, 6, eos}, {eos}, {7, 8, 9, eos}, {10, 11}}));
  EXPECT_EQ(back.names[2], "train.bin#2");
  EXPECT_EQ(back.header.tokens.eos_id, eos);

  // Without an EOS there are no boundaries: documents of 65,536 ids, the dataset says so.
  std::vector<uint32_t> unmarked(2 * kUnmarkedDocumentTokens + 5);
  for (size_t i = 0; i < unmarked.size(); ++i)
    unmarked[i] = static_cast<uint32_t>(i * 7919 % 100003);
  WriteFile(dir.Sub("u.bin"), Bytes(unmarked));
  ConvertOptions u = Options(SourceKind::kTokens, dir.Sub("u.bin"), dir.Sub("b"));
  u.tokens.dtype = "uint32";
  ASSERT_OK(Convert(u));
  back = ReadDataset(dir.Sub("b"));
  ASSERT_EQ(back.docs.size(), 3u);
  EXPECT_EQ(back.docs[0].size(), kUnmarkedDocumentTokens);
  EXPECT_EQ(back.docs[2].size(), 5u);
  EXPECT_EQ(back.docs[1][0], unmarked[kUnmarkedDocumentTokens]);
  EXPECT_EQ(back.header.tokens.eos_id, -1);
  EXPECT_EQ(back.header.tokens.width, 4);

  // A raw file needs its dtype; one of a part id is cut short.
  ConvertOptions no_dtype = Options(SourceKind::kTokens, dir.Sub("train.bin"), dir.Sub("c"));
  EXPECT_CODE(Convert(no_dtype), kInvalidArgument);
  WriteFile(dir.Sub("odd.bin"), std::string(7, '\1'));
  ConvertOptions odd = Options(SourceKind::kTokens, dir.Sub("odd.bin"), dir.Sub("d"));
  odd.tokens.dtype = "uint16";
  EXPECT_CODE(Convert(odd), kDataLoss);
}

// A .npy as numpy.save writes it: magic, version 1.0, the dict padded to 64 bytes, the data.
std::string Npy(const std::string& descr, const std::string& data, size_t count,
                const std::string& shape = "") {
  std::string dict = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ",
                                  shape.empty() ? absl::StrCat("(", count, ",)") : shape, ", }");
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + data;
}

TEST(TokenConvert, ANpyFileBringsItsOwnDtype) {
  ddpio::testing::TempDir dir;
  std::vector<int64_t> ids = {1, 2, 3, 0, 4, 5, 0, 6};
  WriteFile(dir.Sub("ids.npy"), Npy("<i8", Bytes(ids), ids.size()));
  ConvertOptions o = Options(SourceKind::kTokens, dir.Sub("ids.npy"), dir.Sub("a"));
  o.tokens.eos_id = 0;
  ASSERT_OK(Convert(o));
  ReadBack back = ReadDataset(dir.Sub("a"));
  EXPECT_EQ(back.docs, (Docs{{1, 2, 3, 0}, {4, 5, 0}, {6}}));
  EXPECT_EQ(back.header.tokens.width, 4);
  // The dtype given must be the file's; floats are not ids; a negative id is DataLoss.
  o.out = dir.Sub("b");
  o.tokens.dtype = "uint16";
  EXPECT_CODE(Convert(o), kInvalidArgument);
  std::vector<float> floats = {1, 2};
  WriteFile(dir.Sub("f.npy"), Npy("<f4", Bytes(floats), floats.size()));
  EXPECT_CODE(Convert(Options(SourceKind::kTokens, dir.Sub("f.npy"), dir.Sub("c"))),
              kInvalidArgument);
  ids[4] = -1;
  WriteFile(dir.Sub("neg.npy"), Npy("<i8", Bytes(ids), ids.size()));
  EXPECT_CODE(Convert(Options(SourceKind::kTokens, dir.Sub("neg.npy"), dir.Sub("d"))), kDataLoss);
}

// Real text: the copyright files Debian ships, one document each, and a SentencePiece model
// trained on the first of them. The model is trained once per build tree (spm_train_for_tests.h),
// not once per test process; a model of 800 pieces from 2 MB of text is as real a tokenizer for
// these tests as one from all of it (each test holds the conversion to what SentencePiece itself
// gives with the same model) and trains in a tenth of the time.
class JsonlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ddpio::testing::TempDir;
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator("/usr/share/doc")) {
      const auto copyright = e.path() / "copyright";
      if (std::filesystem::is_regular_file(copyright)) files.push_back(copyright.string());
    }
    std::sort(files.begin(), files.end());
    files.resize(std::min<size_t>(files.size(), 300));
    constexpr size_t kTrainingBytes = 2 << 20;
    size_t training_bytes = 0;
    std::ofstream jsonl(dir_->Sub("docs.jsonl")), text(dir_->Sub("train.txt"));
    for (const std::string& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      texts_->push_back(body);
      jsonl << nlohmann::json{{"text", body}, {"source", f}}.dump(
                   -1, ' ', false, nlohmann::json::error_handler_t::replace)
            << "\n";
      if (training_bytes < kTrainingBytes) {
        text << body << "\n";
        training_bytes += body.size() + 1;
      }
    }
    jsonl.close();
    text.close();
    trained_ = ddpio::testing::TrainSentencePiece(dir_->Sub("train.txt"), 800, DDPIO_TEST_CACHE_DIR,
                                                  Model());
  }
  static void TearDownTestSuite() { delete dir_; }

  void SetUp() override { ASSERT_EQ(trained_, "") << "training SentencePiece"; }

  static std::string Model() { return dir_->Sub("spm.model"); }

  // What SentencePiece itself gives for document i, then its EOS.
  static std::vector<uint32_t> Expected(const std::string& text) {
    std::ifstream in(Model(), std::ios::binary);
    std::string model((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string error;
    auto spm = internal::SpmTokenizer::Load(model, &error);
    std::vector<int> ids;
    EXPECT_TRUE(spm->Encode(text, &ids, &error)) << error;
    std::vector<uint32_t> out(ids.begin(), ids.end());
    out.push_back(static_cast<uint32_t>(spm->eos_id()));
    return out;
  }

  ConvertOptions JsonlOptions(const std::string& out) {
    ConvertOptions o = Options(SourceKind::kJsonl, dir_->Sub("docs.jsonl"), dir_->Sub(out));
    o.tokens.tokenizer = Model();
    return o;
  }

  static ddpio::testing::TempDir* dir_;
  static std::vector<std::string>* texts_;
  static std::string trained_;
};
ddpio::testing::TempDir* JsonlTest::dir_ = nullptr;
std::vector<std::string>* JsonlTest::texts_ = new std::vector<std::string>;
std::string JsonlTest::trained_;

TEST_F(JsonlTest, EveryDocumentIsSentencePiecesOwnIdsThenItsEos) {
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(JsonlOptions("a")));
  ASSERT_EQ(s.records, texts_->size());
  ReadBack back = ReadDataset(dir_->Sub("a"));
  ASSERT_EQ(back.docs.size(), texts_->size());
  uint64_t tokens = 0;
  for (size_t i = 0; i < texts_->size(); ++i) {
    // The JSON text is the file's bytes where they are UTF-8 (all of Debian's copyright files are).
    EXPECT_EQ(back.docs[i], Expected((*texts_)[i])) << i;
    tokens += back.docs[i].size();
  }
  EXPECT_EQ(s.tokens, tokens);
  EXPECT_GT(tokens, 100000u);
  EXPECT_EQ(back.names[3], "docs.jsonl:4");
  EXPECT_EQ(back.header.tokens.width, 2);
  EXPECT_EQ(back.header.tokens.vocab_size, 800u);
  EXPECT_EQ(back.header.tokens.eos_id, 2);  // SentencePiece's default: <unk> 0, <s> 1, </s> 2
  EXPECT_EQ(back.header.tokens.tokenizer, Model());
}

TEST_F(JsonlTest, AStoppedConversionResumesToTheSameDataset) {
  ASSERT_OK(Convert(JsonlOptions("whole")));
  ConvertOptions o = JsonlOptions("resumed");
  o.writer.batch_records = 16;
  // Stopped once three batches are committed, as a Ctrl-C would.
  struct StopAfter : ConvertObserver {
    std::atomic<bool> cancel{false};
    void Committed(uint64_t n) override {
      if (n == 3) cancel = true;
    }
  } stop;
  o.observer = &stop;
  o.cancel = &stop.cancel;
  EXPECT_CODE(Convert(o), kCancelled);
  o.observer = nullptr;
  o.cancel = nullptr;
  o.resume = true;
  ASSERT_OK_AND_ASSIGN(ConvertSummary resumed, Convert(o));
  EXPECT_GT(resumed.resumed_from, 0u);
  ReadBack a = ReadDataset(dir_->Sub("whole")), b = ReadDataset(dir_->Sub("resumed"));
  EXPECT_EQ(a.docs, b.docs);
  EXPECT_EQ(a.names, b.names);
  // A resume with another model would mix two tokenizations: refused.
  ConvertOptions other = JsonlOptions("whole");
  other.resume = true;
  other.tokens.eos_id = 1;
  EXPECT_CODE(Convert(other), kFailedPrecondition);
}

TEST_F(JsonlTest, ABadLineStopsNamingFileAndLineOrIsSkipped) {
  const std::string path = dir_->Sub("bad.jsonl");
  std::ofstream(path) << R"({"text": "one"})"
                      << "\n\n"
                      << R"({"text": 7})"
                      << "\n"
                      << R"({"body": "no text"})"
                      << "\n"
                      << "not json\n"
                      << R"({"text": "five"})";  // no final newline: still a document
  ConvertOptions o = JsonlOptions("bad");
  o.source = path;
  absl::StatusOr<ConvertSummary> s = Convert(o);
  EXPECT_CODE(s, kDataLoss);
  EXPECT_NE(s.status().message().find("bad.jsonl:3"), std::string::npos) << s.status();
  o.out = dir_->Sub("bad-skipped");
  o.skip_invalid = true;
  ASSERT_OK_AND_ASSIGN(ConvertSummary skipped, Convert(o));
  EXPECT_EQ(skipped.records, 2u);
  ASSERT_EQ(skipped.skipped.size(), 3u);
  EXPECT_EQ(skipped.skipped[0].relative, "bad.jsonl:3");
  EXPECT_EQ(skipped.skipped[1].relative, "bad.jsonl:4");
  EXPECT_EQ(skipped.skipped[2].relative, "bad.jsonl:5");
  ReadBack back = ReadDataset(dir_->Sub("bad-skipped"));
  EXPECT_EQ(back.docs[1], Expected("five"));
  EXPECT_EQ(back.names[1], "bad.jsonl:6");
}

TEST_F(JsonlTest, SettingsThatDoNotFitAreRefusedBeforeAnyWork) {
  ConvertOptions o = JsonlOptions("x");
  o.tokens.tokenizer.clear();
  EXPECT_CODE(Convert(o), kInvalidArgument);
  o = JsonlOptions("x");
  o.tokens.tokenizer = dir_->Sub("docs.jsonl");  // not a model
  EXPECT_CODE(Convert(o), kInvalidArgument);
  o = JsonlOptions("x");
  o.tokens.eos_id = 800;  // past the vocabulary
  EXPECT_CODE(Convert(o), kInvalidArgument);
  o = JsonlOptions("x");
  o.tokens.dtype = "uint16";  // a flat file's setting
  EXPECT_CODE(Convert(o), kInvalidArgument);
  o = JsonlOptions("x");
  o.shards = 2;
  EXPECT_CODE(Convert(o), kInvalidArgument);
  o = JsonlOptions("x");
  o.source = dir_->Sub("missing.jsonl");
  EXPECT_CODE(Convert(o), kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_->Sub("x")));
}

TEST(TokenConvert, DocumentLengthsThatDoNotAddUpAreDataLossAtOpen) {
  ddpio::testing::TempDir dir;
  for (const std::string& lie : {std::string("\x03\0\0\0\x05\0\0\0", 8),  // 3 + 5, not 3 + 4
                                 std::string("\x03\0\0\0", 4)}) {         // one of two
    storage::DatasetHeader h;
    h.format_version = storage::kTokensFormatVersion;
    h.tokens = {2, -1, 0, ""};
    h.source_kind = "api";
    const std::string path = dir.Sub(absl::StrCat("lie", lie.size()));
    ASSERT_OK_AND_ASSIGN(auto writer, storage::DatasetWriter::Create(path, h, {}));
    for (int n : {3, 4}) {
      storage::Record r;
      r.type = storage::ContentType::kTokensUint16;
      r.payload.assign(2 * n, 1);
      ASSERT_OK(writer->Append(r.view()));
    }
    ASSERT_OK(writer->PutMeta(storage::TokenLengthsKey(0), lie));
    ASSERT_OK(writer->Finish(0));
    absl::StatusOr<std::unique_ptr<storage::DatasetReader>> reader =
        storage::DatasetReader::Open(path);
    EXPECT_CODE(reader, kDataLoss);
    EXPECT_NE(reader.status().message().find("document lengths"), std::string::npos)
        << reader.status();
  }
}

TEST(TokenConvert, AMegatronSequenceTooLongOrAnEosTooWideIsRefusedBeforeItIsRead) {
  ddpio::testing::TempDir dir;
  // A sequence of 2^28 + 1 uint16 ids in a sparse .bin: refused by its length, nothing read.
  const uint64_t n = kMaxDocumentTokens + 1;
  {
    std::ofstream bin(dir.Sub("big.bin"), std::ios::binary);
    bin.seekp(static_cast<std::streamoff>(2 * n - 1));
    bin.put('\0');
  }
  std::vector<int32_t> lengths = {static_cast<int32_t>(n)};
  std::vector<int64_t> doc_index = {0, 1};
  std::vector<uint8_t> idx = WriteMegatronIndex(MegatronDType::kUint16, lengths, doc_index);
  WriteFile(dir.Sub("big.idx"), std::string(idx.begin(), idx.end()));
  absl::StatusOr<ConvertSummary> s =
      Convert(Options(SourceKind::kMegatron, dir.Sub("big"), dir.Sub("a")));
  EXPECT_CODE(s, kDataLoss);
  EXPECT_NE(s.status().message().find("big.bin#0: a sequence of 268435457 ids"), std::string::npos)
      << s.status();
  // An EOS id wider than the ids.
  WriteMegatron<uint16_t>(dir.Sub("m"), RandomDocs(3, 100, 5), MegatronDType::kUint16);
  ConvertOptions o = Options(SourceKind::kMegatron, dir.Sub("m"), dir.Sub("b"));
  o.tokens.eos_id = 70000;
  EXPECT_CODE(Convert(o), kInvalidArgument);
}

TEST(TokenConvert, ANpyOfTwoDimensionsIsRefused) {
  ddpio::testing::TempDir dir;
  std::vector<uint16_t> ids = {1, 2, 3, 4};
  WriteFile(dir.Sub("m.npy"), Npy("<u2", Bytes(ids), 4, "(2, 2)"));
  absl::StatusOr<ConvertSummary> s =
      Convert(Options(SourceKind::kTokens, dir.Sub("m.npy"), dir.Sub("a")));
  EXPECT_CODE(s, kInvalidArgument);
  EXPECT_NE(s.status().message().find("2 dimensions"), std::string::npos) << s.status();
}

TEST_F(JsonlTest, AFolderIsReadOnceWhateverItsSymlinksPointAt) {
  const std::string folder = dir_->Sub("folder");
  std::filesystem::create_directories(folder + "/sub");
  std::ofstream(folder + "/sub/a.jsonl") << R"({"text": "one"})"
                                         << "\n"
                                         << R"({"text": "two"})"
                                         << "\n";
  std::filesystem::create_directory_symlink("..", folder + "/sub/loop");
  std::filesystem::create_directory_symlink("sub", folder + "/again");
  ConvertOptions o = JsonlOptions("folder-out");
  o.source = folder;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(o));
  EXPECT_EQ(s.records, 2u);
  ReadBack back = ReadDataset(dir_->Sub("folder-out"));
  EXPECT_EQ(back.names, (std::vector<std::string>{"sub/a.jsonl:1", "sub/a.jsonl:2"}));
}

}  // namespace
}  // namespace ddpio::convert
