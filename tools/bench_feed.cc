#include "tools/bench_feed.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/comm/rendezvous.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/pipeline/pipeline.h"
#include "ddpio/storage/dataset_reader.h"
#include "tools/bench_ceiling.h"
#include "tools/cli_util.h"

namespace ddpio::tools {

using Clock = std::chrono::steady_clock;

namespace {

// The peer of `rank` in round `round` of a round-robin tournament over `n` ranks (the circle
// method: n - 1 rounds for even n, n for odd n, each round a perfect matching), or -1 when it
// sits the round out.
int Partner(int rank, int round, int n) {
  const int m = n % 2 == 0 ? n : n + 1;  // odd: a bye, rank m - 1, that nobody is
  int p;
  if (rank == m - 1) {
    p = round;
  } else if (rank == round) {
    p = m - 1;
  } else {
    p = ((2 * round - rank) % (m - 1) + (m - 1)) % (m - 1);
  }
  return p < n ? p : -1;
}

// Keeps every rank of the job in touch while the groups feed on their own. A group's feeder
// talks only inside its group, so a rank lost in another group used to go unnoticed until the
// final barrier — the rest fed on for as long as their epochs lasted (`train` needs nothing like
// it: its gradient all-reduce spans the world at every step). A thread exchanges a 16-byte beat
// with every other rank every `interval` on a Gloo communicator of its own (host memory, whatever
// the job's backend): the beat is a round-robin tournament of pairwise exchanges (lower rank
// sends first), so blocking sends never wait on each other in a cycle, and a failed exchange
// names its peer. A peer whose connection closed, or that does not answer within the timeout,
// ends the watch with an error naming it and its group; the feeding loop looks between
// batches. Each beat carries whether its sender has finished feeding; the watch ends on the
// first beat in which every rank has — the same beat everywhere, every rank having heard from
// every other — so it is the job's final barrier as well. Cost per beat: n - 1 exchanges of 16
// bytes per rank, one Gloo mesh more.
class WorldWatch {
 public:
  // `store_on_rank0`: the job's store lives in rank 0's process (ddpio's TCP store, not a file
  // store or torchrun's agent), so losing it means losing rank 0.
  static absl::StatusOr<std::unique_ptr<WorldWatch>> Start(comm::Job& job, bool store_on_rank0,
                                                           const comm::GroupLayout& feeding,
                                                           std::chrono::milliseconds timeout) {
    DDPIO_ASSIGN_OR_RETURN(comm::GroupLayout everyone,
                           comm::GroupLayout::Make(job.info().world_size, job.info().world_size,
                                                   comm::LayoutKind::kContiguous));
    absl::StatusOr<std::unique_ptr<comm::Communicator>> group =
        job.Group(everyone, /*host_memory=*/true);
    if (!group.ok()) return StartFailed(*job.store(), group.status());
    std::unique_ptr<comm::Communicator> comm = std::move(group).value();
    auto watch = std::unique_ptr<WorldWatch>(
        new WorldWatch(std::move(comm), job.store(), store_on_rank0, feeding, timeout));
    watch->thread_ = std::thread([w = watch.get()] { w->Run(); });
    return watch;
  }
  ~WorldWatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // a beat in flight ends within the timeout (a peer answering or not)
  }
  WorldWatch(const WorldWatch&) = delete;
  WorldWatch& operator=(const WorldWatch&) = delete;

  // OK while every rank answers; the error naming the lost rank once one did not.
  absl::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

