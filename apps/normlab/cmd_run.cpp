// `normlab run`: runs a recipe's cells (src/recipe; docs/recipes.md), each as a subprocess
// of this binary, checking every cell's command and options against this CLI first.
#include <iostream>
#include <memory>

#include "commands.h"
#include "core/problems.h"
#include "recipe/overrides.h"
#include "recipe/runner.h"
#include "report/claims.h"

namespace normlab::app {

Runner add_run_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("run",
                                 "run a recipe's cells into DIR, --jobs N at once, or --shard K/N of them; "
                                 "re-running resumes, skipping finished cells");
  struct Options {
    std::string recipe, scale = "cpu", shard = "1/1";
    std::vector<std::string> sets;  // --set, as given
    recipe::RunOptions run;
  };
  auto o = std::make_shared<Options>();
  auto& r = o->run;
  cmd->add_option("recipe", o->recipe, "the recipe (TOML)")->required();
  cmd->add_option("--out", r.out, "output folder DIR")->required();
  cmd->add_option("--scale", o->scale, "smoke (CI, seconds), cpu (2 cores, ~1 h), paper (the papers' sizes)")
      ->capture_default_str();
  const std::string data = "Data (default: the recipe's synthetic task, generated into DIR/data)";
  cmd->add_option("--data", r.data, "folder with train/valid/test.{SRC,TGT} (plain or .gz)")->group(data);
  cmd->add_option("--train", r.train, "training text PREFIX (overrides --data)")->group(data);
  cmd->add_option("--valid", r.valid, "validation text PREFIX")->group(data);
  cmd->add_option("--test", r.test, "test text PREFIX")->group(data);
  cmd->add_option("--src", r.src, "source language suffix ({src})")->capture_default_str()->group(data);
  cmd->add_option("--tgt", r.tgt, "target language suffix ({tgt})")->capture_default_str()->group(data);
  cmd->add_option("--set", o->sets,
                  "[CELLS:]KEY=VALUE, repeatable: the cells' --KEY set to VALUE (true: the bare flag, false: "
                  "left out; a grid key: its values, V1,V2,...); CELLS a glob over cell names, else every cell "
                  "with --KEY (docs/recipes.md#overrides)")
      ->allow_extra_args(false);
  cmd->add_option("--cells", r.only,
                  "GLOB, repeatable: run only the cells whose name matches one (* ?; quote it), e.g. 'w0_*'; "
                  "with --shard, of the shard's cells")
      ->allow_extra_args(false);
  cmd->add_flag("--retry-failed", r.retry_failed, "run failed cells again (finished ones are skipped)");
  cmd->add_flag("--dry-run", r.dry_run, "print every cell's name and command line; run and write nothing");
  const std::string parallel = "Parallel cells (docs/recipes.md#parallel-cells)";
  cmd->add_option("--jobs", r.jobs,
                  "run up to N cells at once; each gets --threads max(1, T/N) of the runner's --threads T "
                  "(default: the available CPUs)")
      ->capture_default_str()
      ->group(parallel);
  cmd->add_option("--shard", o->shard,
                  "K/N: run only the cells whose index i (recipe order, from 0) has i % N == K-1, so that N "
                  "runners on machines sharing DIR split the recipe; a cell another runner holds is skipped")
      ->capture_default_str()
      ->group(parallel);

  CLI::App* root = &app;
  return [o, root, &global] {
    std::vector<std::string> problems;
    try {
      o->run.scale = recipe::parse_scale(o->scale);
    } catch (const std::invalid_argument& e) {
      problems.push_back(e.what());
    }
    try {
      o->run.shard = recipe::parse_shard(o->shard);
    } catch (const std::invalid_argument& e) {
      problems.push_back(e.what());
    }
    core::throw_if_problems(problems);
    auto rec = recipe::load_recipe(o->recipe, o->run.scale);
    for (const auto& claim : rec.claims)
      report::check_rule(claim.rule, rec.path + ":" + std::to_string(claim.line));
    o->run.threads = global.threads;
    if (global.device != "auto") o->run.cell_globals.insert(o->run.cell_globals.end(), {"--device", global.device});
    // Cells may run any subcommand but these (recursion, or no --out): their options are
    // checked against the subcommand's own definition.
    auto check = [root](const std::string& command, const std::string& key) -> std::string {
      if (command == "run" || command == "report") return "a cell cannot run '" + command + "'";
      CLI::App* sub = nullptr;
      for (auto* s : root->get_subcommands([](CLI::App*) { return true; }))
        if (s->get_name() == command) sub = s;
      if (!sub) return "unknown command '" + command + "'";
      if (key.empty() || key == "threads" || key == "device") return "";
      if (!sub->get_option_no_throw("--" + key)) return command + " has no option --" + key;
      return "";
    };
    std::vector<recipe::Override> overrides;
    for (const auto& spec : o->sets) overrides.push_back(recipe::parse_override(spec));
    recipe::apply_overrides(rec, overrides, check);
    const auto results = recipe::run_recipe(rec, o->run, check);
    if (o->run.dry_run) return;
    int failed = 0;
    for (const auto& c : results) failed += c.status == "failed";
    if (failed > 0)
      std::cerr << "run: " << failed << " cell(s) failed; their logs are DIR/cells/NAME/cell.log\n";
    std::cerr << "run: done; `normlab report " << o->run.out << "` draws the figures and decides the claims\n";
  };
}

}  // namespace normlab::app
