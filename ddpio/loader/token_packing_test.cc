#include "ddpio/loader/token_packing.h"

#include <map>
#include <random>

#include "ddpio/loader/loader.h"
#include "ddpio/loader/token_mixture.h"
#include "ddpio/loader/token_view.h"
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

// The dataset read as packed sequences (storage/token_sequences.h): record k is the window of
// sequence k of epoch 0's packing, ids in the dataset's width, bound to the view and to k.
TEST(TokenSequences, RecordKIsTheWindowOfSequenceKOfEpochZero) {
  testing::TempDir dir;
  const Docs docs = MakeDocs(50, 11);
  auto documents = WriteDocs(dir, docs);
  const storage::SequenceView view{7, 3, true, {}};
  auto reader = OpenPackedSequences({dir.Sub("tok")}, {}, view);
  ASSERT_OK(reader);
  auto plan = TokenPacking::Make(Lengths(docs), 7, 3, /*epoch=*/0, true);
  ASSERT_OK(plan);
  ASSERT_EQ((*reader)->size(), plan->size());
  ASSERT_GT(plan->size(), 20u);
  Batch b = FillAll(*documents, *plan);
  auto txn = (*reader)->BeginRead();
  ASSERT_OK(txn);
  for (uint64_t k = 0; k < plan->size(); ++k) {
    absl::Span<const uint8_t> stored;
    storage::RecordBinding binding;
    auto r = txn->Get(k, &stored, &binding);
    ASSERT_OK(r);
    ASSERT_EQ(r->type, storage::ContentType::kTokensUint32);
    ASSERT_EQ(r->payload.size(), 8u * 4);
    for (uint64_t i = 0; i < 8; ++i) {
      const int64_t want = i < 7 ? b.tokens[k * 7 + i] : b.labels[k * 7 + 6];
      ASSERT_EQ(storage::TokenAt(r->payload, 4, i), want) << "sequence " << k << " id " << i;
    }
    // A copy sent elsewhere checks as this sequence of this view, and as no other.
    storage::RecordView again;
    EXPECT_OK(storage::DecodeRecord(stored, true, &again, &binding));
    storage::RecordBinding other = binding;
    other.key = k + 1;
    EXPECT_CODE(storage::DecodeRecord(stored, true, &again, &other), kDataLoss);
    txn->Reset();
  }
  // Made, not stored: there is nothing to locate for an upload.
  EXPECT_CODE(txn->Locate(0), kUnimplemented);
}

TEST(TokenSequences, TheViewsIdentityNamesItsSettingsAndAPeekGivesTheSame) {
  testing::TempDir dir;
  const Docs docs = MakeDocs(30, 5);
  WriteDocs(dir, docs);
  const auto identity = [&](storage::SequenceView view) {
    auto reader = OpenPackedSequences({dir.Sub("tok")}, {}, view);
    EXPECT_OK(reader);
    auto peek = storage::DatasetReader::Peek(dir.Sub("tok"));
    EXPECT_OK(peek);
    const auto [header, completion] =
        storage::SequencesOf({{peek->header, peek->completion}}, view);
    EXPECT_EQ(completion.sample_count, (*reader)->size());
    const std::string id = storage::DatasetIdentity((*reader)->header(), (*reader)->completion());
    EXPECT_EQ(storage::DatasetIdentity(header, completion), id);
    return id;
  };
  const std::string a = identity({5, 1, true});
  EXPECT_EQ(identity({5, 1, true}), a);
  EXPECT_NE(identity({6, 1, true}), a);
  EXPECT_NE(identity({5, 2, true}), a);
  EXPECT_NE(identity({5, 1, false}), a);
}

