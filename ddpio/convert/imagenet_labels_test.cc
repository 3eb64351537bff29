#include "ddpio/convert/imagenet_labels.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::convert {
namespace {

// A flat validation folder of six images, a non-image and a sub-folder (neither is a sample).
class ImagenetLabels : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Sub("val/sub"));
    for (int i = 1; i <= 6; ++i) Write(absl::StrFormat("val/ILSVRC2012_val_%08d.JPEG", i), "x");
    Write("val/notes.txt", "not an image");
    Write("val/sub/ILSVRC2012_val_00000007.JPEG", "x");  // unlabelled, but not looked at
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.Sub(name), std::ios::binary) << text;
    return dir_.Sub(name);
  }
  // file name -> class name, and file name -> label number.
  static std::map<std::string, std::string> Classes(const SourceListing& l) {
    std::map<std::string, std::string> out;
    for (const auto& e : l.entries) out[e.relative] = l.classes.at(e.label);
    return out;
  }
  static std::vector<int32_t> LabelNumbers(const SourceListing& l) {
    std::vector<int32_t> out;
    for (const auto& e : l.entries) out.push_back(e.label);
    return out;
  }
  // Reads `text` (as `name`) with `synsets` (none when empty) and expects InvalidArgument whose
  // message holds `where` ("FILE:LINE: ..." with FILE the base name).
  void ExpectInvalid(const std::string& name, const std::string& text, const std::string& synsets,
                     const std::string& where) {
    auto r = ReadValLabels(Write(name, text), synsets.empty() ? "" : Write(name + ".syn", synsets));
    EXPECT_CODE(r, kInvalidArgument) << name;
    EXPECT_NE(r.status().message().find(where), absl::string_view::npos)
        << name << ": want '" << where << "' in: " << r.status();
  }
  testing::TempDir dir_;
};

// The devkit's ID order (fox 1, setter 2, tench 3, goldfish 4) differs from the sorted wnid order
// (tench, goldfish, setter, fox), so a label taken from the ID order, or classes that drop the
// synset no image uses (goldfish), give different label numbers.
constexpr char kMapClsloc[] =
    "n02119789 1 kit_fox\nn01440764 3 tench\nn02100735 2 English_setter\nn01443537 4 goldfish\n";
constexpr char kWnids[] = "n02119789\nn02100735\nn01440764\nn01443537\n";
const std::vector<std::string> kClasses = {"n01440764", "n01443537", "n02100735", "n02119789"};
constexpr char kGroundTruth[] = "3\n1\n2\n3\n1\n1\n";  // images 1..6
const std::map<std::string, std::string> kWant = {
    {"ILSVRC2012_val_00000001.JPEG", "n01440764"}, {"ILSVRC2012_val_00000002.JPEG", "n02119789"},
    {"ILSVRC2012_val_00000003.JPEG", "n02100735"}, {"ILSVRC2012_val_00000004.JPEG", "n01440764"},
    {"ILSVRC2012_val_00000005.JPEG", "n02119789"}, {"ILSVRC2012_val_00000006.JPEG", "n02119789"}};
const std::vector<int32_t> kWantLabels = {0, 3, 2, 0, 3, 3};  // positions in kClasses

TEST_F(ImagenetLabels, GroundTruthThroughEitherSynsetFileGivesTheSameLabels) {
  const std::string gt = Write("labels.csv", kGroundTruth);  // the content decides, not the name
  ASSERT_OK_AND_ASSIGN(ValLabels a, ReadValLabels(gt, Write("map_clsloc.txt", kMapClsloc)));
  ASSERT_OK_AND_ASSIGN(ValLabels b, ReadValLabels(gt, Write("wnids.txt", kWnids)));
  EXPECT_EQ(a.format, "ILSVRC2012_validation_ground_truth.txt");
  EXPECT_EQ(a.classes, kClasses);  // goldfish too, though no image is one
  EXPECT_EQ(a.classes, b.classes);
  EXPECT_EQ(a.by_image, b.by_image);
  EXPECT_EQ(a.by_image.size(), 6u);
  ASSERT_OK_AND_ASSIGN(SourceListing l, ListLabeledFolder(dir_.Sub("val"), a, gt));
  EXPECT_EQ(l.kind, "imagenet-val");
  EXPECT_EQ(l.root, dir_.Sub("val"));
  EXPECT_EQ(l.described, dir_.Sub("val"));
  EXPECT_EQ(l.classes, kClasses);
  ASSERT_EQ(l.entries.size(), 6u);  // notes.txt and sub/ are not samples
  EXPECT_EQ(l.entries[0].relative, "ILSVRC2012_val_00000001.JPEG");
  EXPECT_EQ(l.entries[5].relative, "ILSVRC2012_val_00000006.JPEG");
  EXPECT_EQ(Classes(l), kWant);
  EXPECT_EQ(LabelNumbers(l), kWantLabels);
}

