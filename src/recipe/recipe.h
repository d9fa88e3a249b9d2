// Recipes (docs/recipes.md): a TOML file that lists cells, each a normlab subcommand with its
// options, expanded over grids and adjusted per scale, plus the claims the report checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/synthetic.h"

namespace normlab::recipe {

enum class Scale { kSmoke, kCpu, kPaper };

Scale parse_scale(const std::string& name);  // smoke|cpu|paper; throws std::invalid_argument
std::string scale_name(Scale scale);

// One command-line option of a cell: --key value (a TOML true gives the bare flag --key).
struct CellOption {
  std::string key;    // without the leading "--"
  std::string value;  // placeholders ({cell}, {train}, ...) not yet substituted
  bool flag = false;  // a boolean true: "--key" alone
  int64_t line = 0;   // where the recipe set it, for FILE:LINE messages
};

struct Cell {
  std::string name;     // folder name under DIR/cells: base name + "_key=value" per grid key
  std::string command;  // normlab subcommand (train, probe, hessian, perturb, evaluate, ...)
  std::vector<CellOption> options;                          // sorted by key, one per key
  std::vector<std::pair<std::string, std::string>> grid;   // this cell's grid point, in order
  int64_t ranks = 1;    // processes, launched as torchrun --standalone would (train, hessian)
  int64_t line = 0;     // the [[cells]] table
};

struct Claim {
  std::string text;    // what the paper claims, in words
  std::string rule;    // the rule (report/claims.h) deciding it from the measured cells
  std::string paper;   // the paper's number(s), shown beside ours (may be empty)
  double margin = 0;   // comparisons closer than this are inconclusive
  int64_t line = 0;
};

struct Recipe {
  std::string path;
  std::string title, description, paper;
  std::optional<data::SyntheticConfig> synth;  // the built-in task, when the recipe uses it
  std::vector<Cell> cells;                      // in file order, grids expanded
  std::vector<Claim> claims;
  std::vector<std::string> overrides;           // `run --set` specs applied (recipe/overrides.h)
};

// The most cells a recipe expands to (the paper recipes have at most a few hundred).
constexpr int64_t kMaxCells = 10000;

// Parses and expands `path` at `scale`. Throws std::invalid_argument "FILE:LINE: what" for a
// syntax error, an unknown key, a wrong type, an empty grid, duplicate cell names or more
// than kMaxCells cells (counted before expanding).
Recipe load_recipe(const std::string& path, Scale scale);

// A cell name (a folder under DIR/cells): letters, digits, . _ - = + only (no '/', ':' or ','),
// and not "." or "..".
bool valid_cell_name(const std::string& name);

// What a grid point adds to its cell's name: "_KEY=VALUE" (VALUE "true"/"false" for a flag).
std::string grid_suffix(const std::string& key, const std::string& value);

// Replaces every {name} in `text` by its value from `values`; throws std::invalid_argument
// "FILE:LINE: unknown placeholder {x}" (naming `where`) for others.
std::string substitute(const std::string& text,
                       const std::vector<std::pair<std::string, std::string>>& values,
                       const std::string& where);

}  // namespace normlab::recipe
