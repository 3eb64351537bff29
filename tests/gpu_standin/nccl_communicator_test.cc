// NcclCommunicator against gmocks of NcclApi and device::CudaRuntime: the call sequence (unique
// id through the store, non-blocking init, enqueue on the communicator's stream, polling) and the
// mapping of every failure to a Status, abort included. No GPU, no NCCL.
#include "ddpio/comm/nccl/nccl_communicator.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::comm {
namespace {

using std::chrono::milliseconds;
using ::testing::_;
using ::testing::DoAll;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::NiceMock;
using ::testing::Return;
using ::testing::SetArgPointee;

class MockNcclApi : public NcclApi {
 public:
  MOCK_METHOD(ncclResult_t, GetUniqueId, (ncclUniqueId*), (override));
  MOCK_METHOD(ncclResult_t, CommInitRankConfig,
              (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*), (override));
  MOCK_METHOD(ncclResult_t, CommGetAsyncError, (ncclComm_t, ncclResult_t*), (override));
  MOCK_METHOD(ncclResult_t, CommAbort, (ncclComm_t), (override));
  MOCK_METHOD(ncclResult_t, CommDestroy, (ncclComm_t), (override));
  MOCK_METHOD(ncclResult_t, Broadcast,
              (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t),
              (override));
  MOCK_METHOD(ncclResult_t, AllReduce,
              (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t),
              (override));
  MOCK_METHOD(ncclResult_t, AllGather,
              (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t), (override));
  MOCK_METHOD(ncclResult_t, Send,
              (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t), (override));
  MOCK_METHOD(ncclResult_t, Recv, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t),
              (override));
  MOCK_METHOD(ncclResult_t, GroupStart, (), (override));
  MOCK_METHOD(ncclResult_t, GroupEnd, (), (override));
  MOCK_METHOD(const char*, GetErrorString, (ncclResult_t), (override));
  MOCK_METHOD(const char*, GetLastError, (ncclComm_t), (override));
};

class MockCudaRuntime : public device::CudaRuntime {
 public:
  MOCK_METHOD(int, device, (), (const, override));
  MOCK_METHOD(absl::Status, Activate, (), (override));
  MOCK_METHOD(absl::Status, HostAlloc, (void**, size_t), (override));
  MOCK_METHOD(void, HostFree, (void*), (override));
  MOCK_METHOD(absl::Status, DeviceAlloc, (void**, size_t), (override));
  MOCK_METHOD(void, DeviceFree, (void*), (override));
  MOCK_METHOD(absl::StatusOr<void*>, CreateStream, (), (override));
  MOCK_METHOD(void, DestroyStream, (void*), (override));
  MOCK_METHOD(absl::StatusOr<void*>, CreateEvent, (), (override));
  MOCK_METHOD(void, DestroyEvent, (void*), (override));
  MOCK_METHOD(absl::Status, CopyAsync, (void*, const void*, size_t, device::CopyKind, void*),
              (override));
  MOCK_METHOD(absl::Status, MemsetAsync, (void*, int, size_t, void*), (override));
  MOCK_METHOD(absl::Status, SyncStream, (void*), (override));
  MOCK_METHOD(absl::Status, RecordEvent, (void*, void*), (override));
  MOCK_METHOD(absl::Status, StreamWaitEvent, (void*, void*), (override));
  MOCK_METHOD(absl::Status, WaitEvent, (void*), (override));
  MOCK_METHOD(absl::StatusOr<bool>, StreamIdle, (void*), (override));
};

// Opaque handles the mocks hand out; never dereferenced. NCCL sees the runtime's stream as a
// cudaStream_t.
const ncclComm_t kComm = reinterpret_cast<ncclComm_t>(0x1000);
void* const kStream = reinterpret_cast<void*>(0x2000);
const cudaStream_t kNcclStream = static_cast<cudaStream_t>(kStream);
void* const kScratch = reinterpret_cast<void*>(0x3000);
using device::CopyKind;

