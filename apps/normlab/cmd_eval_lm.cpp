// `normlab eval-lm`: a language model's per-token loss, perplexity and accuracy on running text,
// cut into blocks as training cuts its validation text (fairseq-eval-lm's role; docs/training.md,
// "Language models"): a decoder-only model's next tokens, an encoder-only model's masked tokens
// (masked as its training run masked its validation text, with --seed); a classifier's loss and
// accuracy on its examples (docs/finetune.md).
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
#include "model/config.h"
#include "precision_option.h"
#include "train/corpus_loss.h"
#include "train/train_data.h"

namespace normlab::app {
namespace {

struct EvalLmOptions {
  std::string checkpoint, text, vocab, out;
  int64_t block_size = 0;  // 0: the training run's
  int64_t max_tokens = 4096;
  int64_t seed = -1;  // masks of an encoder-only model (-1: the training run's seed)
  bool json = false;
  std::string precision = "fp32";
};

// The run's --block-size (config.data.block_size; 0 or absent: the model's max_positions).
// The training run's section `name` of config.json (empty when absent).
nlohmann::json run_config(const model::LoadedModel& loaded, const char* name) {
  return loaded.meta.value("config", nlohmann::json::object()).value(name, nlohmann::json::object());
}

int64_t trained_block_size(const model::LoadedModel& loaded) {
  const int64_t n = run_config(loaded, "data").value("block_size", int64_t{0});
  return n > 0 ? n : loaded.model->config().max_positions;
}

// An encoder-only model's masking: the training run's settings, its seed unless --seed.
train::CorpusMasking run_masking(const model::LoadedModel& loaded, const data::Vocab& vocab, int64_t seed) {
  const auto j = run_config(loaded, "masking");
  train::CorpusMasking m;
  m.config.mask_prob = j.value("mask_prob", m.config.mask_prob);
  m.config.leave_unmasked_prob = j.value("leave_unmasked_prob", m.config.leave_unmasked_prob);
  m.config.random_token_prob = j.value("random_token_prob", m.config.random_token_prob);
  m.tokens = train::mask_tokens(vocab);
  m.seed = seed >= 0 ? static_cast<uint64_t>(seed)
                     : loaded.meta.value("config", nlohmann::json::object()).value("seed", uint64_t{1});
  return m;
}

// The text as the model's training run cut (and, for an encoder-only model, masked) its
// validation text. `line` gets the loader's log line.
train::Corpus eval_corpus(const EvalLmOptions& o, const model::LoadedModel& loaded, const data::Vocab& vocab,
                          int64_t block_size, std::string& line) {
  const bool masked = loaded.model->kind() == model::kEncoderOnly;
  auto corpus = train::load_text_corpus(o.text, vocab, block_size, [&](const std::string& s) { line = s; },
                                        masked ? data::Layout::kMaskedBlocks : data::Layout::kBlocks);
  if (masked) corpus.masking = run_masking(loaded, vocab, o.seed);
  return corpus;
}

// The record's last part and the file and printing, for both.
void report(const EvalLmOptions& o, const nlohmann::json& j, const std::string& loaded_line, const std::string& text) {
  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    core::write_file_atomic(o.out + "/eval_lm.json", j.dump(1) + "\n");
  }
  if (o.json) {
    std::cout << j.dump() << "\n";
    return;
  }
  std::cerr << loaded_line << "\n";
  std::printf("%s\n", text.c_str());
}

void to_device(model::LoadedModel& loaded, const EvalLmOptions& o, const GlobalOptions& global) {
  const auto device = core::resolve_device(global.device);
  loaded.model->to(device);
  loaded.model->set_precision(resolve_precision(o.precision, device));
}

// The corpus's summed loss at --max-tokens per batch, without label smoothing, and its mean nll
// and accuracy per target (per example, for a classifier).
struct Scores {
  train::CorpusLoss sums;
  double nll, accuracy;
};
Scores score(const model::Model& net, const train::Corpus& corpus, const EvalLmOptions& o) {
  data::BatchingConfig batching;
  batching.max_tokens = o.max_tokens;
  const auto l = train::corpus_loss(net, corpus, batching, 1, train::LossOptions{0.0});
  const auto n = static_cast<double>(l.tokens);
  return {l, l.nll / n, static_cast<double>(l.correct) / n};
}

// A classifier: the examples of a LABEL<TAB>A[<TAB>B] file, each predicted once.
void eval_classifier(const EvalLmOptions& o, model::LoadedModel& loaded, const data::Vocab& vocab,
                     const GlobalOptions& global) {
  if (o.block_size > 0 || o.seed >= 0)
    throw std::invalid_argument("--block-size and --seed cut and mask running text; " + o.checkpoint +
                                " is a classifier, which reads examples");
  std::string loaded_line;
  const auto corpus = train::load_classification_corpus(o.text, vocab, loaded.model->config(),
                                                        [&](const std::string& s) { loaded_line = s; });
  to_device(loaded, o, global);
  const auto [l, nll, accuracy] = score(loaded.model, corpus, o);
  const nlohmann::json j = {{"checkpoint", o.checkpoint}, {"kind", loaded.model->kind()},
                            {"classes", loaded.model->config().classes}, {"text", o.text},
                            {"precision", o.precision},   {"examples", l.tokens},
                            {"correct", l.correct},       {"nll", nll},
                            {"accuracy", accuracy}};
  char text[160];
  std::snprintf(text, sizeof text, "accuracy %.4f (%lld of %lld examples), nll %.4f per example", accuracy,
                static_cast<long long>(l.correct), static_cast<long long>(l.tokens), nll);
  report(o, j, loaded_line, text);
}

void eval_lm(const EvalLmOptions& o, const GlobalOptions& global) {
  auto loaded = model::load_model(o.checkpoint);
  auto& net = loaded.model;
  const auto& kind = net->kind();
  if (net->config().classifier()) return eval_classifier(o, loaded, checkpoint_vocab(loaded, o.checkpoint, o.vocab), global);
  if (!net->config().single_stack())  // `evaluate` scores translation
    throw std::invalid_argument("normlab eval-lm (" + o.checkpoint + ") needs a " + model::kDecoderOnly + " or " +
                                model::kEncoderOnly + " model, not " + kind);
  const bool masked = kind == model::kEncoderOnly;
  if (!masked && o.seed >= 0) throw std::invalid_argument("--seed chooses an encoder-only model's masks, not a " + kind + " model's");
  const auto vocab = checkpoint_vocab(loaded, o.checkpoint, o.vocab);
  const int64_t n = o.block_size > 0 ? o.block_size : trained_block_size(loaded);
  if (n > net->config().max_positions)
    throw std::invalid_argument("--block-size " + std::to_string(n) + " exceeds the model's max_positions " +
                                std::to_string(net->config().max_positions));
  std::string loaded_line;
  const auto corpus = eval_corpus(o, loaded, vocab, n, loaded_line);
  to_device(loaded, o, global);
  const auto [l, nll, accuracy] = score(loaded.model, corpus, o);
  nlohmann::json j = {{"checkpoint", o.checkpoint}, {"kind", kind},
                      {"text", o.text},             {"precision", o.precision},
                      {"block_size", n},            {"blocks", corpus.kept.size()},
                      {"tokens", l.tokens},         {"nll", nll},
                      {"ppl", std::exp(nll)},       {"bits_per_token", nll / std::log(2.0)},
                      {"accuracy", accuracy}};
  if (masked) j["mask_seed"] = corpus.masking->seed;
  char text[200];
  std::snprintf(text, sizeof text,
                "nll %.4f ppl %.3f per token (%.4f bits), accuracy %.4f; %lld %s tokens predicted in %zu blocks of %lld",
                nll, std::exp(nll), nll / std::log(2.0), accuracy, static_cast<long long>(l.tokens),
                masked ? "masked" : "next", corpus.kept.size(), static_cast<long long>(n));
  report(o, j, loaded_line, text);
}

}  // namespace

Runner add_eval_lm_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("eval-lm", "a language model's loss, perplexity and accuracy on running text "
                                             "(a classifier's accuracy on its examples)");
  auto o = std::make_shared<EvalLmOptions>();
  cmd->add_option("--checkpoint", o->checkpoint, "normlab checkpoint of a decoder-only or encoder-only model")
      ->required();
  cmd->add_option("--text", o->text,
                  "running text (plain or .gz), e.g. lm-data's test.txt; a classifier's LABEL<TAB>A[<TAB>B] file")
      ->required();
  cmd->add_option("--vocab", o->vocab, "SentencePiece model (default: the checkpoint's own)");
  cmd->add_option("--block-size", o->block_size, "positions per block (default: the training run's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-tokens", o->max_tokens, "tokens per batch")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->seed, "encoder-only: the masks' seed (default: the training run's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->add_option("--out", o->out, "also write that object to DIR/eval_lm.json");
  add_precision_option(*cmd, o->precision);
  return [o, &global] { eval_lm(*o, global); };
}

}  // namespace normlab::app
