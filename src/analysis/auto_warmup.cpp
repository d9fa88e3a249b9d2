#include "analysis/auto_warmup.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "analysis/curvature.h"
#include "analysis/hvp.h"
#include "analysis/lanczos.h"
#include "model/width.h"
#include "train/run_dir.h"
#include "train/schedule.h"

namespace normlab::analysis {

namespace {
constexpr double kReached = 1e-9;  // a factor this close to 1 has reached the target
}  // namespace

std::string ramp_start(RampState& s, double stable, int64_t every) {
  s.factor = std::min(1.0, stable);
  s.growth = std::pow(2.0, 1.0 / static_cast<double>(every));
  s.done = s.factor >= 1.0;
  return s.done ? "done" : "start";
}

std::string ramp_after_update(RampState& s, double loss, double stable, int64_t every, double catapult, bool late) {
  if (s.done) return "";
  const double mean = s.loss_mean;
  s.loss_mean = mean == 0.0 ? loss : 0.9 * mean + 0.1 * loss;
  std::string decision;
  if (mean > 0.0 && !(loss <= catapult * mean)) {  // a NaN loss counts as a catapult
    s.factor /= 2.0;
    s.growth = 1.0;
    return "catapult";
  }
  if (std::isfinite(stable)) {
    const double doubling = std::pow(2.0, 1.0 / static_cast<double>(every));
    if (s.factor > stable && !late) {
      s.growth = 1.0;
      decision = "hold";
    } else if (s.factor > stable) {
      s.growth = doubling;
      decision = "deadline";
    } else {
      const double goal = std::min({1.0, stable, 2.0 * s.factor});
      s.growth = std::pow(goal / s.factor, 1.0 / static_cast<double>(every));
      decision = "grow";
    }
  }
  s.factor = std::min(1.0, s.factor * s.growth);
  // A ramp planned to reach 1 lands a rounding error short of it: (1/f)^(1/every) to the every-th.
  if (s.factor >= 1.0 - kReached) {
    s.factor = 1.0;
    s.done = true;
    return "done";
  }
  return decision;
}

namespace {

constexpr const char* kStateKey = "auto_warmup/state";  // factor, growth, loss_mean, done
constexpr const char* kStartKey = "auto_warmup/start";  // the last top Ritz vector (warm start)
constexpr uint64_t kStartSeed = 20240613;               // the first measurement's Rademacher vector

class AutoWarmup final : public train::TrainCallback {
 public:
  explicit AutoWarmup(const train::TrainConfig& config) : settings_(config.schedule.auto_warmup) {}

  // The rule needs one rate for every parameter and the optimiser's stability threshold.
  std::vector<std::string> problems(const train::TrainConfig& config, const core::ProcessGroup&) const override {
    std::vector<std::string> out;
    if (const auto problem = curvature_problem(config.optimizer)) out.push_back("--warmup auto: " + *problem);
    if (config.init_from.pretrained_lr_scale != 1.0)
      out.push_back("--warmup auto measures one rate for every parameter: not with --pretrained-lr-scale");
    if (auto p = model::one_rate_problem(config.model, "--warmup auto")) out.push_back(*p);
    return out;
  }

  void train_begins(const train::RunContext& run) override {
    run_ = &run;
    constant_ = stability_threshold(run.config.optimizer, 1.0);
    preconditioned_ = preconditioned(run.config.optimizer);
    probe_ = probe_batches(run, settings_.sentences);
    every_ = settings_.updates_between(run.planned_updates);
    file_ = (std::filesystem::path(run.dir) / "warmup.jsonl").string();
    if (run.writer)
      train::keep_records(file_, [&](const nlohmann::json& j) {
        return run.update > 0 && j.value("step", int64_t{0}) <= run.update;
      });
    if (run.update > 0) {
      load(run.saved);
      return;
    }
    const auto m = measure(run.optimizer, 1, run.epoch);
    write(0, ramp_start(state_, m.stable, every_), m, 0.0, 1, run.epoch);
  }

  double rate_factor(int64_t /*update*/) const override { return state_.factor; }

