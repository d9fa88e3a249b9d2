// `--warmup-gate G` (issue 37; docs/warmup.md, "The gate"): whether the run warms up at all.
// Before it, a probe trains the first 2% of the planned updates without warm-up (the same
// initialisation, data order and schedule as the run without warm-up) into RUN_DIR/probe. If its
// training loss per token fell by more than G nats from update 1 to the probe's last update (or
// the probe diverged), the run trains with the warm-up it was given (--warmup-steps' linear ramp
// or --warmup auto's); else without warm-up. Either way the run starts from the initialisation,
// so the probe's updates are an extra 2% of the planned ones. The decision and its evidence are
// RUN_DIR/gate.json; a resumed run reads it and does not probe again. With several ranks the probe
// trains data-parallel as the run does, and rank 0 decides for all (it alone writes the folder).
//
// Why the loss drop: on the grids of docs/results.md ("The 2% probe as a gate", "Two more grids")
// it was the probe quantity that best separated the configurations where no warm-up is best from
// those where a warm-up is; one G near 1 nat carried across three run lengths and two tasks, but
// it is a drop in nats of this task's loss, so G is the user's (0: no gate).
#pragma once

#include <cstdint>
#include <string>

#include <c10/core/Device.h>

#include "core/process_group.h"
#include "train/train_config.h"

namespace normlab::analysis {

constexpr double kGateProbeShare = 0.02;  // issue 37 §1: a probe of at most 2% of the planned updates

// The probe's updates for a run of `planned`: 2% of them, rounded, at least 2 (a loss drop needs two).
int64_t gate_probe_updates(int64_t planned);

struct GateEvidence {
  int64_t probe_updates = 0;
  double loss_first = 0.0;  // training loss per token of update 1
  double loss_last = 0.0;   // of the probe's last update (NaN when it diverged before it)
  bool diverged = false;
};

// The rule: ramp when the loss fell by more than `threshold` nats, or the probe diverged.
bool gate_ramps(const GateEvidence& e, double threshold);

// The configuration the run trains with: `config` itself without a gate; with one, after the probe
// (or RUN_DIR/gate.json's decision when there is one), --warmup auto's as given or no warm-up at all.
train::TrainConfig gated_config(const train::TrainConfig& config, const c10::Device& device,
                                core::ProcessGroup& group);

// `train --warmup-gate-only` (issue 37 §1: advice from the first updates): RUN_DIR/gate.json, once
// gated_config has written or checked it, as a user reads it: whether the run needs its warm-up,
// which one it would train with, the evidence and where it lies.
std::string gate_advice(const train::TrainConfig& config);

}  // namespace normlab::analysis
