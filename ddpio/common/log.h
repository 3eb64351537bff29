// A small logging helper (Abseil 20220623 has no absl/log).
//
// Every line goes to stderr in one write, so lines from threads and processes do not interleave:
//   I1122 10:40:06.123 rank 3 storage/dataset_writer.cc:120] grew LMDB map to 2.0 GiB
// The rank is set once by whoever knows it (the launcher or rank discovery); before that the
// line says "rank -". The level threshold comes from DDPIO_LOG_LEVEL (debug, info, warning,
// error; default info) and can be changed with SetLogLevel. Thread-safe.
//
//   DDPIO_LOG(INFO) << "opened " << path << " (" << count << " records)";
#ifndef DDPIO_COMMON_LOG_H_
#define DDPIO_COMMON_LOG_H_

#include <sstream>
#include <string>

namespace ddpio {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Sets the rank printed on every line; a negative rank prints "-".
void SetLogRank(int rank);
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

// Where lines go instead of stderr (the Python package hands them to Python's `logging`): called
// on the logging thread with the level, "module/file.cc:line", the rank (-1 unknown) and the
// message without prefix or newline. Must not block for long or log itself. nullptr restores
// stderr. Set it before threads log (a sink is not removed under a thread calling it).
using LogSink = void (*)(LogLevel level, const char* where, int rank, const std::string& message);
void SetLogSink(LogSink sink);

namespace internal {
// Turns `stream << ...` into void so both branches of DDPIO_LOG's ?: have one type.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};
}  // namespace internal
}  // namespace ddpio

#define DDPIO_LOG_LEVEL_DEBUG ::ddpio::LogLevel::kDebug
#define DDPIO_LOG_LEVEL_INFO ::ddpio::LogLevel::kInfo
#define DDPIO_LOG_LEVEL_WARNING ::ddpio::LogLevel::kWarning
#define DDPIO_LOG_LEVEL_ERROR ::ddpio::LogLevel::kError

// An expression, safe anywhere a statement is (also under an unbraced if): the stream is only
// built when the level is enabled.
#define DDPIO_LOG(level)                        \
  !::ddpio::LogEnabled(DDPIO_LOG_LEVEL_##level) \
      ? (void)0                                 \
      : ::ddpio::internal::LogVoidify() &       \
            ::ddpio::internal::LogMessage(DDPIO_LOG_LEVEL_##level, __FILE__, __LINE__).stream()

#endif  // DDPIO_COMMON_LOG_H_