  // This rank failed with `error` (its feeder, or a barrier of the ceiling): was a rank lost (a
  // leader leaving because of a loss elsewhere cuts its group's feed; a dead member cuts it too)?
  // Unless the watch knows already, one more beat, at once, finds out (at most one beat: the
  // timeout when a peer is stalled). The job's first loss leads the message when there is one;
  // this rank's error alone otherwise.
  absl::Status Explain(const absl::Status& error) {
    std::unique_lock<std::mutex> lock(mu_);
    if (status_.ok()) {
      const uint64_t after = started_ + 1;  // a beat that begins after the failure
      hurry_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return ended_ || completed_ >= after; });
    }
    if (status_.ok()) return error;
    return absl::Status(status_.code(), absl::StrCat(status_.message(),
                                                     "; this rank failed too: ", error.message()));
  }

  // This rank has fed everything: keeps answering until every rank has (OK) or one is lost.
  absl::Status Finish() {
    std::unique_lock<std::mutex> lock(mu_);
    finished_ = true;
    hurry_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return ended_; });
    return status_;
  }

 private:
  struct Beat {
    uint64_t number;
    uint8_t finished;
    uint8_t pad[7];
  };
  static constexpr uint64_t kTagBase = uint64_t{0x57A7} << 40;
  static constexpr auto kCloseGrace = std::chrono::milliseconds(500);

  // Setting up the watch failed: a rank that was lost while this one was still connecting cuts
  // the connections under it (its group's leader leaves, reporting the loss first). The job's
  // first loss, when one is reported within kCloseGrace, is what this rank names too.
  static absl::Status StartFailed(comm::Store& store, const absl::Status& why) {
    absl::StatusOr<std::string> first = store.Get("watch/first-loss", kCloseGrace);
    if (!first.ok() || first->empty()) return why;
    return absl::Status(why.code(),
                        absl::StrCat(*first, "; this rank was still connecting to the others (",
                                     why.message(), ")"));
  }

  WorldWatch(std::unique_ptr<comm::Communicator> comm, std::shared_ptr<comm::Store> store,
             bool store_on_rank0, const comm::GroupLayout& feeding,
             std::chrono::milliseconds timeout)
      : comm_(std::move(comm)),
        store_(std::move(store)),
        store_on_rank0_(store_on_rank0),
        feeding_(feeding),
        timeout_(timeout),
        interval_(std::min<std::chrono::milliseconds>(std::chrono::seconds(1), timeout / 4)) {}

  void Run() {
    for (uint64_t n = 0;; ++n) {
      bool finished;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, n == 0 ? std::chrono::milliseconds(0) : interval_,
                     [&] { return stop_ || hurry_; });
        if (stop_) return;
        hurry_ = false;
        finished = finished_;
        ++started_;
      }
      bool all_finished = false;
      int lost = -1;
      absl::Status st = Exchange(n, finished, &all_finished, &lost);
      if (!st.ok()) st = Attribute(lost, st);
      std::lock_guard<std::mutex> lock(mu_);
      ++completed_;
      if (!st.ok() || all_finished) {
        status_ = st;
        ended_ = true;
        cv_.notify_all();
        return;
      }
      cv_.notify_all();
    }
  }

  // Beat `n` with every other rank; *all_finished when every rank said it has finished. On an
  // error, *lost is the peer of the failed exchange.
  absl::Status Exchange(uint64_t n, bool finished, bool* all_finished, int* lost) {
    const int rank = comm_->rank(), size = comm_->size();
    const int rounds = size % 2 == 0 ? size - 1 : size;
    // Each round may wait a little longer than the one before (at most 2 s more in all): when a
    // rank stalls, the rank blocked on it is in an earlier round than anyone blocked on that rank
    // in turn, so it times out — and reports the stalled rank — first.
    const auto step = std::clamp<std::chrono::milliseconds>(
        std::chrono::milliseconds(2000) / rounds, std::chrono::milliseconds(1),
        std::chrono::milliseconds(200));
    const auto start = Clock::now();
    Beat out{};
    out.number = n;
    out.finished = finished ? 1 : 0;
    int finished_ranks = finished ? 1 : 0;
    for (int round = 0; round < rounds; ++round) {
      const int peer = Partner(rank, round, size);
      if (peer < 0) continue;
      const auto deadline = start + timeout_ + round * step;
      const auto left = [&] {
        return std::max(
            std::chrono::milliseconds(1),
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      };
      Beat in{};
      absl::Status st;
      if (rank < peer) {
        st = comm_->Send(&out, sizeof(out), peer, kTagBase + n, left());
        if (st.ok()) st = comm_->Recv(&in, sizeof(in), peer, kTagBase + n, left());
      } else {
        st = comm_->Recv(&in, sizeof(in), peer, kTagBase + n, left());
        if (st.ok()) st = comm_->Send(&out, sizeof(out), peer, kTagBase + n, left());
      }
      if (st.ok() && in.number != n) {
        st = absl::DataLossError(
            absl::StrCat("its heartbeat ", in.number, " came when ", n, " was due"));
      }
      if (!st.ok()) {
        *lost = peer;
        return st;
      }
      finished_ranks += in.finished ? 1 : 0;
    }
    *all_finished = finished_ranks == size;
    return absl::OkStatus();
  }

  // What this rank saw: `peer` lost, `why` the exchange that failed.
  absl::Status Lost(int peer, const absl::Status& why) const {
    const std::string what = absl::IsDeadlineExceeded(why)
                                 ? absl::StrCat("no heartbeat from it within --timeout ",
                                                timeout_.count() / 1000.0, " s")
                             : absl::IsUnavailable(why) ? std::string("its connection closed")
                                                        : std::string("its heartbeat was wrong");
    return absl::Status(
        why.code(), absl::StrCat("the job lost rank ", peer, " (group ", feeding_.group_rank(peer),
                                 "): ", what, " (", why.message(), ")"));
  }

  // Which rank the job lost first. This rank may have lost a rank that left because of an
  // earlier loss (its group's feed was cut, or its own watch lost someone), so the ranks agree
  // through the job's store: the first loss reported there is the one every rank names. A rank
  // reports before it leaves, so a rank that left because of a loss is reported only after that
  // loss — and a rank that saw a peer's connection close first gives that peer kCloseGrace to
  // report what made it leave (a Gloo timeout closes a rank's connections before it can report).
  // The first report thus names a rank that died, stalled or failed on its own. When the store
  // is rank 0's and has gone, rank 0 is lost; when it does not answer within twice the beat
  // interval, rank 0 is stalled. The report runs on a thread of its own, left behind if the
  // store never answers (the process is leaving).
  absl::Status Attribute(int peer, const absl::Status& why) {
    const absl::Status own = Lost(peer, why);
    const std::string mine = absl::StrCat(own.message(), ", first seen by rank ", comm_->rank());
    struct Answer {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;   // guarded by mu
      std::string first;   // guarded by mu: the first loss reported
      absl::Status store;  // guarded by mu: the store's error, if it failed
    };
    auto answer = std::make_shared<Answer>();
    const bool closed = absl::IsUnavailable(why);
    std::thread([store = store_, answer, mine, closed, patience = interval_] {
      absl::StatusOr<std::string> first = absl::NotFoundError("");
      if (closed) first = store->Get("watch/first-loss", kCloseGrace);
      if (!first.ok() && !absl::IsUnavailable(first.status())) {
        absl::StatusOr<int64_t> order = store->Add("watch/losses", 1);
        if (!order.ok()) {
          first = order.status();
        } else if (*order == 1) {
          absl::Status set = store->Set("watch/first-loss", mine);
          first = set.ok() ? absl::StatusOr<std::string>(mine) : set;
        } else {
          first = store->Get("watch/first-loss", patience);
        }
      }
      std::lock_guard<std::mutex> lock(answer->mu);
      if (first.ok()) answer->first = *first;
      answer->store = first.status();
      answer->done = true;
      answer->cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(answer->mu);
    answer->cv.wait_for(lock, kCloseGrace + 2 * interval_, [&] { return answer->done; });
    const std::string also =
        absl::StrCat("this rank then lost rank ", peer, " (group ", feeding_.group_rank(peer),
                     ") as well (", why.message(), ")");
    if (answer->done && !answer->first.empty()) {
      if (answer->first == mine) return own;
      if (absl::StartsWith(answer->first, absl::StrCat("the job lost rank ", peer, " ("))) {
        return absl::Status(own.code(), answer->first);  // the same loss, seen first elsewhere
      }
      return absl::Status(own.code(), absl::StrCat(answer->first, "; ", also));
    }
    if (!store_on_rank0_ || peer == 0) return own;
    if (answer->done && absl::IsUnavailable(answer->store)) {
      return absl::UnavailableError(absl::StrCat(
          "the job lost rank 0 (group ", feeding_.group_rank(0),
          "): the rendezvous store it serves is gone (", answer->store.message(), "); ", also));
    }
    if (!answer->done) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the job lost rank 0 (group ", feeding_.group_rank(0),
          "): the rendezvous store it serves did not answer within ",
          std::chrono::duration<double>(kCloseGrace + 2 * interval_).count(), " s; ", also));
    }
    return own;
  }

  // Constant after Start.
  const std::unique_ptr<comm::Communicator> comm_;  // used by the thread only
  const std::shared_ptr<comm::Store> store_;        // the job's (thread-safe)
  const bool store_on_rank0_;  // served by rank 0's process (ddpio's TCP store)
  const comm::GroupLayout feeding_;
  const std::chrono::milliseconds timeout_, interval_;
  std::thread thread_;  // set once, in Start

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                     // guarded by mu_
  bool hurry_ = false;                    // guarded by mu_: beat now, not after the interval
  bool finished_ = false;                 // guarded by mu_: this rank has fed everything
  bool ended_ = false;                    // guarded by mu_: the thread has returned its verdict
  uint64_t started_ = 0, completed_ = 0;  // guarded by mu_: beats
  absl::Status status_;                   // guarded by mu_
};

double UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// The concurrent full-decode ceiling (bench_ceiling.h) measured as the job feeds: every rank of
// the job decodes at once, each with as many decoders as its loaders have workers — all the job's
// decoders together, as while the epochs run. One thread (the feeding loop's) uses it.
class JobCeiling {
 public:
  // `n`: n records spread over the dataset decoded each round (0: no ceiling, Round does nothing);
  // `threads`: this rank's decoders (0 when it decodes nothing); `dataset`: its own, or null on a
  // rank that reads none — a member decoding the records it is sent then opens `pipeline.data`
  // itself, with the pipeline's object-store settings (its errors). `timeout` bounds each
  // barrier; `explain` turns a failed one into the job's loss.
  static absl::StatusOr<std::unique_ptr<JobCeiling>> Make(
      comm::Communicator& world, const PipelineOptions& pipeline,
      const storage::DatasetReader* dataset, uint64_t n, int threads,
      std::chrono::milliseconds timeout, std::function<absl::Status(const absl::Status&)> explain) {
    auto c =
        std::unique_ptr<JobCeiling>(new JobCeiling(world, n, threads, timeout, std::move(explain)));
    c->images_ = dataset;
    if (n > 0 && threads > 0 && dataset == nullptr) {
      storage::ReaderOptions ro;
      ro.store_settings = pipeline.store_settings;
      ro.store_overrides = pipeline.store_overrides;
      absl::StatusOr<std::unique_ptr<storage::DatasetReader>> opened =
          storage::DatasetReader::Open(pipeline.data, ro);
      if (!opened.ok()) return Annotate(opened.status(), "opening the dataset for the ceiling");
      c->own_ = *std::move(opened);
      c->images_ = c->own_.get();
    }
    return c;
  }

