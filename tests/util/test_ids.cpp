// util/ids.hpp: deterministic identifiers keep their shape and values (a
// change would orphan every stored campaign and episode).
#include "util/ids.hpp"

#include <gtest/gtest.h>

#include "util/sha256.hpp"

namespace korch::ids {
namespace {

TEST(Ids, CampaignIdIsPrefixedSha256Prefix) {
  EXPECT_EQ(campaign_id("demo"), "c-" + sha256_hex("demo").substr(0, 16));
  EXPECT_EQ(campaign_id("demo").size(), 18u);
  EXPECT_NE(campaign_id("demo"), campaign_id("demo2"));
}

TEST(Ids, EpisodeIdHashesEveryPart) {
  const auto base = episode_id("c-1", "t", "m", 0);
  EXPECT_EQ(base, "e-" + sha256_hex("c-1|t|m|0").substr(0, 24));
  EXPECT_EQ(base, episode_id("c-1", "t", "m", 0));
  EXPECT_NE(base, episode_id("c-2", "t", "m", 0));
  EXPECT_NE(base, episode_id("c-1", "u", "m", 0));
  EXPECT_NE(base, episode_id("c-1", "t", "n", 0));
  EXPECT_NE(base, episode_id("c-1", "t", "m", 1));
}

TEST(Ids, RequestIdsNameEpisodeTurnAndCode) {
  EXPECT_EQ(llm_request_id("e-1", 3, "gpt"), "llm|e-1|3|gpt");
  EXPECT_EQ(code_digest("x"), sha256_hex("x").substr(0, 24));
  EXPECT_EQ(submit_request_id("e-1", "x"), "kernel|e-1|" + code_digest("x"));
  EXPECT_EQ(check_request_id("e-1", 2, "x"), "check|e-1|2|" + code_digest("x"));
  EXPECT_EQ(submit_request_id_of_digest("e-1", code_digest("x")), submit_request_id("e-1", "x"));
  EXPECT_EQ(check_request_id_of_digest("e-1", 2, code_digest("x")),
            check_request_id("e-1", 2, "x"));
}

TEST(Ids, StableHash64IsTheFirstEightDigestBytes) {
  // sha256("abc") starts ba7816bf8f01cfea.
  EXPECT_EQ(stable_hash64("abc"), 0xba7816bf8f01cfeaULL);
  EXPECT_EQ(stable_hash64("abc"), stable_hash64("abc"));
}

}  // namespace
}  // namespace korch::ids
