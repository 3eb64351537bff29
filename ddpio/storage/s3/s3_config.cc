#include "ddpio/storage/s3/s3_config.h"

#include <cerrno>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::storage::s3 {
namespace {

constexpr size_t kMaxPrefixBytes = 900;
constexpr uint64_t kMaxIniBytes = 1 << 20;

std::string Get(const EnvironmentMap& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF):
// S3 object keys are UTF-8, and the prefix goes into JSON (the manifest, the upload's state).
bool ValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      n = 1;
      cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      n = 2;
      cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      n = 3;
      cp = b & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // cut short
    for (int k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

bool ValidBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' || c == '-')) return false;
  }
  return absl::ascii_isalnum(b.front()) && absl::ascii_isalnum(b.back());
}

std::string Trim(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

absl::string_view Abseil(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// The named section of the file at `path` ("" when the file does not exist: not an error).
absl::StatusOr<std::map<std::string, std::string>> SectionOfFile(const std::string& path,
                                                                 const std::string& section,
                                                                 bool* found_file) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxIniBytes, "AWS shared file");
  if (absl::IsNotFound(text.status())) {
    *found_file = false;
    return std::map<std::string, std::string>();
  }
  if (!text.ok()) return text.status();
  *found_file = true;
  absl::StatusOr<std::map<std::string, std::string>> values = ReadIniSection(*text, section, path);
  if (absl::IsNotFound(values.status())) return std::map<std::string, std::string>();
  return values;
}

}  // namespace

std::string S3Url::ToString() const {
  return prefix.empty() ? absl::StrCat("s3://", bucket)
                        : absl::StrCat("s3://", bucket, "/", prefix);
}

std::string S3Url::Key(std::string_view name) const {
  return prefix.empty() ? std::string(name) : absl::StrCat(prefix, "/", Abseil(name));
}

bool IsS3Url(std::string_view path) { return absl::StartsWith(Abseil(path), "s3://"); }

absl::StatusOr<S3Url> ParseS3Url(std::string_view url) {
  if (!IsS3Url(url))
    return absl::InvalidArgumentError(absl::StrCat("'", std::string(url), "' is not an s3:// URL"));
  std::string_view rest = url.substr(5);
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  const size_t slash = rest.find('/');
  S3Url u;
  u.bucket = std::string(rest.substr(0, slash));
  if (!ValidBucket(u.bucket)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", std::string(url), "': '", u.bucket,
                     "' is not a bucket name (3-63 characters of a-z, 0-9, '.' and '-')"));
  }
  if (slash != std::string_view::npos) u.prefix = std::string(rest.substr(slash + 1));
  if (u.prefix.size() > kMaxPrefixBytes) {
    return absl::InvalidArgumentError(absl::StrCat("'", std::string(url), "': a prefix of ",
                                                   u.prefix.size(), " bytes (at most ",
                                                   kMaxPrefixBytes, ")"));
  }
  if (!u.prefix.empty()) {
    for (absl::string_view part : absl::StrSplit(u.prefix, '/')) {
      if (part.empty() || part == "." || part == "..") {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", std::string(url), "': the prefix has an empty, '.' or '..' component"));
      }
      for (char c : part) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          return absl::InvalidArgumentError(
              absl::StrCat("'", std::string(url), "': a control character in the prefix"));
        }
      }
    }
    if (!ValidUtf8(u.prefix)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", absl::CHexEscape(std::string(url)),
                       "': the prefix is not UTF-8 (S3 object keys are UTF-8 text)"));
    }
  }
  return u;
}

std::string S3Config::Describe() const {
  return absl::StrCat("endpoint ", endpoint, ", region ", region, ", key ", access_key.substr(0, 4),
                      "…", session_token.empty() ? "" : " (with a session token)",
                      ", credentials from ", credentials_from);
}

