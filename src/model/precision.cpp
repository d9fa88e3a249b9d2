#include "model/precision.h"

#include <stdexcept>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "core/runtime.h"
#include "model/int8_linear.h"

namespace normlab::model {

std::string to_string(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kInt8:
      return "int8";
    case Precision::kFp32:
      break;
  }
  return "fp32";
}

Precision parse_precision(const std::string& s, const std::string& option) {
  if (s == "fp32") return Precision::kFp32;
  if (s == "bf16") return Precision::kBf16;
  if (s == "fp16") return Precision::kFp16;
  if (s == "int8") return Precision::kInt8;
  throw std::invalid_argument(option + ": unknown value '" + s + "', expected fp32|bf16|fp16|int8|auto");
}

Precision parse_precision(const std::string& s, const c10::Device& device, const std::string& option) {
  if (s != "auto") return parse_precision(s, option);
  return device.is_cuda() || core::cpu_bf16_faster() ? Precision::kBf16 : Precision::kFp32;
}

std::string precision_warning(Precision p, const c10::Device& device) {
  if (p != Precision::kBf16 || device.is_cuda() || core::cpu_bf16_faster()) return "";
  if (!core::cpu_native_bf16().empty())
    return "warning: --precision bf16 on an Intel CPU with AVX512_BF16 but no AMX: its matrix products run "
           "at about 0.6x fp32's rate (docs/precision.md); --precision auto picks fp32 here";
  return "warning: --precision bf16 on a CPU without AMX-BF16 or AVX512_BF16: its matrix products are "
         "emulated, about 8x slower than fp32 (docs/precision.md); --precision auto picks fp32 here";
}

std::vector<std::string> precision_problems(Precision p, const c10::Device& device,
                                            c10::ScalarType master, bool decoding) {
  std::vector<std::string> out;
  if (p == Precision::kFp32) return out;
  if (p == Precision::kInt8 && !decoding)
    out.push_back("--precision int8 is for decoding only (translate, evaluate, generate); use fp32, bf16 or fp16 here");
  if (p == Precision::kInt8 && decoding && !device.is_cpu())
    out.push_back("--precision int8 runs on the CPU only (fbgemm's int8 products), not " + device.str());
  if (p == Precision::kInt8 && decoding && !int8_available())
    out.push_back("--precision int8 needs fbgemm, which this LibTorch was built without");
  if (p == Precision::kFp16 && !device.is_cuda())
    out.push_back("--precision fp16 needs a CUDA device (on this CPU fp16 matrix products run at "
                  "1/8 of bf16's: use --precision bf16)");
  if (master != c10::kFloat)
    out.push_back("--precision " + to_string(p) + " runs on float32 weights, not " +
                  std::string(c10::toString(master)) + " (use --dtype float32)");
  return out;
}

c10::ScalarType compute_dtype(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return c10::kBFloat16;
    case Precision::kFp16:
      return c10::kHalf;
    case Precision::kFp32:
    case Precision::kInt8:
      break;
  }
  return c10::kFloat;
}

PrecisionGuard::PrecisionGuard(Precision p, const c10::Device& device)
    : active_(p == Precision::kBf16 || p == Precision::kFp16),  // int8 is not autocast's (linear.h)
      device_type_(device.type()),
      was_enabled_(at::autocast::is_autocast_enabled(device_type_)),
      was_dtype_(at::autocast::get_autocast_dtype(device_type_)) {
  if (!active_) return;
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, compute_dtype(p));
  at::autocast::increment_nesting();
}

PrecisionGuard::~PrecisionGuard() {
  if (!active_) return;
  // torch.autocast.__exit__: the cast cache lives until the outermost scope ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, was_enabled_);
  at::autocast::set_autocast_dtype(device_type_, was_dtype_);
}

torch::Tensor autocast_operand(const torch::Tensor& w) {
  const auto type = w.device().type();
  if (!at::autocast::is_autocast_enabled(type)) return w;
  return at::autocast::cached_cast(at::autocast::get_autocast_dtype(type), w, type);
}

bool is_reduced(c10::ScalarType type) { return type == torch::kBFloat16 || type == torch::kHalf; }

torch::Tensor float_if_reduced(const torch::Tensor& t) {
  return is_reduced(t.scalar_type()) ? t.to(torch::kFloat) : t;
}

}  // namespace normlab::model
