// The first-steps trace of `normlab train --trace-steps N` (Huang et al. 2020, Fig. 2 and
// Fig. 3a-b; docs/probe.md, "Trace"):
// RUN_DIR/trace/histograms.csv  step,param,kind,bin_lo,bin_hi,count   (kind = grad | update;
//                               bins over log10|value|; the zero bin has bin_lo = bin_hi = -inf)
// RUN_DIR/trace/ln_inputs.csv   step,stack,layer,ln,mean_input_norm
// RUN_DIR/trace/rotation.csv    step,param,angle,relative_change   (every weight matrix: the
//                               angle between W before and after the update, in radians, and
//                               ||W_new - W_old||_F / ||W_old||_F; Kosson et al. 2024)
// RUN_DIR/trace/output_change.csv  step,stack,layer,block,relative_change   (every residual
//                               block: ||y_new - y_old|| / ||y_old|| of its output on the update's
//                               last batch, dropout off, before and after the update)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "model/model.h"
#include "train/callback.h"
#include "train/instrument_config.h"

namespace normlab::analysis {

// Counts of |v| over log10 bins: [lo + k/b, lo + (k+1)/b) for k < (hi-lo)*b, plus zeros,
// values below 10^lo (underflow), and values at or above 10^hi or not finite (overflow).
struct LogHistogram {
  int64_t zeros = 0, underflow = 0, overflow = 0;
  std::vector<int64_t> counts;
};
LogHistogram log_histogram(const torch::Tensor& values, const train::TraceConfig& config);
// CSV rows "PREFIX,bin_lo,bin_hi,count" of the non-empty bins: zero bin (-inf,-inf),
// underflow (-inf, lo), the bins, overflow (hi, inf).
std::string histogram_rows(const LogHistogram& h, const train::TraceConfig& config, const std::string& prefix);

// The data rows of a trace CSV (header dropped) whose first field, the update, is <= `last`,
// each ending in a newline; a line cut short is dropped; "" when the file does not exist. What
// a resumed run keeps of its trace.
std::string kept_csv_rows(const std::string& file, int64_t last);

// What --trace-steps observes of the first updates; the trainer reaches it through trace_callback().
class Tracer final {
 public:
  // Checks the traced names against `net` (std::invalid_argument naming --trace-params);
  // keeps the rows of steps <= `done_steps` already in DIR (a resumed run).
  Tracer(const train::TraceConfig& config, model::Model net, const std::string& dir, int64_t done_steps);
  bool active(int64_t step) const { return step >= 1 && step <= config_.steps; }
  // Starts update `step`: observes every LayerNorm's input until updates().
  void begin(int64_t step);
  // The batch about to go forward (each stack's padding: StackView::tokens).
  void batch(const data::Batch& batch);
  // Histograms of the traced parameters' gradients as the optimiser will see them; every
  // block's output on the last batch before the update (an extra forward, dropout off).
  void gradients();
  // Histograms of the update made (p_new - p_old by name), the weight matrices' rotation, the
  // blocks' output change (a second extra forward); writes every file atomically.
  void updates(const std::map<std::string, torch::Tensor>& made);

 private:
  struct Norms {
    double sum = 0, tokens = 0;
  };
  void write() const;
  // Forward of the last batch with dropout off and no graph; each block's output by key.
  std::map<std::string, torch::Tensor> block_outputs();

  train::TraceConfig config_;
  model::Model net_;
  std::string dir_;
  std::map<std::string, torch::Tensor> params_;
  int64_t step_ = 0;
  std::map<std::string, torch::Tensor> weights_;       // stack -> (B,T) token weights of batch_
  data::Batch batch_;                                   // the update's last batch
  std::map<std::string, torch::Tensor> outputs_before_;  // block key -> output before the update
  std::vector<std::pair<std::string, Norms>> norms_;  // "stack,layer,ln" in forward order
  std::string histogram_csv_, ln_csv_, rotation_csv_, output_csv_;  // rows so far
};

// --trace-steps as a training callback (train/callback.h): RUN_DIR/trace/ of the first
// config.steps updates; nothing is made or done when they are done. One process only.
std::unique_ptr<train::TrainCallback> trace_callback(const train::TraceConfig& config);

}  // namespace normlab::analysis
