#include "metrics/evaluation.h"

#include <stdexcept>

#include "metrics/chrf.h"
#include "metrics/text.h"

namespace normlab::metrics {

TextScores score_texts(const std::vector<std::string>& hyps, const std::vector<std::u32string>& refs) {
  if (hyps.size() != refs.size())
    throw std::invalid_argument(std::to_string(hyps.size()) + " hypotheses but " +
                                std::to_string(refs.size()) + " references");
  std::vector<std::u32string> h;
  h.reserve(hyps.size());
  for (const auto& line : hyps) h.push_back(decode_utf8(line));
  const std::vector<std::vector<std::u32string>> r = {refs};
  TextScores s;
  const BleuOptions bleu;
  const ChrfOptions chrf;
  s.bleu = corpus_bleu(h, r, bleu);
  s.chrf = corpus_chrf(h, r, chrf);
  s.bleu_signature = bleu_signature(1, bleu, kSacrebleuVersion);
  s.chrf_signature = chrf_signature(1, chrf, kSacrebleuVersion);
  return s;
}

}  // namespace normlab::metrics
