#include "ddpio/comm/rank_info.h"

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::comm {
namespace {

TEST(RankInfo, Torchrun) {
  ASSERT_OK_AND_ASSIGN(RankInfo r, DiscoverRank({{"RANK", "3"},
                                                 {"WORLD_SIZE", "8"},
                                                 {"LOCAL_RANK", "1"},
                                                 {"LOCAL_WORLD_SIZE", "2"},
                                                 {"MASTER_ADDR", "10.0.0.5"},
                                                 {"MASTER_PORT", "29400"},
                                                 {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world_size, 2);
  EXPECT_EQ(r.master_addr, "10.0.0.5");
  EXPECT_EQ(r.master_port, 29400);
  EXPECT_TRUE(r.agent_store);
  EXPECT_FALSE(r.torchrun_rendezvous);
  EXPECT_EQ(r.source, RankSource::kTorchrun);
}

TEST(RankInfo, SlurmWithCompressedNodeList) {
  ASSERT_OK_AND_ASSIGN(RankInfo r, DiscoverRank({{"SLURM_PROCID", "5"},
                                                 {"SLURM_NTASKS", "16"},
                                                 {"SLURM_LOCALID", "1"},
                                                 {"SLURM_NTASKS_PER_NODE", "4(x4)"},
                                                 {"SLURM_JOB_NODELIST", "gpu[03-05,09],cpu1"}}));
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world_size, 16);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world_size, 4);
  EXPECT_EQ(r.master_addr, "gpu03");
  EXPECT_EQ(r.source, RankSource::kSlurm);
  EXPECT_FALSE(r.agent_store);
  EXPECT_EQ(*FirstSlurmHost("node7"), "node7");
  EXPECT_EQ(*FirstSlurmHost("a[12,15]-ib"), "a12-ib");
  EXPECT_CODE(FirstSlurmHost("a[1-3"), kInvalidArgument);
}

TEST(RankInfo, OpenMpi) {
  ASSERT_OK_AND_ASSIGN(RankInfo r, DiscoverRank({{"OMPI_COMM_WORLD_RANK", "2"},
                                                 {"OMPI_COMM_WORLD_SIZE", "4"},
                                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.local_world_size, 2);
  EXPECT_EQ(r.source, RankSource::kOpenMpi);
}

TEST(RankInfo, FlagsOverrideAndContradictionsAreNamed) {
  RankFlags f;
  f.rank = 1;
  f.world_size = 2;
  f.master_port = 12345;
  ASSERT_OK_AND_ASSIGN(RankInfo r, DiscoverRank({}, f));
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.master_port, 12345);
  EXPECT_EQ(r.source, RankSource::kFlags);
  auto clash = DiscoverRank({{"RANK", "3"}, {"WORLD_SIZE", "4"}}, f);
  EXPECT_CODE(clash, kInvalidArgument);
  EXPECT_NE(clash.status().message().find("command line"), absl::string_view::npos)
      << clash.status();
  EXPECT_NE(clash.status().message().find("RANK"), absl::string_view::npos) << clash.status();
  // Two launchers disagreeing.
  EXPECT_CODE(
      DiscoverRank(
          {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}),
      kInvalidArgument);
  // Agreeing sources are fine.
  EXPECT_OK(DiscoverRank(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}));
}

TEST(RankInfo, BadValues) {
  EXPECT_CODE(DiscoverRank({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), kInvalidArgument);
  EXPECT_CODE(DiscoverRank({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), kInvalidArgument);
  EXPECT_CODE(DiscoverRank({{"RANK", "0"}}), kInvalidArgument);  // no world size
  EXPECT_CODE(DiscoverRank({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"}}),
              kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(RankInfo single, DiscoverRank({}));
  EXPECT_EQ(single.world_size, 1);
  EXPECT_EQ(single.source, RankSource::kSingleProcess);
  EXPECT_EQ(RankSourceName(single.source), "single process");
}

}  // namespace
}  // namespace ddpio::comm
