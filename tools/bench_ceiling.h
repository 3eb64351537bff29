// The JPEG full-decode ceiling the loader benchmarks compare their images/s with: what
// tjDecompress2 reaches decoding the same records in the same run. `bench loader` measures it
// with as many decoders at once as its loader has workers, before each epoch and after the last;
// `bench feed` does the same on every rank of the job at once (the ranks meet at a barrier
// before each round), each rank with its own loaders' workers.
//
//   DDPIO_ASSIGN_OR_RETURN(const CeilingImages images, LoadCeilingImages(*reader, 400));
//   DDPIO_ASSIGN_OR_RETURN(const double c,
//                          ConcurrentFullDecodeRate(images, /*without_markers=*/true, workers));
//
// Each call decodes on threads of its own and returns when they are done: thread-compatible.
#ifndef DDPIO_TOOLS_BENCH_CEILING_H_
#define DDPIO_TOOLS_BENCH_CEILING_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/loader/jpeg_restart.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::tools {

// The median of `v` (the mean of the two middle values for an even count); 0 for none.
double Median(std::vector<double> v);

// The JPEG records among `n` spread over the dataset, as the full-decode ceilings decode them: as
// stored, and as ordinary JPEGs (restart markers removed losslessly, before any timing).
// libjpeg-turbo decodes a restart-marked JPEG on its slower Huffman path, so only the second is the
// ceiling the loader is measured against: what decoding the same images costs anyone who has not
// transcoded them.
struct CeilingImages {
  std::vector<std::vector<uint8_t>> stored;
  std::vector<std::vector<uint8_t>>
      plain;  // stored[i] without its markers; empty: stored[i] has none
  uint64_t restart_marked = 0;
};

// The k-th of `n` records spread evenly over a dataset of `size` (all of them when n >= size):
// the ceiling and the side measurements decode a sample of the records the loader reads, not the
// first n — a dataset converted from an ImageFolder is ordered by class, and its first records
// can be other images (other sizes, other detail) than the whole.
inline uint64_t SampledRecord(uint64_t k, uint64_t n, uint64_t size) {
  return n >= size ? k : k * size / n;
}

// Calls fn(index, record, its restart layout) for each restart-marked JPEG record among the `n`
// spread evenly over `reader` (SampledRecord; records that cannot be read are left out). The
// reader's errors from BeginRead.
absl::Status ForEachSegmentedJpeg(const storage::DatasetReader& reader, uint64_t n,
                                  const std::function<void(uint64_t, const storage::RecordView&,
                                                           const loader::RestartLayout&)>& fn);

// Copies of the JPEG records among `n` spread evenly over `reader` (SampledRecord; records that
// cannot be read are left out). The reader's errors from BeginRead.
absl::StatusOr<CeilingImages> LoadCeilingImages(const storage::DatasetReader& reader, uint64_t n);

// Single-thread full decode (tjDecompress2) of the images, as stored or without their markers:
// images/s. Images that do not decode are left out: the ceiling is what decoding can reach.
absl::StatusOr<double> FullDecodeRate(const CeilingImages& images, bool without_markers);

// The full-decode ceiling measured as the loader runs: `threads` threads decoding at once (each
// its own decoder, every image once, thread t starting at image t * n / threads so they do not
// read the same bytes in step), released together; all images decoded / the time until the last
// thread is done. Two decoders at once do not decode twice as fast as one on a busy machine
// (shared caches, memory bandwidth, another process's load): this is the figure to compare a
// loader of `threads` workers with, not one thread's rate times `threads`. 0 for no images or
// fewer than one thread.
absl::StatusOr<double> ConcurrentFullDecodeRate(const CeilingImages& images, bool without_markers,
                                                int threads);

// The concurrent ceiling (without markers) before each epoch and after the last, from images
// loaded for each measurement only.
absl::StatusOr<double> MeasureConcurrentCeiling(const storage::DatasetReader& reader, uint64_t n,
                                                int threads);

// Each epoch's rate against the ceiling around it: rates[e] / the mean of rounds[e] and
// rounds[e + 1] (rounds: one before each epoch and one after the last), 0 where that mean is 0.
// Needs rounds.size() == rates.size() + 1.
std::vector<double> EpochRatios(const std::vector<double>& rates,
                                const std::vector<double>& rounds);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_BENCH_CEILING_H_
