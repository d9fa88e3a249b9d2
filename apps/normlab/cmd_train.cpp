// `normlab train`: trains on parallel text into a run folder, resuming when it has a checkpoint;
// `normlab finetune`: the same from --init-from's model, without the model flags (docs/finetune.md).
// The trainer (train/) gets what lives above it here, as its list of callbacks: the instruments
// of analysis/ and the --eval-bleu validator (decode/ beam search, metrics/ BLEU).
#include <iostream>

#include <nlohmann/json.hpp>

#include "analysis/auto_warmup.h"
#include "analysis/curvature.h"
#include "analysis/logit_trace.h"
#include "analysis/trace.h"
#include "analysis/warmup_gate.h"
#include "commands.h"
#include "core/runtime.h"
#include "decode/beam_search.h"
#include "decode_options.h"
#include "dist_options.h"
#include "metrics/evaluation.h"
#include "metrics/text.h"
#include "model_options.h"
#include "option_cli.h"
#include "precision_option.h"
#include "train/bleu_validation.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace normlab::app {
namespace {

// --eval-bleu: the validation set beam-searched with --beam, --lenpen, --max-len-a, --max-len-b
// in batches of --max-tokens, scored with sacreBLEU's defaults.
class ValidationBleu final : public train::BleuValidator {
 public:
  ValidationBleu(const decode::BeamSearchConfig& beam, int64_t max_tokens) : beam_(beam), max_tokens_(max_tokens) {}
  void add_settings(nlohmann::json& eval) const override {
    eval["beam"] = beam_.beam;
    eval["lenpen"] = beam_.lenpen;
    eval["max_len_a"] = beam_.max_len_a;
    eval["max_len_b"] = beam_.max_len_b;
  }
  std::vector<std::string> problems() const override { return beam_.validate(); }
  void prepare(const data::Vocab& vocab, const std::vector<std::string>& references) override {
    vocab_ = &vocab;
    refs_.clear();
    for (const auto& line : references) refs_.push_back(metrics::decode_utf8(line));
  }
  std::vector<std::string> translate(model::Seq2Seq& net, const std::vector<data::Sentence>& sources) override {
    return decode::best_texts(decode::translate(net, sources, beam_, max_tokens_), *vocab_);
  }
  double score(const std::vector<std::string>& hyps) override { return metrics::score_texts(hyps, refs_).bleu.score; }

 private:
  decode::BeamSearchConfig beam_;
  int64_t max_tokens_;
  const data::Vocab* vocab_ = nullptr;
  std::vector<std::u32string> refs_;  // the validation targets as code points
};

}  // namespace

