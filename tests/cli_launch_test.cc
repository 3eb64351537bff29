// `ddpio launch` with real child processes.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/support/multiprocess.h"
#include "tests/support/rank_lines.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

using testing::RunDdpio;
using testing::RunResult;

// Two launchers, as on two nodes (here both on loopback), started apart with only the token in
// common: they name the same job on their own (the job id is derived, not exchanged) and their
// ranks form one world of 4.
TEST(Launch, TwoNodesNameTheSameJobOnTheirOwn) {
  const std::string port = std::to_string(testing::FreeLoopbackPort());
  testing::RunOptions o;
  o.env["DDPIO_STORE_TOKEN"] = "two-node-secret";
  o.env["DDPIO_JOB_ID"] = "";
  auto node = [&](int n) {
    return RunDdpio({"launch",
                     "--nnodes",
                     "2",
                     "--node-rank",
                     std::to_string(n),
                     "--nproc-per-node",
                     "2",
                     "--master-addr",
                     "127.0.0.1",
                     "--master-port",
                     port,
                     "--",
                     testing::DdpioBin(),
                     "bench",
                     "comm",
                     "--size",
                     "4096",
                     "--repeat",
                     "1",
                     "--json"},
                    o);
  };
  RunResult second;
  std::thread t([&] { second = node(1); });
  RunResult first = node(0);
  t.join();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto lines = testing::RankLines(first.out);
  ASSERT_EQ(lines.count(0), 1u) << first.out;
  EXPECT_EQ(lines[0]["world"], 4);
  const auto job = first.err.find("joined job nodes-");
  ASSERT_NE(job, std::string::npos) << first.err;
  const std::string name = first.err.substr(job, first.err.find(' ', job + 11) - job);
  EXPECT_NE(second.err.find(name), std::string::npos) << name << "\n" << second.err;
}

// Two nodes told different things: node 0 --nproc-per-node 2, node 1 --nproc-per-node 3. Their
// ranks used to meet in the Gloo mesh with different world sizes and fail there ("Gloo enforce
// failure"). The launchers compare what each node was told before any rank starts: both say
// which node has which count, start nothing, and exit 2.
TEST(Launch, NodesToldDifferentProcessCountsFailBeforeAnyRankStarts) {
  const std::string port = std::to_string(testing::FreeLoopbackPort());
  testing::RunOptions o;
  o.env["DDPIO_STORE_TOKEN"] = "mismatch-secret";
  auto node = [&](int n, int nproc) {
    return RunDdpio({"launch", "--nnodes", "2", "--node-rank", std::to_string(n),
                     "--nproc-per-node", std::to_string(nproc), "--master-port", port, "--",
                     testing::DdpioBin(), "bench", "comm", "--size", "4096", "--repeat", "1"},
                    o);
  };
  RunResult second;
  std::thread t([&] { second = node(1, 3); });
  RunResult first = node(0, 2);
  t.join();
  for (const RunResult* r : {&first, &second}) {
    EXPECT_EQ(r->exit_code, 2) << r->err;
    EXPECT_NE(r->err.find("node 0 has --nnodes 2 --nproc-per-node 2"), std::string::npos) << r->err;
    EXPECT_NE(r->err.find("node 1 has --nnodes 2 --nproc-per-node 3"), std::string::npos) << r->err;
    EXPECT_EQ(r->err.find("[rank "), std::string::npos) << "a rank was started:\n" << r->err;
    EXPECT_EQ(r->err.find("ddpio launch: started"), std::string::npos) << r->err;
  }
}