MATCHER_P(IdIs, fill, "") {
  return arg.internal[0] == fill && arg.internal[sizeof(arg.internal) - 1] == fill;
}
MATCHER(NonBlocking, "") { return arg != nullptr && arg->blocking == 0; }

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fs = FileStore::Open((dir_.path() / "store").string());
    ASSERT_OK(fs);
    store_ = std::move(fs).value();
    // Defaults: one device, everything succeeds at once.
    ON_CALL(*cuda_, device()).WillByDefault(Return(0));
    ON_CALL(*cuda_, CreateStream()).WillByDefault(Return(kStream));
    ON_CALL(*cuda_, DeviceAlloc(_, _))
        .WillByDefault(DoAll(SetArgPointee<0>(kScratch), Return(absl::OkStatus())));
    ON_CALL(*cuda_, StreamIdle(_)).WillByDefault(Return(true));
    ON_CALL(api_, GetUniqueId(_)).WillByDefault([](ncclUniqueId* id) {
      std::memset(id->internal, 'x', sizeof(id->internal));
      return ncclSuccess;
    });
    ON_CALL(api_, CommInitRankConfig(_, _, _, _, _))
        .WillByDefault(DoAll(SetArgPointee<0>(kComm), Return(ncclInProgress)));
    ON_CALL(api_, CommGetAsyncError(_, _))
        .WillByDefault(DoAll(SetArgPointee<1>(ncclSuccess), Return(ncclSuccess)));
    ON_CALL(api_, GetErrorString(_)).WillByDefault(Return("nccl error text"));
    ON_CALL(api_, GetLastError(_)).WillByDefault(Return("peer 3 closed the connection"));
  }

  std::unique_ptr<NcclCommunicator> Make(int rank = 0, int size = 2) {
    NcclOptions o;
    o.timeout = milliseconds(2000);
    o.poll_interval = std::chrono::microseconds(10);
    auto c = NcclCommunicator::Create(api_, cuda_, store_, rank, size, o);
    EXPECT_OK(c);
    return c.ok() ? std::move(c).value() : nullptr;
  }

  ddpio::testing::TempDir dir_;
  std::shared_ptr<Store> store_;
  NiceMock<MockNcclApi> api_;
  std::shared_ptr<NiceMock<MockCudaRuntime>> cuda_ = std::make_shared<NiceMock<MockCudaRuntime>>();
};

TEST_F(NcclCommunicatorTest, RankZeroPublishesTheIdAndJoinsWithoutBlocking) {
  {
    InSequence seq;
    EXPECT_CALL(*cuda_, Activate());  // the runtime's device is current when NCCL joins
    EXPECT_CALL(api_, GetUniqueId(_));
    EXPECT_CALL(*cuda_, CreateStream());
    EXPECT_CALL(*cuda_, DeviceAlloc(_, sizeof(float)));
    EXPECT_CALL(api_, CommInitRankConfig(_, 4, IdIs('x'), 0, NonBlocking()));
    EXPECT_CALL(api_, CommGetAsyncError(kComm, _))
        .WillOnce(DoAll(SetArgPointee<1>(ncclInProgress), Return(ncclSuccess)))
        .WillOnce(DoAll(SetArgPointee<1>(ncclInProgress), Return(ncclSuccess)))
        .WillOnce(DoAll(SetArgPointee<1>(ncclSuccess), Return(ncclSuccess)));
    EXPECT_CALL(api_, CommDestroy(kComm));
  }
  EXPECT_CALL(*cuda_, DeviceFree(kScratch));
  EXPECT_CALL(*cuda_, DestroyStream(kStream));
  EXPECT_CALL(api_, CommAbort(_)).Times(0);
  ON_CALL(*cuda_, device()).WillByDefault(Return(1));
  auto c = NcclCommunicator::Create(api_, cuda_, store_, 0, 4);
  ASSERT_OK(c);
  EXPECT_EQ((*c)->device(), 1);  // the runtime's
  EXPECT_TRUE((*c)->device_memory());
  auto published = store_->Get("nccl-unique-id", milliseconds(0));
  ASSERT_OK(published);
  EXPECT_EQ(*published, std::string(sizeof(ncclUniqueId::internal), 'x'));
}

TEST_F(NcclCommunicatorTest, OtherRanksTakeTheIdFromTheStore) {
  ASSERT_OK(store_->Set("nccl-unique-id", std::string(sizeof(ncclUniqueId::internal), 'y')));
  EXPECT_CALL(api_, GetUniqueId(_)).Times(0);
  EXPECT_CALL(api_, CommInitRankConfig(_, 3, IdIs('y'), 2, NonBlocking()));
  EXPECT_NE(Make(2, 3), nullptr);
}

