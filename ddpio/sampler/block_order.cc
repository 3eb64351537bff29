#include "ddpio/sampler/block_order.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/splitmix64.h"

namespace ddpio::sampler {

namespace {
constexpr EnumName<Order> kOrders[] = {{Order::kExact, "exact"}, {Order::kBlock, "block"}};
}  // namespace

std::string OrderName(Order order) { return NameOf(kOrders, order); }
absl::StatusOr<Order> ParseOrder(std::string_view name) {
  return ParseName(kOrders, name, "order");
}

absl::Status CheckBlockOrder(const BlockOrder& block) {
  if (block.chunk_records == 0) {
    return absl::InvalidArgumentError("block_chunk (records per chunk) must be at least 1, got 0");
  }
  if (block.window == 0) {
    return absl::InvalidArgumentError("block_window (chunks) must be at least 1, got 0");
  }
  return absl::OkStatus();
}

namespace {

// Record q of the run (the chunks' records one after the other in the epoch's chunk order)
// without holding the run: every chunk has k records but the dataset's last one, which has
// `last`; it sits at place `short_place` of the order.
class ChunkRun {
 public:
  ChunkRun(const Permutation& order, uint64_t n, uint64_t k)
      : order_(order), k_(k), chunks_(n / k + (n % k != 0 ? 1 : 0)), last_(n - (chunks_ - 1) * k) {
    for (uint64_t c = 0; c < chunks_; ++c) {
      if (order_.At(c) == chunks_ - 1) short_place_ = c;
    }
  }
  uint64_t At(uint64_t q) const {
    const uint64_t short_begin = short_place_ * k_;
    if (q >= short_begin + last_)
      q += k_ - last_;  // past the short chunk: as if it were whole
    else if (q >= short_begin)
      return (chunks_ - 1) * k_ + (q - short_begin);
    return order_.At(q / k_) * k_ + q % k_;
  }

 private:
  const Permutation& order_;
  uint64_t k_, chunks_, last_, short_place_ = 0;
};

template <typename T>
std::vector<T> BlockOrderOf(uint64_t n, uint64_t seed, bool shuffle, PermutationKind kind,
                            const BlockOrder& block, uint64_t lanes) {
  std::vector<T> out(n);
  if (n == 0) return out;
  const uint64_t k = std::max<uint64_t>(block.chunk_records, 1);
  lanes = std::max<uint64_t>(lanes, 1);
  const uint64_t chunks = n / k + (n % k != 0 ? 1 : 0);  // k may be near 2^64
  const Permutation chunk_order = Permutation::Make(chunks, seed, shuffle, kind);
  const ChunkRun run(chunk_order, n, k);
  // The spread, in records (at least 1: no spread).
  const uint64_t spread = std::max<uint64_t>(std::min(block.window, chunks) * std::min(k, n), 1);
  // Sorting a lane's places j by key j + offset (offset < spread), streamed: once place j is in,
  // every later one has a key above j, so whatever holds a key of at most j comes out next. The
  // heap holds under `spread` places, whatever the dataset's size.
  using Keyed = std::pair<uint64_t, uint64_t>;  // (key, place in the lane's run)
  std::priority_queue<Keyed, std::vector<Keyed>, std::greater<Keyed>> heap;
  uint64_t taken = 0;
  for (uint64_t lane = 0; lane < lanes && lane < n; ++lane) {
    const uint64_t count = (n - lane + lanes - 1) / lanes;
    const uint64_t first = taken;
    taken += count;
    const uint64_t base = SplitMix64Mix(seed ^ SplitMix64Mix(0xB10C0DE5ull + lane));
    uint64_t placed = 0;
    const auto emit = [&](uint64_t j) {
      out[lane + placed++ * lanes] = static_cast<T>(run.At(first + j));
    };
    for (uint64_t j = 0; j < count; ++j) {
      if (!shuffle) {
        emit(j);
        continue;
      }
      heap.emplace(j + SplitMix64Mix(base + j * kSplitMix64Gamma) % spread, j);
      while (!heap.empty() && heap.top().first <= j) {
        emit(heap.top().second);
        heap.pop();
      }
    }
    for (; !heap.empty(); heap.pop()) emit(heap.top().second);
  }
  return out;
}

}  // namespace

Permutation MakeBlockOrder(uint64_t n, uint64_t seed, bool shuffle, PermutationKind kind,
                           const BlockOrder& block, uint64_t lanes) {
  if (n <= (uint64_t{1} << 32)) {
    return Permutation::FromEntries(BlockOrderOf<uint32_t>(n, seed, shuffle, kind, block, lanes));
  }
  return Permutation::FromEntries(BlockOrderOf<uint64_t>(n, seed, shuffle, kind, block, lanes));
}

}  // namespace ddpio::sampler
