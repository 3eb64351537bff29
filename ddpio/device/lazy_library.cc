#include "ddpio/device/lazy_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ddpio/common/log.h"

namespace ddpio::device {

LazyLibrary::LazyLibrary(std::string what, std::vector<std::string> candidates)
    : what_(std::move(what)), candidates_(std::move(candidates)) {}

LazyLibrary::~LazyLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void LazyLibrary::Open() {
  std::vector<std::string> failures;
  for (const std::string& name : candidates_) {
    // RTLD_LOCAL: the library's names are reached through this handle only, never in place of
    // the forwarders of the same name.
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      handle_ = handle;
      return;
    }
    const char* why = dlerror();
    failures.push_back(why != nullptr ? std::string(why) : absl::StrCat(name, ": not loaded"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  error_ = absl::StrCat(what_, " could not be loaded (", absl::StrJoin(failures, "; "), ")");
  DDPIO_LOG(WARNING) << error_;  // once: Open runs once
}

absl::Status LazyLibrary::Load() {
  std::call_once(once_, [this] { Open(); });
  std::lock_guard<std::mutex> lock(mu_);
  if (handle_ != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(error_);
}

bool LazyLibrary::loaded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return handle_ != nullptr;
}

const char* LazyLibrary::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_.c_str();
}

void* LazyLibrary::Symbol(const char* name) {
  if (!Load().ok()) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  dlerror();
  void* fn = dlsym(handle_, name);
  if (fn == nullptr && error_.empty()) {  // the first failure is kept: error() stays valid
    error_ = absl::StrCat(what_, " has no function ", name, " (an older version?)");
    DDPIO_LOG(WARNING) << error_;
  }
  return fn;
}

std::string FolderOfThisCode() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&FolderOfThisCode), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  std::string path = info.dli_fname;
  if (path.empty() || path.front() != '/') {
    // The main program is named as it was started (argv[0]: relative, or without a folder when
    // found on PATH); /proc/self/exe is where it is.
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return "";
    path.assign(self, static_cast<size_t>(n));
  }
  return path.substr(0, path.rfind('/'));
}

}  // namespace ddpio::device
