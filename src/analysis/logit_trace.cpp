#include "analysis/logit_trace.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <torch/torch.h>

#include "analysis/sites.h"
#include "analysis/trace.h"
#include "core/file_io.h"

namespace normlab::analysis {
namespace {

const char* const kAttentionHeader = "step,stack,layer,attention,head,max_logit\n";
const char* const kOutputHeader = "step,mean_log_z,max_log_z\n";

void append(const std::string& file, const std::string& rows) {
  std::ofstream out(file, std::ios::app);
  out << rows;
  if (!out.flush()) throw std::runtime_error("cannot append to " + file);
}

}  // namespace

LogitTracer::LogitTracer(model::Model net, const std::string& dir, int64_t done_steps) : net_(std::move(net)) {
  std::filesystem::create_directories(dir);
  attention_csv_ = (std::filesystem::path(dir) / "attention_logits.csv").string();
  output_csv_ = (std::filesystem::path(dir) / "output_logits.csv").string();
  core::write_file_atomic(attention_csv_, kAttentionHeader + kept_csv_rows(attention_csv_, done_steps));
  core::write_file_atomic(output_csv_, kOutputHeader + kept_csv_rows(output_csv_, done_steps));
  for (auto& stack : net_->stacks())
    for (size_t i = 0; i < stack.layers.size(); ++i)
      for (auto& [name, attention] : stack.layers[i].attentions)
        heads_.push_back({stack.name + "," + std::to_string(i) + "," + name, attention.get(), torch::Tensor()});
  for (auto& h : heads_) {
    auto* head = &h;
    h.attention->set_score_observer([this, head](const torch::Tensor& scores) {
      if (!net_->is_training()) return;
      torch::NoGradGuard no_grad;
      const auto s = scores.detach();
      const auto kept = torch::where(torch::isfinite(s), s.abs(), torch::zeros_like(s));
      const auto m = kept.amax({0, 2, 3}).to(torch::kCPU, torch::kDouble);  // (H)
      head->max_logit = head->max_logit.defined() ? torch::maximum(head->max_logit, m) : m;
    });
  }
}

LogitTracer::~LogitTracer() {
  for (auto& h : heads_) h.attention->set_score_observer(nullptr);
}

void LogitTracer::output(const torch::Tensor& logits, const torch::Tensor& target) {
  torch::NoGradGuard no_grad;
  const auto log_z = torch::logsumexp(logits.detach().to(torch::kFloat), -1).to(torch::kCPU, torch::kDouble);
  const auto real = target.to(torch::kCPU).ne(model::target_padding(net_->config()));
  const auto values = log_z.masked_select(real);
  if (values.numel() == 0) return;
  log_z_sum_ += values.sum().item<double>();
  log_z_max_ = std::max(log_z_max_, values.max().item<double>());
  tokens_ += values.numel();
}

void LogitTracer::end(int64_t step) {
  std::ostringstream attention, output;
  attention.precision(9);
  output.precision(9);
  for (auto& h : heads_) {
    if (!h.max_logit.defined()) continue;
    for (int64_t k = 0; k < h.max_logit.size(0); ++k)
      attention << step << "," << h.site << "," << k << "," << csv_number(h.max_logit[k].item<double>()) << "\n";
    h.max_logit = torch::Tensor();
  }
  if (tokens_ > 0)
    output << step << "," << csv_number(log_z_sum_ / static_cast<double>(tokens_)) << "," << csv_number(log_z_max_)
           << "\n";
  append(attention_csv_, attention.str());
  append(output_csv_, output.str());
  log_z_sum_ = 0;
  log_z_max_ = -std::numeric_limits<double>::infinity();
  tokens_ = 0;
}

}  // namespace normlab::analysis

namespace normlab::analysis {
namespace {

class LogitTraceCallback final : public train::TrainCallback {
 public:
  std::vector<std::string> problems(const train::TrainConfig&, const core::ProcessGroup& group) const override {
    if (group.size() == 1) return {};
    return {"--trace-logits traces one process's batches: run it without a launcher (here WORLD_SIZE=" +
            std::to_string(group.size()) + ")"};
  }
  void train_begins(const train::RunContext& run) override {
    tracer_ = std::make_unique<LogitTracer>(run.net, (std::filesystem::path(run.dir) / "trace").string(), run.update);
  }
  void output_ready(const torch::Tensor& logits, const torch::Tensor& target) override {
    tracer_->output(logits, target);
  }
  void update_done(const train::UpdateReport& report) override { tracer_->end(report.update); }

 private:
  std::unique_ptr<LogitTracer> tracer_;
};

}  // namespace

std::unique_ptr<train::TrainCallback> logit_trace_callback(bool on) {
  return on ? std::make_unique<LogitTraceCallback>() : nullptr;
}

}  // namespace normlab::analysis
