#include "precision_option.h"

#include "core/problems.h"

namespace normlab::app {

void add_precision_option(CLI::App& command, std::string& value) {
  command
      .add_option("--precision", value,
                  "fp32|bf16|fp16: matrix products in bf16/fp16, weights, norms, softmax and loss in "
                  "fp32 (fp16: CUDA only)")
      ->capture_default_str();
}

model::Precision resolve_precision(const std::string& value, const c10::Device& device,
                                   torch::Dtype master) {
  const auto p = model::parse_precision(value);
  core::throw_if_problems(model::precision_problems(p, device, master));
  return p;
}

void require_fp32(const std::string& value, const std::string& why) {
  if (model::parse_precision(value) != model::Precision::kFp32)
    throw std::invalid_argument("--precision " + value + ": " + why);
}

}  // namespace normlab::app
