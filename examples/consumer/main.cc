// Reads every record of a ddpio dataset through the installed library and checks it.
//   consumer /path/to/dataset
#include <cstdio>

#include "ddpio/storage/dataset_reader.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer DATASET\n");
    return 2;
  }
  auto reader = ddpio::storage::DatasetReader::Open(argv[1]);
  if (!reader.ok()) {
    std::fprintf(stderr, "consumer: %s\n", reader.status().ToString().c_str());
    return 1;
  }
  auto txn = (*reader)->BeginRead();
  if (!txn.ok()) return 1;
  uint64_t bytes = 0;
  for (uint64_t i = 0; i < (*reader)->size(); ++i) {
    auto record = txn->Get(i);  // verifies the record's CRC32C
    if (!record.ok()) {
      std::fprintf(stderr, "consumer: %s\n", record.status().ToString().c_str());
      return 1;
    }
    bytes += record->payload.size();
  }
  std::printf("consumer: %llu records, %zu classes, %llu payload bytes, all checksums OK\n",
              static_cast<unsigned long long>((*reader)->size()),
              (*reader)->header().classes.size(), static_cast<unsigned long long>(bytes));
  return 0;
}
