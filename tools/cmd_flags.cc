// Flags several `ddpio` subcommands share: the rendezvous (every multi-rank command) and the
// group feeder (bench feed, train).
#include <cmath>
#include <cstdlib>
#include <memory>

#include "ddpio/broadcast/group_feeder.h"
#include "tools/commands.h"

namespace ddpio::tools {

const CLI::Validator& FiniteNumber() {
  static const CLI::Validator* v = new CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(x)) return "must be a finite number";
        return "";
      },
      "FINITE");
  return *v;
}

void AddRendezvousFlags(CLI::App* app, std::string* store, std::string* advertise_addr) {
  app->add_option("--store", *store, "Rendezvous store: default TCP on rank 0 (MASTER_ADDR:MASTER_PORT), or file:DIR");
  app->add_option("--advertise-addr", *advertise_addr,
                  "Address peers reach this rank on (default: DDPIO_ADVERTISE_ADDR, else GLOO_SOCKET_IFNAME's "
                  "address, else this host's route to MASTER_ADDR)");
}

void AddFeederFlags(CLI::App* app, broadcast::FeederOptions* o) {
  app->add_option_function<std::string>(
         "--mode", [o](const std::string& v) { o->mode = *broadcast::ParseFeedMode(v); },
         "shard (data parallel: each rank its own samples) or replicate (every member gets the group's batches) "
         "[default: shard]")
      ->check(CLI::IsMember({"shard", "replicate"}));
  app->add_option_function<std::string>(
         "--payload", [o](const std::string& v) { o->payload = *broadcast::ParseFeedPayload(v); },
         "encoded (stored records travel, every rank decodes its own) or decoded (the leader decodes and "
         "sends ready batches) [default: encoded]")
      ->check(CLI::IsMember({"encoded", "decoded"}));
  app->add_option_function<std::string>(
         "--readers", [o](const std::string& v) { o->readers = *broadcast::ParseFeedReaders(v); },
         "leader (the group's leader reads for it) or all (every rank reads its own stream itself: the "
         "baseline without group feeding) [default: leader]")
      ->check(CLI::IsMember({"leader", "all"}));
  app->add_option_function<std::string>(
         "--relay", [o](const std::string& v) { o->relay = *broadcast::ParseFeedRelay(v); },
         "replicate: chain (each member forwards to the next as data arrives; every link carries it once) or "
         "star (the leader sends every member a copy) [default: chain]")
      ->check(CLI::IsMember({"chain", "star"}));
  app->add_option("--read-ahead", o->read_ahead,
                  "Records a leader asks storage for ahead of the one it copies (0: none)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
}

}  // namespace ddpio::tools