  void update_done(const train::UpdateReport& r) override {
    if (state_.done) return;
    const double loss = r.tokens > 0 ? r.loss / static_cast<double>(r.tokens) : NAN;
    Measurement m;
    if (r.update % every_ == 0) m = measure(r.optimizer, r.update + 1, r.epoch);
    const bool late = r.update >= run_->planned_updates / 4;
    const auto decision = ramp_after_update(state_, loss, m.stable, every_, settings_.catapult, late);
    if (!decision.empty()) write(r.update, decision, m, loss, r.update + 1, r.epoch);
  }

  void save_state(model::TensorMap& extra) const override {
    extra[kStateKey] = torch::tensor({state_.factor, state_.growth, state_.loss_mean, state_.done ? 1.0 : 0.0},
                                     torch::kFloat64);
    if (start_.defined()) extra[kStartKey] = start_;
  }

 private:
  struct Measurement {
    double lambda = NAN, stable = NAN, seconds = 0;
  };

  // lambda_1(P^-1 H) (lambda_1(H) for gradient descent) at the current parameters, in fp32 with
  // dropout off, and s = T / (lambda eta*) for update `next`.
  Measurement measure(const train::Optimizer& optimizer, int64_t next, int64_t epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    const Fp32Measurement guard(run_->net);
    const FullDataHessian h(run_->net, probe_, run_->config.loss, ".*", run_->device, keep_probe_graphs(probe_),
                            run_->group);
    const auto start = start_.defined() ? start_.to(h.dtype()) : rademacher(h.dim(), kStartSeed, h.dtype());
    const LinearOperator hvp = [&](const torch::Tensor& v) { return h.hvp(v); };
    const auto top = preconditioned_ ? preconditioned_sharpness(h, hvp, optimizer, train::Preconditioner::kNext, start,
                                                                settings_.lanczos_steps)
                                     : largest_eigenvalue(hvp, start, settings_.lanczos_steps);
    start_ = top.vector;
    Measurement m;
    m.lambda = top.value;
    m.stable = constant_ / (top.value * target(next, epoch));
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return m;
  }

  double target(int64_t update, int64_t epoch) const {
    return train::learning_rate(run_->config.rate_schedule(), update, epoch);
  }

  void write(int64_t step, const std::string& decision, const Measurement& m, double loss, int64_t next,
             int64_t epoch) const {
    if (!run_->writer) return;
    const double eta = target(next, epoch);
    nlohmann::json record = {{"step", step},           {"decision", decision},     {"factor", state_.factor},
                             {"lr", eta * state_.factor}, {"target_lr", eta},     {"growth", state_.growth}};
    if (step == 0) record["every"] = every_;
    if (std::isfinite(m.lambda)) {
      record[preconditioned_ ? "preconditioned_lambda_max" : "lambda_max"] = m.lambda;
      record["stable_factor"] = m.stable;
      record["ratio"] = state_.factor / m.stable;  // lambda x lr / T of the next update
      record["seconds"] = m.seconds;
    }
    if (loss > 0) {
      record["loss"] = loss;
      record["loss_mean"] = state_.loss_mean;
    }
    std::ofstream out(file_, std::ios::app);
    out << record.dump() << "\n";
    if (!out.flush()) throw std::runtime_error("cannot append to " + file_);
  }

  void load(const model::TensorMap& saved) {
    const auto s = saved.find(kStateKey);
    if (s == saved.end())
      throw std::runtime_error("--warmup auto: the checkpoint has no ramp state (" + std::string(kStateKey) +
                               "): it was not written by a --warmup auto run");
    const auto v = s->second.to(torch::kFloat64).contiguous();
    const double* p = v.data_ptr<double>();
    state_ = RampState{p[0], p[1], p[2], p[3] != 0.0};
    if (const auto st = saved.find(kStartKey); st != saved.end()) start_ = st->second;
  }

  train::AutoWarmupSettings settings_;
  int64_t every_ = 0;  // updates between measurements in this run
  const train::RunContext* run_ = nullptr;
  double constant_ = 0;
  bool preconditioned_ = false;
  std::vector<data::Batch> probe_;
  std::string file_;
  RampState state_;
  torch::Tensor start_;
};

}  // namespace

std::unique_ptr<train::TrainCallback> auto_warmup_callback(const train::TrainConfig& config) {
  if (config.schedule.warmup != train::WarmupMode::kAuto) return nullptr;
  return std::make_unique<AutoWarmup>(config);
}

}  // namespace normlab::analysis
