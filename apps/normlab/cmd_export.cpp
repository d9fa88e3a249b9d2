// `normlab export`: weights.pt (torch.load-able dict) and weights.json for other tools, or with
// --format hf a folder that Hugging Face transformers loads as GPT-2 or BERT (docs/conventions.md).
#include <iostream>

#include "commands.h"
#include "model/checkpoint.h"
#include "model/export.h"
#include "model/hf_export.h"
#include "train/loss.h"

namespace normlab::app {

Runner add_export_command(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand("export", "write weights.pt and weights.json for PyTorch users");
  struct Options {
    std::string checkpoint, out, formula = "uniform", format = "normlab";
    double label_smoothing = 0.1;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--checkpoint", o->checkpoint, "normlab checkpoint")->required();
  cmd->add_option("--out", o->out,
                  "weights file to write (.pt; the manifest goes beside it, .json), or with --format hf a folder")
      ->required();
  cmd->add_option("--format", o->format,
                  "normlab: weights.pt + weights.json; hf: config.json + model.safetensors of transformers' "
                  "GPT2LMHeadModel (decoder-only Pre-LN models) or BertForMaskedLM (encoder-only Post-LN models "
                  "in BERT's form)")
      ->capture_default_str()->check(CLI::IsMember({"normlab", "hf"}));
  cmd->add_option("--label-smoothing", o->label_smoothing, "label smoothing eps to record")
      ->capture_default_str();
  cmd->add_option("--ls-formula", o->formula, "uniform|exclusive (docs/conventions.md)")
      ->capture_default_str();
  return [o] {
    const auto formula = train::parse_label_smoothing_formula(o->formula);
    auto loaded = model::load_model(o->checkpoint);
    if (o->format == "hf") {
      model::export_hf(loaded.model, o->out);
      std::cerr << "normlab export: " << o->out << "/config.json, " << o->out << "/model.safetensors\n";
      return;
    }
    model::export_weights(loaded.model, o->out,
                          {{"label_smoothing",
                            {{"formula", train::to_string(formula)}, {"eps", o->label_smoothing}}}});
    std::cerr << "normlab export: " << o->out << "\n";
  };
}

}  // namespace normlab::app
