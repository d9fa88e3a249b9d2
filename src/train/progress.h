// The training records of metrics.jsonl and the progress lines (every --log-interval updates,
// and the last updates before the final validation): a callback like every instrument. The sums
// of the interval not yet recorded are saved in every checkpoint, so that a resumed run's first
// record is the uninterrupted run's (issue 34).
#pragma once

#include <chrono>
#include <functional>

#include "train/callback.h"
#include "train/run_dir.h"

namespace normlab::train {

class Progress final : public TrainCallback {
 public:
  // `wall`: the run's training time so far, earlier runs of RUN_DIR included.
  Progress(RunDir& dir, std::function<double()> wall) : dir_(dir), wall_(std::move(wall)) {}
  void train_begins(const RunContext& run) override;
  void update_done(const UpdateReport& report) override;
  void training_ends() override { write(); }
  void save_state(model::TensorMap& extra) const override;

 private:
  using Clock = std::chrono::steady_clock;
  void write();          // the record of the updates since the last one, if any
  std::string eta() const;
  std::vector<double> interval() const;         // the fields below, in their order
  void set_interval(const std::vector<double>& v);

  RunDir& dir_;
  std::function<double()> wall_;
  int64_t log_interval_ = 1, first_update_ = 0, planned_ = 0;
  bool several_ranks_ = false;
  Clock::time_point start_, since_;
  // Since the last record: the sums, and the last update's report fields.
  double loss_ = 0, nll_ = 0, sync_s_ = 0;
  int64_t tokens_ = 0, overlapped_ = 0, reduced_ = 0;
  int64_t update_ = 0, epoch_ = 1, next_batch_ = 0, n_batches_ = 0;
  double lr_ = 0, grad_norm_ = 0, loss_scale_ = 0;
};

}  // namespace normlab::train
