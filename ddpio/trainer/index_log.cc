#include "ddpio/trainer/index_log.h"

#include <cerrno>
#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::trainer {
int64_t IndexLog::Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<std::unique_ptr<IndexLog>> IndexLog::Open(const std::string& prefix, int rank) {
  std::string path = absl::StrCat(prefix, ".rank", rank, ".txt");
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!folder.empty()) std::filesystem::create_directories(folder, error);  // as checkpoint dirs
  std::FILE* f = std::fopen(path.c_str(), "ae");
  if (f == nullptr) return ErrnoToStatus(errno, absl::StrCat("opening ", path, " to append"));
  return std::unique_ptr<IndexLog>(new IndexLog(std::move(path), f, rank));
}

IndexLog::~IndexLog() { std::fclose(file_); }

absl::Status IndexLog::Write(const std::string& line) {
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    return ErrnoToStatus(errno, absl::StrCat("writing the trained indices to ", path_));
  return absl::OkStatus();
}

absl::Status IndexLog::Start(int64_t attempt, int world, int replicas, uint64_t epoch,
                             uint64_t step) {
  step_indices_.clear();
  return Write(absl::StrCat("start ", Now(), " attempt ", attempt, " world ", world, " rank ",
                            rank_, " replicas ", replicas, " epoch ", epoch, " step ", step, "\n"));
}

void IndexLog::Add(const loader::Batch& batch) {
  for (uint64_t k = 0; k < batch.size; ++k) {
    if (batch.valid[k] != 0) step_indices_.push_back(batch.indices[k]);
  }
}

absl::Status IndexLog::Step(uint64_t epoch, uint64_t step) {
  std::string line =
      absl::StrCat("step ", Now(), " epoch ", epoch, " step ", step, " ", step_indices_.size());
  for (uint64_t i : step_indices_) absl::StrAppend(&line, " ", i);
  line.push_back('\n');
  step_indices_.clear();
  return Write(line);
}

}  // namespace ddpio::trainer
