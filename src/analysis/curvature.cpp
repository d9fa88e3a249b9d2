#include "analysis/curvature.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "analysis/hessian_blocks.h"
#include "core/file_io.h"
#include "data/batching.h"
#include "train/optimizer_algorithm.h"
#include "train/run_dir.h"
#include "train/schedule.h"

namespace normlab::analysis {
namespace {

constexpr const char* kSharpnessKey = "curvature/sharpness_start";
constexpr const char* kPreconditionedKey = "curvature/preconditioned_start";
constexpr uint64_t kStartSeed = 20211007;  // the first measurement's Rademacher start vectors

// JSON has no infinity: an infinite threshold (lr = 0) is written as null.
nlohmann::json finite_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

// The registered optimiser of `optimizer`; refuses one without a threshold (curvature_problem).
std::unique_ptr<train::OptimizerAlgorithm> measurable(const train::OptimizerConfig& optimizer) {
  if (const auto problem = curvature_problem(optimizer)) throw std::invalid_argument(*problem);
  return train::make_optimizer(optimizer);
}

}  // namespace

std::optional<std::string> curvature_problem(const train::OptimizerConfig& optimizer) {
  // A threshold is known at every lr or at none (optimizer_algorithm.h): asking at 1 says which.
  if (train::make_optimizer(optimizer)->stability_threshold(1.0)) return std::nullopt;
  return "--optimizer " + train::to_string(optimizer.kind) +
         ": curvature needs its stability threshold and it declares none (docs/optimisers.md)";
}

bool preconditioned(const train::OptimizerConfig& optimizer) { return measurable(optimizer)->preconditioned(); }

double stability_threshold(const train::OptimizerConfig& optimizer, double lr) {
  const auto threshold = measurable(optimizer)->stability_threshold(lr);
  return lr > 0 ? *threshold : std::numeric_limits<double>::infinity();
}

torch::Tensor adam_preconditioner(const train::Optimizer& optimizer, const FullDataHessian& hessian,
                                  train::Preconditioner kind, const torch::Tensor& gradient) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < optimizer.parameters().size(); ++i) index[optimizer.parameters()[i].first] = i;
  auto out = torch::empty({hessian.dim()}, torch::TensorOptions().dtype(hessian.dtype()));
  for (size_t i = 0; i < hessian.params().size(); ++i) {
    const auto& [name, p] = hessian.params()[i];
    const auto found = index.find(name);
    if (found == index.end()) throw std::invalid_argument("adam_preconditioner: no optimiser state for " + name);
    auto slice = out.narrow(0, hessian.offset(i), p.numel());
    const auto g = kind == train::Preconditioner::kNext
                       ? gradient.narrow(0, hessian.offset(i), p.numel()).to(slice.dtype())
                       : torch::Tensor();
    optimizer.algorithm().preconditioner(slice, found->second, kind, g);
  }
  return out;
}

CriticalLr critical_lr(const train::NamedTensors& params, const std::vector<torch::Tensor>& grads,
                       const train::OptimizerConfig& optimizer, const std::function<double()>& loss, double lo,
                       double hi, double tol) {
  TORCH_CHECK(params.size() == grads.size() && lo > 0 && hi > lo && tol > 0, "critical_lr: bad arguments");
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> saved;
  for (const auto& [name, p] : params) saved.push_back(p.detach().clone());
  CriticalLr r;
  const double before = loss();
  r.evaluations = 1;
  auto increases = [&](double lr) {
    train::Optimizer opt(params, optimizer);
    for (size_t i = 0; i < params.size(); ++i) params[i].second.mutable_grad() = grads[i].clone();
    opt.step(lr);
    const double after = loss();
    ++r.evaluations;
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].second.detach().copy_(saved[i]);
      params[i].second.mutable_grad() = torch::Tensor();
    }
    return !(after <= before);
  };
  if (increases(lo)) {
    r.lr = lo;  // already at the bottom of the range
    return r;
  }
  if (!increases(hi)) {
    r.lr = std::numeric_limits<double>::quiet_NaN();  // no increase in range
    return r;
  }
  r.bracketed = true;
  while (hi / lo > 1.0 + tol) {
    const double mid = std::sqrt(lo * hi);
    (increases(mid) ? hi : lo) = mid;
  }
  r.lr = hi;
  return r;
}

TopRitz largest_eigenvalue(const LinearOperator& op, const torch::Tensor& start, int64_t steps) {
  auto state = lanczos_start(start);
  lanczos_continue(op, steps, state);
  return top_ritz(state);
}

