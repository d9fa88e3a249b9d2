#include "train/train_config.h"

#include <nlohmann/json.hpp>

#include "train/width_lr.h"
#include "train/train_options.h"
#include "model/width.h"

namespace normlab::train {

BestMetric parse_best_metric(const std::string& s) { return best_metrics().parse(s, "--best-metric"); }

// Here and in TrainConfig::problems(): the ranges of single options from their tables
// (train_options.cpp), then what relates options.
std::vector<std::string> InitFromConfig::problems() const {
  std::vector<std::string> out = init_from_options().problems(*this);
  for (auto& p : model::added_count_problems(added)) out.push_back(p);
  if (pooling && classes == 0)
    out.push_back("--classifier-pooling " + model::to_string(*pooling) +
                  " chooses a new classifier's pooling: give --num-classes K");
  if (checkpoint.empty()) {
    if (added.encoder > 0 || added.decoder > 0)
      out.push_back("--add-encoder-layers/--add-decoder-layers add layers to a trained model: give --init-from CKPT");
    if (pretrained_lr_scale != 1.0) out.push_back("--pretrained-lr-scale needs --init-from CKPT");
    if (update != 0) out.push_back("--init-from-update U picks a checkpoint of a folder: give --init-from DIR");
    if (added.init != model::AddedLayerInit::kXavier)
      out.push_back("--init " + model::to_string(added.init) +
                    " initialises layers added to a trained model: give --init-from CKPT and --add-encoder-layers "
                    "or --add-decoder-layers");
  }
  return out;
}

namespace {

// The options of one kind's data that the other kind does not read.
std::vector<std::string> model_kind_problems(const TrainConfig& c) {
  std::vector<std::string> out;
  const auto& kind = c.model.kind;
  const bool masked = kind == model::kEncoderOnly && !c.model.classifier();
  const data::MaskingConfig fairseq;
  if (!masked && (c.masking.mask_prob != fairseq.mask_prob || c.masking.leave_unmasked_prob != fairseq.leave_unmasked_prob ||
                  c.masking.random_token_prob != fairseq.random_token_prob))
    out.push_back("--mask-prob, --leave-unmasked-prob and --random-token-prob apply to --model-kind " +
                  std::string(model::kEncoderOnly) + ", not " +
                  (c.model.classifier() ? "a classifier" : kind));
  if (masked)
    for (auto& p : c.masking.problems()) out.push_back(p);
  if (!c.model.single_stack()) {
    if (c.block_size != 0)
      out.push_back("--block-size cuts running text for --model-kind " + std::string(model::kDecoderOnly) + " or " +
                    model::kEncoderOnly + "; an " + kind + " model reads sentence pairs");
    return out;
  }
  auto refuse = [&](bool given, const std::string& option) {
    if (given) out.push_back(option + " applies to sentence pairs; a " + kind + " model reads running text");
  };
  refuse(c.eval_bleu, "--eval-bleu");
  refuse(c.max_pairs != 0, "--max-pairs");
  refuse(c.max_length_ratio != 0.0, "--max-length-ratio");
  if (masked && c.text_block_size() < 2)
    out.push_back("--block-size must be at least 2 for a masked LM (<s> and a token), got " +
                  std::to_string(c.text_block_size()));
  if (c.text_block_size() > c.model.max_positions)
    out.push_back("--block-size " + std::to_string(c.block_size) + " exceeds --max-positions " +
                  std::to_string(c.model.max_positions));
  return out;
}

// An optimiser that warms up itself replaces the schedule (adamw-schedulefree: Defazio et al.
// 2024): the rate it is given must be constant, and its ramp starts at lr/W, not at --warmup-init-lr.
std::vector<std::string> own_warmup_problems(const TrainConfig& c) {
  std::vector<std::string> out;
  if (!replaces_schedule(c.optimizer.kind)) return out;
  const auto name = to_string(c.optimizer.kind);
  if (c.schedule.kind != ScheduleKind::kConstant)
    out.push_back("--optimizer " + name + " replaces the learning-rate schedule (--warmup-steps is its own warm-up): " +
                  "use --lr-schedule constant, got " + to_string(c.schedule.kind));
  if (c.schedule.warmup_init_lr != 0.0)
    out.push_back("--warmup-init-lr: --optimizer " + name + "'s own warm-up starts at --lr / --warmup-steps, got " +
                  core::format_number(c.schedule.warmup_init_lr));
  return out;
}

}  // namespace

ScheduleConfig TrainConfig::rate_schedule() const {
  ScheduleConfig out = schedule;
  if (replaces_schedule(optimizer.kind)) out.warmup_steps = 0;
  return out;  // --warmup auto: warmup_steps is 0, the rate is the target the ramp scales
}

std::vector<std::string> TrainConfig::problems() const {
  std::vector<std::string> out;
  if (train_prefix.empty()) out.push_back("--train is required");
  if (valid_prefix.empty()) out.push_back("--valid is required");
  if (out.empty() && this->out.empty()) out.push_back("--out is required");
  for (auto& p : train_options().problems(*this)) out.push_back(p);
  if (max_epochs == 0 && max_steps == 0) out.push_back("set --max-epochs or --max-steps");
  for (auto& p : loss.problems()) out.push_back(p);
  for (auto& p : vocab.validate()) out.push_back(p);
  for (auto& p : batching.validate()) out.push_back(p);
  for (auto& p : optimizer.problems()) out.push_back(p);
  for (auto& p : schedule.problems()) out.push_back(p);
  for (auto& p : own_warmup_problems(*this)) out.push_back(p);
  for (auto& p : trace.problems()) out.push_back(p);
  for (auto& p : curvature.problems()) out.push_back(p);
  for (auto& p : loss_scaler.problems()) out.push_back(p);
  if (best_metric == BestMetric::kBleu && !eval_bleu) out.push_back("--best-metric bleu needs --eval-bleu");
  for (auto& p : init_from.problems()) out.push_back(p);
  for (auto& p : model_kind_problems(*this)) out.push_back(p);
  if (init_from.pretrained_lr_scale != 1.0 && curvature.every > 0)
    out.push_back("--curvature-every measures one lr for every parameter: not with --pretrained-lr-scale");
  if (curvature.every > 0)
    if (auto p = model::one_rate_problem(model, "--curvature-every")) out.push_back(*p);
  for (auto& p : width_optimizer_problems(model, optimizer)) out.push_back(p);
  return out;
}

// The declared options, then what other options set: the model (ModelOptions), --precision,
// and --init (the added layers' initialisation, recorded with --init-from only).
void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = train_options().to_json(c);
  j["schedule"] = c.schedule;  // with --warmup auto's keys (schedule.cpp)
  j["model"] = c.model;
  j["precision"] = model::to_string(c.precision);
  if (c.model.kind != model::kEncoderOnly || c.model.classifier()) j.erase("masking");  // a masked LM's
  if (c.init_from.checkpoint.empty())
    j.erase("init_from");
  else
    j["init_from"]["init"] = model::to_string(c.init_from.added.init);
  if (c.init_from.classes > 0) j["init_from"]["num_classes"] = c.init_from.classes;
  if (c.init_from.pooling) j["init_from"]["classifier_pooling"] = model::to_string(*c.init_from.pooling);
}

