// CLI glue for `ddpio launch`.
#include <memory>

#include "tools/cli_commands.h"
#include "tools/cli_flags.h"
#include "tools/cli_util.h"
#include "tools/launch.h"

namespace ddpio::tools {

void AddLaunchCommand(CLI::App& root, std::vector<Command>* commands) {
  auto* app =
      root.add_subcommand("launch", "Start local ranks with torchrun's environment and watch them");
  app->footer(
      "Examples:\n"
      "  ddpio launch --nproc-per-node 4 -- ddpio bench comm\n"
      "  DDPIO_STORE_TOKEN=<same on all nodes> ddpio launch --nnodes 2 --node-rank 0 \\\n"
      "      --nproc-per-node 8 --master-addr node0 --master-port 29500 -- ./my_trainer\n"
      "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
      "MASTER_PORT, DDPIO_STORE_TOKEN and DDPIO_JOB_ID (with --nnodes > 1 derived from the token\n"
      "and master address, so every node names the same job). With --nnodes > 1 the launchers "
      "first\n"
      "meet on the master port (node 0's serves them) and check that every node has its own\n"
      "--node-rank and the same --nnodes and --nproc-per-node: no rank starts otherwise, and each\n"
      "launcher says which node was told what. Ranks advertise the address of the\n"
      "interface that routes to --master-addr (GLOO_SOCKET_IFNAME or DDPIO_ADVERTISE_ADDR override "
      "it;\n"
      "NCCL_SOCKET_IFNAME passes through to NCCL untouched). When one rank fails the others are\n"
      "stopped (SIGTERM, then SIGKILL after --grace-seconds) and its exit code is returned.");
  auto o = std::make_shared<LaunchOptions>();
  auto grace = std::make_shared<int>(5);
  auto join_timeout = std::make_shared<int>(600);
  app->add_option("--nproc-per-node", o->nproc_per_node, "Ranks on this node")
      ->required()
      ->check(CLI::Range(1, 4096));
  app->add_option("--nnodes", o->nnodes, "Nodes in the job")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--node-rank", o->node_rank, "This node's index")->capture_default_str();
  app->add_option("--master-addr", o->master_addr, "Address of rank 0's node")
      ->capture_default_str();
  app->add_option("--master-port", o->master_port,
                  "Rendezvous port (default: a free port, single node)")
      ->check(CLI::Range(0, 65535));
  app->add_option("--grace-seconds", *grace, "Time between SIGTERM and SIGKILL when stopping")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  app->add_option(
         "--join-timeout", *join_timeout,
         "With --nnodes > 1: seconds the launchers wait for each other before any rank starts")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app->add_option("command", o->command, "Program and its arguments (after --)")->required();
  commands->push_back({app, [o, grace, join_timeout] {
                         o->grace = std::chrono::seconds(*grace);
                         o->join_timeout = std::chrono::seconds(*join_timeout);
                         auto code = Launch(*o);
                         if (!code.ok()) {
                           return code.status().code() == absl::StatusCode::kInvalidArgument
                                      ? ReportUsageError("launch",
                                                         std::string(code.status().message()))
                                      : ReportError("launch", code.status());
                         }
                         return *code;
                       }});
}

}  // namespace ddpio::tools
