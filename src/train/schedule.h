// Learning-rate schedules of the papers (docs/optimisers.md), as one pure function of the
// update and epoch numbers, so that a resumed run needs no schedule state.
// Torch-free so that the CLI can include it cheaply.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace normlab::train {

enum class ScheduleKind {
  kConstant,     // lr (after the optional warm-up)
  kInverseSqrt,  // fairseq's inverse_sqrt: linear warm-up, then lr * sqrt(W) / sqrt(n)
  kLinear,       // linear warm-up, then linear decay to min_lr at max_steps
  kStepDecay,    // lr * factor at epochs K, 2K, ... (Xiong 2020: 0.1 at epoch 8, once)
  kTFixup,       // T-Fixup's no-warm-up decay lr * sqrt(P / (P + n)) (Huang 2020)
  kCosine,       // linear warm-up, then half a cosine from lr down to min_lr at max_steps
  kWsd,          // warm-up, stable, decay: linear warm-up, lr, then a cool-down to min_lr over the
                 // last wsd_decay_steps before max_steps (Hu et al. 2024; Hägele et al. 2024)
};
// WSD's cool-down shape f(x), x in [0, 1) the share of the cool-down done: lr_n = m + (lr - m) f(x).
enum class WsdDecay {
  kLinear,        // 1 - x
  kOneMinusSqrt,  // 1 - sqrt(x): Hägele et al. 2024's (1-sqrt), better than linear there
};
std::string to_string(WsdDecay d);
// How the rate reaches --lr: --warmup-steps' linear ramp, or a ramp chosen while training from the
// measured preconditioned sharpness (analysis/auto_warmup.h; docs/warmup.md).
enum class WarmupMode { kFixed, kAuto };
std::string to_string(WarmupMode m);

// --warmup auto's measurements (docs/warmup.md): lambda_1(P^-1 H) on a probe set at update 0 and
// every `every` updates of the ramp; the factor on the rate at most doubles per `every` updates.
// `every` is a share of the planned updates unless given in updates (as Hugging Face's
// warmup_steps overrides its warmup_ratio).
struct AutoWarmupSettings {
  int64_t every = 0;           // --warmup-auto-every: updates between measurements; 0: every_ratio's
  double every_ratio = 0.05;   // --warmup-auto-every-ratio: the same as a share of the planned updates
  int64_t sentences = 8;       // --warmup-auto-sentences: the probe set, the first N validation pairs
  int64_t lanczos_steps = 4;   // --warmup-auto-lanczos-steps: per measurement, warm-started
  double catapult = 1.2;       // --warmup-auto-catapult: a training loss above this x its running mean
                               // halves the factor (a loss catapult, Kalra & Barkeshli 2024)
  bool operator==(const AutoWarmupSettings& o) const;
  // Updates between measurements in a run of `planned` updates: every, or every_ratio x planned
  // rounded (at least 1).
  int64_t updates_between(int64_t planned) const;
};
WsdDecay parse_wsd_decay(const std::string& s, const std::string& option = "--wsd-decay");
std::string to_string(ScheduleKind k);
// "constant|inverse-sqrt|linear|step-decay|t-fixup|cosine|wsd"; throws std::invalid_argument naming
// `option`, the value and the choices.
ScheduleKind parse_schedule_kind(const std::string& s, const std::string& option = "--lr-schedule");
std::vector<std::string> schedule_kind_names();

// Update numbers: `update` is the 1-based number of the optimiser step the rate is for;
// n = update - 1 is the number of updates already done (fairseq's num_updates: its trainer
// calls step_update(0) before the first step, so the first update uses n = 0).
struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::kInverseSqrt;  // --lr-schedule
  double lr = 5e-4;               // --lr: peak (after warm-up) or initial rate (REFERENCE §2)
  int64_t warmup_steps = 4000;    // --warmup-steps W: linear ramp over updates n < W; 0 = none
                                  // (fairseq's default 4000; t-fixup needs 0)
  double warmup_init_lr = 0.0;    // --warmup-init-lr: rate at n = 0 of the ramp (papers: 1e-7)
  double min_lr = 0.0;            // --min-lr: end rate of linear, cosine and wsd at max_steps
  int64_t max_steps = 0;          // --max-steps: where linear, cosine and wsd reach min_lr (> W)
  int64_t lr_decay_epochs = 8;    // --lr-decay-epochs K: step-decay multiplies at epochs K, 2K..
  double lr_decay_factor = 0.1;   // --lr-decay-factor: step-decay's multiplier per decay
  int64_t lr_decay_count = 0;     // --lr-decay-count: most step decays, 0 = no limit (Xiong: 1)
  int64_t tfixup_decay_steps = 4000;  // --tfixup-decay-steps P of t-fixup (authors' 4000)
  int64_t wsd_decay_steps = 0;    // --wsd-decay-steps D: wsd's cool-down, updates n in
                                  // [max_steps - D, max_steps); wsd needs 1 <= D <= max_steps - W
  WsdDecay wsd_decay = WsdDecay::kOneMinusSqrt;  // --wsd-decay linear|1-sqrt
  WarmupMode warmup = WarmupMode::kFixed;  // --warmup fixed|auto; auto: warmup_steps must be 0 and
                                           // learning_rate() is the target that the ramp scales
  AutoWarmupSettings auto_warmup;          // --warmup-auto-*; in config.json only with --warmup auto
  double warmup_gate = 0.0;                // --warmup-gate G: the warm-up (fixed or auto) only when a 2%
                                           // probe without it lost more than G nats per token
                                           // (analysis/warmup_gate.h); 0: always; in config.json when > 0

  // Every problem at once, one message each naming the option (empty when valid).
  std::vector<std::string> problems() const;
  // Throws std::invalid_argument joining problems() when there are any.
  void validate() const;
};

// The rate for optimiser step `update` (1-based) in epoch `epoch` (1-based; read only by
// step-decay), for a configuration without problems(). Throws std::invalid_argument when
// update or epoch is below 1.
double learning_rate(const ScheduleConfig& c, int64_t update, int64_t epoch);

void to_json(nlohmann::json& j, const ScheduleConfig& c);
void from_json(const nlohmann::json& j, ScheduleConfig& c);

}  // namespace normlab::train
