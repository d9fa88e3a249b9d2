#include "analysis/trace.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <torch/torch.h>

#include "analysis/sites.h"
#include "core/file_io.h"
#include "core/problems.h"

namespace normlab::analysis {
namespace {

constexpr const char* kHistogramHeader = "step,param,kind,bin_lo,bin_hi,count\n";
constexpr const char* kLnHeader = "step,stack,layer,ln,mean_input_norm\n";
constexpr const char* kRotationHeader = "step,param,angle,relative_change\n";
constexpr const char* kOutputHeader = "step,stack,layer,block,relative_change\n";

// Rows of FILE (without its header) whose step, the first field, is at most `last`.

}  // namespace

std::string kept_csv_rows(const std::string& file, int64_t last) {
  std::ifstream in(file);
  std::string kept, line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      if (std::stoll(line.substr(0, line.find(','))) <= last) kept += line + "\n";
    } catch (const std::exception&) {  // a line cut short: dropped
    }
  }
  return kept;
}

LogHistogram log_histogram(const torch::Tensor& values, const train::TraceConfig& c) {
  const int64_t n = static_cast<int64_t>(std::llround((c.log10_hi - c.log10_lo) * c.bins_per_decade));
  LogHistogram h;
  h.counts.assign(static_cast<size_t>(n), 0);
  auto a = values.detach().to(torch::kCPU, torch::kFloat64).abs().reshape({-1});
  const auto finite = torch::isfinite(a);
  h.zeros = a.eq(0).sum().item<int64_t>();
  auto nonzero = a.index({finite & a.gt(0)});
  h.overflow = a.numel() - finite.sum().item<int64_t>();
  // k = floor((log10|v| - lo) * b): below 0 underflow, at or above n overflow.
  auto k = torch::floor((torch::log10(nonzero) - c.log10_lo) * static_cast<double>(c.bins_per_decade)).to(torch::kInt64);
  h.underflow = k.lt(0).sum().item<int64_t>();
  h.overflow += k.ge(n).sum().item<int64_t>();
  auto inside = k.index({k.ge(0) & k.lt(n)});
  auto counts = torch::bincount(inside, {}, n);
  auto acc = counts.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i) h.counts[static_cast<size_t>(i)] = acc[i];
  return h;
}

std::string histogram_rows(const LogHistogram& h, const train::TraceConfig& c, const std::string& prefix) {
  const double inf = std::numeric_limits<double>::infinity(), width = 1.0 / static_cast<double>(c.bins_per_decade);
  std::ostringstream s;
  auto row = [&](double lo, double hi, int64_t count) {
    if (count > 0) s << prefix << "," << csv_number(lo) << "," << csv_number(hi) << "," << count << "\n";
  };
  row(-inf, -inf, h.zeros);
  row(-inf, c.log10_lo, h.underflow);
  for (size_t k = 0; k < h.counts.size(); ++k)
    row(c.log10_lo + static_cast<double>(k) * width, c.log10_lo + static_cast<double>(k + 1) * width, h.counts[k]);
  row(c.log10_hi, inf, h.overflow);
  return s.str();
}

Tracer::Tracer(const train::TraceConfig& config, model::Model net, const std::string& dir, int64_t done_steps)
    : config_(config), net_(std::move(net)), dir_(dir) {
  core::throw_if_problems(config_.problems());
  const auto named = net_->named_parameters();
  auto names = config_.params;
  if (names.empty()) names = {net_->stacks().front().name + ".embed_tokens.weight"};
  for (const auto& name : names) {
    const auto* p = named.find(name);
    if (!p) throw std::invalid_argument("--trace-params: no parameter '" + name + "' (names as in `normlab export`)");
    params_[name] = *p;
  }
  std::filesystem::create_directories(dir_);
  histogram_csv_ = kept_csv_rows((std::filesystem::path(dir_) / "histograms.csv").string(), done_steps);
  ln_csv_ = kept_csv_rows((std::filesystem::path(dir_) / "ln_inputs.csv").string(), done_steps);
  rotation_csv_ = kept_csv_rows((std::filesystem::path(dir_) / "rotation.csv").string(), done_steps);
  output_csv_ = kept_csv_rows((std::filesystem::path(dir_) / "output_change.csv").string(), done_steps);
}

void Tracer::begin(int64_t step) {
  step_ = step;
  norms_.clear();
  std::set<std::string> with_final_norm;  // Pre-LN's stacks, and every other that ends in a norm
  for (const auto& stack : net_->stacks())
    if (stack.final_norm) with_final_norm.insert(stack.name);
  for (const auto& site : block_sites(net_)) {
    const std::string key = site.stack + "," + std::to_string(site.layer) + "," + site.ln;
    const std::string final_key = site.stack + ",-1,layer_norm";  // the stack's last norm
    const bool has_final = site.last && with_final_norm.count(site.stack) > 0;
    site.block->set_observer([this, stack = site.stack, key, final_key, has_final](const char* what,
                                                                                   const torch::Tensor& x) {
      const bool ln_input = std::string(what) == "ln_input";
      if (!ln_input && !(has_final && std::string(what) == "output")) return;
      const auto& w = weights_.at(stack);
      const auto& name = ln_input ? key : final_key;
      auto it = std::find_if(norms_.begin(), norms_.end(), [&](const auto& e) { return e.first == name; });
      if (it == norms_.end()) it = norms_.insert(norms_.end(), {name, Norms{}});
      auto norms = x.detach().to(torch::kFloat64).norm(2, {-1});  // (B,T)
      it->second.sum += (norms * w.to(norms.device())).sum().item<double>();
      it->second.tokens += w.sum().item<double>();
    });
  }
}

