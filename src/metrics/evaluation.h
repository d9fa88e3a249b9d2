// The scores of `normlab evaluate` and `train --eval-bleu`: corpus BLEU with sacreBLEU's
// defaults and chrF of detokenised hypotheses (docs/bleu.md).
#pragma once

#include <string>
#include <vector>

#include "metrics/bleu.h"

namespace normlab::metrics {

struct TextScores {
  BleuScore bleu;    // 13a, exp smoothing, case-sensitive (sacreBLEU's defaults)
  double chrf = 0;   // chrF2, character order 6
  std::string bleu_signature, chrf_signature;
};

// hyps (UTF-8) against one reference per line (code points, as split_lines reads them).
// Throws std::invalid_argument naming both counts when they differ.
TextScores score_texts(const std::vector<std::string>& hyps, const std::vector<std::u32string>& refs);

}  // namespace normlab::metrics
