#include "ddpio/common/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace ddpio {
namespace {

LogLevel LevelFromEnv() {
  const char* env = std::getenv("DDPIO_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  std::string v(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warning") return LogLevel::kWarning;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int> g_rank{-1};
std::atomic<LogSink> g_sink{nullptr};
std::atomic<int> g_level{static_cast<int>(LevelFromEnv())};

const char* Basename(const char* file) {
  // Keep "module/file.cc": strip everything before the second-to-last '/'.
  const char* last = std::strrchr(file, '/');
  if (last == nullptr) return file;
  const char* p = last;
  while (p > file && *(p - 1) != '/') --p;
  return p;
}

}  // namespace

void SetLogRank(int rank) { g_rank.store(rank); }
void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }
void SetLogSink(LogSink sink) { g_sink.store(sink); }

namespace internal {

LogMessage::LogMessage(LogLevel level, const char* file, int line)
    : level_(level), file_(file), line_(line) {
  if (g_sink.load() != nullptr) return;  // the sink gets the parts, not the prefixed line
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E'};
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm local;
  localtime_r(&tv.tv_sec, &local);
  char when[32];
  std::snprintf(when, sizeof(when), "%02d%02d %02d:%02d:%02d.%03d", local.tm_mon + 1, local.tm_mday,
                local.tm_hour, local.tm_min, local.tm_sec, static_cast<int>(tv.tv_usec / 1000));
  stream_ << kLetters[static_cast<int>(level_)] << when << " rank ";
  int rank = g_rank.load();
  if (rank < 0) {
    stream_ << '-';
  } else {
    stream_ << rank;
  }
  stream_ << ' ' << Basename(file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  if (LogSink sink = g_sink.load(); sink != nullptr) {
    const std::string where = std::string(Basename(file_)) + ":" + std::to_string(line_);
    sink(level_, where.c_str(), g_rank.load(), stream_.str());
    return;
  }
  stream_ << '\n';
  std::string text = stream_.str();
  // One write per line: lines from concurrent threads and processes stay whole.
  ssize_t unused = ::write(STDERR_FILENO, text.data(), text.size());
  (void)unused;
}

}  // namespace internal
}  // namespace ddpio
