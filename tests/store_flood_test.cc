// A hostile neighbour on the store port while a real job runs: `ddpio launch` starts 2 ranks
// (rank 0 serves the rendezvous store on a fixed port), and this test floods that port for as
// long as the job lives — thousands of connect/close cycles, connections that announce a 64 MiB
// message and send nothing more, connections that never speak. The job must finish with its
// normal result, and rank 0's memory must stay bounded (before the event-loop server, each
// connection held a thread until shutdown and each announced message was allocated in full:
// +1 GB after 5,000 cycles, 2.7 GB for 40 announced messages).
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/multiprocess.h"
#include "tests/support/rank_lines.h"
#include "tests/support/subprocess.h"

namespace ddpio {
namespace {

int ConnectTo(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The process listening on `port` (0 when none yet): its socket's inode from /proc/net/tcp,
// then the process holding that inode.
pid_t ListenerOf(int port) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line, inode;
  char want[16];
  std::snprintf(want, sizeof(want), ":%04X", port);
  while (std::getline(tcp, line)) {
    std::istringstream f(line);
    std::string sl, local, remote, state, queues, tr, retr, uid, timeout;
    f >> sl >> local >> remote >> state >> queues >> tr >> retr >> uid >> timeout >> inode;
    if (state == "0A" && local.size() >= 5 && local.substr(local.size() - 5) == want) break;
    inode.clear();
  }
  if (inode.empty()) return 0;
  const std::string target = "socket:[" + inode + "]";
  DIR* proc = ::opendir("/proc");
  pid_t found = 0;
  while (dirent* e = proc != nullptr ? ::readdir(proc) : nullptr) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    const std::string fds = "/proc/" + std::string(e->d_name) + "/fd";
    DIR* d = ::opendir(fds.c_str());
    while (dirent* f = d != nullptr ? ::readdir(d) : nullptr) {
      char link[128];
      const ssize_t n = ::readlink((fds + "/" + f->d_name).c_str(), link, sizeof(link) - 1);
      if (n > 0 && std::string(link, static_cast<size_t>(n)) == target) found = pid;
    }
    if (d != nullptr) ::closedir(d);
    if (found != 0) break;
  }
  if (proc != nullptr) ::closedir(proc);
  return found;
}

int64_t RssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

struct JobRun {
  testing::RunResult result;
  int64_t peak_kib = 0;  // rank 0's largest RSS seen while the job ran
  uint64_t cycles = 0;   // connect/close cycles of the flood
};

// Runs a 2-rank `bench comm` under `ddpio launch`, flooding its store port meanwhile if asked,
// and samples rank 0's memory all along.
JobRun RunJob(bool flood) {
  JobRun run;
  const int port = testing::FreeLoopbackPort();
  std::atomic<bool> done{false};
  std::thread runner([&] {
    testing::RunOptions o;
    o.timeout = std::chrono::seconds(240);
    o.env["DDPIO_STORE_TOKEN"] = "flood-test-token";
    run.result =
        testing::RunDdpio({"launch", "--nproc-per-node", "2", "--master-port", std::to_string(port),
                           "--", testing::DdpioBin(), "bench", "comm", "--size", "2097152",
                           "--repeat", "1000", "--group-size", "1", "--json"},
                          o);
    done = true;
  });
  pid_t rank0 = 0;
  while (!done && (rank0 = ListenerOf(port)) == 0) std::this_thread::yield();
  std::atomic<uint64_t> cycles{0};
  std::atomic<int64_t> peak{0};
  std::vector<std::thread> threads;
  if (rank0 != 0) {
    threads.emplace_back([&] {  // rank 0's memory, sampled from the moment its store is up
      while (!done) {
        peak = std::max<int64_t>(peak, RssKiB(rank0));
        std::this_thread::sleep_for(
            std::chrono::milliseconds(10));  // sampling, not synchronisation
      }
    });
  }
  std::vector<int> held;  // announced-64-MiB and silent connections, kept open
  if (flood && rank0 != 0) {
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        while (!done) {
          const int fd = ConnectTo(port);
          if (fd >= 0) ::close(fd);
          ++cycles;
        }
      });
    }
    for (int i = 0; i < 300 && !done; ++i) {
      const int fd = ConnectTo(port);
      if (fd < 0) continue;
      if (i % 2 == 0) {
        const uint8_t announce[4] = {0x00, 0x00, 0x00, 0x04};  // 64 MiB, then nothing
        (void)!::write(fd, announce, sizeof(announce));
      }
      held.push_back(fd);
    }
  }
  runner.join();
  for (auto& t : threads) t.join();
  for (int fd : held) ::close(fd);
  run.cycles = cycles;
  run.peak_kib = peak;
  return run;
}

