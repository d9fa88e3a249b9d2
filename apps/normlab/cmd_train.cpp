// `normlab train`: trains on parallel text into a run folder, resuming when it has a checkpoint.
// The trainer (train/) gets what lives above it here, as its list of callbacks: the instruments
// of analysis/ and the --eval-bleu validator (decode/ beam search, metrics/ BLEU).
#include <iostream>

#include <nlohmann/json.hpp>

#include "analysis/curvature.h"
#include "analysis/logit_trace.h"
#include "analysis/trace.h"
#include "commands.h"
#include "core/runtime.h"
#include "decode/beam_search.h"
#include "decode_options.h"
#include "dist_options.h"
#include "metrics/evaluation.h"
#include "metrics/text.h"
#include "model_options.h"
#include "precision_option.h"
#include "train/bleu_validation.h"
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

Runner add_train_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("train", "train a model; re-running into RUN_DIR resumes it");
  struct Options {
    train::TrainConfig config;
    decode::BeamSearchConfig beam;  // --eval-bleu's decoder
    ModelOptions model;
    std::string optimizer = "adamw", betas = "0.9,0.98", radam_fallback = "skip";
    std::string schedule = "inverse-sqrt", ls_formula = "uniform", best_metric = "loss";
    std::string adam_init_v = "zero", preconditioner = "next";
    bool curvature = false;  // --curvature: the series at CurvatureConfig::kDefaultEvery
    std::string precision = "fp32";
    std::string init_from;  // --init-from CKPT
    DistCliOptions dist;
  };
  auto o = std::make_shared<Options>();
  auto& c = o->config;
  const std::string data = "Data", opt = "Optimisation", lim = "Limits and output";
  cmd->add_option("--train", c.train_prefix, "training text PREFIX (PREFIX.SRC, PREFIX.TGT, plain or .gz)")
      ->group(data);
  cmd->add_option("--valid", c.valid_prefix, "validation text PREFIX")->group(data);
  cmd->add_option("--test", c.test_prefix, "test text PREFIX, scored with the final model")->group(data);
  cmd->add_option("--max-length-ratio", c.max_length_ratio,
                  "drop training pairs whose longer side exceeds this multiple of the shorter (0: off)")
      ->capture_default_str()->group(data);
  cmd->add_option("--src", c.src_lang, "source language suffix")->capture_default_str()->group(data);
  cmd->add_option("--tgt", c.tgt_lang, "target language suffix")->capture_default_str()->group(data);
  cmd->add_option("--vocab-size", c.vocab.vocab_size, "joint BPE vocabulary size (special tokens included)")
      ->capture_default_str()->group(data);
  cmd->add_option("--cache-dir", c.cache_dir, "where encoded corpora are cached (default RUN_DIR/cache)")
      ->group(data);
  cmd->add_option("--max-tokens", c.batching.max_tokens, "padded tokens per batch")
      ->capture_default_str()->group(data);
  cmd->add_option("--max-sentences", c.batching.max_sentences, "sentences per batch (0: no limit)")
      ->capture_default_str()->group(data);
  cmd->add_option("--update-freq", c.update_freq, "batches accumulated per update")
      ->capture_default_str()->group(data);
  cmd->add_option("--bucket-cap-mb", c.bucket_cap_mb,
                  "several ranks: MB of gradients per all-reduce bucket (DDP's bucket_cap_mb; the first 1 MB)")
      ->capture_default_str()->group(data);
  cmd->add_option("--max-pairs", c.max_pairs, "train on the first N pairs of --train only (0: all)")
      ->capture_default_str()->group(data);
  o->model.add_to(*cmd, /*with_vocab_size=*/false);
  const std::string grow = "A trained model with layers added (docs/training.md)";
  cmd->add_option("--init-from", o->init_from,
                  "start from this normlab checkpoint (its model and vocabulary; no other model flag but --init)")
      ->group(grow);
  cmd->add_option("--add-encoder-layers", c.init_from.added.encoder, "layers put on top of its encoder")
      ->capture_default_str()->group(grow);
  cmd->add_option("--add-decoder-layers", c.init_from.added.decoder, "layers put on top of its decoder")
      ->capture_default_str()->group(grow);
  cmd->add_option("--pretrained-lr-scale", c.init_from.pretrained_lr_scale,
                  "the checkpoint's parameters train at this multiple of --lr (0: frozen)")
      ->capture_default_str()->group(grow);
  add_precision_option(*cmd, o->precision);

  cmd->add_option("--optimizer", o->optimizer, train::optimizer_choices())->capture_default_str()->group(opt);
  cmd->add_option("--betas", o->betas, "Adam's beta1,beta2")->capture_default_str()->group(opt);
  cmd->add_option("--eps", c.optimizer.eps, "Adam's epsilon")->capture_default_str()->group(opt);
  cmd->add_option("--weight-decay", c.optimizer.weight_decay, "weight decay")->capture_default_str()->group(opt);
  cmd->add_option("--momentum", c.optimizer.momentum, "SGD momentum")->capture_default_str()->group(opt);
  cmd->add_flag("--nesterov", c.optimizer.nesterov, "SGD with Nesterov momentum")->group(opt);
  cmd->add_option("--radam-fallback", o->radam_fallback, "RAdam before rectification: skip|sgd")
      ->capture_default_str()->group(opt);
  cmd->add_option("--adam-init-v", o->adam_init_v,
                  "Adam's second moment before the first update: zero|grad-squared (GI-Adam: v0 = g0^2)")
      ->capture_default_str()->group(opt);
  cmd->add_option("--fp16-init-scale", c.loss_scaler.init_scale, "fp16: the initial loss scale (fairseq's 2^7)")
      ->capture_default_str()->group(opt);
  cmd->add_option("--fp16-scale-window", c.loss_scaler.window,
                  "fp16: updates without overflow before the scale doubles (0: 2^14 / ranks / update-freq)")
      ->capture_default_str()->group(opt);
  cmd->add_option("--min-loss-scale", c.loss_scaler.min_scale, "fp16: stop when the scale would fall below this")
      ->capture_default_str()->group(opt);
  cmd->add_option("--clip-norm", c.clip_norm, "clip the gradient's 2-norm (0: off)")
      ->capture_default_str()->group(opt);
  cmd->add_option("--label-smoothing", c.loss.label_smoothing, "eps")->capture_default_str()->group(opt);
  cmd->add_option("--ls-formula", o->ls_formula, "uniform|exclusive")->capture_default_str()->group(opt);
  cmd->add_option("--z-loss", c.loss.z_loss,
                  "C: add C (log Z)^2 per target token to the training loss (PaLM's z-loss; 1e-4 there), "
                  "and to the curvature series' loss")
      ->capture_default_str()->group(opt);
  cmd->add_option("--lr", c.schedule.lr, "peak learning rate")->capture_default_str()->group(opt);
  cmd->add_option("--lr-schedule", o->schedule, "constant|inverse-sqrt|linear|step-decay|t-fixup|cosine")
      ->capture_default_str()->group(opt);
  cmd->add_option("--warmup-steps", c.schedule.warmup_steps, "linear warm-up updates (0: none)")
      ->capture_default_str()->group(opt);
  cmd->add_option("--warmup-init-lr", c.schedule.warmup_init_lr, "rate at the start of the warm-up")
      ->capture_default_str()->group(opt);
  cmd->add_option("--min-lr", c.schedule.min_lr, "final rate of linear and cosine")
      ->capture_default_str()->group(opt);
  cmd->add_option("--lr-decay-epochs", c.schedule.lr_decay_epochs, "step-decay: every K epochs")
      ->capture_default_str()->group(opt);
  cmd->add_option("--lr-decay-factor", c.schedule.lr_decay_factor, "step-decay: multiplier")
      ->capture_default_str()->group(opt);
  cmd->add_option("--lr-decay-count", c.schedule.lr_decay_count, "step-decay: most decays (0: no limit)")
      ->capture_default_str()->group(opt);
  cmd->add_option("--tfixup-decay-steps", c.schedule.tfixup_decay_steps, "t-fixup schedule's P")
      ->capture_default_str()->group(opt);

  cmd->add_option("--max-epochs", c.max_epochs, "stop after N epochs (0: no limit)")->group(lim);
  cmd->add_option("--max-steps", c.max_steps, "stop after N updates (0: no limit)")->group(lim);
  cmd->add_option("--stop-time-hours", c.stop_time_hours,
                  "also stop after the update at which the training wall time (over resumes) reaches H hours (0: no limit)")
      ->group(lim);
  cmd->add_option("--out", c.out, "run folder RUN_DIR")->group(lim);
  cmd->add_option("--log-interval", c.log_interval, "updates between metrics records")
      ->capture_default_str()->group(lim);
  cmd->add_option("--save-interval", c.save_interval, "keep checkpoint<E>.pt every N epochs")
      ->capture_default_str()->group(lim);
  cmd->add_option("--save-interval-updates", c.save_interval_updates, "also checkpoint every N updates")
      ->capture_default_str()->group(lim);
  cmd->add_option("--keep-last", c.keep_last, "keep the N newest numbered checkpoints (0: all)")
      ->capture_default_str()->group(lim);
  cmd->add_option("--seed", c.seed, "random seed")->capture_default_str()->group(lim);
  cmd->add_flag("--fail-on-divergence", c.fail_on_divergence, "exit 3 when the loss becomes NaN/inf")
      ->group(lim);
  cmd->add_flag("--valid-at-init", c.valid_at_init,
                "validate the initial model before the first update (metrics.jsonl: init_valid_loss)")
      ->group(lim);
  cmd->add_option("--trace-steps", c.trace.steps,
                  "histograms of gradients and updates, LayerNorm input norms, for the first N updates "
                  "(RUN_DIR/trace/)")->capture_default_str()->group(lim);
  cmd->add_option("--trace-params", c.trace.params, "parameters to trace, comma-separated")
      ->delimiter(',')->capture_default_str()->group(lim);
  cmd->add_flag("--trace-logits", c.trace.logits,
                "every update: each attention head's largest |q.k|/sqrt(D) and the output's mean and max log Z "
                "(RUN_DIR/trace/attention_logits.csv, output_logits.csv)")
      ->group(lim);

  const std::string cv = "Curvature during training (docs/curvature.md)";
  cmd->add_flag("--curvature", o->curvature,
                "the curvature series every " + std::to_string(train::CurvatureConfig::kDefaultEvery) +
                    " updates (at most ~10% of the training time on the synthetic task's cells)")
      ->group(cv);
  cmd->add_option("--curvature-every", c.curvature.every,
                  "sharpness (and Adam's preconditioned sharpness) at update 0 and every N updates: "
                  "RUN_DIR/curvature.jsonl (0: off)")->capture_default_str()->group(cv);
  cmd->add_option("--curvature-sentences", c.curvature.sentences, "the probe set: the first N validation pairs")
      ->capture_default_str()->group(cv);
  cmd->add_option("--curvature-steps", c.curvature.steps, "Lanczos steps per measurement (warm-started)")
      ->capture_default_str()->group(cv);
  cmd->add_flag("--curvature-per-block", c.curvature.per_block,
                "also lambda_1 of each sub-layer's Hessian block (embeddings, attention q/k and v/out, FFN, norms)")
      ->group(cv);
  cmd->add_option("--curvature-preconditioner", o->preconditioner,
                  "Adam's P: next (Kalra & Barkeshli: v_{t+1}, bias corrections) | current (v_t, the last update's)")
      ->capture_default_str()->group(cv);

  const std::string ev = "Validation BLEU (docs/translate.md)";
  cmd->add_flag("--eval-bleu", c.eval_bleu, "beam-search the validation set every epoch: valid_bleu in metrics.jsonl")
      ->group(ev);
  cmd->add_option("--best-metric", o->best_metric, "checkpoint_best.pt by lowest valid loss or highest BLEU: loss|bleu")
      ->capture_default_str()->group(ev);
  add_beam_options(*cmd, o->beam, /*translate=*/false, ev);
  add_dist_options(*cmd, o->dist);

  return [o, &global, cmd] {
    auto& c = o->config;
    c.init_from.checkpoint = o->init_from;
    const auto& init = o->model.init_name();
    if (!o->init_from.empty()) {
      // The model and its vocabulary are the checkpoint's: a model flag would be ignored.
      std::string ignored;
      for (const auto* option : cmd->get_options())
        if (option->count() > 0 && option->get_name() != "--init" &&
            (option->get_group() == "Model" || option->get_name() == "--vocab-size"))
          ignored += (ignored.empty() ? "" : ", ") + option->get_name();
      if (!ignored.empty())
        throw std::invalid_argument(ignored + ": the model and its vocabulary come from --init-from " + o->init_from +
                                    "; drop them");
      c.init_from.added.init = model::parse_added_layer_init(init.empty() ? "xavier" : init);
    } else if (init == "dt-fixup") {
      c.init_from.added.init = model::AddedLayerInit::kDtFixup;  // refused by problems(), saying why
    } else {
      c.model = o->model.resolve(/*vocab_from_data=*/true);
    }
    c.optimizer.kind = train::parse_optimizer_kind(o->optimizer);
    c.optimizer.betas = train::parse_betas(o->betas);
    c.optimizer.radam_fallback = train::parse_radam_fallback(o->radam_fallback);
    c.optimizer.adam_init_v = train::parse_adam_init_v(o->adam_init_v);
    c.curvature.preconditioner = train::parse_preconditioner(o->preconditioner);
    if (o->curvature && c.curvature.every == 0) c.curvature.every = train::CurvatureConfig::kDefaultEvery;
    c.schedule.kind = train::parse_schedule_kind(o->schedule);
    c.schedule.max_steps = c.max_steps;
    c.loss.formula = train::parse_label_smoothing_formula(o->ls_formula);
    c.best_metric = train::parse_best_metric(o->best_metric);
    const auto device = core::resolve_device(global.device);
    c.precision = model::parse_precision(o->precision, device);  // auto: resolved here, recorded in config.json
    warn_if_emulated(c.precision, device);
    ValidationBleu bleu(o->beam, c.batching.max_tokens > 0 ? c.batching.max_tokens : 4096);
    auto job = join_job(o->dist, device);
    // The run's instruments, in the order the trainer calls them (docs/architecture.md).
    train::TrainCallbacks callbacks;
    auto add = [&](std::unique_ptr<train::TrainCallback> cb) {
      if (cb) callbacks.push_back(std::move(cb));
    };
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

}  // namespace normlab::app
