// BERT's masked-LM corruption (Devlin et al. 2019, §3.1 and Appendix A.1) as fairseq's
// MaskTokensDataset applies it (docs/data.md, "Masked language modelling"): of each block's
// candidate positions (not padding, not the leading <s>), floor(p n + u) chosen uniformly
// without replacement (u ~ U[0,1), fairseq's rounding; at least one, as BERT's max(1, ...)); each
// chosen token is then kept with probability leave_unmasked, replaced by a random ordinary token
// with probability random_token, else by <mask>. The target holds the original token at every
// chosen position (the kept and replaced ones included) and padding elsewhere. Masks are drawn
// anew each epoch (RoBERTa's dynamic masking) and depend only on (seed, epoch, example index):
// not on batching, ranks or resumption.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.h"

namespace normlab::data {

struct MaskingConfig {
  double mask_prob = 0.15;            // fairseq --mask-prob
  double leave_unmasked_prob = 0.1;   // fairseq --leave-unmasked-prob
  double random_token_prob = 0.1;     // fairseq --random-token-prob
  std::vector<std::string> problems() const;  // each out of [0, 1], or their sum > 1
};

// The model's special ids for masking: <mask>, and the ordinary tokens [first_random, end_random)
// a random replacement is drawn from (uniformly: the vocabulary without special tokens and <mask>).
struct MaskTokens {
  int64_t mask = 0;
  int64_t first_random = 0, end_random = 0;
};

// Masks `batch` (Layout::kMaskedBlocks: src and target the unmasked blocks), whose row r is
// example indices[r]: src corrupted, target as described above, target_tokens their count.
void mask_batch(Batch& batch, const std::vector<int64_t>& indices, const MaskingConfig& config,
                const MaskTokens& tokens, uint64_t seed, int64_t epoch);

}  // namespace normlab::data
