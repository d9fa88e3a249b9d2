#include "train/loss.h"

#include <stdexcept>

#include <torch/torch.h>

#include "model/precision.h"

namespace normlab::train {

std::string to_string(LabelSmoothingFormula f) {
  return f == LabelSmoothingFormula::kUniform ? "uniform" : "exclusive";
}

LabelSmoothingFormula parse_label_smoothing_formula(const std::string& s, const std::string& option) {
  if (s == "uniform") return LabelSmoothingFormula::kUniform;
  if (s == "exclusive") return LabelSmoothingFormula::kExclusive;
  throw std::invalid_argument(option + ": unknown value '" + s + "', expected uniform|exclusive");
}

LossSums label_smoothed_nll(const torch::Tensor& logits, const torch::Tensor& target, double eps,
                            LabelSmoothingFormula formula, int64_t pad) {
  TORCH_CHECK(eps >= 0.0 && eps < 1.0, "label smoothing must be in [0, 1), got ", eps);
  const auto V = static_cast<double>(logits.size(-1));
  // REFERENCE §7: the loss in fp32 also when the logits come from a bf16/fp16 product.
  auto lprobs = torch::log_softmax(model::float_if_reduced(logits), -1);  // (B,T,V)
  auto nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1);        // (B,T)
  auto smooth = -lprobs.sum(-1);                                          // (B,T)
  auto keep = target.ne(pad);
  nll = nll.masked_fill(~keep, 0.0).sum();
  smooth = smooth.masked_fill(~keep, 0.0).sum();
  // REFERENCE §2: the two formulas differ only in how eps is spread over the vocabulary.
  const double w = formula == LabelSmoothingFormula::kUniform ? eps / V : eps / (V - 1.0);
  const double w_nll = formula == LabelSmoothingFormula::kUniform ? 1.0 - eps : 1.0 - eps - w;
  return {w_nll * nll + w * smooth, nll, keep.sum().item<int64_t>()};
}

}  // namespace normlab::train