// Two launchers that both claim --node-rank 1 of a 3-node job: the second is refused at once, and
// node 0 (which waits for node 2, started only once the refusal is in) fails the whole job
// instead of starting it with a node missing. Nothing starts.
TEST(Launch, TwoLaunchersClaimingOneNodeRankAreRefused) {
  const std::string port = std::to_string(testing::FreeLoopbackPort());
  testing::RunOptions o;
  o.env["DDPIO_STORE_TOKEN"] = "twice-secret";
  auto node = [&](int n) {
    return RunDdpio(
        {"launch", "--nnodes", "3", "--node-rank", std::to_string(n), "--nproc-per-node", "1",
         "--master-port", port, "--join-timeout", "60", "--", "/bin/echo", "rank started"},
        o);
  };
  RunResult zero, a, b, two;
  std::atomic<int> claimers_done{0};
  std::thread t0([&] { zero = node(0); });
  std::thread ta([&] {
    a = node(1);
    ++claimers_done;
  });
  std::thread tb([&] {
    b = node(1);
    ++claimers_done;
  });
  while (claimers_done == 0) std::this_thread::yield();  // the refused claimer has finished
  two = node(2);
  t0.join();
  ta.join();
  tb.join();
  const int refused = (a.err.find("--node-rank 1 is already taken") != std::string::npos) +
                      (b.err.find("--node-rank 1 is already taken") != std::string::npos);
  EXPECT_EQ(refused, 1) << a.err << "\n----\n" << b.err;
  for (const RunResult* r : {&zero, &a, &b, &two}) {
    EXPECT_EQ(r->exit_code, 2) << r->err;
    EXPECT_EQ(r->out.find("rank started"), std::string::npos) << r->out;
  }
  EXPECT_NE(zero.err.find("--node-rank 1 was claimed by 2 launchers"), std::string::npos)
      << zero.err;
  EXPECT_NE(two.err.find("--node-rank 1 was claimed by 2 launchers"), std::string::npos) << two.err;
}