  // One round (before epoch `round`, or after the last): this rank's images loaded, then every
  // rank meets the others at a barrier over the world so that all decoders start together,
  // decodes, and meets them again so that no rank starts feeding while another still decodes. A
  // rank without decoders decodes nothing (0) but meets the others all the same. The barriers wait
  // at most the timeout: a lost or stalled rank fails every rank, the error naming it.
  absl::Status Round(int round) {
    if (n_ == 0) return absl::OkStatus();
    CeilingImages images;
    if (threads_ > 0) {
      absl::StatusOr<CeilingImages> loaded = LoadCeilingImages(*images_, n_);
      if (!loaded.ok()) return Annotate(loaded.status(), "loading the ceiling's images");
      images = *std::move(loaded);
    }
    auto barrier = [&](const char* when) {
      const absl::Status st = world_.Barrier(timeout_);
      return st.ok() ? st
                     : explain_(Annotate(st, absl::StrCat("waiting for every rank ", when,
                                                          " ceiling round ", round)));
    };
    DDPIO_RETURN_IF_ERROR(barrier("before"));
    start_unix_.push_back(UnixSeconds(std::chrono::system_clock::now()));
    DDPIO_ASSIGN_OR_RETURN(const double rate,
                           ConcurrentFullDecodeRate(images, /*without_markers=*/true, threads_));
    end_unix_.push_back(UnixSeconds(std::chrono::system_clock::now()));
    rates_.push_back(rate);
    return barrier("after");
  }

