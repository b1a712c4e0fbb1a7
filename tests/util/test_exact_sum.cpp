// util/exact_sum.hpp: the same doubles in any order give the same sum, the
// correctly rounded one, where naive addition differs by order.
#include "util/exact_sum.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace korch {
namespace {

double exact(const std::vector<double>& xs) {
  ExactSum s;
  for (double x : xs) s.add(x);
  return s.value();
}

TEST(ExactSum, TheOrderOfAdditionDoesNotChangeTheSum) {
  // Naive addition: (0.1 + 0.2) + 0.3 = 0.6000000000000001, 0.3 + 0.2 + 0.1 = 0.6.
  const std::vector<double> up = {0.1, 0.2, 0.3}, down = {0.3, 0.2, 0.1};
  ASSERT_NE((up[0] + up[1]) + up[2], (down[0] + down[1]) + down[2]) << "the premise";
  EXPECT_EQ(exact(up), exact(down));
  EXPECT_EQ(exact(up), 0.6);
  // Costs like a campaign's: many small, unequal numbers, shuffled.
  std::mt19937 rng(37);
  std::vector<double> costs;
  for (int i = 0; i < 500; ++i) costs.push_back(0.001 + 1e-3 / static_cast<double>(3 + i % 7));
  const double want = exact(costs);
  int naive_differs = 0;
  for (int round = 0; round < 20; ++round) {
    std::shuffle(costs.begin(), costs.end(), rng);
    double naive = 0;
    for (double c : costs) naive += c;
    naive_differs += naive != want;
    EXPECT_EQ(exact(costs), want) << "shuffle " << round;
  }
  EXPECT_GT(naive_differs, 0) << "the premise: naive sums of these depend on the order";
}

TEST(ExactSum, IsTheCorrectlyRoundedSum) {
  EXPECT_EQ(ExactSum().value(), 0.0);
  // 1e100 + 1 - 1e100: naive gives 0, the exact sum is 1.
  EXPECT_EQ(exact({1e100, 1.0, -1e100}), 1.0);
  // 1 + 2^-53 + 2^-53 (each half an ulp of 1): the exact 1 + 2^-52 is a double.
  const double half_ulp = std::ldexp(1.0, -53);
  EXPECT_EQ(exact({1.0, half_ulp, half_ulp}), 1.0 + 2 * half_ulp);
  EXPECT_EQ(exact({half_ulp, half_ulp, 1.0}), 1.0 + 2 * half_ulp);
  // A tie rounds to even: 1 + 2^-53 is halfway between 1 and 1 + 2^-52.
  EXPECT_EQ(exact({1.0, half_ulp}), 1.0);
  // ...but a tiny extra pushes it up (Python's fsum gives the same).
  EXPECT_EQ(exact({1.0, half_ulp, 1e-300}), 1.0 + 2 * half_ulp);
}

}  // namespace
}  // namespace korch
