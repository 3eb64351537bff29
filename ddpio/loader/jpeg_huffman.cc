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
static_assert(kStride * sizeof(JCOEF) % 16 == 0,
              "libjpeg's SIMD IDCTs load blocks 16-byte aligned");
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

// The blocks of every MCU from a batch with corrupt data on: zeros (libjpeg's decoder instead
// zeroes or garbles the rest of the damaged segment and resumes at the next restart marker; with
// ddpio's strict error handler neither is ever seen: the first warning ends the decode).
alignas(64) constexpr std::array<JCOEF, D_MAX_BLOCKS_IN_MCU * kStride> kZeroMcu{};

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
      // Each code short enough, followed by each of its values: a range of entries apiece.
      static_assert(kFastBits <= kLutBits);
      std::memset(fast_ac, 0, sizeof(fast_ac));
      code = 0;
      count = 0;
      for (int len = 1; len <= kFastBits; ++len, code <<= 1) {
        for (int i = 0; i < bits[len]; ++i, ++code, ++count) {
          const int r = huffval[count] >> 4, s = huffval[count] & 15;
          if (len + s > kFastBits) continue;
          const int shift = kFastBits - len - s;  // entries per value: 1 << shift
          uint32_t* e = fast_ac + (static_cast<uint32_t>(code) << (kFastBits - len));
          for (uint32_t v = 0; v < (1u << s); ++v) {
            // An end-of-block is a run of kEobRun; a run of 16 zeros stores a 0 at the 16th.
            const int run = s != 0 ? r : r == 15 ? 15 : kEobRun;
            const int value = s != 0 ? Extend(v, s) : 0;
            const uint32_t entry = static_cast<uint32_t>(static_cast<uint16_t>(value)) << 16 |
                                   static_cast<uint32_t>(run) << 8 | static_cast<uint32_t>(len + s);
            for (int j = 0; j < (1 << shift); ++j) *e++ = entry;
          }
        }
      }
    }
    valid = true;
    return true;
  }
};

// What the i-th block of a segment decodes with.
struct BlockPlan {
  const Table* dc = nullptr;
  const Table* ac = nullptr;
  int comp = 0;  // its component's index in the scan (for the DC predictor)
};

// A stream's state that changes with every code: kept in registers while its blocks are decoded.
// A big-endian bit buffer over the segment's unstuffed bytes.
struct Hot {
  uint64_t buf = 0;            // bits, most significant first; the rest zero
  int bits = 0;                // valid bits in buf
  const uint8_t* p = nullptr;  // the next byte to load
  int k = kFresh;              // the next coefficient of the block; 64+: block done
  JCOEF* coef = nullptr;       // the current block
  const Table* ac = nullptr;   // the current block's AC table
};

// The rest of a stream's state: touched once a block.
struct Stream {
  const uint8_t* limit = nullptr;       // the segment's end
  const uint8_t* hard_limit = nullptr;  // past this a block must not start (the padding's end)
  const BlockPlan* plan = nullptr;      // the next block's
  const BlockPlan* plan_end = nullptr;  // the segment's end
  int pred[MAX_COMPS_IN_SCAN] = {};
  size_t segment = 0;  // its index in the scan
  bool active = false;
  bool last = false;  // the scan's last segment: bytes left over there are not checked
};

// Loads the next 7-8 bytes behind the buffer's valid bits (56 or more valid after).
[[gnu::always_inline]] inline void Refill(Hot& h) {
  uint64_t w;
  std::memcpy(&w, h.p, 8);
  h.buf |= __builtin_bswap64(w) >> h.bits;
  h.p += (63 - h.bits) >> 3;
  h.bits |= 56;
}

