#include "train/progress.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

namespace normlab::train {

void Progress::train_begins(const RunContext& run) {
  log_interval_ = run.config.log_interval;
  first_update_ = update_ = run.update;
  planned_ = run.planned_updates;
  several_ranks_ = run.group.size() > 1;
  start_ = since_ = Clock::now();
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
