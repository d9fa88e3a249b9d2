#include "analysis/warmup_gate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/file_io.h"
#include "core/option_table.h"
#include "core/problems.h"
#include "recipe/results.h"
#include "train/trainer.h"

namespace normlab::analysis {
namespace {

namespace fs = std::filesystem;

std::string gate_file(const train::TrainConfig& c) { return (fs::path(c.out) / "gate.json").string(); }
std::string probe_dir(const train::TrainConfig& c) { return (fs::path(c.out) / "probe").string(); }

// The run without warm-up: what the probe trains (for its first updates) and the "none" decision.
train::TrainConfig without_warmup(train::TrainConfig c) {
  c.schedule.warmup = train::WarmupMode::kFixed;
  c.schedule.warmup_steps = 0;
  c.schedule.auto_warmup = train::AutoWarmupSettings{};
  c.schedule.warmup_gate = 0.0;
  return c;
}

// The probe's losses from its metrics.jsonl (one record per update: --log-interval 1). Read from the
// file rather than watched, so that a probe resumed after a kill gives the same evidence.
GateEvidence read_probe(const std::string& dir, int64_t updates) {
  GateEvidence e;
  e.probe_updates = updates;
  e.loss_first = e.loss_last = std::numeric_limits<double>::quiet_NaN();
  const auto path = (fs::path(dir) / "metrics.jsonl").string();
  for (const auto& r : recipe::read_metrics(path)) {
    e.diverged = e.diverged || r.diverged;
    if (r.validation || std::isnan(r.grad_norm)) continue;  // an update record has a gradient norm
    if (r.step == 1) e.loss_first = r.loss;
    if (r.step == updates) e.loss_last = r.loss;
  }
  if (!e.diverged && !(std::isfinite(e.loss_first) && std::isfinite(e.loss_last)))
    throw std::runtime_error("--warmup-gate: " + path + " has no record of update 1 or " +
                             std::to_string(updates));
  return e;
}

nlohmann::json to_json(const GateEvidence& e, double threshold, bool ramp, double seconds) {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"probe_updates", e.probe_updates},
          {"loss_update_1", number(e.loss_first)},
          {"loss_last", number(e.loss_last)},
          {"loss_drop", number(e.loss_first - e.loss_last)},
          {"diverged", e.diverged},
          {"threshold", threshold},
          {"decision", ramp ? "ramp" : "none"},
          {"probe", "probe"},
          {"seconds", seconds}};
}

std::string evidence_line(const GateEvidence& e) {
  if (e.diverged) return "the probe diverged";
  return "the training loss fell " + std::to_string(e.loss_first - e.loss_last) + " nats over the " +
         std::to_string(e.probe_updates) + "-update probe";
}

// Rank 0's `value` on every rank (one process: `value`).
bool rank0s(core::ProcessGroup& group, bool value) {
  auto flag = torch::full({1}, value ? 1.0 : 0.0, torch::kFloat64);
  group.broadcast(flag, 0);
  return flag.item<double>() != 0.0;
}

// Trains the probe into RUN_DIR/probe (resuming one that was interrupted; with several ranks
// data-parallel, as the run), decides on rank 0 from its records, writes gate.json there.
bool probe_and_decide(const train::TrainConfig& config, const c10::Device& device, core::ProcessGroup& group) {
  const auto start = std::chrono::steady_clock::now();
  auto probe = without_warmup(config);
  probe.out = probe_dir(config);
  probe.max_steps = gate_probe_updates(config.max_steps);  // the schedule keeps the run's max_steps
  probe.log_interval = 1;
  probe.eval_bleu = false;
  probe.fail_on_divergence = false;
  train::train(probe, {}, device, group);
  if (!group.is_main()) return false;  // rank 0 decides (gated_config passes its decision on)
  const auto evidence = read_probe(probe.out, probe.max_steps);
  const bool ramp = gate_ramps(evidence, config.schedule.warmup_gate);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  core::write_file_atomic(gate_file(config), to_json(evidence, config.schedule.warmup_gate, ramp, seconds).dump(1) + "\n");
  std::cerr << "warm-up gate: " << evidence_line(evidence) << " (--warmup-gate " << config.schedule.warmup_gate
            << "): " << (ramp ? "the warm-up" : "no warm-up") << "; " << gate_file(config) << "\n";
  return ramp;
}

