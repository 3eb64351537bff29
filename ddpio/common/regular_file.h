// Reading files named by users — checkpoints, manifests, label lists — without the traps of
// special files: a FIFO opened for reading blocks until a writer comes (forever), /dev/zero or a
// sparse 20 GB file read whole exhausts memory. OpenRegularFile opens without blocking
// (O_NONBLOCK) and refuses anything but a regular file; ReadRegularFile also refuses a file larger
// than what its format allows, before reading a byte. Thread-safe (no shared state).
//
//   DDPIO_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path, 16 << 20, "shard manifest"));
#ifndef DDPIO_COMMON_REGULAR_FILE_H_
#define DDPIO_COMMON_REGULAR_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ddpio/common/fd.h"

namespace ddpio {

// The file at `path`, open for reading (blocking mode restored), with its size in *bytes.
// NotFound / PermissionDenied from the filesystem; InvalidArgument naming `what` and the kind of
// file when it is not a regular file (a FIFO, a device, a directory, a socket).
absl::StatusOr<Fd> OpenRegularFile(const std::string& path, const std::string& what,
                                   uint64_t* bytes = nullptr);

// The whole file, at most `max_bytes` of it: errors as OpenRegularFile, and InvalidArgument naming
// the size and the limit when it is larger (checked before reading); DataLoss when it changes
// size while being read.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                            const std::string& what);

// Replaces the file at `path` with `bytes` atomically: written to `path` + ".tmp", flushed to
// disk, renamed over `path`, and the rename made durable. On failure `path` is as it was and the
// temporary is removed; errors name the file (ResourceExhausted for a full disk).
absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace ddpio

#endif  // DDPIO_COMMON_REGULAR_FILE_H_
