#include "train/loss.h"

#include <stdexcept>

#include <torch/torch.h>

#include "model/kernels/log_softmax_terms.h"
#include "model/precision.h"
#include "train/train_options.h"

namespace normlab::train {

std::string to_string(LabelSmoothingFormula f) { return label_smoothing_formulas().name(f); }

LabelSmoothingFormula parse_label_smoothing_formula(const std::string& s, const std::string& option) {
  return label_smoothing_formulas().parse(s, option);
}

LossSums label_smoothed_nll(const torch::Tensor& logits, const torch::Tensor& target, double eps,
                            LabelSmoothingFormula formula, int64_t pad, double z_loss) {
  TORCH_CHECK(eps >= 0.0 && eps < 1.0, "label smoothing must be in [0, 1), got ", eps);
  TORCH_CHECK(z_loss >= 0.0, "z-loss must be >= 0, got ", z_loss);
  const auto V = static_cast<double>(logits.size(-1));
  torch::Tensor nll, smooth;  // (B,T): -log p(target), -sum_v log p(v)
  if (model::kernels::log_softmax_terms_apply(logits)) {
    // bf16/fp16 logits: both terms in one fused pass, in fp32 (REFERENCE §7).
    auto terms = model::kernels::log_softmax_terms(logits.reshape({-1, logits.size(-1)}), target.reshape(-1));
    nll = terms.nll.view(target.sizes());
    smooth = terms.smooth.view(target.sizes());
  } else {
    // REFERENCE §7: the loss in fp32 also when the logits come from a bf16/fp16 product.
    auto lprobs = torch::log_softmax(model::float_if_reduced(logits), -1);  // (B,T,V)
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1);
    smooth = -lprobs.sum(-1);
  }
  auto keep = target.ne(pad);
  nll = nll.masked_fill(~keep, 0.0).sum();
  smooth = smooth.masked_fill(~keep, 0.0).sum();
  // REFERENCE §2: the two formulas differ only in how eps is spread over the vocabulary.
  const double w = formula == LabelSmoothingFormula::kUniform ? eps / V : eps / (V - 1.0);
  const double w_nll = formula == LabelSmoothingFormula::kUniform ? 1.0 - eps : 1.0 - eps - w;
  auto loss = w_nll * nll + w * smooth;
  if (z_loss > 0.0) {
    // z-loss: C (log Z)^2 per token, in fp32 (a separate pass over V: only when asked for).
    const auto log_z = torch::logsumexp(model::float_if_reduced(logits), -1);  // (B,T)
    loss = loss + z_loss * log_z.pow(2).masked_fill(~keep, 0.0).sum();
  }
  return {loss, nll, keep.sum().item<int64_t>()};
}

}  // namespace normlab::train
