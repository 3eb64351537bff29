// Where an S3-compatible object store is and how to sign requests to it, configured the way the
// AWS tools are: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION, and the shared files ~/.aws/credentials and
// ~/.aws/config (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE) with the profile AWS_PROFILE
// ("default" when unset). Variables win over files, as for the AWS CLI. Non-AWS endpoints are
// addressed path-style (http://HOST:PORT/BUCKET/KEY).
//
//   DDPIO_ASSIGN_OR_RETURN(S3Url url, ParseS3Url("s3://bucket/datasets/train"));
//   DDPIO_ASSIGN_OR_RETURN(S3Config config, S3ConfigFromEnvironment(CurrentEnvironment()));
//
// Secrets never appear in what Describe() or any error says. Pure functions (the files are read
// by S3ConfigFromEnvironment); thread-safe.
#ifndef DDPIO_STORAGE_S3_S3_CONFIG_H_
#define DDPIO_STORAGE_S3_S3_CONFIG_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ddpio::storage::s3 {

// "s3://BUCKET/PREFIX": the bucket and the key prefix (no leading or trailing '/'; may be empty).
struct S3Url {
  std::string bucket;
  std::string prefix;
  std::string ToString() const;
  // The key of `name` under the prefix ("prefix/name", or "name" when the prefix is empty).
  std::string Key(std::string_view name) const;
};

bool IsS3Url(std::string_view path);
// InvalidArgument naming what is wrong for anything but s3:// followed by a valid bucket name
// (3-63 characters of [a-z0-9.-]) and an optional prefix of at most 900 bytes without "//", "."
// or ".." components.
absl::StatusOr<S3Url> ParseS3Url(std::string_view url);

struct S3Config {
  std::string endpoint;  // "https://s3.REGION.amazonaws.com" or AWS_ENDPOINT_URL's
  std::string region = "us-east-1";
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // AWS_SESSION_TOKEN (temporary credentials); may be empty
  std::string profile;        // the profile whose files were read, "" when none
  // Where each value came from, for Describe (never the values of secrets).
  std::string credentials_from;
  // The endpoint and region, the key id's first 4 characters and where the credentials came
  // from: "endpoint http://127.0.0.1:7480, region us-east-1, key ddpi…, credentials from the
  // environment".
  std::string Describe() const;
};

using EnvironmentMap =
    std::map<std::string, std::string>;  // as ddpio::Environment (common/environment.h)

// From `env` and the shared files it points at (HOME/.aws/... by default). FailedPrecondition
// naming every place looked at when no credentials are found; InvalidArgument for an endpoint
// that is not http:// or https://, or a profile that does not exist in the files named.
absl::StatusOr<S3Config> S3ConfigFromEnvironment(const EnvironmentMap& env);

// One section of an AWS shared file (INI): `key = value` lines under "[name]" (credentials) or
// "[profile name]" (config; "[default]" either way). NotFound when the section is not there;
// InvalidArgument "FILE:LINE" for a malformed line. At most 1 MiB of text.
absl::StatusOr<std::map<std::string, std::string>> ReadIniSection(std::string_view text,
                                                                  std::string_view section,
                                                                  std::string_view file_name);

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_S3_CONFIG_H_