std::vector<std::string> incompatible_changes(const nlohmann::json& saved, const nlohmann::json& now) {
  // The schedule's max_steps follows --max-steps, a limit that may grow between runs.
  auto strip = [](nlohmann::json j) {
    j["data"].erase("cache_dir");
    j["data"].erase("test");  // scored at the end only
    j["schedule"].erase("max_steps");
    j["model"].erase("src_vocab_size");  // filled in from the vocabulary
    j["model"].erase("tgt_vocab_size");
    if (!j.contains("precision")) j["precision"] = "fp32";  // runs from before --precision
    if (!j["schedule"].contains("warmup")) j["schedule"]["warmup"] = "fixed";  // written for auto only
    return j;
  };
  const auto a = strip(saved), b = strip(now);
  std::vector<std::string> out;
  for (const char* section :
       {"data", "masking", "batching", "model", "precision", "optimizer", "schedule", "loss", "seed", "init_from"}) {
    if (a.value(section, nlohmann::json()) == b.value(section, nlohmann::json())) continue;
    if (!a[section].is_object()) {
      out.push_back(std::string(section) + " was " + a[section].dump() + ", now " + b[section].dump());
      continue;
    }
    for (const auto& [key, value] : a[section].items())
      if (b[section].value(key, nlohmann::json()) != value)
        out.push_back(std::string(section) + "." + key + " was " + value.dump() + ", now " +
                      b[section].value(key, nlohmann::json()).dump());
  }
  return out;
}

}  // namespace normlab::train
