#include "train/schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/problems.h"
#include "train/train_options.h"

namespace normlab::train {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Linear ramp over updates n < W from warmup_init_lr to `target`, written as fairseq's
// inverse_sqrt does it: init + n * lr_step with lr_step = (target - init) / W.
double ramp(const ScheduleConfig& c, int64_t n, double target) {
  const double lr_step = (target - c.warmup_init_lr) / static_cast<double>(c.warmup_steps);
  return c.warmup_init_lr + static_cast<double>(n) * lr_step;
}

// Step decay's multiplier in `epoch` (1-based): factor^k, k = floor(epoch / K), at most
// lr_decay_count decays when that is positive. K = 8: epochs 1..7 -> 1, 8..15 -> factor.
double epoch_factor(const ScheduleConfig& c, int64_t epoch) {
  int64_t k = epoch / c.lr_decay_epochs;
  if (c.lr_decay_count > 0 && k > c.lr_decay_count) k = c.lr_decay_count;
  return std::pow(c.lr_decay_factor, static_cast<double>(k));
}

// Linear and cosine after warm-up: fraction of the decay done at n, in [0, 1].
double decay_progress(const ScheduleConfig& c, int64_t n) {
  const double p = static_cast<double>(n - c.warmup_steps) /
                   static_cast<double>(c.max_steps - c.warmup_steps);
  return p > 1.0 ? 1.0 : p;
}

// WSD's cool-down sits in [max_steps - D, max_steps), after the warm-up; its options are wsd's only.
std::vector<std::string> wsd_problems(const ScheduleConfig& c) {
  std::vector<std::string> out;
  if (c.kind != ScheduleKind::kWsd) {
    if (c.wsd_decay_steps != 0 || c.wsd_decay != WsdDecay::kOneMinusSqrt)
      out.push_back("--wsd-decay-steps and --wsd-decay apply to --lr-schedule wsd only, not " + to_string(c.kind));
    return out;
  }
  const std::string D = std::to_string(c.wsd_decay_steps), M = std::to_string(c.max_steps);
  if (c.max_steps <= 0)
    out.push_back("--lr-schedule wsd needs --max-steps: its cool-down is the last --wsd-decay-steps updates "
                  "before it (--max-epochs alone does not fix where training ends)");
  if (c.wsd_decay_steps == 0)  // a negative one: the option's range says so
    out.push_back("--lr-schedule wsd needs --wsd-decay-steps >= 1, the cool-down's updates, got " + D +
                  (c.max_steps >= 5
                       ? " (Hägele et al. 2024: 20% of --max-steps, here " + std::to_string(c.max_steps / 5) + ")"
                       : std::string()));
  else if (c.wsd_decay_steps > 0 && c.max_steps > 0 && c.warmup_steps >= 0 &&
           c.wsd_decay_steps > c.max_steps - c.warmup_steps)
    out.push_back("--wsd-decay-steps " + D + " exceeds --max-steps " + M + " minus --warmup-steps " +
                  std::to_string(c.warmup_steps) + " (" + std::to_string(c.max_steps - c.warmup_steps) +
                  "): the cool-down would begin inside the warm-up");
  return out;
}

// --warmup-gate: a warm-up to gate, a run length to take 2% of, and a no-warm-up run that exists.
std::vector<std::string> gate_problems(const ScheduleConfig& c) {
  std::vector<std::string> out;
  if (!(c.warmup_gate > 0.0)) return out;
  if (c.warmup != WarmupMode::kAuto && c.warmup_steps == 0)
    out.push_back("--warmup-gate: no warm-up to gate (give --warmup-steps N or --warmup auto)");
  if (c.max_steps <= 0) out.push_back("--warmup-gate needs --max-steps: its probe is 2% of the planned updates");
  if (c.kind == ScheduleKind::kInverseSqrt)
    out.push_back("--warmup-gate: --lr-schedule inverse-sqrt has no form without warm-up; use constant, linear, "
                  "cosine, wsd, step-decay or t-fixup");
  return out;
}

}  // namespace

std::string to_string(ScheduleKind k) { return schedule_kinds().name(k); }

ScheduleKind parse_schedule_kind(const std::string& s, const std::string& option) {
  return schedule_kinds().parse(s, option);
}

