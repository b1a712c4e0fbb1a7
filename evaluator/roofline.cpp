#include "evaluator/roofline.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <vector>

namespace korch::evaluator::roofline {
namespace {

constexpr double k_tera = 1e12;
constexpr double k_giga = 1e9;

// Datasheet peaks. NVIDIA's datasheets print tensor rates "with sparsity"
// (marked *); the dense rate is half of that, and is what is stored here.
// Where NVIDIA's architecture whitepaper gives the dense figure to more
// digits (H100 SXM5), that figure is used.
//
// Row order matters only through k_name_rules below.
const std::array<GpuPeaks, 12> k_table = {{
    // NVIDIA H100 Tensor Core GPU datasheet, "H100 PCIe" column (80GB HBM2e):
    // FP32 51 TF; TF32 756*, BF16/FP16 1,513*, FP8 3,026*, INT8 3,026* TOPS;
    // 2 TB/s. Whitepaper (GH100, H100 PCIe): TF32 378 / FP16 756 / FP8 1,513 dense.
    {"H100 PCIe 80GB", 2.0e12, 51 * k_tera, 378 * k_tera, 756.5 * k_tera, 756.5 * k_tera,
     1513 * k_tera, 1513 * k_tera, "NVIDIA H100 datasheet (H100 PCIe column), sparse rates halved"},
    // NVIDIA H100 Tensor Core GPU datasheet, "H100 NVL" column (94GB HBM3):
    // FP32 60 TF; TF32 835*, BF16/FP16 1,671*, FP8 3,341*, INT8 3,341* TOPS; 3.9 TB/s.
    {"H100 NVL 94GB", 3.9e12, 60 * k_tera, 417.5 * k_tera, 835.5 * k_tera, 835.5 * k_tera,
     1670.5 * k_tera, 1670.5 * k_tera,
     "NVIDIA H100 datasheet (H100 NVL column), sparse rates halved"},
    // NVIDIA H100 Tensor Core GPU datasheet, "H100 SXM" column (80GB HBM3):
    // FP32 67 TF; TF32 989*, BF16/FP16 1,979*, FP8 3,958*, INT8 3,958* TOPS;
    // 3.35 TB/s. Dense figures from the NVIDIA H100 whitepaper (SXM5):
    // TF32 494.7, FP16/BF16 989.4, FP8 1,978.9, INT8 1,978.9.
    {"H100 SXM5 80GB", 3.35e12, 67 * k_tera, 494.7 * k_tera, 989.4 * k_tera, 989.4 * k_tera,
     1978.9 * k_tera, 1978.9 * k_tera,
     "NVIDIA H100 datasheet (H100 SXM column) + H100 whitepaper dense rates"},
    // NVIDIA H200 Tensor Core GPU datasheet, "H200 NVL" column (141GB HBM3e):
    // FP32 60 TF; TF32 835*, BF16/FP16 1,671*, FP8 3,341*, INT8 3,341* TOPS; 4.8 TB/s.
    {"H200 NVL 141GB", 4.8e12, 60 * k_tera, 417.5 * k_tera, 835.5 * k_tera, 835.5 * k_tera,
     1670.5 * k_tera, 1670.5 * k_tera,
     "NVIDIA H200 datasheet (H200 NVL column), sparse rates halved"},
    // NVIDIA H200 Tensor Core GPU datasheet, "H200 SXM" column (141GB HBM3e):
    // FP32 67 TF; TF32 989*, BF16/FP16 1,979*, FP8 3,958*, INT8 3,958* TOPS;
    // 4.8 TB/s. Same GH100 compute as the H100 SXM5 (whitepaper dense rates).
    {"H200 SXM 141GB", 4.8e12, 67 * k_tera, 494.7 * k_tera, 989.4 * k_tera, 989.4 * k_tera,
     1978.9 * k_tera, 1978.9 * k_tera,
     "NVIDIA H200 datasheet (H200 SXM column), sparse rates halved"},
    // NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TF; TF32 156 (312*),
    // BF16/FP16 312 (624*), INT8 624 (1,248*) TOPS; no FP8. Bandwidth per
    // variant: 40GB PCIe 1,555 GB/s, 80GB PCIe 1,935 GB/s, 40GB SXM 1,555 GB/s,
    // 80GB SXM 2,039 GB/s.
    {"A100 PCIe 40GB", 1555 * k_giga, 19.5 * k_tera, 156 * k_tera, 312 * k_tera, 312 * k_tera, 0,
     624 * k_tera, "NVIDIA A100 datasheet (A100 40GB PCIe column)"},
    {"A100 PCIe 80GB", 1935 * k_giga, 19.5 * k_tera, 156 * k_tera, 312 * k_tera, 312 * k_tera, 0,
     624 * k_tera, "NVIDIA A100 datasheet (A100 80GB PCIe column)"},
    {"A100 SXM4 40GB", 1555 * k_giga, 19.5 * k_tera, 156 * k_tera, 312 * k_tera, 312 * k_tera, 0,
     624 * k_tera, "NVIDIA A100 datasheet (A100 40GB SXM column)"},
    {"A100 SXM4 80GB", 2039 * k_giga, 19.5 * k_tera, 156 * k_tera, 312 * k_tera, 312 * k_tera, 0,
     624 * k_tera, "NVIDIA A100 datasheet (A100 80GB SXM column)"},
    // NVIDIA L40S datasheet: FP32 91.6 TF; TF32 183 (366*), BF16/FP16 362.05
    // (733*), FP8 733 (1,466*), INT8 733 (1,466*) TOPS; 48GB GDDR6, 864 GB/s.
    {"L40S", 864 * k_giga, 91.6 * k_tera, 183 * k_tera, 362.05 * k_tera, 362.05 * k_tera,
     733 * k_tera, 733 * k_tera, "NVIDIA L40S datasheet"},
    // NVIDIA L40 datasheet: FP32 90.5 TF; TF32 90.5 (181*), BF16/FP16 181.05
    // (362.1*), FP8 362 (724*), INT8 362 (724*) TOPS; 48GB GDDR6, 864 GB/s.
    {"L40", 864 * k_giga, 90.5 * k_tera, 90.5 * k_tera, 181.05 * k_tera, 181.05 * k_tera,
     362 * k_tera, 362 * k_tera, "NVIDIA L40 datasheet"},
    // NVIDIA L4 datasheet (sparse rates only): FP32 30.3 TF; TF32 120*,
    // BF16/FP16 242*, FP8 485*, INT8 485* TOPS; 24GB GDDR6, 300 GB/s.
    {"L4", 300 * k_giga, 30.3 * k_tera, 60 * k_tera, 121 * k_tera, 121 * k_tera, 242.5 * k_tera,
     242.5 * k_tera, "NVIDIA L4 datasheet, sparse rates halved"},
}};

// How torch names map onto rows: a name matches a rule when it has the
// family token and every qualifier token. First match wins, so specific
// rules come before the family's default.
struct NameRule {
  std::string_view family;
  std::array<std::string_view, 2> qualifiers;  // empty entries are ignored
  std::string_view row;
};

const std::array<NameRule, 12> k_name_rules = {{
    {"h100", {"pcie"}, "H100 PCIe 80GB"},          // "NVIDIA H100 PCIe"
    {"h100", {"nvl"}, "H100 NVL 94GB"},            // "NVIDIA H100 NVL"
    {"h100", {}, "H100 SXM5 80GB"},                // "NVIDIA H100 80GB HBM3"
    {"h200", {"nvl"}, "H200 NVL 141GB"},           // "NVIDIA H200 NVL"
    {"h200", {}, "H200 SXM 141GB"},                // "NVIDIA H200"
    {"a100", {"pcie", "40gb"}, "A100 PCIe 40GB"},  // "NVIDIA A100-PCIE-40GB"
    {"a100", {"pcie"}, "A100 PCIe 80GB"},          // "NVIDIA A100 80GB PCIe"
    {"a100", {"40gb"}, "A100 SXM4 40GB"},          // "NVIDIA A100-SXM4-40GB"
    {"a100", {}, "A100 SXM4 80GB"},                // "NVIDIA A100-SXM4-80GB"
    {"l40s", {}, "L40S"},                          // "NVIDIA L40S"
    {"l40", {}, "L40"},                            // "NVIDIA L40"
    {"l4", {}, "L4"},                              // "NVIDIA L4"
}};

// Lower-cased alphanumeric tokens; a number followed by "gb" is merged
// ("80 GB" -> "80gb") so spacing variants match.
std::vector<std::string> tokenize(std::string_view name) {
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&] {
    if (current.empty()) {
      return;
    }
    const bool is_gb = current == "gb";
    if (is_gb && !tokens.empty() && !tokens.back().empty() &&
        std::ranges::all_of(tokens.back(),
                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      tokens.back() += current;
    } else {
      tokens.push_back(current);
    }
    current.clear();
  };
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      current.push_back(static_cast<char>(std::tolower(u)));
    } else {
      flush();
    }
  }
  flush();
  return tokens;
}

