#include "train/step_observer.h"

namespace normlab::train {

std::vector<std::string> TraceConfig::problems() const {
  std::vector<std::string> p;
  if (steps < 0) p.push_back("--trace-steps must be >= 0, got " + std::to_string(steps));
  if (steps > 0 && params.empty()) p.push_back("--trace-params is empty");
  if (!(log10_hi > log10_lo) || bins_per_decade < 1) p.push_back("trace bins: need log10_hi > log10_lo, bins >= 1");
  return p;
}

}  // namespace normlab::train