TEST(StoreFlood, JobFinishesAndRankZerosMemoryStaysBounded) {
  const JobRun quiet = RunJob(false);
  ASSERT_EQ(quiet.result.exit_code, 0) << quiet.result.err;
  const JobRun flooded = RunJob(true);
  ASSERT_EQ(flooded.result.exit_code, 0) << flooded.result.err;
  auto lines = testing::RankLines(flooded.result.out);
  ASSERT_EQ(lines.count(0), 1u) << flooded.result.out;
  EXPECT_EQ(lines[0]["world"], 2);
  EXPECT_GT(flooded.cycles, 500u) << "the flood did not run long enough to mean anything";
  ASSERT_GT(quiet.peak_kib, 0) << "rank 0's memory was never sampled";
  ASSERT_GT(flooded.peak_kib, 0) << "rank 0's memory was never sampled";
  // Bound: the server holds the 300 silent connections (a few hundred bytes each, at most a 4 KiB
  // hello buffered) with no thread per connection (< 2 MiB); the job's own peak varies by ~20 MB
  // from run to run, so 64 MiB over the unflooded run. Before: +1 GB after 5,000 cycles, and 150
  // announced 64 MiB messages would have asked for 9.6 GB.
  EXPECT_LT(flooded.peak_kib - quiet.peak_kib, 64 * 1024)
      << "rank 0 peaked at " << flooded.peak_kib << " KiB flooded, " << quiet.peak_kib
      << " KiB not";
  std::printf(
      "flood: %llu connect/close cycles + 300 held connections; rank 0 peak RSS %lld KiB "
      "(unflooded %lld KiB)\n",
      static_cast<unsigned long long>(flooded.cycles), static_cast<long long>(flooded.peak_kib),
      static_cast<long long>(quiet.peak_kib));
}

// Held-open connections to `ports` (client side, as /proc/net/tcp lists them: established, the
// remote port one of `ports`).
int HeldConnections(const std::set<int>& ports) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  int n = 0;
  while (std::getline(tcp, line)) {
    std::istringstream f(line);
    std::string sl, local, remote, state;
    f >> sl >> local >> remote >> state;
    if (state != "01" || remote.size() < 5) continue;
    if (ports.count(static_cast<int>(std::stoul(remote.substr(remote.size() - 4), nullptr, 16))))
      ++n;
  }
  return n;
}

// A flooding process: holds up to `per_port` connections to each port, opening a new one for each
// the server closes (or refuses: between jobs nobody listens) — at most 8 per port every 10 ms,
// so that the flood does not simply take the CPU the jobs need — one in three having sent half a
// length prefix, the others nothing. Runs until killed (or its parent dies).
[[noreturn]] void FloodForever(const std::vector<int>& ports, size_t per_port) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::vector<std::vector<int>> held(ports.size());
  std::vector<pollfd> fds;
  for (uint64_t made = 0;;) {
    for (size_t p = 0; p < ports.size(); ++p) {
      for (int renewed = 0; held[p].size() < per_port && renewed < 8; ++renewed) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(ports[p]));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0 || (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 &&
                       errno != EINPROGRESS)) {
          if (fd >= 0) ::close(fd);
          break;
        }
        if (++made % 3 == 0) (void)!::send(fd, "\x10\x00", 2, MSG_NOSIGNAL);
        held[p].push_back(fd);
      }
    }
    fds.clear();
    for (const auto& h : held) {
      for (int fd : h) fds.push_back({fd, POLLIN | POLLRDHUP, 0});
    }
    ::poll(fds.data(), fds.size(),
           10);  // paces the flood; closed ones are renewed on the next pass
    size_t k = 0;
    for (auto& h : held) {
      std::vector<int> kept;
      for (int fd : h) {
        if (fds[k++].revents != 0) {
          ::close(fd);
        } else {
          kept.push_back(fd);
        }
      }
      h = std::move(kept);
    }
  }
}

