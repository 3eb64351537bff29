// The remote reader's chunks and GETs, planned on hand-made record indexes: where a chunk ends
// (file, gap, request limit, the order's chunk), and which records one GET brings, in which order.
#include "ddpio/storage/remote/get_plan.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddpio::storage::remote {
namespace {

using ::testing::ElementsAre;

// `n` records of `length` bytes back to back in file `file` from `offset`, `gap` bytes apart.
void Append(std::vector<RecordLocation>* index, uint32_t file, uint64_t n, uint32_t length,
            uint64_t offset = 0, uint64_t gap = 0) {
  for (uint64_t i = 0; i < n; ++i) index->push_back({file, length, offset + i * (length + gap)});
}

std::vector<std::vector<uint64_t>> Records(const std::vector<PlannedGet>& gets) {
  std::vector<std::vector<uint64_t>> r;
  for (const PlannedGet& g : gets) r.push_back(g.records);
  return r;
}

TEST(ChunkTable, AChunkEndsAtAFileTheRequestLimitAGapOrTheOrdersChunk) {
  std::vector<RecordLocation> index;
  Append(&index, 0, 7, 100);        // 0-6: back to back
  Append(&index, 1, 3, 100);        // 7-9: another file
  Append(&index, 1, 2, 100, 1000);  // 10-11: 700 bytes after record 9's end
  const ChunkTable t = MakeChunkTable(index, {/*coalesce_gap=*/50, /*request_limit=*/300}, 0);
  EXPECT_THAT(t.begin, ElementsAre(0, 3, 6, 7, 10, 12)) << "3 records a GET; a file; a gap";
  EXPECT_EQ(t.total_bytes, 1200u);
  EXPECT_EQ(t.largest_bytes, 300u);
  // A gap within coalesce_gap joins; the order's chunks of 4 records are never crossed.
  const ChunkTable wide = MakeChunkTable(index, {1000, 10000}, 0);
  EXPECT_THAT(wide.begin, ElementsAre(0, 7, 12));
  EXPECT_EQ(wide.largest_bytes, 1000u + 2 * 100u);
  EXPECT_THAT(MakeChunkTable(index, {1000, 10000}, 4).begin, ElementsAre(0, 4, 7, 8, 12));
  EXPECT_THAT(MakeChunkTable({}, {0, 100}, 0).begin, ElementsAre(0));
}

TEST(PlanGets, NeighboursJoinWithinTheGapAndTheLimitSentInTheOrderOfNeed) {
  std::vector<RecordLocation> index;
  Append(&index, 0, 10, 100, 0, /*gap=*/20);  // record i at 120 i
  const GetLimits limits{/*coalesce_gap=*/20, /*request_limit=*/340};
  // Needed: 7 first, then 0, 1, 2, 8, 3. 0-2 join (340 bytes), 3 starts a new GET (the limit),
  // 7-8 join; sent by first need: {7, 8} (need 0), {0, 1, 2} (need 1), {3} (need 5).
  const auto gets = PlanGets(index, {7, 0, 1, 2, 8, 3}, {}, {}, {}, limits);
  EXPECT_THAT(Records(gets), ElementsAre(ElementsAre(7, 8), ElementsAre(0, 1, 2), ElementsAre(3)));
  EXPECT_EQ(gets[0].first_need, 0u);
  EXPECT_EQ(gets[1].first_need, 1u);
  // A gap wider than coalesce_gap splits.
  EXPECT_THAT(Records(PlanGets(index, {0, 1, 2}, {}, {}, {}, {/*coalesce_gap=*/19, 10000})),
              ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2)));
}

TEST(PlanGets, RecordsOfOneChunkJoinWhateverLiesBetweenThem) {
  std::vector<RecordLocation> index;
  Append(&index, 0, 8, 100);
  const std::vector<uint32_t> chunk_of = {0, 0, 0, 0, 1, 1, 1, 1};
  const GetLimits no_gap{/*coalesce_gap=*/0, /*request_limit=*/10000};
  // Records 1 and 2 held already: 0 and 3 are 200 bytes apart, in one chunk: one GET; without
  // chunks, two. 3 and 5 lie in two chunks: apart.
  EXPECT_THAT(Records(PlanGets(index, {0, 3, 5, 7}, {}, {}, chunk_of, no_gap)),
              ElementsAre(ElementsAre(0, 3), ElementsAre(5, 7)));
  EXPECT_THAT(Records(PlanGets(index, {0, 3}, {}, {}, {}, no_gap)),
              ElementsAre(ElementsAre(0), ElementsAre(3)));
  // The request limit still holds inside a chunk.
  EXPECT_THAT(Records(PlanGets(index, {0, 3}, {}, {}, chunk_of, {0, 300})),
              ElementsAre(ElementsAre(0), ElementsAre(3)));
}

TEST(PlanGets, RecordsAloneComeFirstAndTheirChunksGetsReadAcrossThem) {
  std::vector<RecordLocation> index;
  Append(&index, 0, 6, 100);
  const std::vector<uint32_t> chunk_of = {0, 0, 0, 0, 0, 0};
  // Record 2 is the first batch's: a GET of its own, first; the chunk's GET (0-5 but 2) spans it
  // without bringing it, so the chunk is still one GET.
  const auto gets = PlanGets(index, {0, 1, 3, 4, 5}, {2}, {2}, chunk_of, {0, 10000});
  EXPECT_THAT(Records(gets), ElementsAre(ElementsAre(2), ElementsAre(0, 1, 3, 4, 5)));
  EXPECT_EQ(gets[0].first_need, 0u);
  // Not spanned (already on the way in an earlier GET): the chunk's GET parts around it when
  // records are joined by the gap alone.
  EXPECT_THAT(Records(PlanGets(index, {0, 1, 3, 4, 5}, {2}, {}, {}, {0, 10000})),
              ElementsAre(ElementsAre(2), ElementsAre(0, 1), ElementsAre(3, 4, 5)));
}

}  // namespace
}  // namespace ddpio::storage::remote