TEST_F(NcclCommunicatorTest, AMalformedIdInTheStoreIsDataLoss) {
  ASSERT_OK(store_->Set("nccl-unique-id", "short"));
  EXPECT_CALL(api_, CommInitRankConfig(_, _, _, _, _)).Times(0);
  auto c = NcclCommunicator::Create(api_, cuda_, store_, 1, 2);
  EXPECT_CODE(c, kDataLoss);
}

TEST_F(NcclCommunicatorTest, AnUnusableDeviceFailsBeforeAnyNcclCall) {
  ::testing::StrictMock<MockNcclApi> strict;
  EXPECT_CALL(*cuda_, Activate())
      .WillOnce(
          Return(absl::InternalError("cudaSetDevice: cudaErrorInsufficientDriver driver too old")));
  auto c = NcclCommunicator::Create(strict, cuda_, store_, 0, 2);
  EXPECT_CODE(c, kInternal);
  EXPECT_THAT(c.status().message(), HasSubstr("driver too old (rank 0)"));
  EXPECT_CODE(NcclCommunicator::Create(strict, nullptr, store_, 0, 2), kInvalidArgument);
}

TEST_F(NcclCommunicatorTest, AnInitThatNeverCompletesIsAbortedAtTheDeadline) {
  EXPECT_CALL(api_, CommGetAsyncError(kComm, _))
      .WillRepeatedly(DoAll(SetArgPointee<1>(ncclInProgress), Return(ncclSuccess)));
  EXPECT_CALL(api_, CommAbort(kComm)).Times(1);
  EXPECT_CALL(api_, CommDestroy(_)).Times(0);
  NcclOptions o;
  o.timeout = milliseconds(50);
  auto c = NcclCommunicator::Create(api_, cuda_, store_, 0, 2, o);
  EXPECT_CODE(c, kDeadlineExceeded);
  EXPECT_THAT(c.status().message(), HasSubstr("joining the NCCL communicator"));
}

TEST_F(NcclCommunicatorTest, AFailedInitIsUnavailableAndAborted) {
  EXPECT_CALL(api_, CommGetAsyncError(kComm, _))
      .WillOnce(DoAll(SetArgPointee<1>(ncclSystemError), Return(ncclSuccess)));
  EXPECT_CALL(api_, CommAbort(kComm)).Times(1);
  auto c = NcclCommunicator::Create(api_, cuda_, store_, 0, 2);
  EXPECT_CODE(c, kUnavailable);
  EXPECT_THAT(c.status().message(), HasSubstr("peer 3 closed the connection"));
}

TEST_F(NcclCommunicatorTest, AllReduceAverageIsEnqueuedOnTheStreamAndWaitedFor) {
  auto c = Make();
  float data[8] = {};
  EXPECT_CALL(*cuda_, StreamIdle(_)).Times(::testing::AnyNumber());  // later calls: default (done)
  {
    InSequence seq;
    EXPECT_CALL(api_, AllReduce(data, data, 8, ncclFloat32, ncclAvg, kComm, kNcclStream))
        .WillOnce(Return(ncclSuccess));
    EXPECT_CALL(*cuda_, StreamIdle(kStream)).WillOnce(Return(false)).RetiresOnSaturation();
    EXPECT_CALL(*cuda_, StreamIdle(kStream)).WillOnce(Return(false)).RetiresOnSaturation();
    EXPECT_CALL(*cuda_, StreamIdle(kStream)).WillOnce(Return(true)).RetiresOnSaturation();
  }
  EXPECT_OK(c->AllReduce(data, 8, ReduceOp::kAverage, milliseconds(1000)));
  EXPECT_CALL(api_, AllReduce(data, data, 8, ncclFloat32, ncclSum, kComm, kNcclStream))
      .WillOnce(Return(ncclSuccess));
  EXPECT_OK(c->AllReduce(data, 8, ReduceOp::kSum, milliseconds(1000)));
}

