// Claim rules (docs/recipes.md#claims): a small language deciding a paper's claim from the
// measured cells, three-valued (true / false / unknown, Kleene's logic):
//
//   rule   := or;  or := and ('or' and)*;  and := not ('and' not)*;  not := 'not' not | atom
//   atom   := '(' rule ')' | STATUS '(' PATTERN ')' | sum CMP sum      CMP: < <= > >=
//   sum    := product (('+'|'-') product)*;  product := value (('*'|'/') value)*
//   value  := NUMBER | METRIC '(' PATTERN ')' | AGG '(' METRIC '(' PATTERN ')' ')'
//           | AGG '(' AGG '(' METRIC '(' PATTERN ')' 'over' KEY ')' ')'   (inner AGG within each
//             group of cells that differ only in the grid key KEY, outer AGG across the groups)
//           | 'json' '(' PATTERN ',' "FILE" ',' "KEY.PATH" ')'
//           | 'csv' '(' PATTERN ',' "FILE" ',' "COLUMN" ',' "AGG" [',' "COL=VALUE ..."] ')'
//   STATUS: ok diverged failed (every matched cell has it);  AGG: min max mean
//   METRIC: recipe::cell_metrics' names;  PATTERN: a cell name or a glob (* ?)
//
// A value that was not measured (cell failed or not run, field absent) makes its comparison
// unknown; so does a comparison whose two sides differ by at most the claim's margin.
#pragma once

#include <string>
#include <vector>

#include "recipe/recipe.h"
#include "recipe/results.h"

namespace normlab::report {

struct Verdict {
  std::string verdict;  // reproduced | not reproduced | inconclusive
  std::string reason;   // the measured values and comparisons that decided it
};

// Throws std::invalid_argument "WHERE: rule '...': what, at column N" for a syntax error.
void check_rule(const std::string& rule, const std::string& where);

// Decides `claim` on `cells` (the folders under cells_dir).
Verdict evaluate_claim(const recipe::Claim& claim, const std::vector<recipe::CellResult>& cells,
                       const std::string& where);

}  // namespace normlab::report
