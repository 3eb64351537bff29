// A dataset that becomes unreadable while mapped — the file truncated or replaced under a running
// job, LMDB following a page past the end of a corrupt file, or its storage failing — makes the
// next read of the map raise SIGBUS, which would end the process with no word of why.
// GuardMappedRegion registers a dataset's map. A SIGBUS whose address lies in a registered map
// replaces the faulting page with a zero-filled one, records the fault in the map's MapFault and
// lets the read complete (reading zeros): the reader checks MapFault after touching the map and
// turns the fault into DataLoss (dataset_reader.cc), so the zeros never leave storage/ as data.
// Only if the page cannot be replaced does the handler print which dataset and exit with status 1.
// A SIGBUS anywhere else goes to whatever handled it before (or the default). Private to
// storage/; thread-safe; the handler is installed on the first registration.
#ifndef DDPIO_STORAGE_INTERNAL_MAP_GUARD_H_
#define DDPIO_STORAGE_INTERNAL_MAP_GUARD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ddpio::storage::internal {

// What the bus-error handler recorded about one registered map: written by the handler, read by
// any thread without locks (one fence and one atomic load).
class MapFault {
 public:
  // Whether a bus error has hit the map since it was registered; if so, *offset is the byte
  // offset (from the start of the map, which is the start of the file) of the first one. Call it
  // after touching the map: a read before the call that found a replaced page — in this thread or
  // another — shows here, because the handler records the fault before it replaces the page.
  bool Faulted(uint64_t* offset) const {
    // The map's bytes are read before the record is: on a CPU that reorders loads (ARM), a read of
    // a zero page could otherwise pass this check. A compiler barrier on x86. (ThreadSanitizer
    // does not model fences and GCC refuses them under it; its builds check the rest.)
#if !defined(__SANITIZE_THREAD__)
    std::atomic_thread_fence(std::memory_order_acquire);
#endif
    const uint64_t first = first_.load(std::memory_order_acquire);
    if (first == kNone) return false;
    *offset = first;
    return true;
  }

 private:
  friend struct MapFaultAccess;
  static constexpr uint64_t kNone = ~uint64_t{0};
  std::atomic<uint64_t> first_{kNone};
};

// Every map of the file (device, inode) from offset 0 in this process, lowest address first:
// (base, bytes). (LMDB does not say where it mapped a file: mdb_env_info's me_mapaddr is the
// fixed address a file asks for, null for ours. A file can be mapped more than once: a child of
// fork inherits its parent's map of a dataset and opens its own.)
std::vector<std::pair<const void*, size_t>> FileMappings(uint64_t dev, uint64_t ino);
// The first of them: [*base, *base + *bytes). False when the file is not mapped.
bool FindFileMapping(uint64_t dev, uint64_t ino, const void** base, size_t* bytes);

// Registers [base, base + bytes), the map of the file `path` (named in the fallback message).
// Returns the map's fault state, valid until UnguardMappedRegion(base); null when the map is not
// guarded: at most 64 maps are watched at once, more are simply not guarded (logged).
const MapFault* GuardMappedRegion(const void* base, size_t bytes, const std::string& path);
void UnguardMappedRegion(const void* base);

}  // namespace ddpio::storage::internal

#endif  // DDPIO_STORAGE_INTERNAL_MAP_GUARD_H_
