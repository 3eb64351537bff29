// A dataset that becomes unreadable while mapped — the file truncated under a running job, or
// its storage failing — makes the next read of the map raise SIGBUS, which would end the
// process with no word of why. GuardMappedRegion registers a dataset's map; a SIGBUS whose
// address lies in a registered map prints which dataset and why on stderr and exits with
// status 1. A SIGBUS anywhere else goes to whatever handled it before (or the default). Private
// to storage/; thread-safe; the handler is installed on the first registration.
#ifndef DDPIO_STORAGE_INTERNAL_MAP_GUARD_H_
#define DDPIO_STORAGE_INTERNAL_MAP_GUARD_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddpio::storage::internal {

// Where this process maps the file (device, inode) from offset 0: [*base, *base + *bytes).
// False when it is not mapped. (LMDB does not say where it mapped a file: mdb_env_info's
// me_mapaddr is the fixed address a file asks for, null for ours.)
bool FindFileMapping(uint64_t dev, uint64_t ino, const void** base, size_t* bytes);

// At most 64 maps are watched at once; more are simply not guarded (logged).
void GuardMappedRegion(const void* base, size_t bytes, const std::string& path);
void UnguardMappedRegion(const void* base);

}  // namespace ddpio::storage::internal

#endif  // DDPIO_STORAGE_INTERNAL_MAP_GUARD_H_
