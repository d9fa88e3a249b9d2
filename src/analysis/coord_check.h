// muP's coordinate check (Yang et al. 2021, §6 and Fig. 5; mup/coord_check.py): for models of
// growing width, a few updates of one optimiser at one lr on one batch, and the mean |x| of every
// activation before each update. Under muP (and u-muP) the sizes stay flat across widths; under sp
// some grow (docs/width.md, "Coordinate check").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "train/optimizer.h"

namespace normlab::analysis {

struct CoordCheckConfig {
  model::ModelConfig model;     // the model at its --d-model C; each width w replaces C, and F by F w / C
  std::vector<int64_t> widths;  // --widths, ascending
  int64_t base_width = 0;       // --mup-base-width C0 of the mup models; 0: the first width
  // --parametrisations: the models built at each width (u-mup needs a model it is defined for)
  std::vector<model::Parametrisation> parametrisations = {model::Parametrisation::kSp, model::Parametrisation::kMup};
  int64_t steps = 4;            // --steps: forward passes recorded, one update after each but the last
  int64_t seeds = 3;            // --seeds: initialisations per width (seed, seed + 1, ...)
  uint64_t seed = 1;            // --seed
  train::OptimizerKind optimizer = train::OptimizerKind::kAdam;  // --optimizer adam|adamw|sgd
  double lr = 0.02;             // --lr, the same at every width (the point of the check)
  int64_t sentences = 8;        // the batch: random token sentences (the kind's form), dropout off
  int64_t length = 12;
  std::string out;              // --out folder

  std::vector<std::string> problems() const;  // every problem, naming the option
};

// One activation's size: l1 = mean |x| over its entries (mup's FDICT["l1"]), at forward pass
// `step` (1: at initialisation), averaged over the seeds.
struct CoordRecord {
  std::string parametrisation;  // sp | mup | u-mup
  int64_t width = 0;
  int64_t step = 0;
  std::string site;  // "<stack>.<layer>.<block>.branch" (the sub-layer's output), ".output" (the block's), "logits"
  double l1 = 0.0;
};

// Every width under each of the config's parametrisations (mup at base width C0). Progress on stderr.
std::vector<CoordRecord> coord_check(const CoordCheckConfig& config);

// The slope of log l1 against log width (least squares over the widths), per parametrisation,
// site and step: ~0 when flat, ~1 when l1 grows like the width.
struct CoordSlope {
  std::string parametrisation, site;
  int64_t step = 0;
  double slope = 0.0;
};
std::vector<CoordSlope> coord_slopes(const std::vector<CoordRecord>& records);

// OUT/coord_check.csv (the records), OUT/coord_slopes.csv, and per parametrisation measured the figure
// OUT/coord_check_<p>.png/.svg: l1 against width at the last step, one line per site (report/plots.h).
void write_coord_check(const std::vector<CoordRecord>& records, const std::string& out);

}  // namespace normlab::analysis