// RUN_DIR/gate.json as written by probe_and_decide, checked against this run's threshold.
struct GateRecord {
  GateEvidence evidence;
  bool ramp = false;
};

GateRecord read_gate(const train::TrainConfig& config) {
  const auto path = gate_file(config);
  GateRecord r;
  double threshold = 0.0;
  std::string decision;
  try {
    std::ifstream in(path);
    const auto j = nlohmann::json::parse(in);
    threshold = j.at("threshold").get<double>();
    decision = j.at("decision").get<std::string>();
    auto number = [&](const char* key) {
      return j.at(key).is_null() ? std::numeric_limits<double>::quiet_NaN() : j.at(key).get<double>();
    };
    r.evidence = {j.at("probe_updates").get<int64_t>(), number("loss_update_1"), number("loss_last"),
                  j.at("diverged").get<bool>()};
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(path + ": not a gate decision (" + e.what() + ")");
  }
  if (threshold != config.schedule.warmup_gate)
    throw std::invalid_argument(path + " was decided with --warmup-gate " + core::format_number(threshold) +
                                "; this run gives a different one");
  if (decision != "ramp" && decision != "none")
    throw std::invalid_argument(path + ": decision must be ramp or none, got " + decision);
  r.ramp = decision == "ramp";
  return r;
}

// A decision already taken (a resumed run, or one after --warmup-gate-only).
bool recorded_decision(const train::TrainConfig& config) { return read_gate(config).ramp; }

}  // namespace

int64_t gate_probe_updates(int64_t planned) {
  return std::max<int64_t>(2, std::llround(kGateProbeShare * static_cast<double>(planned)));
}

bool gate_ramps(const GateEvidence& e, double threshold) {
  return e.diverged || !(e.loss_first - e.loss_last <= threshold);  // a NaN drop ramps
}

train::TrainConfig gated_config(const train::TrainConfig& config, const c10::Device& device,
                                core::ProcessGroup& group) {
  if (config.schedule.warmup_gate <= 0.0) return config;
  core::throw_if_problems(config.problems());  // before the probe trains (the run itself checks again)
  // Rank 0 reads the folder and decides; every rank trains the probe or none, and takes rank 0's
  // decision, so that all train one configuration (docs/distributed.md: rank 0 writes the folder).
  const bool decided = rank0s(group, group.is_main() && fs::exists(gate_file(config)));
  bool ramp = false;
  if (!decided)
    ramp = probe_and_decide(config, device, group);
  else if (group.is_main())
    ramp = recorded_decision(config);
  return rank0s(group, ramp) ? config : without_warmup(config);
}

std::string gate_advice(const train::TrainConfig& config) {
  const auto r = read_gate(config);
  const auto& s = config.schedule;
  const std::string warmup = s.warmup == train::WarmupMode::kAuto
                                 ? "--warmup auto (its ramp, chosen while training; docs/warmup.md)"
                                 : "a linear warm-up over " + std::to_string(s.warmup_steps) +
                                       " updates (--warmup-steps " + std::to_string(s.warmup_steps) + ")";
  return std::string("warm-up: ") + (r.ramp ? "needed" : "not needed") + " (" + evidence_line(r.evidence) +
         (r.evidence.diverged ? ";" : r.ramp ? ", more than" : ", not more than") + " --warmup-gate " +
         core::format_number(s.warmup_gate) + ")\n" + "train with: " + (r.ramp ? warmup : "no warm-up") +
         "\nevidence: " + gate_file(config) + ", the probe's records " + probe_dir(config) +
         "/metrics.jsonl\nnext: normlab train with these options and --warmup-gate, without --warmup-gate-only, "
         "trains " + config.out + " with this decision, from the initialisation\n";
}

}  // namespace normlab::analysis