std::vector<std::string> schedule_kind_names() { return schedule_kinds().names(); }

std::string to_string(WsdDecay d) { return wsd_decays().name(d); }

std::string to_string(WarmupMode m) { return warmup_modes().name(m); }

bool AutoWarmupSettings::operator==(const AutoWarmupSettings& o) const {
  return every == o.every && every_ratio == o.every_ratio && sentences == o.sentences &&
         lanczos_steps == o.lanczos_steps && catapult == o.catapult;
}

int64_t AutoWarmupSettings::updates_between(int64_t planned) const {
  if (every > 0) return every;
  return std::max<int64_t>(1, std::llround(every_ratio * static_cast<double>(planned)));
}

WsdDecay parse_wsd_decay(const std::string& s, const std::string& option) { return wsd_decays().parse(s, option); }

// The ranges of single options come from schedule_options(); here what relates two of them.
std::vector<std::string> ScheduleConfig::problems() const {
  std::vector<std::string> out = schedule_options().problems(*this);
  if (!(warmup_init_lr >= 0.0 && warmup_init_lr <= lr))
    out.push_back("--warmup-init-lr must be in [0, --lr " + core::format_number(lr) + "], got " +
                  core::format_number(warmup_init_lr));
  if (!(min_lr >= 0.0 && min_lr <= lr))
    out.push_back("--min-lr must be in [0, --lr " + core::format_number(lr) + "], got " + core::format_number(min_lr));
  if ((kind == ScheduleKind::kLinear || kind == ScheduleKind::kCosine) &&
      max_steps <= warmup_steps)
    out.push_back("--lr-schedule " + to_string(kind) + " decays until --max-steps, which must "
                  "exceed --warmup-steps " + std::to_string(warmup_steps) + ", got " +
                  std::to_string(max_steps));
  if (kind == ScheduleKind::kTFixup && warmup_steps != 0)
    out.push_back("--lr-schedule t-fixup has no warm-up (Huang 2020): set --warmup-steps 0, got " +
                  std::to_string(warmup_steps));
  for (auto& p : wsd_problems(*this)) out.push_back(std::move(p));
  for (auto& p : gate_problems(*this)) out.push_back(std::move(p));
  for (auto& p : auto_warmup_options().problems(auto_warmup)) out.push_back(std::move(p));
  if (warmup == WarmupMode::kAuto) {
    if (warmup_steps != 0)
      out.push_back("--warmup auto chooses the ramp itself: leave out --warmup-steps (or give 0), got " +
                    std::to_string(warmup_steps));
    if (kind == ScheduleKind::kInverseSqrt)
      out.push_back("--warmup auto: --lr-schedule inverse-sqrt decays from --warmup-steps' end; use constant, "
                    "linear, cosine, wsd, step-decay or t-fixup");
  } else if (!(auto_warmup == AutoWarmupSettings{})) {
    out.push_back("--warmup-auto-* options need --warmup auto");
  }
  return out;
}

void ScheduleConfig::validate() const {
  core::throw_if_problems(problems());
}

