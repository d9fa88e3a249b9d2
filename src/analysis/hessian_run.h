// `normlab hessian`'s computation on a FullDataHessian: Lanczos probes (resumable), SLQ
// density, Hutchinson trace, power iteration, per-block lambda_max, and the result files
// (docs/hessian.md):
//   OUT/hessian.json     lambda_max, lambda_min, top_eigenvalues, trace, trace_stderr,
//                        probes [{alpha, beta, nodes, weights}], sentences, tokens, wall_s, config
//   OUT/density.csv      lambda,density
//   OUT/per_block.csv    block,params,lambda_max,lambda_min   (with per_block)
//   OUT/lanczos_state.pt the Krylov basis and coefficients so far (with save_every > 0)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/hessian_blocks.h"
#include "analysis/hvp.h"
#include "analysis/slq.h"

namespace normlab::analysis {

struct HessianRunConfig {
  int64_t steps = 100;            // Lanczos steps per probe (PyHessian's density iter)
  int64_t probes = 1;             // Rademacher start vectors (PyHessian's n_v)
  int64_t top_k = 5;              // Ritz values reported in top_eigenvalues
  int64_t trace_samples = 0;      // Hutchinson samples beyond the probes' own z^T H z
  DensityOptions density;         // --bins, --sigma
  bool power = false;             // also PyHessian's power iteration for lambda_max
  int64_t power_iterations = 100; // its maxIter
  double power_tol = 1e-3;        // its tol
  bool per_block = false;         // lambda_max of each block's diagonal Hessian block
  int64_t per_block_steps = 20;   // Lanczos steps per block
  uint64_t seed = 1;              // Rademacher vector i uses seed + i (probes first)
  std::string out;                // OUT
  int64_t save_every = 10;        // save the Lanczos state every K steps (0: never)
  bool resume = false;            // continue from OUT/lanczos_state.pt
  bool writes = true;             // write OUT and progress lines (rank 0 of a job; the others compute alike)
  std::vector<std::string> problems() const;
};

// Runs everything `config` asks for and writes the files. `resolved` (the caller's full
// configuration: model, data, loss) is written into hessian.json and its hash guards
// --resume against continuing a different computation. Returns hessian.json's content.
nlohmann::json run_hessian(const FullDataHessian& hessian, const HessianRunConfig& config,
                           const nlohmann::json& resolved);

}  // namespace normlab::analysis
