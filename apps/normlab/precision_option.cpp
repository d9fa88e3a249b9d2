#include "precision_option.h"

#include <iostream>

#include "core/problems.h"

namespace normlab::app {

void add_precision_option(CLI::App& command, std::string& value, bool decoding) {
  const std::string int8 = decoding ? "; int8: the linear layers' weights in int8 with per-row scales, CPU only" : "";
  command
      .add_option("--precision", value,
                  std::string(decoding ? "fp32|bf16|fp16|int8|auto" : "fp32|bf16|fp16|auto") +
                      ": matrix products in bf16/fp16, weights, norms, softmax and loss in fp32 (fp16: CUDA only; "
                      "auto: bf16 on CUDA and on CPUs with AMX-BF16 or AVX512_BF16, else fp32" + int8 + ")")
      ->capture_default_str();
}

model::Precision resolve_precision(const std::string& value, const c10::Device& device,
                                   torch::Dtype master, bool decoding) {
  const auto p = model::parse_precision(value, device);
  core::throw_if_problems(model::precision_problems(p, device, master, decoding));
  warn_if_emulated(p, device);
  return p;
}

void warn_if_emulated(model::Precision p, const c10::Device& device) {
  if (const auto line = model::precision_warning(p, device); !line.empty()) std::cerr << "normlab: " << line << "\n";
}

void require_fp32(const std::string& value, const std::string& why) {
  if (value != "auto" && model::parse_precision(value) != model::Precision::kFp32)
    throw std::invalid_argument("--precision " + value + ": " + why);
}

}  // namespace normlab::app
