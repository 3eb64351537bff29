#include "ddpio/storage/internal/map_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "ddpio/common/log.h"

namespace ddpio::storage::internal {

// The handler's write access to a MapFault.
struct MapFaultAccess {
  static std::atomic<uint64_t>& First(MapFault& f) { return f.first_; }
  static constexpr uint64_t kNone = MapFault::kNone;
};

namespace {

// The handler touches these atomics, so they must not hide a lock.
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              std::atomic<uintptr_t>::is_always_lock_free);

constexpr int kSlots = 64;
constexpr size_t kPathBytes = 512;

// Written under g_mu, read by the signal handler without locks: a slot is published by storing
// its base last (release) and retired by clearing the base first. `fault` is written by the
// handler, reset when the slot is published again.
struct Slot {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> bytes{0};
  MapFault fault;
  char path[kPathBytes] = {};
};
Slot g_slots[kSlots];
std::mutex g_mu;
struct sigaction g_previous;
bool g_installed = false;  // guarded by g_mu
size_t g_page = 0;         // written under g_mu before the handler is installed, then constant

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

// A bus error in a registered map: records it, then puts a zero-filled page where the file's
// page was, so that the access that faulted completes when the handler returns. The record comes
// first: another thread that reads the new page checks the map's MapFault afterwards and must
// find it. Only mmap, a plain system call on Linux, and lock-free atomics here.
bool ReplaceFaultingPage(Slot& s, uintptr_t addr, uintptr_t base) {
  uint64_t none = MapFaultAccess::kNone;
  MapFaultAccess::First(s.fault).compare_exchange_strong(none, addr - base,
                                                         std::memory_order_seq_cst);
  void* page = reinterpret_cast<void*>(addr & ~(static_cast<uintptr_t>(g_page) - 1));
  return ::mmap(page, g_page, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) !=
         MAP_FAILED;
}

// The registered map holding `addr` (and its base), or null.
Slot* FindSlot(uintptr_t addr, uintptr_t* base) {
  for (Slot& s : g_slots) {
    *base = s.base.load(std::memory_order_acquire);
    if (*base != 0 && addr >= *base && addr - *base < s.bytes.load(std::memory_order_relaxed))
      return &s;
  }
  return nullptr;
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  // Only a fault the kernel raised has a meaningful address (si_code > 0; kill() and friends
  // send <= 0).
  const uintptr_t addr =
      info != nullptr && info->si_code > 0 ? reinterpret_cast<uintptr_t>(info->si_addr) : 0;
  uintptr_t base = 0;
  if (Slot* s = addr != 0 ? FindSlot(addr, &base) : nullptr; s != nullptr) {
    if (ReplaceFaultingPage(*s, addr, base)) {
      errno = saved_errno;
      return;  // the read is retried and finds zeros; the reader turns the record into DataLoss
    }
    Write("ddpio: error: dataset ");
    Write(s->path);
    Write(" became unreadable while mapped (bus error at byte ");
    WriteNumber(addr - base);
    Write(
        " of its file) and its page could not be replaced: the file was truncated or replaced "
        "under "
        "the running process, is corrupt, or its storage failed; check the file (`ddpio inspect "
        "--verify` checks every record) and restart\n");
    ::_exit(1);
  }
  errno = saved_errno;
  // Not a dataset: whoever handled SIGBUS before us does, or the default ends the process.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

}  // namespace

std::vector<std::pair<const void*, size_t>> FileMappings(uint64_t dev, uint64_t ino) {
  std::vector<std::pair<const void*, size_t>> found;
  std::FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return found;
  char line[4096];
  while (std::fgets(line, sizeof(line), maps) != nullptr) {
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    unsigned major = 0, minor = 0;
    char perms[8];
    if (std::sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &offset, &major,
                    &minor, &inode) != 7) {
      continue;
    }
    if (offset == 0 && inode == ino && makedev(major, minor) == dev) {
      found.emplace_back(reinterpret_cast<const void*>(static_cast<uintptr_t>(start)),
                         static_cast<size_t>(end - start));
    }
  }
  std::fclose(maps);
  return found;
}

bool FindFileMapping(uint64_t dev, uint64_t ino, const void** base, size_t* bytes) {
  const auto maps = FileMappings(dev, ino);
  if (maps.empty()) return false;
  *base = maps.front().first;
  *bytes = maps.front().second;
  return true;
}

const MapFault* GuardMappedRegion(const void* base, size_t bytes, const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_installed) {
    g_page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
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
    MapFaultAccess::First(s.fault).store(MapFaultAccess::kNone, std::memory_order_relaxed);
    s.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return &s.fault;
  }
  DDPIO_LOG(WARNING) << "more than " << kSlots << " datasets mapped at once; " << path
                     << " is read without its bus-error guard";
  return nullptr;
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
