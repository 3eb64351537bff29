// What a token conversion reads: documents of token ids, random access, from three kinds of source
// (source_kind.h):
//
//   megatron  Megatron-LM's indexed dataset, PREFIX.bin + PREFIX.idx (megatron_index.h), taken as
//             is: document i is sequence i. Ids of an 8- or 16-bit dtype are stored 2 bytes wide,
//             of a 32- or 64-bit dtype 4 bytes wide (a negative id, or one over 2^32 - 1, is
//             DataLoss naming the sequence).
//   tokens    a flat file of ids back to back (nanoGPT's train.bin: raw, of the dtype given) or a
//             1-D .npy (its own dtype), split into documents after every EOS id. Without an EOS
//             the file has no document boundaries: it is cut into documents of
//             kUnmarkedDocumentTokens ids and the dataset says so (eos_id -1).
//   jsonl     JSON lines (a file, or a folder of *.jsonl / *.json files, sorted by path), one
//             document per non-blank line: its text field tokenized with a SentencePiece model,
//             then the model's EOS id (or the one given) appended — the ids SentencePiece's own
//             encode gives for the same text.
//
// Everything is read with pread from regular files (never mapped: a file cut short under a
// conversion is an error, not a SIGBUS). Opening reads each source's index once: the .idx, the
// EOS positions of a flat file, the line starts of JSON lines (O(documents) memory).
//
// Thread-safety: a DocumentSource's const methods may be called from any thread; Read with
// distinct `worker` numbers concurrently (each worker keeps its own tokenizer).
#ifndef DDPIO_CONVERT_TOKEN_SOURCES_H_
#define DDPIO_CONVERT_TOKEN_SOURCES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::convert {

// A flat file without EOS is cut into documents of this many ids.
inline constexpr uint64_t kUnmarkedDocumentTokens = 65536;
// The longest document a conversion takes: 256 Mi ids (a longer one in a flat file means a wrong
// EOS id; in a Megatron index, a damaged one). A longer one is refused before it is read.
inline constexpr uint64_t kMaxDocumentTokens = uint64_t{1} << 28;
// The longest JSON line read: a longer one is DataLoss (skippable), not read into memory.
inline constexpr uint64_t kMaxJsonLineBytes = uint64_t{64} << 20;

class DocumentSource {
 public:
  virtual ~DocumentSource() = default;

  virtual uint64_t size() const = 0;  // documents
  virtual int width() const = 0;      // bytes per stored id: 2 or 4
  // The id that ends every document, or -1 when documents have no end marker.
  virtual int64_t eos_id() const = 0;
  virtual uint64_t vocab_size() const = 0;  // ids are below it; 0: not known
  virtual std::string tokenizer() const { return ""; }
  virtual std::string kind() const = 0;       // "megatron", "tokens" or "jsonl"
  virtual std::string described() const = 0;  // what the user named
  // What a resumed conversion must find unchanged: the files (names, sizes, modification times)
  // and the options that change the ids.
  virtual std::string fingerprint() const = 0;
  virtual uint64_t source_files() const = 0;
  // How messages and the record's source name call document i ("wiki.jsonl:17", "train.bin#3").
  virtual std::string Name(uint64_t i) const = 0;

  // Document i's ids, width() bytes each little-endian, into *payload (replaced), using worker
  // `worker`'s state. DataLoss naming the document for a bad one (a line that is not JSON or has
  // no text, an id out of range, a file changed under the conversion); NotFound / PermissionDenied
  // from the filesystem.
  virtual absl::Status Read(uint64_t i, int worker, std::vector<uint8_t>* payload) const = 0;
};

// Megatron's PREFIX.bin / PREFIX.idx. NotFound naming the missing file; InvalidArgument /
// DataLoss from the index (megatron_index.h). `eos_id` (-1: none) is recorded, not appended.
absl::StatusOr<std::unique_ptr<DocumentSource>> OpenMegatronSource(const std::string& prefix,
                                                                   int64_t eos_id);

// A flat token file. `dtype` "uint16" or "uint32" for a raw file; for a .npy (by its magic) empty
// or the file's own (InvalidArgument when they differ). `eos_id` -1: no document boundaries.
absl::StatusOr<std::unique_ptr<DocumentSource>> OpenTokenFileSource(const std::string& path,
                                                                    const std::string& dtype,
                                                                    int64_t eos_id);

struct JsonlOptions {
  std::string tokenizer;            // the SentencePiece model (.model); required
  std::string text_field = "text";  // the field holding each document's text
  int64_t eos_id = -2;              // -2: the model's (none if it has none); -1: none; else this
  int workers = 1;                  // Read's worker numbers are below this
};
absl::StatusOr<std::unique_ptr<DocumentSource>> OpenJsonlSource(const std::string& path,
                                                                const JsonlOptions& options);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_TOKEN_SOURCES_H_
