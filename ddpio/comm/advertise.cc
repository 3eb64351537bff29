#include "ddpio/comm/advertise.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ddpio/comm/internal/socket.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {
namespace {

using IfAddrs = std::unique_ptr<ifaddrs, void (*)(ifaddrs*)>;

IfAddrs ListInterfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) list = nullptr;
  return IfAddrs(list, [](ifaddrs* p) {
    if (p != nullptr) ::freeifaddrs(p);
  });
}

// Numeric form of an AF_INET / AF_INET6 socket address, "" for anything else.
std::string Numeric(const sockaddr* sa) {
  if (sa == nullptr) return "";
  char host[NI_MAXHOST];
  const socklen_t len = sa->sa_family == AF_INET    ? sizeof(sockaddr_in)
                        : sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                    : 0;
  if (len == 0 || ::getnameinfo(sa, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0)
    return "";
  return host;
}

// The numeric address `text` stands for (a name is resolved); "" when it is none.
std::string Canonical(const std::string& text) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  if (::getaddrinfo(text.c_str(), nullptr, &hints, &res) != 0) return "";
  std::string out = Numeric(res->ai_addr);
  ::freeaddrinfo(res);
  return out;
}

// The source address the kernel picks to reach `host` (a UDP "connect" sends nothing).
absl::StatusOr<std::string> RouteSource(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), "9", &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve MASTER_ADDR ", host, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owned(res, ::freeaddrinfo);
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    internal::Fd fd(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) continue;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) continue;
    std::string address = Numeric(reinterpret_cast<sockaddr*>(&local));
    if (!address.empty()) return address;
  }
  return absl::UnavailableError(absl::StrCat(
      "this host has no route to MASTER_ADDR ", host, " (", last_error,
      "); set GLOO_SOCKET_IFNAME or DDPIO_ADVERTISE_ADDR to the interface the ranks share"));
}

}  // namespace

absl::StatusOr<std::string> InterfaceAddress(const std::string& name) {
  IfAddrs list = ListInterfaces();
  bool exists = false;
  for (ifaddrs* i = list.get(); i != nullptr; i = i->ifa_next) {
    if (i->ifa_name == nullptr || name != i->ifa_name) continue;
    exists = true;
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET) return Numeric(i->ifa_addr);
  }
  if (!exists && ::if_nametoindex(name.c_str()) == 0) {
    return absl::NotFoundError(
        absl::StrCat("GLOO_SOCKET_IFNAME: no network interface named '", name, "' on this host"));
  }
  return absl::NotFoundError(
      absl::StrCat("GLOO_SOCKET_IFNAME: interface '", name, "' has no IPv4 address"));
}

std::string InterfaceOf(const std::string& address) {
  const std::string want = Canonical(address);
  if (want.empty()) return "";
  IfAddrs list = ListInterfaces();
  for (ifaddrs* i = list.get(); i != nullptr; i = i->ifa_next) {
    if (i->ifa_name != nullptr && Numeric(i->ifa_addr) == want) return i->ifa_name;
  }
  return "";
}

absl::StatusOr<AdvertiseAddress> ChooseAdvertiseAddress(const std::string& explicit_address,
                                                        const Environment& env,
                                                        const std::string& master_addr) {
  AdvertiseAddress out;
  std::string given = explicit_address;
  std::string source = "the advertise address set explicitly";
  // Errors in an explicit address name the setting, for the front end to add its flag.
  auto refuse = [&](const std::string& message) {
    absl::Status s = absl::InvalidArgumentError(message);
    return explicit_address.empty() ? s : WithSetting(s, "advertise_addr");
  };
  if (given.empty()) {
    given = EnvValue(env, "DDPIO_ADVERTISE_ADDR");
    source = "DDPIO_ADVERTISE_ADDR";
  }
  if (!given.empty()) {
    out.address = Canonical(given);
    if (out.address.empty()) {
      return refuse(absl::StrCat(source, " '", given, "' is not a numeric IP address"));
    }
    out.interface = InterfaceOf(out.address);
    if (out.interface.empty()) {
      return refuse(absl::StrCat(source, " ", out.address,
                                 " is not an address of this host (see `ip -brief address`)"));
    }
    out.why = absl::StrCat(source, " on ", out.interface);
    return out;
  }
  const std::string ifnames = EnvValue(env, "GLOO_SOCKET_IFNAME");
  if (!ifnames.empty()) {
    std::vector<std::string> names = absl::StrSplit(ifnames, ',', absl::SkipEmpty());
    if (names.empty()) return absl::InvalidArgumentError("GLOO_SOCKET_IFNAME is empty");
    auto address = InterfaceAddress(names[0]);
    if (!address.ok()) return address.status();
    out.address = *address;
    out.interface = names[0];
    out.why = absl::StrCat("GLOO_SOCKET_IFNAME=", ifnames);
    if (names.size() > 1) {
      absl::StrAppend(&out.why, " (ddpio uses the first interface only)");
    }
    return out;
  }
  auto source_address = RouteSource(master_addr);
  if (!source_address.ok()) return source_address.status();
  out.address = *source_address;
  out.interface = InterfaceOf(out.address);
  out.why = absl::StrCat("route to MASTER_ADDR ", master_addr, " via ",
                         out.interface.empty() ? "?" : out.interface);
  return out;
}

}  // namespace ddpio::comm
