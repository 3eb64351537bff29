// A fresh temporary directory, removed with everything in it when the object dies.
#ifndef DDPIO_TESTS_SUPPORT_TEMP_DIR_H_
#define DDPIO_TESTS_SUPPORT_TEMP_DIR_H_

#include <filesystem>
#include <string>

namespace ddpio::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // path() / name, as a string.
  std::string Sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_TEMP_DIR_H_
