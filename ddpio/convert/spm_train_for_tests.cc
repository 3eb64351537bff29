#include "ddpio/convert/spm_train_for_tests.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <vector>

#ifndef DDPIO_SENTENCEPIECE_VERSION
#define DDPIO_SENTENCEPIECE_VERSION ""
#endif

namespace ddpio::testing {
namespace {

bool ReadWholeFile(const std::string& path, std::string* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

bool WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  return !out.fail();
}

// FNV-1a, 64 bits, over length-prefixed fields: enough to tell apart inputs that differ by
// accident (nobody here forges a collision).
class Fingerprint {
 public:
  void Add(std::string_view field) {
    const uint64_t size = field.size();
    for (int i = 0; i < 8; ++i) Mix(static_cast<unsigned char>(size >> (8 * i)));
    for (char c : field) Mix(static_cast<unsigned char>(c));
  }
  std::string Hex() const {
    char out[17];
    std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(hash_));
    return out;
  }

 private:
  void Mix(unsigned char byte) { hash_ = (hash_ ^ byte) * 0x100000001b3ULL; }
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

// The files of the SentencePiece libraries loaded in this process (none when linked statically).
std::vector<std::string> SentencePieceLibraries() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string_view name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (name.find("sentencepiece") != std::string_view::npos) {
          static_cast<std::vector<std::string>*>(out)->emplace_back(name);
        }
        return 0;
      },
      &paths);
  return paths;
}

// An exclusive flock on `path` while alive; none when `path` is empty or cannot be locked (then
// two processes may both train, which costs time but nothing else).
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    if (path.empty()) return;
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    int rc;
    do {
      rc = flock(fd_, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

bool IsModelOf(const std::string& bytes, int vocab_size) {
  sentencepiece::SentencePieceProcessor processor;
  return !bytes.empty() && processor.LoadFromSerializedProto(bytes).ok() &&
         processor.GetPieceSize() == vocab_size;
}

}  // namespace

std::string TrainSentencePiece(const std::string& input, int vocab_size,
                               const std::string& cache_dir, const std::string& model) {
  // Everything that decides the model but the input's name, which does not.
  const std::string options = "--model_type=unigram --vocab_size=" + std::to_string(vocab_size) +
                              " --num_threads=2 --input_sentence_size=200000 --minloglevel=2";
  std::string text;
  if (!ReadWholeFile(input, &text)) return "cannot read " + input;
  Fingerprint key;
  key.Add(text);
  key.Add(options);
  key.Add(DDPIO_SENTENCEPIECE_VERSION);
  for (const std::string& library : SentencePieceLibraries()) {
    std::string bytes;
    if (!ReadWholeFile(library, &bytes)) return "cannot read " + library;
    key.Add(bytes);
  }

  std::string cached;
  if (!cache_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    if (!ec) cached = cache_dir + "/spm-" + key.Hex() + ".model";
  }
  const FileLock lock(cached.empty() ? "" : cached + ".lock");
  std::string bytes;
  if (!cached.empty() && ReadWholeFile(cached, &bytes) && IsModelOf(bytes, vocab_size)) {
    return WriteWholeFile(model, bytes) ? "" : "cannot write " + model;
  }

  bytes.clear();
  const auto status = sentencepiece::SentencePieceTrainer::Train("--input=" + input + " " + options,
                                                                 nullptr, &bytes);
  if (!status.ok()) return status.ToString();
  if (!WriteWholeFile(model, bytes)) return "cannot write " + model;
  if (!cached.empty()) {
    const std::string temporary = cached + "." + std::to_string(getpid()) + ".tmp";
    std::error_code ec;
    if (WriteWholeFile(temporary, bytes)) std::filesystem::rename(temporary, cached, ec);
    std::filesystem::remove(temporary, ec);
  }
  return "";
}

}  // namespace ddpio::testing
