#include "train/instrument_config.h"

#include <stdexcept>

namespace normlab::train {

std::vector<std::string> TraceConfig::problems() const {
  std::vector<std::string> p;
  if (steps < 0) p.push_back("--trace-steps must be >= 0, got " + std::to_string(steps));
  if (steps > 0 && params.empty()) p.push_back("--trace-params is empty");
  if (!(log10_hi > log10_lo) || bins_per_decade < 1) p.push_back("trace bins: need log10_hi > log10_lo, bins >= 1");
  return p;
}

std::string to_string(Preconditioner p) { return p == Preconditioner::kCurrent ? "current" : "next"; }

Preconditioner parse_preconditioner(const std::string& s) {
  if (s == "current") return Preconditioner::kCurrent;
  if (s == "next") return Preconditioner::kNext;
  throw std::invalid_argument("--curvature-preconditioner: unknown value '" + s + "', expected current|next");
}

std::vector<std::string> CurvatureConfig::problems() const {
  std::vector<std::string> p;
  if (every < 0) p.push_back("--curvature-every must be >= 0, got " + std::to_string(every));
  if (sentences < 1) p.push_back("--curvature-sentences must be >= 1, got " + std::to_string(sentences));
  if (steps < 1) p.push_back("--curvature-steps must be >= 1, got " + std::to_string(steps));
  return p;
}

}  // namespace normlab::train
