#include "decode/evaluation.h"

#include <stdexcept>

#include "metrics/chrf.h"
#include "metrics/text.h"

namespace normlab::decode {

std::vector<std::string> best_texts(const std::vector<std::vector<Hypothesis>>& hyps,
                                    const data::Vocab& vocab) {
  std::vector<std::string> out;
  out.reserve(hyps.size());
  for (const auto& h : hyps) out.push_back(h.empty() ? std::string() : vocab.decode(h.front().tokens));
  return out;
}

TextScores score_texts(const std::vector<std::string>& hyps, const std::vector<std::u32string>& refs) {
  if (hyps.size() != refs.size())
    throw std::invalid_argument(std::to_string(hyps.size()) + " hypotheses but " +
                                std::to_string(refs.size()) + " references");
  std::vector<std::u32string> h;
  h.reserve(hyps.size());
  for (const auto& line : hyps) h.push_back(metrics::decode_utf8(line));
  const std::vector<std::vector<std::u32string>> r = {refs};
  TextScores s;
  const metrics::BleuOptions bleu;
  const metrics::ChrfOptions chrf;
  s.bleu = metrics::corpus_bleu(h, r, bleu);
  s.chrf = metrics::corpus_chrf(h, r, chrf);
  s.bleu_signature = metrics::bleu_signature(1, bleu, metrics::kSacrebleuVersion);
  s.chrf_signature = metrics::chrf_signature(1, chrf, metrics::kSacrebleuVersion);
  return s;
}

}  // namespace normlab::decode
