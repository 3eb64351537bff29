#include "ddpio/storage/internal/lmdb_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::storage::internal {
namespace {

// LMDB 0.9's on-disk meta page (64-bit build, as Debian's liblmdb0): a 16-byte page header,
// then MDB_meta — magic u32, version u32, address u64, mapsize u64, two MDB_db of 48 bytes
// (pad u32 — the page size in the free-list DB's —, flags u16, depth u16, branch, leaf and
// overflow page counts, entries, root: u64 each), last page u64, txnid u64.
constexpr uint32_t kMagic = 0xBEEFC0DE;
constexpr uint32_t kVersion = 1;
constexpr size_t kPageHeader = 16;
constexpr size_t kMagicAt = kPageHeader, kVersionAt = kPageHeader + 4;
constexpr size_t kDbsAt = kPageHeader + 24, kDbBytes = 48, kRootInDb = 40;
constexpr size_t kLastPageAt = kDbsAt + 2 * kDbBytes, kTxnidAt = kLastPageAt + 8;
constexpr size_t kMetaEnd = kTxnidAt + 8;
constexpr uint16_t kMetaFlag = 0x08;
constexpr uint64_t kInvalidPage = ~uint64_t{0};

uint16_t U16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t U64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

struct Meta {
  uint32_t page_size = 0;
  uint64_t last_page = 0, txnid = 0, roots[2] = {0, 0};
};

absl::StatusOr<Meta> ReadMeta(const uint8_t* page, int which, const std::string& path) {
  const std::string where = absl::StrCat(path, ": meta page ", which);
  if (U32(page + kMagicAt) != kMagic) {
    return absl::DataLossError(
        absl::StrCat(where, " has no LMDB magic: not an LMDB file, or its header is damaged"));
  }
  const uint32_t version = U32(page + kVersionAt);
  if (version != kVersion) {
    return absl::FailedPreconditionError(absl::StrCat(where, ": LMDB format version ", version,
                                                      ", this build reads version ", kVersion));
  }
  if ((U16(page + 10) & kMetaFlag) == 0) {
    return absl::DataLossError(absl::StrCat(where, " is not marked as a meta page"));
  }
  Meta m;
  m.page_size = U32(page + kDbsAt);  // the free-list DB's pad holds the page size
  m.last_page = U64(page + kLastPageAt);
  m.txnid = U64(page + kTxnidAt);
  for (int d = 0; d < 2; ++d) m.roots[d] = U64(page + kDbsAt + d * kDbBytes + kRootInDb);
  if (m.page_size < 512 || m.page_size > 65536 || (m.page_size & (m.page_size - 1)) != 0) {
    return absl::DataLossError(
        absl::StrCat(where, " names a page size of ", m.page_size, " bytes"));
  }
  if (m.last_page < 1)
    return absl::DataLossError(absl::StrCat(where, " names last page ", m.last_page));
  for (int d = 0; d < 2; ++d) {
    if (m.roots[d] != kInvalidPage && (m.roots[d] < 2 || m.roots[d] > m.last_page)) {
      return absl::DataLossError(absl::StrCat(where, ": database ", d, " has its root at page ",
                                              m.roots[d], ", outside pages 2..", m.last_page));
    }
  }
  return m;
}

}  // namespace

absl::StatusOr<LmdbLayout> CheckLmdbHeader(absl::Span<const uint8_t> head, uint64_t file_bytes,
                                           const std::string& path) {
  if (head.size() < kMetaEnd) {
    return absl::DataLossError(
        absl::StrCat(path, " is ", file_bytes,
                     " bytes: not an LMDB dataset file, or one cut short (an LMDB file "
                     "starts with two meta pages)"));
  }
  DDPIO_ASSIGN_OR_RETURN(Meta first, ReadMeta(head.data(), 0, path));
  const uint64_t psize = first.page_size;
  if (head.size() < psize + kMetaEnd) {
    return absl::DataLossError(absl::StrCat("dataset file ", path, " is truncated: ", file_bytes,
                                            " bytes, less than its ", "two meta pages of ", psize,
                                            " bytes — was the copy interrupted?"));
  }
  DDPIO_ASSIGN_OR_RETURN(Meta second, ReadMeta(head.data() + psize, 1, path));
  if (second.page_size != psize) {
    return absl::DataLossError(absl::StrCat(path, ": the meta pages disagree on the page size (",
                                            psize, " and ", second.page_size, ")"));
  }
  const Meta& newest = second.txnid > first.txnid ? second : first;
  LmdbLayout layout;
  layout.page_size = static_cast<uint32_t>(psize);
  layout.last_page = newest.last_page;
  layout.txnid = newest.txnid;
  if (newest.last_page > (uint64_t{1} << 50) / psize) {
    return absl::DataLossError(
        absl::StrCat(path, ": meta page names last page ", newest.last_page, " (absurd)"));
  }
  layout.needed_bytes = (newest.last_page + 1) * psize;
  if (file_bytes < layout.needed_bytes) {
    return absl::DataLossError(absl::StrCat("dataset file ", path, " is truncated: ", file_bytes,
                                            " of ", layout.needed_bytes,
                                            " bytes — was the copy interrupted?"));
  }
  return layout;
}

absl::StatusOr<LmdbLayout> CheckLmdbFile(const std::string& data_file) {
  const int fd = ::open(data_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("opening ", data_file));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoToStatus(err, absl::StrCat("stat ", data_file));
  }
  std::vector<uint8_t> head(
      std::min<uint64_t>(static_cast<uint64_t>(st.st_size), kLmdbHeaderBytes));
  size_t got = 0;
  while (got < head.size()) {
    const ssize_t n = ::pread(fd, head.data() + got, head.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  head.resize(got);
  return CheckLmdbHeader(head, static_cast<uint64_t>(st.st_size), data_file);
}

}  // namespace ddpio::storage::internal
