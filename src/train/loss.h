// Label-smoothed cross entropy (REFERENCE §2), padding excluded, summed over tokens.
#pragma once

#include <cstdint>
#include <string>

#include <torch/types.h>

namespace normlab::train {

enum class LabelSmoothingFormula {
  kUniform,    // fairseq 2020 (T-Fixup, Admin code), Marian: (1-eps) nll + eps/V sum_v(-log p_v)
  kExclusive,  // fairseq since 2021, target gets exactly 1-eps:
               // (1-eps-eps/(V-1)) nll + eps/(V-1) sum_v(-log p_v)
};
std::string to_string(LabelSmoothingFormula f);
LabelSmoothingFormula parse_label_smoothing_formula(const std::string& s,
                                                    const std::string& option = "--ls-formula");

struct LossSums {
  torch::Tensor loss;  // scalar: summed label-smoothed loss
  torch::Tensor nll;   // scalar: summed negative log-likelihood
  int64_t tokens = 0;  // non-padding target tokens
};

// logits (B,T,V), target (B,T) with `pad` at padding. eps in [0, 1). With z_loss > 0 the
// loss also holds the z-loss (PaLM, Chowdhery et al. 2022; Wortsman et al. 2023, REFERENCE §9):
// z_loss * sum over tokens of (log Z)^2, Z = sum_v exp(logit_v); nll does not.
LossSums label_smoothed_nll(const torch::Tensor& logits, const torch::Tensor& target, double eps,
                            LabelSmoothingFormula formula, int64_t pad, double z_loss = 0.0);

}  // namespace normlab::train
