#include "recipe/overrides.h"

#include <fnmatch.h>

#include <algorithm>
#include <set>
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

// A grid override's values: VALUE split at ',' (grid values, being parts of cell names, hold none).
std::vector<std::string> grid_values(const Override& o) {
  std::vector<std::string> values;
  size_t begin = 0;
  while (true) {
    const auto comma = o.value.find(',', begin);
    values.push_back(o.value.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
    if (comma == std::string::npos) return values;
    begin = comma + 1;
  }
}

// Why `o` cannot apply to `cell` ("" when it can).
std::string cell_problem(const Cell& cell, const Override& o, const OptionChecker& check) {
  if (auto p = check(cell.command, o.key); !p.empty()) return "cell '" + cell.name + "': " + p;
  if (!is_grid_key(cell, o.key)) return "";
  for (const auto& v : grid_values(o))
    if (v.empty() || !valid_cell_name(grid_suffix(o.key, v)))
      return "grid value '" + v + "' of --" + o.key + ": values are listed with ',' and may hold letters, digits, . _ - = +";
  return "";
}

// The [[cells]] table's name of `cell`: its name without the "_KEY=VALUE" of each grid key.
std::string table_name(const Cell& cell) {
  size_t suffix = 0;
  for (const auto& [k, v] : cell.grid) suffix += grid_suffix(k, v).size();
  return cell.name.substr(0, cell.name.size() - suffix);
}

// What the cells a grid override replaces together share: the table and every other grid value.
std::string group_of(const Cell& cell, const std::string& key) {
  std::string group = table_name(cell);
  for (const auto& [k, v] : cell.grid)
    if (k != key) group += grid_suffix(k, v);
  return group;
}

// `cell` at grid value `value` of `o.key`: its grid point, its name, and the option (true the
// flag, false left out, as a grid's own values).
Cell at_grid_value(Cell cell, const Override& o, const std::string& value) {
  cell.name = table_name(cell);
  for (auto& [k, v] : cell.grid) {
    if (k == o.key) v = value;
    cell.name += grid_suffix(k, v);
  }
  Override one = o;
  one.value = value;
  set_option(cell, one);
  return cell;
}

// Every group of selected cells that has `o.key` in its grid and differs only in it becomes one
// cell per listed value, in their order, where the group's first cell was.
void regrid(std::vector<Cell>& cells, const std::vector<bool>& selected, const Override& o) {
  const auto values = grid_values(o);
  std::vector<Cell> out;
  std::set<std::string> groups;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!selected[i] || !is_grid_key(cells[i], o.key)) {
      out.push_back(std::move(cells[i]));
    } else if (groups.insert(group_of(cells[i], o.key)).second) {
      for (const auto& v : values) out.push_back(at_grid_value(cells[i], o, v));
    }
  }
  cells = std::move(out);
}

// The first name two cells share, or "".
std::string repeated_name(const std::vector<Cell>& cells) {
  std::set<std::string> names;
  for (const auto& cell : cells)
    if (!names.insert(cell.name).second) return cell.name;
  return "";
}

}  // namespace

void apply_overrides(Recipe& recipe, const std::vector<Override>& overrides, const OptionChecker& check) {
  std::vector<std::string> problems;
  for (const auto& o : overrides) {
    std::vector<bool> selected;
    for (auto& cell : recipe.cells)
      selected.push_back(o.cells.empty() ? find_option(cell, o.key) != nullptr
                                         : ::fnmatch(o.cells.c_str(), cell.name.c_str(), 0) == 0);
    if (std::find(selected.begin(), selected.end(), true) == selected.end()) {
      problems.push_back("--set " + o.spec + ": " +
                         (o.cells.empty() ? "no cell has --" + o.key + " (name the cells: CELLS:" + o.key + "=...)"
                                          : "no cell's name matches '" + o.cells + "'"));
      continue;
    }
    std::string problem;  // the first selected cell's that has one
    for (size_t i = 0; problem.empty() && i < selected.size(); ++i)
      if (selected[i]) problem = cell_problem(recipe.cells[i], o, check);
    if (!problem.empty()) {
      problems.push_back("--set " + o.spec + ": " + problem);
      continue;
    }
    for (size_t i = 0; i < selected.size(); ++i)
      if (selected[i] && !is_grid_key(recipe.cells[i], o.key)) set_option(recipe.cells[i], o);
    regrid(recipe.cells, selected, o);
    if (auto name = repeated_name(recipe.cells); !name.empty()) {
      problems.push_back("--set " + o.spec + ": two cells would be named '" + name + "'");
      continue;
    }
    recipe.overrides.push_back(o.spec);
  }
  core::throw_if_problems(problems);
}

}  // namespace normlab::recipe
