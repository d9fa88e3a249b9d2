// Corpus chrF / chrF++ as sacreBLEU 2.x computes them (Popović 2015, 2017): character n-grams
// with white space removed, optional word n-grams, F-beta of averaged precision and recall.
#pragma once

#include <string>
#include <vector>

namespace normlab::metrics {

struct ChrfOptions {
  int char_order = 6;      // character n-gram orders 1..char_order
  int word_order = 0;      // 0: chrF; 2: chrF++
  int beta = 2;            // recall weighted beta times as much as precision
  bool lowercase = false;  // "case:lc" in the signature
};

// refs[r][i]: reference r of line i (same shape rules as corpus_bleu). Returns 0..100.
double corpus_chrf(const std::vector<std::u32string>& hyps,
                   const std::vector<std::vector<std::u32string>>& refs, const ChrfOptions& opt);

// "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
std::string chrf_signature(int nrefs, const ChrfOptions& opt, const std::string& version);

}  // namespace normlab::metrics
