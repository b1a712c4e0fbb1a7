// util/sha256.hpp against the FIPS 180-2 test vectors.
#include "util/sha256.hpp"

#include <gtest/gtest.h>

#include <string>

namespace korch {
namespace {

struct Vector {
  std::string input;
  std::string hex;
};

class Sha256Vectors : public ::testing::TestWithParam<Vector> {};

TEST_P(Sha256Vectors, MatchesKnownDigest) {
  EXPECT_EQ(sha256_hex(GetParam().input), GetParam().hex);
}

INSTANTIATE_TEST_SUITE_P(
    Fips180, Sha256Vectors,
    ::testing::Values(
        Vector{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        Vector{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        Vector{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
               "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        Vector{std::string(1000, 'a'),
               "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"}));

}  // namespace
}  // namespace korch
