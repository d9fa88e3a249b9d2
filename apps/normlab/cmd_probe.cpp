// `normlab probe`: gradients, hidden-state norms and LayerNorm Jacobians at initialisation;
// `--sweep`: Theorem 1's last-layer gradient against depth and width (docs/probe.md).
#include <optional>

#include "analysis/probe.h"
#include "commands.h"
#include "core/dir_lock.h"
#include "core/runtime.h"
#include "dist_options.h"
#include "input_options.h"
#include "model_options.h"
#include "precision_option.h"

namespace normlab::app {

Runner add_probe_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("probe", "gradient and hidden-state norms at initialisation (Xiong et al. 2020)");
  struct Options {
    analysis::ProbeConfig config;
    ModelOptions model;
    bool no_dropout = false;
    std::string precision = "fp32";
    std::vector<double> lr_range{1e-6, 1e3};
    DistCliOptions dist;
  };
  auto o = std::make_shared<Options>();
  auto& c = o->config;
  o->model.add_to(*cmd, /*vocab_options=*/false);
  add_input_options(*cmd, c.inputs);
  const std::string g = "Probe";
  auto* schemes = cmd->add_option("--schemes", c.schemes, "schemes to probe, comma-separated (default: --scheme)")
                      ->delimiter(',')->group(g);
  auto* analysis = cmd->add_flag("--analysis-setting", c.analysis_setting,
                "Xiong §3.3: one head, F=C, W^Q=W^K=0, Gaussian inputs, encoder stack only")->group(g);
  cmd->add_option("--analysis-stack", c.analysis_stack,
                  "encoder|decoder: the stack the analysis setting runs (default: the encoder where there is "
                  "one); decoder of an encoder-decoder: the encoder, then the decoder with cross-attention")
      ->needs(analysis)->group(g);
  cmd->add_option("--seeds", c.seeds, "fresh initialisations")->capture_default_str()->group(g);
  cmd->add_option("--batches", c.batches, "mini-batches per initialisation")->capture_default_str()->group(g);
  cmd->add_option("--seed", c.seed, "first seed")->capture_default_str()->group(g);
  cmd->add_flag("--no-dropout", o->no_dropout, "evaluation-mode forward (default: dropout on, as in training)")
      ->group(g);
  cmd->add_option("--label-smoothing", c.label_smoothing, "eps of the loss")->capture_default_str()->group(g);
  add_precision_option(*cmd, o->precision);
  cmd->add_option("--power-iterations", c.power_iterations, "LayerNorm Jacobian: power iterations")
      ->capture_default_str()->group(g);
  cmd->add_option("--jacobian-tokens", c.jacobian_tokens, "LayerNorm Jacobian: tokens per LayerNorm")
      ->capture_default_str()->group(g);
  cmd->add_option("--out", c.out, "output folder")->group(g);
  auto* critical_lr = cmd->add_flag("--critical-lr", c.critical_lr,
                "the critical learning rate of SGD and Adam at initialisation (bisection) beside 2/lambda_1 and "
                "38/lambda_1(P^-1 H): OUT/critical_lr.csv (docs/curvature.md)")->group(g);
  // An option that only qualifies another is refused without it (issue 34: unused options).
  cmd->add_option("--critical-lr-range", o->lr_range, "LO,HI: the bisection's bracket")
                    ->delimiter(',')->expected(2)->capture_default_str()->needs(critical_lr)->group(g);
  cmd->add_option("--critical-lr-tol", c.critical_lr_tol, "relative width of the final bracket")
      ->capture_default_str()->needs(critical_lr)->group(g);
  cmd->add_option("--lanczos-steps", c.lanczos_steps, "--critical-lr: Lanczos steps for each lambda_1")
      ->capture_default_str()->needs(critical_lr)->group(g);
  auto* sweep = cmd->add_flag("--sweep", c.sweep, "Theorem 1: last FFN weight's gradient norm against L and C")
                    ->group(g);
  cmd->add_option("--sweep-layers", c.sweep_layers, "depths, at C = --d-model")->delimiter(',')
      ->capture_default_str()->needs(sweep)->group(g);
  cmd->add_option("--sweep-d", c.sweep_d, "widths, at L = --encoder-layers")->delimiter(',')
      ->capture_default_str()->needs(sweep)->group(g);
  add_dist_options(*cmd, o->dist);
  return [o, schemes, &global] {
    auto& c = o->config;
    c.model = o->model.resolve(/*vocab_from_data=*/true);
    if (schemes->count() == 0) c.schemes = {o->model.scheme_name()};
    c.overrides = o->model.scheme_overrides();
    c.dropout = !o->no_dropout;
    const auto device = core::resolve_device(global.device);
    c.precision = model::parse_precision(o->precision, device);
    warn_if_emulated(c.precision, device);
    c.inputs.fit_model(c.model);
    c.critical_lr_lo = o->lr_range.at(0);
    c.critical_lr_hi = o->lr_range.at(1);
    auto job = join_job(o->dist, device);  // under a launcher: seeds split across ranks
    std::optional<core::DirLock> lock;  // one writer per OUT, rank 0 (an empty --out is run_probe's to report)
    if (!c.out.empty() && job.group.is_main()) lock.emplace(c.out, "normlab probe");
    analysis::run_probe(c, job.group);
  };
}

}  // namespace normlab::app
