// What `normlab train --trace-steps N` observes of its first updates, and the interface of the
// observer. The observer itself (analysis::Tracer: histograms, LayerNorm input norms) lives in
// analysis/, above train/ (GUIDE.md, "Data flow"): the caller makes it, the trainer calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "model/seq2seq.h"

namespace normlab::train {

// The first-steps trace's options (RUN_DIR/trace/, docs/probe.md "Trace"); a part of the run's
// configuration (config.json "output": trace_steps, trace_params).
struct TraceConfig {
  int64_t steps = 0;  // trace updates 1..steps (0: off, and nothing is done at all)
  std::vector<std::string> params{"encoder.embed_tokens.weight"};  // parameter names
  double log10_lo = -16.0, log10_hi = 4.0;  // histogram bins cover |v| in [10^lo, 10^hi)
  int64_t bins_per_decade = 10;

  std::vector<std::string> problems() const;  // every problem, naming the option
};

// Called by the trainer, in this order, for each update `step` with active(step).
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual bool active(int64_t step) const = 0;
  // Starts update `step`, before its first forward.
  virtual void begin(int64_t step) = 0;
  // A batch about to go forward: src (B,S), prev_output_tokens (B,T), on the CPU.
  virtual void batch(const torch::Tensor& src, const torch::Tensor& prev_output_tokens) = 0;
  // The gradients are final (accumulated, divided by the tokens, clipped): as the optimiser sees them.
  virtual void gradients() = 0;
  // The update made, p_new - p_old by parameter name (Optimizer::last_updates()).
  virtual void updates(const std::map<std::string, torch::Tensor>& made) = 0;
};

// Makes the observer of a run: `net` on its device, the folder RUN_DIR/trace, and the updates
// already made (a resumed run keeps the rows of those). Called once, only when
// config.steps > done_steps.
using MakeStepObserver = std::function<std::unique_ptr<StepObserver>(
    const TraceConfig& config, model::Seq2Seq net, const std::string& dir, int64_t done_steps)>;

}  // namespace normlab::train
