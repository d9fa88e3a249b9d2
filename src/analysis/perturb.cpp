#include "analysis/perturb.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "analysis/sites.h"
#include "core/file_io.h"
#include "core/problems.h"
#include "model/model.h"
#include "train/criterion.h"
#include "train/optimizer.h"
#include "model/width.h"

namespace normlab::analysis {
namespace {

// Each stack's output per batch (ModelImpl::stack_outputs), in float64.
using Outputs = std::map<std::string, std::vector<torch::Tensor>>;

Outputs outputs(model::Model net, const std::vector<data::Batch>& batches) {
  torch::NoGradGuard no_grad;
  Outputs o;
  for (const auto& b : batches)
    for (const auto& [stack, out] : net->stack_outputs(b)) o[stack].push_back(out.to(torch::kFloat64));
  return o;
}

// Mean over non-padding tokens of ||a - b||^2 (over the last dimension); NaN when the model has
// no such stack.
double change(const Outputs& before, const Outputs& after, const std::string& stack,
              const std::vector<torch::Tensor>& weights) {
  if (!before.count(stack)) return std::numeric_limits<double>::quiet_NaN();
  const auto& a = before.at(stack);
  const auto& b = after.at(stack);
  double sum = 0.0, tokens = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    sum += ((a[i] - b[i]).pow(2).sum(-1) * weights[i]).sum().item<double>();
    tokens += weights[i].sum().item<double>();
  }
  return sum / tokens;
}

}  // namespace

void perturb_weights(model::Model net, const PerturbConfig& c, const data::Batch& first, uint64_t seed) {
  train::NamedTensors matrices;
  for (const auto& p : net->named_parameters())
    if (p.value().dim() == 2) matrices.emplace_back(p.key(), p.value());
  if (c.delta == DeltaKind::kSign) {
    torch::NoGradGuard no_grad;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (auto& [name, w] : matrices)
      w.add_(torch::randn(w.sizes(), gen, w.options()).sign(), -c.scale);
    return;
  }
  train::OptimizerConfig adam;
  adam.kind = train::OptimizerKind::kAdam;  // betas (0.9, 0.98), eps 1e-8 (REFERENCE §2)
  train::Optimizer optimizer(matrices, adam);
  net->zero_grad();
  const auto s = train::loss(net, first, train::LossOptions{c.label_smoothing}).sums;
  (s.loss / static_cast<double>(s.tokens)).backward();
  optimizer.step(c.lr);
}

std::string to_string(DeltaKind k) { return k == DeltaKind::kSign ? "sign" : "adam"; }

DeltaKind parse_delta_kind(const std::string& s, const std::string& option) {
  if (s == "sign") return DeltaKind::kSign;
  if (s == "adam") return DeltaKind::kAdam;
  throw std::invalid_argument(option + ": unknown value '" + s + "', expected sign|adam");
}

std::vector<std::string> PerturbConfig::problems() const {
  std::vector<std::string> p;
  if (out.empty()) p.push_back("--out is required");
  if (schemes.empty()) p.push_back("--schemes is empty");
  for (const auto& s : schemes) {
    try {
      for (const auto& q : model::scheme_problems(overrides.apply(model::scheme_by_name(s))))
        p.push_back("--schemes " + s + ": " + q);
    } catch (const std::invalid_argument& e) {
      p.push_back(e.what());
    }
  }
  if (depths.empty()) p.push_back("--depths is empty");
  for (auto d : depths)
    if (d < 1) p.push_back("--depths: every depth must be >= 1, got " + std::to_string(d));
  if (!(scale > 0)) p.push_back("--scale must be > 0");
  if (!(lr > 0)) p.push_back("--lr must be > 0");
  if (seeds < 1) p.push_back("--seeds must be >= 1, got " + std::to_string(seeds));
  if (batches < 1) p.push_back("--batches must be >= 1, got " + std::to_string(batches));
  if (delta == DeltaKind::kAdam)
    if (auto q = model::one_rate_problem(model, "--delta adam")) p.push_back(*q);
  for (auto& q : inputs.problems()) p.push_back(q);
  return p;
}

void run_perturb(const PerturbConfig& c) {
  core::throw_if_problems(c.problems());
  const BatchSource source(c.inputs, c.out);
  std::ostringstream csv;
  csv << "scheme,depth,seed,delta,encoder_change,decoder_change\n";
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& scheme : c.schemes) {
    for (auto depth : c.depths) {
      auto m = c.model;
      m.scheme = c.overrides.apply(model::scheme_by_name(scheme));
      if (m.has_encoder()) m.encoder_layers = depth;
      if (m.has_decoder()) m.decoder_layers = depth;
      m.src_vocab_size = m.tgt_vocab_size = source.vocab_size();
      std::vector<double> enc_changes, dec_changes;
      for (int64_t s = 0; s < c.seeds; ++s) {
        const uint64_t seed = c.seed + static_cast<uint64_t>(s);
        const auto batches = source.batches(seed, c.batches);
        std::vector<torch::Tensor> enc_w, dec_w;
        for (const auto& b : batches) {
          enc_w.push_back(token_weights(b.src));
          dec_w.push_back(token_weights(b.prev_output_tokens));
        }
        auto net = model::create_model(m);
        model::initialize(net, seed, &batches.front());
        net->eval();
        const auto before = outputs(net, batches);
        perturb_weights(net, c, batches.front(), seed);
        const auto after = outputs(net, batches);
        enc_changes.push_back(change(before, after, "encoder", enc_w));
        dec_changes.push_back(change(before, after, "decoder", dec_w));
        csv << scheme << "," << depth << "," << seed << "," << to_string(c.delta) << ","
            << csv_number(enc_changes.back()) << "," << csv_number(dec_changes.back()) << "\n";
      }
      const auto [em, es] = mean_and_sd(enc_changes);
      const auto [dm, ds] = mean_and_sd(dec_changes);
      summary[scheme][std::to_string(depth)] = {
          {"encoder_change_mean", em}, {"encoder_change_std", es}, {"decoder_change_mean", dm}, {"decoder_change_std", ds}};
      std::fprintf(stderr, "%-9s depth %3lld:", scheme.c_str(), static_cast<long long>(depth));
      if (!std::isnan(em)) std::fprintf(stderr, " encoder change %.4g (sd %.2g)", em, es);
      if (!std::isnan(dm)) std::fprintf(stderr, " decoder change %.4g (sd %.2g)", dm, ds);
      std::fprintf(stderr, "\n");
    }
  }
  nlohmann::json config_json = {{"schemes", c.schemes},
                                {"scheme_settings", model::schemes_json(c.schemes, c.overrides)},
                                {"depths", c.depths},
                                {"model", c.model},
                                {"train", c.inputs.train_prefix},
                                {"vocab", c.inputs.vocab_path},
                                {"vocab_size", source.vocab_size()},
                                {"max_tokens", c.inputs.batching.max_tokens},
                                {"sentences", c.inputs.sentences},
                                {"length", c.inputs.length},
                                {"delta", to_string(c.delta)},
                                {"scale", c.scale},
                                {"lr", c.lr},
                                {"seeds", c.seeds},
                                {"batches", c.batches},
                                {"seed", c.seed}};
  const std::filesystem::path out(c.out);
  std::filesystem::create_directories(out);
  core::write_file_atomic((out / "perturb.csv").string(), csv.str());
  core::write_file_atomic((out / "perturb.json").string(),
                          nlohmann::json({{"config", config_json}, {"changes", summary}}).dump(2) + "\n");
}

}  // namespace normlab::analysis