bool positive_finite(double x) { return std::isfinite(x) && x > 0; }

}  // namespace

const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp32_strict: return "fp32_strict";
    case Precision::fp32_tf32: return "fp32_tf32";
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
  }
  return "unknown";
}

const char* to_string(Classification c) {
  switch (c) {
    case Classification::ok: return "ok";
    case Classification::suspicious: return "suspicious";
  }
  return "unknown";
}

Result<Precision> precision_from(std::string_view dtype, config::Tolerance tolerance) {
  if (dtype == "float32" || dtype == "float64") {
    return config::tolerance_profile(tolerance).allow_tf32 ? Precision::fp32_tf32
                                                           : Precision::fp32_strict;
  }
  if (dtype == "float16") {
    return Precision::fp16;
  }
  if (dtype == "bfloat16") {
    return Precision::bf16;
  }
  return fail("no roofline precision for dtype '" + std::string(dtype) + "'");
}

std::span<const GpuPeaks> gpu_table() { return k_table; }

std::optional<GpuPeaks> find_gpu(std::string_view device_name) {
  const auto tokens = tokenize(device_name);
  auto has = [&](std::string_view t) {
    return t.empty() || std::ranges::find(tokens, t) != tokens.end();
  };
  for (const auto& rule : k_name_rules) {
    if (!has(rule.family) || !std::ranges::all_of(rule.qualifiers, has)) {
      continue;
    }
    for (const auto& row : k_table) {
      if (row.name == rule.row) {
        return row;
      }
    }
    throw Fatal("roofline: name rule points at missing row " + std::string(rule.row));
  }
  return std::nullopt;
}