  // The ceiling's fields of the rank's result: the rounds (rates and wall-time spans), their
  // median, the decoders, and each epoch's rate against the mean of the rounds around it (ratio:
  // their median). Without decoders, or without a ceiling (no rounds), the ratios are null.
  nlohmann::json Json(const std::vector<double>& epoch_rates) const {
    nlohmann::json j{{"ceiling_images_per_s",
                      rates_.empty() ? nlohmann::json() : nlohmann::json(Median(rates_))},
                     {"ceiling_rounds_images_per_s", rates_},
                     {"ceiling_round_start_unix_s", start_unix_},
                     {"ceiling_round_end_unix_s", end_unix_},
                     {"ceiling_threads", threads_},
                     {"ratio", nullptr},
                     {"epoch_ratios", nullptr}};
    if (threads_ > 0 && !rates_.empty()) {
      const std::vector<double> ratios = EpochRatios(epoch_rates, rates_);
      j["ratio"] = Median(ratios);
      j["epoch_ratios"] = ratios;
    }
    return j;
  }

 private:
  JobCeiling(comm::Communicator& world, uint64_t n, int threads, std::chrono::milliseconds timeout,
             std::function<absl::Status(const absl::Status&)> explain)
      : world_(world), n_(n), threads_(threads), timeout_(timeout), explain_(std::move(explain)) {}

  comm::Communicator& world_;
  const uint64_t n_;
  const int threads_;
  const std::chrono::milliseconds timeout_;
  const std::function<absl::Status(const absl::Status&)> explain_;
  std::unique_ptr<storage::DatasetReader> own_;        // set once, in Make
  const storage::DatasetReader* images_ = nullptr;     // set once, in Make
  std::vector<double> rates_, start_unix_, end_unix_;  // a round each: its rate, its decoding
};

}  // namespace

