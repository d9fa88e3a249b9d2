#include "train/train_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace normlab::train {

BestMetric parse_best_metric(const std::string& s) {
  if (s == "loss") return BestMetric::kLoss;
  if (s == "bleu") return BestMetric::kBleu;
  throw std::invalid_argument("--best-metric: unknown value '" + s + "', expected loss|bleu");
}

std::vector<std::string> InitFromConfig::problems() const {
  std::vector<std::string> out = model::added_count_problems(added);
  if (checkpoint.empty()) {
    if (added.encoder > 0 || added.decoder > 0)
      out.push_back("--add-encoder-layers/--add-decoder-layers add layers to a trained model: give --init-from CKPT");
    if (pretrained_lr_scale != 1.0) out.push_back("--pretrained-lr-scale needs --init-from CKPT");
    if (added.init != model::AddedLayerInit::kXavier)
      out.push_back("--init " + model::to_string(added.init) +
                    " initialises layers added to a trained model: give --init-from CKPT and --add-encoder-layers "
                    "or --add-decoder-layers");
  }
  if (!(pretrained_lr_scale >= 0 && std::isfinite(pretrained_lr_scale)))
    out.push_back("--pretrained-lr-scale must be finite and >= 0, got " + std::to_string(pretrained_lr_scale));
  return out;
}

std::vector<std::string> TrainConfig::problems() const {
  std::vector<std::string> out;
  if (train_prefix.empty()) out.push_back("--train is required");
  if (valid_prefix.empty()) out.push_back("--valid is required");
  if (out.empty() && this->out.empty()) out.push_back("--out is required");
  if (update_freq < 1) out.push_back("--update-freq must be >= 1, got " + std::to_string(update_freq));
  if (!(bucket_cap_mb > 0 && bucket_cap_mb <= 4096))
    out.push_back("--bucket-cap-mb must be in (0, 4096], got " + std::to_string(bucket_cap_mb));
  if (max_epochs < 0 || max_steps < 0) out.push_back("--max-epochs and --max-steps must be >= 0");
  if (max_epochs == 0 && max_steps == 0) out.push_back("set --max-epochs or --max-steps");
  if (!(stop_time_hours >= 0)) out.push_back("--stop-time-hours must be >= 0");
  if (log_interval < 1) out.push_back("--log-interval must be >= 1, got " + std::to_string(log_interval));
  if (save_interval < 1) out.push_back("--save-interval must be >= 1, got " + std::to_string(save_interval));
  if (save_interval_updates < 0) out.push_back("--save-interval-updates must be >= 0");
  if (keep_last < 0) out.push_back("--keep-last must be >= 0");
  if (clip_norm < 0) out.push_back("--clip-norm must be >= 0");
  for (auto& p : loss.problems()) out.push_back(p);
  for (auto& p : vocab.validate()) out.push_back(p);
  for (auto& p : batching.validate()) out.push_back(p);
  for (auto& p : optimizer.problems()) out.push_back(p);
  for (auto& p : schedule.problems()) out.push_back(p);
  for (auto& p : trace.problems()) out.push_back(p);
  for (auto& p : curvature.problems()) out.push_back(p);
  for (auto& p : loss_scaler.problems()) out.push_back(p);
  if (best_metric == BestMetric::kBleu && !eval_bleu) out.push_back("--best-metric bleu needs --eval-bleu");
  if (max_pairs < 0) out.push_back("--max-pairs must be >= 0, got " + std::to_string(max_pairs));
  for (auto& p : init_from.problems()) out.push_back(p);
  if (init_from.pretrained_lr_scale != 1.0 && curvature.every > 0)
    out.push_back("--curvature-every measures one lr for every parameter: not with --pretrained-lr-scale");
  return out;
}

void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = {{"data",
        {{"train", c.train_prefix},
         {"valid", c.valid_prefix},
         {"test", c.test_prefix},
         {"max_length_ratio", c.max_length_ratio},
         {"max_pairs", c.max_pairs},
         {"src", c.src_lang},
         {"tgt", c.tgt_lang},
         {"cache_dir", c.cache_dir},
         {"vocab_size", c.vocab.vocab_size},
         {"character_coverage", c.vocab.character_coverage}}},
       {"batching",
        {{"max_tokens", c.batching.max_tokens},
         {"max_sentences", c.batching.max_sentences},
         {"update_freq", c.update_freq}}},
       {"model", c.model},
       {"precision", model::to_string(c.precision)},
       {"optimizer", c.optimizer},
       {"schedule", c.schedule},
       {"loss",
        {{"label_smoothing", c.loss.label_smoothing},
         {"formula", to_string(c.loss.formula)},
         {"z_loss", c.loss.z_loss},
         {"clip_norm", c.clip_norm}}},
       {"seed", c.seed},
       {"limits", {{"max_epochs", c.max_epochs}, {"max_steps", c.max_steps}, {"stop_time_hours", c.stop_time_hours}}},
       {"output",
        {{"out", c.out},
         {"log_interval", c.log_interval},
         {"save_interval", c.save_interval},
         {"save_interval_updates", c.save_interval_updates},
         {"keep_last", c.keep_last},
         {"fail_on_divergence", c.fail_on_divergence},
         {"trace_steps", c.trace.steps},
         {"trace_params", c.trace.params},
         {"trace_logits", c.trace.logits},
         {"valid_at_init", c.valid_at_init}}},
       {"fp16",
        {{"init_scale", c.loss_scaler.init_scale},
         {"scale_window", c.loss_scaler.window},
         {"min_loss_scale", c.loss_scaler.min_scale}}},
       {"curvature",
        {{"every", c.curvature.every},
         {"sentences", c.curvature.sentences},
         {"steps", c.curvature.steps},
         {"preconditioner", to_string(c.curvature.preconditioner)}}},
       {"distributed", {{"bucket_cap_mb", c.bucket_cap_mb}}},
       {"eval",
        {{"eval_bleu", c.eval_bleu},
         {"best_metric", c.best_metric == BestMetric::kBleu ? "bleu" : "loss"}}}};
  if (!c.init_from.checkpoint.empty())
    j["init_from"] = {{"checkpoint", c.init_from.checkpoint},
                      {"add_encoder_layers", c.init_from.added.encoder},
                      {"add_decoder_layers", c.init_from.added.decoder},
                      {"init", model::to_string(c.init_from.added.init)},
                      {"pretrained_lr_scale", c.init_from.pretrained_lr_scale}};
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
    return j;
  };
  const auto a = strip(saved), b = strip(now);
  std::vector<std::string> out;
  for (const char* section :
       {"data", "batching", "model", "precision", "optimizer", "schedule", "loss", "seed", "init_from"}) {
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
