// `normlab advise`: does this configuration need warm-up at its target lr, and how much?
// Measured at initialisation (docs/curvature.md, src/analysis/advise.h), or with --warmup-gate
// from the first 2% of training (`train --warmup-gate-only`, docs/warmup.md).
#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "analysis/advise.h"
#include "commands.h"
#include "core/dir_lock.h"
#include "input_options.h"
#include "model_options.h"

namespace normlab::app {

std::vector<std::string> advise_from_probe(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  size_t at = 1;  // the subcommand: the first word that is neither a global option nor its value
  while (at < args.size() && args[at].rfind('-', 0) == 0)
    at += (args[at] == "--threads" || args[at] == "--device") ? 2 : 1;
  const auto gate = [](const std::string& a) { return a == "--warmup-gate" || a.rfind("--warmup-gate=", 0) == 0; };
  if (at >= args.size() || args[at] != "advise" || std::none_of(args.begin() + at, args.end(), gate)) return args;
  args[at] = "train";
  if (std::find(args.begin() + at, args.end(), "--warmup-gate-only") == args.end()) args.push_back("--warmup-gate-only");
  return args;
}

Runner add_advise_command(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand("advise",
                                 "does this configuration need warm-up at its learning rate? Measured at initialisation; "
                                 "with --warmup-gate G and train's options instead, from the first 2% of training "
                                 "(train --warmup-gate-only; docs/warmup.md)");
  struct Options {
    analysis::AdviseConfig config;
    ModelOptions model;
    std::string optimizer = "adam";
    std::vector<double> betas{0.9, 0.98};
    std::vector<double> lr_range{1e-6, 1e3};
  };
  auto o = std::make_shared<Options>();
  auto& c = o->config;
  o->model.add_to(*cmd, /*vocab_options=*/false);
  add_input_options(*cmd, c.inputs);
  const std::string g = "Advise";
  cmd->add_option("--optimizer", o->optimizer, train::optimizer_choices() + " (the run's)")->capture_default_str()->group(g);
  cmd->add_option("--betas", o->betas, "Adam's beta1,beta2")->delimiter(',')->expected(2)->capture_default_str()->group(g);
  cmd->add_option("--momentum", c.optimizer.momentum, "sgd's momentum")->capture_default_str()->group(g);
  cmd->add_option("--lr", c.lr, "the target (peak) learning rate")->required()->group(g);
  cmd->add_option("--seeds", c.seeds, "fresh initialisations")->capture_default_str()->group(g);
  cmd->add_option("--batches", c.batches, "probe batches per initialisation")->capture_default_str()->group(g);
  cmd->add_option("--seed", c.seed, "first seed")->capture_default_str()->group(g);
  cmd->add_option("--label-smoothing", c.label_smoothing, "eps of the loss")->capture_default_str()->group(g);
  cmd->add_option("--lanczos-steps", c.lanczos_steps, "Lanczos steps for the curvature")->capture_default_str()->group(g);
  cmd->add_option("--critical-lr-range", o->lr_range, "LO,HI: the bisection's bracket")
      ->delimiter(',')->expected(2)->capture_default_str()->group(g);
  cmd->add_option("--critical-lr-tol", c.lr_tol, "relative width of the final bracket")->capture_default_str()->group(g);
  cmd->add_option("--out", c.out, "output folder (advise.json)")->group(g);
  return [o] {
    auto& c = o->config;
    c.model = o->model.resolve(/*vocab_from_data=*/true);
    c.model.dropout = c.model.attention_dropout = c.model.activation_dropout = 0.0;  // measured with dropout off
    c.inputs.fit_model(c.model);
    c.optimizer.kind = train::parse_optimizer_kind(o->optimizer);
    c.optimizer.betas = {o->betas.at(0), o->betas.at(1)};
    c.lr_lo = o->lr_range.at(0);
    c.lr_hi = o->lr_range.at(1);
    std::optional<core::DirLock> lock;
    if (!c.out.empty()) lock.emplace(c.out, "normlab advise");
    analysis::run_advise(c);
  };
}

}  // namespace normlab::app
