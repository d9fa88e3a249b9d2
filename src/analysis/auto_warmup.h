// `normlab train --warmup auto` (docs/warmup.md): the run chooses its own learning-rate ramp from
// the preconditioned sharpness it measures, so that the user gives only the target rate.
//
// The rule. T is the optimiser's stability constant (threshold x lr: (2 + 2 beta1)/(1 - beta1)
// for the Adam family, Cohen et al. 2022; 2 for gradient descent), lambda_n = lambda_1(P^-1 H)
// on a fixed probe set at the parameters after update n with P of update n + 1 (Kalra &
// Barkeshli's P, the curvature series' `next`), eta*_n the schedule's rate of update n without
// warm-up. s_n = T / (lambda_n eta*_{n+1}) is the largest factor on eta* at which update n + 1
// is stable on a quadratic of that curvature. The factor f on eta*:
//   - update 1: f = min(1, s_0): the ramp starts at the stable rate (Kalra & Barkeshli 2024:
//     start the warm-up at the critical rate rather than at 0);
//   - at every `every`-th update n of the ramp: if f > s_n the sharpness has not yet come down to
//     the current rate: hold f (`hold`); else grow f geometrically towards min(1, s_n, 2f) over
//     the next `every` updates (`grow`): at most a doubling per measurement, never past the
//     rate measured stable;
//   - a training loss above `catapult` x its running mean (a loss catapult) halves f and stops
//     its growth until the next measurement (`catapult`);
//   - after a quarter of the planned updates a hold no longer holds (`deadline`): the ramp ends
//     within every x log2(1/f) more updates whatever the sharpness says;
//   - f = 1 ends the ramp (`done`): no more measurements, the schedule's rate from then on.
// Every decision is a record of RUN_DIR/warmup.jsonl; the state is saved with each checkpoint
// (a resumed run continues bit-identically).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "train/callback.h"

namespace normlab::analysis {

// The ramp between updates: what a checkpoint saves.
struct RampState {
  double factor = 1.0;  // on the schedule's rate of the next update
  double growth = 1.0;  // factor's multiplier per update until the next decision
  double loss_mean = 0.0;  // running mean (0.9) of the training loss per token; 0: none yet
  bool done = false;    // the factor reached 1: no more measurements
};

// The decisions of the rule above, as pure functions of what was measured. `stable` is s_n.
// start: the ramp before update 1.
std::string ramp_start(RampState& s, double stable, int64_t every);
// After update n: `loss` its training loss per token, `stable` s_n when the sharpness was
// measured (NaN when not), `late` past the deadline. Returns the decision ("" for none: the
// factor grew as planned).
std::string ramp_after_update(RampState& s, double loss, double stable, int64_t every, double catapult, bool late);

// The callback (train/callback.h) for a --warmup auto run; nullptr for any other.
std::unique_ptr<train::TrainCallback> auto_warmup_callback(const train::TrainConfig& config);

}  // namespace normlab::analysis