std::vector<torch::Tensor> parameter_views(const FullDataHessian& h, const torch::Tensor& flat) {
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < h.params().size(); ++i) {
    const auto& p = h.params()[i].second;
    out.push_back(flat.narrow(0, h.offset(i), p.numel()).view(p.sizes()));
  }
  return out;
}

double first_step_preconditioned_sharpness(const FullDataHessian& h, const train::OptimizerConfig& optimizer,
                                           const torch::Tensor& gradient, const torch::Tensor& start,
                                           int64_t steps) {
  // lambda_1(P^-1 H) = lambda_1(P^-1/2 H P^-1/2), a symmetric operator (REFERENCE §9).
  const auto d = adam_preconditioner(train::Optimizer(h.params(), optimizer), h, train::Preconditioner::kNext,
                                     gradient).rsqrt();
  const LinearOperator scaled = [&](const torch::Tensor& v) { return d * h.hvp(d * v); };
  return largest_eigenvalue(scaled, start, steps).value;
}

TopRitz preconditioned_sharpness(const FullDataHessian& h, const LinearOperator& hvp, const train::Optimizer& optimizer,
                                 train::Preconditioner kind, const torch::Tensor& start, int64_t steps) {
  torch::Tensor gradient;
  if (kind == train::Preconditioner::kNext) gradient = h.gradient().first.clone();
  // lambda_1(P^-1 H) = lambda_1(P^-1/2 H P^-1/2), a symmetric operator (REFERENCE §9).
  const auto d = adam_preconditioner(optimizer, h, kind, gradient).rsqrt();
  const LinearOperator scaled = [&](const torch::Tensor& v) { return d * hvp(d * v); };
  return largest_eigenvalue(scaled, start, steps);
}

std::vector<data::Batch> probe_batches(const train::RunContext& run, int64_t sentences) {
  const auto n = std::min<size_t>(static_cast<size_t>(sentences), run.valid.kept.size());
  const std::vector<int64_t> first(run.valid.kept.begin(), run.valid.kept.begin() + static_cast<int64_t>(n));
  std::vector<data::Batch> probe;
  for (const auto& b : data::make_batches(run.valid.sizes, first, run.config.batching, run.config.seed, 0))
    probe.push_back(train::gather(run.valid, b));
  return probe;
}

bool keep_probe_graphs(const std::vector<data::Batch>& probe) { return probe.size() <= 1; }

CurvatureSeries::CurvatureSeries(const train::CurvatureConfig& config, const train::OptimizerConfig& optimizer,
                                 model::Model net, std::vector<data::Batch> probe, const train::LossOptions& loss,
                                 const torch::Device& device, std::string file, int64_t done_updates, bool writes,
                                 core::ProcessGroup group)
    : config_(config), net_(std::move(net)), probe_(std::move(probe)), loss_(loss), device_(device),
      file_(std::move(file)), writes_(writes), group_(std::move(group)) {
  if (const auto problem = curvature_problem(optimizer)) throw std::invalid_argument(*problem);
  // A resumed run writes the records after its checkpoint's update again; a new one (done_updates
  // 0) measures update 0 again, so it keeps none.
  if (writes_)
    train::keep_records(file_, [&](const nlohmann::json& j) {
      return done_updates > 0 && j.value("step", int64_t{0}) <= done_updates;
    });
}