TEST_F(NcclCommunicatorTest, AnAsynchronousErrorAbortsAndPoisons) {
  auto c = Make();
  EXPECT_CALL(*cuda_, StreamIdle(kStream)).WillRepeatedly(Return(false));
  EXPECT_CALL(api_, CommGetAsyncError(kComm, _))
      .WillOnce(DoAll(SetArgPointee<1>(ncclSuccess), Return(ncclSuccess)))
      .WillOnce(DoAll(SetArgPointee<1>(ncclRemoteError), Return(ncclSuccess)));
  EXPECT_CALL(api_, CommAbort(kComm)).Times(1);
  EXPECT_CALL(api_, CommDestroy(_)).Times(0);
  uint8_t buf[4];
  absl::Status s = c->Broadcast(buf, 4, 0, milliseconds(5000));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("broadcast on rank 0"));
  EXPECT_THAT(s.message(), HasSubstr("peer 3 closed the connection"));
  // Nothing reaches NCCL any more.
  EXPECT_CALL(api_, AllReduce(_, _, _, _, _, _, _)).Times(0);
  absl::Status later = c->Barrier(milliseconds(1000));
  EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(later.message(), HasSubstr("broadcast on rank 0"));
}

TEST_F(NcclCommunicatorTest, AnOperationPastItsTimeoutIsAbortedWithDeadlineExceeded) {
  auto c = Make();
  EXPECT_CALL(*cuda_, StreamIdle(kStream)).WillRepeatedly(Return(false));
  EXPECT_CALL(api_, CommAbort(kComm)).Times(1);
  float v = 0;
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = c->AllReduce(&v, 1, ReduceOp::kSum, milliseconds(60));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(60));
  EXPECT_THAT(s.message(), HasSubstr("aborted"));
}

TEST_F(NcclCommunicatorTest, EnqueueAndStreamErrorsAreMapped) {
  {
    auto c = Make();
    EXPECT_CALL(api_, AllGather(_, _, 4, ncclUint8, kComm, kNcclStream))
        .WillOnce(Return(ncclInvalidUsage));
    EXPECT_CALL(api_, CommAbort(kComm)).Times(1);
    uint8_t in[4], out[8];
    EXPECT_EQ(c->AllGather(in, out, 4, milliseconds(100)).code(),
              absl::StatusCode::kInvalidArgument);
  }
  {
    auto c = Make();
    EXPECT_CALL(*cuda_, StreamIdle(kStream))
        .WillOnce(
            Return(absl::InternalError("cudaStreamQuery: cudaErrorLaunchFailure cuda error text")));
    EXPECT_CALL(api_, CommAbort(kComm)).Times(1);
    float v = 0;
    absl::Status s = c->AllReduce(&v, 1, ReduceOp::kSum, milliseconds(100));
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(s.message(), HasSubstr("cuda error text"));
  }
}

TEST_F(NcclCommunicatorTest, ScatterIsTheRootsGroupedSendsAndAReceiveElsewhere) {
  auto root = Make(0, 3);
  uint8_t parts[3][16], out[16];
  std::vector<const void*> ptrs = {parts[0], parts[1], parts[2]};
  EXPECT_CALL(*cuda_, StreamIdle(_)).Times(::testing::AnyNumber());  // later calls: default (done)
  {
    InSequence seq;
    EXPECT_CALL(*cuda_, CopyAsync(out, parts[0], 16, CopyKind::kDeviceToDevice, kStream));
    EXPECT_CALL(api_, GroupStart());
    EXPECT_CALL(api_, Send(parts[1], 16, ncclUint8, 1, kComm, kNcclStream));
    EXPECT_CALL(api_, Send(parts[2], 16, ncclUint8, 2, kComm, kNcclStream));
    EXPECT_CALL(api_, GroupEnd());
    EXPECT_CALL(*cuda_, StreamIdle(kStream)).RetiresOnSaturation();
  }
  EXPECT_OK(root->Scatter(ptrs, out, 16, 0, milliseconds(1000)));
  ASSERT_OK(store_->Set("nccl-unique-id", std::string(sizeof(ncclUniqueId::internal), 'x')));
  auto peer = Make(2, 3);
  EXPECT_CALL(api_, Recv(out, 16, ncclUint8, 0, kComm, kNcclStream));
  EXPECT_CALL(api_, Send(_, _, _, _, _, _)).Times(0);
  EXPECT_OK(peer->Scatter({}, out, 16, 0, milliseconds(1000)));
}