TEST_F(ImagenetLabels, LocValSolutionCsvWithBomAndCrlf) {
  const std::string csv =
      Write("gt.txt",  // the content decides, not the name
            "\xEF\xBB\xBFImageId,PredictionString\r\n"
            "ILSVRC2012_val_00000002,n02119789 1 2 3 4 n09999999 5 6 7 8\r\n"  // 2nd box: no class
            "ILSVRC2012_val_00000001,n01440764 1 2 3 4\r\n"
            "ILSVRC2012_val_00000003,n02100735 9 9 9 9\r\n"
            "ILSVRC2012_val_00000004,n01440764 1 1 1 1\r\n"
            "ILSVRC2012_val_00000005,n02119789 1 1 1 1\r\n"
            "ILSVRC2012_val_00000006,n02119789 1 1 1 1\r\n"
            "ILSVRC2012_val_00009999,n01443537 1 1 1 1\r\n"  // an image not in the folder
            "\r\n\r\n");
  ASSERT_OK_AND_ASSIGN(ValLabels v, ReadValLabels(csv, dir_.Sub("ignored-for-csv")));
  EXPECT_EQ(v.format, "LOC_val_solution.csv");
  EXPECT_EQ(v.classes, kClasses);  // the synsets the file names, sorted
  EXPECT_EQ(v.by_image.size(), 7u);
  ASSERT_OK_AND_ASSIGN(SourceListing l, ListLabeledFolder(dir_.Sub("val"), v, csv));
  EXPECT_EQ(Classes(l), kWant);
  EXPECT_EQ(LabelNumbers(l), kWantLabels);
}

TEST_F(ImagenetLabels, GroundTruthAndSynsetsWithBomCrlfAndTrailingBlankLines) {
  const std::string gt = Write("gt.txt",
                               "\xEF\xBB\xBF"
                               "3\r\n1\r\n2\r\n3\r\n1\r\n1\r\n\r\n");
  ASSERT_OK_AND_ASSIGN(
      ValLabels v,
      ReadValLabels(gt, Write("map.txt",
                              "\xEF\xBB\xBF"
                              "n02119789 1 kit_fox\r\nn01440764 3 tench\r\n"
                              "n02100735 2 English_setter\r\nn01443537 4 goldfish\r\n \r\n\n")));
  EXPECT_EQ(v.classes, kClasses);
  ASSERT_OK_AND_ASSIGN(SourceListing l, ListLabeledFolder(dir_.Sub("val"), v, gt));
  EXPECT_EQ(LabelNumbers(l), kWantLabels);
}

TEST_F(ImagenetLabels, MalformedCsvNamesFileAndLine) {
  const std::string h = "ImageId,PredictionString\n";
  ExpectInvalid("a.csv", h + "img1,n01440764 1 2 3 4\nimg2 n01440764\n", "", "a.csv:3: expected");
  ExpectInvalid("b.csv", h + "img1,n01440764 1\nimg2,dog 1 2 3 4\n", "", "b.csv:3: expected");
  ExpectInvalid("c.csv", h + "img1,\n", "", "c.csv:2: expected");
  ExpectInvalid("d.csv", h + ",n01440764 1\n", "", "d.csv:2: expected");
  ExpectInvalid("e.csv", h + "img1,n01440764 1\nimg2,n01440764\nimg1,n02119789 1\n", "",
                "e.csv:4: image img1 is labelled twice");
  ExpectInvalid("f.csv", h + "img1,n01440764 1\n\nimg2,n01440764 1\n", "",
                "f.csv:3: a blank line before more text");
  ExpectInvalid("g.csv", h + std::string(256, 'i') + ",n01440764 1\n", "", "g.csv:2: expected");
  ExpectInvalid("h.csv", h + "\n", "", "has a header but no row");
  ExpectInvalid("i.csv", "ImageId,PredictionString,Extra\nimg1,n01440764\n", "",
                "i.csv:1: expected LOC_val_solution.csv's header");
}

TEST_F(ImagenetLabels, MalformedGroundTruthNamesFileAndLine) {
  ExpectInvalid("a.txt", "1\n7\n", kMapClsloc, "a.txt:2: ID 7 is not in");
  ExpectInvalid("b.txt", "1\nx\n", kMapClsloc, "b.txt:2: expected one ILSVRC2012_ID");
  ExpectInvalid("c.txt", "1\n2\n0\n", kMapClsloc, "c.txt:3: expected one ILSVRC2012_ID");
  ExpectInvalid("d.txt", "1\n2 3\n", kMapClsloc, "d.txt:2: expected one ILSVRC2012_ID");
  ExpectInvalid("e.txt", "1\n-2\n", kMapClsloc, "e.txt:2: expected one ILSVRC2012_ID");
  ExpectInvalid("f.txt", "1\n\n2\n", kMapClsloc, "f.txt:2: a blank line before more text");
  ExpectInvalid("g.txt", "# labels\n1\n", kMapClsloc, "g.txt:1: expected LOC_val_solution.csv");
  ExpectInvalid("h.txt", "", kMapClsloc, "is empty");
  ExpectInvalid("i.txt", "\n\n", kMapClsloc, "is empty");
}

