// Hutchinson's trace estimator (Hutchinson 1990; Avron & Toledo 2011): for Rademacher z,
// E[z^T H z] = trace(H); the mean of N samples has standard error s/sqrt(N), s the sample
// standard deviation.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/hvp.h"

namespace normlab::analysis {

struct TraceEstimate {
  std::vector<double> samples;  // z_i^T H z_i
  double trace = 0.0;           // their mean
  double standard_error = 0.0;         // s / sqrt(N); NaN with fewer than 2 samples
};

// Summary of given samples (e.g. n * alpha_0 of Lanczos probes, which are z^T H z too).
TraceEstimate summarize_trace(std::vector<double> samples);

// `count` samples with Rademacher vectors rademacher(n, seed + i) (lanczos.h).
std::vector<double> hutchinson_samples(const LinearOperator& op, int64_t n, torch::Dtype dtype,
                                       uint64_t seed, int64_t count);

}  // namespace normlab::analysis
