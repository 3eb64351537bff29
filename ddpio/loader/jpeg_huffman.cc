#include "ddpio/loader/jpeg_huffman.h"

// clang-format off
#include <jerror.h>
#include <jpegint.h>
// clang-format on

#include <array>
#include <atomic>
#include <cstring>

namespace ddpio::loader {
namespace {

std::atomic<bool> own_huffman_default{true};

constexpr int kLutBits = 11;   // symbol lookup: codes up to this long in one step
constexpr int kFastBits = 11;  // AC lookup: code and value bits up to this long in one step
// Coefficients per block in the batch buffer: the 64, then a slot that end-of-block stores go to.
constexpr int kStride = 72;
constexpr int kDummy = 64;
// An end-of-block advances k by this much: past 63 and past the 16 guard entries below.
constexpr int kEobRun = 79;
// k after a bit pattern that is no code (past anything an end-of-block reaches), and k of a
// stream that has not started a block yet.
constexpr int kBadCode = 1000;
constexpr int kFresh = 2000;
// Segments decoded per batch, and the most blocks a segment may hold (else libjpeg decodes).
constexpr int kBatchSegments = 16;
constexpr int kMaxSegmentBlocks = 1024;
// Zero bytes after a batch's data: a stream reads at most one block (64 codes of at most 31
// bits) and one 8-byte refill past its segment before the overrun check stops it.
constexpr size_t kPadBytes = 512;

// Zigzag position to natural position, then libjpeg's guard (a run past the block's end stores
// into coefficient 63, as jpeg_natural_order's extra entries do), then the end-of-block slot.
constexpr std::array<uint8_t, 64 + 16 + 64> kNatural = [] {
  constexpr uint8_t zigzag[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,
                                  12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28,
                                  35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
                                  58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};
  std::array<uint8_t, 64 + 16 + 64> t{};
  for (int i = 0; i < 64; ++i) t[i] = zigzag[i];
  for (int i = 64; i < 80; ++i) t[i] = 63;
  for (int i = 80; i < 144; ++i) t[i] = kDummy;
  return t;
}();

inline int Extend(uint32_t v, int s) {
  return v < (1u << (s - 1)) ? static_cast<int>(v) - (1 << s) + 1 : static_cast<int>(v);
}

// One Huffman table, decoded from libjpeg's JHUFF_TBL (bits[1..16], huffval).
struct Table {
  uint8_t bits[17] = {};
  uint8_t huffval[256] = {};
  bool valid = false;
  uint16_t lut[1 << kLutBits] = {};  // (length << 8) | symbol; 0: a longer code
  int32_t maxcode[18] = {};          // the largest code of each length, -1 for none
  int32_t valoffset[17] = {};        // symbol index = code + valoffset[length]
  // AC only: value << 16 | run << 8 | length (code and value bits); 0: not in one step. An
  // end-of-block is a run of kEobRun, a run of 16 zeros a run of 15 and a zero.
  uint32_t fast_ac[1 << kFastBits] = {};

  bool Same(const JHUFF_TBL& t) const {
    return valid && std::memcmp(bits, t.bits, sizeof(bits)) == 0 &&
           std::memcmp(huffval, t.huffval, sizeof(huffval)) == 0;
  }

