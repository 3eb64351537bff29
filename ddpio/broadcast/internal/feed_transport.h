// FeedTransport: how a group's messages travel from its leader to its members. Two
// implementations: HostRelay (host_relay.h: messages over the communicator's host path, replicate
// through a chain or a star) and DeviceLink (device_link.h: a group communicator in device memory,
// NCCL, decoded batches device buffer to device buffer). GroupFeeder picks one from the group
// communicator; its leader's reader (feed_leader.h) sends through it and a peer's receiving
// thread is its Receive.
//
// Threads: the leader's Send* calls and a peer's Receive run on the feeder's one thread; Setup,
// Peers, Upstream and device_memory are called by the thread that owns the feeder, before that
// thread starts or after it is joined.
#ifndef DDPIO_BROADCAST_INTERNAL_FEED_TRANSPORT_H_
#define DDPIO_BROADCAST_INTERNAL_FEED_TRANSPORT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "ddpio/broadcast/feed_message.h"

namespace ddpio::broadcast::internal {

class FeedTransport {
 public:
  virtual ~FeedTransport() = default;

  // Once, at creation, after the group agreed (and `sample_bytes` of one output sample is
  // known): InvalidArgument for a payload the transport cannot carry; allocation errors.
  virtual absl::Status Setup(size_t sample_bytes) = 0;
  // Whether batches arrive in device memory (FeedItem::device) rather than host buffers.
  virtual bool device_memory() const = 0;
  // The group-local ranks the leader sends each message to itself (not 0: none with readers kAll).
  virtual std::vector<int> Peers() const = 0;
  // The group-local rank a peer receives from (0: the leader).
  virtual int Upstream() const = 0;

  // Leader: this step's message of one stream, to the members in `to` (group-local ranks; 0 is
  // the leader's own window). `data` holds h.payload_bytes in host memory; `owned`, when given,
  // is the vector holding them, which the transport may take. Messages may be staged until
  // EndStep.
  virtual absl::Status Send(const std::vector<int>& to, FeedHeader h, const uint8_t* data,
                            std::vector<uint8_t>* owned) = 0;
  // Leader: after the step's messages (`status`: whether producing them succeeded): sends what is
  // staged, or drops it when `status` is an error (returned as it is).
  virtual absl::Status EndStep(uint64_t step, absl::Status status) = 0;
  // Leader: the end of the run, or its error (`data`: h.payload_bytes of text), to every peer.
  virtual absl::Status SendLast(const FeedHeader& h, const uint8_t* data) = 0;
  // Leader: whether a send failed since the run began (the group cannot carry an error message).
  bool broken() const { return broken_; }
  void ResetBroken() { broken_ = false; }

  // Peer: receives the run's messages into the window until its end or an error (set on the
  // window; a failure to receive also aborts the group communicator, so the rest of the group
  // learns at once).
  virtual void Receive() = 0;

 protected:
  bool broken_ = false;  // the leader's thread only
};

}  // namespace ddpio::broadcast::internal

#endif  // DDPIO_BROADCAST_INTERNAL_FEED_TRANSPORT_H_
