// A ddpio Store seen as Gloo's rendezvous store. Gloo calls it while connecting a mesh and
// expects failures as exceptions (gloo::IoException, which the Gloo backend maps to a Status).
// Shared by the Gloo backend and the test-only NCCL stand-in.
#ifndef DDPIO_COMM_INTERNAL_GLOO_STORE_H_
#define DDPIO_COMM_INTERNAL_GLOO_STORE_H_

#include <gloo/common/error.h>
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ddpio/comm/store.h"

namespace ddpio::comm::internal {

class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(std::shared_ptr<comm::Store> store, std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Throw(store_->Set(key, std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = store_->Get(key, timeout_);
    Throw(v.status());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    Throw(store_->Wait(keys, timeout));
  }

 private:
  static void Throw(const absl::Status& s) {
    if (!s.ok()) throw gloo::IoException(std::string(s.message()));
  }
  std::shared_ptr<comm::Store> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ddpio::comm::internal

#endif  // DDPIO_COMM_INTERNAL_GLOO_STORE_H_
