// `normlab run`: runs a recipe's cells, up to --jobs at once, each as a subprocess of the same
// binary in DIR/cells/NAME/ (docs/recipes.md). Several runners (--shard K/N, on machines that
// share DIR's file system) may run one recipe into one DIR at the same time.
//
// DIR/recipe.toml         the recipe as run (the report reads its claims from here)
// DIR/run.json            scale, data, every cell's command line (the same for every shard)
// DIR/data/               the synthetic task, when the recipe uses it and no data was given
// DIR/.lock               held by a runner only while it writes the files above or summary.csv
// DIR/locks/NAME/.lock    held by the runner that runs cell NAME, for as long as it runs
// DIR/cells/NAME/cell.log the cell's stdout and stderr (appended to on every attempt)
// DIR/cells/NAME/cell.json command line, exit code, status ok|failed|diverged, wall_s, start and
//                         end times (the last file a cell gets: a cell with one is finished
//                         and skipped)
// DIR/summary.csv         one row per cell of the recipe, whoever ran it
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "recipe/recipe.h"
#include "recipe/results.h"

namespace normlab::recipe {

// Which of a recipe's cells one runner takes: those whose index i (recipe order, from 0) has
// i % count == index - 1.
struct Shard {
  int index = 1;  // K, from 1
  int count = 1;  // N
};

// "K/N" with 1 <= K <= N; throws std::invalid_argument naming --shard for anything else.
Shard parse_shard(const std::string& text);

struct RunOptions {
  std::string out;                 // DIR
  Scale scale = Scale::kCpu;
  std::string data;                // DIR holding train/valid/test.{src,tgt} (empty: see below)
  std::string train, valid, test;  // explicit prefixes (override `data`); with neither, the
                                   // recipe's [synth] task is generated into DIR/data
  std::string src = "src", tgt = "tgt";  // language suffixes
  bool retry_failed = false;       // run failed cells again instead of skipping them
  bool dry_run = false;            // print each cell's name and command line, run and write nothing
  int jobs = 1;                    // cells run at once
  int threads = 0;                 // the runner's CPU threads, divided between its jobs (0: available CPUs)
  Shard shard;                     // this runner's share of the cells (default: all)
  std::vector<std::string> only;   // --cells: globs (* ?) over cell names; the runner takes the cells
                                   // that match one (empty: every cell), within its shard
  std::vector<std::string> cell_globals;  // appended to every cell's command (--device)
  std::string executable = "/proc/self/exe";
};

// The problem with `--key` for `command` ("" when the subcommand has that option);
// `key` empty asks whether the subcommand exists. The app answers from its CLI definition.
using OptionChecker = std::function<std::string(const std::string& command, const std::string& key)>;

// Checks every cell's command and options, and that no finished cell in DIR ran another command
// line, first (every problem at once, std::invalid_argument), then runs this shard's unfinished
// cells, up to `jobs` at once, each with --threads max(1, threads / min(jobs, cells)) unless the
// recipe sets the cell's threads (with dry_run: prints "NAME<TAB>COMMAND LINE" per cell of the
// shard on stdout and returns no results). With `only`, of those cells just the ones whose name
// matches a glob (a glob that matches no cell of the recipe: std::invalid_argument naming
// --cells). A cell that names another cell's folder ({cells}/X) waits for X. A failing or diverging cell is recorded and the others run; a cell that another
// runner holds, or that waits for a cell nobody is running, is skipped (not a failure).
// Returns the result of every cell of the recipe as found in DIR at the end, in recipe order,
// and writes them to DIR/summary.csv.
std::vector<CellResult> run_recipe(const Recipe& recipe, const RunOptions& options, const OptionChecker& check);

// summary.csv's text: cell, command, status, exit_code, wall_s, the grid keys, then the metrics.
std::string summary_csv(const std::vector<CellResult>& cells);

}  // namespace normlab::recipe
