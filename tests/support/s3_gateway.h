// Tests against a real S3 server (ctest label s3): the test command starts Ceph's gateway
// (scripts/object-store.sh) and exports AWS_ENDPOINT_URL, the keys and DDPIO_REQUIRE_S3.
#ifndef DDPIO_TESTS_SUPPORT_S3_GATEWAY_H_
#define DDPIO_TESTS_SUPPORT_S3_GATEWAY_H_

#include <cstdlib>

#include "gtest/gtest.h"

// In a fixture's SetUp: skips, saying how to start a gateway, when no endpoint is configured —
// and fails instead when DDPIO_REQUIRE_S3 is set (the test command), so that a gateway that did
// not come up cannot pass for a run.
#define DDPIO_SKIP_WITHOUT_S3()                                                              \
  do {                                                                                       \
    if (std::getenv("AWS_ENDPOINT_URL") == nullptr) {                                        \
      if (std::getenv("DDPIO_REQUIRE_S3") != nullptr) {                                      \
        FAIL() << "DDPIO_REQUIRE_S3 is set but AWS_ENDPOINT_URL is not: start the gateway "  \
                  "(scripts/object-store.sh up)";                                            \
      }                                                                                      \
      GTEST_SKIP()                                                                           \
          << "no S3 endpoint (AWS_ENDPOINT_URL): start one with scripts/object-store.sh up"; \
    }                                                                                        \
  } while (0)

#endif  // DDPIO_TESTS_SUPPORT_S3_GATEWAY_H_
