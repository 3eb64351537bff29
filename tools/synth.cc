#include "tools/synth.h"

#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/ordered_parallel_map.h"
#include "ddpio/common/status_macros.h"
#include "tools/cli_progress.h"
#include "tools/cli_util.h"

namespace ddpio::tools {
namespace {

struct Rgb {
  double r, g, b;
};

Rgb HsvToRgb(double h, double s, double v) {
  h = h - std::floor(h);
  double c = v * s, x = c * (1 - std::fabs(std::fmod(h * 6, 2) - 1)), m = v - c;
  Rgb o{0, 0, 0};
  switch (static_cast<int>(h * 6) % 6) {
    case 0:
      o = {c, x, 0};
      break;
    case 1:
      o = {x, c, 0};
      break;
    case 2:
      o = {0, c, x};
      break;
    case 3:
      o = {0, x, c};
      break;
    case 4:
      o = {x, 0, c};
      break;
    default:
      o = {c, 0, x};
      break;
  }
  return {(o.r + m) * 255, (o.g + m) * 255, (o.b + m) * 255};
}

// Whether (dx, dy), relative to the shape centre and in units of its radius, is inside shape s.
bool Inside(int s, double dx, double dy) {
  double ax = std::fabs(dx), ay = std::fabs(dy), d2 = dx * dx + dy * dy;
  switch (s) {
    case 0:
      return d2 <= 1.0;  // disk
    case 1:
      return ax <= 0.8 && ay <= 0.8;  // square
    case 2:
      return dy <= 0.8 && dy >= -0.9 && ax <= (dy + 0.9) * 0.6;  // triangle
    case 3:
      return (ax <= 0.25 && ay <= 1.0) || (ay <= 0.25 && ax <= 1.0);  // cross
    case 4:
      return d2 <= 1.0 && d2 >= 0.45;  // ring
    case 5:
      return ax <= 1.0 && ay <= 1.0 && static_cast<int>(std::floor((dy + 1) * 2.5)) % 2 == 0;
    case 6:
      return ax + ay <= 1.0;  // diamond
    default:
      return std::fabs(dx - dy) <= 0.35 && ax <= 1.0 && ay <= 1.0;  // diagonal band
  }
}

absl::Status WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return ErrnoToStatus(errno, absl::StrCat("creating ", path));
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  f.close();
  if (!f) return ErrnoToStatus(errno, absl::StrCat("writing ", path));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> EncodeAndWrite(const SynthImage& img, int quality,
                                        const std::string& path) {
  tjhandle h = tjInitCompress();
  if (h == nullptr) return absl::InternalError("tjInitCompress failed");
  unsigned char* jpeg = nullptr;
  unsigned long jpeg_size = 0;
  int rc = tjCompress2(h, img.rgb.data(), img.width, 0, img.height, TJPF_RGB, &jpeg, &jpeg_size,
                       TJSAMP_420, quality, TJFLAG_FASTDCT);
  absl::Status status = rc == 0
                            ? WriteFile(path, jpeg, jpeg_size)
                            : absl::InternalError(absl::StrCat("JPEG encode: ", tjGetErrorStr2(h)));
  tjFree(jpeg);
  tjDestroy(h);
  if (!status.ok()) return status;
  return static_cast<uint64_t>(jpeg_size);
}

}  // namespace

std::string SynthClassName(int c, int classes) {
  int digits = std::max(3, static_cast<int>(std::to_string(std::max(classes - 1, 0)).size()));
  return absl::StrFormat("class_%0*d", digits, c);
}

SynthImage DrawSynthImage(int label, uint64_t index, int size, uint64_t seed) {
  SplitMix64 rng(MixSeed(seed, static_cast<uint64_t>(label), index));
  SynthImage img;
  img.width = std::max(8, static_cast<int>(size * rng.Uniform(0.8, 1.25)));
  img.height = std::max(8, static_cast<int>(size * rng.Uniform(0.8, 1.25)));
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
  const int shape = label % 8;
  const double hue = std::fmod(label * 0.6180339887, 1.0) + rng.Uniform(-0.03, 0.03);
  const Rgb fg = HsvToRgb(hue, rng.Uniform(0.65, 0.95), rng.Uniform(0.75, 1.0));
  const Rgb bg = HsvToRgb(rng.Uniform(), rng.Uniform(0.0, 0.3), rng.Uniform(0.1, 0.6));
  const double cx = img.width * rng.Uniform(0.35, 0.65), cy = img.height * rng.Uniform(0.35, 0.65);
  const double radius = std::min(img.width, img.height) * rng.Uniform(0.22, 0.36);
  const double angle = rng.Uniform(-0.3, 0.3), ca = std::cos(angle), sa = std::sin(angle);
  uint8_t* p = img.rgb.data();
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      double dx = (x + 0.5 - cx) / radius, dy = (y + 0.5 - cy) / radius;
      bool in = Inside(shape, ca * dx + sa * dy, -sa * dx + ca * dy);
      const Rgb& c = in ? fg : bg;
      double noise = (rng.Uniform() - 0.5) * 40;
      *p++ = static_cast<uint8_t>(std::clamp(c.r + noise, 0.0, 255.0));
      *p++ = static_cast<uint8_t>(std::clamp(c.g + noise, 0.0, 255.0));
      *p++ = static_cast<uint8_t>(std::clamp(c.b + noise, 0.0, 255.0));
    }
  }
  return img;
}

