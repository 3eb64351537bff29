// The one libjpeg error handler, for every loader file that calls libjpeg directly (the region
// decoder, the restart-marker transcoder). libjpeg reports a failure by calling error_exit, which
// must not return: this one formats the message and longjmps back to the caller's setjmp, where
// the caller frees its libjpeg objects and returns a Status. Corrupt-data warnings (level -1, which
// libjpeg would otherwise paper over with grey blocks) are treated as errors: a silently damaged
// sample is worse than a reported one.
//
//   JpegError err;
//   cinfo.err = UseJpegError(&err);
//   jpeg_create_decompress(&cinfo);
//   // Nothing with a destructor may live between setjmp and a possible longjmp.
//   if (setjmp(err.jump) != 0) { jpeg_destroy_decompress(&cinfo); return DataLoss(err.message); }
//
// One JpegError per libjpeg object (or per pair that are used together), on one thread.
#ifndef DDPIO_LOADER_INTERNAL_JPEG_ERROR_H_
#define DDPIO_LOADER_INTERNAL_JPEG_ERROR_H_

// clang-format off
#include <cstdio>   // jpeglib.h needs FILE
#include <jpeglib.h>
// clang-format on
#include <csetjmp>
#include <type_traits>

namespace ddpio::loader::internal {

struct JpegError {
  jpeg_error_mgr pub;  // first: the handlers find the JpegError from cinfo->err
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};
static_assert(std::is_standard_layout_v<JpegError>);

inline void OnJpegError(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

inline void OnJpegMessage(j_common_ptr cinfo, int level) {
  if (level < 0) OnJpegError(cinfo);
}

// Sets `err`'s manager to libjpeg's defaults with the handlers above and returns it, for the
// `err` field of one or more libjpeg objects.
inline jpeg_error_mgr* UseJpegError(JpegError* err) {
  jpeg_error_mgr* mgr = jpeg_std_error(&err->pub);
  mgr->error_exit = OnJpegError;
  mgr->emit_message = OnJpegMessage;
  err->message[0] = '\0';
  return mgr;
}

}  // namespace ddpio::loader::internal

#endif  // DDPIO_LOADER_INTERNAL_JPEG_ERROR_H_
