#include "ddpio/storage/s3/s3_client.h"

#include <chrono>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/s3/s3_xml.h"

namespace ddpio::storage::s3 {
namespace {

constexpr uint64_t kMaxXmlBytes = 16 << 20;  // listings and error documents

// What to check when the store refuses a request: S3 servers answer an expired session token
// with 400 ExpiredToken (AWS) or a bare 403 AccessDenied (Ceph's gateway), so say both.
std::string RefusedHint(const S3Config& config) {
  std::string hint = absl::StrCat("The store refused the request with these credentials (",
                                  config.Describe(), ")");
  if (!config.session_token.empty()) {
    absl::StrAppend(&hint,
                    "; they are temporary (a session token, AWS_SESSION_TOKEN, is set) and may "
                    "have expired: get new ones from their issuer");
  } else {
    absl::StrAppend(&hint, ": check the key pair, and that this account may read the bucket");
  }
  return hint;
}

}  // namespace

std::string EncodeKey(const std::string& key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : key) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<S3Client>> S3Client::Create(const S3Config& config,
                                                           const S3ClientOptions& options) {
  HttpClient::Options o;
  o.retry = options.retry;
  o.max_in_flight = options.max_in_flight;
  o.in_flight_limit = options.in_flight_limit;
  o.max_requests_per_s = options.max_requests_per_s;
  // The node's clients of this store back off together (node_signal.h).
  o.node_signal_key = config.endpoint;
  o.sigv4 = absl::StrCat("aws:amz:", config.region, ":s3");
  o.user_password = absl::StrCat(config.access_key, ":", config.secret_key);
  o.refused_hint = RefusedHint(config);
  // Progress while a failing store is retried (an outage may be ridden out for minutes): one line
  // now and then, not one per request — after 2 s of retrying, then at most every 10 s.
  o.on_retry = [endpoint = config.endpoint, budget = options.retry.give_up_after,
                last = std::make_shared<std::chrono::steady_clock::time_point>()](
                   const std::string& what, int attempt, std::chrono::milliseconds waited,
                   const absl::Status& error) {
    const auto now = std::chrono::steady_clock::now();
    if (waited < std::chrono::seconds(2) || now - *last < std::chrono::seconds(10)) return;
    *last = now;
    DDPIO_LOG(WARNING) << "object store " << endpoint << " failing: still retrying " << what
                       << " (attempt " << attempt << ", " << waited.count() / 1000 << " s so far"
                       << (budget.count() > 0
                               ? absl::StrCat(", giving up after ", budget.count() / 1000,
                                              " s: DDPIO_S3_OUTAGE_SECONDS")
                               : std::string())
                       << "): " << error.message();
  };
  DDPIO_ASSIGN_OR_RETURN(auto http, HttpClient::Create(o));
  return std::unique_ptr<S3Client>(new S3Client(config, std::move(http)));
}

std::string S3Client::Url(const std::string& bucket, const std::string& key,
                          const std::string& query) const {
  std::string url = absl::StrCat(config_.endpoint, "/", EncodeKey(bucket));
  if (!key.empty()) absl::StrAppend(&url, "/", EncodeKey(key));
  if (!query.empty()) absl::StrAppend(&url, "?", query);
  return url;
}

HttpRequest S3Client::Request(const std::string& method, const std::string& bucket,
                              const std::string& key, const std::string& query,
                              std::string what) const {
  HttpRequest r;
  r.method = method;
  r.url = Url(bucket, key, query);
  r.headers.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (!config_.session_token.empty())
    r.headers.push_back("x-amz-security-token: " + config_.session_token);
  r.what = std::move(what);
  r.max_response_bytes = kMaxXmlBytes;
  return r;
}

absl::StatusOr<std::string> S3Client::Get(const std::string& bucket, const std::string& key,
                                          uint64_t max_bytes) {
  HttpRequest r = Request("GET", bucket, key, "", absl::StrCat("GET ", Name(bucket, key)));
  r.max_response_bytes = max_bytes;
  DDPIO_ASSIGN_OR_RETURN(HttpResponse response, http_->Execute(std::move(r)));
  return std::move(response.body);
}

namespace {

HttpRequest RangeRequest(HttpRequest r, uint64_t offset, uint64_t length) {
  r.headers.push_back(absl::StrCat("Range: bytes=", offset, "-", offset + length - 1));
  r.max_response_bytes = length;
  r.transfer_bytes = length;
  return r;
}

absl::StatusOr<std::string> CheckRange(absl::StatusOr<HttpResponse> response,
                                       const std::string& what, uint64_t length) {
  if (!response.ok()) return response.status();
  if (response->body.size() != length) {
    return absl::DataLossError(absl::StrCat(what, ": ", response->body.size(),
                                            " bytes came back for a range of ", length, " (HTTP ",
                                            response->status, ")"));
  }
  return std::move(response->body);
}

}  // namespace

absl::StatusOr<std::string> S3Client::GetRange(const std::string& bucket, const std::string& key,
                                               uint64_t offset, uint64_t length) {
  if (length == 0) return std::string();
  const std::string what =
      absl::StrCat("GET ", Name(bucket, key), " bytes=", offset, "-", offset + length - 1);
  return CheckRange(
      http_->Execute(RangeRequest(Request("GET", bucket, key, "", what), offset, length)), what,
      length);
}

void S3Client::GetRangeAsync(const std::string& bucket, const std::string& key, uint64_t offset,
                             uint64_t length, RangeDone done) {
  if (length == 0) {
    done(std::string());
    return;
  }
  const std::string what =
      absl::StrCat("GET ", Name(bucket, key), " bytes=", offset, "-", offset + length - 1);
  http_->Submit(RangeRequest(Request("GET", bucket, key, "", what), offset, length),
                [done = std::move(done), what, length](absl::StatusOr<HttpResponse> r) {
                  done(CheckRange(std::move(r), what, length));
                });
}

absl::StatusOr<ObjectStore::Object> S3Client::GetObject(const std::string& bucket,
                                                        const std::string& key,
                                                        uint64_t max_bytes) {
  HttpRequest r = Request("GET", bucket, key, "", absl::StrCat("GET ", Name(bucket, key)));
  r.max_response_bytes = max_bytes;
  DDPIO_ASSIGN_OR_RETURN(HttpResponse response, http_->Execute(std::move(r)));
  return Object{std::move(response.body), std::move(response.etag)};
}

absl::StatusOr<uint64_t> S3Client::Size(const std::string& bucket, const std::string& key) {
  DDPIO_ASSIGN_OR_RETURN(
      HttpResponse r,
      http_->Execute(Request("HEAD", bucket, key, "", absl::StrCat("HEAD ", Name(bucket, key)))));
  if (r.content_length < 0) {
    return absl::DataLossError(
        absl::StrCat("HEAD ", Name(bucket, key), ": no Content-Length in the answer"));
  }
  return static_cast<uint64_t>(r.content_length);
}

absl::StatusOr<ObjectStore::ObjectInfo> S3Client::Head(const std::string& bucket,
                                                       const std::string& key) {
  DDPIO_ASSIGN_OR_RETURN(
      HttpResponse r,
      http_->Execute(Request("HEAD", bucket, key, "", absl::StrCat("HEAD ", Name(bucket, key)))));
  if (r.content_length < 0 || r.etag.empty()) {
    return absl::DataLossError(
        absl::StrCat("HEAD ", Name(bucket, key), ": no Content-Length or ETag in the answer"));
  }
  return ObjectInfo{static_cast<uint64_t>(r.content_length), std::move(r.etag)};
}

absl::Status S3Client::Put(const std::string& bucket, const std::string& key, std::string body) {
  HttpRequest r = Request("PUT", bucket, key, "", absl::StrCat("PUT ", Name(bucket, key)));
  r.body = std::move(body);
  return http_->Execute(std::move(r)).status();
}

absl::StatusOr<std::string> S3Client::PutWithEtag(const std::string& bucket, const std::string& key,
                                                  std::string body) {
  HttpRequest r = Request("PUT", bucket, key, "", absl::StrCat("PUT ", Name(bucket, key)));
  r.body = std::move(body);
  DDPIO_ASSIGN_OR_RETURN(HttpResponse response, http_->Execute(std::move(r)));
  if (response.etag.empty()) {
    return absl::DataLossError(absl::StrCat("PUT ", Name(bucket, key), ": no ETag in the answer"));
  }
  return std::move(response.etag);
}

absl::StatusOr<std::string> S3Client::PutConditional(const std::string& bucket,
                                                     const std::string& key, std::string body,
                                                     const std::string& if_match) {
  // Ceph's gateway compares If-Match with the ETag unquoted (and refuses the quoted form), AWS
  // documents the quoted one: the bare form first, the quoted one when it is refused. Either
  // way the write happens only over that ETag.
  std::string bare = if_match;
  if (bare.size() >= 2 && bare.front() == '"' && bare.back() == '"')
    bare = bare.substr(1, bare.size() - 2);
  std::vector<std::string> conditions;
  if (if_match.empty()) {
    conditions.push_back("If-None-Match: *");
  } else {
    conditions.push_back(absl::StrCat("If-Match: ", bare));
    conditions.push_back(absl::StrCat("If-Match: \"", bare, "\""));
  }
  absl::Status refused;
  for (const std::string& condition : conditions) {
    HttpRequest r = Request(
        "PUT", bucket, key, "",
        absl::StrCat("PUT ", Name(bucket, key),
                     if_match.empty() ? " if absent" : absl::StrCat(" if ETag ", if_match)));
    r.headers.push_back(condition);
    r.body = body;
    absl::StatusOr<HttpResponse> response = http_->Execute(std::move(r));
    if (response.ok()) return std::move(response->etag);
    // 412 Precondition Failed; S3 answers a concurrent conditional write with 409.
    const absl::string_view m = response.status().message();
    if (m.find("HTTP 412") == absl::string_view::npos &&
        m.find("HTTP 409") == absl::string_view::npos) {
      return response.status();
    }
    refused = absl::FailedPreconditionError(m);
  }
  return refused;
}

absl::Status S3Client::Delete(const std::string& bucket, const std::string& key) {
  return http_
      ->Execute(Request("DELETE", bucket, key, "", absl::StrCat("DELETE ", Name(bucket, key))))
      .status();
}

absl::Status S3Client::CreateBucket(const std::string& bucket) {
  absl::StatusOr<HttpResponse> r =
      http_->Execute(Request("PUT", bucket, "", "", absl::StrCat("create bucket ", bucket)));
  if (!r.ok() && r.status().message().find("BucketAlreadyOwnedByYou") != absl::string_view::npos)
    return absl::OkStatus();
  return r.status();
}

absl::StatusOr<std::string> S3Client::CreateMultipartUpload(const std::string& bucket,
                                                            const std::string& key) {
  DDPIO_ASSIGN_OR_RETURN(
      HttpResponse r, http_->Execute(Request("POST", bucket, key, "uploads=",
                                             absl::StrCat("start upload of ", Name(bucket, key)))));
  std::string id = XmlText(r.body, "UploadId");
  if (id.empty()) {
    return absl::DataLossError(
        absl::StrCat("start upload of ", Name(bucket, key), ": no UploadId in the answer"));
  }
  return id;
}

absl::StatusOr<std::string> S3Client::UploadPart(const std::string& bucket, const std::string& key,
                                                 const std::string& upload_id, int part,
                                                 std::string body) {
  HttpRequest r = Request("PUT", bucket, key,
                          absl::StrCat("partNumber=", part, "&uploadId=", EncodeKey(upload_id)),
                          absl::StrCat("upload part ", part, " of ", Name(bucket, key)));
  r.body = std::move(body);
  DDPIO_ASSIGN_OR_RETURN(HttpResponse response, http_->Execute(std::move(r)));
  if (response.etag.empty()) {
    return absl::DataLossError(
        absl::StrCat("upload part ", part, " of ", Name(bucket, key), ": no ETag in the answer"));
  }
  return response.etag;
}

absl::StatusOr<std::string> S3Client::CompleteMultipartUpload(
    const std::string& bucket, const std::string& key, const std::string& upload_id,
    const std::vector<std::pair<int, std::string>>& parts) {
  std::string xml = "<CompleteMultipartUpload>";
  for (const auto& [number, etag] : parts) {
    absl::StrAppend(&xml, "<Part><PartNumber>", number, "</PartNumber><ETag>", XmlEscape(etag),
                    "</ETag></Part>");
  }
  xml += "</CompleteMultipartUpload>";
  HttpRequest r = Request("POST", bucket, key, absl::StrCat("uploadId=", EncodeKey(upload_id)),
                          absl::StrCat("complete upload of ", Name(bucket, key)));
  r.body = std::move(xml);
  DDPIO_ASSIGN_OR_RETURN(HttpResponse response, http_->Execute(std::move(r)));
  // S3 may answer 200 and put an error in the body.
  if (const std::string code = XmlText(response.body, "Code"); !code.empty()) {
    return absl::UnavailableError(absl::StrCat("complete upload of ", Name(bucket, key), ": ", code,
                                               ": ", XmlText(response.body, "Message")));
  }
  std::string etag = XmlText(response.body, "ETag");  // unescaped: the quoted form HEAD reports
  if (etag.empty()) {
    // Ceph's gateway answers <ETag></ETag>: ask the object itself.
    DDPIO_ASSIGN_OR_RETURN(ObjectInfo info, Head(bucket, key));
    etag = std::move(info.etag);
  }
  return etag;
}

absl::StatusOr<std::vector<ObjectStore::Part>> S3Client::ListParts(const std::string& bucket,
                                                                   const std::string& key,
                                                                   const std::string& upload_id) {
  DDPIO_ASSIGN_OR_RETURN(
      HttpResponse r,
      http_->Execute(Request("GET", bucket, key, absl::StrCat("uploadId=", EncodeKey(upload_id)),
                             absl::StrCat("list the parts of ", Name(bucket, key)))));
  std::vector<Part> parts;
  for (const std::string& p : XmlTexts(r.body, "Part")) {
    Part part;
    uint64_t size = 0;
    if (!absl::SimpleAtoi(XmlText(p, "PartNumber"), &part.number) ||
        !absl::SimpleAtoi(XmlText(p, "Size"), &size)) {
      return absl::DataLossError(
          absl::StrCat("list the parts of ", Name(bucket, key), ": a malformed part entry"));
    }
    part.size = size;
    part.etag = XmlText(p, "ETag");
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace ddpio::storage::s3
