#include "ddpio/device/lazy_library.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "ddpio/device/gpu_libraries.h"
#include "ddpio/device/probe.h"
#include "gtest/gtest.h"

namespace ddpio::device {
namespace {

TEST(LazyLibrary, OpensTheFirstCandidateThatLoadsOnFirstUse) {
  LazyLibrary zlib("zlib", {"libddpio-no-such-library.so.7", "libz.so.1"});
  EXPECT_FALSE(zlib.loaded());  // constructing opens nothing
  using Version = const char* (*)();
  auto version = reinterpret_cast<Version>(zlib.Symbol("zlibVersion"));
  ASSERT_NE(version, nullptr) << zlib.error();
  EXPECT_TRUE(zlib.loaded());
  EXPECT_EQ(std::string(version()).substr(0, 2), "1.");
  EXPECT_TRUE(zlib.Load().ok());
  EXPECT_STREQ(zlib.error(), "");
}

TEST(LazyLibrary, AMissingLibraryNamesItselfAndEveryFileTried) {
  LazyLibrary none("the frobnicator", {"libddpio-no-such-library.so.7", "/nowhere/libfrob.so"});
  EXPECT_EQ(none.Symbol("frob"), nullptr);
  EXPECT_FALSE(none.loaded());
  const absl::Status status = none.Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(status.message());
  EXPECT_NE(message.find("the frobnicator could not be loaded"), std::string::npos) << message;
  EXPECT_NE(message.find("libddpio-no-such-library.so.7"), std::string::npos) << message;
  EXPECT_NE(message.find("/nowhere/libfrob.so"), std::string::npos) << message;
  EXPECT_EQ(std::string(none.error()), message);
}

TEST(LazyLibrary, AMissingFunctionIsNamed) {
  LazyLibrary zlib("zlib", {"libz.so.1"});
  EXPECT_EQ(zlib.Symbol("ddpio_not_in_zlib"), nullptr);
  EXPECT_TRUE(zlib.loaded());
  EXPECT_NE(std::string(zlib.error()).find("zlib has no function ddpio_not_in_zlib"),
            std::string::npos)
      << zlib.error();
}

TEST(LazyLibrary, FolderOfThisCodeHoldsTheTestProgram) {
  const std::string folder = FolderOfThisCode();
  ASSERT_FALSE(folder.empty());
  EXPECT_EQ(folder.front(), '/');
  std::ifstream self(folder + "/device_test");
  EXPECT_TRUE(self.good()) << folder;
}

#ifdef DDPIO_EXPECT_CUDA
// Whether a file whose name contains `name` is mapped into this process.
bool Mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(name) != std::string::npos;
}

// The point of the lazy libraries: a process maps the CUDA runtime and NCCL only once it asks
// for them (here: the device probe), not when it starts. Checked in a fresh process (a death
// test re-runs this binary for this test alone), so that no other test's probe has opened them.
// Exits 0 when every check holds, else names the first that does not.
void CheckTheProbeOpensTheLibraries() {
  const auto fail = [](const char* what) {
    std::fprintf(stderr, "failed: %s\n", what);
    std::exit(1);
  };
  if (CudaRuntimeLibrary().loaded()) fail("the runtime was loaded before anything asked");
  if (Mapped("libcudart.so") || Mapped("libnccl.so") || Mapped("libcublas")) {
    fail("a GPU library was mapped at start");
  }
  if (DescribeGpuLibraries().find("not loaded yet") == std::string::npos) {
    fail("ddpio info does not say what is not loaded yet");
  }
  const DeviceInfo& info = Probe();
  if (!CudaRuntimeLibrary().loaded() || !Mapped("libcudart.so")) {
    fail("the probe did not load the runtime");
  }
  // On this machine's CPU-only CI the runtime loads and says why there is no device; a missing
  // runtime would read "could not be loaded".
  if (info.why.find("could not be loaded") != std::string::npos) fail(info.why.c_str());
#ifdef DDPIO_EXPECT_NCCL
  if (!Mapped("libnccl.so") || info.nccl_version <= 20000) fail("the probe did not load NCCL");
#endif
  if (Mapped("libcublas")) fail("cuBLAS was mapped though nothing asked for it");
  std::exit(0);
}

TEST(GpuLibraries, TheRuntimeAndNcclAreMappedOnlyOnceTheProbeAsks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(CheckTheProbeOpensTheLibraries(), ::testing::ExitedWithCode(0), "");
}
#endif

#ifdef DDPIO_EXPECT_KERNELS
TEST(GpuLibraries, TheKernelModuleLoadsWithEveryEntryPoint) {
  ASSERT_TRUE(KernelsLibrary().Load().ok()) << KernelsLibrary().error();
  for (const char* name : {"ddpio_normalize_hwc", "ddpio_fill_rows", "ddpio_relu",
                           "ddpio_softmax_xent", "ddpio_add_column_sums", "ddpio_relu_mask",
                           "ddpio_sgd", "ddpio_argmax_rows", "ddpio_count_nonfinite"}) {
    EXPECT_NE(KernelsLibrary().Symbol(name), nullptr) << name;
  }
}
#endif

}  // namespace
}  // namespace ddpio::device