  bool Build(const JHUFF_TBL& t, bool ac) {
    std::memcpy(bits, t.bits, sizeof(bits));
    std::memcpy(huffval, t.huffval, sizeof(huffval));
    valid = false;
    std::memset(lut, 0, sizeof(lut));
    int count = 0;
    int32_t code = 0;
    for (int len = 1; len <= 16; ++len) {
      valoffset[len] = count - code;
      for (int i = 0; i < bits[len]; ++i, ++code, ++count) {
        if (count >= 256 || code >= (1 << len)) return false;  // libjpeg refuses these too
        if (len <= kLutBits) {
          const int shift = kLutBits - len;
          for (int j = code << shift; j < (code + 1) << shift; ++j)
            lut[j] = static_cast<uint16_t>(len << 8 | huffval[count]);
        }
      }
      maxcode[len] = bits[len] != 0 ? code - 1 : -1;
      code <<= 1;
    }
    // A DC difference of more than 15 bits would shift past the buffer (libjpeg refuses it too).
    for (int i = 0; i < count && !ac; ++i) {
      if (huffval[i] > 15) return false;
    }
    maxcode[17] = INT32_MAX;  // stops the long-code search
    if (ac) {
      for (int i = 0; i < (1 << kFastBits); ++i) {
        const uint16_t e = lut[i >> (kLutBits - kFastBits)];
        fast_ac[i] = 0;
        if (e == 0) continue;
        const int len = e >> 8, r = (e & 0xFF) >> 4, s = e & 15;
        int run = 0, value = 0, total = len;
        if (s == 0) {
          run = r == 15 ? 15 : kEobRun;  // a run of 16 zeros stores a 0 at the 16th
        } else {
          total = len + s;
          if (total > kFastBits) continue;
          const uint32_t v = (static_cast<uint32_t>(i) >> (kFastBits - total)) & ((1u << s) - 1);
          run = r;
          value = Extend(v, s);
        }
        fast_ac[i] = static_cast<uint32_t>(static_cast<uint16_t>(value)) << 16 |
                     static_cast<uint32_t>(run) << 8 | static_cast<uint32_t>(total);
      }
    }
    valid = true;
    return true;
  }
};

// One restart segment being decoded: a big-endian bit buffer over its unstuffed bytes.
struct Stream {
  const uint8_t* p = nullptr;      // the next byte to load
  const uint8_t* limit = nullptr;  // the segment's end
  uint64_t buf = 0;                // bits, most significant first; the rest zero
  int bits = 0;                    // valid bits in buf
  int k = kFresh;                  // the next coefficient of the block; 64+: block done
  int left = 0;                    // blocks still to start in the segment
  int b = 0;                       // block index within the MCU
  JCOEF* coef = nullptr;           // the current block
  int pred[MAX_COMPS_IN_SCAN] = {};
  const Table* ac = nullptr;  // the current block's AC table
  size_t segment = 0;         // its index in the scan
  bool active = false;
  bool last = false;  // the scan's last segment: bytes left over there are not checked

  [[gnu::always_inline]] void Refill() {
    uint64_t w;
    std::memcpy(&w, p, 8);
    buf |= __builtin_bswap64(w) >> bits;
    p += (63 - bits) >> 3;
    bits |= 56;
  }
  [[gnu::always_inline]] void Skip(int n) {
    buf <<= n;
    bits -= n;
  }
  // Bits consumed past the segment's end (positive when the data ran out).
  int64_t Overrun() const { return (p - limit) * 8 - bits; }
};

}  // namespace

void SetOwnHuffmanDefault(bool on) { own_huffman_default.store(on, std::memory_order_relaxed); }
bool OwnHuffmanDefault() { return own_huffman_default.load(std::memory_order_relaxed); }

// libjpeg calls through `pub`; `state` finds the rest.
struct EntropyHook {
  jpeg_entropy_decoder pub;  // first: cinfo->entropy points here
  HuffmanScan::State* state;
};

struct HuffmanScan::State {
  EntropyHook hook{};
  jpeg_entropy_decoder* original = nullptr;  // libjpeg's, put back if another scan starts
  Table dc[NUM_HUFF_TBLS], ac[NUM_HUFF_TBLS];
  const Table* dc_of[D_MAX_BLOCKS_IN_MCU] = {};  // per block of an MCU
  const Table* ac_of[D_MAX_BLOCKS_IN_MCU] = {};
  int comp_of[D_MAX_BLOCKS_IN_MCU] = {};
  const uint8_t* jpeg = nullptr;
  std::vector<uint32_t> offsets;
  int interval = 0, blocks = 0;  // MCUs a segment, blocks an MCU
  uint64_t mcus = 0, mcu = 0;    // MCUs in the scan; the next to hand out
  uint64_t batch_first = 0, batch_end = 0;
  size_t segments = 0, next_segment = 0;
  std::vector<JCOEF> coef;     // the batch's blocks, kStride apart; zero where not handed out
  std::vector<uint8_t> data;   // the batch's segments, unstuffed, then kPadBytes zeros
  std::vector<size_t> starts;  // each batch segment's first byte in data, then the end
  bool failed = false;
  int streams = 2;
  int streams_used = 0;

