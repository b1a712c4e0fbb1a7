#pragma once
// Roofline lower bounds for timed kernels (DESIGN §5, "Roofline").
//
// The reference worker counts the work a task implies (FLOPs and compulsory
// bytes, evaluator/py/korch_flops.py); this module turns that count and a
// device's datasheet peaks into t_min, the shortest time any correct kernel
// can plausibly take. t_min serves two purposes:
//  - a sanity check on timings: a candidate measured under
//    k_impossible_fraction * t_min is re-measured, and if it stays under, the
//    verdict is `impossible_timing` (the timing, not the kernel, is broken:
//    async work escaping the events, cached results, stream games);
//  - the `roofline` reward, 0.3 + 2.7 * reward_roofline_fraction(t_min, t_cand).
//
// Because an impossible_timing verdict zeroes a candidate, t_min must be a
// true lower bound: every peak used here is the HIGHEST rate a kernel that
// still meets the task's tolerance could plausibly reach (see
// compute_ceiling_flops). A bound that is a factor of two too low costs little:
// the exploits this catches run orders of magnitude under it.
//
// Pure functions; thread-safe.
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "config/vocabulary.hpp"
#include "util/error.hpp"

namespace korch::evaluator::roofline {

// Peak rates of one device, all per second. Tensor rates are dense (no 2:4
// structured sparsity, which needs sparse operands the tasks do not have).
// A zero rate means the device has no such unit (e.g. fp8 on an A100).
struct GpuPeaks {
  std::string name;              // canonical, e.g. "H100 SXM5 80GB"
  double mem_bw_bytes_s = 0;     // device memory bandwidth
  double fp32_flops = 0;         // FP32 on the CUDA cores (non-tensor)
  double tf32_tensor_flops = 0;  // TF32 tensor cores, dense
  double fp16_tensor_flops = 0;  // FP16 tensor cores (FP32 accumulate), dense
  double bf16_tensor_flops = 0;  // BF16 tensor cores, dense
  double fp8_tensor_flops = 0;   // FP8 tensor cores, dense; 0 before Ada/Hopper
  double int8_tensor_ops = 0;    // INT8 tensor cores, dense (ops/s)
  std::string source;            // where the numbers come from
};

// What arithmetic a task admits: the dtype of its data and the tolerance
// profile it is judged with (DESIGN §5, "Tolerance profiles").
enum class Precision {
  fp32_strict,  // fp32 data, atol=rtol=1e-4 (`strict`, the default)
  fp32_tf32,    // fp32 data, atol=rtol=1e-2 (`tf32` profile)
  fp16,         // fp16 data, 1e-2
  bf16,         // bf16 data, 1e-2
};

const char* to_string(Precision p);

// Maps a dtype as korch_flops.py reports it ("float32", "float16",
// "bfloat16"; "float64" is judged as fp32_strict, a safe over-estimate of the
// peak) and a tolerance profile to a Precision (fp32 data: fp32_tf32 where the
// profile allows TF32). Fails on an unknown dtype.
Result<Precision> precision_from(std::string_view dtype, config::Tolerance tolerance);

// The work a task implies, as counted on the reference.
struct WorkEstimate {
  double flops = 0;  // floating-point operations (a multiply-add is 2)
  double bytes = 0;  // compulsory traffic: inputs + parameters read once, outputs written once
};

// The datasheet table, most specific rows first (the order find_gpu uses).
std::span<const GpuPeaks> gpu_table();

// Looks a device up by the name torch reports (torch.cuda.get_device_name),
// e.g. "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
// "NVIDIA L40S", "NVIDIA L4". Case-insensitive; the name is split into
// alphanumeric tokens, so "L4" never matches "L40S" and "H200" never matches
// "GH200". A variant the name leaves open (a bare "NVIDIA A100", "NVIDIA
// H100") resolves to the family's SXM row, its fastest compute (and, for the
// A100, its fastest memory), so t_min stays a lower bound. Unknown devices
// (including "cpu", whose peaks must be measured) give nullopt: the caller
// then skips the roofline rather than guess.
std::optional<GpuPeaks> find_gpu(std::string_view device_name);

// Peaks for the CPU mode, built from values the caller measured or
// configured (a STREAM-like copy for bandwidth, a timed GEMM for FLOP/s).
// Every compute field is set to `flops`. Fails unless both are finite and > 0.
Result<GpuPeaks> cpu_peaks(double mem_bw_bytes_s, double flops);

// The highest FLOP rate a kernel meeting `precision`'s tolerance could reach
// on `p` (the maximum over the admitted units; units the device lacks are 0
// and drop out):
//  - fp32_strict: max(FP32, TF32, FP16/BF16 tensor). 3xTF32 (TF32 peak / 3)
//    is the guaranteed way to meet 1e-4 on tensor cores, but it is not the
//    fastest one that passes: on KernelBench's uniform inputs a single TF32
//    pass (10-bit mantissa, rounding errors averaging out over K) already
//    meets 1e-4, and FP16 has the same 10-bit mantissa at twice the TF32 rate
//    for in-range data. 8-bit paths are excluded: one pass cannot reach
//    1e-4, and split schemes need >= 3 products (<= 2/3 of the FP16 rate).
//  - fp32_tf32, fp16, bf16 (1e-2): every tensor unit, FP8 and INT8 included.
//    With per-row scales and FP32 accumulation an 8-bit GEMM can pass 1e-2
//    on uniform data, so only the fastest unit is a safe ceiling.
double compute_ceiling_flops(const GpuPeaks& p, Precision precision);

// t_min = max(flops / compute_ceiling_flops, bytes / mem_bw), in seconds.
// A term whose rate is 0 (unknown) is left out; 0 when neither term is known.
double t_min_s(const WorkEstimate& w, const GpuPeaks& p, Precision precision);

// A measured time under this fraction of t_min is suspicious.
inline constexpr double k_impossible_fraction = 0.8;

enum class Classification {
  ok,          // plausible (or no bound is known)
  suspicious,  // under k_impossible_fraction * t_min: re-measure
};

const char* to_string(Classification c);

// Classifies one measurement against t_min. No bound (t_min not finite and
// > 0) gives ok. A measurement that is not a number, or not above the
// threshold, gives suspicious. The caller re-measures a suspicious candidate
// and classifies again; suspicious twice is the `impossible_timing` verdict.
Classification classify(double measured_s, double t_min_s);

// min(t_min / t_cand, 1): the roofline reward's fraction of the attainable.
// 0 when either time is not finite and > 0 (no bound, or a broken timing).
double reward_roofline_fraction(double t_min_s, double t_cand_s);

}  // namespace korch::evaluator::roofline
