#include "interruptible.h"

#include <pybind11/pybind11.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ddpio::python {

namespace py = pybind11;

void RunInterruptibly(const std::function<void()>& work, std::atomic<bool>& cancel) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;  // guarded by mu
  std::thread worker([&] {
    work();
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  });
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return done; })) {
      if (interrupted) continue;  // given up: the work is ending, wait for it
      lock.unlock();
      {
        py::gil_scoped_acquire gil;
        // A raising handler leaves its exception set on this thread, raised below.
        interrupted = PyErr_CheckSignals() != 0;
      }
      if (interrupted) cancel.store(true);
      lock.lock();
    }
  }
  worker.join();
  if (interrupted) throw py::error_already_set();
}

}  // namespace ddpio::python
