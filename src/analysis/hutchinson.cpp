#include "analysis/hutchinson.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "analysis/lanczos.h"

namespace normlab::analysis {

TraceEstimate summarize_trace(std::vector<double> samples) {
  TraceEstimate t;
  t.samples = std::move(samples);
  const double n = static_cast<double>(t.samples.size());
  if (t.samples.empty()) {
    t.trace = t.standard_error = std::numeric_limits<double>::quiet_NaN();
    return t;
  }
  for (double s : t.samples) t.trace += s;
  t.trace /= n;
  if (t.samples.size() < 2) {
    t.standard_error = std::numeric_limits<double>::quiet_NaN();
    return t;
  }
  double ss = 0.0;
  for (double s : t.samples) ss += (s - t.trace) * (s - t.trace);
  t.standard_error = std::sqrt(ss / (n - 1.0) / n);
  return t;
}

std::vector<double> hutchinson_samples(const LinearOperator& op, int64_t n, torch::Dtype dtype,
                                       uint64_t seed, int64_t count) {
  std::vector<double> out;
  for (int64_t i = 0; i < count; ++i) {
    auto z = rademacher(n, seed + static_cast<uint64_t>(i), dtype);
    out.push_back(op(z).to(dtype).dot(z).item<double>());
  }
  return out;
}

}  // namespace normlab::analysis