void Tracer::batch(const data::Batch& batch) {
  batch_ = batch;
  weights_.clear();
  for (const auto& stack : net_->stacks()) weights_[stack.name] = token_weights(batch.*stack.tokens);
}

std::map<std::string, torch::Tensor> Tracer::block_outputs() {
  std::map<std::string, torch::Tensor> out;
  for (const auto& site : block_sites(net_)) {
    const std::string key = site.stack + "," + std::to_string(site.layer) + "," + site.name;
    site.block->set_observer([this, &out, key, stack = site.stack](const char* what, const torch::Tensor& x) {
      if (std::string(what) != "output") return;
      // Padding rows zeroed: they take no part in the norms.
      const auto& w = weights_.at(stack);
      out[key] = x.detach().to(torch::kFloat64) * w.to(x.device()).unsqueeze(-1);
    });
  }
  const bool was_training = net_->is_training();
  net_->eval();
  {
    torch::NoGradGuard no_grad;
    net_->forward(batch_);
  }
  net_->train(was_training);
  clear_observers(net_);
  return out;
}

void Tracer::gradients() {
  // The block observers of begin() have seen every forward of the update: take their norms,
  // then look at the outputs before the update.
  clear_observers(net_);
  outputs_before_ = block_outputs();
  for (const auto& [name, p] : params_) {
    if (!p.grad().defined()) continue;
    histogram_csv_ += histogram_rows(log_histogram(p.grad(), config_), config_,
                                     std::to_string(step_) + "," + name + ",grad");
  }
}

void Tracer::updates(const std::map<std::string, torch::Tensor>& made) {
  clear_observers(net_);
  // Kosson et al. 2024: the angular update of every weight matrix, W_old = W_new - update.
  for (const auto& item : net_->named_parameters()) {
    const auto& name = item.key();
    const auto& p = item.value();
    const auto it = made.find(name);
    if (p.dim() != 2 || it == made.end()) continue;
    const auto w_new = p.detach().to(torch::kFloat64), w_old = w_new - it->second.to(torch::kFloat64);
    const double n_old = w_old.norm().item<double>();
    // The angle as 2 atan2(|u - v|, |u + v|) of the unit vectors u, v (Kahan): exact also for
    // the tiny angles where acos(cosine) has only the square root of the rounding left.
    const auto u = w_old / n_old, v = w_new / w_new.norm();
    const double angle = 2.0 * std::atan2((u - v).norm().item<double>(), (u + v).norm().item<double>());
    rotation_csv_ += std::to_string(step_) + "," + name + "," + csv_number(angle) + "," +
                     csv_number(it->second.to(torch::kFloat64).norm().item<double>() / n_old) + "\n";
  }
  for (const auto& [key, after] : block_outputs()) {
    const auto& before = outputs_before_.at(key);
    output_csv_ += std::to_string(step_) + "," + key + "," +
                   csv_number((after - before).norm().item<double>() / before.norm().item<double>()) + "\n";
  }
  for (const auto& [name, p] : params_) {
    const auto it = made.find(name);
    if (it == made.end()) continue;
    histogram_csv_ += histogram_rows(log_histogram(it->second, config_), config_,
                                     std::to_string(step_) + "," + name + ",update");
  }
  for (const auto& [key, n] : norms_)
    ln_csv_ += std::to_string(step_) + "," + key + "," + csv_number(n.sum / n.tokens) + "\n";
  write();
}

void Tracer::write() const {
  const std::filesystem::path dir(dir_);
  core::write_file_atomic((dir / "histograms.csv").string(), kHistogramHeader + histogram_csv_);
  core::write_file_atomic((dir / "ln_inputs.csv").string(), kLnHeader + ln_csv_);
  core::write_file_atomic((dir / "rotation.csv").string(), kRotationHeader + rotation_csv_);
  core::write_file_atomic((dir / "output_change.csv").string(), kOutputHeader + output_csv_);
}

}  // namespace normlab::analysis

namespace normlab::analysis {
namespace {

class TraceCallback final : public train::TrainCallback {
 public:
  explicit TraceCallback(train::TraceConfig config) : config_(std::move(config)) {}
  std::vector<std::string> problems(const train::TrainConfig&, const core::ProcessGroup& group) const override {
    if (group.size() == 1) return {};
    return {"--trace-steps traces one process's steps: run it without a launcher (here WORLD_SIZE=" +
            std::to_string(group.size()) + ")"};
  }
  void train_begins(const train::RunContext& run) override {
    if (config_.steps > run.update)
      tracer_ = std::make_unique<Tracer>(config_, run.net, (std::filesystem::path(run.dir) / "trace").string(),
                                         run.update);
  }
  void update_begins(int64_t update) override {
    active_ = wants_updates(update);
    if (active_) tracer_->begin(update);
  }
  bool wants_updates(int64_t update) const override { return tracer_ && tracer_->active(update); }
  void batch_ready(const data::Batch& b) override {
    if (active_) tracer_->batch(b);
  }
  void gradients_ready(int64_t) override {
    if (active_) tracer_->gradients();
  }
  void update_done(const train::UpdateReport& report) override {
    if (active_) tracer_->updates(report.optimizer.last_updates());
  }

 private:
  train::TraceConfig config_;
  std::unique_ptr<Tracer> tracer_;
  bool active_ = false;  // tracing the current update
};

}  // namespace

std::unique_ptr<train::TrainCallback> trace_callback(const train::TraceConfig& config) {
  return config.steps > 0 ? std::make_unique<TraceCallback>(config) : nullptr;
}

}  // namespace normlab::analysis
