#include "ddpio/storage/checksum.h"

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace ddpio::storage {
namespace {

TEST(Crc32c, StandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32c, ChainingEqualsOneShot) {
  std::string data(10000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + 7);
  uint32_t whole = Crc32c(data.data(), data.size());
  uint32_t part = Crc32c(data.data(), 1234);
  part = Crc32c(data.data() + 1234, data.size() - 1234, part);
  EXPECT_EQ(whole, part);
}

TEST(Crc32c, DetectsEverySingleBitFlip) {
  std::string data(257, 'x');
  const uint32_t good = Crc32c(data.data(), data.size());
  for (size_t byte = 0; byte < data.size(); byte += 17) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = data;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      EXPECT_NE(Crc32c(bad.data(), bad.size()), good) << byte << ":" << bit;
    }
  }
}

}  // namespace
}  // namespace ddpio::storage
