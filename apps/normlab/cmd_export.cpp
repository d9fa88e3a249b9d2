// `normlab export`: weights.pt (torch.load-able dict) and weights.json for other tools.
#include <iostream>

#include "commands.h"
#include "model/checkpoint.h"
#include "model/export.h"
#include "train/loss.h"

namespace normlab::app {

Runner add_export_command(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand("export", "write weights.pt and weights.json for PyTorch users");
  struct Options {
    std::string checkpoint, out, formula = "uniform";
    double label_smoothing = 0.1;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--checkpoint", o->checkpoint, "normlab checkpoint")->required();
  cmd->add_option("--out", o->out, "weights file to write (.pt); the manifest goes beside it (.json)")
      ->required();
  cmd->add_option("--label-smoothing", o->label_smoothing, "label smoothing eps to record")
      ->capture_default_str();
  cmd->add_option("--ls-formula", o->formula, "uniform|exclusive (docs/conventions.md)")
      ->capture_default_str();
  return [o] {
    const auto formula = train::parse_label_smoothing_formula(o->formula);
    auto loaded = model::load_model(o->checkpoint);
    model::export_weights(loaded.model, o->out,
                          {{"label_smoothing",
                            {{"formula", train::to_string(formula)}, {"eps", o->label_smoothing}}}});
    std::cerr << "normlab export: " << o->out << "\n";
  };
}

}  // namespace normlab::app
