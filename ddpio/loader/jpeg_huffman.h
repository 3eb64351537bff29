// ddpio's own Huffman (entropy) decoder for restart-marked baseline JPEGs, installed in
// libjpeg-turbo's place: libjpeg still parses the headers and does the IDCT, upsampling and
// colour conversion; this only turns the scan's bytes into the quantised coefficients libjpeg's
// own decoder would give, bit for bit.
//
// Why: libjpeg-turbo 2.1.5 decodes every scan with restart markers on its slower Huffman path,
// and its decoder keeps its state in memory between calls. This one decodes a batch of segments
// with each stream's state in registers: a 64-bit bit buffer refilled 7-8 bytes at a time, an
// 11-bit lookup giving an AC coefficient's run, value and total length in one step for most codes
// (an 11-bit symbol lookup, then canonical decoding, for the rest). Restart segments are
// independent streams, and it runs two of them at once, interleaved step by step in one loop: a
// Huffman decoder is one chain of dependent lookups, and two chains keep the core busy where one
// leaves it waiting. A stream whose block ends starts its next block (and segment) inside the
// same loop. One stream at a time is only as fast as libjpeg's slow path; two take a fifth off it
// (`ddpio bench decode`, docs/PERFORMANCE.md).
//
// For a one-pass decode of an interleaved scan it also stands in for libjpeg's coefficient
// controller (jdcoefct.c's decompress_onepass): the same IDCTs of the same blocks into the same
// rows, straight from its buffer, where libjpeg zeroes and fills a one-MCU buffer for each MCU.
//
//   HuffmanScan scan;  // one per thread, reused
//   jpeg_start_decompress(&cinfo);
//   if (scan.Install(&cinfo, jpeg, offsets, interval)) { ... }  // else libjpeg's decoder stays
//   jpeg_read_scanlines(...);  // calls the installed decoder
//
// Corrupt data is reported with libjpeg's warning codes through cinfo->err (a bad Huffman code, a
// segment that ends before its MCUs do, bytes left over before a restart marker), so an error
// handler that turns warnings into errors refuses what libjpeg's decoder refuses (but one: bytes
// left over, LOADER.md). Which warning comes first can differ: a segment cut short decodes on
// into the next one's bytes until its end, and may meet a bad code before. Not thread-safe.
#ifndef DDPIO_LOADER_JPEG_HUFFMAN_H_
#define DDPIO_LOADER_JPEG_HUFFMAN_H_

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>
// clang-format on
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"

namespace ddpio::loader {

// Whether decoders use ddpio's Huffman decoder by default (true) or libjpeg's everywhere. For
// benchmarks comparing the two in one process; set before the decoders are made.
void SetOwnHuffmanDefault(bool on);
bool OwnHuffmanDefault();

class HuffmanScan {
 public:
  HuffmanScan();
  ~HuffmanScan();
  HuffmanScan(const HuffmanScan&) = delete;
  HuffmanScan& operator=(const HuffmanScan&) = delete;

  // Installs the decoder in `cinfo`, which jpeg_start_decompress has just prepared for `jpeg`
  // (the same bytes jpeg_mem_src was given). `offsets` are the scan's segments as
  // RestartLayout::offsets gives them: each segment's first entropy byte, then where EOI starts;
  // `interval` MCUs a segment. Returns false, changing nothing, when the scan is not one it
  // decodes (not baseline Huffman over every component, another interval, offsets that do not
  // fit the scan or the JPEG, segments too large, a buffered-image decompression, or a libjpeg at
  // run time whose private structs are not the ones jpegint.h described at build time):
  // libjpeg's own decoder then runs as before. Decodes up to 16 segments ahead of the MCU libjpeg
  // asks for, so damage in rows a cropped decode stops short of can be reported too.
  // Points libjpeg's source at the EOI, so jpeg_finish_decompress reads on from there, and for a
  // one-pass interleaved scan sets cinfo->coef->decompress_data to its own. Valid
  // until the next Install or the end of the decompression; `jpeg` must outlive it.
  bool Install(j_decompress_ptr cinfo, absl::Span<const uint8_t> jpeg,
               absl::Span<const uint32_t> offsets, int interval);

  // Segments decoded at once: 2 (the default), or 1 (to measure what the second one gives).
  void set_streams(int n);
  // The most segments the last installed scan had in decoding at once (0 before any batch).
  int streams_used() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_JPEG_HUFFMAN_H_
