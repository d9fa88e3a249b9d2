// `normlab hessian`: the Hessian spectrum of the training loss over a whole data set
// (docs/hessian.md): Lanczos/SLQ, Hutchinson trace, power iteration, per-block lambda_max.
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "analysis/hessian_run.h"
#include "analysis/hvp.h"
#include "commands.h"
#include "decode_options.h"
#include "dist_options.h"
#include "core/dir_lock.h"
#include "core/hash.h"
#include "core/problems.h"
#include "core/same_job.h"
#include "core/runtime.h"
#include "data/batching.h"
#include "data/cache.h"
#include "data/corpus.h"
#include "data/vocab.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "model_options.h"
#include "precision_option.h"
#include "train/criterion.h"
#include "train/train_data.h"

namespace normlab::app {
namespace {

struct HessianOptions {
  analysis::HessianRunConfig run;
  ModelOptions model;
  std::string checkpoint, data, src = "de", tgt = "en", vocab, vocab_train;
  data::VocabTrainOptions vocab_options;
  int64_t max_sentences = 0, max_tokens = 4096, block_size = 0;
  double label_smoothing = 0.1;
  double z_loss = 0.0;
  std::string ls_formula = "uniform", params = ".*", dtype = "float32", precision = "fp32";
  bool keep_graphs = false;
  DistCliOptions dist;
};

// Vocabulary: --vocab FILE, else the checkpoint's own as translate finds it (inside a `normlab
// train` checkpoint, else its run folder's), else trained on --vocab-train as `normlab train`
// does (PREFIX's two sides; a single-stack model's text FILE; saved to OUT/vocab by rank 0,
// which the other ranks then read). A checkpoint's model must have its size.
data::Vocab load_vocab(const HessianOptions& o, const model::ModelConfig& config, const model::LoadedModel* loaded,
                       nlohmann::json& resolved, core::ProcessGroup& group) {
  auto find = [&]() -> data::Vocab {
    if (!o.vocab.empty()) {
      resolved["vocab"] = o.vocab;
      return data::Vocab::load(o.vocab);
    }
    std::string source;
    if (loaded)
      if (auto own = checkpoint_own_vocab(*loaded, o.checkpoint, source)) {
        resolved["vocab"] = source;
        return std::move(*own);
      }
    if (o.vocab_train.empty())
      throw std::invalid_argument("give --vocab FILE (a SentencePiece model) or --vocab-train PREFIX "
                                  "(train one on PREFIX.SRC/PREFIX.TGT as `normlab train` does)");
    const auto dir = (std::filesystem::path(o.run.out) / "vocab").string();
    if (group.is_main()) {
      std::cerr << "normlab hessian: training a " << o.vocab_options.vocab_size << "-piece vocabulary on "
                << o.vocab_train << "\n";
      data::save_vocab(data::train_vocab_on_data(o.vocab_train, config.single_stack(), o.src, o.tgt, o.vocab_options),
                       dir);
    }
    group.barrier();
    resolved["vocab"] = (std::filesystem::path(dir) / data::kVocabModelFile).string();
    resolved["vocab_train"] = o.vocab_train;
    resolved["vocab_size"] = o.vocab_options.vocab_size;
    return data::Vocab::load(resolved["vocab"].get<std::string>());
  };
  auto vocab = find();
  if (loaded) check_vocab_size(vocab, *loaded, o.checkpoint);
  return vocab;
}

// The first --max-sentences pairs of the data set (file order) that fit the model; `note` says
// how many were kept.
train::Corpus load_pairs(const HessianOptions& o, const data::Vocab& vocab, int64_t max_positions,
                         nlohmann::json& resolved, std::string& note) {
  auto loaded = data::load_encoded_corpus(o.data, o.src, o.tgt, vocab, /*cache_dir=*/"");
  train::Corpus corpus;
  corpus.src = std::move(loaded.corpus.src);
  corpus.tgt = std::move(loaded.corpus.tgt);
  if (o.max_sentences > 0 && static_cast<int64_t>(corpus.src.size()) > o.max_sentences) {
    corpus.src.resize(o.max_sentences);
    corpus.tgt.resize(o.max_sentences);
  }
  data::FilterOptions filter;
  filter.max_positions = max_positions;
  const auto kept = data::filter_pairs(corpus.src, corpus.tgt, filter);
  note = o.data + ": " + std::to_string(kept.kept.size()) + " pairs of " + std::to_string(corpus.src.size()) +
         " (" + std::to_string(kept.empty) + " empty, " + std::to_string(kept.too_long) +
         " longer than the model's positions)";
  if (kept.kept.empty()) throw std::invalid_argument("--data " + o.data + ": no sentence pair left");
  resolved["pairs_read"] = corpus.src.size();
  corpus.kept = kept.kept;
  corpus.sizes = data::example_sizes(corpus.src, corpus.tgt);
  return corpus;
}

// A single-stack model's running text as `normlab train` cuts it (blocks of --block-size
// positions, else the model's; an encoder's masked with --seed as validation masks: the same
// masks on every run), its first --max-sentences blocks.
train::Corpus load_blocks(const HessianOptions& o, const data::Vocab& vocab, const model::ModelConfig& config,
                          nlohmann::json& resolved, std::string& note) {
  const bool masked = config.kind == model::kEncoderOnly;
  const int64_t block = o.block_size > 0 ? o.block_size : config.max_positions;
  if (block > config.max_positions)
    throw std::invalid_argument("--block-size " + std::to_string(block) + " exceeds the model's max_positions " +
                                std::to_string(config.max_positions));
  auto corpus = train::load_text_corpus(o.data, vocab, block, [&](const std::string& line) { note = line; },
                                        masked ? data::Layout::kMaskedBlocks : data::Layout::kBlocks);
  if (masked) corpus.masking = train::CorpusMasking{data::MaskingConfig{}, train::mask_tokens(vocab), o.run.seed};
  if (o.max_sentences > 0 && static_cast<int64_t>(corpus.kept.size()) > o.max_sentences) {
    corpus.kept.resize(o.max_sentences);
    note += "; the first " + std::to_string(o.max_sentences) + " blocks (--max-sentences)";
  }
  resolved["block_size"] = block;
  resolved["blocks_read"] = corpus.src.size();
  return corpus;
}

// The data set in batches of at most --max-tokens padded tokens.
std::vector<data::Batch> load_batches(const HessianOptions& o, const data::Vocab& vocab,
                                      const model::ModelConfig& config, nlohmann::json& resolved, std::string& note) {
  if (o.block_size != 0 && !config.single_stack())
    throw std::invalid_argument("--block-size: the positions of a block of running text (a decoder-only or "
                                "encoder-only model's --data FILE)");
  const auto corpus = config.single_stack() ? load_blocks(o, vocab, config, resolved, note)
                                            : load_pairs(o, vocab, config.max_positions, resolved, note);
  data::BatchingConfig batching;
  batching.max_tokens = o.max_tokens;
  core::throw_if_problems(batching.validate());
  std::vector<data::Batch> batches;
  for (const auto& indices : data::make_batches(corpus.sizes, corpus.kept, batching, o.run.seed, 0))
    batches.push_back(train::gather(corpus, indices, 0));
  return batches;
}

}  // namespace

Runner add_hessian_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("hessian", "Hessian spectrum of the training loss over a data set");
  auto o = std::make_shared<HessianOptions>();
  auto& r = o->run;
  const std::string g_model = "Model", g_data = "Data and loss", g_alg = "Algorithms", g_out = "Output";
  cmd->add_option("--checkpoint", o->checkpoint, "a normlab checkpoint (else a fresh initialisation "
                                                 "from the Model flags and --seed)")->group(g_model);
  o->model.add_to(*cmd, /*vocab_options=*/false);
  cmd->add_option("--dtype", o->dtype, "float32|float64 (the model is converted)")
      ->capture_default_str()->group(g_model);
  add_precision_option(*cmd, o->precision);
  cmd->add_option("--data", o->data, "text PREFIX (PREFIX.SRC, PREFIX.TGT, plain or .gz); a decoder-only or "
                                     "encoder-only model's: one text FILE, cut into blocks as train does")
      ->required()->group(g_data);
  cmd->add_option("--block-size", o->block_size, "a text FILE's positions per block (0: the model's max_positions)")
      ->capture_default_str()->check(CLI::NonNegativeNumber)->group(g_data);
  cmd->add_option("--src", o->src, "source language suffix")->capture_default_str()->group(g_data);
  cmd->add_option("--tgt", o->tgt, "target language suffix")->capture_default_str()->group(g_data);
  cmd->add_option("--vocab", o->vocab, "SentencePiece model file")->group(g_data);
  auto* vocab_train = cmd->add_option("--vocab-train", o->vocab_train,
                                      "train the vocabulary on this text PREFIX as `normlab train` does")
                          ->group(g_data);
  // An option that only qualifies another is refused without it (issue 34: unused options).
  cmd->add_option("--vocab-size", o->vocab_options.vocab_size, "pieces of --vocab-train's vocabulary")
      ->capture_default_str()->needs(vocab_train)->group(g_data);
  cmd->add_option("--max-sentences", o->max_sentences, "the first N pairs (or blocks) of the data set (0: all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber)->group(g_data);
  cmd->add_option("--max-tokens", o->max_tokens, "padded tokens per batch (the sum is exact for any value)")
      ->capture_default_str()->group(g_data);
  cmd->add_option("--label-smoothing", o->label_smoothing, "eps")->capture_default_str()->group(g_data);
  cmd->add_option("--ls-formula", o->ls_formula, "uniform|exclusive")->capture_default_str()->group(g_data);
  cmd->add_option("--z-loss", o->z_loss, "C: the loss also holds C (log Z)^2 per target token (train --z-loss)")
      ->capture_default_str()->group(g_data);
  cmd->add_option("--params", o->params, "regular expression: parameters (stored names) spanning the "
                                         "Hessian")->capture_default_str()->group(g_data);
  cmd->add_flag("--keep-graphs", o->keep_graphs, "keep every batch's first-order graph between products "
                "(each later product costs ~2 gradients instead of ~3.3; memory: the whole set's graphs)")
      ->group(g_alg);
  cmd->add_option("--steps", r.steps, "Lanczos steps per probe")->capture_default_str()->group(g_alg);
  cmd->add_option("--probes", r.probes, "Rademacher start vectors (SLQ runs)")->capture_default_str()->group(g_alg);
  cmd->add_option("--top-k", r.top_k, "Ritz values in top_eigenvalues")->capture_default_str()->group(g_alg);
  cmd->add_option("--trace-samples", r.trace_samples, "Hutchinson samples beyond the probes' own")
      ->capture_default_str()->group(g_alg);
  cmd->add_option("--bins", r.density.bins, "density grid points")->capture_default_str()->group(g_alg);
  cmd->add_option("--sigma", r.density.sigma_squared, "Gaussian variance factor (PyHessian's sigma_squared)")
      ->capture_default_str()->group(g_alg);
  auto* power = cmd->add_flag("--power", r.power, "also PyHessian's power iteration for the top eigenvalue")
                    ->group(g_alg);
  cmd->add_option("--power-iters", r.power_iterations, "its maximum iterations")
      ->capture_default_str()->needs(power)->group(g_alg);
  cmd->add_option("--power-tol", r.power_tol, "its relative tolerance")->capture_default_str()->needs(power)->group(g_alg);
  auto* per_block = cmd->add_flag("--per-block", r.per_block, "lambda_max of each layer's diagonal block")->group(g_alg);
  cmd->add_option("--per-block-steps", r.per_block_steps, "Lanczos steps per block")
      ->capture_default_str()->needs(per_block)->group(g_alg);
  cmd->add_option("--seed", r.seed, "initialisation and probe seed")->capture_default_str()->group(g_alg);
  cmd->add_option("--out", r.out, "output folder OUT")->required()->group(g_out);
  cmd->add_option("--save-every", r.save_every, "save the Lanczos state every K steps (0: never)")
      ->capture_default_str()->group(g_out);
  cmd->add_flag("--resume", r.resume, "continue from OUT/lanczos_state.pt")->group(g_out);
  add_dist_options(*cmd, o->dist);

  return [o, &global] {
    if (!o->checkpoint.empty()) refuse_model_flags(o->model.given(), "the model comes from --checkpoint " + o->checkpoint);
    require_fp32(o->precision,
                 "Hessians are computed in fp32 or fp64 (--dtype): bf16 keeps 8 mantissa bits and fp16 11, "
                 "too few for Hessian-vector products and Lanczos (REFERENCE §7)");
    core::throw_if_problems(o->run.problems());
    if (!o->vocab.empty() && !o->vocab_train.empty())
      throw std::invalid_argument("--vocab and --vocab-train exclude each other");
    const train::LossOptions loss{o->label_smoothing, train::parse_label_smoothing_formula(o->ls_formula),
                                  o->z_loss};
    core::throw_if_problems(loss.problems());
    const auto dtype = parse_dtype(o->dtype);
    auto job = join_job(o->dist, core::resolve_device(global.device));
    const auto device = job.device;
    o->run.writes = job.group.is_main();
    std::optional<core::DirLock> lock;  // one writer per OUT
    if (o->run.writes) lock.emplace(o->run.out, "normlab hessian");
    nlohmann::json resolved = {{"data", o->data}, {"src", o->src}, {"tgt", o->tgt},
                               {"max_sentences", o->max_sentences}, {"max_tokens", o->max_tokens},
                               {"label_smoothing", o->label_smoothing}, {"ls_formula", o->ls_formula}, {"z_loss", o->z_loss},
                               {"params", o->params}, {"dtype", o->dtype}, {"device", device.str()}};

    model::Model net{nullptr};
    std::unique_ptr<model::LoadedModel> loaded;
    if (!o->checkpoint.empty()) {
      loaded = std::make_unique<model::LoadedModel>(model::load_model(o->checkpoint));
      net = loaded->model;
      resolved["checkpoint"] = o->checkpoint;
      resolved["checkpoint_checksum"] = loaded->meta.value("checksum", nlohmann::json());
    }
    auto config = net ? net->config() : o->model.resolve(/*vocab_from_data=*/true);
    const auto vocab = load_vocab(*o, config, loaded.get(), resolved, job.group);
    const auto vocab_hash = core::hash_bytes(vocab.bytes().data(), vocab.bytes().size());
    resolved["vocab_checksum"] = core::hash_hex(vocab_hash);
    std::string note;
    auto batches = load_batches(*o, vocab, config, resolved, note);
    if (!net) {
      config.src_vocab_size = config.tgt_vocab_size = model::model_vocab_size(config.kind, vocab.size());
      net = model::create_model(config);
      net->to(dtype);
      // admin-profile profiles on the first batch of the data (docs/hessian.md)
      model::initialize(net, o->run.seed,
                        config.scheme.init == model::InitMethod::kAdminProfile ? &batches.front() : nullptr);
      resolved["init_seed"] = o->run.seed;
    }
    net->to(dtype);
    resolved["model"] = net->config();
    auto same = resolved;
    same.erase("device");  // cuda:LOCAL_RANK differs between ranks
    core::check_same_job(same, job.group);
    analysis::FullDataHessian hessian(net, std::move(batches), loss, o->params, device, o->keep_graphs, job.group);
    if (o->run.writes) std::cerr << "normlab hessian: " << note << "\n";
    analysis::run_hessian(hessian, o->run, resolved);
  };
}

}  // namespace normlab::app