// A mixture's view is the mixture's epoch 0 (TokenMixture, which Python's Loader([a, b],
// weights=...) uses), position by position, its sources drawn by weight; and a source too short
// for one sequence, or a bad weight, is refused naming the data.
TEST(TokenSequences, AMixturesViewIsTheMixturesEpochZero) {
  testing::TempDir dir;
  const Docs a = MakeDocs(30, 1), b = MakeDocs(12, 2);
  WriteDocs(dir, a, "a");
  WriteDocs(dir, b, "b");
  storage::SequenceView view{6, 4, true, {0.25, 0.75}};
  auto reader = OpenPackedSequences({dir.Sub("a"), dir.Sub("b")}, {}, view);
  ASSERT_OK(reader);
  std::vector<TokenMixture::Source> sources;
  sources.push_back({*storage::DatasetReader::Open(dir.Sub("a")), 0.25});
  sources.push_back({*storage::DatasetReader::Open(dir.Sub("b")), 0.75});
  auto mixture = TokenMixture::Make(std::move(sources), 6, 4, true);
  ASSERT_OK(mixture);
  const uint64_t n = (*mixture)->size();
  ASSERT_EQ((*reader)->size(), n);
  std::vector<uint64_t> positions(n);
  for (uint64_t k = 0; k < n; ++k) positions[k] = k;
  std::unique_ptr<bool[]> valid(new bool[n]);
  for (uint64_t k = 0; k < n; ++k) valid[k] = true;
  Batch want(n * 6);
  std::vector<int64_t> source(n);
  ASSERT_OK((*mixture)->Fill(0, positions, absl::MakeConstSpan(valid.get(), n), &want.view,
                             absl::MakeSpan(source)));
  auto txn = (*reader)->BeginRead();
  ASSERT_OK(txn);
  int64_t from_b = 0;
  for (uint64_t k = 0; k < n; ++k) {
    auto r = txn->Get(k);
    ASSERT_OK(r);
    for (uint64_t i = 0; i < 7; ++i) {
      const int64_t id = i < 6 ? want.tokens[k * 6 + i] : want.labels[k * 6 + 5];
      ASSERT_EQ(storage::TokenAt(r->payload, 4, i), id) << "position " << k << " id " << i;
    }
    from_b += source[k];
    txn->Reset();
  }
  // b holds about a third of the sequences but draws three quarters: it is read in several passes.
  EXPECT_NEAR(static_cast<double>(from_b), 0.75 * n, 2.0);
  // The view's identity names the mixture: other weights are another dataset.
  storage::SequenceView other = view;
  other.weights = {0.5, 0.5};
  auto reweighed = OpenPackedSequences({dir.Sub("a"), dir.Sub("b")}, {}, other);
  ASSERT_OK(reweighed);
  EXPECT_NE(storage::DatasetIdentity((*reweighed)->header(), (*reweighed)->completion()),
            storage::DatasetIdentity((*reader)->header(), (*reader)->completion()));
  bool mixed = false;
  EXPECT_CODE(ParseTokenSources("a:0.5,b:-1", &mixed).status(), kInvalidArgument);
  EXPECT_CODE(ParseTokenSources("a:0.5,s3://bucket/b:0.5", &mixed).status(), kInvalidArgument);
  auto parsed = ParseTokenSources("x/a:0.7,b", &mixed);
  ASSERT_OK(parsed);
  EXPECT_TRUE(mixed);
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].path, "x/a");
  EXPECT_EQ((*parsed)[0].weight, 0.7);
  EXPECT_EQ((*parsed)[1].weight, 1.0);
  auto single = ParseTokenSources("/data/run:2", &mixed);  // one path, taken as it is
  ASSERT_OK(single);
  EXPECT_FALSE(mixed);
  EXPECT_EQ((*single)[0].path, "/data/run:2");
  WriteDocs(dir, {{1, 2, 3}}, "tiny");
  EXPECT_CODE(OpenPackedSequences({dir.Sub("a"), dir.Sub("tiny")}, {}, view).status(),
              kInvalidArgument);
  EXPECT_CODE(OpenPackedSequences({dir.Sub("tiny")}, {}, {6, 0, true, {}}).status(),
              kInvalidArgument);
}

TEST(TokenSequences, TheLoaderGivesEachSequencesIdsAsUint32) {
  testing::TempDir dir;
  const Docs docs = MakeDocs(40, 9);
  WriteDocs(dir, docs);
  auto reader = OpenPackedSequences({dir.Sub("tok")}, {}, {5, 0, false});
  ASSERT_OK(reader);
  sampler::SamplerOptions so;
  so.dataset_size = (*reader)->size();
  so.num_replicas = 1;
  so.shuffle = false;
  LoaderOptions lo;
  lo.seq_len = 5;
  lo.batch_size = 4;
  lo.workers = 2;
  auto loader = Loader::Create(reader->get(), so, 0, lo);
  ASSERT_OK(loader);
  EXPECT_EQ((*loader)->sample_bytes(), 6u * 4);
  ASSERT_OK((*loader)->StartEpoch(0));
  // Unshuffled: the documents' ids in order, windows overlapping by one id.
  std::vector<uint32_t> stream;
  for (const auto& d : docs) stream.insert(stream.end(), d.begin(), d.end());
  uint64_t seen = 0;
  for (;;) {
    auto batch = (*loader)->Next();
    if (absl::IsOutOfRange(batch.status())) break;
    ASSERT_OK(batch);
    const auto* ids = reinterpret_cast<const uint32_t*>(batch->data);
    for (uint64_t s = 0; s < batch->size; ++s, ++seen) {
      ASSERT_EQ(batch->indices[s], seen);
      for (uint64_t i = 0; i < 6; ++i) ASSERT_EQ(ids[s * 6 + i], stream[seen * 5 + i]);
    }
  }
  EXPECT_EQ(seen, (stream.size() - 1) / 5);
  // seq_len on an image dataset, and a loader's seq_len out of range, are refused by name.
  lo.seq_len = uint64_t{1} << 25;
  EXPECT_CODE(Loader::Create(reader->get(), so, 0, lo).status(), kInvalidArgument);
}

}  // namespace
}  // namespace ddpio::loader
