// `normlab train --trace-logits` (Wortsman et al. 2023, REFERENCE §9: attention-logit growth and
// output-logit divergence), every update, over the update's training batches (dropout on, as
// trained; forwards in eval mode, validation's and the instruments', are not counted):
// RUN_DIR/trace/attention_logits.csv  step,stack,layer,attention,head,max_logit
//     the largest |q.k|/sqrt(D) of each head of each attention (self_attn | encoder_attn) over
//     the entries the masks keep (QK-norm's q and k when the scheme has it)
// RUN_DIR/trace/output_logits.csv     step,mean_log_z,max_log_z
//     log Z = logsumexp of the output logits, over the target tokens (padding excluded)
// Rows are appended once an update is made; a resumed run keeps those of its done updates.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "model/model.h"
#include "train/callback.h"

namespace normlab::analysis {

class LogitTracer final {
 public:
  // Hooks every attention of `net`; keeps DIR's rows of updates <= done_steps (rewritten atomically).
  LogitTracer(model::Model net, const std::string& dir, int64_t done_steps);
  ~LogitTracer();  // removes the hooks
  void output(const torch::Tensor& logits, const torch::Tensor& target);
  void end(int64_t step);

 private:
  struct Head {
    std::string site;              // "stack,layer,attention"
    model::MultiheadAttentionImpl* attention;
    torch::Tensor max_logit;       // (H) float64 over the update so far, or undefined
  };
  model::Model net_;
  std::string attention_csv_, output_csv_;
  std::vector<Head> heads_;
  double log_z_sum_ = 0, log_z_max_ = -std::numeric_limits<double>::infinity();
  int64_t tokens_ = 0;
};

// --trace-logits as a training callback (train/callback.h): RUN_DIR/trace/attention_logits.csv
// and output_logits.csv of every update; nothing when `on` is false. One process only.
std::unique_ptr<train::TrainCallback> logit_trace_callback(bool on);

}  // namespace normlab::analysis
