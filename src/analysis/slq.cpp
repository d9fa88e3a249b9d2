#include "analysis/slq.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace normlab::analysis {

Density spectral_density(const std::vector<Quadrature>& probes, const DensityOptions& o) {
  if (probes.empty()) throw std::invalid_argument("spectral_density: no probes");
  if (o.bins < 2) throw std::invalid_argument("--bins must be at least 2");
  if (!(o.sigma_squared > 0)) throw std::invalid_argument("--sigma must be positive");
  double hi = 0.0, lo = 0.0;
  for (const auto& p : probes) {
    hi += *std::max_element(p.nodes.begin(), p.nodes.end());
    lo += *std::min_element(p.nodes.begin(), p.nodes.end());
  }
  const double runs = static_cast<double>(probes.size());
  hi = hi / runs + o.overhead;
  lo = lo / runs - o.overhead;
  Density d;
  d.variance = o.sigma_squared * std::max(1.0, hi - lo);
  const double step = (hi - lo) / static_cast<double>(o.bins - 1);
  const double norm = 1.0 / std::sqrt(2.0 * M_PI * d.variance);
  d.grid.resize(o.bins);
  d.density.assign(o.bins, 0.0);
  double total = 0.0;
  for (int64_t j = 0; j < o.bins; ++j) {
    const double x = lo + step * static_cast<double>(j);
    double sum = 0.0;
    for (const auto& p : probes)
      for (size_t i = 0; i < p.nodes.size(); ++i)
        sum += p.weights[i] * norm * std::exp(-(p.nodes[i] - x) * (p.nodes[i] - x) / (2.0 * d.variance));
    d.grid[j] = x;
    d.density[j] = sum / runs;
    total += d.density[j];
  }
  for (auto& v : d.density) v /= total * step;
  return d;
}

double quadrature_moment(const Quadrature& q, int k) {
  double m = 0.0;
  for (size_t i = 0; i < q.nodes.size(); ++i) m += q.weights[i] * std::pow(q.nodes[i], k);
  return m;
}

}  // namespace normlab::analysis