absl::StatusOr<nlohmann::json> BenchFeed(const BenchFeedOptions& o) {
  DDPIO_ASSIGN_OR_RETURN(comm::RankInfo info, comm::DiscoverRank(comm::CurrentEnvironment()));
  // Arguments first, before the network: every rank fails the same way at once.
  const PipelineOptions& po = o.pipeline;
  DDPIO_RETURN_IF_ERROR(Pipeline::Check(info, po));
  if (o.epochs < 1) return absl::InvalidArgumentError("--epochs must be >= 1");
  std::ofstream indices;
  if (!o.indices_out.empty()) {
    const std::string path = absl::StrCat(o.indices_out, ".rank", info.rank, ".txt");
    indices.open(path, std::ios::trunc);
    if (!indices) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  }
  comm::RendezvousOptions ro;
  ro.store = o.store;
  ro.advertise_addr = o.advertise_addr;
  DDPIO_ASSIGN_OR_RETURN(ro.backend,
                         comm::ParseBackend(o.backend));  // nccl without a device: fails here
  DDPIO_ASSIGN_OR_RETURN(auto job, JoinJob(info, ro, po.timeout));  // every wait honours --timeout
  comm::LeaveGuard leave(*job);
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> feeder, Pipeline::Open(*job, po));
  const bool leader = feeder->is_leader();
  // Groups do not talk to each other while they feed: the watch ends the job everywhere when a
  // rank is lost anywhere (one group: its own feeder sees every loss).
  std::unique_ptr<WorldWatch> watch;
  if (feeder->layout().group_ws() > 1) {
    DDPIO_ASSIGN_OR_RETURN(
        watch, WorldWatch::Start(*job, /*store_on_rank0=*/o.store.empty() && !info.agent_store,
                                 feeder->layout(), po.timeout));
  }
  // Where the batches arrive: device memory when the group moves decoded batches over NCCL.
  const bool device = job->backend().kind == comm::BackendKind::kNccl &&
                      po.payload == broadcast::FeedPayload::kDecoded;
  if (info.rank == 0) {
    DDPIO_LOG(INFO) << "bench feed: " << job->backend().why << "; " << info.world_size
                    << " ranks in groups of " << po.group_size << " ("
                    << comm::LayoutKindName(po.layout) << "), " << broadcast::FeedModeName(po.mode)
                    << ", " << broadcast::FeedPayloadName(po.payload) << " payload, "
                    << (po.readers == broadcast::FeedReaders::kAll ? "every rank reading"
                                                                   : "leaders reading")
                    << (po.mode == broadcast::FeedMode::kReplicate &&
                                po.readers == broadcast::FeedReaders::kLeader
                            ? absl::StrCat(" (", broadcast::FeedRelayName(po.relay), " relay)")
                            : std::string())
                    << ", " << feeder->dataset_size() << " samples, " << o.epochs << " epoch(s)";
  }
  // A feeder error caused by a rank lost elsewhere is reported as that loss.
  auto failed = [&](const absl::Status& st) { return watch != nullptr ? watch->Explain(st) : st; };
  // With one group there is no watch: the job's heartbeats name the rank that vanished.
  DDPIO_ASSIGN_OR_RETURN(
      std::unique_ptr<JobCeiling> ceiling,
      JobCeiling::Make(job->world(), po, feeder->dataset(), o.ceiling_images,
                       feeder->counters().decode_threads, po.timeout, [&](const absl::Status& st) {
                         return watch != nullptr ? watch->Explain(st) : job->WithCensus(st);
                       }));
  uint64_t valid = 0;
  std::vector<double> epoch_rates;  // each epoch from its first Next(), as bench loader measures
  // Each epoch's span in wall time (ranks' spans line up across processes), and the seconds the
  // epochs took: feeding only, not the ceiling rounds between them.
  std::vector<double> epoch_start_unix, epoch_end_unix;
  double seconds = 0;
  for (int e = 0; e < o.epochs; ++e) {
    DDPIO_RETURN_IF_ERROR(ceiling->Round(e));
    const auto t0 = Clock::now();
    epoch_start_unix.push_back(UnixSeconds(std::chrono::system_clock::now()));
    if (absl::Status st = feeder->StartEpoch(e); !st.ok()) return failed(st);
    const uint64_t images_before = feeder->counters().images;
    const auto epoch_start = Clock::now();
    for (;;) {
      if (watch != nullptr) DDPIO_RETURN_IF_ERROR(watch->status());
      absl::StatusOr<loader::Batch> b = feeder->Next();
      if (absl::IsOutOfRange(b.status())) break;
      if (!b.ok()) return failed(b.status());
      for (uint64_t k = 0; k < b->size; ++k) {
        valid += b->valid[k];
        if (indices.is_open()) indices << b->indices[k] << '\n';
      }
    }
    const auto end = Clock::now();
    epoch_end_unix.push_back(UnixSeconds(std::chrono::system_clock::now()));
    seconds += std::chrono::duration<double>(end - t0).count();
    epoch_rates.push_back((feeder->counters().images - images_before) /
                          std::chrono::duration<double>(end - epoch_start).count());
  }
  DDPIO_RETURN_IF_ERROR(ceiling->Round(o.epochs));
  if (indices.is_open()) {
    indices.flush();
    if (!indices)
      return absl::ResourceExhaustedError(
          absl::StrCat("writing ", o.indices_out, ".rank", info.rank, ".txt failed"));
  }
  const broadcast::FeederCounters c = feeder->counters();
  const std::optional<storage::remote::RemoteCounters> store = feeder->store_counters();
  feeder.reset();
  if (watch != nullptr) DDPIO_RETURN_IF_ERROR(watch->Finish());  // every rank has fed everything
  watch.reset();
  DDPIO_RETURN_IF_ERROR(job->world().Barrier(po.timeout));
  nlohmann::json j{{"rank", info.rank},
                   {"world", info.world_size},
                   {"leader", leader},
                   {"epochs", o.epochs},
                   {"images", c.images},
                   {"valid_images", valid},
                   {"batches", c.batches},
                   {"seconds", seconds},
                   // The job's aggregate rate: all images / the job's span, from the first
                   // epoch's start to the last one's end — the ceiling rounds between epochs
                   // included; over each epoch's own span (max end - min start of the ranks'
                   // epoch_start_unix_s / epoch_end_unix_s) without them.
                   {"start_unix_s", epoch_start_unix.front()},
                   {"end_unix_s", epoch_end_unix.back()},
                   {"epoch_start_unix_s", epoch_start_unix},
                   {"epoch_end_unix_s", epoch_end_unix},
                   {"images_per_s", c.images / seconds},
                   {"epoch_images_per_s", epoch_rates},
                   {"backend", comm::BackendName(job->backend().kind)},
                   {"path", device ? "gpu" : "cpu"}};
  j.update(SettingsJson(
      po, {"group_size", "layout", "mode", "payload", "readers", "relay", "batch_size", "seed"}));
  j.update(ceiling->Json(epoch_rates));
  j.update(FeederCountersJson(c));
  if (store.has_value()) j["store"] = StoreCountersJson(*store);
  leave.Succeeded();
  return j;
}

