#include "evaluator/roofline.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <set>
#include <string>

namespace korch::evaluator::roofline {
namespace {

struct NameCase {
  const char* torch_name;
  const char* row;  // nullptr: no match expected
};

void PrintTo(const NameCase& c, std::ostream* os) { *os << '"' << c.torch_name << '"'; }

class FindGpuTest : public ::testing::TestWithParam<NameCase> {};

TEST_P(FindGpuTest, MapsTorchNameToRow) {
  const auto& c = GetParam();
  const auto peaks = find_gpu(c.torch_name);
  if (c.row == nullptr) {
    EXPECT_FALSE(peaks.has_value()) << c.torch_name << " -> " << peaks->name;
  } else {
    ASSERT_TRUE(peaks.has_value()) << c.torch_name;
    EXPECT_EQ(peaks->name, c.row) << c.torch_name;
  }
}

INSTANTIATE_TEST_SUITE_P(TorchNames, FindGpuTest,
                         ::testing::Values(NameCase{"NVIDIA H200", "H200 SXM 141GB"},
                                           NameCase{"NVIDIA H200 NVL", "H200 NVL 141GB"},
                                           NameCase{"nvidia h200", "H200 SXM 141GB"},
                                           NameCase{"NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"},
                                           NameCase{"NVIDIA H100 PCIe", "H100 PCIe 80GB"},
                                           NameCase{"NVIDIA H100 NVL", "H100 NVL 94GB"},
                                           NameCase{"NVIDIA H100", "H100 SXM5 80GB"},
                                           NameCase{"NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"},
                                           NameCase{"NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"},
                                           NameCase{"NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"},
                                           NameCase{"NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"},
                                           NameCase{"NVIDIA A100 SXM4 40 GB", "A100 SXM4 40GB"},
                                           NameCase{"NVIDIA A100", "A100 SXM4 80GB"},
                                           NameCase{"NVIDIA L40S", "L40S"},
                                           NameCase{"NVIDIA L40", "L40"},
                                           NameCase{"NVIDIA L4", "L4"}, NameCase{"L4", "L4"},
                                           // Near misses must not match a wrong row.
                                           NameCase{"NVIDIA GH200 480GB", nullptr},
                                           NameCase{"NVIDIA L40G", nullptr},
                                           NameCase{"NVIDIA GeForce RTX 4090", nullptr},
                                           NameCase{"cpu", nullptr}, NameCase{"", nullptr}));

TEST(GpuTable, RowsAreCompleteAndSane) {
  std::set<std::string> names;
  for (const auto& row : gpu_table()) {
    EXPECT_TRUE(names.insert(row.name).second) << "duplicate " << row.name;
    EXPECT_FALSE(row.source.empty()) << row.name;
    EXPECT_GT(row.mem_bw_bytes_s, 1e11) << row.name;
    EXPECT_GT(row.fp32_flops, 1e12) << row.name;
    // Dense tensor rates: TF32 <= FP16 == BF16 <= 8-bit; FP32 below FP16 tensor.
    EXPECT_LE(row.tf32_tensor_flops, row.fp16_tensor_flops) << row.name;
    EXPECT_EQ(row.fp16_tensor_flops, row.bf16_tensor_flops) << row.name;
    EXPECT_LE(row.fp16_tensor_flops, row.int8_tensor_ops) << row.name;
    EXPECT_LT(row.fp32_flops, row.fp16_tensor_flops) << row.name;
    if (row.fp8_tensor_flops > 0) {
      EXPECT_EQ(row.fp8_tensor_flops, row.int8_tensor_ops) << row.name;
    }
  }
  for (const char* required : {"H100 SXM5 80GB", "H100 PCIe 80GB", "H200 SXM 141GB",
                               "A100 SXM4 40GB", "A100 SXM4 80GB", "L40S", "L4"}) {
    EXPECT_TRUE(names.contains(required)) << required;
  }
}

TEST(GpuTable, DatasheetSpotChecks) {
  const auto h200 = find_gpu("NVIDIA H200");
  ASSERT_TRUE(h200);
  EXPECT_DOUBLE_EQ(h200->mem_bw_bytes_s, 4.8e12);
  EXPECT_DOUBLE_EQ(h200->fp16_tensor_flops, 989.4e12);
  const auto a100 = find_gpu("NVIDIA A100-SXM4-80GB");
  ASSERT_TRUE(a100);
  EXPECT_DOUBLE_EQ(a100->mem_bw_bytes_s, 2039e9);
  EXPECT_DOUBLE_EQ(a100->tf32_tensor_flops, 156e12);
  EXPECT_EQ(a100->fp8_tensor_flops, 0);  // Ampere has no FP8
  const auto l4 = find_gpu("NVIDIA L4");
  ASSERT_TRUE(l4);
  EXPECT_DOUBLE_EQ(l4->mem_bw_bytes_s, 300e9);
}

TEST(ComputeCeiling, StrictFp32UsesSixteenBitTensorPeakOthersUseEightBit) {
  const auto h100 = *find_gpu("NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(compute_ceiling_flops(h100, Precision::fp32_strict), 989.4e12);
  EXPECT_DOUBLE_EQ(compute_ceiling_flops(h100, Precision::fp32_tf32), 1978.9e12);
  EXPECT_DOUBLE_EQ(compute_ceiling_flops(h100, Precision::fp16), 1978.9e12);
  EXPECT_DOUBLE_EQ(compute_ceiling_flops(h100, Precision::bf16), 1978.9e12);
  // No FP8 on the A100: the INT8 rate is its 8-bit ceiling.
  const auto a100 = *find_gpu("NVIDIA A100-SXM4-40GB");
  EXPECT_DOUBLE_EQ(compute_ceiling_flops(a100, Precision::fp16), 624e12);
  // The ceiling is never below the TF32 peak (3xTF32 would be TF32 / 3).
  for (const auto& row : gpu_table()) {
    EXPECT_GE(compute_ceiling_flops(row, Precision::fp32_strict), row.tf32_tensor_flops);
  }
}

TEST(TMin, SquareMatmulOnH200ByHand) {
  // KernelBench level1/1: C = A @ B, N = 4096, fp32.
  constexpr double n = 4096;
  const WorkEstimate w{.flops = 2 * n * n * n, .bytes = 3 * n * n * 4};
  const auto h200 = *find_gpu("NVIDIA H200");
  // Compute-bound: 137438953472 FLOP / 989.4e12 FLOP/s = 138.91 us, above
  // 201326592 B / 4.8e12 B/s = 41.94 us.
  EXPECT_NEAR(t_min_s(w, h200, Precision::fp32_strict), 1.38911e-4, 1e-9);
  // At 1e-2 the FP8 rate (1978.9e12) is the ceiling: 69.45 us.
  EXPECT_NEAR(t_min_s(w, h200, Precision::fp32_tf32), 6.94522e-5, 1e-9);
}

TEST(TMin, ReluOnH200IsBandwidthBound) {
  // KernelBench level1/19: 4096 x 393216 fp32, read once and written once.
  constexpr double numel = 4096.0 * 393216.0;
  const WorkEstimate w{.flops = numel, .bytes = 2 * numel * 4};
  const auto h200 = *find_gpu("NVIDIA H200");
  EXPECT_NEAR(t_min_s(w, h200, Precision::fp32_strict), 12884901888.0 / 4.8e12, 1e-12);
}

TEST(TMin, UnknownTermsAreLeftOut) {
  const auto h200 = *find_gpu("NVIDIA H200");
  EXPECT_EQ(t_min_s(WorkEstimate{}, h200, Precision::fp32_strict), 0);
  GpuPeaks no_bw = h200;
  no_bw.mem_bw_bytes_s = 0;
  EXPECT_NEAR(t_min_s({.flops = 989.4e12, .bytes = 1e15}, no_bw, Precision::fp32_strict), 1.0,
              1e-12);
}

TEST(CpuPeaks, UsesTheGivenValuesEverywhere) {
  const auto cpu = cpu_peaks(20e9, 100e9);
  ASSERT_TRUE(cpu.has_value());
  EXPECT_EQ(cpu->name, "cpu");
  for (auto p : {Precision::fp32_strict, Precision::fp32_tf32, Precision::fp16, Precision::bf16}) {
    EXPECT_DOUBLE_EQ(compute_ceiling_flops(*cpu, p), 100e9);
  }
  // 2 GFLOP at 100 GFLOP/s vs 1 GB at 20 GB/s: bandwidth-bound, 50 ms.
  EXPECT_NEAR(t_min_s({.flops = 2e9, .bytes = 1e9}, *cpu, Precision::fp32_strict), 0.05, 1e-12);
  EXPECT_FALSE(cpu_peaks(0, 1e9).has_value());
  EXPECT_FALSE(cpu_peaks(1e9, -1).has_value());
  EXPECT_FALSE(cpu_peaks(std::numeric_limits<double>::infinity(), 1e9).has_value());
  EXPECT_FALSE(cpu_peaks(1e9, std::nan("")).has_value());
}

TEST(PrecisionFrom, MapsDtypeAndProfile) {
  EXPECT_EQ(precision_from("float32", config::Tolerance::strict).value(), Precision::fp32_strict);
  EXPECT_EQ(precision_from("float32", config::Tolerance::tf32).value(), Precision::fp32_tf32);
  EXPECT_EQ(precision_from("float64", config::Tolerance::strict).value(), Precision::fp32_strict);
  EXPECT_EQ(precision_from("float16", config::Tolerance::strict).value(), Precision::fp16);
  EXPECT_EQ(precision_from("bfloat16", config::Tolerance::tf32).value(), Precision::bf16);
  EXPECT_FALSE(precision_from("int64", config::Tolerance::strict).has_value());
}

struct ClassifyCase {
  double measured_s;
  double t_min_s;
  Classification expected;
};

void PrintTo(const ClassifyCase& c, std::ostream* os) {
  *os << "measured=" << c.measured_s << " t_min=" << c.t_min_s;
}

class ClassifyTest : public ::testing::TestWithParam<ClassifyCase> {};

TEST_P(ClassifyTest, Thresholds) {
  const auto& c = GetParam();
  EXPECT_EQ(classify(c.measured_s, c.t_min_s), c.expected)
      << "measured " << c.measured_s << " t_min " << c.t_min_s;
}

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();

INSTANTIATE_TEST_SUITE_P(
    Cases, ClassifyTest,
    ::testing::Values(ClassifyCase{2.0, 1.0, Classification::ok},
                      ClassifyCase{1.0, 1.0, Classification::ok},
                      ClassifyCase{0.8, 1.0, Classification::ok},  // exactly at the threshold
                      ClassifyCase{0.79, 1.0, Classification::suspicious},
                      ClassifyCase{1e-6, 1e-3, Classification::suspicious},
                      ClassifyCase{0.0, 1.0, Classification::suspicious},
                      ClassifyCase{-1.0, 1.0, Classification::suspicious},
                      ClassifyCase{k_nan, 1.0, Classification::suspicious},
                      ClassifyCase{k_inf, 1.0, Classification::ok},
                      // No bound: nothing to compare with.
                      ClassifyCase{1e-9, 0.0, Classification::ok},
                      ClassifyCase{1e-9, k_nan, Classification::ok},
                      ClassifyCase{1e-9, -1.0, Classification::ok}));

TEST(RewardFraction, IsClampedRatio) {
  EXPECT_DOUBLE_EQ(reward_roofline_fraction(1.0, 2.0), 0.5);
  EXPECT_DOUBLE_EQ(reward_roofline_fraction(1.0, 4.0), 0.25);
  EXPECT_DOUBLE_EQ(reward_roofline_fraction(1.0, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(reward_roofline_fraction(1.0, 0.5), 1.0);  // faster than t_min: capped
  EXPECT_EQ(reward_roofline_fraction(0.0, 1.0), 0.0);
  EXPECT_EQ(reward_roofline_fraction(1.0, 0.0), 0.0);
  EXPECT_EQ(reward_roofline_fraction(k_nan, 1.0), 0.0);
  EXPECT_EQ(reward_roofline_fraction(1.0, k_inf), 0.0);
}

TEST(ToString, Names) {
  EXPECT_STREQ(to_string(Precision::fp32_strict), "fp32_strict");
  EXPECT_STREQ(to_string(Classification::suspicious), "suspicious");
}

}  // namespace
}  // namespace korch::evaluator::roofline
