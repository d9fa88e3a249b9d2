// Mixed precision (REFERENCE §7, PyTorch AMP): fp32 master weights and optimiser state; the
// matrix products (linear, attention's two batched products) in bf16 or fp16 through ATen's
// autocast; norms, softmax statistics, the loss and reductions in fp32. Nothing is stored in
// the low precision: checkpoints, weights and gradients stay fp32.
//
// int8 is for decoding only (translate, evaluate, generate): the linear layers' weights
// quantised to int8 with one scale per output row, as CTranslate2's int8 (model/int8_linear.h);
// everything else, autocast included, as fp32.
#pragma once

#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/types.h>

namespace normlab::model {

enum class Precision { kFp32, kBf16, kFp16, kInt8 };

std::string to_string(Precision p);  // fp32 | bf16 | fp16 | int8
// Throws std::invalid_argument naming `option`, the value and the choices.
Precision parse_precision(const std::string& s, const std::string& option = "--precision");
// The same, and "auto": bf16 where `device` multiplies in bf16 natively (CUDA; a CPU with
// AMX-BF16 or AVX512_BF16), else fp32 (bf16 emulated on an AVX2 CPU: ~8x slower than fp32).
Precision parse_precision(const std::string& s, const c10::Device& device, const std::string& option = "--precision");
// One line when bf16 runs emulated on `device` (a CPU without AMX-BF16 or AVX512_BF16), else "".
std::string precision_warning(Precision p, const c10::Device& device);
// Why `p` cannot run on `device` with `master` weights (empty when it can): fp16 needs CUDA
// (this CPU's fp16 products run at 1/8 of bf16's, docs/performance.md), the low precisions
// need float32 master weights, and int8 needs `decoding` (a command that only decodes), the
// CPU and fbgemm in this LibTorch.
std::vector<std::string> precision_problems(Precision p, const c10::Device& device,
                                            c10::ScalarType master = c10::kFloat, bool decoding = false);
// The dtype of autocast's matrix products: float32 (fp32, int8), bfloat16 or float16.
c10::ScalarType compute_dtype(Precision p);

// Enables autocast on `device`'s type in `p` for the guard's life (a no-op for fp32); the
// previous state comes back at its end. Weights cast once inside a guard are reused until the
// outermost guard ends (as torch.autocast): weights must not change while a guard is alive, so
// a guard never spans an optimiser step or an in-place change of the model. Thread-local.
class PrecisionGuard {
 public:
  PrecisionGuard(Precision p, const c10::Device& device);
  ~PrecisionGuard();
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;

 private:
  bool active_;
  c10::DeviceType device_type_;
  bool was_enabled_;
  c10::ScalarType was_dtype_;
};

// `w` as autocast hands it to a matrix product in the current scope: in the low precision
// (cast once per outermost guard, from autocast's cache) when a guard is active on w's device,
// else `w` itself. For code that transforms weights before the product (attention stacks its
// q, k, v weights: stacking the cast weights moves half the bytes and reuses the cache).
torch::Tensor autocast_operand(const torch::Tensor& w);

// Whether `type` is a low precision: bf16 or fp16.
bool is_reduced(c10::ScalarType type);

// `t` in float32 when it is bf16 or fp16, else `t` itself: log-probabilities and the loss are
// computed in fp32 from low-precision logits (fairseq's get_normalized_probs does `.float()`).
torch::Tensor float_if_reduced(const torch::Tensor& t);

}  // namespace normlab::model
