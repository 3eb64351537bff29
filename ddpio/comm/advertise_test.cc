#include "ddpio/comm/advertise.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <utility>
#include <vector>

#include "ddpio/common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::comm {
namespace {

// (interface, IPv4 address) of every interface of this host but loopback.
std::vector<std::pair<std::string, std::string>> NonLoopbackIpv4() {
  std::vector<std::pair<std::string, std::string>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char host[NI_MAXHOST];
    if (getnameinfo(i->ifa_addr, sizeof(sockaddr_in), host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) != 0)
      continue;
    if (std::string(host).rfind("127.", 0) == 0) continue;
    out.emplace_back(i->ifa_name, host);
  }
  freeifaddrs(list);
  return out;
}

TEST(Advertise, LoopbackMasterAdvertisesLoopback) {
  ASSERT_OK_AND_ASSIGN(AdvertiseAddress a, ChooseAdvertiseAddress("", {}, "127.0.0.1"));
  EXPECT_EQ(a.address, "127.0.0.1");
  EXPECT_EQ(a.interface, "lo");
  EXPECT_NE(a.why.find("route to MASTER_ADDR 127.0.0.1 via lo"), std::string::npos) << a.why;
  ASSERT_OK_AND_ASSIGN(AdvertiseAddress named, ChooseAdvertiseAddress("", {}, "localhost"));
  EXPECT_EQ(named.interface, "lo");
}

TEST(Advertise, RouteToAnotherInterfacesAddressUsesThatInterface) {
  // A master on a non-loopback address of this host is reached from that address: the rank
  // must advertise it, not loopback (which its peers on other hosts could not reach).
  const auto interfaces = NonLoopbackIpv4();
  if (interfaces.empty())
    GTEST_SKIP() << "this host has no non-loopback IPv4 interface to route to";
  for (const auto& [name, address] : interfaces) {
    ASSERT_OK_AND_ASSIGN(AdvertiseAddress a, ChooseAdvertiseAddress("", {}, address));
    EXPECT_EQ(a.address, address);
    EXPECT_EQ(a.interface, name);
  }
}

TEST(Advertise, GlooSocketIfnameWinsOverTheRoute) {
  ASSERT_OK_AND_ASSIGN(AdvertiseAddress a,
                       ChooseAdvertiseAddress("", {{"GLOO_SOCKET_IFNAME", "lo"}}, "10.255.0.1"));
  EXPECT_EQ(a.address, "127.0.0.1");
  EXPECT_EQ(a.interface, "lo");
  EXPECT_EQ(a.why, "GLOO_SOCKET_IFNAME=lo");
  ASSERT_OK_AND_ASSIGN(AdvertiseAddress two,
                       ChooseAdvertiseAddress("", {{"GLOO_SOCKET_IFNAME", "lo,eth9"}}, "x"));
  EXPECT_EQ(two.address, "127.0.0.1");
  EXPECT_NE(two.why.find("first interface only"), std::string::npos);
  auto missing = ChooseAdvertiseAddress("", {{"GLOO_SOCKET_IFNAME", "nosuch0"}}, "127.0.0.1");
  EXPECT_CODE(missing, kNotFound);
  EXPECT_NE(missing.status().message().find("nosuch0"), std::string::npos);
}

TEST(Advertise, ExplicitAddressWinsAndMustBeThisHosts) {
  ASSERT_OK_AND_ASSIGN(
      AdvertiseAddress a,
      ChooseAdvertiseAddress("127.0.0.1", {{"GLOO_SOCKET_IFNAME", "nosuch0"}}, "10.255.0.1"));
  EXPECT_EQ(a.address, "127.0.0.1");
  EXPECT_EQ(a.why, "the advertise address set explicitly on lo");
  ASSERT_OK_AND_ASSIGN(AdvertiseAddress env,
                       ChooseAdvertiseAddress("", {{"DDPIO_ADVERTISE_ADDR", "127.0.0.1"}}, "x"));
  EXPECT_EQ(env.why, "DDPIO_ADVERTISE_ADDR on lo");
  auto foreign = ChooseAdvertiseAddress("198.51.100.77", {}, "127.0.0.1");  // TEST-NET-2
  EXPECT_CODE(foreign, kInvalidArgument);
  EXPECT_NE(foreign.status().message().find("198.51.100.77 is not an address of this host"),
            std::string::npos);
  EXPECT_EQ(SettingsOf(foreign.status()), (std::vector<std::string>{"advertise_addr"}));
  EXPECT_CODE(ChooseAdvertiseAddress("", {{"DDPIO_ADVERTISE_ADDR", "eth0"}}, "127.0.0.1"),
              kInvalidArgument);
}

TEST(Advertise, UnresolvableMasterIsUnavailableAndSaysWhatToSet) {
  auto r = ChooseAdvertiseAddress("", {}, "no-such-host.invalid");
  EXPECT_CODE(r, kUnavailable);
  EXPECT_NE(r.status().message().find("no-such-host.invalid"), std::string::npos);
}

}  // namespace
}  // namespace ddpio::comm