  // The blocks [mcu, batch_end) were decoded but not handed out: zero them for the next use.
  void ClearLeftovers() {
    if (mcu < batch_end) {
      std::memset(coef.data() + (mcu - batch_first) * blocks * kStride, 0,
                  (batch_end - mcu) * blocks * kStride * sizeof(JCOEF));
    }
    mcu = batch_end = batch_first = 0;
  }

  // Copies segment i's entropy bytes into data without their stuffing. False when a marker sits
  // inside the segment (data the offsets do not describe).
  bool Unstuff(size_t i) {
    const uint8_t* b = jpeg + offsets[i];
    const uint8_t* e = jpeg + (i + 1 == segments ? offsets[i + 1] : offsets[i + 1] - 2);
    while (b < e) {
      const auto* ff =
          static_cast<const uint8_t*>(std::memchr(b, 0xFF, static_cast<size_t>(e - b)));
      if (ff == nullptr) {
        data.insert(data.end(), b, e);
        return true;
      }
      data.insert(data.end(), b, ff + 1);
      b = ff + 1;
      while (b < e && *b == 0xFF) ++b;  // fill bytes
      if (b == e) {                     // fill before the next marker
        data.pop_back();
        return true;
      }
      if (*b != 0x00) return false;
      ++b;
    }
    return true;
  }

  // Reports corrupt data as libjpeg would (a warning), and stops the batch.
  [[gnu::noinline, gnu::cold]] void Corrupt(j_decompress_ptr cinfo, int code, int p1 = 0,
                                            int p2 = 0) {
    failed = true;
    hook.pub.insufficient_data = TRUE;
    cinfo->err->msg_code = code;
    cinfo->err->msg_parm.i[0] = p1;
    cinfo->err->msg_parm.i[1] = p2;
    (*cinfo->err->emit_message)(reinterpret_cast<j_common_ptr>(cinfo), -1);
  }

  // Starts `s` on segment i of the scan, the batch beginning at batch_first_segment.
  [[gnu::always_inline]] void Start(Stream& s, size_t i, size_t batch_first_segment) {
    const size_t r = i - batch_first_segment;
    s = Stream{};
    s.p = data.data() + starts[r];
    s.limit = data.data() + starts[r + 1];
    s.left = static_cast<int>(
        std::min<uint64_t>(static_cast<uint64_t>(interval), mcus - i * interval) * blocks);
    s.b = blocks - 1;
    s.coef = coef.data() + r * static_cast<size_t>(interval) * blocks * kStride - kStride;
    s.active = true;
    s.segment = i;
    s.last = i + 1 == segments;
  }

  // Decodes one long code (longer than the lookup) canonically; -1 for no valid code.
  [[gnu::always_inline]] static int LongSymbol(const Table& t, Stream& s) {
    int len = kLutBits + 1;
    int32_t code = static_cast<int32_t>(s.buf >> (64 - len));
    while (code > t.maxcode[len]) {
      if (++len > 16) return -1;
      code = static_cast<int32_t>(s.buf >> (64 - len));
    }
    s.Skip(len);
    return t.huffval[(code + t.valoffset[len]) & 0xFF];
  }

  // One AC coefficient (or run of zeros, or the block's end) of a stream whose state the caller
  // holds in locals. A code that is no code ends the block with k = kBadCode.
  [[gnu::always_inline]] static void AcStep(uint64_t& buf, int& bits, const uint8_t*& p, int& k,
                                            JCOEF* coef, const Table& t) {
    if (bits < 32) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      buf |= __builtin_bswap64(w) >> bits;
      p += (63 - bits) >> 3;
      bits |= 56;
    }
    const uint32_t e = t.fast_ac[buf >> (64 - kFastBits)];
    if (e != 0) [[likely]] {
      const int n = static_cast<int>(e & 0xFF);
      buf <<= n;
      bits -= n;
      k += static_cast<int>((e >> 8) & 0xFF);
      coef[kNatural[k]] = static_cast<JCOEF>(static_cast<int16_t>(e >> 16));
      ++k;
      return;
    }
    SlowAcStep(buf, bits, k, coef, t);
  }

