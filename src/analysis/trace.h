// The first-steps trace of `normlab train --trace-steps N` (Huang et al. 2020, Fig. 2 and
// Fig. 3a-b; docs/probe.md, "Trace"):
// RUN_DIR/trace/histograms.csv  step,param,kind,bin_lo,bin_hi,count   (kind = grad | update;
//                               bins over log10|value|; the zero bin has bin_lo = bin_hi = -inf)
// RUN_DIR/trace/ln_inputs.csv   step,stack,layer,ln,mean_input_norm
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

#include "model/seq2seq.h"

namespace normlab::analysis {

struct TraceConfig {
  int64_t steps = 0;  // trace updates 1..steps (0: off, and nothing is done at all)
  std::vector<std::string> params{"encoder.embed_tokens.weight"};  // parameter names
  double log10_lo = -16.0, log10_hi = 4.0;  // bins cover |v| in [10^lo, 10^hi)
  int64_t bins_per_decade = 10;

  std::vector<std::string> problems() const;  // every problem, naming the option
};

// Counts of |v| over log10 bins: [lo + k/b, lo + (k+1)/b) for k < (hi-lo)*b, plus zeros,
// values below 10^lo (underflow), and values at or above 10^hi or not finite (overflow).
struct LogHistogram {
  int64_t zeros = 0, underflow = 0, overflow = 0;
  std::vector<int64_t> counts;
};
LogHistogram log_histogram(const torch::Tensor& values, const TraceConfig& config);
// CSV rows "PREFIX,bin_lo,bin_hi,count" of the non-empty bins: zero bin (-inf,-inf),
// underflow (-inf, lo), the bins, overflow (hi, inf).
std::string histogram_rows(const LogHistogram& h, const TraceConfig& config, const std::string& prefix);

class Tracer {
 public:
  // Checks the traced names against `net` (std::invalid_argument naming --trace-params);
  // keeps the rows of steps <= `done_steps` already in DIR (a resumed run).
  Tracer(const TraceConfig& config, model::Seq2Seq net, const std::string& dir, int64_t done_steps);
  bool active(int64_t step) const { return step >= 1 && step <= config_.steps; }
  // Starts update `step`: observes every LayerNorm's input until updates().
  void begin(int64_t step);
  // The batch about to go forward: src (B,S), prev_output_tokens (B,T), for padding.
  void batch(const torch::Tensor& src, const torch::Tensor& prev_output_tokens);
  // Histograms of the traced parameters' gradients as the optimiser will see them.
  void gradients();
  // Histograms of the update made (p_new - p_old by name); writes both files atomically.
  void updates(const std::map<std::string, torch::Tensor>& made);

 private:
  struct Norms {
    double sum = 0, tokens = 0;
  };
  void write() const;

  TraceConfig config_;
  model::Seq2Seq net_;
  std::string dir_;
  std::map<std::string, torch::Tensor> params_;
  int64_t step_ = 0;
  torch::Tensor enc_w_, dec_w_;
  std::vector<std::pair<std::string, Norms>> norms_;  // "stack,layer,ln" in forward order
  std::string histogram_csv_, ln_csv_;                // rows so far
};

}  // namespace normlab::analysis
