// The Gloo backend of Communicator: TCP between processes, CPU buffers.
//
// Create() rendezvouses through a Store (already prefixed for this job and group: one prefix per
// context, as Gloo requires) and connects a full mesh. Gloo reports failures by throwing; here
// gloo::IoException becomes Unavailable ("Connection reset/closed by peer") or DeadlineExceeded
// ("Timed out"), and the context is marked broken.
#ifndef DDPIO_COMM_GLOO_COMMUNICATOR_H_
#define DDPIO_COMM_GLOO_COMMUNICATOR_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/comm/communicator.h"
#include "ddpio/comm/store.h"

namespace ddpio::comm {

struct GlooOptions {
  // Address this rank's TCP device binds to (and advertises): an address of the interface the
  // ranks reach each other on. Default: loopback, right for one node.
  std::string hostname = "127.0.0.1";
  // Timeout of the mesh connection and the default for operations.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

class GlooCommunicator : public Communicator {
 public:
  // DeadlineExceeded when the other ranks do not all arrive within options.timeout.
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(std::shared_ptr<Store> store,
                                                                  int rank, int size,
                                                                  const GlooOptions& options = {});
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "gloo"; }
  absl::Status Broadcast(void* data, size_t bytes, int root,
                         std::chrono::milliseconds timeout) override;
  absl::Status Scatter(const std::vector<const void*>& parts, void* out, size_t bytes, int root,
                       std::chrono::milliseconds timeout) override;
  absl::Status AllReduce(float* data, size_t count, ReduceOp op,
                         std::chrono::milliseconds timeout) override;
  absl::Status AllGather(const void* in, void* out, size_t bytes,
                         std::chrono::milliseconds timeout) override;
  absl::Status Send(const void* data, size_t bytes, int peer, uint64_t tag,
                    std::chrono::milliseconds timeout) override;
  absl::Status Recv(void* data, size_t bytes, int peer, uint64_t tag,
                    std::chrono::milliseconds timeout) override;
  absl::Status Barrier(std::chrono::milliseconds timeout) override;
  // Every chunk posted at once on one unbound buffer; RecvForward sends chunk k on as soon as it
  // has arrived while the later ones are still arriving.
  absl::Status SendChunked(const void* data, size_t bytes, size_t chunk, int peer, uint64_t tag,
                           std::chrono::milliseconds timeout) override;
  absl::Status RecvChunked(void* data, size_t bytes, size_t chunk, int peer, uint64_t tag,
                           std::chrono::milliseconds timeout) override;
  absl::Status RecvForward(void* data, size_t bytes, size_t chunk, int from, int to, uint64_t tag,
                           std::chrono::milliseconds timeout) override;
  void Abort() override;

 private:
  struct State;
  GlooCommunicator(int rank, int size, std::unique_ptr<State> state);
  template <typename Fn>
  absl::Status Run(const char* what, Fn fn);

  const int rank_;
  const int size_;
  std::unique_ptr<State> state_;
  absl::Status broken_;
};

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_GLOO_COMMUNICATOR_H_
