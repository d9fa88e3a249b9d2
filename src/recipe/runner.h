// `normlab run`: runs a recipe's cells one after another, each as a subprocess of the same
// binary in DIR/cells/NAME/ (docs/recipes.md).
//
// DIR/recipe.toml         the recipe as run (the report reads its claims from here)
// DIR/run.json            scale, data, every cell's command line
// DIR/data/               the synthetic task, when the recipe uses it and no data was given
// DIR/cells/NAME/cell.log the cell's stdout and stderr (appended to on every attempt)
// DIR/cells/NAME/cell.json command line, exit code, status ok|failed|diverged, wall_s (the
//                         last file a cell gets: a cell with one is finished and skipped)
// DIR/summary.csv         one row per cell
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "recipe/recipe.h"
#include "recipe/results.h"

namespace normlab::recipe {

struct RunOptions {
  std::string out;                 // DIR
  Scale scale = Scale::kCpu;
  std::string data;                // DIR holding train/valid/test.{src,tgt} (empty: see below)
  std::string train, valid, test;  // explicit prefixes (override `data`); with neither, the
                                   // recipe's [synth] task is generated into DIR/data
  std::string src = "src", tgt = "tgt";  // language suffixes
  bool retry_failed = false;       // run failed cells again instead of skipping them
  bool dry_run = false;            // print each cell's name and command line, run and write nothing
  std::vector<std::string> cell_globals;  // appended to every cell's command (--threads, --device)
  std::string executable = "/proc/self/exe";
};

// The problem with `--key` for `command` ("" when the subcommand has that option);
// `key` empty asks whether the subcommand exists. The app answers from its CLI definition.
using OptionChecker = std::function<std::string(const std::string& command, const std::string& key)>;

// Checks every cell's command and options first (FILE:LINE messages, std::invalid_argument),
// then runs the unfinished cells (with dry_run: prints "NAME<TAB>COMMAND LINE" per cell on
// stdout and returns no results). A failing or diverging cell is recorded and the next one
// runs. Returns every cell's result, in recipe order; writes DIR/summary.csv.
std::vector<CellResult> run_recipe(const Recipe& recipe, const RunOptions& options, const OptionChecker& check);

// summary.csv's text: cell, command, status, exit_code, wall_s, the grid keys, then the metrics.
std::string summary_csv(const std::vector<CellResult>& cells);

}  // namespace normlab::recipe
