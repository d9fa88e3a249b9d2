// The options of the instruments that watch a training run (--trace-*, --curvature-*): parts of
// TrainConfig. The instruments themselves live in analysis/, above train/ (docs/architecture.md),
// and reach the trainer as callbacks (train/callback.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace normlab::train {

// The first-steps trace's options (RUN_DIR/trace/, docs/probe.md "Trace"); a part of the run's
// configuration (config.json "output": trace_steps, trace_params).
struct TraceConfig {
  int64_t steps = 0;  // trace updates 1..steps (0: off, and nothing is done at all)
  // Parameter names; empty: the token table of the model's first stack (encoder.embed_tokens.weight,
  // a decoder-only model's decoder.embed_tokens.weight).
  std::vector<std::string> params;
  double log10_lo = -16.0, log10_hi = 4.0;  // histogram bins cover |v| in [10^lo, 10^hi)
  int64_t bins_per_decade = 10;
  bool logits = false;  // --trace-logits: every update's attention and output logits (analysis::LogitTracer)

  std::vector<std::string> problems() const;  // every problem, naming the option
};

// `normlab train --curvature-every N` (docs/curvature.md, REFERENCE §9): sharpness on a fixed
// probe set during training; a part of the run's configuration (config.json "curvature").
enum class Preconditioner {
  kCurrent,  // P = diag(sqrt(v_t / (1 - beta2^t)) + eps): the denominator of Adam's last update
  kNext,     // P = (sqrt(v_{t+1} / (1 - beta2^{t+1})) + eps)(1 - beta1^{t+1}), v_{t+1} from the
             // probe set's gradient: Kalra & Barkeshli's why-warmup code
  kCohen,    // P = (1 - beta1^t)(sqrt(v_t / (1 - beta2^t)) + eps): Cohen et al. 2022's P_t of the
             // last update, the P their threshold (2 + 2 beta1)/((1 - beta1) lr) is derived for
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


}  // namespace normlab::train
