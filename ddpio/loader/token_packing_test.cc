#include "ddpio/loader/token_packing.h"

#include <map>
#include <random>

#include "ddpio/sampler/permutation.h"
#include "ddpio/storage/dataset_writer.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::loader {
namespace {

using Docs = std::vector<std::vector<uint32_t>>;

// Documents whose ids say where they are: document d's i-th id is d * 1000 + i.
Docs MakeDocs(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  Docs docs(n);
  for (int d = 0; d < n; ++d) {
    docs[d].resize(rng() % 40);  // some empty
    for (size_t i = 0; i < docs[d].size(); ++i) docs[d][i] = d * 1000 + static_cast<uint32_t>(i);
  }
  return docs;
}

std::unique_ptr<storage::DatasetReader> WriteDocs(const testing::TempDir& dir, const Docs& docs,
                                                  const std::string& name = "tok") {
  storage::DatasetHeader h;
  h.format_version = storage::kTokensFormatVersion;
  h.tokens = {4, -1, 0, ""};
  h.source_kind = "api";
  auto writer = storage::DatasetWriter::Create(dir.Sub(name), h, {});
  EXPECT_OK(writer);
  for (const auto& d : docs) {
    storage::Record r;
    r.type = storage::ContentType::kTokensUint32;
    for (uint32_t id : d)
      for (int b = 0; b < 4; ++b) r.payload.push_back(static_cast<uint8_t>(id >> (8 * b)));
    EXPECT_OK((*writer)->Append(r.view()));
  }
  EXPECT_OK((*writer)->Finish(0));
  auto reader = storage::DatasetReader::Open(dir.Sub(name));
  EXPECT_OK(reader);
  return std::move(reader).value();
}

std::shared_ptr<const std::vector<uint32_t>> Lengths(const Docs& docs) {
  auto l = std::make_shared<std::vector<uint32_t>>();
  for (const auto& d : docs) l->push_back(static_cast<uint32_t>(d.size()));
  return l;
}

struct Batch {
  std::vector<int64_t> tokens, labels, position_ids, document_ids;
  std::vector<float> loss_mask;
  std::vector<int32_t> cu;
  TokenBatchView view;
  explicit Batch(uint64_t cells)
      : tokens(cells),
        labels(cells),
        position_ids(cells),
        document_ids(cells),
        loss_mask(cells),
        cu(cells + 1) {
    view = {absl::MakeSpan(tokens),       absl::MakeSpan(labels),    absl::MakeSpan(position_ids),
            absl::MakeSpan(document_ids), absl::MakeSpan(loss_mask), absl::MakeSpan(cu)};
  }
};

Batch FillAll(const storage::DatasetReader& reader, const TokenPacking& plan) {
  std::vector<uint64_t> all(plan.size());
  for (uint64_t k = 0; k < plan.size(); ++k) all[k] = k;
  std::unique_ptr<bool[]> valid(new bool[plan.size()]);
  for (uint64_t k = 0; k < plan.size(); ++k) valid[k] = true;
  Batch b(plan.size() * plan.seq_len());
  TokenBatchFiller filler(&reader, &plan);
  EXPECT_OK(filler.Fill(all, absl::MakeConstSpan(valid.get(), plan.size()), &b.view));
  return b;
}

TEST(TokenPacking, UnshuffledSequencesAreTheDocumentsInOrderAndEveryIdIsALabelOnce) {
  testing::TempDir dir;
  const Docs docs = MakeDocs(60, 1);
  auto reader = WriteDocs(dir, docs);
  std::vector<int64_t> stream;
  for (const auto& d : docs) stream.insert(stream.end(), d.begin(), d.end());
  for (uint64_t s : {1u, 7u, 64u}) {
    ASSERT_OK_AND_ASSIGN(TokenPacking plan, TokenPacking::Make(Lengths(docs), s, 5, 0, false));
    EXPECT_EQ(plan.tokens(), stream.size());
    EXPECT_EQ(plan.size(), (stream.size() - 1) / s);
    Batch b = FillAll(*reader, plan);
    for (uint64_t c = 0; c < plan.size() * s; ++c) {
      ASSERT_EQ(b.tokens[c], stream[c]) << "s " << s << " cell " << c;
      ASSERT_EQ(b.labels[c], stream[c + 1]) << "s " << s << " cell " << c;
    }
  }
}

TEST(TokenPacking, ShuffledDocumentsFollowTorchsRandpermOfSeedPlusEpoch) {
  const Docs docs = MakeDocs(500, 2);
  auto lengths = Lengths(docs);
  ASSERT_OK_AND_ASSIGN(TokenPacking plan, TokenPacking::Make(lengths, 16, 40, 2, true));
  std::vector<uint32_t> perm(docs.size());
  sampler::TorchRandperm<uint32_t>(docs.size(), 42, false, perm.data());
  // The stream's documents in order: every span in sequence order walks the permutation.
  std::vector<uint64_t> seen;
  std::vector<TokenPacking::Span> spans;
  for (uint64_t k = 0; k < plan.size(); ++k) {
    plan.Spans(k, &spans);
    for (const auto& sp : spans) {
      if (seen.empty() || seen.back() != sp.document) seen.push_back(sp.document);
    }
  }
  std::vector<uint64_t> expected;
  for (uint32_t d : perm)
    if (!docs[d].empty()) expected.push_back(d);
  expected.resize(seen.size());
  EXPECT_EQ(seen, expected);
  ASSERT_OK_AND_ASSIGN(TokenPacking other, TokenPacking::Make(lengths, 16, 40, 3, true));
  std::vector<TokenPacking::Span> a, b;
  plan.Spans(0, &a);
  other.Spans(0, &b);
  EXPECT_NE(a[0].document, b[0].document);  // another epoch, another order (seeded: fixed)
}

TEST(TokenPacking, PositionsRestartAtEachDocumentAndBoundariesFollowTheDocuments) {
  testing::TempDir dir;
  const Docs docs = MakeDocs(80, 3);
  auto reader = WriteDocs(dir, docs);
  ASSERT_OK_AND_ASSIGN(TokenPacking plan, TokenPacking::Make(Lengths(docs), 32, 9, 1, true));
  Batch b = FillAll(*reader, plan);
  const uint64_t s = 32;
  std::vector<int32_t> boundaries = {0};
  for (uint64_t r = 0; r < plan.size(); ++r) {
    for (uint64_t c = 0; c < s; ++c) {
      const uint64_t cell = r * s + c;
      const int64_t id = b.tokens[cell];
      if (c == 0) {
        EXPECT_EQ(b.position_ids[cell], 0);
        EXPECT_EQ(b.document_ids[cell], 0);
        continue;
      }
      const bool same_doc = id / 1000 == b.tokens[cell - 1] / 1000;
      // Within a document ids rise by one and so do positions; a new document starts at 0.
      EXPECT_EQ(b.position_ids[cell], same_doc ? b.position_ids[cell - 1] + 1 : 0) << cell;
      EXPECT_EQ(b.document_ids[cell], b.document_ids[cell - 1] + (same_doc ? 0 : 1)) << cell;
      if (!same_doc) {
        EXPECT_EQ(id % 1000, 0) << cell;
        boundaries.push_back(static_cast<int32_t>(cell));
      }
    }
    boundaries.push_back(static_cast<int32_t>((r + 1) * s));
  }
  ASSERT_EQ(b.view.cu_count, boundaries.size());
  EXPECT_EQ(std::vector<int32_t>(b.cu.begin(), b.cu.begin() + b.view.cu_count), boundaries);
  EXPECT_GT(b.view.max_seqlen, 0);
  EXPECT_LE(b.view.max_seqlen, 32);
  for (float m : b.loss_mask) EXPECT_EQ(m, 1.0f);
}

TEST(TokenPacking, ARecordLongerThanTheLengthsSayIsDataLoss) {
  testing::TempDir dir;
  const Docs docs = MakeDocs(10, 4);
  auto reader = WriteDocs(dir, docs);
  auto lying = std::make_shared<std::vector<uint32_t>>(*Lengths(docs));
  for (auto& l : *lying) l = l > 0 ? l - 1 : l;
  ASSERT_OK_AND_ASSIGN(TokenPacking plan, TokenPacking::Make(lying, 4, 0, 0, false));
  Batch b(4);
  const uint64_t first = 0;
  const bool valid = true;
  TokenBatchFiller filler(reader.get(), &plan);
  absl::Status s =
      filler.Fill(absl::MakeConstSpan(&first, 1), absl::MakeConstSpan(&valid, 1), &b.view);
  EXPECT_CODE(s, kDataLoss);
  EXPECT_NE(s.message().find("the dataset's lengths say"), std::string::npos) << s;
  EXPECT_CODE(TokenPacking::Make(lying, 0, 0, 0, false), kInvalidArgument);
}

}  // namespace
}  // namespace ddpio::loader