Result<GpuPeaks> cpu_peaks(double mem_bw_bytes_s, double flops) {
  if (!positive_finite(mem_bw_bytes_s) || !positive_finite(flops)) {
    return fail("cpu peaks need a positive, finite bandwidth and FLOP rate");
  }
  // A CPU has no tensor cores: one rate for every precision, in the peaks
  // table's column order.
  return GpuPeaks{"cpu", mem_bw_bytes_s, flops,
                  flops, flops,          flops,
                  flops, flops,          "measured or configured by the caller"};
}

double compute_ceiling_flops(const GpuPeaks& p, Precision precision) {
  const double strict =
      std::max({p.fp32_flops, p.tf32_tensor_flops, p.fp16_tensor_flops, p.bf16_tensor_flops});
  switch (precision) {
    case Precision::fp32_strict: return strict;
    case Precision::fp32_tf32:
    case Precision::fp16:
    case Precision::bf16: return std::max({strict, p.fp8_tensor_flops, p.int8_tensor_ops});
  }
  return strict;
}

double t_min_s(const WorkEstimate& w, const GpuPeaks& p, Precision precision) {
  double t = 0;
  const double ceiling = compute_ceiling_flops(p, precision);
  if (positive_finite(ceiling) && positive_finite(w.flops)) {
    t = std::max(t, w.flops / ceiling);
  }
  if (positive_finite(p.mem_bw_bytes_s) && positive_finite(w.bytes)) {
    t = std::max(t, w.bytes / p.mem_bw_bytes_s);
  }
  return t;
}

Classification classify(double measured_s, double t_min_s) {
  if (!positive_finite(t_min_s)) {
    return Classification::ok;
  }
  // Written so that a NaN measurement lands on suspicious.
  if (measured_s >= k_impossible_fraction * t_min_s) {
    return Classification::ok;
  }
  return Classification::suspicious;
}

double reward_roofline_fraction(double t_min_s, double t_cand_s) {
  if (!positive_finite(t_min_s) || !positive_finite(t_cand_s)) {
    return 0;
  }
  return std::min(t_min_s / t_cand_s, 1.0);
}

}  // namespace korch::evaluator::roofline