// The device path's staging: host -> device on a copy stream made at the first use, an event
// recorded after the copy, and the communication stream told to wait for it; the copy stream
// and the event are destroyed with the communicator. The grouped sends after it are one group.
TEST_F(NcclCommunicatorTest, StagedCopiesAreOrderedBeforeTheNextOperationByAnEvent) {
  auto c = Make(0, 3);
  void* const copy = reinterpret_cast<void*>(0x4000);
  void* const event = reinterpret_cast<void*>(0x5000);
  uint8_t host[8], device[8], other[8];
  EXPECT_CALL(*cuda_, StreamIdle(_)).Times(::testing::AnyNumber());
  {
    InSequence seq;
    EXPECT_CALL(*cuda_, CreateStream()).WillOnce(Return(copy));
    EXPECT_CALL(*cuda_, CreateEvent()).WillOnce(Return(event));
    EXPECT_CALL(*cuda_, CopyAsync(device, host, 8, CopyKind::kHostToDevice, copy));
    EXPECT_CALL(*cuda_, RecordEvent(event, copy));
    EXPECT_CALL(*cuda_, StreamWaitEvent(kStream, event));
    EXPECT_CALL(*cuda_,
                CopyAsync(other, host, 8, CopyKind::kHostToDevice, copy));  // no second stream
    EXPECT_CALL(*cuda_, RecordEvent(event, copy));
    EXPECT_CALL(*cuda_, StreamWaitEvent(kStream, event));
    EXPECT_CALL(api_, GroupStart());
    EXPECT_CALL(api_, Send(device, 8, ncclUint8, 1, kComm, kNcclStream));
    EXPECT_CALL(api_, Send(other, 8, ncclUint8, 2, kComm, kNcclStream));
    EXPECT_CALL(api_, GroupEnd());
    EXPECT_CALL(*cuda_, CopyAsync(host, device, 8, CopyKind::kDeviceToHost, kStream));
    EXPECT_CALL(*cuda_, StreamIdle(kStream)).RetiresOnSaturation();
  }
  EXPECT_OK(c->StageIn(device, host, 8));
  EXPECT_OK(c->StageIn(other, host, 8));
  EXPECT_OK(c->SendMany({{device, 8, 1}, {other, 8, 2}}, 0, milliseconds(1000)));
  EXPECT_OK(c->CopyOut(host, device, 8, milliseconds(1000)));
  EXPECT_CALL(*cuda_, DestroyEvent(event));
  EXPECT_CALL(*cuda_, DestroyStream(copy));
  EXPECT_CALL(*cuda_, DestroyStream(kStream));
  EXPECT_THAT(c->SendMany({{device, 8, 0}}, 0, milliseconds(1000)).code(),
              absl::StatusCode::kInvalidArgument);
  c.reset();
}

TEST_F(NcclCommunicatorTest, BarrierIsAOneFloatAllReduceOnTheScratchBuffer) {
  auto c = Make();
  EXPECT_CALL(api_, AllReduce(kScratch, kScratch, 1, ncclFloat32, ncclSum, kComm, kNcclStream));
  EXPECT_OK(c->Barrier(milliseconds(1000)));
}

TEST_F(NcclCommunicatorTest, BadArgumentsAndEmptyOperationsNeverReachNccl) {
  auto c = Make(0, 2);
  EXPECT_CALL(api_, Broadcast(_, _, _, _, _, _, _)).Times(0);
  EXPECT_CALL(api_, Send(_, _, _, _, _, _)).Times(0);
  EXPECT_CALL(api_, AllReduce(_, _, _, _, _, _, _)).Times(0);
  uint8_t b[4];
  EXPECT_EQ(c->Broadcast(b, 4, 2, milliseconds(100)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Send(b, 4, 0, 0, milliseconds(100)).code(),
            absl::StatusCode::kInvalidArgument);  // self
  EXPECT_EQ(c->Scatter({b}, b, 4, 0, milliseconds(100)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_OK(c->Broadcast(b, 0, 0, milliseconds(100)));
  EXPECT_OK(c->AllReduce(nullptr, 0, ReduceOp::kSum, milliseconds(100)));
}

TEST_F(NcclCommunicatorTest, AbortAbortsOnceAndPoisons) {
  auto c = Make();
  EXPECT_CALL(api_, CommAbort(kComm)).Times(1);
  EXPECT_CALL(api_, CommDestroy(_)).Times(0);
  c->Abort();
  c->Abort();
  EXPECT_EQ(c->Barrier(milliseconds(100)).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ddpio::comm
