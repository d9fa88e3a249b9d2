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

#include "data/batch.h"
#include "model/seq2seq.h"

namespace normlab::train {

class Optimizer;

// The first-steps trace's options (RUN_DIR/trace/, docs/probe.md "Trace"); a part of the run's
// configuration (config.json "output": trace_steps, trace_params).
struct TraceConfig {
  int64_t steps = 0;  // trace updates 1..steps (0: off, and nothing is done at all)
  std::vector<std::string> params{"encoder.embed_tokens.weight"};  // parameter names
  double log10_lo = -16.0, log10_hi = 4.0;  // histogram bins cover |v| in [10^lo, 10^hi)
  int64_t bins_per_decade = 10;
  bool logits = false;  // --trace-logits: every update's attention and output logits (LogitObserver)

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

// `normlab train --trace-logits` (Wortsman et al. 2023; REFERENCE §9): the trainer calls
// output() after each training forward of an update, then end(update) once it is made. The
// observer (analysis::LogitTracer) sees the attention scores itself, through the model's hooks.
class LogitObserver {
 public:
  virtual ~LogitObserver() = default;
  // logits (B,T,V) of a training batch, target (B,T) with padding.
  virtual void output(const torch::Tensor& logits, const torch::Tensor& target) = 0;
  // Update `step` is made: its rows are written.
  virtual void end(int64_t step) = 0;
};
// Makes the observer for `net`, writing under DIR, keeping the rows of updates <= done_steps.
using MakeLogitObserver =
    std::function<std::unique_ptr<LogitObserver>(model::Seq2Seq net, const std::string& dir, int64_t done_steps)>;

// `normlab train --curvature-every N` (docs/curvature.md, REFERENCE §9): sharpness on a fixed
// probe set during training; a part of the run's configuration (config.json "curvature").
enum class Preconditioner {
  kCurrent,  // P = diag(sqrt(v_t / (1 - beta2^t)) + eps): the denominator of Adam's last update
  kNext,     // P = (sqrt(v_{t+1} / (1 - beta2^{t+1})) + eps)(1 - beta1^{t+1}), v_{t+1} from the
             // probe set's gradient: Kalra & Barkeshli's why-warmup code
};
std::string to_string(Preconditioner p);
Preconditioner parse_preconditioner(const std::string& s);

struct CurvatureConfig {
  // --curvature's interval: 5.5 s a measurement (32 x 10) against 0.144 s an update keeps the
  // curvature work at 7.7% of the demo's Post-LN cell (docs/performance.md, "Curvature during training").
  static constexpr int64_t kDefaultEvery = 500;
  int64_t every = 0;       // measure at update 0 and after every N-th update (0: off, nothing done)
  int64_t sentences = 32;  // the probe set: the first N validation pairs (dropout off)
  int64_t steps = 10;      // Lanczos steps per measurement, warm-started from the last top Ritz vector
                           // (docs/performance.md: 32 x 8 gave 64 x 20's values to 0.3% at 1/4 of the cost)
  Preconditioner preconditioner = Preconditioner::kNext;  // for the Adam family
  // Also lambda_1 of every sub-layer's diagonal Hessian block (hessian_blocks.h,
  // sublayer_block): `steps` cold Lanczos steps per block, 40-60 blocks for 6+6 layers.
  bool per_block = false;
  std::vector<std::string> problems() const;  // every problem, naming the option
};

// What the trainer calls for --curvature-every: measure(update, ...) at update 0 and after every
// N-th update, with dropout-mode and precision restored afterwards by the observer.
class CurvatureObserver {
 public:
  virtual ~CurvatureObserver() = default;
  // After `update` updates (0: at initialisation), `next_lr` the rate of update + 1.
  virtual void measure(int64_t update, double next_lr, const Optimizer& optimizer) = 0;
  // What a resumed run needs to continue the series exactly (the warm-start vectors).
  virtual std::map<std::string, torch::Tensor> state() const = 0;
  virtual void load_state(const std::map<std::string, torch::Tensor>& state) = 0;
};

// Makes the curvature observer of a run: `net`, the probe set's batches, the file
// RUN_DIR/curvature.jsonl (records after `done_updates` dropped), and whether this process
// writes it (rank 0).
using MakeCurvatureObserver = std::function<std::unique_ptr<CurvatureObserver>(
    const CurvatureConfig& config, model::Seq2Seq net, std::vector<data::Batch> probe, const std::string& file,
    int64_t done_updates, bool writes)>;

// Makes the observer of a run: `net` on its device, the folder RUN_DIR/trace, and the updates
// already made (a resumed run keeps the rows of those). Called once, only when
// config.steps > done_steps.
using MakeStepObserver = std::function<std::unique_ptr<StepObserver>(
    const TraceConfig& config, model::Seq2Seq net, const std::string& dir, int64_t done_steps)>;

}  // namespace normlab::train
