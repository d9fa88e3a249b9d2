#include "train/progress.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace normlab::train {

namespace {

constexpr const char* kIntervalKey = "progress.interval";  // the checkpoint's extra tensor
constexpr size_t kIntervalFields = 13;

}  // namespace

void Progress::train_begins(const RunContext& run) {
  log_interval_ = run.config.log_interval;
  first_update_ = update_ = run.update;
  planned_ = run.planned_updates;
  several_ranks_ = run.group.size() > 1;
  start_ = since_ = Clock::now();
  if (const auto saved = run.saved.find(kIntervalKey); saved != run.saved.end()) {
    const auto t = saved->second.to(torch::kCPU, torch::kFloat64).contiguous();
    set_interval({t.data_ptr<double>(), t.data_ptr<double>() + t.numel()});
  } else if (!run.saved.empty() && run.update % log_interval_ != 0) {
    dir_.line("normlab train: the checkpoint holds no sums of the logging interval (an older normlab wrote it): "
              "the first record after update " + std::to_string(run.update) + " averages only this run's updates");
  }
}

void Progress::save_state(model::TensorMap& extra) const {
  const auto v = interval();
  extra[kIntervalKey] = torch::tensor(v, torch::kFloat64);
}

// Sums as doubles: exact for counts below 2^53.
std::vector<double> Progress::interval() const {
  auto d = [](int64_t x) { return static_cast<double>(x); };
  return {loss_, nll_, sync_s_, d(tokens_), d(overlapped_), d(reduced_), d(update_), d(epoch_), d(next_batch_),
          d(n_batches_), lr_, grad_norm_, loss_scale_};
}

void Progress::set_interval(const std::vector<double>& v) {
  TORCH_CHECK(v.size() == kIntervalFields, kIntervalKey, ": expected ", kIntervalFields, " values, got ", v.size());
  auto i = [](double x) { return static_cast<int64_t>(x); };
  loss_ = v[0], nll_ = v[1], sync_s_ = v[2], tokens_ = i(v[3]), overlapped_ = i(v[4]), reduced_ = i(v[5]);
  update_ = i(v[6]), epoch_ = i(v[7]), next_batch_ = i(v[8]), n_batches_ = i(v[9]);
  lr_ = v[10], grad_norm_ = v[11], loss_scale_ = v[12];
}

void Progress::update_done(const UpdateReport& r) {
  loss_ += r.loss;
  nll_ += r.nll;
  tokens_ += r.tokens;
  sync_s_ += r.sync_s;
  overlapped_ += r.overlapped;
  reduced_ += r.reduced;
  update_ = r.update;
  epoch_ = r.epoch;
  next_batch_ = r.next_batch;
  n_batches_ = r.n_batches;
  lr_ = r.lr;
  grad_norm_ = r.grad_norm;
  loss_scale_ = r.loss_scale;
  if (r.update % log_interval_ == 0) write();
}

std::string Progress::eta() const {
  const double per_update = std::chrono::duration<double>(Clock::now() - start_).count() /
                            static_cast<double>(std::max<int64_t>(update_ - first_update_, 1));
  const auto left = static_cast<int64_t>(per_update * static_cast<double>(std::max<int64_t>(planned_ - update_, 0)));
  std::ostringstream s;
  s << left / 3600 << "h" << std::setw(2) << std::setfill('0') << (left / 60) % 60 << "m";
  return s.str();
}

void Progress::write() {
  if (tokens_ == 0) return;
  const double secs = std::chrono::duration<double>(Clock::now() - since_).count();
  const double loss = loss_ / static_cast<double>(tokens_), nll = nll_ / static_cast<double>(tokens_);
  nlohmann::json record = {{"step", update_},   {"epoch", epoch_},         {"lr", lr_},
                           {"loss", loss},      {"nll", nll},              {"grad_norm", grad_norm_},
                           {"tokens", tokens_}, {"tokens_per_s", static_cast<double>(tokens_) / secs},
                           {"wall_s", wall_()}};
  if (several_ranks_) {
    record["sync_s"] = sync_s_;
    record["overlap"] = reduced_ > 0 ? static_cast<double>(overlapped_) / static_cast<double>(reduced_) : 0.0;
  }
  if (loss_scale_ > 0) record["loss_scale"] = loss_scale_;
  dir_.record(record);
  std::ostringstream line;
  line << std::fixed << std::setprecision(3) << "epoch " << epoch_ << " | update " << update_ << " | batch "
       << next_batch_ << "/" << n_batches_ << " | loss " << loss << " | nll " << nll << " | lr " << std::scientific
       << std::setprecision(3) << lr_ << std::fixed << " | gnorm " << grad_norm_ << " | " << std::setprecision(0)
       << static_cast<double>(tokens_) / secs << " tok/s | ETA " << eta();
  dir_.line(line.str());
  loss_ = nll_ = sync_s_ = 0;
  tokens_ = overlapped_ = reduced_ = 0;
  since_ = Clock::now();
}

}  // namespace normlab::train
