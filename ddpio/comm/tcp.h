// Plain TCP for tools: a free port to serve a store on, and the bandwidth two ranks get from a
// bare TCP connection (the ceiling `ddpio bench comm` compares collectives with).
#ifndef DDPIO_COMM_TCP_H_
#define DDPIO_COMM_TCP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/comm/rendezvous.h"

namespace ddpio::comm {

// A TCP port free on `address` right now (another process may take it before it is used).
absl::StatusOr<int> FreeTcpPort(const std::string& address);

// Ranks 0 and 1 of `job` (every other rank returns 0 at once): rank 1 listens on its advertised
// address, rank 0 connects — proving itself with a nonce read from the job's authenticated
// store, so a stranger who connects first is turned away — and sends `bytes` then waits for a
// 1-byte ack, `repeat` times. Returns the median GB/s on rank 0 (0 on the others).
absl::StatusOr<double> TcpCeilingGbPerS(Job& job, uint64_t bytes, int repeat);

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_TCP_H_
