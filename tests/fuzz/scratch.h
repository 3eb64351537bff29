// Scratch: a folder of this fuzz process's own under /dev/shm, for parsers that read files, removed
// when the process ends normally (libFuzzer's -runs and -max_total_time end by exit(), which runs
// the destructors of statics), so runs leave nothing behind. Use it as a function-local static.
#ifndef DDPIO_TESTS_FUZZ_SCRATCH_H_
#define DDPIO_TESTS_FUZZ_SCRATCH_H_

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace ddpio::fuzz {

class Scratch {
 public:
  explicit Scratch(const std::string& name)
      : dir_("/dev/shm/ddpio-fuzz-" + name + "-" + std::to_string(::getpid())) {
    std::error_code ignored;  // a folder that cannot be made: every file in it fails to open
    std::filesystem::create_directories(dir_, ignored);
  }
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  const std::string& dir() const { return dir_; }
  std::string Path(const std::string& file) const { return dir_ + "/" + file; }

 private:
  std::string dir_;
};

}  // namespace ddpio::fuzz

#endif  // DDPIO_TESTS_FUZZ_SCRATCH_H_
