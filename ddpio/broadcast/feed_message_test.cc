#include "ddpio/broadcast/feed_message.h"

#include <cstring>
#include <random>

#include "ddpio/comm/communicator_conformance.h"
#include "ddpio/comm/gloo_communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::broadcast {
namespace {

using ::testing::HasSubstr;

FeedHeader Encoded() {
  FeedHeader h;
  h.epoch = 3;
  h.step = 17;
  h.indices = {9, 2, 40};
  h.labels = {1, 0, 7};
  h.valid = {1, 1, 0};
  h.sizes = {100, 0, 23};  // variable sizes, one empty
  h.payload_bytes = 123;
  return h;
}

FeedHeader Decoded() {
  FeedHeader h;
  h.payload = PayloadKind::kDecoded;
  h.dtype = DType::kFloat32;
  h.sample_shape = {3, 4, 5};
  h.indices = {1, 2};
  h.labels = {0, 1};
  h.valid = {1, 1};
  h.payload_bytes = 2 * 3 * 4 * 5 * 4;
  return h;
}

void ExpectSame(const FeedHeader& a, const FeedHeader& b) {
  EXPECT_EQ(a.payload, b.payload);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.end_of_epoch, b.end_of_epoch);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.sample_shape, b.sample_shape);
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.valid, b.valid);
  EXPECT_EQ(a.sizes, b.sizes);
  EXPECT_EQ(a.payload_bytes, b.payload_bytes);
}

TEST(FeedMessage, RoundTripsEveryShapeOfMessage) {
  FeedHeader end;
  end.end_of_epoch = true;
  end.epoch = 4;
  FeedHeader zero = Decoded();
  zero.dtype = DType::kUint8;
  zero.sample_shape = {224, 0, 3};  // a zero-size dimension
  zero.payload_bytes = 0;
  FeedHeader empty;  // an empty batch that is not the end
  for (const FeedHeader& h : {Encoded(), Decoded(), end, zero, empty}) {
    ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeFeedHeader(h));
    ASSERT_OK_AND_ASSIGN(FeedHeader back, DecodeFeedHeader(bytes, {}));
    ExpectSame(h, back);
  }
}

// A failure on the sender travels as a status: code and text survive; a malformed one is DataLoss.
TEST(FeedMessage, ErrorsTravelAsStatuses) {
  const std::string payload = EncodeFeedError(absl::DataLossError("record 5 (key 05) is corrupt"));
  FeedHeader h = FeedErrorHeader(3, 7, payload);
  ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeFeedHeader(h));
  ASSERT_OK_AND_ASSIGN(FeedHeader back, DecodeFeedHeader(bytes, {}));
  ExpectSame(h, back);
  EXPECT_TRUE(back.error);
  absl::Status st = DecodeFeedError(std::vector<uint8_t>(payload.begin(), payload.end()), 2);
  EXPECT_CODE(st, kDataLoss);
  EXPECT_EQ(st.message(), "from rank 2: record 5 (key 05) is corrupt");
  EXPECT_CODE(DecodeFeedError({1, 2}, 0), kDataLoss);
  EXPECT_CODE(DecodeFeedError({0, 0, 0, 0}, 0), kDataLoss);  // OK is not an error
  EXPECT_CODE(DecodeFeedError({99, 0, 0, 0}, 0), kDataLoss);
  FeedHeader with_samples = Encoded();
  with_samples.error = true;
  EXPECT_CODE(ValidateFeedHeader(with_samples, {}), kDataLoss);
  FeedHeader huge = FeedErrorHeader(0, 0, std::string(kMaxErrorBytes + 1, 'x'));
  EXPECT_CODE(ValidateFeedHeader(huge, {}), kDataLoss);
  FeedHeader both = FeedErrorHeader(0, 0, payload);
  both.end_of_epoch = true;
  EXPECT_CODE(ValidateFeedHeader(both, {}), kDataLoss);
}

TEST(FeedMessage, InconsistentHeadersAreRefused) {
  auto refused = [](FeedHeader h, const char* why) {
    EXPECT_CODE(ValidateFeedHeader(h, {}), kDataLoss) << why;
    EXPECT_CODE(EncodeFeedHeader(h), kInvalidArgument) << why;
  };
  FeedHeader h = Encoded();
  h.payload_bytes = 124;
  refused(h, "sizes do not add up");
  h = Encoded();
  h.labels.pop_back();
  refused(h, "labels missing");
  h = Encoded();
  h.valid[0] = 2;
  refused(h, "validity not 0/1");
  h = Encoded();
  h.sample_shape = {1};
  refused(h, "encoded with a shape");
  h = Decoded();
  h.payload_bytes -= 4;
  refused(h, "decoded payload size");
  h = Decoded();
  h.dtype = DType::kBytes;
  refused(h, "decoded without dtype");
  h = Decoded();
  h.sample_shape = {1u << 20, 1, 1};
  refused(h, "dimension over the limit");
  h = Decoded();
  h.sizes = {1, 2};
  refused(h, "decoded with sizes");
  FeedHeader end;
  end.end_of_epoch = true;
  end.indices = {1};
  end.labels = {1};
  end.valid = {1};
  end.sizes = {0};
  refused(end, "end of epoch with samples");
}

