// What each rank trained on, step by step: the evidence that a run with failures and restarts
// trained every sample of every epoch exactly once (scripts/tally-indices.py checks it).
//
// Each rank appends to PREFIX.rank<R>.txt, one line each, flushed as written (a killed process
// loses at most the line it was writing):
//   start <unix_ns> attempt <A> world <W> rank <R> replicas <G> epoch <E> step <S>
//                                                       a job (or restart) begins at step S; A
//                                                       names the attempt on every rank (rank 0's
//                                                       clock at its start); G ranks train each
//                                                       sample (replicate mode)
//   step <unix_ns> epoch <E> step <S> <n> <index> ...            optimizer step S trained these
// A step's indices are its micro-batches' valid ones (sampler padding and skipped bad samples
// are not trained on). The line is written before the rank's gradients go into the step's
// all-reduce, so a step that completed anywhere — that a checkpoint may cover — was logged by
// every rank, even one killed right after. A step line belongs to the attempt of the start line
// above it in the same file. A restart resumes from a checkpoint at step S: lines of
// an earlier attempt for steps after S, written before that restart began, were redone — the tally
// drops them.
//
//   DDPIO_ASSIGN_OR_RETURN(auto log, IndexLog::Open(prefix, rank));
//   DDPIO_RETURN_IF_ERROR(log->Start(attempt, world, replicas, epoch, step));
//   log->Add(batch); ... DDPIO_RETURN_IF_ERROR(log->Step(epoch, step));
#ifndef DDPIO_TRAINER_INDEX_LOG_H_
#define DDPIO_TRAINER_INDEX_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/loader/loader.h"

namespace ddpio::trainer {

class IndexLog {
 public:
  // Opens PREFIX.rank<R>.txt for appending (created, with its folder, when missing). The errno's
  // error naming the file when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<IndexLog>> Open(const std::string& prefix, int rank);
  ~IndexLog();
  IndexLog(const IndexLog&) = delete;
  IndexLog& operator=(const IndexLog&) = delete;

  const std::string& path() const { return path_; }
  // `attempt`: the same on every rank of this start (rank 0's Now(), broadcast); `replicas`: how
  // many ranks train each sample (the group size in replicate mode, else 1).
  absl::Status Start(int64_t attempt, int world, int replicas, uint64_t epoch, uint64_t step);
  // Nanoseconds since the Unix epoch.
  static int64_t Now();
  // A micro-batch of the step being taken.
  void Add(const loader::Batch& batch);
  // The step's micro-batches are all added and its gradients about to be all-reduced: writes its
  // line and starts the next one.
  absl::Status Step(uint64_t epoch, uint64_t step);

 private:
  IndexLog(std::string path, std::FILE* file, int rank)
      : path_(std::move(path)), file_(file), rank_(rank) {}
  absl::Status Write(const std::string& line);

  const std::string path_;
  std::FILE* const file_;
  const int rank_;
  std::vector<uint64_t> step_indices_;
};

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_INDEX_LOG_H_
