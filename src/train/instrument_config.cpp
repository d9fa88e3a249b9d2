#include "train/instrument_config.h"

#include "train/train_options.h"

namespace normlab::train {

std::vector<std::string> TraceConfig::problems() const {
  std::vector<std::string> p = trace_options().problems(*this);
  if (!(log10_hi > log10_lo) || bins_per_decade < 1) p.push_back("trace bins: need log10_hi > log10_lo, bins >= 1");
  return p;
}

std::string to_string(Preconditioner p) { return preconditioners().name(p); }

Preconditioner parse_preconditioner(const std::string& s) { return preconditioners().parse(s, "--curvature-preconditioner"); }

std::vector<std::string> CurvatureConfig::problems() const { return curvature_options().problems(*this); }

}  // namespace normlab::train
