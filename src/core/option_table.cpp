#include "core/option_table.h"

#include <cmath>
#include <cstdio>

namespace normlab::core {

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool Range::contains(double v) const {
  if (std::isnan(v) || (finite && !std::isfinite(v))) return false;
  if (lo && (lo_open ? !(v > *lo) : !(v >= *lo))) return false;
  return !(hi && (hi_open ? !(v < *hi) : !(v <= *hi)));
}

std::string Range::describe() const {
  if (!phrase.empty()) return phrase;
  if (finite) return "finite and " + Range{lo, hi, lo_open, hi_open, false, ""}.describe();
  if (lo && hi)
    return std::string("in ") + (lo_open ? "(" : "[") + format_number(*lo) + ", " + format_number(*hi) +
           (hi_open ? ")" : "]");
  if (lo) return (lo_open ? "> " : ">= ") + format_number(*lo);
  return (hi_open ? "< " : "<= ") + format_number(*hi);
}

Range at_least(double lo) { return Range{lo, std::nullopt, false, false, false, ""}; }
Range above(double lo) { return Range{lo, std::nullopt, true, false, false, ""}; }
Range between(double lo, double hi, bool lo_open, bool hi_open) { return Range{lo, hi, lo_open, hi_open, false, ""}; }
Range finite(Range r) {
  r.finite = true;
  return r;
}

namespace detail {

void set_at(nlohmann::json& j, const std::string& path, nlohmann::json value) {
  nlohmann::json* at = &j;
  size_t begin = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; begin = dot + 1, dot = path.find('.', begin))
    at = &(*at)[path.substr(begin, dot - begin)];
  (*at)[path.substr(begin)] = std::move(value);
}

}  // namespace detail
}  // namespace normlab::core