  // AcStep for a code whose code and value bits are more than the fast lookup takes.
  [[gnu::always_inline]] static void SlowAcStep(uint64_t& buf, int& bits, int& k, JCOEF* coef,
                                                const Table& t) {
    Stream s;
    s.buf = buf;
    s.bits = bits;
    int rs;
    if (const uint16_t l = t.lut[buf >> (64 - kLutBits)]; l != 0) {
      s.Skip(l >> 8);
      rs = l & 0xFF;
    } else if ((rs = LongSymbol(t, s)) < 0) {
      k = kBadCode;
      return;
    }
    const int r = rs >> 4, n = rs & 15;
    if (n != 0) {
      const uint32_t v = static_cast<uint32_t>(s.buf >> (64 - n));
      s.Skip(n);
      k += r;
      coef[kNatural[k]] = static_cast<JCOEF>(Extend(v, n));
      ++k;
    } else {
      k += r == 15 ? 16 : kEobRun;
    }
    buf = s.buf;
    bits = s.bits;
  }

  // Stream s's block is done: checks how far it read, then starts its next block (its DC) or,
  // at the end of its segment, the batch's next segment (or idles it). False on corrupt data.
  [[gnu::always_inline]] bool NextBlock(j_decompress_ptr cinfo, Stream& s, size_t* next, size_t end,
                                        size_t first) {
    if (s.k == kBadCode) {
      Corrupt(cinfo, JWRN_HUFF_BAD_CODE);
      return false;
    }
    if (s.Overrun() > 0) {
      Corrupt(cinfo, JWRN_HIT_MARKER);
      return false;
    }
    if (s.left == 0) {
      if (!s.last && -s.Overrun() >= 8) {
        Corrupt(cinfo, JWRN_EXTRANEOUS_DATA, static_cast<int>(-s.Overrun() / 8),
                0xD0 + static_cast<int>(s.segment % 8));
        return false;
      }
      if (*next == end) {
        s.active = false;
        return true;
      }
      Start(s, (*next)++, first);
    }
    --s.left;
    s.coef += kStride;
    s.b = s.b + 1 == blocks ? 0 : s.b + 1;
    if (s.bits < 32) s.Refill();
    const Table& t = *dc_of[s.b];
    int n;
    if (const uint16_t l = t.lut[s.buf >> (64 - kLutBits)]; l != 0) {
      s.Skip(l >> 8);
      n = l & 0xFF;
    } else if ((n = LongSymbol(t, s)) < 0) {
      Corrupt(cinfo, JWRN_HUFF_BAD_CODE);
      return false;
    }
    int diff = 0;
    if (n != 0) {
      const uint32_t v = static_cast<uint32_t>(s.buf >> (64 - n));
      s.Skip(n);
      diff = Extend(v, n);
    }
    int& pred = s.pred[comp_of[s.b]];
    pred = static_cast<int>(static_cast<uint32_t>(pred) + static_cast<uint32_t>(diff));
    s.coef[0] = static_cast<JCOEF>(pred);
    s.k = 1;
    s.ac = ac_of[s.b];
    return true;
  }