absl::StatusOr<std::map<std::string, std::string>> ReadIniSection(std::string_view text,
                                                                  std::string_view section,
                                                                  std::string_view file_name) {
  if (text.size() > kMaxIniBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(file_name), " is larger than ", kMaxIniBytes, " bytes"));
  }
  std::map<std::string, std::string> values;
  bool in = false, found = false;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(Abseil(text), '\n')) {
    ++line_no;
    std::string line = Trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(file_name), ":", line_no, ": a section header without ']'"));
      }
      std::string name = Trim(absl::string_view(line).substr(1, line.size() - 2));
      if (absl::StartsWith(name, "profile ")) name = Trim(absl::string_view(name).substr(8));
      in = name == section;
      found = found || in;
      continue;
    }
    if (!in) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      if (absl::ascii_isspace(raw.empty() ? 'x' : raw[0]))
        continue;  // a nested value (config's s3 = ...)
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(file_name), ":", line_no, ": not 'key = value'"));
    }
    values[Trim(absl::string_view(line).substr(0, eq))] =
        Trim(absl::string_view(line).substr(eq + 1));
  }
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("no profile '", std::string(section), "' in ", std::string(file_name)));
  }
  return values;
}

absl::StatusOr<S3Config> S3ConfigFromEnvironment(const EnvironmentMap& env) {
  S3Config c;
  const std::string profile = Get(env, "AWS_PROFILE").empty() ? "default" : Get(env, "AWS_PROFILE");
  const std::string home = Get(env, "HOME");
  const std::string credentials_file = !Get(env, "AWS_SHARED_CREDENTIALS_FILE").empty()
                                           ? Get(env, "AWS_SHARED_CREDENTIALS_FILE")
                                           : absl::StrCat(home, "/.aws/credentials");
  const std::string config_file = !Get(env, "AWS_CONFIG_FILE").empty()
                                      ? Get(env, "AWS_CONFIG_FILE")
                                      : absl::StrCat(home, "/.aws/config");
  bool have_credentials_file = false, have_config_file = false;
  DDPIO_ASSIGN_OR_RETURN(auto from_credentials,
                         SectionOfFile(credentials_file, profile, &have_credentials_file));
  DDPIO_ASSIGN_OR_RETURN(auto from_config, SectionOfFile(config_file, profile, &have_config_file));
  if (!Get(env, "AWS_PROFILE").empty() && from_credentials.empty() && from_config.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("AWS_PROFILE=", profile, " names no profile in ",
                                                   credentials_file, " or ", config_file));
  }
  auto file_value = [&](const std::string& key) {
    auto it = from_credentials.find(key);
    if (it != from_credentials.end()) return it->second;
    it = from_config.find(key);
    return it != from_config.end() ? it->second : std::string();
  };
  if (!Get(env, "AWS_ACCESS_KEY_ID").empty() || !Get(env, "AWS_SECRET_ACCESS_KEY").empty()) {
    c.access_key = Get(env, "AWS_ACCESS_KEY_ID");
    c.secret_key = Get(env, "AWS_SECRET_ACCESS_KEY");
    c.session_token = Get(env, "AWS_SESSION_TOKEN");
    c.credentials_from = "the environment (AWS_ACCESS_KEY_ID)";
  } else {
    c.access_key = file_value("aws_access_key_id");
    c.secret_key = file_value("aws_secret_access_key");
    c.session_token = file_value("aws_session_token");
    c.profile = profile;
    c.credentials_from = absl::StrCat("profile '", profile, "' of ",
                                      have_credentials_file ? credentials_file : config_file);
  }
  if (c.access_key.empty() || c.secret_key.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile '",
        profile, "' ", "aws_access_key_id and aws_secret_access_key in ", credentials_file,
        " (scripts/object-store.sh up prints the variables for its local gateway)"));
  }
  c.region = !Get(env, "AWS_REGION").empty()           ? Get(env, "AWS_REGION")
             : !Get(env, "AWS_DEFAULT_REGION").empty() ? Get(env, "AWS_DEFAULT_REGION")
             : !file_value("region").empty()           ? file_value("region")
                                                       : "us-east-1";
  c.endpoint = !Get(env, "AWS_ENDPOINT_URL_S3").empty() ? Get(env, "AWS_ENDPOINT_URL_S3")
               : !Get(env, "AWS_ENDPOINT_URL").empty()  ? Get(env, "AWS_ENDPOINT_URL")
               : !file_value("endpoint_url").empty()
                   ? file_value("endpoint_url")
                   : absl::StrCat("https://s3.", c.region, ".amazonaws.com");
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  if (!absl::StartsWith(c.endpoint, "http://") && !absl::StartsWith(c.endpoint, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3 endpoint '", c.endpoint, "' is not an http:// or https:// URL"));
  }
  return c;
}

}  // namespace ddpio::storage::s3