namespace {

// train and finetune: the same options and run, finetune without the model flags (its model is
// --init-from's, which it requires).
Runner add_training_command(CLI::App& app, const GlobalOptions& global, bool finetune) {
  auto* cmd = finetune ? app.add_subcommand("finetune",
                                            "continue from --init-from's model (a classifier with --num-classes); "
                                            "train's options without its model flags")
                       : app.add_subcommand("train", "train a model; re-running into RUN_DIR resumes it");
  struct Options {
    train::TrainConfig config;
    decode::BeamSearchConfig beam;  // --eval-bleu's decoder
    ModelOptions model;
    bool curvature = false;  // --curvature: the series at CurvatureConfig::kDefaultEvery
    bool gate_only = false;  // --warmup-gate-only: the gate's probe and decision, no training
    std::string precision = "fp32";
    DistCliOptions dist;
    std::string pooling;  // finetune's --classifier-pooling as given
  };
  auto o = std::make_shared<Options>();
  add_options(*cmd, train::train_options(), o->config);  // train/train_options.cpp
  if (finetune) {
    const std::string group = "A trained model with layers added (docs/training.md)";
    cmd->add_option("--num-classes", o->config.init_from.classes,
                    "a classification head of K classes on --init-from's encoder (docs/finetune.md)")
        ->check(CLI::NonNegativeNumber)
        ->group(group);
    add_classifier_pooling_option(*cmd, o->pooling, group);
  } else {
    o->model.add_to(*cmd, /*with_vocab_size=*/false);
  }
  add_precision_option(*cmd, o->precision);
  cmd->add_flag("--curvature", o->curvature,
                "the curvature series every " + std::to_string(train::CurvatureConfig::kDefaultEvery) +
                    " updates (at most ~10% of the training time on the synthetic task's cells)")
      ->group("Curvature during training (docs/curvature.md)");
  if (!finetune)
    cmd->add_flag("--warmup-gate-only", o->gate_only,
                  "with --warmup-gate: run its probe, print whether the run needs its warm-up and the evidence, "
                  "and stop; the same command without this flag then trains with that decision (docs/warmup.md)")
        ->group("Optimisation");
  add_beam_options(*cmd, o->beam, /*translate=*/false, "Validation BLEU (docs/translate.md)");
  add_dist_options(*cmd, o->dist);

  return [o, &global, cmd, finetune] {
    auto& c = o->config;
    const auto& init = o->model.init_name();
    if (finetune && c.init_from.checkpoint.empty())
      throw std::invalid_argument("finetune needs --init-from CKPT (or --init-from DIR --init-from-update U)");
    if (!c.init_from.checkpoint.empty()) {
      // The model and its vocabulary are the checkpoint's: a model flag would be ignored.
      auto ignored = o->model.given({"--init", "--num-classes", "--classifier-pooling"});  // --init: the added layers'
      if (!finetune) c.init_from.classes = o->model.classes();
      c.init_from.pooling = finetune ? classifier_pooling(o->pooling) : o->model.pooling();
      if (cmd->get_option("--vocab-size")->count() > 0) ignored.push_back("--vocab-size");
      refuse_model_flags(ignored, "the model and its vocabulary come from --init-from " + c.init_from.checkpoint);
      c.init_from.added.init = model::parse_added_layer_init(init.empty() ? "xavier" : init);
    } else if (model::added_layers_only_init(init)) {
      c.init_from.added.init = model::parse_added_layer_init(init);  // refused by problems(), saying why
    } else {
      c.model = o->model.resolve(/*vocab_from_data=*/true);  // with --num-classes a new classifier
    }
    if (o->curvature && c.curvature.every == 0) c.curvature.every = train::CurvatureConfig::kDefaultEvery;
    // --warmup auto chooses the ramp: the default --warmup-steps (fairseq's 4000) does not apply.
    if (c.schedule.warmup == train::WarmupMode::kAuto && cmd->get_option("--warmup-steps")->count() == 0)
      c.schedule.warmup_steps = 0;
    c.schedule.max_steps = c.max_steps;
    c.optimizer.peak_lr = c.schedule.lr;  // --weight-decay-mode independent's lr_peak
    c.optimizer.warmup_steps = c.schedule.warmup_steps;  // the own warm-up of adamw-schedulefree
    // An optimiser's own --betas where none is given: lion's 0.9,0.99 (Chen et al. 2023), as
    // lion-pytorch; recorded in config.json as any other value.
    if (cmd->get_option("--betas")->count() == 0) c.optimizer.betas = train::default_betas(c.optimizer.kind);
    // One that replaces the schedule (adamw-schedulefree) runs at a constant rate where no
    // --lr-schedule is given; another one given is refused (TrainConfig::problems).
    if (cmd->get_option("--lr-schedule")->count() == 0 && train::replaces_schedule(c.optimizer.kind))
      c.schedule.kind = train::ScheduleKind::kConstant;
    const auto device = core::resolve_device(global.device);
    c.precision = model::parse_precision(o->precision, device);  // auto: resolved here, recorded in config.json
    warn_if_emulated(c.precision, device);
    ValidationBleu bleu(o->beam, c.batching.max_tokens > 0 ? c.batching.max_tokens : 4096);
    auto job = join_job(o->dist, device);
    if (o->gate_only && !(c.schedule.warmup_gate > 0.0))
      throw std::invalid_argument("--warmup-gate-only needs --warmup-gate G");
    const auto given = c;
    c = analysis::gated_config(c, job.device, job.group);  // --warmup-gate: the warm-up or none, after its probe
    if (o->gate_only) {
      if (job.group.is_main()) std::cout << analysis::gate_advice(given);  // rank 0 alone speaks
      return;
    }
    // The run's instruments, in the order the trainer calls them (docs/architecture.md).
    train::TrainCallbacks callbacks;
    auto add = [&](std::unique_ptr<train::TrainCallback> cb) {
      if (cb) callbacks.push_back(std::move(cb));
    };
    add(analysis::auto_warmup_callback(c));  // first: the others read the rate it chooses (RunContext::rate)
    add(analysis::logit_trace_callback(c.trace.logits));
    add(analysis::trace_callback(c.trace));
    add(analysis::curvature_callback(c.curvature, c.optimizer, c.loss));
    add(std::make_unique<train::BleuValidation>(bleu, c.eval_bleu));
    const auto result = train::train(c, std::move(callbacks), job.device, job.group);
    if (result.diverged && c.fail_on_divergence)
      throw ExitCode{3, "training diverged at update " + std::to_string(result.updates + 1) +
                            " (--fail-on-divergence)"};
  };
}

}  // namespace

Runner add_train_command(CLI::App& app, const GlobalOptions& global) {
  return add_training_command(app, global, /*finetune=*/false);
}

Runner add_finetune_command(CLI::App& app, const GlobalOptions& global) {
  return add_training_command(app, global, /*finetune=*/true);
}

}  // namespace normlab::app
