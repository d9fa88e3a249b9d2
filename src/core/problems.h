// Configuration checks report every problem at once (docs/architecture.md, "Conventions"):
// these join them into the one line that main prints.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace normlab::core {

// "first; second; ..."
inline std::string join_problems(const std::vector<std::string>& problems) {
  std::string all;
  for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
  return all;
}

// Throws std::invalid_argument with join_problems(problems) when there are any.
inline void throw_if_problems(const std::vector<std::string>& problems) {
  if (!problems.empty()) throw std::invalid_argument(join_problems(problems));
}

}  // namespace normlab::core
