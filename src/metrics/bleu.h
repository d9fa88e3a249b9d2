// Corpus BLEU exactly as sacreBLEU 2.x computes it (REFERENCE.md §3): 13a or no tokenisation,
// exp/floor/add-k/no smoothing, closest reference length for the brevity penalty.
#pragma once

#include <string>
#include <vector>

namespace normlab::metrics {

// The sacreBLEU release whose computation normlab reproduces; emitted in the signatures.
inline constexpr const char* kSacrebleuVersion = "2.6.0";

enum class BleuTokenize { none, k13a };
enum class BleuSmooth { exp, floor, add_k, none };

struct BleuOptions {
  BleuTokenize tokenize = BleuTokenize::k13a;  // sacreBLEU's default "13a"
  bool lowercase = false;                      // "case:lc" in the signature
  BleuSmooth smooth = BleuSmooth::exp;         // sacreBLEU's default
  double smooth_value = -1;                    // floor/add-k value; < 0: sacreBLEU's 0.1 / 1
  int max_order = 4;                           // n-gram orders 1..max_order
  bool effective_order = false;                // sentence BLEU: drop orders with no n-grams
};

struct BleuScore {
  double score = 0;                // 0..100
  std::vector<double> precisions;  // per order, percent
  double bp = 1;                   // brevity penalty
  long sys_len = 0, ref_len = 0;   // tokens; ref_len sums the closest reference length per line
  std::vector<double> correct, total;  // matched / hypothesis n-grams per order
};

// mteval-v13a tokenisation of one line (sacreBLEU's Tokenizer13a), on code points.
std::u32string tokenize_13a(const std::u32string& line);

// refs[r][i]: reference r of line i; every refs[r] has hyps.size() lines (checked by the caller).
BleuScore corpus_bleu(const std::vector<std::u32string>& hyps,
                      const std::vector<std::vector<std::u32string>>& refs, const BleuOptions& opt);

// "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0": `version` is the sacreBLEU
// release whose computation this reproduces.
std::string bleu_signature(int nrefs, const BleuOptions& opt, const std::string& version);

}  // namespace normlab::metrics
