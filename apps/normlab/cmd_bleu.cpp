// `normlab bleu`: corpus BLEU (and chrF / chrF++) of a hypothesis file against references,
// computed as sacreBLEU 2.6.0 does (src/metrics; docs/bleu.md).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/file_io.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/text.h"

namespace normlab::app {
namespace {

struct BleuCommandOptions {
  std::vector<std::string> refs;  // one file per reference set
  std::string hyp;                // empty: standard input
  bool json = false;              // one JSON object instead of sacreBLEU-style lines
  std::string tokenize = "13a";   // none | 13a
  bool lowercase = false;         // case-insensitive BLEU (and chrF)
  std::string smooth = "exp";     // exp | floor | add-k | none
  double smooth_value = -1;       // floor / add-k value; < 0: sacreBLEU's default
  bool sentence = false;          // one sentence BLEU per line (effective order, as sentence_bleu)
  bool chrf = false;              // also chrF
  int chrf_word_order = 0;        // 2: chrF++
};

std::vector<std::u32string> read_lines(const std::string& path) {
  const auto bytes = core::read_file(path);
  return metrics::split_lines(std::string(bytes.begin(), bytes.end()), path);
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

}  // namespace

Runner add_bleu_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto* cmd = app.add_subcommand("bleu", "corpus BLEU / chrF of a hypothesis file, as sacreBLEU 2.6.0");
  auto o = std::make_shared<BleuCommandOptions>();
  cmd->add_option("--ref", o->refs, "reference file (repeat for several references)")->required();
  cmd->add_option("--hyp", o->hyp, "hypothesis file (default: standard input)");
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->add_option("--tokenize", o->tokenize, "none or 13a (sacreBLEU's default)")
      ->check(CLI::IsMember({"none", "13a"}));
  cmd->add_flag("--lowercase", o->lowercase, "case-insensitive scores");
  cmd->add_option("--smooth", o->smooth, "exp (default), floor, add-k or none")
      ->check(CLI::IsMember({"exp", "floor", "add-k", "none"}));
  cmd->add_option("--smooth-value", o->smooth_value, "value for floor (0.1) or add-k (1)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--sentence", o->sentence, "one sentence-level BLEU per line (effective order)");
  cmd->add_flag("--chrf", o->chrf, "also chrF (character order 6, beta 2)");
  cmd->add_option("--chrf-word-order", o->chrf_word_order, "word n-gram order: 2 gives chrF++ (implies --chrf)")
      ->check(CLI::Range(0, 10));
  return [o] {
    if (o->chrf_word_order > 0) o->chrf = true;
    std::vector<std::vector<std::u32string>> refs;
    for (const auto& path : o->refs) refs.push_back(read_lines(path));
    std::vector<std::u32string> hyps;
    std::string hyp_name = o->hyp.empty() ? "standard input" : o->hyp;
    if (o->hyp.empty()) {
      std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
      hyps = metrics::split_lines(text, hyp_name);
    } else {
      hyps = read_lines(o->hyp);
    }
    for (size_t r = 0; r < refs.size(); ++r)
      if (refs[r].size() != hyps.size())
        throw std::invalid_argument(o->refs[r] + " has " + std::to_string(refs[r].size()) +
                                    " lines but " + hyp_name + " has " + std::to_string(hyps.size()));

    metrics::BleuOptions bo;
    bo.tokenize = o->tokenize == "none" ? metrics::BleuTokenize::none : metrics::BleuTokenize::k13a;
    bo.lowercase = o->lowercase;
    bo.smooth = o->smooth == "floor"   ? metrics::BleuSmooth::floor
                : o->smooth == "add-k" ? metrics::BleuSmooth::add_k
                : o->smooth == "none"  ? metrics::BleuSmooth::none
                                       : metrics::BleuSmooth::exp;
    bo.smooth_value = o->smooth_value;
    const int nrefs = static_cast<int>(refs.size());

    if (o->sentence) {
      bo.effective_order = true;
      const auto sig = metrics::bleu_signature(nrefs, bo, metrics::kSacrebleuVersion);
      for (size_t i = 0; i < hyps.size(); ++i) {
        std::vector<std::vector<std::u32string>> one_refs;
        for (auto& r : refs) one_refs.push_back({r[i]});
        const auto s = metrics::corpus_bleu({hyps[i]}, one_refs, bo);
        if (o->json)
          std::cout << nlohmann::json{{"line", i + 1}, {"bleu", s.score}, {"signature", sig}}.dump() << "\n";
        else
          std::cout << fixed(s.score, 2) << "\n";
      }
      return;
    }

    const auto s = metrics::corpus_bleu(hyps, refs, bo);
    const auto sig = metrics::bleu_signature(nrefs, bo, metrics::kSacrebleuVersion);
    metrics::ChrfOptions co;
    co.word_order = o->chrf_word_order;
    co.lowercase = o->lowercase;
    const double chrf = o->chrf ? metrics::corpus_chrf(hyps, refs, co) : 0.0;
    const auto chrf_sig = metrics::chrf_signature(nrefs, co, metrics::kSacrebleuVersion);
    if (o->json) {
      nlohmann::json j = {{"bleu", s.score},     {"signature", sig}, {"precisions", s.precisions},
                          {"bp", s.bp},          {"sys_len", s.sys_len}, {"ref_len", s.ref_len}};
      if (o->chrf) {
        j["chrf"] = chrf;
        j["chrf_signature"] = chrf_sig;
      }
      std::cout << j.dump() << "\n";
      return;
    }
    std::string prec;
    for (double p : s.precisions) prec += (prec.empty() ? "" : "/") + fixed(p, 1);
    std::cout << "BLEU|" << sig << " = " << fixed(s.score, 2) << " " << prec
              << " (BP = " << fixed(s.bp, 3) << " ratio = "
              << fixed(s.ref_len ? double(s.sys_len) / s.ref_len : 0.0, 3)
              << " hyp_len = " << s.sys_len << " ref_len = " << s.ref_len << ")\n";
    if (o->chrf)
      std::cout << "chrF2" << (co.word_order > 0 ? std::string(co.word_order, '+') : "") << "|"
                << chrf_sig << " = " << fixed(chrf, 2) << "\n";
  };
}

}  // namespace normlab::app
