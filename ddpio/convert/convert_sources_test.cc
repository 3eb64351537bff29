#include "ddpio/convert/convert_sources.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::convert {
namespace {

namespace fs = std::filesystem;

void Touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "x";
}

std::vector<std::string> Names(const SourceListing& l) {
  std::vector<std::string> out;
  for (const auto& e : l.entries) out.push_back(e.relative + ":" + std::to_string(e.label));
  return out;
}

// The expected order below is what torchvision.datasets.ImageFolder produces for this tree:
// classes sorted ("B" < "a" in code-point order), os.walk directories sorted by path ("a/sub" <
// "a/sub-x" < "a/sub/deeper" because a prefix sorts first and '-' < '/'), files sorted per
// directory, case-insensitive extensions, non-image files and top-level files ignored. (Checked
// against a real os.walk run over the same tree.)
TEST(ImageFolder, LabelsAndOrderMatchTorchvision) {
  testing::TempDir dir;
  fs::path r = dir.path();
  for (const char* f : {"a/z.jpg", "a/b.JPEG", "a/notes.txt", "a/sub/x.jpg", "a/sub-x/y.png",
                        "a/sub/deeper/w.jpg", "B/1.jpg", "c d/k.webp", "top.jpg"}) {
    Touch(r / f);
  }
  ASSERT_OK_AND_ASSIGN(SourceListing l, ListImageFolder(r.string()));
  EXPECT_EQ(l.classes, (std::vector<std::string>{"B", "a", "c d"}));
  EXPECT_EQ(Names(l),
            (std::vector<std::string>{"B/1.jpg:0", "a/b.JPEG:1", "a/z.jpg:1", "a/sub/x.jpg:1",
                                      "a/sub-x/y.png:1", "a/sub/deeper/w.jpg:1", "c d/k.webp:2"}));
}

TEST(ImageFolder, FollowsSymlinkedClassFoldersWithoutLooping) {
  testing::TempDir dir;
  fs::path r = dir.path() / "root";
  Touch(dir.path() / "elsewhere/i.jpg");
  fs::create_directories(r);
  fs::create_directory_symlink(dir.path() / "elsewhere", r / "cls");
  fs::create_directory_symlink(dir.path() / "elsewhere", dir.path() / "elsewhere/loop");
  ASSERT_OK_AND_ASSIGN(SourceListing l, ListImageFolder(r.string()));
  EXPECT_EQ(Names(l), (std::vector<std::string>{"cls/i.jpg:0"}));
}

TEST(ImageFolder, ErrorsLikeTorchvision) {
  testing::TempDir dir;
  EXPECT_CODE(ListImageFolder(dir.Sub("missing")), kNotFound);
  Touch(dir.path() / "flat/only.jpg");
  EXPECT_CODE(ListImageFolder(dir.Sub("flat")), kNotFound);  // no class folder
  Touch(dir.path() / "r/a/1.jpg");
  Touch(dir.path() / "r/empty/readme.txt");
  auto l = ListImageFolder(dir.Sub("r"));
  EXPECT_CODE(l, kInvalidArgument);
  EXPECT_NE(l.status().message().find("empty"), absl::string_view::npos) << l.status();
}

TEST(ListFile, ParsesCaffeLinesRelativeToTheListFolder) {
  testing::TempDir dir;
  std::ofstream(dir.Sub("train.txt")) << "# comment\n"
                                         "cat/1.jpg 0\n"
                                         "\n"
                                         "dir with space/2.jpg 3\r\n";
  ASSERT_OK_AND_ASSIGN(SourceListing l, ReadListFile(dir.Sub("train.txt"), ""));
  EXPECT_EQ(l.root, dir.path().string());
  EXPECT_EQ(Names(l), (std::vector<std::string>{"cat/1.jpg:0", "dir with space/2.jpg:3"}));
  EXPECT_EQ(l.classes, (std::vector<std::string>{"0", "1", "2", "3"}));
  ASSERT_OK_AND_ASSIGN(SourceListing l2, ReadListFile(dir.Sub("train.txt"), "/images"));
  EXPECT_EQ(l2.root, "/images");
}

TEST(ListFile, BadLineNamesFileAndLineNumber) {
  testing::TempDir dir;
  for (const char* bad :
       {"nolabel.jpg", "x.jpg -1", "x.jpg 1.5", "x.jpg 99999999999", "x.jpg one"}) {
    std::ofstream(dir.Sub("l.txt"), std::ios::trunc) << "ok.jpg 1\nok2.jpg 2\n" << bad << "\n";
    auto l = ReadListFile(dir.Sub("l.txt"), "");
    EXPECT_CODE(l, kInvalidArgument);
    EXPECT_NE(l.status().message().find("l.txt:3:"), absl::string_view::npos) << l.status();
  }
  EXPECT_CODE(ReadListFile(dir.Sub("absent.txt"), ""), kNotFound);
}

TEST(ListFile, AnEndlessLineIsRefusedAtTheBoundAndNulsAreNotCutAway) {
  testing::TempDir dir;
  {  // 4 MB without a newline after a good line: refused by line number, not read whole
    std::ofstream f(dir.Sub("l.txt"), std::ios::binary);
    f << "ok.jpg 1\n" << std::string(4 << 20, 'x');
  }
  auto l = ReadListFile(dir.Sub("l.txt"), "");
  EXPECT_CODE(l, kInvalidArgument);
  EXPECT_NE(l.status().message().find("l.txt:2: a line longer than 8192 bytes"),
            absl::string_view::npos)
      << l.status();
  // The longest allowed line, with a CRLF ending and no final newline, still parses.
  const std::string path(kMaxListLine - 3, 'p');
  std::ofstream(dir.Sub("long.txt"), std::ios::binary | std::ios::trunc) << "a.jpg 0\n"
                                                                         << path << " 7\r";
  ASSERT_OK_AND_ASSIGN(SourceListing ok, ReadListFile(dir.Sub("long.txt"), ""));
  EXPECT_EQ(Names(ok), (std::vector<std::string>{"a.jpg:0", path + ":7"}));
  // A NUL inside a line is part of it: "x.jpg 1\0junk" has no valid label, it is not "x.jpg 1".
  std::ofstream(dir.Sub("nul.txt"), std::ios::binary | std::ios::trunc)
      << std::string("x.jpg 1\0junk\n", 13);
  auto nul = ReadListFile(dir.Sub("nul.txt"), "");
  EXPECT_CODE(nul, kInvalidArgument);
  EXPECT_NE(nul.status().message().find("nul.txt:1:"), absl::string_view::npos) << nul.status();
}

TEST(Fingerprint, ChangesWithEntriesLabelsAndOptions) {
  SourceListing l;
  l.kind = "list";
  l.classes = {"0", "1"};
  l.entries = {{"a.jpg", 0}, {"b.jpg", 1}};
  std::string base = ListingFingerprint(l, "o");
  EXPECT_EQ(base, ListingFingerprint(l, "o"));
  EXPECT_NE(base, ListingFingerprint(l, "p"));
  SourceListing relabelled = l;
  relabelled.entries[1].label = 0;
  EXPECT_NE(base, ListingFingerprint(relabelled, "o"));
  SourceListing reordered = l;
  std::swap(reordered.entries[0], reordered.entries[1]);
  EXPECT_NE(base, ListingFingerprint(reordered, "o"));
}

}  // namespace
}  // namespace ddpio::convert
