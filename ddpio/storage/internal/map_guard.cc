#include "ddpio/storage/internal/map_guard.h"

#include <signal.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "ddpio/common/log.h"

namespace ddpio::storage::internal {
namespace {

constexpr int kSlots = 64;
constexpr size_t kPathBytes = 512;

// Written under g_mu, read by the signal handler without locks: a slot is published by storing
// its base last (release) and retired by clearing the base first.
struct Slot {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> bytes{0};
  char path[kPathBytes] = {};
};
Slot g_slots[kSlots];
std::mutex g_mu;
struct sigaction g_previous;
bool g_installed = false;  // guarded by g_mu

void Write(const char* s) {
  ssize_t unused = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)unused;
}

void WriteNumber(uint64_t v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  char out[24];
  for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\0';
  Write(out);
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info != nullptr ? info->si_addr : nullptr);
  for (Slot& s : g_slots) {
    const uintptr_t base = s.base.load(std::memory_order_acquire);
    if (base == 0 || addr < base || addr - base >= s.bytes.load(std::memory_order_relaxed)) continue;
    Write("ddpio: error: dataset ");
    Write(s.path);
    Write(" became unreadable while mapped (bus error at byte ");
    WriteNumber(addr - base);
    Write(" of its file): the file was truncated, replaced or its storage failed under the running "
          "process; check the file (ddpio inspect can verify every record) and restart\n");
    ::_exit(1);
  }
  // Not a dataset: whoever handled SIGBUS before us does, or the default ends the process.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

}  // namespace

bool FindFileMapping(uint64_t dev, uint64_t ino, const void** base, size_t* bytes) {
  std::FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof(line), maps) != nullptr) {
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    unsigned major = 0, minor = 0;
    char perms[8];
    if (std::sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &offset, &major, &minor, &inode) != 7) {
      continue;
    }
    if (offset == 0 && inode == ino && makedev(major, minor) == dev) {
      *base = reinterpret_cast<const void*>(static_cast<uintptr_t>(start));
      *bytes = static_cast<size_t>(end - start);
      found = true;
    }
  }
  std::fclose(maps);
  return found;
}

void GuardMappedRegion(const void* base, size_t bytes, const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_installed) {
    struct sigaction sa {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(SIGBUS, &sa, &g_previous) == 0) g_installed = true;
  }
  for (Slot& s : g_slots) {
    if (s.base.load(std::memory_order_relaxed) != 0) continue;
    std::strncpy(s.path, path.c_str(), kPathBytes - 1);
    s.path[kPathBytes - 1] = '\0';
    s.bytes.store(bytes, std::memory_order_relaxed);
    s.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return;
  }
  DDPIO_LOG(WARNING) << "more than " << kSlots << " datasets mapped at once; " << path
                     << " is read without its bus-error guard";
}

void UnguardMappedRegion(const void* base) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (Slot& s : g_slots) {
    if (s.base.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(base)) {
      s.base.store(0, std::memory_order_release);
      s.bytes.store(0, std::memory_order_relaxed);
    }
  }
}

}  // namespace ddpio::storage::internal
