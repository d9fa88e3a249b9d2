#include "metrics/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "metrics/text.h"

namespace normlab::metrics {
namespace {

bool in_13a_class(char32_t c) {  // [\{-\~\[-\` -\&\(-\+\:-\@\/]
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}
bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool is_dot_comma(char32_t c) { return c == '.' || c == ','; }

void replace_all(std::u32string& s, const std::u32string& from, const std::u32string& to) {
  for (size_t pos = s.find(from); pos != std::u32string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

// The n-grams of one tokenised line, keyed by their token ids (one char32_t per token).
using NgramCounts = std::unordered_map<std::u32string, int>;

struct Vocabulary {
  std::unordered_map<std::u32string, char32_t> ids;
  std::u32string encode(const std::u32string& line) {
    std::u32string out;
    for (auto& tok : split_python(line)) {
      auto it = ids.emplace(tok, static_cast<char32_t>(ids.size())).first;
      out.push_back(it->second);
    }
    return out;
  }
};

NgramCounts count_ngrams(const std::u32string& ids, int max_order) {
  NgramCounts counts;
  for (int n = 1; n <= max_order; ++n)
    for (size_t i = 0; i + n <= ids.size(); ++i) ++counts[ids.substr(i, n)];
  return counts;
}

double my_log(double x) { return x == 0 ? -9999999999.0 : std::log(x); }  // sacreBLEU's

}  // namespace

std::u32string tokenize_13a(const std::u32string& input) {
  std::u32string line = input;
  replace_all(line, U"<skipped>", U"");
  replace_all(line, U"-\n", U"");
  std::replace(line.begin(), line.end(), U'\n', U' ');
  if (line.find(U'&') != std::u32string::npos) {
    replace_all(line, U"&quot;", U"\"");
    replace_all(line, U"&amp;", U"&");
    replace_all(line, U"&lt;", U"<");
    replace_all(line, U"&gt;", U">");
  }
  line = U" " + line + U" ";
  // The four regular expressions of sacreBLEU's TokenizerRegexp, each a left-to-right
  // non-overlapping substitution as re.sub does it.
  std::u32string a;
  for (char32_t c : line) {
    if (in_13a_class(c)) {
      a += U' ';
      a += c;
      a += U' ';
    } else {
      a += c;
    }
  }
  std::u32string b;  // ([^0-9])([\.,]) -> "\1 \2 "
  for (size_t i = 0; i < a.size();) {
    if (i + 1 < a.size() && !is_digit(a[i]) && is_dot_comma(a[i + 1])) {
      b += a[i];
      b += U' ';
      b += a[i + 1];
      b += U' ';
      i += 2;
    } else {
      b += a[i++];
    }
  }
  std::u32string c;  // ([\.,])([^0-9]) -> " \1 \2"
  for (size_t i = 0; i < b.size();) {
    if (i + 1 < b.size() && is_dot_comma(b[i]) && !is_digit(b[i + 1])) {
      c += U' ';
      c += b[i];
      c += U' ';
      c += b[i + 1];
      i += 2;
    } else {
      c += b[i++];
    }
  }
  std::u32string d;  // ([0-9])(-) -> "\1 \2 "
  for (size_t i = 0; i < c.size();) {
    if (i + 1 < c.size() && is_digit(c[i]) && c[i + 1] == U'-') {
      d += c[i];
      d += U' ';
      d += U'-';
      d += U' ';
      i += 2;
    } else {
      d += c[i++];
    }
  }
  std::u32string out;
  for (auto& tok : split_python(d)) {
    if (!out.empty()) out += U' ';
    out += tok;
  }
  return out;
}

BleuScore corpus_bleu(const std::vector<std::u32string>& hyps,
                      const std::vector<std::vector<std::u32string>>& refs, const BleuOptions& opt) {
  const int N = opt.max_order;
  auto preprocess = [&](const std::u32string& s) {
    std::u32string t = opt.lowercase ? lowercase(s) : s;
    size_t end = t.size();  // str.rstrip()
    while (end > 0 && is_python_space(t[end - 1])) --end;
    t.resize(end);
    return opt.tokenize == BleuTokenize::k13a ? tokenize_13a(t) : t;
  };
  Vocabulary vocab;
  BleuScore r;
  r.correct.assign(N, 0);
  r.total.assign(N, 0);
  for (size_t i = 0; i < hyps.size(); ++i) {
    NgramCounts ref_counts;  // max count over the references
    std::vector<long> ref_lens;
    for (const auto& ref : refs) {
      const auto ids = vocab.encode(preprocess(ref[i]));
      ref_lens.push_back(static_cast<long>(ids.size()));
      for (auto& [g, k] : count_ngrams(ids, N)) ref_counts[g] = std::max(ref_counts[g], k);
    }
    const auto hyp_ids = vocab.encode(preprocess(hyps[i]));
    const long hyp_len = static_cast<long>(hyp_ids.size());
    long closest_diff = -1, closest = -1;  // ties go to the shorter reference
    for (long len : ref_lens) {
      const long diff = std::labs(hyp_len - len);
      if (closest_diff == -1 || diff < closest_diff) {
        closest_diff = diff;
        closest = len;
      } else if (diff == closest_diff && len < closest) {
        closest = len;
      }
    }
    r.sys_len += hyp_len;
    r.ref_len += closest;
    for (auto& [g, k] : count_ngrams(hyp_ids, N)) {
      r.total[g.size() - 1] += k;
      auto it = ref_counts.find(g);
      if (it != ref_counts.end()) r.correct[g.size() - 1] += std::min(k, it->second);
    }
  }

  // sacreBLEU's BLEU.compute_bleu, step by step.
  if (r.sys_len < r.ref_len) r.bp = r.sys_len > 0 ? std::exp(1.0 - double(r.ref_len) / r.sys_len) : 0.0;
  r.precisions.assign(N, 0.0);
  if (std::all_of(r.correct.begin(), r.correct.end(), [](double x) { return x == 0; })) return r;
  const double value = opt.smooth_value >= 0 ? opt.smooth_value
                       : opt.smooth == BleuSmooth::floor ? 0.1 : 1.0;
  double smooth_mteval = 1.0;
  int eff_order = N;
  for (int n = 1; n <= N; ++n) {
    if (opt.smooth == BleuSmooth::add_k && n > 1) {
      r.correct[n - 1] += value;
      r.total[n - 1] += value;
    }
    if (r.total[n - 1] == 0) break;
    if (opt.effective_order) eff_order = n;
    if (r.correct[n - 1] == 0) {
      if (opt.smooth == BleuSmooth::exp) {
        smooth_mteval *= 2;
        r.precisions[n - 1] = 100.0 / (smooth_mteval * r.total[n - 1]);
      } else if (opt.smooth == BleuSmooth::floor) {
        r.precisions[n - 1] = 100.0 * value / r.total[n - 1];
      }
    } else {
      r.precisions[n - 1] = 100.0 * r.correct[n - 1] / r.total[n - 1];
    }
  }
  double sum = 0;
  for (int n = 0; n < eff_order; ++n) sum += my_log(r.precisions[n]);
  r.score = r.bp * std::exp(sum / eff_order);
  return r;
}

std::string bleu_signature(int nrefs, const BleuOptions& opt, const std::string& version) {
  std::string smooth = opt.smooth == BleuSmooth::exp     ? "exp"
                       : opt.smooth == BleuSmooth::floor ? "floor"
                       : opt.smooth == BleuSmooth::add_k ? "add-k"
                                                         : "none";
  if (opt.smooth == BleuSmooth::floor || opt.smooth == BleuSmooth::add_k) {
    const double value = opt.smooth_value >= 0 ? opt.smooth_value
                         : opt.smooth == BleuSmooth::floor ? 0.1 : 1.0;
    char buf[32];
    std::snprintf(buf, sizeof buf, "[%.2f]", value);
    smooth += buf;
  }
  return "nrefs:" + std::to_string(nrefs) + "|case:" + (opt.lowercase ? "lc" : "mixed") +
         "|eff:" + (opt.effective_order ? "yes" : "no") +
         "|tok:" + (opt.tokenize == BleuTokenize::k13a ? "13a" : "none") + "|smooth:" + smooth +
         "|version:" + version;
}

}  // namespace normlab::metrics
