// The object store's settings resolved from an environment and a caller's explicit values: every
// explicit value wins over its variable, a variable wins over the default, and a bad variable is
// refused naming it. Every environment here is a map of the test's own: no variable of this
// process is read or changed.
#include "ddpio/storage/store_settings.h"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/storage/dataset_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::storage {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kKiB = uint64_t{1} << 10;

// Credentials and an endpoint, nothing else (HOME points nowhere: no ~/.aws file is read).
Environment StoreOnly() {
  return {{"HOME", "/nonexistent"},
          {"AWS_ENDPOINT_URL", "http://127.0.0.1:7480"},
          {"AWS_ACCESS_KEY_ID", "env-key"},
          {"AWS_SECRET_ACCESS_KEY", "env-secret"}};
}

// StoreOnly() with every DDPIO_S3_* variable set.
Environment Everything() {
  Environment env = StoreOnly();
  env["DDPIO_S3_CACHE_DIR"] = "/env/cache";
  env["DDPIO_S3_CACHE_GB"] = "3";
  env["DDPIO_S3_MEMORY_MB"] = "100";
  env["DDPIO_S3_COALESCE_KB"] = "8";
  env["DDPIO_S3_OUTAGE_SECONDS"] = "30";
  env["DDPIO_S3_MAX_IN_FLIGHT"] = "40";
  return env;
}

s3::S3Config ExplicitStore() {
  s3::S3Config c;
  c.endpoint = "memory://explicit";
  c.access_key = "explicit-key";
  c.secret_key = "explicit-secret";
  c.credentials_from = "the test";
  return c;
}

TEST(StoreSettings, WithNoVariableAndNoExplicitValueTheDefaultsHold) {
  ASSERT_OK_AND_ASSIGN(StoreSettings s, ResolveStoreSettings(StoreOnly()));
  const remote::RemoteOptions defaults;
  EXPECT_EQ(s.s3.endpoint, "http://127.0.0.1:7480");
  EXPECT_EQ(s.s3.access_key, "env-key");
  EXPECT_EQ(s.remote.cache_dir, "");
  EXPECT_EQ(s.remote.cache_bytes, 16 * kGiB);
  EXPECT_EQ(s.remote.memory_bytes, 256 * kMiB);
  EXPECT_EQ(s.remote.coalesce_gap, 64 * kKiB);
  EXPECT_EQ(s.remote.retry.give_up_after, std::chrono::minutes(5));
  // What no variable names keeps RemoteOptions' defaults.
  EXPECT_EQ(s.remote.max_request_bytes, defaults.max_request_bytes);
  EXPECT_EQ(s.remote.max_in_flight, defaults.max_in_flight);
  EXPECT_EQ(s.remote.in_flight_limit, 128);
  EXPECT_EQ(s.remote.retry.base_delay, defaults.retry.base_delay);
}

TEST(StoreSettings, EachVariableSetsItsFieldWhenNoExplicitValueIsGiven) {
  ASSERT_OK_AND_ASSIGN(StoreSettings s, ResolveStoreSettings(Everything(), StoreOverrides{}));
  EXPECT_EQ(s.s3.endpoint, "http://127.0.0.1:7480");
  EXPECT_EQ(s.remote.cache_dir, "/env/cache");
  EXPECT_EQ(s.remote.cache_bytes, 3 * kGiB);
  EXPECT_EQ(s.remote.memory_bytes, 100 * kMiB);
  EXPECT_EQ(s.remote.coalesce_gap, 8 * kKiB);
  EXPECT_EQ(s.remote.retry.give_up_after, std::chrono::seconds(30));
  EXPECT_EQ(s.remote.in_flight_limit, 40);
}

// Whole chunks asked for — DDPIO_S3_WHOLE_CHUNKS=1, or explicitly — are fetched whatever share of
// each chunk a reader needs; left to the default, from half on (RemoteOptions::min_chunk_share).
TEST(StoreSettings, WholeChunksAskedForAreFetchedWhateverShareOfThemAReaderNeeds) {
  ASSERT_OK_AND_ASSIGN(StoreSettings unset, ResolveStoreSettings(StoreOnly()));
  EXPECT_TRUE(unset.remote.whole_chunks);
  EXPECT_EQ(unset.remote.min_chunk_share, 0.5);
  Environment env = StoreOnly();
  env["DDPIO_S3_WHOLE_CHUNKS"] = "1";
  ASSERT_OK_AND_ASSIGN(StoreSettings on, ResolveStoreSettings(env));
  EXPECT_TRUE(on.remote.whole_chunks);
  EXPECT_EQ(on.remote.min_chunk_share, 0);
  env["DDPIO_S3_WHOLE_CHUNKS"] = "0";
  ASSERT_OK_AND_ASSIGN(StoreSettings off, ResolveStoreSettings(env));
  EXPECT_FALSE(off.remote.whole_chunks);
  StoreOverrides asked;
  asked.whole_chunks = true;  // wins over the variable's 0
  asked.chunk_share = remote::ChunkShare{0.125, 0.25};
  ASSERT_OK_AND_ASSIGN(StoreSettings explicit_on, ResolveStoreSettings(env, asked));
  EXPECT_TRUE(explicit_on.remote.whole_chunks);
  EXPECT_EQ(explicit_on.remote.min_chunk_share, 0);
  EXPECT_EQ(explicit_on.remote.chunk_share.alone, 0.125);
  EXPECT_EQ(explicit_on.remote.chunk_share.folder, 0.25);
}

