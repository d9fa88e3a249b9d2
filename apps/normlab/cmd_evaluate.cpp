// `normlab evaluate`: translation, sacreBLEU BLEU, chrF and the per-token loss of a checkpoint
// on a test set, in one report (docs/translate.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "commands.h"
#include "core/file_io.h"
#include "core/problems.h"
#include "core/runtime.h"
#include "data/corpus.h"
#include "decode_options.h"
#include "precision_option.h"
#include "metrics/evaluation.h"
#include "metrics/text.h"
#include "train/corpus_loss.h"

namespace normlab::app {
namespace {

using Clock = std::chrono::steady_clock;

struct EvaluateOptions {
  std::string checkpoint, src, ref, vocab, hyp_out, formula, out;
  decode::BeamSearchConfig beam;
  int64_t max_tokens = 4096;
  double label_smoothing = -1;  // < 0: the checkpoint's training value (else 0.1)
  bool json = false;
  std::string precision = "fp32";
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// FILE, or FILE.gz when only that exists (a recipe's "{test}.{src}" names either).
std::string plain_or_gz(const std::string& path) {
  return !std::filesystem::exists(path) && std::filesystem::exists(path + ".gz") ? path + ".gz" : path;
}

}  // namespace

Runner add_evaluate_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("evaluate", "translate a test set and report BLEU, chrF and loss");
  auto o = std::make_shared<EvaluateOptions>();
  cmd->add_option("--checkpoint", o->checkpoint, "normlab checkpoint")->required();
  cmd->add_option("--src", o->src, "source text, one sentence a line (plain or .gz; FILE.gz when FILE is missing)")->required();
  cmd->add_option("--ref", o->ref, "reference translations, line-aligned with --src (plain or .gz)")->required();
  cmd->add_option("--vocab", o->vocab, "SentencePiece model (default: the checkpoint's own)");
  cmd->add_option("--hyp-out", o->hyp_out, "also write the translations to this file");
  cmd->add_option("--max-tokens", o->max_tokens, "tokens per batch (decoding and loss)")->capture_default_str();
  cmd->add_option("--label-smoothing", o->label_smoothing, "eps of the reported loss (default: the training run's)");
  cmd->add_option("--ls-formula", o->formula, "uniform|exclusive (default: the training run's)");
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->add_option("--out", o->out, "also write that object to DIR/evaluate.json (for recipes and the report)");
  add_beam_options(*cmd, o->beam, /*translate=*/false);
  add_precision_option(*cmd, o->precision, /*decoding=*/true);
  return [o, &global] {
    const auto start = Clock::now();
    core::throw_if_problems(o->beam.validate());
    auto loaded = model::load_model(o->checkpoint);
    auto net = model::as_encoder_decoder(loaded.model, "normlab evaluate");  // it translates
    const auto vocab = checkpoint_vocab(loaded, o->checkpoint, o->vocab);
    // The loss as the run trained it, unless told otherwise.
    const auto trained = loaded.meta.value("config", nlohmann::json::object()).value("loss", nlohmann::json::object());
    // Without the z-loss (corpus_loss.h).
    const train::LossOptions loss{
        o->label_smoothing >= 0 ? o->label_smoothing : trained.value("label_smoothing", 0.1),
        train::parse_label_smoothing_formula(!o->formula.empty() ? o->formula
                                                                 : trained.value("formula", std::string("uniform")))};
    core::throw_if_problems(loss.problems());

    o->src = plain_or_gz(o->src);
    o->ref = plain_or_gz(o->ref);
    const auto src_text = data::read_text_lines(o->src);
    // White space normalised as for training (docs/translate.md: BLEU and chrF ignore it).
    const auto ref_text = data::read_text_lines(o->ref);
    if (src_text.size() != ref_text.size())
      throw std::invalid_argument(o->src + " has " + std::to_string(src_text.size()) + " lines but " + o->ref +
                                  " has " + std::to_string(ref_text.size()));
    std::vector<data::Sentence> src, tgt;
    std::vector<std::u32string> refs;
    for (const auto& line : src_text) src.push_back(vocab.encode(line));
    for (const auto& line : ref_text) {
      tgt.push_back(vocab.encode(line));
      refs.push_back(metrics::decode_utf8(line));
    }
    const auto device = core::resolve_device(global.device);
    net->to(device);
    const auto master = net->parameters().front().scalar_type();
    net->set_precision(resolve_precision(o->precision, device, master, /*decoding=*/true));

    const auto t_decode = Clock::now();
    const auto hyps = decode::translate(net, src, o->beam, o->max_tokens, progress_printer("evaluate"));
    const double decode_s = seconds_since(t_decode);
    const auto texts = decode::best_texts(hyps, vocab);
    if (!o->hyp_out.empty()) {
      std::string out;
      for (const auto& t : texts) out += t + "\n";
      core::write_file_atomic(o->hyp_out, out);
    }
    const auto scores = metrics::score_texts(texts, refs);

    // Teacher-forced loss over the pairs training would keep (both sides non-empty, fitting).
    data::FilterOptions filter;
    filter.max_positions = net->config().max_positions;
    train::Corpus pairs;
    pairs.kept = data::filter_pairs(src, tgt, filter).kept;
    pairs.src = src;
    pairs.tgt = tgt;
    data::BatchingConfig batching;
    batching.max_tokens = o->max_tokens;
    const auto l = train::corpus_loss(net, pairs, batching, 1, loss);
    const double tokens = static_cast<double>(std::max<int64_t>(l.tokens, 1));

    nlohmann::json j = {{"checkpoint", o->checkpoint}, {"src", o->src}, {"ref", o->ref},
                        {"precision", o->precision}, {"sentences", src.size()},
                        {"bleu", scores.bleu.score}, {"bleu_signature", scores.bleu_signature},
                        {"precisions", scores.bleu.precisions}, {"bp", scores.bleu.bp},
                        {"sys_len", scores.bleu.sys_len}, {"ref_len", scores.bleu.ref_len},
                        {"chrf", scores.chrf}, {"chrf_signature", scores.chrf_signature},
                        {"loss", l.loss / tokens}, {"nll", l.nll / tokens}, {"ppl", std::exp(l.nll / tokens)},
                        {"loss_tokens", l.tokens}, {"loss_pairs", pairs.kept.size()},
                        {"label_smoothing",
                         {{"eps", loss.label_smoothing}, {"formula", train::to_string(loss.formula)}}},
                        {"beam", {{"beam", o->beam.beam}, {"lenpen", o->beam.lenpen},
                                  {"max_len_a", o->beam.max_len_a}, {"max_len_b", o->beam.max_len_b}}},
                        {"decode_s", decode_s}, {"sentences_per_s", static_cast<double>(src.size()) / decode_s},
                        {"wall_s", seconds_since(start)}};
    if (!o->out.empty()) {
      std::filesystem::create_directories(o->out);
      core::write_file_atomic(o->out + "/evaluate.json", j.dump(1) + "\n");
    }
    if (o->json) {
      std::cout << j.dump() << "\n";
      return;
    }
    std::string prec;
    for (double p : scores.bleu.precisions) {
      char b[16];
      std::snprintf(b, sizeof b, "%s%.1f", prec.empty() ? "" : "/", p);
      prec += b;
    }
    std::printf("BLEU|%s = %.2f %s (BP = %.3f hyp_len = %ld ref_len = %ld)\n", scores.bleu_signature.c_str(),
                scores.bleu.score, prec.c_str(), scores.bleu.bp, scores.bleu.sys_len, scores.bleu.ref_len);
    std::printf("chrF2|%s = %.2f\n", scores.chrf_signature.c_str(), scores.chrf);
    std::printf("loss %.4f nll %.4f ppl %.3f per target token (label smoothing %g %s; %lld tokens, %zu pairs)\n",
                l.loss / tokens, l.nll / tokens, std::exp(l.nll / tokens), loss.label_smoothing,
                train::to_string(loss.formula).c_str(),
                static_cast<long long>(l.tokens), pairs.kept.size());
    std::printf("decoded %zu sentences in %.2f s (%.1f sentences/s), beam %lld, lenpen %g\n", src.size(), decode_s,
                static_cast<double>(src.size()) / decode_s, static_cast<long long>(o->beam.beam), o->beam.lenpen);
  };
}

}  // namespace normlab::app
