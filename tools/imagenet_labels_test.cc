#include "tools/imagenet_labels.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::tools {
namespace {

class ImagenetLabels : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Sub("val"));
    for (int i = 1; i <= 6; ++i) Write(absl::StrFormat("val/ILSVRC2012_val_%08d.JPEG", i), "x");
    Write("val/notes.txt", "not an image");
    std::filesystem::create_directories(dir_.Sub("val/sub"));
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.Sub(name), std::ios::binary) << text;
    return dir_.Sub(name);
  }
  // The labels of the listing, by file name.
  std::map<std::string, std::string> Labels(const SourceListing& l) {
    std::map<std::string, std::string> out;
    for (const auto& e : l.entries) out[e.relative] = l.classes[e.label];
    return out;
  }
  testing::TempDir dir_;
};

// ID order (devkit) differs from sorted wnid order, so a mapping through the wrong one is caught.
constexpr char kMapClsloc[] =
    "n02119789 1 kit_fox\nn02100735 2 English_setter\nn01440764 3 tench\n";
const std::map<std::string, std::string> kWant = {
    {"ILSVRC2012_val_00000001.JPEG", "n01440764"}, {"ILSVRC2012_val_00000002.JPEG", "n02119789"},
    {"ILSVRC2012_val_00000003.JPEG", "n02100735"}, {"ILSVRC2012_val_00000004.JPEG", "n01440764"},
    {"ILSVRC2012_val_00000005.JPEG", "n02119789"}, {"ILSVRC2012_val_00000006.JPEG", "n02119789"}};

TEST_F(ImagenetLabels, GroundTruthThroughEitherSynsetFileGivesTheSameLabels) {
  const std::string gt = Write("gt.txt", "3\n1\n2\n3\n1\n1\n");
  ASSERT_OK_AND_ASSIGN(ValLabels a, ReadValLabels(gt, Write("map_clsloc.txt", kMapClsloc)));
  ASSERT_OK_AND_ASSIGN(
      ValLabels b, ReadValLabels(gt, Write("wnids.txt", "n02119789\nn02100735\r\nn01440764\n\n")));
  EXPECT_EQ(a.classes, (std::vector<std::string>{"n01440764", "n02100735", "n02119789"}));
  EXPECT_EQ(a.classes, b.classes);
  EXPECT_EQ(a.by_image, b.by_image);
  ASSERT_OK_AND_ASSIGN(SourceListing l, ListLabeledFolder(dir_.Sub("val"), a, gt));
  EXPECT_EQ(l.kind, "imagenet-val");
  ASSERT_EQ(l.entries.size(), 6u);  // notes.txt and sub/ are not samples
  EXPECT_EQ(l.entries[0].relative, "ILSVRC2012_val_00000001.JPEG");
  EXPECT_EQ(Labels(l), kWant);
}

TEST_F(ImagenetLabels, LocValSolutionCsvWithBomAndCrlf) {
  const std::string csv =
      Write("LOC_val_solution.csv",
            "\xEF\xBB\xBFImageId,PredictionString\r\n"
            "ILSVRC2012_val_00000002,n02119789 1 2 3 4 n02119789 5 6 7 8\r\n"
            "ILSVRC2012_val_00000001,n01440764 1 2 3 4\r\n"
            "ILSVRC2012_val_00000003,n02100735 9 9 9 9\r\n"
            "ILSVRC2012_val_00000004,n01440764 1 1 1 1\r\n"
            "ILSVRC2012_val_00000005,n02119789 1 1 1 1\r\n"
            "ILSVRC2012_val_00000006,n02119789 1 1 1 1\r\n"
            "ILSVRC2012_val_00009999,n02100735 1 1 1 1\r\n");  // an image not in the folder
  ASSERT_OK_AND_ASSIGN(ValLabels v, ReadValLabels(csv, ""));
  EXPECT_EQ(v.format, "LOC_val_solution.csv");
  ASSERT_OK_AND_ASSIGN(SourceListing l, ListLabeledFolder(dir_.Sub("val"), v, csv));
  EXPECT_EQ(Labels(l), kWant);
}

TEST_F(ImagenetLabels, MalformedInputNamesFileAndLine) {
  const auto expect_line = [&](const std::string& name, const std::string& text,
                               const std::string& synsets, const std::string& where) {
    auto r = ReadValLabels(Write(name, text), synsets.empty() ? "" : Write(name + ".syn", synsets));
    EXPECT_CODE(r, kInvalidArgument) << name;
    EXPECT_NE(r.status().message().find(where), absl::string_view::npos) << r.status();
  };
  expect_line("a.csv", "ImageId,PredictionString\nimg1,n01440764 1 2 3 4\nimg2 n0\n", "",
              "a.csv:3:");
  expect_line("b.csv", "ImageId,PredictionString\nimg1,n01440764 1\nimg1,n01440764 1\n", "",
              "labelled twice");
  expect_line("c.txt", "1\n7\n", kMapClsloc, "c.txt:2: ID 7 is not in");
  expect_line("d.txt", "1\nx\n", kMapClsloc, "d.txt:2:");
  expect_line("e.txt", "1\n", "n02119789\nn02119789\n", "listed twice");
  expect_line("f.txt", "1\n", "n02119789 1 a\nn02100735 1 b\n", "ID 1 is given twice");
  auto no_synsets = ReadValLabels(Write("g.txt", "1\n2\n"), "");
  EXPECT_CODE(no_synsets, kInvalidArgument);
  EXPECT_NE(no_synsets.status().message().find("map_clsloc.txt"), absl::string_view::npos)
      << no_synsets.status();
  EXPECT_CODE(ReadValLabels(dir_.Sub("missing.csv"), ""), kNotFound);
  expect_line("h.txt", std::string(70000, '1') + "\n", kMapClsloc, "longer than");
}

TEST_F(ImagenetLabels, AnImageWithoutALabelIsNamed) {
  const std::string gt = Write("gt.txt", "3\n1\n2\n");  // labels for 3 of the 6 images
  ASSERT_OK_AND_ASSIGN(ValLabels v, ReadValLabels(gt, Write("map_clsloc.txt", kMapClsloc)));
  auto l = ListLabeledFolder(dir_.Sub("val"), v, gt);
  EXPECT_CODE(l, kInvalidArgument);
  EXPECT_NE(l.status().message().find("ILSVRC2012_val_00000004.JPEG"), absl::string_view::npos)
      << l.status();
  EXPECT_NE(l.status().message().find("2 more"), absl::string_view::npos) << l.status();
  EXPECT_CODE(ListLabeledFolder(dir_.Sub("nothing-here"), v, gt), kNotFound);
}

}  // namespace
}  // namespace ddpio::tools