double learning_rate(const ScheduleConfig& c, int64_t update, int64_t epoch) {
  if (update < 1) throw std::invalid_argument("learning_rate: update is 1-based, got " +
                                              std::to_string(update));
  if (epoch < 1) throw std::invalid_argument("learning_rate: epoch is 1-based, got " +
                                             std::to_string(epoch));
  const int64_t n = update - 1;  // updates done before this one (fairseq's num_updates)
  const int64_t W = c.warmup_steps;
  switch (c.kind) {
    case ScheduleKind::kConstant: return n < W ? ramp(c, n, c.lr) : c.lr;
    case ScheduleKind::kInverseSqrt:
      // fairseq inverse_square_root_schedule.step_update(n). fairseq divides by W = 0; here
      // W = 0 decays as W = 1 would, without W = 1's first update at warmup_init_lr.
      if (n < W) return ramp(c, n, c.lr);
      if (W == 0) return n == 0 ? c.lr : c.lr * std::pow(static_cast<double>(n), -0.5);
      return c.lr * std::sqrt(static_cast<double>(W)) * std::pow(static_cast<double>(n), -0.5);
    case ScheduleKind::kLinear:
      if (n < W) return ramp(c, n, c.lr);
      return c.min_lr + (c.lr - c.min_lr) * (1.0 - decay_progress(c, n));
    case ScheduleKind::kStepDecay: {
      const double target = c.lr * epoch_factor(c, epoch);
      return n < W ? ramp(c, n, target) : target;
    }
    case ScheduleKind::kTFixup: {
      // layer6ai-labs/T-Fixup inverse_sqrt_nowarmup: lr * (P / (P + num_updates))^0.5.
      const auto P = static_cast<double>(c.tfixup_decay_steps);
      return c.lr * std::pow(P / (P + static_cast<double>(n)), 0.5);
    }
    case ScheduleKind::kCosine:
      if (n < W) return ramp(c, n, c.lr);
      return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(kPi * decay_progress(c, n)));
    case ScheduleKind::kWsd: {
      // Hägele et al. 2024 (arXiv 2405.18392; their wsd_schedule, epfml/schedules-and-scaling):
      // lr until the cool-down's first update n = M - D, then m + (lr - m) f((n - (M - D)) / D),
      // f(x) = 1 - x or 1 - sqrt(x); m from n = M on. The first cool-down update still runs at lr.
      if (n < W) return ramp(c, n, c.lr);
      const int64_t start = c.max_steps - c.wsd_decay_steps;
      if (n < start) return c.lr;
      if (n >= c.max_steps) return c.min_lr;
      const double x = static_cast<double>(n - start) / static_cast<double>(c.wsd_decay_steps);
      const double f = c.wsd_decay == WsdDecay::kLinear ? 1.0 - x : 1.0 - std::sqrt(x);
      return c.min_lr + (c.lr - c.min_lr) * f;
    }
  }
  throw std::logic_error("unhandled ScheduleKind");
}

// --warmup and its settings are written only for --warmup auto: the files of every other run
// stay as they were (a missing "warmup" reads as fixed).
void to_json(nlohmann::json& j, const ScheduleConfig& c) {
  j = schedule_options().to_json(c);
  if (c.warmup_gate > 0.0) j["warmup_gate"] = c.warmup_gate;  // runs without a gate: as before
  if (c.warmup != WarmupMode::kAuto) return;
  j["warmup"] = to_string(c.warmup);
  j["warmup_auto"] = {{"every", c.auto_warmup.every},
                      {"every_ratio", c.auto_warmup.every_ratio},
                      {"sentences", c.auto_warmup.sentences},
                      {"lanczos_steps", c.auto_warmup.lanczos_steps},
                      {"catapult", c.auto_warmup.catapult}};
}

void from_json(const nlohmann::json& j, ScheduleConfig& c) {
  c.kind = parse_schedule_kind(j.at("lr_schedule").get<std::string>(), "lr_schedule");
  j.at("lr").get_to(c.lr);
  j.at("warmup_steps").get_to(c.warmup_steps);
  j.at("warmup_init_lr").get_to(c.warmup_init_lr);
  j.at("min_lr").get_to(c.min_lr);
  j.at("max_steps").get_to(c.max_steps);
  j.at("lr_decay_epochs").get_to(c.lr_decay_epochs);
  j.at("lr_decay_factor").get_to(c.lr_decay_factor);
  j.at("lr_decay_count").get_to(c.lr_decay_count);
  j.at("tfixup_decay_steps").get_to(c.tfixup_decay_steps);
  // Runs from before wsd: its defaults.
  c.wsd_decay_steps = j.value("wsd_decay_steps", int64_t{0});
  c.wsd_decay = parse_wsd_decay(j.value("wsd_decay", std::string("1-sqrt")), "wsd_decay");
  c.warmup = warmup_modes().parse(j.value("warmup", std::string("fixed")), "warmup");
  c.warmup_gate = j.value("warmup_gate", 0.0);
  if (const auto a = j.find("warmup_auto"); a != j.end()) {
    a->at("every").get_to(c.auto_warmup.every);
    // Runs from before every_ratio measured every `every` (10 by default) updates.
    c.auto_warmup.every_ratio = a->value("every_ratio", c.auto_warmup.every_ratio);
    a->at("sentences").get_to(c.auto_warmup.sentences);
    a->at("lanczos_steps").get_to(c.auto_warmup.lanczos_steps);
    a->at("catapult").get_to(c.auto_warmup.catapult);
  }
}

}  // namespace normlab::train
