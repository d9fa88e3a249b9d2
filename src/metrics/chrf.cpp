#include "metrics/chrf.h"

#include <unordered_map>

#include "metrics/text.h"

namespace normlab::metrics {
namespace {

using Counts = std::unordered_map<std::u32string, int>;

bool is_punct(char32_t c) {  // Python's string.punctuation
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

// sacreBLEU's CHRF._remove_punctuation: one punctuation mark split off the end, else the start.
std::vector<std::u32string> words_of(const std::u32string& sent) {
  std::vector<std::u32string> out;
  for (auto& w : split_python(sent)) {
    if (w.size() == 1) {
      out.push_back(w);
    } else if (is_punct(w.back())) {
      out.push_back(w.substr(0, w.size() - 1));
      out.push_back(w.substr(w.size() - 1));
    } else if (is_punct(w.front())) {
      out.push_back(w.substr(0, 1));
      out.push_back(w.substr(1));
    } else {
      out.push_back(w);
    }
  }
  return out;
}

// Counters per order: char orders first, then word orders (words as interned ids).
std::vector<Counts> ngrams_of(const std::u32string& sent, const ChrfOptions& opt,
                              std::unordered_map<std::u32string, char32_t>& vocab) {
  std::vector<Counts> all(opt.char_order + opt.word_order);
  std::u32string chars;
  for (char32_t c : sent)
    if (!is_python_space(c)) chars += c;
  for (int n = 1; n <= opt.char_order; ++n)
    for (size_t i = 0; i + n <= chars.size(); ++i) ++all[n - 1][chars.substr(i, n)];
  if (opt.word_order > 0) {
    std::u32string ids;
    for (auto& w : words_of(sent))
      ids.push_back(vocab.emplace(w, static_cast<char32_t>(vocab.size())).first->second);
    for (int n = 1; n <= opt.word_order; ++n)
      for (size_t i = 0; i + n <= ids.size(); ++i) ++all[opt.char_order + n - 1][ids.substr(i, n)];
  }
  return all;
}

// sacreBLEU's CHRF._compute_f_score (effective-order averaging, not eps smoothing).
double f_score(const std::vector<double>& st, const ChrfOptions& opt) {
  const double eps = 1e-16, factor = double(opt.beta) * opt.beta;
  const int order = opt.char_order + opt.word_order;
  double avg_prec = 0, avg_rec = 0;
  int effective = 0;
  for (int i = 0; i < order; ++i) {
    const double n_hyp = st[3 * i], n_ref = st[3 * i + 1], n_match = st[3 * i + 2];
    const double prec = n_hyp > 0 ? n_match / n_hyp : eps;
    const double rec = n_ref > 0 ? n_match / n_ref : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective;
    }
  }
  if (effective == 0) {
    avg_prec = avg_rec = 0;
  } else {
    avg_prec /= effective;
    avg_rec /= effective;
  }
  if (avg_prec + avg_rec == 0) return 0.0;
  return 100 * (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec);
}

}  // namespace

double corpus_chrf(const std::vector<std::u32string>& hyps,
                   const std::vector<std::vector<std::u32string>>& refs, const ChrfOptions& opt) {
  const int order = opt.char_order + opt.word_order;
  std::unordered_map<std::u32string, char32_t> vocab;
  std::vector<double> total(3 * order, 0.0);
  for (size_t i = 0; i < hyps.size(); ++i) {
    const auto hyp = ngrams_of(opt.lowercase ? lowercase(hyps[i]) : hyps[i], opt, vocab);
    std::vector<double> best;
    double best_f = -1;
    for (const auto& ref_lines : refs) {  // the reference with the best sentence F wins
      const auto ref = ngrams_of(opt.lowercase ? lowercase(ref_lines[i]) : ref_lines[i], opt, vocab);
      std::vector<double> st;
      for (int k = 0; k < order; ++k) {
        double hyp_count = 0, ref_count = 0, match = 0;
        for (auto& [g, c] : hyp[k]) {
          hyp_count += c;
          auto it = ref[k].find(g);
          if (it != ref[k].end()) match += std::min(c, it->second);
        }
        for (auto& [g, c] : ref[k]) ref_count += c;
        st.push_back(ref[k].empty() ? 0 : hyp_count);  // no hits counted without a reference
        st.push_back(ref_count);
        st.push_back(match);
      }
      const double f = f_score(st, opt);
      if (f > best_f) {
        best_f = f;
        best = st;
      }
    }
    for (int k = 0; k < 3 * order; ++k) total[k] += best[k];
  }
  return f_score(total, opt);
}

std::string chrf_signature(int nrefs, const ChrfOptions& opt, const std::string& version) {
  return "nrefs:" + std::to_string(nrefs) + "|case:" + (opt.lowercase ? "lc" : "mixed") +
         "|eff:yes|nc:" + std::to_string(opt.char_order) + "|nw:" + std::to_string(opt.word_order) +
         "|space:no|version:" + version;
}

}  // namespace normlab::metrics