absl::StatusOr<SynthSummary> RunSynth(const SynthOptions& o) {
  namespace fs = std::filesystem;
  if (o.classes < 1 || o.per_class < 1) {
    return absl::InvalidArgumentError("--classes and --per-class must be at least 1");
  }
  if (o.size < 8 || o.size > 4096) return absl::InvalidArgumentError("--size must be in [8, 4096]");
  if (o.quality < 1 || o.quality > 100)
    return absl::InvalidArgumentError("--quality must be in [1, 100]");
  std::error_code ec;
  if (fs::exists(o.out, ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat(o.out, " already exists; choose another --out or remove it"));
  }
  const std::string partial = absl::StrCat(o.out, ".partial-", getpid());
  for (int c = 0; c < o.classes; ++c) {
    fs::path dir = fs::path(partial) / SynthClassName(c, o.classes);
    if (!fs::create_directories(dir, ec) && ec) {
      return ErrnoToStatus(ec.value(), absl::StrCat("creating ", dir.string()));
    }
  }
  const uint64_t total = static_cast<uint64_t>(o.classes) * o.per_class;
  int threads = o.threads > 0 ? o.threads
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto start = std::chrono::steady_clock::now();
  SynthSummary summary;
  absl::Status failed;
  {
    OrderedParallelMap<absl::StatusOr<uint64_t>> map(
        0, total, threads, 8 * static_cast<uint64_t>(threads), [&](uint64_t i, int) {
          int label = static_cast<int>(i / o.per_class);
          uint64_t index = i % o.per_class;
          SynthImage img = DrawSynthImage(label, index, o.size, o.seed);
          std::string path = (fs::path(partial) / SynthClassName(label, o.classes) /
                              absl::StrFormat("img_%05d.jpg", index))
                                 .string();
          return EncodeAndWrite(img, o.quality, path);
        });
    Progress progress("synth", total, o.progress);
    while (auto r = map.Next()) {
      if (!r->ok()) {
        failed = r->status();
        break;
      }
      summary.bytes += **r;
      ++summary.images;
      progress.Update(summary.images);
    }
    if (failed.ok()) progress.Finish(summary.images);
  }
  if (!failed.ok()) {
    fs::remove_all(partial, ec);
    return failed;
  }
  fs::rename(partial, o.out, ec);
  if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("renaming ", partial, " to ", o.out));
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace ddpio::tools
