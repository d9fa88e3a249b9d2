// `normlab run --set [CELLS:]KEY=VALUE` (docs/recipes.md, "Overrides"): a recipe's cells with one
// option changed from the command line, as Hydra's and fairseq's overrides change a config, so
// that a longer or otherwise changed run of a recipe needs no edited copy of it.
#pragma once

#include <string>
#include <vector>

#include "recipe/recipe.h"
#include "recipe/runner.h"

namespace normlab::recipe {

struct Override {
  std::string spec;   // as given, for messages
  std::string cells;  // a glob over cell names (* ?); empty: every cell that has --key
  std::string key;    // without the leading "--"
  std::string value;  // "true": the bare flag; "false": the option left out
};

// "[CELLS:]KEY=VALUE": CELLS ends at the first ':' when KEY=VALUE follows it (cell names hold '='
// but no ':'); a value holding ':' with every cell's option: "*:KEY=VALUE". Throws
// std::invalid_argument "--set SPEC: ..." when a part is missing.
Override parse_override(const std::string& spec);

// Sets each override's option in the cells it selects, in order (a later one wins), and records
// the specs in recipe.overrides. A glob selects the cells whose name it matches (the option added
// where a cell lacks it); no glob, every cell that has the option. Where the option is a grid key
// of a selected cell, VALUE lists the grid's values ("2500,5000"): each group of selected cells
// that differ only in that key becomes one cell per value, named as the recipe names them, where
// the group's first cell was. Throws std::invalid_argument "--set SPEC: ..." (every problem at
// once) when it selects no cell, names an option the cell's command does not have (`check`, as
// for the recipe's own options), lists a grid value no cell name may hold, or would give two
// cells one name.
void apply_overrides(Recipe& recipe, const std::vector<Override>& overrides, const OptionChecker& check);

}  // namespace normlab::recipe