// The hostile tester's report: a loop holding TCP connections open on the master port while jobs
// start made 6 of 43 starts fail — the store kept 64 places for connections before their hello,
// evicted the oldest for each newcomer (a rank among them), and ranks did not retry. Here two
// flooding processes hold 200 connections each on each of four master ports, renewing every one
// the store drops, while four lanes start five 2-rank jobs each on those ports (20 starts).
// Rank 0 runs with a 1024-descriptor limit, as on many hosts, so its store has room for 256
// connections before their hello and the flood (400 per port) overflows it all the time. Every
// job must start and finish with its normal result.
TEST(StoreFlood, TwentyJobsStartWhileTheirMasterPortsAreFlooded) {
  constexpr int kLanes = 4, kJobsPerLane = 5, kFloodProcesses = 2;
  std::vector<int> ports;
  for (int i = 0; i < kLanes; ++i) ports.push_back(testing::FreeLoopbackPort());
  std::vector<pid_t> flood;
  for (int i = 0; i < kFloodProcesses; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) FloodForever(ports, 200);
    flood.push_back(pid);
  }
  std::atomic<int> running{kLanes}, most_held{0};
  std::mutex mu;
  std::vector<std::string> failures;  // guarded by mu
  std::vector<std::thread> lanes;
  for (int lane = 0; lane < kLanes; ++lane) {
    lanes.emplace_back([&, lane] {
      for (int job = 0; job < kJobsPerLane; ++job) {
        testing::RunOptions o;
        o.timeout = std::chrono::seconds(120);
        o.env["DDPIO_STORE_TOKEN"] = "flood-test-token";
        const testing::RunResult r =
            testing::Run({"/bin/sh", "-c",
                          "ulimit -n 1024 && exec \"$0\" launch --nproc-per-node 2 --master-port " +
                              std::to_string(ports[lane]) +
                              " -- \"$0\" bench comm --size 4096 --repeat 1 --json",
                          testing::DdpioBin()},
                         o);
        auto lines = testing::RankLines(r.out);
        if (r.exit_code != 0 || lines.count(0) == 0 || lines[0]["world"] != 2) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back("lane " + std::to_string(lane) + " job " + std::to_string(job) +
                             ": exit " + std::to_string(r.exit_code) + "\n" +
                             r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
        }
      }
      --running;
    });
  }
  const std::set<int> port_set(ports.begin(), ports.end());
  while (running > 0) {  // how many connections the flood really holds, sampled while jobs run
    most_held = std::max(most_held.load(), HeldConnections(port_set));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // sampling, not synchronisation
  }
  for (auto& t : lanes) t.join();
  for (pid_t pid : flood) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  EXPECT_EQ(failures.size(), 0u) << failures.size() << " of " << kLanes * kJobsPerLane
                                 << " job starts failed; first:\n"
                                 << (failures.empty() ? "" : failures[0]);
  // More than one store's room for connections before their hello (256 under rank 0's limit of
  // 1024 descriptors) held at once: the flood pressed on the stores, it did not idle. (How many
  // above that depends on how fast the stores drop them: 280-500 on this project's machines.)
  EXPECT_GT(most_held.load(), 256) << "the flood never held many connections: it tested nothing";
  std::printf(
      "flood: %d jobs started, %zu failed; the flood held up to %d connections on %d master "
      "ports\n",
      kLanes * kJobsPerLane, failures.size(), most_held.load(), kLanes);
}

}  // namespace
}  // namespace ddpio