// A node whose node 0 never comes gives up after --join-timeout, saying where it looked.
TEST(Launch, ANodeWithoutNodeZeroGivesUpAfterTheJoinTimeout) {
  const std::string port = std::to_string(testing::FreeLoopbackPort());
  testing::RunOptions o;
  o.env["DDPIO_STORE_TOKEN"] = "alone-secret";
  RunResult r = RunDdpio({"launch", "--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "1",
                          "--master-port", port, "--join-timeout", "1", "--", "/bin/true"},
                         o);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("node 0's launcher"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("127.0.0.1:" + port), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[rank "), std::string::npos) << r.err;
}

TEST(Launch, GivesEveryRankTorchrunsEnvironmentAndPrefixesItsLines) {
  RunResult r = RunDdpio({"launch", "--nproc-per-node", "3", "--", "/bin/sh", "-c",
                          "echo env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR "
                          "$MASTER_PORT $DDPIO_STORE_TOKEN $DDPIO_JOB_ID; echo to-stderr >&2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::set<std::string> ranks, tokens, ports;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string tag_open, tag_rank, word, rank, world, local, local_world, addr, port, token, job;
    f >> tag_open >> tag_rank >> word >> rank >> world >> local >> local_world >> addr >> port >>
        token >> job;
    ASSERT_EQ(tag_open, "[rank");
    EXPECT_EQ(tag_rank, rank + "]");  // the prefix names the rank that printed the line
    EXPECT_EQ(world, "3");
    EXPECT_EQ(local, rank);
    EXPECT_EQ(local_world, "3");
    EXPECT_EQ(addr, "127.0.0.1");
    EXPECT_EQ(token.size(), 32u);
    ranks.insert(rank);
    tokens.insert(token);
    ports.insert(port);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"}));
  EXPECT_EQ(tokens.size(), 1u);  // one job, one token
  EXPECT_EQ(ports.size(), 1u);
  EXPECT_NE(r.err.find("[rank 2] to-stderr"), std::string::npos) << r.err;
}

TEST(Launch, AFailingRankStopsTheOthersAndItsCodePropagates) {
  RunResult r = RunDdpio({"launch", "--nproc-per-node", "3", "--", "/bin/sh", "-c",
                          "if [ $RANK = 1 ]; then exit 7; fi; exec sleep 600"});
  EXPECT_FALSE(r.timed_out) << "the other ranks were not stopped";
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_NE(r.err.find("rank 1 failed: exited with code 7; stopped the other 2 rank(s)"),
            std::string::npos)
      << r.err;
}

TEST(Launch, RanksIgnoringSigtermAreKilledAfterTheGrace) {
  // Rank 1 ignores SIGTERM, then tells rank 0 through a FIFO; only then does rank 0 die.
  testing::TempDir dir;
  const std::string fifo = dir.Sub("ready");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  RunResult r =
      RunDdpio({"launch", "--nproc-per-node", "2", "--grace-seconds", "1", "--", "/bin/sh", "-c",
                "if [ $RANK = 0 ]; then read x < " + fifo +
                    "; kill -9 $$; fi; "
                    "trap '' TERM; echo go > " +
                    fifo + "; exec sleep 600"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + 9);
  EXPECT_NE(r.err.find("rank 0 failed: killed by signal 9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1 did not stop within 1 s of SIGTERM; sending SIGKILL"),
            std::string::npos)
      << r.err;
}

// A rank that ignores SIGTERM and keeps writing: output is always ready, so the grace period
// never ends in a quiet poll; the SIGKILL must come anyway.
TEST(Launch, RanksIgnoringSigtermWhileWritingAreKilledToo) {
  testing::TempDir dir;
  const std::string fifo = dir.Sub("ready");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  testing::RunOptions o;
  o.timeout = std::chrono::seconds(60);
  RunResult r = testing::Run({"/bin/sh", "-c",
                              testing::DdpioBin() +
                                  " launch --nproc-per-node 2 --grace-seconds 1 -- /bin/sh -c '"
                                  "if [ $RANK = 0 ]; then read x < " +
                                  fifo +
                                  "; kill -9 $$; fi; "
                                  "trap \"\" TERM; echo go > " +
                                  fifo + "; exec yes' > /dev/null"},
                             o);
  EXPECT_FALSE(r.timed_out) << "the writing rank was never killed";
  EXPECT_EQ(r.exit_code, 128 + 9);
  EXPECT_NE(r.err.find("rank 1 did not stop within 1 s of SIGTERM; sending SIGKILL"),
            std::string::npos)
      << r.err;
}

// A rank that exits leaving a child holding its output: the launcher does not wait for that
// child (it would wait 600 s) but kills it and ends with the ranks' code.
TEST(Launch, ProcessesARankLeavesBehindDoNotHoldTheLauncher) {
  testing::RunOptions o;
  o.timeout = std::chrono::seconds(60);
  RunResult r = RunDdpio(
      {"launch", "--nproc-per-node", "2", "--", "/bin/sh", "-c", "sleep 600 & echo done"}, o);
  EXPECT_FALSE(r.timed_out) << "the launcher waited for the left-behind process";
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[rank 1] done"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("exited leaving processes in its group; killed them"), std::string::npos)
      << r.err;
}

TEST(Launch, CtrlCStopsEveryRank) {
  int err_pipe[2];
  ASSERT_EQ(pipe(err_pipe), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(err_pipe[1], STDERR_FILENO);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    std::string bin = testing::DdpioBin();
    execl(bin.c_str(), bin.c_str(), "launch", "--nproc-per-node", "2", "--", "/bin/sh", "-c",
          "exec sleep 600", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(err_pipe[1]);
  std::string err;
  char buf[4096];
  while (err.find("started 2 rank(s)") == std::string::npos) {
    ssize_t n = read(err_pipe[0], buf, sizeof(buf));
    ASSERT_GT(n, 0) << err;
    err.append(buf, static_cast<size_t>(n));
  }
  kill(pid, SIGINT);  // what a terminal sends on Ctrl-C
  for (ssize_t n; (n = read(err_pipe[0], buf, sizeof(buf))) > 0;)
    err.append(buf, static_cast<size_t>(n));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_NE(err.find("stopping all ranks"), std::string::npos) << err;
  close(err_pipe[0]);
}

TEST(Launch, UsageErrors) {
  EXPECT_EQ(RunDdpio({"launch", "--nproc-per-node", "2"}).exit_code, 2);  // no program
  EXPECT_EQ(RunDdpio({"launch", "--nproc-per-node", "2", "--nnodes", "2", "--", "true"}).exit_code,
            2);  // no port
  EXPECT_EQ(RunDdpio({"launch", "--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "2",
                      "--master-port", "29999", "--", "true"})
                .exit_code,
            2);
  RunResult missing = RunDdpio({"launch", "--nproc-per-node", "1", "--", "/no/such/program"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("cannot run /no/such/program"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace ddpio