nlohmann::json FeederCountersJson(const broadcast::FeederCounters& c) {
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& s : c.skipped) skipped.push_back({{"index", s.index}, {"reason", s.reason}});
  return nlohmann::json{{"time_to_first_batch_s", c.time_to_first_batch_ns / 1e9},
                        {"records_read", c.records_read},
                        {"bytes_read", c.bytes_read},
                        {"bytes_sent", c.bytes_sent},
                        {"bytes_received", c.bytes_received},
                        {"network_wait_s", c.network_wait_ns / 1e9},
                        {"loader_wait_s", c.loader_wait_ns / 1e9},
                        {"bad_samples", c.bad_samples},
                        {"skipped", skipped},
                        {"reads_directly", c.direct}};
}

std::string SkippedText(const nlohmann::json& j) {
  if (!j.contains("bad_samples") || j["bad_samples"].get<uint64_t>() == 0) return "";
  std::string text =
      absl::StrFormat("  skipped %d bad sample(s)%s:\n", j["bad_samples"].get<uint64_t>(),
                      j["bad_samples"].get<uint64_t>() > j["skipped"].size() ? ", the first" : "");
  for (const auto& s : j["skipped"])
    absl::StrAppendFormat(&text, "    %s\n", s["reason"].get<std::string>());
  return text;
}

namespace {

// The ceiling's lines of a rank's text: what it is, and the rank's rate against it.
std::string CeilingText(const nlohmann::json& j) {
  if (!j.contains("ceiling_threads")) return "";
  if (j["ceiling_rounds_images_per_s"].empty())
    return "  ceiling       not measured (--ceiling-images 0)\n";
  if (j["ceiling_threads"].get<int>() == 0) {
    return "  ceiling       none: this rank decodes nothing (its leader sends it decoded batches); "
           "it waits while the others measure theirs\n";
  }
  // A leader that decodes its peers' shares too: its own images/s is one share of that work.
  const bool for_group = j["leader"].get<bool>() && j["payload"] == "decoded" &&
                         j["mode"] == "shard" && j["readers"] == "leader" &&
                         j["group_size"].get<int>() > 1;
  return absl::StrFormat(
      "  ceiling       %.0f images/s: tjDecompress2 full decodes by %d decoder(s) at once on this "
      "rank (its loaders' workers) while every rank of the job decodes, before each epoch and "
      "after the last (median of %d rounds)\n"
      "  ratio         %.2f of the ceiling (median of each epoch against the ceilings around "
      "it)%s\n",
      j["ceiling_images_per_s"].get<double>(), j["ceiling_threads"].get<int>(),
      j["ceiling_rounds_images_per_s"].size(), j["ratio"].get<double>(),
      for_group ? "; this rank decodes its group's images, the ratio counts its own only" : "");
}

}  // namespace

std::string BenchFeedText(const nlohmann::json& j) {
  return absl::StrFormat(
             "bench feed rank %d (%s, %s%s): %.0f images/s, %d images in %.2f s; read %d records "
             "(%.1f MB); sent %.1f MB, "
             "received %.1f MB; waited %.2f s on the network, %.2f s on the feeder\n",
             j["rank"].get<int>(), j["leader"].get<bool>() ? "leader" : "peer",
             j["path"].get<std::string>(),
             j.value("reads_directly", false) ? ", reads directly: a group of one" : "",
             j["images_per_s"].get<double>(), j["images"].get<uint64_t>(),
             j["seconds"].get<double>(), j["records_read"].get<uint64_t>(),
             j["bytes_read"].get<uint64_t>() / 1e6, j["bytes_sent"].get<uint64_t>() / 1e6,
             j["bytes_received"].get<uint64_t>() / 1e6, j["network_wait_s"].get<double>(),
             j["loader_wait_s"].get<double>()) +
         CeilingText(j) + SkippedText(j);
}

}  // namespace ddpio::tools
