// RetryPolicy: when a request to an object store is tried again, and how long one attempt may
// take — a plain options struct, apart from the HTTP client (http_client.h) that follows it, so
// that the options of the readers above (remote/remote_options.h, store_settings.h, and the
// pipeline's) carry it without the client.
#ifndef DDPIO_STORAGE_S3_RETRY_POLICY_H_
#define DDPIO_STORAGE_S3_RETRY_POLICY_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace ddpio::storage::s3 {

// When a request is tried again, and how long one attempt may take. Two bounds on the retries:
//   give_up_after == 0 (the default): max_attempts attempts at most; a request then takes at most
//     max_attempts × attempt_timeout plus the backoffs (each ≤ max_delay).
//   give_up_after > 0: retryable failures are retried, however many attempts that takes
//     (max_attempts is not consulted), until give_up_after has passed since the first attempt
//     began: no attempt starts later than that, and the one running then ends within its
//     attempt_timeout, so a request takes at most give_up_after + attempt_timeout. This is the
//     setting for "ride out an outage of up to N minutes".
// Failures that cannot pass (4xx other than 408/429, DataLoss) are never retried.
struct RetryPolicy {
  int max_attempts = 8;                                          // in all, the first included
  std::chrono::milliseconds base_delay{50};                      // the first retry waits up to this
  std::chrono::milliseconds max_delay{std::chrono::seconds(5)};  // the cap of the exponential
  // One attempt in all (connecting, sending, the whole answer), plus, for a request whose size is
  // known (a range GET, a PUT), what its bytes take at 16 KiB/s (HttpRequest::transfer_bytes).
  // 0: no limit but the low-speed one.
  std::chrono::milliseconds attempt_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // The low-speed limit: an attempt whose transfer (bytes sent and received, as libcurl averages
  // them over its last few seconds) stays under low_speed_bytes_per_s for low_speed_window ends
  // and is retried. It catches a server that accepts and never answers (no byte for the window) and
  // one that trickles, which the attempt timeout alone lets run each attempt's full length (a store
  // trickling 2 B/s cost 30 s an attempt under the old limit of 1 B/s). 1 KiB/s is far under any
  // working store (a record of 100 KiB would take 100 s at that rate; even a 10 Mbit/s link shared
  // by 32 transfers gives each ~40 KB/s), so it does not end a healthy transfer; 10 s of silence is
  // ~50× the first-byte latency S3 documents for small objects, so a server busy for a moment is
  // waited for. Whole seconds (libcurl's resolution). 0 bytes/s: no low-speed limit (a stalled
  // attempt runs to attempt_timeout). A request whose server may rightly send nothing for longer
  // (AWS's CompleteMultipartUpload of a large object answers with a space now and then) needs a
  // longer window.
  uint64_t low_speed_bytes_per_s = 1024;
  std::chrono::seconds low_speed_window{10};
  // The retry budget in time, counted from the start of a request's first attempt (see above).
  // 0: only max_attempts bounds the retries.
  std::chrono::milliseconds give_up_after{0};
  // Raised by another thread to give up: every request running, waiting for its retry or queued
  // ends within 100 ms with Cancelled ("interrupted"), and later ones at once. For a caller that
  // must answer Ctrl-C while a dataset opens (the Python package). Null (the default): never.
  std::shared_ptr<const std::atomic<bool>> cancel;
};

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_RETRY_POLICY_H_
