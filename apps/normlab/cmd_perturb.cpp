// `normlab perturb`: output change against depth under a small change of every weight matrix
// (Liu et al. 2020; docs/probe.md).
#include <optional>

#include "analysis/perturb.h"
#include "commands.h"
#include "core/dir_lock.h"
#include "input_options.h"
#include "model_options.h"
#include "precision_option.h"

namespace normlab::app {

Runner add_perturb_command(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand("perturb", "output change under a small weight change, against depth (Liu et al. 2020)");
  struct Options {
    analysis::PerturbConfig config;
    ModelOptions model;
    std::string delta = "sign";
    std::string precision = "fp32";
  };
  auto o = std::make_shared<Options>();
  auto& c = o->config;
  o->model.add_to(*cmd, /*vocab_options=*/false);
  add_input_options(*cmd, c.inputs);
  const std::string g = "Perturb";
  auto* schemes = cmd->add_option("--schemes", c.schemes, "schemes, comma-separated (default: --scheme)")
                      ->delimiter(',')->group(g);
  cmd->add_option("--depths", c.depths, "encoder = decoder layers, comma-separated")->delimiter(',')
      ->capture_default_str()->group(g);
  cmd->add_option("--delta", o->delta, "sign: -scale*sign(N(0,1)); adam: one Adam step")
      ->capture_default_str()->group(g);
  cmd->add_option("--scale", c.scale, "size of the sign perturbation")->capture_default_str()->group(g);
  cmd->add_option("--lr", c.lr, "learning rate of the Adam step")->capture_default_str()->group(g);
  cmd->add_option("--label-smoothing", c.label_smoothing, "eps of the Adam step's loss")
      ->capture_default_str()->group(g);
  cmd->add_option("--seeds", c.seeds, "fresh initialisations")->capture_default_str()->group(g);
  cmd->add_option("--batches", c.batches, "batches the outputs are compared on")->capture_default_str()->group(g);
  cmd->add_option("--seed", c.seed, "first seed")->capture_default_str()->group(g);
  cmd->add_option("--out", c.out, "output folder")->group(g);
  add_precision_option(*cmd, o->precision);
  return [o, schemes] {
    require_fp32(o->precision,
                 "perturb measures output changes of ~1e-4 relative, below bf16's resolution (2^-8) "
                 "and near fp16's; it runs in fp32");
    auto& c = o->config;
    c.model = o->model.resolve(/*vocab_from_data=*/true);
    if (schemes->count() == 0) c.schemes = {o->model.scheme_name()};
    c.overrides = o->model.scheme_overrides();
    c.delta = analysis::parse_delta_kind(o->delta);
    c.inputs.fit_model(c.model);
    std::optional<core::DirLock> lock;  // one writer per OUT (an empty --out is run_perturb's to report)
    if (!c.out.empty()) lock.emplace(c.out, "normlab perturb");
    analysis::run_perturb(c);
  };
}

}  // namespace normlab::app
