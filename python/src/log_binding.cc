// ddpio._ddpio log forwarding: the C++ core's log lines go to Python's `logging` (logger "ddpio")
// instead of stderr. The core's threads never touch Python: they append to a bounded queue here
// (the oldest lines are dropped past kMaxLines, and the drop is counted); a Python thread
// (ddpio/_logging.py) takes them with take_log_records() — which waits without the GIL — and
// logs them.
#include <fcntl.h>
#include <pthread.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "bindings.h"
#include "ddpio/common/log.h"
#include "text.h"

namespace ddpio::python {

namespace py = pybind11;

namespace {

constexpr size_t kMaxLines = 10000;

struct Line {
  int level;  // Python's logging level
  std::string where;
  int rank;
  std::string message;
};

// The Python thread waits on `wake` (a pipe's read end, with os.read: a wait in C++ code would be
// torn down by the interpreter's exit under a daemon thread, which ends the process), then takes
// the lines without waiting.
struct Queue {
  Queue() {
    if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) wake[0] = wake[1] = -1;
  }
  std::mutex mu;
  std::deque<Line> lines;  // guarded by mu
  uint64_t dropped = 0;    // guarded by mu
  int wake[2];             // a byte is written when `lines` becomes non-empty
};

// Never destroyed: core threads may log during exit. A forked child gets a new one (its copy of
// the mutex may have been held by a thread that does not exist in the child).
std::atomic<Queue*> g_queue{new Queue()};

Queue& TheQueue() { return *g_queue.load(); }

void NewQueueInChild() { g_queue.store(new Queue()); }

int PythonLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 10;
    case LogLevel::kInfo:
      return 20;
    case LogLevel::kWarning:
      return 30;
    case LogLevel::kError:
      return 40;
  }
  return 40;
}

void Enqueue(LogLevel level, const char* where, int rank, const std::string& message) {
  Queue& q = TheQueue();
  {
    std::lock_guard<std::mutex> lock(q.mu);
    if (q.lines.size() >= kMaxLines) {
      q.lines.pop_front();
      ++q.dropped;
    }
    q.lines.push_back(Line{PythonLevel(level), where, rank, message});
    if (q.lines.size() == 1 && q.wake[1] >= 0) {
      const char byte = 1;
      ssize_t unused = ::write(q.wake[1], &byte, 1);  // a full pipe already wakes the reader
      (void)unused;
    }
  }
}

}  // namespace

void BindLog(py::module_& m) {
  m.def(
      "forward_logs",
      [] {
        static std::once_flag once;
        std::call_once(once, [] { pthread_atfork(nullptr, nullptr, &NewQueueInChild); });
        SetLogSink(&Enqueue);
        return TheQueue().wake[0];
      },
      "Sends the core's log lines to the queue take_log_records() empties, instead of stderr; "
      "returns "
      "the file descriptor that becomes readable when lines wait (-1: none, poll instead).");
  m.def(
      "take_log_records",
      [] {
        std::vector<Line> lines;
        uint64_t dropped = 0;
        {
          Queue& q = TheQueue();
          std::lock_guard<std::mutex> lock(q.mu);
          char drain[256];
          while (q.wake[0] >= 0 && ::read(q.wake[0], drain, sizeof(drain)) > 0) {
          }
          lines.assign(std::make_move_iterator(q.lines.begin()),
                       std::make_move_iterator(q.lines.end()));
          q.lines.clear();
          dropped = q.dropped;
          q.dropped = 0;
        }
        // A line may quote a path that is not UTF-8 (bytes on Linux): escaped, never a
        // UnicodeDecodeError, which would end the thread forwarding every later line.
        py::list out;
        for (const Line& l : lines)
          out.append(py::make_tuple(l.level, MessageStr(l.where), l.rank, MessageStr(l.message)));
        return py::make_tuple(out, dropped);
      },
      "The waiting log lines, without waiting: ([(level, where, rank, message)], lines dropped "
      "since the "
      "last call because the queue was full).");
}

}  // namespace ddpio::python
