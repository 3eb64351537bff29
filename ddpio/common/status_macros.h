// Status propagation macros and errno conversion.
//
// Abseil 20220623 (Debian 12) has no status macros, so ddpio defines its own, once, here.
// Every module returns absl::Status / absl::StatusOr<T> across its boundary; these keep the
// call sites short:
//
//   DDPIO_RETURN_IF_ERROR(writer.Append(record));
//   DDPIO_ASSIGN_OR_RETURN(auto reader, DatasetReader::Open(path, options));
#ifndef DDPIO_COMMON_STATUS_MACROS_H_
#define DDPIO_COMMON_STATUS_MACROS_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DDPIO_INTERNAL_CONCAT_(a, b) a##b
#define DDPIO_INTERNAL_CONCAT(a, b) DDPIO_INTERNAL_CONCAT_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define DDPIO_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status ddpio_status_ = (expr);         \
    if (!ddpio_status_.ok()) return ddpio_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, otherwise moves the
// value into `lhs` (which may be a declaration such as `auto x`).
#define DDPIO_ASSIGN_OR_RETURN(lhs, rexpr) \
  DDPIO_INTERNAL_ASSIGN_OR_RETURN(DDPIO_INTERNAL_CONCAT(ddpio_statusor_, __LINE__), lhs, rexpr)
#define DDPIO_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                    \
  if (!tmp.ok()) return std::move(tmp).status();         \
  lhs = std::move(tmp).value()

namespace ddpio {

// Maps an errno value to the canonical code ddpio uses (ENOENT -> NotFound, EACCES/EPERM/EROFS
// -> PermissionDenied, ENOSPC/EDQUOT -> ResourceExhausted, ETIMEDOUT -> DeadlineExceeded,
// ECONNRESET/EPIPE/ECONNREFUSED -> Unavailable, otherwise Internal) and builds a Status whose
// message is "<context>: <strerror>".
absl::Status ErrnoToStatus(int err, std::string_view context);

// Returns `status` with "<context>: " prepended to its message, keeping its code and payloads.
absl::Status Annotate(const absl::Status& status, std::string_view context);

// Library errors say in words which setting to change ("lower the learning rate") and never name
// a command-line flag; they attach the setting's name (a RendezvousOptions / TrainOptions / ...
// field, e.g. "learning_rate") so that a front end — the ddpio program, a Python binding — can
// add how to change it in its own terms (--lr). Settings accumulate.
absl::Status WithSetting(absl::Status status, std::string_view setting);
// The settings attached to `status`, in the order they were attached.
std::vector<std::string> SettingsOf(const absl::Status& status);

}  // namespace ddpio

#endif  // DDPIO_COMMON_STATUS_MACROS_H_
