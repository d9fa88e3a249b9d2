// `normlab translate`: text (or token ids) in, beam search, detokenised text out, one line per
// input line in input order (docs/translate.md).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include <torch/torch.h>

#include "commands.h"
#include "core/file_io.h"
#include "core/problems.h"
#include "core/runtime.h"
#include "data/corpus.h"
#include "data/id_text.h"
#include "decode_options.h"
#include "precision_option.h"

namespace normlab::app {
namespace {

using Clock = std::chrono::steady_clock;

struct TranslateOptions {
  std::string checkpoint, input = "-", output, vocab;
  decode::BeamSearchConfig beam;
  int64_t max_tokens = 4096;
  bool scores = false, ids = false;
  std::string precision = "fp32";
};

std::string join_ids(const data::Sentence& ids) {
  std::string s;
  for (auto id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

}  // namespace

Runner add_translate_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("translate", "translate text by beam search (docs/translate.md)");
  auto o = std::make_shared<TranslateOptions>();
  cmd->add_option("--checkpoint", o->checkpoint, "normlab checkpoint")->required();
  cmd->add_option("--input", o->input, "source text, one sentence a line, plain or .gz (-: stdin)")
      ->capture_default_str();
  cmd->add_option("--output", o->output, "write the translations here (atomically) instead of stdout");
  cmd->add_option("--vocab", o->vocab, "SentencePiece model (default: the checkpoint's own)");
  cmd->add_option("--max-tokens", o->max_tokens, "source tokens (with </s>) per batch")->capture_default_str();
  cmd->add_flag("--scores", o->scores, "prefix each line with its score and a TAB");
  cmd->add_flag("--ids", o->ids, "input and output are token ids (no vocabulary)");
  add_beam_options(*cmd, o->beam, /*translate=*/true);
  add_precision_option(*cmd, o->precision, /*decoding=*/true);
  return [o, &global] {
    core::throw_if_problems(o->beam.validate());
    auto loaded = model::load_model(o->checkpoint);
    auto net = model::as_encoder_decoder(loaded.model, "normlab translate");
    std::vector<data::Sentence> sources;
    std::optional<data::Vocab> vocab;
    if (o->ids) {
      sources = data::read_id_file(o->input == "-" ? "/dev/stdin" : o->input, net->config().src_vocab_size);
    } else {
      vocab.emplace(checkpoint_vocab(loaded, o->checkpoint, o->vocab));
      for (const auto& line : data::read_text_lines(o->input)) sources.push_back(vocab->encode(line));
    }
    const auto device = core::resolve_device(global.device);
    net->to(device);
    const auto master = net->parameters().front().scalar_type();
    net->set_precision(resolve_precision(o->precision, device, master, /*decoding=*/true));
    const auto start = Clock::now();
    const auto hyps = decode::translate(net, sources, o->beam, o->max_tokens, progress_printer("translate"));
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();

    std::string out;
    int64_t tokens = 0;
    for (const auto& sentence : hyps) {
      for (size_t k = 0; k < static_cast<size_t>(o->beam.nbest); ++k) {
        if (k < sentence.size()) {  // an empty input line has no hypothesis: an empty line
          const auto& h = sentence[k];
          if (o->scores) {
            char score[32];
            std::snprintf(score, sizeof score, "%.10g\t", h.score);
            out += score;
          }
          out += o->ids ? join_ids(h.tokens) : vocab->decode(h.tokens);
          if (k == 0) tokens += static_cast<int64_t>(h.tokens.size()) + 1;
        }
        out += "\n";
      }
    }
    if (o->output.empty()) {
      std::cout << out << std::flush;
    } else {
      core::write_file_atomic(o->output, out);
    }
    std::fprintf(stderr, "normlab translate: %zu sentences, %lld output tokens (best, with </s>) in %.2f s: "
                 "%.1f sentences/s, beam %lld, lenpen %g\n", sources.size(), static_cast<long long>(tokens),
                 secs, static_cast<double>(sources.size()) / secs, static_cast<long long>(o->beam.beam), o->beam.lenpen);
  };
}

}  // namespace normlab::app
