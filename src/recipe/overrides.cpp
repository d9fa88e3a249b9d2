#include "recipe/overrides.h"

#include <fnmatch.h>

#include <algorithm>
#include <stdexcept>

#include "core/problems.h"

namespace normlab::recipe {

Override parse_override(const std::string& spec) {
  // Cell names hold '=' but never ':' (recipe.cpp's valid_name): CELLS is what precedes the first
  // ':' when KEY=VALUE follows it; else the whole is KEY=VALUE (its value may hold ':').
  const auto colon = spec.find(':');
  const bool has_cells = colon != std::string::npos && spec.find('=', colon) != std::string::npos;
  const std::string rest = has_cells ? spec.substr(colon + 1) : spec;
  const auto equals = rest.find('=');
  if (equals == std::string::npos)
    throw std::invalid_argument("--set " + spec + ": expected [CELLS:]KEY=VALUE (e.g. 'post-ln*:max-steps=10000')");
  Override o{spec, has_cells ? spec.substr(0, colon) : "", rest.substr(0, equals), rest.substr(equals + 1)};
  if (has_cells && o.cells.empty())
    throw std::invalid_argument("--set " + spec + ": no cells before ':' (leave out 'CELLS:' for all)");
  if (o.key.rfind("--", 0) == 0) o.key = o.key.substr(2);
  if (o.key.empty()) throw std::invalid_argument("--set " + spec + ": no option name before '='");
  return o;
}

namespace {

CellOption* find_option(Cell& cell, const std::string& key) {
  for (auto& opt : cell.options)
    if (opt.key == key) return &opt;
  return nullptr;
}

bool is_grid_key(const Cell& cell, const std::string& key) {
  return std::any_of(cell.grid.begin(), cell.grid.end(), [&](const auto& kv) { return kv.first == key; });
}

// The override in `cell`: set, added (kept sorted by key) or, for "false", left out.
void set_option(Cell& cell, const Override& o) {
  if (o.value == "false") {
    cell.options.erase(std::remove_if(cell.options.begin(), cell.options.end(),
                                      [&](const CellOption& opt) { return opt.key == o.key; }),
                       cell.options.end());
    return;
  }
  const bool flag = o.value == "true";
  if (auto* opt = find_option(cell, o.key)) {
    *opt = {o.key, flag ? "" : o.value, flag, opt->line};
    return;
  }
  cell.options.push_back({o.key, flag ? "" : o.value, flag, cell.line});
  std::sort(cell.options.begin(), cell.options.end(),
            [](const CellOption& a, const CellOption& b) { return a.key < b.key; });
}

// Why `o` cannot apply to `cell` ("" when it can).
std::string cell_problem(const Cell& cell, const Override& o, const OptionChecker& check) {
  if (is_grid_key(cell, o.key))
    return "--" + o.key + " is a grid key of cell '" + cell.name + "' (its values name the cells)";
  if (auto p = check(cell.command, o.key); !p.empty()) return "cell '" + cell.name + "': " + p;
  return "";
}

}  // namespace

void apply_overrides(Recipe& recipe, const std::vector<Override>& overrides, const OptionChecker& check) {
  std::vector<std::string> problems;
  for (const auto& o : overrides) {
    std::vector<Cell*> selected;
    for (auto& cell : recipe.cells) {
      const bool chosen = o.cells.empty() ? find_option(cell, o.key) != nullptr
                                          : ::fnmatch(o.cells.c_str(), cell.name.c_str(), 0) == 0;
      if (chosen) selected.push_back(&cell);
    }
    if (selected.empty()) {
      problems.push_back("--set " + o.spec + ": " +
                         (o.cells.empty() ? "no cell has --" + o.key + " (name the cells: CELLS:" + o.key + "=...)"
                                          : "no cell's name matches '" + o.cells + "'"));
      continue;
    }
    std::string problem;  // the first selected cell's that has one
    for (auto it = selected.begin(); problem.empty() && it != selected.end(); ++it)
      problem = cell_problem(**it, o, check);
    if (!problem.empty()) {
      problems.push_back("--set " + o.spec + ": " + problem);
      continue;
    }
    for (auto* cell : selected) set_option(*cell, o);
    recipe.overrides.push_back(o.spec);
  }
  core::throw_if_problems(problems);
}

}  // namespace normlab::recipe
