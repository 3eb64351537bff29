// Which address a rank advertises to its peers: the address their connections (Gloo's mesh,
// ddpio's own benchmarks) must reach it on. On one host that is loopback; across hosts it must
// be an address of the interface the other hosts reach — advertising 127.0.0.1 there makes every
// peer connect to itself.
//
// Precedence, the way PyTorch users expect it:
//   1. an explicit address: `--advertise-addr`, else DDPIO_ADVERTISE_ADDR (must be an address of
//      this host);
//   2. GLOO_SOCKET_IFNAME: the interface's IPv4 address (PyTorch opens one Gloo device per name
//      of a comma-separated list; ddpio uses the first and says so);
//   3. the source address of this host's route to MASTER_ADDR (what the kernel would use to
//      reach the store; loopback when the master is on loopback).
// NCCL reads its own NCCL_SOCKET_IFNAME; nothing here touches it.
//
// Called by Job::Join on every rank; pure apart from reading the host's interfaces and routes.
// Thread-safe.
#ifndef DDPIO_COMM_ADVERTISE_H_
#define DDPIO_COMM_ADVERTISE_H_

#include <string>

#include "absl/status/statusor.h"
#include "ddpio/comm/rank_info.h"

namespace ddpio::comm {

struct AdvertiseAddress {
  std::string address;    // numeric, e.g. "10.77.0.3"
  std::string interface;  // e.g. "eth0" ("" when no interface holds the address)
  std::string why;        // e.g. "route to MASTER_ADDR 10.77.0.1 via eth0"
};

// InvalidArgument for an explicit address that is malformed or not an address of this host;
// NotFound for a GLOO_SOCKET_IFNAME interface that does not exist or has no IPv4 address;
// Unavailable when MASTER_ADDR cannot be resolved or this host has no route to it.
absl::StatusOr<AdvertiseAddress> ChooseAdvertiseAddress(const std::string& explicit_address,
                                                        const Environment& env,
                                                        const std::string& master_addr);

// The IPv4 address of interface `name` (NotFound when it has none).
absl::StatusOr<std::string> InterfaceAddress(const std::string& name);
// The interface holding `address` on this host, "" when none does.
std::string InterfaceOf(const std::string& address);

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_ADVERTISE_H_