// Each explicit value alone: it wins over its variable, and every other field still comes from
// the environment.
TEST(StoreSettings, EachExplicitValueWinsOverItsVariableAndOnlyItsOwn) {
  ASSERT_OK_AND_ASSIGN(const StoreSettings from_env, ResolveStoreSettings(Everything()));
  struct Case {
    std::string field;
    std::function<void(StoreOverrides*)> set;
    std::function<void(StoreSettings*)> expect;  // from_env with the explicit value in place
  };
  const std::vector<Case> cases = {
      {"s3", [](StoreOverrides* x) { x->s3 = ExplicitStore(); },
       [](StoreSettings* s) { s->s3 = ExplicitStore(); }},
      {"cache_dir", [](StoreOverrides* x) { x->cache_dir = "/explicit/cache"; },
       [](StoreSettings* s) { s->remote.cache_dir = "/explicit/cache"; }},
      // "" is a value too: no cache folder, whatever DDPIO_S3_CACHE_DIR says.
      {"cache_dir \"\"", [](StoreOverrides* x) { x->cache_dir = ""; },
       [](StoreSettings* s) { s->remote.cache_dir = ""; }},
      {"cache_bytes", [](StoreOverrides* x) { x->cache_bytes = 5 * kGiB; },
       [](StoreSettings* s) { s->remote.cache_bytes = 5 * kGiB; }},
      {"memory_bytes", [](StoreOverrides* x) { x->memory_bytes = 7 * kMiB; },
       [](StoreSettings* s) { s->remote.memory_bytes = 7 * kMiB; }},
      {"coalesce_gap", [](StoreOverrides* x) { x->coalesce_gap = 0; },
       [](StoreSettings* s) { s->remote.coalesce_gap = 0; }},
      {"give_up_after", [](StoreOverrides* x) { x->give_up_after = std::chrono::seconds(2); },
       [](StoreSettings* s) { s->remote.retry.give_up_after = std::chrono::seconds(2); }},
      {"in_flight_limit", [](StoreOverrides* x) { x->in_flight_limit = 16; },
       [](StoreSettings* s) { s->remote.in_flight_limit = 16; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    StoreOverrides x;
    c.set(&x);
    ASSERT_OK_AND_ASSIGN(StoreSettings s, ResolveStoreSettings(Everything(), x));
    StoreSettings want = from_env;
    c.expect(&want);
    EXPECT_EQ(s.s3.endpoint, want.s3.endpoint);
    EXPECT_EQ(s.s3.access_key, want.s3.access_key);
    EXPECT_EQ(s.s3.secret_key, want.s3.secret_key);
    EXPECT_EQ(s.remote.cache_dir, want.remote.cache_dir);
    EXPECT_EQ(s.remote.cache_bytes, want.remote.cache_bytes);
    EXPECT_EQ(s.remote.memory_bytes, want.remote.memory_bytes);
    EXPECT_EQ(s.remote.coalesce_gap, want.remote.coalesce_gap);
    EXPECT_EQ(s.remote.retry.give_up_after, want.remote.retry.give_up_after);
    EXPECT_EQ(s.remote.in_flight_limit, want.remote.in_flight_limit);
  }
}

// The defect: DDPIO_S3_CACHE_GB in the environment replaced the cache budget a program had set in
// its ReaderOptions. The budget set in the options is the one used.
TEST(StoreSettings, AnExplicitCacheBudgetInReaderOptionsIsNotOverriddenByTheEnvironment) {
  ReaderOptions o;
  o.store_overrides.cache_dir = "/explicit/cache";
  o.store_overrides.cache_bytes = 2 * kGiB;
  Environment env = StoreOnly();
  env["DDPIO_S3_CACHE_DIR"] = "/env/cache";
  env["DDPIO_S3_CACHE_GB"] = "64";
  ASSERT_OK_AND_ASSIGN(StoreSettings s, ResolveStoreSettings(env, o.store_overrides));
  EXPECT_EQ(s.remote.cache_bytes, 2 * kGiB) << "DDPIO_S3_CACHE_GB=64 won over the options' 2 GiB";
  EXPECT_EQ(s.remote.cache_dir, "/explicit/cache");
  // And over settings a caller resolved already (what DatasetReader does to given settings).
  ASSERT_OK_AND_ASSIGN(StoreSettings resolved, ResolveStoreSettings(env));
  EXPECT_EQ(resolved.remote.cache_bytes, 64 * kGiB);
  ApplyStoreOverrides(o.store_overrides, &resolved);
  EXPECT_EQ(resolved.remote.cache_bytes, 2 * kGiB);
}

TEST(StoreSettings, AnExplicitStoreIsUsedWithoutReadingAnyAwsVariable) {
  // No credentials (FailedPrecondition), an endpoint that is not a URL (InvalidArgument): neither
  // is read when the store is given.
  const Environment no_credentials = {{"HOME", "/nonexistent"}};
  Environment bad_endpoint = StoreOnly();
  bad_endpoint["AWS_ENDPOINT_URL"] = "ftp://nowhere";
  EXPECT_CODE(ResolveStoreSettings(no_credentials), kFailedPrecondition);
  EXPECT_CODE(ResolveStoreSettings(bad_endpoint), kInvalidArgument);
  StoreOverrides x;
  x.s3 = ExplicitStore();
  for (const Environment& env : {no_credentials, bad_endpoint}) {
    ASSERT_OK_AND_ASSIGN(StoreSettings s, ResolveStoreSettings(env, x));
    EXPECT_EQ(s.s3.endpoint, "memory://explicit");
    EXPECT_EQ(s.s3.access_key, "explicit-key");
  }
}

TEST(StoreSettings, EachBadVariableIsRefusedNamingItAndItsValue) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"DDPIO_S3_CACHE_GB", "abc"},        {"DDPIO_S3_CACHE_GB", "0"},
      {"DDPIO_S3_CACHE_GB", "-1"},         {"DDPIO_S3_CACHE_GB", "nan"},
      {"DDPIO_S3_MEMORY_MB", "0"},         {"DDPIO_S3_MEMORY_MB", "lots"},
      {"DDPIO_S3_MEMORY_MB", "1.5"},       {"DDPIO_S3_COALESCE_KB", "-1"},
      {"DDPIO_S3_COALESCE_KB", "1048577"}, {"DDPIO_S3_COALESCE_KB", "big"},
      {"DDPIO_S3_OUTAGE_SECONDS", "0"},    {"DDPIO_S3_OUTAGE_SECONDS", "soon"},
      {"DDPIO_S3_OUTAGE_SECONDS", "-1"},   {"DDPIO_S3_OUTAGE_SECONDS", "9999999999"},
      {"DDPIO_S3_MAX_IN_FLIGHT", "0"},     {"DDPIO_S3_MAX_IN_FLIGHT", "257"},
      {"DDPIO_S3_MAX_IN_FLIGHT", "many"},
  };
  for (const auto& [name, value] : bad) {
    Environment env = StoreOnly();
    env[name] = value;
    auto s = ResolveStoreSettings(env);
    EXPECT_CODE(s, kInvalidArgument) << name << "=" << value;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(absl::StrCat(name, "=", value, " ")));
  }
  Environment env = StoreOnly();
  env["DDPIO_S3_CACHE_GB"] = "abc";
  EXPECT_EQ(ResolveStoreSettings(env).status().message(),
            "DDPIO_S3_CACHE_GB=abc is not a size in GiB (> 0)");
}

// A variable whose value the caller gives is not read: a bad one in the environment is no error.
TEST(StoreSettings, AVariableOverriddenByAnExplicitValueIsNotRead) {
  Environment env = StoreOnly();
  env["DDPIO_S3_CACHE_GB"] = "abc";
  env["DDPIO_S3_OUTAGE_SECONDS"] = "soon";
  StoreOverrides x;
  x.cache_bytes = kGiB;
  x.give_up_after = std::chrono::seconds(9);
  ASSERT_OK_AND_ASSIGN(StoreSettings s, ResolveStoreSettings(env, x));
  EXPECT_EQ(s.remote.cache_bytes, kGiB);
  EXPECT_EQ(s.remote.retry.give_up_after, std::chrono::seconds(9));
}

}  // namespace
}  // namespace ddpio::storage
