#include "ddpio/storage/remote/get_plan.h"

#include <algorithm>
#include <unordered_map>

namespace ddpio::storage::remote {

ChunkTable MakeChunkTable(absl::Span<const RecordLocation> index, const GetLimits& limits,
                          uint64_t order_chunk_records) {
  ChunkTable t;
  uint64_t lo = 0, hi = 0;  // the current chunk's byte range in its file
  for (uint64_t i = 0; i < index.size(); ++i) {
    const RecordLocation& r = index[i];
    t.total_bytes += r.length;
    const uint64_t new_lo = std::min(lo, r.offset), new_hi = std::max(hi, r.offset + r.length);
    const bool order_edge = order_chunk_records > 0 && i % order_chunk_records == 0;
    const bool joins = i > 0 && !order_edge && r.file == index[i - 1].file &&
                       (new_hi - new_lo) - (hi - lo) <= r.length + limits.coalesce_gap &&
                       new_hi - new_lo <= limits.request_limit;
    if (joins) {
      lo = new_lo;
      hi = new_hi;
    } else {
      t.begin.push_back(i);
      lo = r.offset;
      hi = r.offset + r.length;
    }
    t.largest_bytes = std::max(t.largest_bytes, hi - lo);
  }
  t.begin.push_back(index.size());
  return t;
}

std::vector<PlannedGet> PlanGets(absl::Span<const RecordLocation> index,
                                 const std::vector<uint64_t>& wanted,
                                 const std::vector<uint64_t>& alone,
                                 const std::vector<uint64_t>& spanned,
                                 absl::Span<const uint32_t> chunk_of, const GetLimits& limits) {
  // When each record is needed: its place in `wanted`.
  std::unordered_map<uint64_t, size_t> need;
  need.reserve(wanted.size());
  for (size_t k = 0; k < wanted.size(); ++k) need.try_emplace(wanted[k], k);
  // Neighbours in a file joined into one GET: sorted by place in the file...
  std::vector<uint64_t> placed = wanted;
  placed.insert(placed.end(), spanned.begin(), spanned.end());
  std::sort(placed.begin(), placed.end(), [&](uint64_t a, uint64_t b) {
    const RecordLocation &x = index[a], &y = index[b];
    return x.file != y.file ? x.file < y.file : x.offset < y.offset;
  });
  std::vector<PlannedGet> gets;
  for (uint64_t i : alone) gets.push_back(PlannedGet{{i}, 0});
  for (size_t begin = 0; begin < placed.size();) {
    const RecordLocation& first = index[placed[begin]];
    uint64_t end_offset = first.offset + first.length;
    size_t end = begin + 1;
    while (end < placed.size()) {
      const RecordLocation& next = index[placed[end]];
      const bool same_chunk =
          !chunk_of.empty() && chunk_of[placed[end]] == chunk_of[placed[end - 1]];
      if (next.file != first.file || next.offset < end_offset ||
          (!same_chunk && next.offset - end_offset > limits.coalesce_gap) ||
          next.offset + next.length - first.offset > limits.request_limit) {
        break;
      }
      end_offset = next.offset + next.length;
      ++end;
    }
    PlannedGet get{{}, wanted.size()};
    for (size_t k = begin; k < end; ++k) {
      auto it = need.find(placed[k]);
      if (it == need.end()) continue;  // spanned: it comes by a GET of its own
      get.records.push_back(placed[k]);
      get.first_need = std::min(get.first_need, it->second);
    }
    if (!get.records.empty()) gets.push_back(std::move(get));
    begin = end;
  }
  // ...then in the order they are needed: the client keeps a few in flight and queues the rest,
  // so in file order the first batch would wait for most of a read-ahead's GETs.
  std::stable_sort(gets.begin(), gets.end(), [](const PlannedGet& a, const PlannedGet& b) {
    return a.first_need < b.first_need;
  });
  return gets;
}

}  // namespace ddpio::storage::remote
