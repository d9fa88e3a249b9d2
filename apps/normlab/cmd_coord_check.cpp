// `normlab coord-check`: muP's coordinate check (Yang et al. 2021; mup/coord_check.py), every
// activation's mean |x| after a few updates against the width, under sp, mup and u-mup
// (docs/width.md).
#include <iostream>
#include <optional>

#include "analysis/coord_check.h"
#include "commands.h"
#include "core/dir_lock.h"
#include "core/problems.h"
#include "model_options.h"

namespace normlab::app {

Runner add_coord_check_command(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand("coord-check", "muP's coordinate check: activation sizes against width, sp, mup and u-mup");
  struct Options {
    analysis::CoordCheckConfig config;
    ModelOptions model;
    std::string optimizer = "adam";
    std::vector<std::string> parametrisations = {"sp", "mup"};
  };
  auto o = std::make_shared<Options>();
  auto& c = o->config;
  o->model.add_to(*cmd);
  const std::string g = "Coordinate check";
  cmd->add_option("--widths", c.widths, "d_model of each model, ascending, comma-separated (F scales with it)")
      ->delimiter(',')->required()->group(g);
  cmd->add_option("--steps", c.steps, "forward passes recorded, an update after each but the last")
      ->capture_default_str()->group(g);
  cmd->add_option("--seeds", c.seeds, "initialisations per width, averaged")->capture_default_str()->group(g);
  cmd->add_option("--seed", c.seed, "first seed (and the batch's)")->capture_default_str()->group(g);
  cmd->add_option("--optimizer", o->optimizer, "adam|adamw|sgd (mup's MuAdam, MuAdamW, MuSGD under mup)")
      ->capture_default_str()->group(g);
  cmd->add_option("--parametrisations", o->parametrisations,
                  "sp|mup|u-mup, comma-separated: the models built at each width (u-mup: docs/width.md)")
      ->delimiter(',')->capture_default_str()->group(g);
  cmd->add_option("--lr", c.lr, "the learning rate at every width")->capture_default_str()->group(g);
  cmd->add_option("--sentences", c.sentences, "random sentences in the batch")->capture_default_str()->group(g);
  cmd->add_option("--length", c.length, "tokens per random sentence")->capture_default_str()->group(g);
  cmd->add_option("--out", c.out, "output folder")->required()->group(g);
  return [o] {
    auto& c = o->config;
    c.model = o->model.resolve();
    if (c.model.parametrisation == model::Parametrisation::kMup) c.base_width = c.model.mup_base_width;
    c.optimizer = train::parse_optimizer_kind(o->optimizer);
    c.parametrisations.clear();
    for (const auto& p : o->parametrisations)
      c.parametrisations.push_back(model::parse_parametrisation(p, "--parametrisations"));
    core::throw_if_problems(c.problems());
    core::DirLock lock(c.out, "normlab coord-check");
    const auto records = analysis::coord_check(c);
    analysis::write_coord_check(records, c.out);
    std::cerr << "normlab coord-check: " << records.size() << " records -> " << c.out << "\n";
  };
}

}  // namespace normlab::app
