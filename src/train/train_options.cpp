// Every `normlab train` option, declared once (core/option_table.h). A table per part of
// TrainConfig, its keys relative to the part's config.json section; train_options() puts the
// parts under their sections. Where a part's field has no flag (or no key) here, it says why.
#include "train/train_options.h"

#include "train/train_config.h"

namespace normlab::train {
namespace {

using core::above;
using core::at_least;
using core::between;
using core::finite;

core::Codec<OptimizerKind> optimizer_codec() {
  return {[](const std::string& s, const std::string& flag) { return parse_optimizer_kind(s, flag); },
          [](const OptimizerKind& k) { return to_string(k); }, [] { return optimizer_choices(); }, {}};
}

core::Codec<std::array<double, 2>> betas_codec() {
  return {[](const std::string& s, const std::string& flag) { return parse_betas(s, flag); },
          [](const std::array<double, 2>& b) { return core::format_number(b[0]) + "," + core::format_number(b[1]); },
          {}, [](const std::array<double, 2>& b) { return nlohmann::json{b[0], b[1]}; }};
}

// data::BatchingConfig and data::VocabTrainOptions check themselves (their validate(), shared with
// bpe, evaluate and hessian), so their fields are declared here without a range.
core::OptionTable<data::BatchingConfig> batching_options() {
  core::OptionTable<data::BatchingConfig> t;
  t.group("Data");
  t.add("--max-tokens", "max_tokens", &data::BatchingConfig::max_tokens, "padded tokens per batch");
  t.add("--max-sentences", "max_sentences", &data::BatchingConfig::max_sentences, "sentences per batch (0: no limit)");
  return t;
}

core::OptionTable<data::VocabTrainOptions> vocab_options() {
  core::OptionTable<data::VocabTrainOptions> t;
  t.group("Data");
  t.add("--vocab-size", "vocab_size", &data::VocabTrainOptions::vocab_size,
        "joint BPE vocabulary size (special tokens included)");
  t.add("--character-coverage", "character_coverage", &data::VocabTrainOptions::character_coverage,
        "the characters of the training text that get a piece").json_only();  // a flag of `normlab bpe` only
  return t;
}

// data::MaskingConfig checks itself (its problems(), which eval-lm shares).
core::OptionTable<data::MaskingConfig> masking_options() {
  core::OptionTable<data::MaskingConfig> t;
  t.group("Masked language model (encoder-only; docs/data.md)");
  t.add("--mask-prob", "mask_prob", &data::MaskingConfig::mask_prob, "share of each block's tokens to predict");
  t.add("--leave-unmasked-prob", "leave_unmasked_prob", &data::MaskingConfig::leave_unmasked_prob,
        "share of those left as they are");
  t.add("--random-token-prob", "random_token_prob", &data::MaskingConfig::random_token_prob,
        "share of those replaced by a random token (the rest become <mask>)");
  return t;
}

// model::added_count_problems checks the counts; --init is a model flag (ModelOptions).
core::OptionTable<model::AddedLayers> added_layers_options() {
  core::OptionTable<model::AddedLayers> t;
  t.group("A trained model with layers added (docs/training.md)");
  t.add("--add-encoder-layers", "add_encoder_layers", &model::AddedLayers::encoder, "layers put on top of its encoder");
  t.add("--add-decoder-layers", "add_decoder_layers", &model::AddedLayers::decoder, "layers put on top of its decoder");
  return t;
}

core::OptionTable<TrainConfig> make_train_options() {
  core::OptionTable<TrainConfig> t;
  t.group("Data");
  t.add("--train", "data.train", &TrainConfig::train_prefix,
        "training text PREFIX (PREFIX.SRC, PREFIX.TGT, plain or .gz); decoder-only: a text FILE");
  t.add("--valid", "data.valid", &TrainConfig::valid_prefix, "validation text PREFIX (decoder-only: FILE)");
  t.add("--test", "data.test", &TrainConfig::test_prefix,
        "test text PREFIX (decoder-only: FILE), scored with the final model");
  t.add("--max-length-ratio", "data.max_length_ratio", &TrainConfig::max_length_ratio,
        "drop training pairs whose longer side exceeds this multiple of the shorter (0: off)");  // data's FilterOptions checks it
  t.add("--src", "data.src", &TrainConfig::src_lang, "source language suffix");
  t.add("--tgt", "data.tgt", &TrainConfig::tgt_lang, "target language suffix");
  t.add_part(&TrainConfig::vocab, vocab_options(), "data");
  t.add("--cache-dir", "data.cache_dir", &TrainConfig::cache_dir, "where encoded corpora are cached (default RUN_DIR/cache)");
  t.add_part(&TrainConfig::batching, batching_options(), "batching");
  t.add("--update-freq", "batching.update_freq", &TrainConfig::update_freq, "batches accumulated per update",
        at_least(1));
  t.add("--bucket-cap-mb", "distributed.bucket_cap_mb", &TrainConfig::bucket_cap_mb,
        "several ranks: MB of gradients per all-reduce bucket (DDP's bucket_cap_mb; the first 1 MB)",
        between(0, 4096, true, false));
  t.add("--max-pairs", "data.max_pairs", &TrainConfig::max_pairs, "train on the first N pairs of --train only (0: all)",
        at_least(0));
  t.add("--block-size", "data.block_size", &TrainConfig::block_size,
        "decoder-only, encoder-only: positions per block of running text (0: --max-positions)", at_least(0));
  t.add_part(&TrainConfig::masking, masking_options(), "masking");
  t.add_part(&TrainConfig::init_from, init_from_options(), "init_from");

  t.add_part(&TrainConfig::optimizer, optimizer_options(), "optimizer");
  t.add_part(&TrainConfig::loss_scaler, loss_scaler_options(), "fp16");
  t.group("Optimisation");
  t.add("--clip-norm", "loss.clip_norm", &TrainConfig::clip_norm, "clip the gradient's 2-norm (0: off)", at_least(0));
  t.add_part(&TrainConfig::loss, loss_options(), "loss");
  t.add_part(&TrainConfig::schedule, schedule_options(), "schedule");

  t.group("Limits and output");
  t.add("--max-epochs", "limits.max_epochs", &TrainConfig::max_epochs, "stop after N epochs (0: no limit)", at_least(0));
  t.add("--max-steps", "limits.max_steps", &TrainConfig::max_steps, "stop after N updates (0: no limit)", at_least(0));
  t.add("--stop-time-hours", "limits.stop_time_hours", &TrainConfig::stop_time_hours,
        "also stop after the update at which the training wall time (over resumes) reaches H hours (0: no limit)",
        at_least(0));
  t.add("--out", "output.out", &TrainConfig::out, "run folder RUN_DIR");
  t.add("--log-interval", "output.log_interval", &TrainConfig::log_interval, "updates between metrics records",
        at_least(1));
  t.add("--save-interval", "output.save_interval", &TrainConfig::save_interval, "keep checkpoint<E>.pt every N epochs",
        at_least(1));
  t.add("--save-interval-updates", "output.save_interval_updates", &TrainConfig::save_interval_updates,
        "also checkpoint every N updates", at_least(0));
  t.add("--validate-interval-updates", "output.validate_interval_updates", &TrainConfig::validate_interval_updates,
        "also validate (and write checkpoint_last/best) every N updates (0: at epoch ends only)", at_least(0));
  t.add("--keep-last", "output.keep_last", &TrainConfig::keep_last, "keep the N newest numbered checkpoints (0: all)",
        at_least(0));
  t.add("--seed", "seed", &TrainConfig::seed, "random seed");
  t.add("--fail-on-divergence", "output.fail_on_divergence", &TrainConfig::fail_on_divergence,
        "exit 3 when the loss becomes NaN/inf");
  t.add("--valid-at-init", "output.valid_at_init", &TrainConfig::valid_at_init,
        "validate the initial model before the first update (metrics.jsonl: init_valid_loss)");
  t.add_part(&TrainConfig::trace, trace_options(), "output");
  t.add_part(&TrainConfig::curvature, curvature_options(), "curvature");

  t.group("Validation BLEU (docs/translate.md)");
  t.add("--eval-bleu", "eval.eval_bleu", &TrainConfig::eval_bleu,
        "beam-search the validation set every epoch: valid_bleu in metrics.jsonl");
  t.add("--best-metric", "eval.best_metric", &TrainConfig::best_metric,
        "checkpoint_best.pt by lowest valid loss or highest BLEU", core::enum_codec(best_metrics()));
  return t;
}

}  // namespace

const core::OptionTable<TrainConfig>& train_options() {
  static const auto table = make_train_options();
  return table;
}

const core::OptionTable<InitFromConfig>& init_from_options() {
  static const auto table = [] {
    core::OptionTable<InitFromConfig> t;
    t.group("A trained model with layers added (docs/training.md)");
    t.add("--init-from", "checkpoint", &InitFromConfig::checkpoint,
          "start from this normlab checkpoint (its model and vocabulary; no other model flag but --init and "
          "--num-classes, a classifier's head on its encoder), or with --init-from-update a checkpoints folder");
    t.add("--init-from-update", "update", &InitFromConfig::update,
          "--init-from is a checkpoints folder: start from its checkpoint_<E>_<U>.pt of update U (0: off)",
          at_least(0));
    t.add_part(&InitFromConfig::added, added_layers_options(), "");
    t.add("--pretrained-lr-scale", "pretrained_lr_scale", &InitFromConfig::pretrained_lr_scale,
          "the checkpoint's parameters train at this multiple of --lr (0: frozen)", finite(at_least(0)));

    return t;
  }();
  return table;
}

const core::OptionTable<OptimizerConfig>& optimizer_options() {
  static const auto table = [] {
    core::OptionTable<OptimizerConfig> t;
    t.group("Optimisation");
    t.add("--optimizer", "optimizer", &OptimizerConfig::kind, "", optimizer_codec());
    t.add("--betas", "betas", &OptimizerConfig::betas,
          "beta1,beta2 of the Adam family, lion and muon's AdamW (without it lion's 0.9,0.99, muon's 0.9,0.95, "
          "adamw-schedulefree's 0.9,0.999)",
          betas_codec());  // problems()
    t.add("--eps", "eps", &OptimizerConfig::eps, "Adam's epsilon", finite(at_least(0)));
    t.add("--weight-decay", "weight_decay", &OptimizerConfig::weight_decay, "weight decay", finite(at_least(0)));
    t.add("--momentum", "momentum", &OptimizerConfig::momentum, "SGD momentum", between(0, 1, false, true));
    t.add("--nesterov", "nesterov", &OptimizerConfig::nesterov, "SGD with Nesterov momentum");
    t.add("--radam-fallback", "radam_fallback", &OptimizerConfig::radam_fallback, "RAdam before rectification",
          core::enum_codec(radam_fallbacks()));
    t.add("--adam-init-v", "adam_init_v", &OptimizerConfig::adam_init_v,
          "Adam's second moment before the first update (GI-Adam's grad-squared: v0 = g0^2)",
          core::enum_codec(adam_init_vs()));
    t.add("--weight-decay-mode", "weight_decay_mode", &OptimizerConfig::weight_decay_mode,
          "decoupled weight decay p *= 1 - s wd with s the step's lr (torch's AdamW) or lr/--lr, the schedule's "
          "multiplier alone (independent: Wortsman et al. 2023)",
          core::enum_codec(weight_decay_modes()));
    t.add("--muon-momentum", "muon_momentum", &OptimizerConfig::muon_momentum,
          "muon: momentum mu of the 2-D hidden weights, B = mu B + (1 - mu) g", between(0, 1, false, true));
    t.add("--muon-nesterov", "muon_nesterov", &OptimizerConfig::muon_nesterov,
          "muon: orthogonalise (1 - mu) g + mu B rather than B (Nesterov; on, --muon-nesterov=false turns it off)");
    t.add("--muon-ns-steps", "muon_ns_steps", &OptimizerConfig::muon_ns_steps,
          "muon: Newton-Schulz iterations of the orthogonalisation", between(1, 99, false, false));
    t.add("--muon-adjust-lr", "muon_adjust_lr", &OptimizerConfig::muon_adjust_lr,
          "muon: an A x B matrix's rate, lr sqrt(max(1, A/B)) (original: Jordan et al.) or lr 0.2 sqrt(max(A, B)) "
          "(match-rms-adamw: Moonlight, AdamW's --lr and --weight-decay serve both)",
          core::enum_codec(muon_adjust_lrs()));
    t.add("--schedule-free-r", "schedule_free_r", &OptimizerConfig::schedule_free_r,
          "adamw-schedulefree: update k's weight in the average grows as k^r (0: all alike)", finite(at_least(0)));
    t.add("--schedule-free-weight-lr-power", "schedule_free_weight_lr_power",
          &OptimizerConfig::schedule_free_weight_lr_power,
          "adamw-schedulefree: and as lr_max^p, lr_max the largest warmed-up rate so far (0: no lr weighting)",
          finite(at_least(0)));
    return t;
  }();
  return table;
}

const core::OptionTable<LossScalerConfig>& loss_scaler_options() {
  static const auto table = [] {
    core::OptionTable<LossScalerConfig> t;
    t.group("Optimisation");
    t.add("--fp16-init-scale", "init_scale", &LossScalerConfig::init_scale, "fp16: the initial loss scale (fairseq's 2^7)",
          finite(above(0)));
    t.add("--fp16-scale-window", "scale_window", &LossScalerConfig::window,
          "fp16: updates without overflow before the scale doubles (0: 2^14 / ranks / update-freq)", at_least(0));
    t.add("--min-loss-scale", "min_loss_scale", &LossScalerConfig::min_scale,
          "fp16: stop when the scale would fall below this");  // in (0, --fp16-init-scale): problems()
    return t;
  }();
  return table;
}

const core::OptionTable<LossOptions>& loss_options() {
  static const auto table = [] {
    core::OptionTable<LossOptions> t;
    t.group("Optimisation");
    t.add("--label-smoothing", "label_smoothing", &LossOptions::label_smoothing, "eps", between(0, 1, false, true));
    t.add("--ls-formula", "formula", &LossOptions::formula, "", core::enum_codec(label_smoothing_formulas()));
    t.add("--z-loss", "z_loss", &LossOptions::z_loss,
          "C: add C (log Z)^2 per target token to the training loss (PaLM's z-loss; 1e-4 there), "
          "and to the curvature series' loss",
          at_least(0));
    return t;
  }();
  return table;
}

// Every entry cli_only: schedule.cpp's to_json writes them with --warmup auto only.
const core::OptionTable<AutoWarmupSettings>& auto_warmup_options() {
  static const auto table = [] {
    core::OptionTable<AutoWarmupSettings> t;
    t.group("Optimisation");
    t.add("--warmup-auto-every", "every", &AutoWarmupSettings::every,
          "--warmup auto: updates between measurements of the ramp, the factor's doubling time "
          "(0: --warmup-auto-every-ratio of the planned updates)",
          at_least(0))
        .cli_only();
    t.add("--warmup-auto-every-ratio", "every_ratio", &AutoWarmupSettings::every_ratio,
          "--warmup auto: the same as a share of the planned updates (rounded, at least 1)", between(0, 1, true, false))
        .cli_only();
    t.add("--warmup-auto-sentences", "sentences", &AutoWarmupSettings::sentences,
          "--warmup auto: the probe set, the first N validation pairs", at_least(1))
        .cli_only();
    t.add("--warmup-auto-lanczos-steps", "lanczos_steps", &AutoWarmupSettings::lanczos_steps,
          "--warmup auto: Lanczos steps per measurement (warm-started)", at_least(1))
        .cli_only();
    t.add("--warmup-auto-catapult", "catapult", &AutoWarmupSettings::catapult,
          "--warmup auto: a training loss above C x its running mean is a catapult and halves the rate",
          finite(above(1)))
        .cli_only();
    return t;
  }();
  return table;
}

const core::OptionTable<ScheduleConfig>& schedule_options() {
  static const auto table = [] {
    core::OptionTable<ScheduleConfig> t;
    t.group("Optimisation");
    auto positive = finite(above(0));
    positive.phrase = "positive";
    t.add("--lr", "lr", &ScheduleConfig::lr, "peak learning rate", positive);
    t.add("--lr-schedule", "lr_schedule", &ScheduleConfig::kind, "", core::enum_codec(schedule_kinds()));
    t.add("--warmup-steps", "warmup_steps", &ScheduleConfig::warmup_steps, "linear warm-up updates (0: none)",
          at_least(0));
    // In [0, --lr]: problems().
    t.add("--warmup-init-lr", "warmup_init_lr", &ScheduleConfig::warmup_init_lr, "rate at the start of the warm-up");
    t.add("--min-lr", "min_lr", &ScheduleConfig::min_lr, "final rate of linear, cosine and wsd");
    // TrainConfig's --max-steps, copied here by the command.
    t.add("--max-steps", "max_steps", &ScheduleConfig::max_steps, "where linear, cosine and wsd reach --min-lr",
          at_least(0)).json_only();
    t.add("--lr-decay-epochs", "lr_decay_epochs", &ScheduleConfig::lr_decay_epochs, "step-decay: every K epochs",
          at_least(1));
    t.add("--lr-decay-factor", "lr_decay_factor", &ScheduleConfig::lr_decay_factor, "step-decay: multiplier",
          between(0, 1, true, false));
    t.add("--lr-decay-count", "lr_decay_count", &ScheduleConfig::lr_decay_count, "step-decay: most decays (0: no limit)",
          at_least(0));
    t.add("--tfixup-decay-steps", "tfixup_decay_steps", &ScheduleConfig::tfixup_decay_steps, "t-fixup schedule's P",
          at_least(1));
    // Related to --max-steps and --warmup-steps: problems().
    t.add("--wsd-decay-steps", "wsd_decay_steps", &ScheduleConfig::wsd_decay_steps,
          "wsd: the cool-down's updates, the last before --max-steps (Hägele et al.: 20% of them)", at_least(0));
    t.add("--wsd-decay", "wsd_decay", &ScheduleConfig::wsd_decay, "wsd: the cool-down's shape",
          core::enum_codec(wsd_decays()));
    // In config.json only with --warmup auto (schedule.cpp's to_json).
    t.add("--warmup", "warmup", &ScheduleConfig::warmup,
          "fixed: --warmup-steps' linear ramp; auto: the run chooses its ramp from the measured preconditioned "
          "sharpness (docs/warmup.md)",
          core::enum_codec(warmup_modes()))
        .cli_only();
    t.add_part(&ScheduleConfig::auto_warmup, auto_warmup_options(), "warmup_auto");
    // In config.json only when > 0 (schedule.cpp's to_json).
    t.add("--warmup-gate", "warmup_gate", &ScheduleConfig::warmup_gate,
          "G: the warm-up (--warmup-steps' or --warmup auto's) only if a probe of 2% of the updates without it "
          "lowers the training loss by more than G nats per token, else none (0: always; docs/warmup.md)",
          finite(at_least(0)))
        .cli_only();
    return t;
  }();
  return table;
}

const core::OptionTable<TraceConfig>& trace_options() {
  static const auto table = [] {
    core::OptionTable<TraceConfig> t;
    t.group("Limits and output");
    t.add("--trace-steps", "trace_steps", &TraceConfig::steps,
          "histograms of gradients and updates, LayerNorm input norms, for the first N updates (RUN_DIR/trace/)",
          at_least(0));
    t.add("--trace-params", "trace_params", &TraceConfig::params, "parameters to trace, comma-separated (default: the first stack's token table)");
    t.add("--trace-logits", "trace_logits", &TraceConfig::logits,
          "every update: each attention head's largest |q.k|/sqrt(D) and the output's mean and max log Z "
          "(RUN_DIR/trace/attention_logits.csv, output_logits.csv)");
    return t;
  }();
  return table;
}

const core::OptionTable<CurvatureConfig>& curvature_options() {
  static const auto table = [] {
    core::OptionTable<CurvatureConfig> t;
    t.group("Curvature during training (docs/curvature.md)");
    t.add("--curvature-every", "every", &CurvatureConfig::every,
          "sharpness (and Adam's preconditioned sharpness) at update 0 and every N updates: "
          "RUN_DIR/curvature.jsonl (0: off)",
          at_least(0));
    t.add("--curvature-sentences", "sentences", &CurvatureConfig::sentences,
          "the probe set: the first N validation pairs", at_least(1));
    t.add("--curvature-steps", "steps", &CurvatureConfig::steps, "Lanczos steps per measurement (warm-started)",
          at_least(1));
    // Not in config.json: its blocks are records of their own in curvature.jsonl.
    t.add("--curvature-per-block", "per_block", &CurvatureConfig::per_block,
          "also lambda_1 of each sub-layer's Hessian block (embeddings, attention q/k and v/out, FFN, norms)")
        .cli_only();
    t.add("--curvature-preconditioner", "preconditioner", &CurvatureConfig::preconditioner,
          "Adam's P: next (Kalra & Barkeshli: v_{t+1}, bias corrections), current (v_t, the last update's "
          "denominator) or cohen (Cohen et al. 2022: current times 1 - beta1^t)",
          core::enum_codec(preconditioners()));
    return t;
  }();
  return table;
}

const core::EnumNames<ScheduleKind>& schedule_kinds() {
  static const core::EnumNames<ScheduleKind> names{
      {ScheduleKind::kConstant, "constant"}, {ScheduleKind::kInverseSqrt, "inverse-sqrt"},
      {ScheduleKind::kLinear, "linear"},     {ScheduleKind::kStepDecay, "step-decay"},
      {ScheduleKind::kTFixup, "t-fixup"},    {ScheduleKind::kCosine, "cosine"},
      {ScheduleKind::kWsd, "wsd"}};
  return names;
}

const core::EnumNames<WarmupMode>& warmup_modes() {
  static const core::EnumNames<WarmupMode> names{{WarmupMode::kFixed, "fixed"}, {WarmupMode::kAuto, "auto"}};
  return names;
}

const core::EnumNames<WsdDecay>& wsd_decays() {
  static const core::EnumNames<WsdDecay> names{{WsdDecay::kLinear, "linear"}, {WsdDecay::kOneMinusSqrt, "1-sqrt"}};
  return names;
}

const core::EnumNames<RAdamFallback>& radam_fallbacks() {
  static const core::EnumNames<RAdamFallback> names{{RAdamFallback::kSkip, "skip"}, {RAdamFallback::kSgd, "sgd"}};
  return names;
}

const core::EnumNames<AdamInitV>& adam_init_vs() {
  static const core::EnumNames<AdamInitV> names{{AdamInitV::kZero, "zero"}, {AdamInitV::kGradSquared, "grad-squared"}};
  return names;
}

const core::EnumNames<WeightDecayMode>& weight_decay_modes() {
  static const core::EnumNames<WeightDecayMode> names{{WeightDecayMode::kLr, "lr"},
                                                      {WeightDecayMode::kIndependent, "independent"}};
  return names;
}

const core::EnumNames<MuonAdjustLr>& muon_adjust_lrs() {
  static const core::EnumNames<MuonAdjustLr> names{{MuonAdjustLr::kOriginal, "original"},
                                                   {MuonAdjustLr::kMatchRmsAdamW, "match-rms-adamw"}};
  return names;
}

const core::EnumNames<LabelSmoothingFormula>& label_smoothing_formulas() {
  static const core::EnumNames<LabelSmoothingFormula> names{{LabelSmoothingFormula::kUniform, "uniform"},
                                                            {LabelSmoothingFormula::kExclusive, "exclusive"}};
  return names;
}

const core::EnumNames<Preconditioner>& preconditioners() {
  static const core::EnumNames<Preconditioner> names{{Preconditioner::kCurrent, "current"},
                                                     {Preconditioner::kNext, "next"},
                                                     {Preconditioner::kCohen, "cohen"}};
  return names;
}

const core::EnumNames<BestMetric>& best_metrics() {
  static const core::EnumNames<BestMetric> names{{BestMetric::kLoss, "loss"}, {BestMetric::kBleu, "bleu"}};
  return names;
}

}  // namespace normlab::train
