// Slurm node lists ("gpu[03-05,09],cpu1"): the first host or an error, never a crash, never a
// huge expansion.
#include <cstdint>
#include <string>

#include "ddpio/comm/rank_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)ddpio::comm::FirstSlurmHost(std::string(reinterpret_cast<const char*>(data), size));
  ddpio::comm::Environment env = {
      {"SLURM_PROCID", "0"},
      {"SLURM_NTASKS", "2"},
      {"SLURM_JOB_NODELIST", std::string(reinterpret_cast<const char*>(data), size)}};
  (void)ddpio::comm::DiscoverRank(env);
  return 0;
}
