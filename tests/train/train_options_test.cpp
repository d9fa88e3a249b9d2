// `normlab train`'s declared options (train/train_options.h) against what the command had before
// the table: the flags and config.json keys below are written out by hand from cmd_train.cpp's
// CLI11 declarations and train_config.cpp's to_json of main at f1673cb, not read from the table.
#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../../apps/normlab/option_cli.h"
#include "core/problems.h"
#include "train/train_config.h"
#include "train/train_options.h"

namespace normlab::train {
namespace {

const std::set<std::string> kFlags = {
    "--train", "--valid", "--test", "--max-length-ratio", "--src", "--tgt", "--vocab-size", "--cache-dir",
    "--max-tokens", "--max-sentences", "--update-freq", "--bucket-cap-mb", "--max-pairs", "--block-size", "--init-from",
    "--init-from-update", "--add-encoder-layers", "--add-decoder-layers", "--pretrained-lr-scale", "--optimizer", "--betas", "--eps",
    "--weight-decay", "--momentum", "--nesterov", "--radam-fallback", "--adam-init-v", "--weight-decay-mode",
    "--muon-momentum", "--muon-nesterov", "--muon-ns-steps", "--muon-adjust-lr", "--schedule-free-r",
    "--schedule-free-weight-lr-power", "--fp16-init-scale",
    "--fp16-scale-window", "--min-loss-scale", "--clip-norm", "--label-smoothing", "--ls-formula", "--z-loss", "--lr",
    "--lr-schedule", "--warmup-steps", "--warmup-init-lr", "--min-lr", "--lr-decay-epochs", "--lr-decay-factor",
    "--lr-decay-count", "--tfixup-decay-steps", "--wsd-decay-steps", "--wsd-decay", "--warmup", "--warmup-auto-every", "--warmup-auto-every-ratio", "--warmup-auto-sentences",
    "--warmup-auto-lanczos-steps", "--warmup-auto-catapult", "--warmup-gate", "--max-epochs", "--max-steps",
    "--stop-time-hours", "--out",
    "--log-interval", "--save-interval", "--save-interval-updates", "--validate-interval-updates", "--keep-last",
    "--seed", "--fail-on-divergence", "--mask-prob", "--leave-unmasked-prob", "--random-token-prob",
    "--valid-at-init", "--trace-steps", "--trace-params", "--trace-logits", "--curvature-every",
    "--curvature-sentences", "--curvature-steps", "--curvature-per-block", "--curvature-preconditioner",
    "--eval-bleu", "--best-metric"};

// config.json's leaves, "model" aside (ModelConfig's own to_json).
const std::set<std::string> kKeys = {
    "data.train", "data.valid", "data.test", "data.max_length_ratio", "data.max_pairs", "data.block_size", "data.src", "data.tgt",
    "data.cache_dir", "data.vocab_size", "data.character_coverage", "batching.max_tokens", "batching.max_sentences",
    "batching.update_freq", "precision", "optimizer.optimizer", "optimizer.betas", "optimizer.eps",
    "optimizer.weight_decay", "optimizer.momentum", "optimizer.nesterov", "optimizer.radam_fallback",
    "optimizer.adam_init_v", "optimizer.weight_decay_mode", "optimizer.muon_momentum", "optimizer.muon_nesterov",
    "optimizer.muon_ns_steps", "optimizer.muon_adjust_lr", "optimizer.schedule_free_r",
    "optimizer.schedule_free_weight_lr_power", "schedule.lr_schedule", "schedule.lr",
    "schedule.warmup_steps", "schedule.warmup_init_lr",
    "schedule.min_lr", "schedule.max_steps", "schedule.lr_decay_epochs", "schedule.lr_decay_factor",
    "schedule.lr_decay_count", "schedule.tfixup_decay_steps", "schedule.wsd_decay_steps", "schedule.wsd_decay",
    "loss.label_smoothing", "loss.formula", "loss.z_loss",
    "loss.clip_norm", "seed", "limits.max_epochs", "limits.max_steps", "limits.stop_time_hours", "output.out",
    "output.log_interval", "output.save_interval", "output.save_interval_updates",
    "output.validate_interval_updates", "output.keep_last",
    "output.fail_on_divergence", "output.trace_steps", "output.trace_params", "output.trace_logits",
    "output.valid_at_init", "fp16.init_scale", "fp16.scale_window", "fp16.min_loss_scale", "curvature.every",
    "curvature.sentences", "curvature.steps", "curvature.preconditioner", "distributed.bucket_cap_mb",
    "eval.eval_bleu", "eval.best_metric"};

void leaves(const nlohmann::json& j, const std::string& prefix, std::set<std::string>& out) {
  if (!j.is_object()) {
    out.insert(prefix);
    return;
  }
  for (const auto& [key, value] : j.items())
    if (prefix.empty() && key == "model") continue;
    else leaves(value, prefix.empty() ? key : prefix + "." + key, out);
}

std::set<std::string> leaves(const TrainConfig& c) {
  nlohmann::json j;
  to_json(j, c);
  std::set<std::string> out;
  leaves(j, "", out);
  return out;
}

// The train command's options on a CLI11 app of its own, as main() sets them up.
struct Command {
  CLI::App app;
  TrainConfig config;
  Command() {
    app::add_options(app, train_options(), config);
    app::refuse_empty_numbers(app);
  }
  void parse(std::vector<const char*> args) {
    args.insert(args.begin(), "train");
    app.parse(static_cast<int>(args.size()), args.data());
  }
};

TEST(TrainOptions, EveryFlagOfTheCommandIsDeclared) {
  Command cmd;
  std::set<std::string> flags;
  for (const auto* option : cmd.app.get_options())
    if (option->get_name() != "--help") flags.insert(option->get_name());
  EXPECT_EQ(flags, kFlags);
}

TEST(TrainOptions, ConfigJsonHasTodaysKeys) {
  EXPECT_EQ(leaves(TrainConfig{}), kKeys);
  TrainConfig grown;
  grown.init_from.checkpoint = "a.pt";
  auto with_init = kKeys;
  for (const char* key : {"init_from.checkpoint", "init_from.update", "init_from.add_encoder_layers",
                          "init_from.add_decoder_layers", "init_from.init", "init_from.pretrained_lr_scale"})
    with_init.insert(key);
  EXPECT_EQ(leaves(grown), with_init);
  grown.init_from.classes = 2;  // --num-classes: a classifier on the checkpoint's encoder
  with_init.insert("init_from.num_classes");
  EXPECT_EQ(leaves(grown), with_init);
}

// An encoder-only run's config.json also has the masking section (other kinds' do not).
TEST(TrainOptions, ConfigJsonOfAMaskedLmHasItsMasking) {
  TrainConfig masked;
  masked.model.kind = model::kEncoderOnly;
  auto keys = kKeys;
  for (const char* key : {"masking.mask_prob", "masking.leave_unmasked_prob", "masking.random_token_prob"}) keys.insert(key);
  EXPECT_EQ(leaves(masked), keys);
}

// --warmup auto's keys are written for such a run only (every other run's config.json is as before).
TEST(TrainOptions, ConfigJsonOfAnAutoWarmupRunHasItsSettings) {
  TrainConfig ramp;
  ramp.schedule.warmup = WarmupMode::kAuto;
  auto keys = kKeys;
  for (const char* key : {"schedule.warmup", "schedule.warmup_auto.every", "schedule.warmup_auto.every_ratio", "schedule.warmup_auto.sentences",
                          "schedule.warmup_auto.lanczos_steps", "schedule.warmup_auto.catapult"})
    keys.insert(key);
  EXPECT_EQ(leaves(ramp), keys);
  nlohmann::json j;
  to_json(j, ramp);
  EXPECT_EQ(j["schedule"]["warmup"], "auto");
  ScheduleConfig back;
  from_json(j["schedule"], back);
  EXPECT_EQ(back.warmup, WarmupMode::kAuto);
  EXPECT_EQ(back.auto_warmup, ramp.schedule.auto_warmup);
}

// --warmup-gate's threshold is written when it is set only, and read back.
TEST(TrainOptions, ConfigJsonOfAGatedRunHasItsGate) {
  TrainConfig gated;
  gated.schedule.warmup_steps = 50;
  gated.schedule.warmup_gate = 0.75;
  auto keys = kKeys;
  keys.insert("schedule.warmup_gate");
  EXPECT_EQ(leaves(gated), keys);
  nlohmann::json j;
  to_json(j, gated);
  ScheduleConfig back;
  from_json(j["schedule"], back);
  EXPECT_EQ(back.warmup_gate, 0.75);
  ScheduleConfig plain;
  from_json(nlohmann::json(TrainConfig{}.schedule), plain);
  EXPECT_EQ(plain.warmup_gate, 0.0);
}

TEST(TrainOptions, ConfigJsonValuesKeepTheirForm) {
  nlohmann::json j;
  to_json(j, TrainConfig{});
  EXPECT_EQ(j["optimizer"]["betas"], nlohmann::json::parse("[0.9, 0.98]"));
  EXPECT_EQ(j["optimizer"]["optimizer"], "adamw");
  EXPECT_EQ(j["schedule"]["lr_schedule"], "inverse-sqrt");
  EXPECT_EQ(j["loss"]["formula"], "uniform");
  EXPECT_EQ(j["curvature"]["preconditioner"], "next");
  EXPECT_EQ(j["eval"]["best_metric"], "loss");
  EXPECT_TRUE(j["seed"].is_number_unsigned());
  EXPECT_TRUE(j["limits"]["max_steps"].is_number_integer());
  EXPECT_TRUE(j["schedule"]["lr"].is_number_float());
  EXPECT_EQ(j["output"]["trace_params"], nlohmann::json::array());
}

TEST(TrainOptions, AValueOutOfRangeIsOneProblemNamingItsFlag) {
  const std::vector<std::pair<std::string, std::function<void(TrainConfig&)>>> cases = {
      {"--clip-norm", [](TrainConfig& c) { c.clip_norm = -1; }},
      {"--update-freq", [](TrainConfig& c) { c.update_freq = 0; }},
      {"--log-interval", [](TrainConfig& c) { c.log_interval = 0; }},
      {"--keep-last", [](TrainConfig& c) { c.keep_last = -1; }},
      {"--stop-time-hours", [](TrainConfig& c) { c.stop_time_hours = -1; }},
      {"--bucket-cap-mb", [](TrainConfig& c) { c.bucket_cap_mb = 5000; }},
      {"--eps", [](TrainConfig& c) { c.optimizer.eps = -1; }},
      {"--momentum", [](TrainConfig& c) {
         c.optimizer.kind = OptimizerKind::kSgd;  // the one that reads it
         c.optimizer.momentum = 1;
       }},
      {"--lr-decay-factor", [](TrainConfig& c) { c.schedule.lr_decay_factor = 0; }},
      {"--label-smoothing", [](TrainConfig& c) { c.loss.label_smoothing = 1; }},
      {"--fp16-scale-window", [](TrainConfig& c) { c.loss_scaler.window = -1; }},
      {"--curvature-steps", [](TrainConfig& c) { c.curvature.steps = 0; }},
      {"--trace-steps", [](TrainConfig& c) { c.trace.steps = -1; }},
      {"--pretrained-lr-scale", [](TrainConfig& c) { c.init_from.pretrained_lr_scale = -1; }},
      {"--init-from-update", [](TrainConfig& c) { c.init_from.update = -1; }},
      {"--muon-momentum", [](TrainConfig& c) {
         c.optimizer.kind = OptimizerKind::kMuon;  // the one that reads it
         c.optimizer.muon_momentum = 1;
       }},
      {"--muon-ns-steps", [](TrainConfig& c) {
         c.optimizer.kind = OptimizerKind::kMuon;
         c.optimizer.muon_ns_steps = 100;  // torch.optim.Muon: fewer than 100
       }},
  };
  for (const auto& [flag, set] : cases) {
    TrainConfig c;
    c.train_prefix = c.valid_prefix = c.out = "x";
    c.max_steps = c.schedule.max_steps = 10;
    c.init_from.checkpoint = "a.pt";  // --pretrained-lr-scale needs it
    ASSERT_TRUE(c.problems().empty()) << core::join_problems(c.problems());
    set(c);
    const auto p = c.problems();
    ASSERT_EQ(p.size(), 1u) << flag;
    EXPECT_EQ(p[0].rfind(flag + " must be ", 0), 0u) << p[0];
  }
  TrainConfig c;
  c.clip_norm = -0.5;
  const auto p = c.problems();
  EXPECT_EQ(std::count(p.begin(), p.end(), "--clip-norm must be >= 0, got -0.5"), 1);
}

TEST(TrainOptions, TheCommandLineSetsTheFields) {
  Command cmd;
  cmd.parse({"--lr", "1e-3", "--seed", "7", "--lr-schedule", "cosine", "--betas", "0.8,0.9", "--nesterov",
             "--trace-params", "a,b", "--optimizer", "sgd", "--best-metric", "bleu"});
  EXPECT_EQ(cmd.config.schedule.lr, 1e-3);
  EXPECT_EQ(cmd.config.seed, 7u);
  EXPECT_EQ(cmd.config.schedule.kind, ScheduleKind::kCosine);
  EXPECT_EQ(cmd.config.optimizer.betas[1], 0.9);
  EXPECT_TRUE(cmd.config.optimizer.nesterov);
  EXPECT_EQ(cmd.config.trace.params, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(cmd.config.optimizer.kind, OptimizerKind::kSgd);
  EXPECT_EQ(cmd.config.best_metric, BestMetric::kBleu);
}

// --muon-nesterov is on unless given as --muon-nesterov=false (CLI11's value of a flag); muon's
// other options set their fields.
TEST(TrainOptions, MuonsOptionsFromTheCommandLine) {
  Command plain;
  plain.parse({"--optimizer", "muon"});
  EXPECT_EQ(plain.config.optimizer.kind, OptimizerKind::kMuon);
  EXPECT_TRUE(plain.config.optimizer.muon_nesterov);
  EXPECT_EQ(plain.config.optimizer.muon_adjust_lr, MuonAdjustLr::kMatchRmsAdamW);
  Command set;
  set.parse({"--optimizer", "muon", "--muon-nesterov=false", "--muon-momentum", "0.9", "--muon-ns-steps", "3",
             "--muon-adjust-lr", "original"});
  EXPECT_FALSE(set.config.optimizer.muon_nesterov);
  EXPECT_EQ(set.config.optimizer.muon_momentum, 0.9);
  EXPECT_EQ(set.config.optimizer.muon_ns_steps, 3);
  EXPECT_EQ(set.config.optimizer.muon_adjust_lr, MuonAdjustLr::kOriginal);
  Command on;
  on.parse({"--optimizer", "muon", "--muon-nesterov"});
  EXPECT_TRUE(on.config.optimizer.muon_nesterov);
  nlohmann::json j;
  to_json(j, set.config);
  EXPECT_EQ(j["optimizer"]["muon_adjust_lr"], "original");
  EXPECT_EQ(j["optimizer"]["muon_nesterov"], false);
  EXPECT_TRUE(j["optimizer"]["muon_ns_steps"].is_number_integer());
}

// adamw-schedulefree replaces the schedule: constant only, --warmup-init-lr 0, and the rate it is
// given has no ramp (it warms up itself over optimizer.warmup_steps, the command's copy).
TEST(TrainOptions, ScheduleFreeReplacesTheSchedule) {
  Command cmd;
  cmd.parse({"--optimizer", "adamw-schedulefree", "--schedule-free-r", "1", "--schedule-free-weight-lr-power", "0",
             "--lr-schedule", "constant", "--warmup-steps", "10", "--lr", "0.002"});
  auto& c = cmd.config;
  EXPECT_EQ(c.optimizer.schedule_free_r, 1.0);
  EXPECT_EQ(c.optimizer.schedule_free_weight_lr_power, 0.0);
  const auto has = [&](const std::string& text) {
    const auto p = c.problems();
    return std::any_of(p.begin(), p.end(), [&](const std::string& s) { return s.find(text) != std::string::npos; });
  };
  EXPECT_FALSE(has("schedule"));
  EXPECT_EQ(learning_rate(c.schedule, 1, 1), 0.0);  // --lr-schedule constant's own ramp, from --warmup-init-lr
  EXPECT_EQ(learning_rate(c.rate_schedule(), 1, 1), 0.002);  // the optimiser's: none
  c.schedule.kind = ScheduleKind::kCosine;
  EXPECT_TRUE(has("use --lr-schedule constant, got cosine"));
  c.schedule.kind = ScheduleKind::kConstant;
  c.schedule.warmup_init_lr = 1e-7;
  EXPECT_TRUE(has("--warmup-init-lr: --optimizer adamw-schedulefree's own warm-up"));
  c.optimizer.kind = OptimizerKind::kAdamW;
  EXPECT_TRUE(has("--schedule-free-r and --schedule-free-weight-lr-power apply to --optimizer adamw-schedulefree only"));
  EXPECT_EQ(learning_rate(c.rate_schedule(), 1, 1), 1e-7);  // adamw's rate keeps the ramp
  c.optimizer = OptimizerConfig{};
  c.optimizer.kind = OptimizerKind::kAdamWScheduleFree;
  c.optimizer.betas = {0.0, 0.999};
  EXPECT_TRUE(has("needs beta1 > 0"));
}

TEST(TrainOptions, AnEmptyNumberIsRefusedNamingTheOption) {
  for (const char* flag : {"--eps", "--clip-norm", "--seed", "--max-steps", "--lr"}) {
    Command cmd;
    try {
      cmd.parse({flag, ""});
      ADD_FAILURE() << flag << " '' was accepted";
    } catch (const CLI::ValidationError& e) {
      EXPECT_EQ(std::string(e.what()), std::string(flag) + ": an empty value is not a number");
    }
  }
}

TEST(TrainOptions, AnUnknownNameIsRefusedInOneLine) {
  Command cmd;
  try {
    cmd.parse({"--lr-schedule", "cosin"});
    ADD_FAILURE() << "--lr-schedule cosin was accepted";
  } catch (const CLI::ValidationError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--lr-schedule: unknown value 'cosin', expected "
              "constant|inverse-sqrt|linear|step-decay|t-fixup|cosine|wsd");
  }
}

}  // namespace
}  // namespace normlab::train