TEST(FeedMessage, DamagedBytesAreDataLossNeverACrash) {
  ASSERT_OK_AND_ASSIGN(std::string good, EncodeFeedHeader(Encoded()));
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_CODE(DecodeFeedHeader(good.substr(0, cut), {}), kDataLoss) << "truncated at " << cut;
  }
  EXPECT_CODE(DecodeFeedHeader(good + "x", {}), kDataLoss);
  std::string version = good;
  version[0] = 3;
  auto v = DecodeFeedHeader(version, {});
  EXPECT_CODE(v, kDataLoss);
  EXPECT_THAT(v.status().message(), HasSubstr("format version 3"));
  // A count of 4 billion in a 100-byte header: refused by the limit, nothing allocated.
  std::string huge = good;
  const uint32_t count = 0xFFFFFFF0u;
  std::memcpy(&huge[8 + 16], &count, 4);
  EXPECT_CODE(DecodeFeedHeader(huge, {}), kDataLoss);
  // Random single-byte damage: either still a consistent header, or DataLoss.
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    bad[rng() % bad.size()] = static_cast<char>(rng());
    auto r = DecodeFeedHeader(bad, {});
    if (r.ok()) {
      EXPECT_OK(ValidateFeedHeader(*r, {}));
    } else {
      EXPECT_CODE(r, kDataLoss);
    }
  }
}

TEST(FeedMessage, LimitsAreTheReceiversNotTheSenders) {
  ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeFeedHeader(Encoded()));
  FeedLimits tight;
  tight.max_sample_bytes = 50;  // sample 0 has 100
  auto r = DecodeFeedHeader(bytes, tight);
  EXPECT_CODE(r, kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("index 9"));
  tight = {};
  tight.max_samples = 2;
  EXPECT_CODE(DecodeFeedHeader(bytes, tight), kDataLoss);
}

// Two real processes over Gloo: three messages (variable records, a decoded batch, the end of
// the epoch) arrive whole and in order.
TEST(FeedMessage, TravelsBetweenProcesses) {
  auto codes = comm::testing::RunRanks(2, "feed", [](int rank, std::shared_ptr<comm::Store> store) {
    auto comm = comm::GlooCommunicator::Create(store, rank, 2);
    if (!comm.ok()) return 1;
    const auto t = std::chrono::seconds(20);
    FeedHeader end;
    end.end_of_epoch = true;
    std::vector<FeedHeader> sent = {Encoded(), Decoded(), end};
    if (rank == 0) {
      for (const FeedHeader& h : sent) {
        std::vector<uint8_t> payload(h.payload_bytes);
        for (size_t i = 0; i < payload.size(); ++i)
          payload[i] = static_cast<uint8_t>(i * 7 + h.step);
        if (!SendFeedMessage(**comm, 1, h, payload.data(), t).ok()) return 2;
      }
      return 0;
    }
    for (const FeedHeader& want : sent) {
      std::vector<uint8_t> payload;
      auto got = RecvFeedMessage(**comm, 0, &payload, {}, t);
      if (!got.ok()) return 3;
      if (got->indices != want.indices || got->sizes != want.sizes ||
          got->end_of_epoch != want.end_of_epoch)
        return 4;
      if (payload.size() != want.payload_bytes) return 5;
      for (size_t i = 0; i < payload.size(); ++i) {
        if (payload[i] != static_cast<uint8_t>(i * 7 + want.step)) return 6;
      }
    }
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// A sender that lies in the prefix (a payload beyond the receiver's limit) is refused before
// the receiver allocates.
TEST(FeedMessage, AnOversizedPrefixIsRefusedBeforeAllocating) {
  auto codes =
      comm::testing::RunRanks(2, "feed-lie", [](int rank, std::shared_ptr<comm::Store> store) {
        auto comm = comm::GlooCommunicator::Create(store, rank, 2);
        if (!comm.ok()) return 1;
        const auto t = std::chrono::seconds(20);
        if (rank == 0) {
          uint8_t prefix[16] = {'D', 'D', 'P', 'F'};
          const uint32_t header_bytes = 40;
          const uint64_t payload_bytes = uint64_t{1} << 40;
          std::memcpy(prefix + 4, &header_bytes, 4);
          std::memcpy(prefix + 8, &payload_bytes, 8);
          return (*comm)->Send(prefix, 16, 1, 0xFEED, t).ok() ? 0 : 2;
        }
        std::vector<uint8_t> payload;
        auto got = RecvFeedMessage(**comm, 0, &payload, {}, t);
        return got.status().code() == absl::StatusCode::kDataLoss && payload.empty() ? 0 : 3;
      });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace ddpio::broadcast