  // Decodes the next batch of segments into coef, two streams at once: the AC coefficients of
  // both current blocks are decoded in one loop, each stream's state in registers, until one of
  // the blocks ends.
  void DecodeBatch(j_decompress_ptr cinfo) {
    const size_t first = next_segment;
    const size_t end = std::min(segments, first + kBatchSegments);
    batch_first = first * interval;
    batch_end = std::min<uint64_t>(mcus, end * interval);
    data.clear();
    starts.clear();
    for (size_t i = first; i < end; ++i) {
      starts.push_back(data.size());
      if (!Unstuff(i)) {
        Corrupt(cinfo, JWRN_HIT_MARKER);
        return;
      }
    }
    starts.push_back(data.size());
    data.resize(data.size() + kPadBytes, 0);
    next_segment = end;
    size_t next = first;
    Stream a, b;
    Start(a, next++, first);
    if (streams == 2 && next < end) Start(b, next++, first);
    for (;;) {
      // Only a started stream takes the next block (b stays idle with one stream, or when the
      // batch has one segment).
      if (a.active && a.k >= 64 && !NextBlock(cinfo, a, &next, end, first)) return;
      if (b.active && b.k >= 64 && !NextBlock(cinfo, b, &next, end, first)) return;
      if (!a.active || !b.active) break;
      streams_used = 2;
      uint64_t abuf = a.buf, bbuf = b.buf;
      int abits = a.bits, bbits = b.bits, ak = a.k, bk = b.k;
      const uint8_t *ap = a.p, *bp = b.p;
      JCOEF *acoef = a.coef, *bcoef = b.coef;
      const Table &aac = *a.ac, &bac = *b.ac;
      do {
        AcStep(abuf, abits, ap, ak, acoef, aac);
        AcStep(bbuf, bbits, bp, bk, bcoef, bac);
      } while (ak < 64 && bk < 64);
      a.buf = abuf, a.bits = abits, a.k = ak, a.p = ap;
      b.buf = bbuf, b.bits = bbits, b.k = bk, b.p = bp;
    }
    Stream& s = a.active ? a : b;
    if (s.active) streams_used = std::max(streams_used, 1);
    while (s.active) {
      if (s.k >= 64) {
        if (!NextBlock(cinfo, s, &next, end, first)) return;
        continue;
      }
      AcStep(s.buf, s.bits, s.p, s.k, s.coef, *s.ac);
    }
  }
};

namespace {

// Whether the libjpeg loaded at run time is the one jpegint.h described at build time: the private
// structs this decoder uses (jpeg_entropy_decoder, jpeg_decomp_master) changed in libjpeg-turbo
// 3.0, which keeps the library's name. Its message table grew then too, so a table of another
// length is another library: libjpeg's own decoder runs.
bool SameLibjpegLayout() {
  static const bool same = [] {
    jpeg_error_mgr err;
    jpeg_std_error(&err);
    return err.last_jpeg_message == static_cast<int>(JMSG_LASTMSGCODE) - 1;
  }();
  return same;
}

HuffmanScan::State* StateOf(j_decompress_ptr cinfo) {
  return reinterpret_cast<EntropyHook*>(cinfo->entropy)->state;
}

boolean DecodeMcu(j_decompress_ptr cinfo, JBLOCKROW* mcu_data) {
  HuffmanScan::State& s = *StateOf(cinfo);
  if (s.failed || s.mcu >= s.mcus) return TRUE;  // zeros, as libjpeg gives after corrupt data
  if (s.mcu == s.batch_end) {
    s.DecodeBatch(cinfo);
    if (s.failed) return TRUE;
  }
  JCOEF* src = s.coef.data() + (s.mcu - s.batch_first) * s.blocks * kStride;
  // libjpeg transforms only the MCU columns of its crop (jpeg_crop_scanline): the others need
  // not be handed over.
  const JDIMENSION column = static_cast<JDIMENSION>(s.mcu % cinfo->MCUs_per_row);
  if (mcu_data != nullptr && column >= cinfo->master->first_iMCU_col &&
      column <= cinfo->master->last_iMCU_col) {
    for (int i = 0; i < s.blocks; ++i) {
      std::memcpy(mcu_data[i][0], src + i * kStride, sizeof(JBLOCK));
    }
  }
  std::memset(src, 0, static_cast<size_t>(s.blocks) * kStride * sizeof(JCOEF));
  ++s.mcu;
  return TRUE;
}

// Another scan starting (not one this decoder was installed for): libjpeg's decoder takes over.
void StartPass(j_decompress_ptr cinfo) {
  HuffmanScan::State& s = *StateOf(cinfo);
  cinfo->entropy = s.original;
  (*cinfo->entropy->start_pass)(cinfo);
}

}  // namespace

