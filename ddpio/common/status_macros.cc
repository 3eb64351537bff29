#include "ddpio/common/status_macros.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ddpio {

absl::Status ErrnoToStatus(int err, std::string_view context) {
  std::string message = absl::StrCat(std::string(context), ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
      return absl::ResourceExhaustedError(message);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(message);
    case ECONNRESET:
    case ECONNREFUSED:
    case EPIPE:
      return absl::UnavailableError(message);
    case EINVAL:
      return absl::InvalidArgumentError(message);
    case EEXIST:
      return absl::AlreadyExistsError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  absl::Status out(status.code(),
                   absl::StrCat(std::string(context), ": ", std::string(status.message())));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

namespace {
constexpr char kSettingUrl[] = "ddpio.dev/setting";
}  // namespace

absl::Status WithSetting(absl::Status status, std::string_view setting) {
  if (status.ok()) return status;
  std::string settings;
  if (auto old = status.GetPayload(kSettingUrl); old.has_value())
    settings = absl::StrCat(std::string(*old), ",");
  status.SetPayload(kSettingUrl, absl::Cord(settings + std::string(setting)));
  return status;
}

std::vector<std::string> SettingsOf(const absl::Status& status) {
  auto payload = status.GetPayload(kSettingUrl);
  if (!payload.has_value()) return {};
  return absl::StrSplit(std::string(*payload), ',', absl::SkipEmpty());
}

}  // namespace ddpio
