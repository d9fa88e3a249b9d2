// Test helper for optimizer_reference.py: replays a recorded sequence of gradients and learning
// rates through normlab's Optimizer (and clip_grad_norm) and writes the parameters after every
// step, so that the script can compare them with torch.optim.
//
// Input (a dict of tensors, torch.save): "param.<name>" initial values, "grad.<k>.<name>" the
// gradient at step k = 1..K (absent: no gradient that step), "lr" (K) the rate of each step.
// Output: "param.<k>.<name>" after step k, "update.<k>.<name>" the recorded update,
// "norm" (K) clip_grad_norm's return values when --clip-norm is given, and after each step k of
// --evaluate-at "x.<k>.<name>", the parameters at the optimiser's evaluation point (moved there
// and back, as the trainer's validation does). --reload-at k: after step k, at the evaluation
// point (as the trainer's checkpoint), the state and the parameters go through a file into a fresh
// optimiser, which then continues.
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "model/checkpoint.h"
#include "train/optimizer.h"

using namespace normlab;

int main(int argc, char** argv) {
  CLI::App app{"replay gradients through normlab's optimiser"};
  std::string in, out, kind = "adamw", betas = "0.9,0.98", fallback = "skip", init_v = "zero", wd_mode = "lr",
                     adjust_lr = "match-rms-adamw";
  train::OptimizerConfig c;
  double clip_norm = -1.0;
  std::vector<int64_t> evaluate_at;
  int64_t reload_at = 0;
  app.add_option("--in", in)->required();
  app.add_option("--out", out)->required();
  app.add_option("--optimizer", kind);
  app.add_option("--betas", betas);
  app.add_option("--eps", c.eps);
  app.add_option("--weight-decay", c.weight_decay);
  app.add_option("--momentum", c.momentum);
  app.add_flag("--nesterov", c.nesterov);
  app.add_option("--radam-fallback", fallback);
  app.add_option("--adam-init-v", init_v);
  app.add_option("--weight-decay-mode", wd_mode);
  app.add_option("--peak-lr", c.peak_lr, "lr_peak of --weight-decay-mode independent (normlab train: --lr)");
  app.add_option("--muon-momentum", c.muon_momentum);
  app.add_flag("--muon-nesterov", c.muon_nesterov, "on by default; --muon-nesterov=false turns it off");
  app.add_option("--muon-ns-steps", c.muon_ns_steps);
  app.add_option("--muon-adjust-lr", adjust_lr);
  app.add_option("--clip-norm", clip_norm, "clip before every step (absent: no clipping)");
  app.add_option("--warmup-steps", c.warmup_steps, "adamw-schedulefree's own warm-up (normlab train: --warmup-steps)");
  app.add_option("--schedule-free-r", c.schedule_free_r);
  app.add_option("--schedule-free-weight-lr-power", c.schedule_free_weight_lr_power);
  app.add_option("--evaluate-at", evaluate_at, "steps after which to record the evaluation point's parameters");
  app.add_option("--reload-at", reload_at, "step after which to reload state and parameters from a file");
  CLI11_PARSE(app, argc, argv);
  try {
    c.kind = train::parse_optimizer_kind(kind);
    c.betas = train::parse_betas(betas);
    c.radam_fallback = train::parse_radam_fallback(fallback);
    c.adam_init_v = train::parse_adam_init_v(init_v);
    c.weight_decay_mode = train::parse_weight_decay_mode(wd_mode);
    c.muon_adjust_lr = train::parse_muon_adjust_lr(adjust_lr);

    const auto data = model::load_tensors(in);
    const auto lrs = data.at("lr").to(torch::kFloat64);
    const int64_t K = lrs.numel();
    train::NamedTensors params;
    for (const auto& [key, t] : data)
      if (key.rfind("param.", 0) == 0)
        params.emplace_back(key.substr(6), t.clone().set_requires_grad(true));
    auto opt = std::make_unique<train::Optimizer>(params, c);
    const std::set<int64_t> evaluated(evaluate_at.begin(), evaluate_at.end());

    model::TensorMap result;
    std::vector<double> norms;
    for (int64_t k = 1; k <= K; ++k) {
      opt->zero_grad();
      for (auto& [name, p] : params) {
        const auto it = data.find("grad." + std::to_string(k) + "." + name);
        if (it != data.end()) p.mutable_grad() = it->second.clone();
      }
      if (clip_norm >= 0.0) norms.push_back(train::clip_grad_norm(params, clip_norm));
      opt->step(lrs[k - 1].item<double>(), /*record_updates=*/true);
      for (const auto& [name, p] : params)
        result["param." + std::to_string(k) + "." + name] = p.detach().clone();
      for (const auto& [name, u] : opt->last_updates())
        result["update." + std::to_string(k) + "." + name] = u;
      if (!evaluated.count(k) && k != reload_at) continue;
      opt->to_evaluation_point();
      for (const auto& [name, p] : params) result["x." + std::to_string(k) + "." + name] = p.detach().clone();
      if (k == reload_at) {
        model::TensorMap saved = opt->state();
        for (const auto& [name, p] : params) saved["model." + name] = p.detach();
        const std::string path = out + ".reload.pt";
        model::save_tensors(path, saved);
        saved = model::load_tensors(path);
        train::TensorMap state;
        for (auto& [name, p] : params) p = saved.at("model." + name).clone().set_requires_grad(true);
        for (const auto& [key, t] : saved)
          if (key.rfind("model.", 0) != 0) state[key] = t;
        opt = std::make_unique<train::Optimizer>(params, c);
        opt->load_state(state);
      }
      opt->to_training_point();
    }
    if (!norms.empty()) result["norm"] = torch::tensor(norms, torch::kFloat64);
    model::save_tensors(out, result);
  } catch (const std::exception& e) {
    std::cerr << "optimizer_replay: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
