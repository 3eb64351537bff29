// A scripted HTTP/1.1 server on loopback for the object-store client's unit tests: each request
// gets the next scripted answer (status, body, or "hang": accept and never answer, or "close":
// drop the connection without answering), and an answer may lie or dawdle: announce a
// Content-Length other than what it sends, or none; stream megabytes it never holds; trickle at a
// few bytes a second; add header lines. Requests are recorded (method, target, headers). One
// thread (a trickling answer holds it until done or dropped by the client); keep-alive honoured
// for plain answers, the connection closed after the others. The real tests run against Ceph's
// gateway (label s3); this one makes the failures that a real server gives only by accident happen
// on purpose.
#ifndef DDPIO_TESTS_SUPPORT_FAKE_HTTP_SERVER_H_
#define DDPIO_TESTS_SUPPORT_FAKE_HTTP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ddpio::testing {

struct FakeAnswer {
  int status = 200;
  std::string body;
  bool hang = false;   // read the request, never answer
  bool close = false;  // read the request, close the connection
  // Any of the following closes the connection once the answer is sent (or the client leaves).
  int64_t content_length = -1;     // the Content-Length announced; -1: what is sent
  bool no_content_length = false;  // announce none: the body ends when the connection closes
  uint64_t filler_bytes = 0;       // after `body`, this many bytes of 'z', made as they are sent
  uint64_t bytes_per_s = 0;        // > 0: body and filler trickle out at this rate
  std::string headers;             // extra header lines, each ending "\r\n"
};

struct FakeRequest {
  std::string method, target, headers;
};

class FakeHttpServer {
 public:
  // Answers in order; past the end, the last answer repeats.
  explicit FakeHttpServer(std::vector<FakeAnswer> answers);
  ~FakeHttpServer();
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<FakeRequest> requests() const;

 private:
  void Serve();
  bool Handle(int fd);
  // Sends all of `data` unless the client leaves or the server stops; false then.
  bool Send(int fd, const char* data, size_t size);
  // The body of `a` (body, then filler), at its rate; false when the client left.
  bool SendBody(int fd, const FakeAnswer& a);

  std::vector<FakeAnswer> answers_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<FakeRequest> requests_;  // guarded by mu_
  std::vector<int> hung_;              // thread's own: connections kept open unanswered
};

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_FAKE_HTTP_SERVER_H_
