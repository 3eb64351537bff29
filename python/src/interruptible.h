// Work that may wait long — joining a job, opening a dataset from a failing object store — run so
// that Ctrl-C still reaches Python. The work runs on a thread of its own while the calling thread
// (Python's main thread, where signal handlers run) looks for signals every 100 ms, the GIL
// released in between. A signal whose handler raises (KeyboardInterrupt) raises `cancel`, which
// ends the work's object-store requests at once (storage/s3 RetryPolicy::cancel); the work is
// still waited for — what it made (a job, connections, threads) is released in order, never left
// running behind Python's back — and then the handler's exception is raised. A wait the work
// cannot give up (a rendezvous, a group's connections) ends at its own timeout.
#ifndef DDPIO_PYTHON_SRC_INTERRUPTIBLE_H_
#define DDPIO_PYTHON_SRC_INTERRUPTIBLE_H_

#include <atomic>
#include <functional>

namespace ddpio::python {

// Called with the GIL held; `work` runs without it and must not throw.
void RunInterruptibly(const std::function<void()>& work, std::atomic<bool>& cancel);

}  // namespace ddpio::python

#endif  // DDPIO_PYTHON_SRC_INTERRUPTIBLE_H_
