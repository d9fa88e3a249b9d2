// One optimiser's step alone (issue 36 §4): normlab's train::Optimizer over the parameters of a
// model of the given preset and kind, with fixed random gradients, timed step by step. Prints one
// JSON line (median and every timed step). --shapes-out writes the parameters' names and shapes
// and which ones --optimizer muon gives to Muon, so that bench/optimizer_step.py builds the same
// set for the PyTorch peers.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/runtime.h"
#include "model/config.h"
#include "model/model.h"
#include "train/optimizer.h"
#include "train/optimizers/muon.h"

using namespace normlab;

int main(int argc, char** argv) {
  CLI::App app{"normlab's optimiser step alone, over a model's parameters"};
  std::string preset = "iwslt-small", kind = model::kEncoderDecoder, optimizer = "adam", shapes_out;
  int64_t vocab = 10000, warmup = 3, steps = 20, threads = 0;
  double weight_decay = 0.0;
  app.add_option("--preset", preset)->capture_default_str();
  app.add_option("--model-kind", kind)->capture_default_str();
  app.add_option("--vocab-size", vocab)->capture_default_str();
  app.add_option("--optimizer", optimizer, "adam|adamw|sgd|lion|muon|adamw-schedulefree|radam")->capture_default_str();
  app.add_option("--weight-decay", weight_decay)->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps")->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->capture_default_str();
  app.add_option("--threads", threads, "0: automatic")->capture_default_str();
  app.add_option("--shapes-out", shapes_out, "write the parameters' names, shapes and Muon's share as JSON");
  CLI11_PARSE(app, argc, argv);

  core::configure_memory();
  const int used_threads = core::configure_threads(threads);
  model::ModelConfig c;
  c.kind = kind;
  model::apply_preset(preset, c);
  if (kind == model::kDecoderOnly) c.encoder_layers = 0;
  if (kind == model::kEncoderOnly) c.decoder_layers = 0;
  c.src_vocab_size = c.tgt_vocab_size = vocab;
  auto net = model::create_model(c);
  model::initialize(net, 1);

  train::OptimizerConfig config;
  config.kind = train::parse_optimizer_kind(optimizer);
  config.weight_decay = weight_decay;
  if (config.kind == train::OptimizerKind::kSgd) config.momentum = 0.9;
  if (config.kind == train::OptimizerKind::kLion) config.betas = {0.9, 0.99};
  if (config.kind == train::OptimizerKind::kMuon) config.betas = {0.9, 0.95};
  if (config.kind == train::OptimizerKind::kAdamWScheduleFree) config.betas = {0.9, 0.999};
  train::NamedTensors named;
  nlohmann::json shapes = nlohmann::json::array();
  torch::manual_seed(2);
  for (const auto& p : net->named_parameters()) {
    named.emplace_back(p.key(), p.value());
    p.value().mutable_grad() = torch::randn_like(p.value()) * 1e-2;
    shapes.push_back({{"name", p.key()}, {"shape", p.value().sizes().vec()},
                      {"muon", train::muon_updates(p.key(), p.value())}});
  }
  if (!shapes_out.empty()) std::ofstream(shapes_out) << shapes.dump() << "\n";
  train::Optimizer opt(named, config);

  using Clock = std::chrono::steady_clock;
  std::vector<double> seconds;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    const auto t0 = Clock::now();
    opt.step(1e-4);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i >= warmup) seconds.push_back(s);
  }
  auto sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  int64_t elements = 0;
  for (const auto& [name, p] : named) elements += p.numel();
  std::cout << nlohmann::json{{"impl", "normlab"},         {"optimizer", optimizer},
                              {"threads", used_threads},   {"parameters", elements},
                              {"tensors", named.size()},   {"step_seconds", seconds},
                              {"median_seconds", sorted[sorted.size() / 2]}}
                   .dump()
            << "\n";
  return 0;
}
