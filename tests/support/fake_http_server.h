// A scripted HTTP/1.1 server on loopback for the object-store client's unit tests: each request
// gets the next scripted answer (status, body, or "hang": accept and never answer, or "close":
// drop the connection without answering). Requests are recorded (method, target, headers). One
// thread; keep-alive honoured. The real tests run against Ceph's gateway (label s3); this one
// makes the failures that a real server gives only by accident happen on purpose.
#ifndef DDPIO_TESTS_SUPPORT_FAKE_HTTP_SERVER_H_
#define DDPIO_TESTS_SUPPORT_FAKE_HTTP_SERVER_H_

#include <atomic>
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