// Bits consumed past the segment's end (positive when the data ran out).
inline int64_t Overrun(const Hot& h, const Stream& s) { return (h.p - s.limit) * 8 - h.bits; }

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
  std::vector<BlockPlan> plan;  // the tables of each block of a segment
  const uint8_t* jpeg = nullptr;
  std::vector<uint32_t> offsets;
  int interval = 0, blocks = 0;  // MCUs a segment, blocks an MCU
  uint64_t mcus = 0, mcu = 0;    // MCUs in the scan; the next to hand out
  uint64_t batch_first = 0, batch_end = 0;
  size_t segments = 0, next_segment = 0;
  // The batch's blocks, kStride apart from a 64-byte aligned start: every block 16-byte aligned,
  // as libjpeg-turbo's SIMD IDCTs load them (movdqa).
  std::vector<JCOEF> coef_storage;
  JCOEF* coef = nullptr;
  std::vector<uint8_t> data;   // the batch's segments, unstuffed, then kPadBytes zeros
  std::vector<size_t> starts;  // each batch segment's first byte in data, then the end
  bool failed = false;
  int streams = 2;
  int streams_used = 0;

  // The blocks of the next MCU (decoding the next batch first when it is needed), or zeros
  // from a batch with corrupt data on (kZeroMcu).
  const JCOEF* NextMcu(j_decompress_ptr cinfo) {
    if (mcu >= mcus) return kZeroMcu.data();
    if (!failed && mcu == batch_end) DecodeBatch(cinfo);
    const uint64_t m = mcu++;  // counted either way: the position libjpeg's rows are checked by
    return failed ? kZeroMcu.data() : coef + (m - batch_first) * blocks * kStride;
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

  // Starts a stream on segment i of the scan, the batch beginning at batch_first_segment.
  void Start(Hot& h, Stream& s, size_t i, size_t batch_first_segment) {
    const size_t r = i - batch_first_segment;
    h = Hot{};
    h.p = data.data() + starts[r];
    h.coef = coef + r * static_cast<size_t>(interval) * blocks * kStride - kStride;
    s = Stream{};
    s.limit = data.data() + starts[r + 1];
    // A block reads at most 64 codes of at most 31 bits, and 8 bytes a refill.
    s.hard_limit = s.limit + (kPadBytes - 264);
    s.plan = plan.data();
    s.plan_end =
        s.plan + std::min<uint64_t>(static_cast<uint64_t>(interval), mcus - i * interval) * blocks;
    s.active = true;
    s.segment = i;
    s.last = i + 1 == segments;
  }

  // Decodes one long code (longer than the lookup) canonically; -1 for no valid code.
  [[gnu::always_inline]] static int LongSymbol(const Table& t, uint64_t& buf, int& bits) {
    int len = kLutBits + 1;
    int32_t code = static_cast<int32_t>(buf >> (64 - len));
    while (code > t.maxcode[len]) {
      if (++len > 16) return -1;
      code = static_cast<int32_t>(buf >> (64 - len));
    }
    buf <<= len;
    bits -= len;
    return t.huffval[(code + t.valoffset[len]) & 0xFF];
  }

  // One AC coefficient (or run of zeros, or the block's end). A code that is no code ends the
  // block with k = kBadCode.
  [[gnu::always_inline]] static void AcStep(Hot& h) {
    if (h.bits < 32) Refill(h);
    const uint32_t e = h.ac->fast_ac[h.buf >> (64 - kFastBits)];
    if (e != 0) [[likely]] {
      const int n = static_cast<int>(e & 0xFF);
      h.buf <<= n;
      h.bits -= n;
      h.k += static_cast<int>((e >> 8) & 0xFF);
      h.coef[kNatural[h.k]] = static_cast<JCOEF>(static_cast<int16_t>(e >> 16));
      ++h.k;
      return;
    }
    SlowAcStep(h.buf, h.bits, h.k, h.coef, *h.ac);
  }

  // AcStep for a code whose code and value bits are more than the fast lookup takes.
  [[gnu::always_inline]] static void SlowAcStep(uint64_t& buf_ref, int& bits_ref, int& k,
                                                JCOEF* coef, const Table& t) {
    uint64_t buf = buf_ref;
    int bits = bits_ref;
    int rs;
    if (const uint16_t l = t.lut[buf >> (64 - kLutBits)]; l != 0) {
      buf <<= l >> 8;
      bits -= l >> 8;
      rs = l & 0xFF;
    } else if ((rs = LongSymbol(t, buf, bits)) < 0) {
      k = kBadCode;
      return;
    }
    const int r = rs >> 4, n = rs & 15;
    if (n != 0) {
      const uint32_t v = static_cast<uint32_t>(buf >> (64 - n));
      buf <<= n;
      bits -= n;
      k += r;
      coef[kNatural[k]] = static_cast<JCOEF>(Extend(v, n));
      ++k;
    } else {
      k += r == 15 ? 16 : kEobRun;
    }
    buf_ref = buf;
    bits_ref = bits;
  }

  // What happens at a block's end other than starting the segment's next block: a code that was
  // no code, data run out, the segment's end (bytes left over are checked, then the batch's next
  // segment starts, or the stream stops). False when the stream stopped (`failed` says whether on
  // corrupt data).
  [[gnu::noinline]] bool Boundary(j_decompress_ptr cinfo, Hot& h, Stream& s, size_t* next,
                                  size_t end, size_t first) {
    if (h.k == kBadCode) {
      Corrupt(cinfo, JWRN_HUFF_BAD_CODE);
      return false;
    }
    if (Overrun(h, s) > 0) {
      Corrupt(cinfo, JWRN_HIT_MARKER);
      return false;
    }
    if (s.plan != s.plan_end) return true;
    if (!s.last && -Overrun(h, s) >= 8) {
      Corrupt(cinfo, JWRN_EXTRANEOUS_DATA, static_cast<int>(-Overrun(h, s) / 8),
              0xD0 + static_cast<int>(s.segment % 8));
      return false;
    }
    if (*next == end) {
      s.active = false;
      return false;
    }
    Start(h, s, (*next)++, first);
    return true;
  }

  // A DC code longer than the lookup: its size category, or -1 after reporting corrupt data.
  [[gnu::noinline]] int LongDc(j_decompress_ptr cinfo, const Table& t, uint64_t& buf, int& bits) {
    const int n = LongSymbol(t, buf, bits);
    if (n < 0) Corrupt(cinfo, JWRN_HUFF_BAD_CODE);
    return n;
  }

  // A stream's block is done (or it has not started one): starts its next block by decoding its
  // DC coefficient. Data run out is checked only at the segment's end, or when the stream is
  // past its segment far enough to read past the batch's padding in one more block. False when
  // the stream stopped.
  [[gnu::always_inline]] bool BlockEnd(j_decompress_ptr cinfo, Hot& h, Stream& s, size_t* next,
                                       size_t end, size_t first) {
    if (h.k == kBadCode || h.p > s.hard_limit || s.plan == s.plan_end) [[unlikely]] {
      Hot t = h;
      const bool go_on = Boundary(cinfo, t, s, next, end, first);
      h = t;
      if (!go_on) return false;
    }
    const BlockPlan& bp = *s.plan++;
    h.coef += kStride;
    Refill(h);
    int n;
    if (const uint16_t l = bp.dc->lut[h.buf >> (64 - kLutBits)]; l != 0) [[likely]] {
      h.buf <<= l >> 8;
      h.bits -= l >> 8;
      n = l & 0xFF;
    } else {
      uint64_t buf = h.buf;
      int bits = h.bits;
      n = LongDc(cinfo, *bp.dc, buf, bits);
      if (n < 0) return false;
      h.buf = buf;
      h.bits = bits;
    }
    // The difference's n bits (n <= 15, Table::Build checks): a leading 1 is the value as it
    // stands, a leading 0 the value minus 2^n - 1. Without branches: n = 0 gives 0.
    const uint64_t v = (h.buf >> 1) >> (63 - n);
    const int64_t positive = static_cast<int64_t>(h.buf) >> 63;  // -1 when the lead bit is 1
    const int diff = static_cast<int>(v) + static_cast<int>(~positive & (1 - (int64_t{1} << n)));
    h.buf <<= n;
    h.bits -= n;
    int& pred = s.pred[bp.comp];
    pred = static_cast<int>(static_cast<uint32_t>(pred) + static_cast<uint32_t>(diff));
    h.coef[0] = static_cast<JCOEF>(pred);
    h.k = 1;
    h.ac = bp.ac;
    return true;
  }

  // One stream alone decodes its blocks until it stops.
  void DecodeOne(j_decompress_ptr cinfo, Hot& h, Stream& s, size_t* next, size_t end,
                 size_t first) {
    Hot r = h;
    for (;;) {
      if (r.k >= 64 && !BlockEnd(cinfo, r, s, next, end, first)) break;
      AcStep(r);
    }
    h = r;
  }

  // Decodes the next batch of segments into coef, two streams at once: one loop decodes a code
  // of each in turn, each stream's state in registers, and starts a stream's next block (its DC,
  // and the next segment at a segment's end) where its block ends.
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
    std::memset(coef, 0, (batch_end - batch_first) * blocks * kStride * sizeof(JCOEF));
    next_segment = end;
    size_t next = first;
    Hot ha, hb;
    Stream sa, sb;
    Start(ha, sa, next++, first);
    if (streams == 1 || next == end) {
      streams_used = std::max(streams_used, 1);
      DecodeOne(cinfo, ha, sa, &next, end, first);
      return;
    }
    Start(hb, sb, next++, first);
    streams_used = 2;
    {
      Hot a = ha, b = hb;
      for (;;) {
        if (a.k >= 64 && !BlockEnd(cinfo, a, sa, &next, end, first)) break;
        AcStep(a);
        if (b.k >= 64 && !BlockEnd(cinfo, b, sb, &next, end, first)) break;
        AcStep(b);
      }
      ha = a;
      hb = b;
    }
    if (failed) return;
    // One stream stopped at the batch's end: the other finishes its segment alone.
    if (sa.active) DecodeOne(cinfo, ha, sa, &next, end, first);
    if (sb.active) DecodeOne(cinfo, hb, sb, &next, end, first);
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

// libjpeg's entropy-decoder call: the next MCU's coefficients into its buffer (which it has
// zeroed), or, given no buffer, the MCU skipped (jpeg_skip_scanlines).
boolean DecodeMcu(j_decompress_ptr cinfo, JBLOCKROW* mcu_data) {
  HuffmanScan::State& s = *StateOf(cinfo);
  // libjpeg transforms only the MCU columns of its crop (jpeg_crop_scanline): the others need
  // not be handed over.
  const JDIMENSION column = static_cast<JDIMENSION>(s.mcu % cinfo->MCUs_per_row);
  const JCOEF* src = s.NextMcu(cinfo);
  if (mcu_data != nullptr && column >= cinfo->master->first_iMCU_col &&
      column <= cinfo->master->last_iMCU_col) {
    for (int i = 0; i < s.blocks; ++i) {
      std::memcpy(mcu_data[i][0], src + i * kStride, sizeof(JBLOCK));
    }
  }
  return TRUE;
}

// libjpeg's coefficient controller for a one-scan decode (decompress_onepass in jdcoefct.c), in
// its place for interleaved scans: the same iMCU row's IDCTs of the same blocks into the same
// places, but straight from the decoded batch, where libjpeg zeroes an MCU buffer, has the
// entropy decoder fill it and transforms from there.
int DecompressRow(j_decompress_ptr cinfo, JSAMPIMAGE output_buf) {
  HuffmanScan::State& s = *StateOf(cinfo);
  const JDIMENSION last_col = cinfo->MCUs_per_row - 1;
  const JDIMENSION last_row = cinfo->total_iMCU_rows - 1;
  const JDIMENSION first_crop = cinfo->master->first_iMCU_col;
  const JDIMENSION last_crop = cinfo->master->last_iMCU_col;
  // An interleaved scan's iMCU row is one MCU row, and this decoder's next MCU its first.
  if (s.mcu != static_cast<uint64_t>(cinfo->input_iMCU_row) * cinfo->MCUs_per_row) {
    cinfo->err->msg_code = JERR_BAD_STATE;
    cinfo->err->msg_parm.i[0] = static_cast<int>(cinfo->global_state);
    (*cinfo->err->error_exit)(reinterpret_cast<j_common_ptr>(cinfo));
  }
  for (JDIMENSION col = 0; col <= last_col; ++col) {
    if (!s.hook.pub.insufficient_data) cinfo->master->last_good_iMCU_row = cinfo->input_iMCU_row;
    const JCOEF* src = s.NextMcu(cinfo);
    if (col < first_crop || col > last_crop) continue;
    int blkn = 0;
    for (int ci = 0; ci < cinfo->comps_in_scan; ++ci) {
      jpeg_component_info* comp = cinfo->cur_comp_info[ci];
      if (!comp->component_needed) {
        blkn += comp->MCU_blocks;
        continue;
      }
      inverse_DCT_method_ptr idct = cinfo->idct->inverse_DCT[comp->component_index];
      const int useful_width = col < last_col ? comp->MCU_width : comp->last_col_width;
      JSAMPARRAY out = output_buf[comp->component_index];
      const JDIMENSION start = (col - first_crop) * static_cast<JDIMENSION>(comp->MCU_sample_width);
      for (int y = 0; y < comp->MCU_height; ++y) {
        if (cinfo->input_iMCU_row < last_row || y < comp->last_row_height) {
          JDIMENSION out_col = start;
          for (int x = 0; x < useful_width; ++x) {
            (*idct)(cinfo, comp, const_cast<JCOEF*>(src + (blkn + x) * kStride), out, out_col);
            out_col += static_cast<JDIMENSION>(comp->DCT_scaled_size);
          }
        }
        blkn += comp->MCU_width;
        out += comp->DCT_scaled_size;
      }
    }
  }
  ++cinfo->output_iMCU_row;
  if (++cinfo->input_iMCU_row < cinfo->total_iMCU_rows) return JPEG_ROW_COMPLETED;
  (*cinfo->inputctl->finish_input_pass)(cinfo);
  return JPEG_SCAN_COMPLETED;
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
  BlockPlan mcu_plan[D_MAX_BLOCKS_IN_MCU];
  for (int b = 0; b < cinfo->blocks_in_MCU; ++b) {
    const jpeg_component_info* comp = cinfo->cur_comp_info[cinfo->MCU_membership[b]];
    const int dn = comp->dc_tbl_no, an = comp->ac_tbl_no;
    if (dn < 0 || dn >= NUM_HUFF_TBLS || an < 0 || an >= NUM_HUFF_TBLS) return false;
    const JHUFF_TBL* dt = cinfo->dc_huff_tbl_ptrs[dn];
    const JHUFF_TBL* at = cinfo->ac_huff_tbl_ptrs[an];
    if (dt == nullptr || at == nullptr) return false;
    if (!s.dc[dn].Same(*dt) && !s.dc[dn].Build(*dt, /*ac=*/false)) return false;
    if (!s.ac[an].Same(*at) && !s.ac[an].Build(*at, /*ac=*/true)) return false;
    mcu_plan[b] = {&s.dc[dn], &s.ac[an], cinfo->MCU_membership[b]};
  }
  s.plan.resize(static_cast<size_t>(interval) * cinfo->blocks_in_MCU);
  for (size_t i = 0; i < s.plan.size(); ++i) s.plan[i] = mcu_plan[i % cinfo->blocks_in_MCU];
  s.mcu = s.batch_end = s.batch_first = 0;
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
  if (s.coef_storage.size() < need + 32) {
    s.coef_storage.assign(need + 32, 0);
    const auto at = reinterpret_cast<uintptr_t>(s.coef_storage.data());
    s.coef = s.coef_storage.data() + ((64 - at % 64) % 64) / sizeof(JCOEF);
  }
  s.original = cinfo->entropy;
  s.hook.pub.start_pass = StartPass;
  s.hook.pub.decode_mcu = DecodeMcu;
  s.hook.pub.insufficient_data = FALSE;
  cinfo->entropy = &s.hook.pub;
  // A one-pass decode of an interleaved scan (no whole-image coefficient buffer) transforms
  // straight from the batch.
  if (cinfo->comps_in_scan > 1 && cinfo->coef != nullptr && cinfo->coef->coef_arrays == nullptr) {
    cinfo->coef->decompress_data = DecompressRow;
  }
  cinfo->src->next_input_byte = jpeg.data() + offsets.back();
  cinfo->src->bytes_in_buffer = jpeg.size() - offsets.back();
  return true;
}

}  // namespace ddpio::loader