void CurvatureSeries::measure(int64_t update, double next_lr, const train::Optimizer& optimizer) {
  const auto t0 = std::chrono::steady_clock::now();
  const Fp32Measurement guard(net_);
  // Dropout off (the constructor sets eval mode) and the run's loss, on the probe set.
  FullDataHessian h(net_, probe_, loss_, ".*", device_, keep_probe_graphs(probe_), group_);
  const auto dtype = h.dtype();
  const auto& oc = optimizer.config();
  int64_t hvps = 0;
  const LinearOperator hvp = [&](const torch::Tensor& v) {
    ++hvps;
    return h.hvp(v);
  };
  auto start = [&](const torch::Tensor& last, uint64_t seed) {
    return last.defined() ? last.to(dtype) : rademacher(h.dim(), kStartSeed + seed, dtype);
  };
  const auto sharp = largest_eigenvalue(hvp, start(sharpness_start_, 0), config_.steps);
  sharpness_start_ = sharp.vector;
  auto gradient_descent = oc;  // lambda_1(H)'s own threshold: the run's SGD, or plain gradient descent
  if (preconditioned(oc)) gradient_descent = train::OptimizerConfig{train::OptimizerKind::kSgd};
  nlohmann::json record = {{"step", update},
                           {"lr", next_lr},
                           {"lambda_max", sharp.value},
                           {"sgd_threshold", finite_or_null(stability_threshold(gradient_descent, next_lr))}};
  double quantity = sharp.value;
  if (preconditioned(oc)) {
    record["preconditioner"] = train::to_string(config_.preconditioner);
    const bool no_state = optimizer.steps() == 0;
    if (config_.preconditioner == train::Preconditioner::kCohen)  // the factor between cohen's and current's
      record["bias_correction1"] = 1.0 - std::pow(oc.betas[0], static_cast<double>(optimizer.steps()));
    if (config_.preconditioner != train::Preconditioner::kNext && no_state) {
      record["preconditioned_lambda_max"] = nullptr;  // no update yet: v_t = 0, P = eps (cohen's 0)
      quantity = NAN;
    } else {
      const auto pre = preconditioned_sharpness(h, hvp, optimizer, config_.preconditioner,
                                                start(preconditioned_start_, 1), config_.steps);
      preconditioned_start_ = pre.vector;
      record["preconditioned_lambda_max"] = pre.value;
      quantity = pre.value;
    }
    record["adam_threshold"] = finite_or_null(stability_threshold(oc, next_lr));
  }
  if (config_.per_block) {
    // Cold starts (the blocks are many and each is cheap): seeds after the two series' own.
    nlohmann::json blocks = nlohmann::json::object();
    uint64_t seed = kStartSeed + 2;
    for (const auto& block : parameter_blocks(h, sublayer_block)) {
      const auto e = block_spectrum(hvp, h.dim(), block, config_.steps, seed++, dtype);
      blocks[block.name] = e.nodes.back();
    }
    record["blocks"] = blocks;
  }
  const double threshold = stability_threshold(oc, next_lr);
  record["threshold"] = finite_or_null(threshold);
  record["ratio"] = std::isfinite(quantity) && std::isfinite(threshold) ? nlohmann::json(quantity / threshold)
                                                                        : nlohmann::json();
  record["hvps"] = hvps;
  record["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!writes_) return;
  std::ofstream out(file_, std::ios::app);
  out << record.dump() << "\n";
  if (!out.flush()) throw std::runtime_error("cannot append to " + file_);
}

std::map<std::string, torch::Tensor> CurvatureSeries::state() const {
  std::map<std::string, torch::Tensor> s;
  if (sharpness_start_.defined()) s[kSharpnessKey] = sharpness_start_;
  if (preconditioned_start_.defined()) s[kPreconditionedKey] = preconditioned_start_;
  return s;
}

void CurvatureSeries::load_state(const std::map<std::string, torch::Tensor>& state) {
  if (auto it = state.find(kSharpnessKey); it != state.end()) sharpness_start_ = it->second;
  if (auto it = state.find(kPreconditionedKey); it != state.end()) preconditioned_start_ = it->second;
}

}  // namespace normlab::analysis

namespace normlab::analysis {
namespace {

class CurvatureCallback final : public train::TrainCallback {
 public:
  CurvatureCallback(train::CurvatureConfig config, train::OptimizerConfig optimizer, train::LossOptions loss)
      : config_(std::move(config)), optimizer_(std::move(optimizer)), loss_(loss) {}
  std::vector<std::string> problems(const train::TrainConfig&, const core::ProcessGroup&) const override {
    if (const auto problem = curvature_problem(optimizer_)) return {*problem};
    return {};
  }
  void train_begins(const train::RunContext& run) override {
    rate_ = run.rate;
    series_ = std::make_unique<CurvatureSeries>(config_, optimizer_, run.net, probe_batches(run, config_.sentences), loss_,
                                                run.device,
                                                (std::filesystem::path(run.dir) / "curvature.jsonl").string(),
                                                run.update, run.writer, run.group);
    if (!run.saved.empty()) series_->load_state(run.saved);
    if (run.update == 0) series_->measure(0, rate_(1, run.epoch), run.optimizer);
  }
  void update_done(const train::UpdateReport& r) override {
    if (r.update % config_.every == 0) series_->measure(r.update, rate_(r.update + 1, r.epoch), r.optimizer);
  }
  void save_state(model::TensorMap& extra) const override {
    for (const auto& [k, v] : series_->state()) extra[k] = v;
  }

 private:
  train::CurvatureConfig config_;
  train::OptimizerConfig optimizer_;
  train::LossOptions loss_;
  std::function<double(int64_t, int64_t)> rate_;
  std::unique_ptr<CurvatureSeries> series_;
};

}  // namespace

std::unique_ptr<train::TrainCallback> curvature_callback(const train::CurvatureConfig& config,
                                                          const train::OptimizerConfig& optimizer,
                                                          const train::LossOptions& loss) {
  return config.every > 0 ? std::make_unique<CurvatureCallback>(config, optimizer, loss) : nullptr;
}

}  // namespace normlab::analysis