HuffmanScan::HuffmanScan() : state_(std::make_unique<State>()) {
  state_->hook.state = state_.get();
}
HuffmanScan::~HuffmanScan() = default;

void HuffmanScan::set_streams(int n) { state_->streams = n == 1 ? 1 : 2; }
int HuffmanScan::streams_used() const { return state_->streams_used; }

bool HuffmanScan::Install(j_decompress_ptr cinfo, absl::Span<const uint8_t> jpeg,
                          absl::Span<const uint32_t> offsets, int interval) {
  State& s = *state_;
  if (!SameLibjpegLayout() || cinfo->buffered_image || cinfo->progressive_mode ||
      cinfo->arith_code || cinfo->data_precision != 8 ||
      cinfo->comps_in_scan != cinfo->num_components || cinfo->Ss != 0 || cinfo->Se != 63 ||
      cinfo->Ah != 0 || cinfo->Al != 0 || interval <= 0 ||
      cinfo->restart_interval != static_cast<unsigned>(interval) ||
      static_cast<int64_t>(interval) * cinfo->blocks_in_MCU > kMaxSegmentBlocks ||
      cinfo->entropy == nullptr || cinfo->src == nullptr) {
    return false;
  }
  const uint64_t mcus = static_cast<uint64_t>(cinfo->MCUs_per_row) * cinfo->MCU_rows_in_scan;
  const uint64_t segments = (mcus + interval - 1) / interval;
  if (mcus == 0 || offsets.size() != segments + 1) return false;
  // Increasing (each segment after a 2-byte marker), all within the JPEG, EOI last: in 64 bits,
  // so that no sum wraps.
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (uint64_t{offsets[i]} < uint64_t{offsets[i - 1]} + (i + 1 == offsets.size() ? 0 : 2)) {
      return false;
    }
  }
  if (uint64_t{offsets.back()} + 2 > jpeg.size()) return false;
  for (int b = 0; b < cinfo->blocks_in_MCU; ++b) {
    const jpeg_component_info* comp = cinfo->cur_comp_info[cinfo->MCU_membership[b]];
    const int dn = comp->dc_tbl_no, an = comp->ac_tbl_no;
    if (dn < 0 || dn >= NUM_HUFF_TBLS || an < 0 || an >= NUM_HUFF_TBLS) return false;
    const JHUFF_TBL* dt = cinfo->dc_huff_tbl_ptrs[dn];
    const JHUFF_TBL* at = cinfo->ac_huff_tbl_ptrs[an];
    if (dt == nullptr || at == nullptr) return false;
    if (!s.dc[dn].Same(*dt) && !s.dc[dn].Build(*dt, /*ac=*/false)) return false;
    if (!s.ac[an].Same(*at) && !s.ac[an].Build(*at, /*ac=*/true)) return false;
    s.dc_of[b] = &s.dc[dn];
    s.ac_of[b] = &s.ac[an];
    s.comp_of[b] = cinfo->MCU_membership[b];
  }
  s.ClearLeftovers();
  s.blocks = cinfo->blocks_in_MCU;
  s.interval = interval;
  s.mcus = mcus;
  s.segments = segments;
  s.next_segment = 0;
  s.failed = false;
  s.streams_used = 0;
  s.jpeg = jpeg.data();
  s.offsets.assign(offsets.begin(), offsets.end());
  const size_t need = static_cast<size_t>(kBatchSegments) * interval * s.blocks * kStride;
  if (s.coef.size() < need) s.coef.assign(need, 0);
  s.original = cinfo->entropy;
  s.hook.pub.start_pass = StartPass;
  s.hook.pub.decode_mcu = DecodeMcu;
  s.hook.pub.insufficient_data = FALSE;
  cinfo->entropy = &s.hook.pub;
  cinfo->src->next_input_byte = jpeg.data() + offsets.back();
  cinfo->src->bytes_in_buffer = jpeg.size() - offsets.back();
  return true;
}

}  // namespace ddpio::loader