TEST_F(ImagenetLabels, MalformedSynsetFileNamesFileAndLine) {
  ExpectInvalid("a", "1\n", "n02119789\nn02100735\nn02119789\n",
                "a.syn:3: n02119789 is listed twice (first on line 1)");
  ExpectInvalid("b", "1\n", "n02119789 1 a\nn02100735 1 b\n", "b.syn:2: ID 1 is given twice");
  ExpectInvalid("c", "1\n", "n02119789 1 a\nn02100735 3 b\n", "lists 2 synsets but not ID 2");
  ExpectInvalid("d", "1\n", "n02119789\nn02100735 2 b\n", "d.syn:2: expected one wnid");
  ExpectInvalid("e", "1\n", "n02119789 1 a\nn02100735\n", "e.syn:2: expected map_clsloc.txt");
  ExpectInvalid("f", "1\n", "# wnids\nn02119789\n", "f.syn:1: expected one wnid");
  ExpectInvalid("g", "1\n", "n0211978\n", "g.syn:1: expected one wnid");
  ExpectInvalid("h", "1\n", "n02119789 1\n",
                "h.syn:1: expected one wnid (n + 8 digits) per line, or");
  ExpectInvalid("i", "1\n", "n02119789 0 a\n", "i.syn:1: expected map_clsloc.txt");
  ExpectInvalid("j", "1\n", "n02119789\n\nn02100735\n", "j.syn:2: a blank line");
  ExpectInvalid("k", "1\n", "\n", "synset file");
}

TEST_F(ImagenetLabels, SynsetFileIsNeeded) {
  auto none = ReadValLabels(Write("gt.txt", kGroundTruth), "");
  EXPECT_CODE(none, kInvalidArgument);
  for (const char* hint : {"map_clsloc.txt", "meta.mat", "scipy.io.loadmat", "ILSVRC2012_ID"}) {
    EXPECT_NE(none.status().message().find(hint), absl::string_view::npos) << none.status();
  }
  auto missing = ReadValLabels(Write("gt2.txt", kGroundTruth), dir_.Sub("no-such-map.txt"));
  EXPECT_CODE(missing, kNotFound);
  EXPECT_NE(missing.status().message().find("no-such-map.txt"), absl::string_view::npos)
      << missing.status();
  EXPECT_CODE(ReadValLabels(dir_.Sub("missing.csv"), ""), kNotFound);
}

TEST_F(ImagenetLabels, HostileSizesAreRefused) {
  ExpectInvalid("long.txt", "1\n" + std::string(kMaxLabelLineBytes + 1, '1') + "\n", kMapClsloc,
                "long.txt:2: a line longer than 65536 bytes");
  ExpectInvalid("long-eof.txt", std::string(kMaxLabelLineBytes + 1, '1'), kMapClsloc,
                "long-eof.txt:1: a line longer than");
  // Exactly the limit is fine (and then is not an ID).
  ExpectInvalid("limit.txt", "1\n" + std::string(kMaxLabelLineBytes, 'x') + "\n", kMapClsloc,
                "limit.txt:2: expected one ILSVRC2012_ID");
  // Blank lines count: the reader stops at the limit rather than skipping them forever.
  ExpectInvalid("many.txt", "1\n" + std::string(kMaxLabelLines, '\n'), kMapClsloc,
                "many.txt:10000001: more than 10000000 lines");
  ExpectInvalid("many.syn.txt", "1\n", "n02119789\n" + std::string(kMaxLabelLines, '\n'),
                "more than 10000000 lines");
}

TEST_F(ImagenetLabels, AnImageWithoutALabelIsNamed) {
  const std::string gt = Write("gt.txt", "3\n1\n2\n");  // labels for 3 of the 6 images
  ASSERT_OK_AND_ASSIGN(ValLabels v, ReadValLabels(gt, Write("map_clsloc.txt", kMapClsloc)));
  auto l = ListLabeledFolder(dir_.Sub("val"), v, gt);
  EXPECT_CODE(l, kInvalidArgument);
  for (const std::string& part :
       {std::string("ILSVRC2012_val_00000004.JPEG"), gt, std::string("3 of the 6 images")}) {
    EXPECT_NE(l.status().message().find(part), absl::string_view::npos) << l.status();
  }
}

TEST_F(ImagenetLabels, NoFolderOrNoImageIsNotFound) {
  const std::string gt = Write("gt.txt", kGroundTruth);
  ASSERT_OK_AND_ASSIGN(ValLabels v, ReadValLabels(gt, Write("wnids.txt", kWnids)));
  EXPECT_CODE(ListLabeledFolder(dir_.Sub("nothing-here"), v, gt), kNotFound);
  std::filesystem::create_directories(dir_.Sub("empty/sub"));
  Write("empty/readme.txt", "x");
  Write("empty/sub/ILSVRC2012_val_00000001.JPEG", "x");
  EXPECT_CODE(ListLabeledFolder(dir_.Sub("empty"), v, gt), kNotFound);
}

}  // namespace
}  // namespace ddpio::convert
