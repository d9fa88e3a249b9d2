// `normlab eval-lm`: a decoder-only model's per-token loss and perplexity on running text, cut
// into blocks as training cuts its validation text (fairseq-eval-lm's role; docs/training.md,
// "Language models").
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "commands.h"
#include "core/file_io.h"
#include "core/runtime.h"
#include "decode_options.h"
#include "model/decoder_only.h"
#include "precision_option.h"
#include "train/corpus_loss.h"
#include "train/train_data.h"

namespace normlab::app {
namespace {

struct EvalLmOptions {
  std::string checkpoint, text, vocab, out;
  int64_t block_size = 0;  // 0: the training run's
  int64_t max_tokens = 4096;
  bool json = false;
  std::string precision = "fp32";
};

// The run's --block-size (config.data.block_size; 0 or absent: the model's max_positions).
int64_t trained_block_size(const model::LoadedModel& loaded) {
  const auto data = loaded.meta.value("config", nlohmann::json::object()).value("data", nlohmann::json::object());
  const int64_t n = data.value("block_size", int64_t{0});
  return n > 0 ? n : loaded.model->config().max_positions;
}

}  // namespace

Runner add_eval_lm_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("eval-lm", "a decoder-only model's loss and perplexity on running text");
  auto o = std::make_shared<EvalLmOptions>();
  cmd->add_option("--checkpoint", o->checkpoint, "normlab checkpoint of a decoder-only model")->required();
  cmd->add_option("--text", o->text, "running text (plain or .gz), e.g. lm-data's test.txt")->required();
  cmd->add_option("--vocab", o->vocab, "SentencePiece model (default: the checkpoint's own)");
  cmd->add_option("--block-size", o->block_size, "positions per block (default: the training run's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-tokens", o->max_tokens, "tokens per batch")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->add_option("--out", o->out, "also write that object to DIR/eval_lm.json");
  add_precision_option(*cmd, o->precision);
  return [o, &global] {
    auto loaded = model::load_model(o->checkpoint);
    auto& net = loaded.model;
    model::as_decoder_only(net, "normlab eval-lm (" + o->checkpoint + ")");  // `evaluate` scores translation
    const auto vocab = checkpoint_vocab(loaded, o->checkpoint, o->vocab);
    const int64_t n = o->block_size > 0 ? o->block_size : trained_block_size(loaded);
    if (n > net->config().max_positions)
      throw std::invalid_argument("--block-size " + std::to_string(n) + " exceeds the model's max_positions " +
                                  std::to_string(net->config().max_positions));
    std::string loaded_line;
    const auto corpus = train::load_text_corpus(o->text, vocab, n, [&](const std::string& s) { loaded_line = s; });
    const auto device = core::resolve_device(global.device);
    net->to(device);
    net->set_precision(resolve_precision(o->precision, device));
    data::BatchingConfig batching;
    batching.max_tokens = o->max_tokens;
    const auto l = train::corpus_loss(net, corpus.src, corpus.tgt, corpus.kept, batching, 1, train::LossOptions{0.0},
                                      {}, corpus.layout);
    const double nll = l.nll / static_cast<double>(l.tokens);
    const nlohmann::json j = {{"checkpoint", o->checkpoint}, {"text", o->text},   {"precision", o->precision},
                              {"block_size", n},             {"blocks", corpus.kept.size()}, {"tokens", l.tokens},
                              {"nll", nll},                  {"ppl", std::exp(nll)},
                              {"bits_per_token", nll / std::log(2.0)}};
    if (!o->out.empty()) {
      std::filesystem::create_directories(o->out);
      core::write_file_atomic(o->out + "/eval_lm.json", j.dump(1) + "\n");
    }
    if (o->json) {
      std::cout << j.dump() << "\n";
      return;
    }
    std::cerr << loaded_line << "\n";
    std::printf("nll %.4f ppl %.3f per token (%.4f bits; %lld tokens predicted in %zu blocks of %lld)\n", nll,
                std::exp(nll), nll / std::log(2.0), static_cast<long long>(l.tokens), corpus.kept.size(),
                static_cast<long long>(n));
  };
}

}  // namespace normlab::app
