// The optimiser registry: the built-in optimisers by --optimizer name, one line each, and those
// registered later (register_optimizer). The kinds' names point into it: entries stay put.
#include <deque>
#include <stdexcept>

#include "train/optimizers/optimizers.h"

namespace normlab::train {
namespace {

std::deque<OptimizerEntry>& registry() {
  static std::deque<OptimizerEntry> entries{
      {"sgd", make_sgd, kMomentumOption},
      {"adam", make_adam, kAdamInitVOption},
      {"adamw", make_adamw, kAdamInitVOption | kWeightDecayModeOption},
      {"radam", make_radam, kAdamInitVOption | kRAdamFallbackOption},
      {"lion", make_lion, kWeightDecayModeOption, {0.9, 0.99}},  // Chen et al. 2023's betas (lion-pytorch's)
      // Its AdamW part's betas: Jordan et al.'s (MuonWithAuxAdam) and Moonlight's (Liu et al. 2025).
      {"muon", make_muon, kMuonOption | kWeightDecayModeOption, {0.9, 0.95}},
      // schedulefree's AdamWScheduleFree betas (Defazio et al. 2024).
      {"adamw-schedulefree", make_adamw_schedulefree, kOwnWarmupOption | kScheduleFreeOption, {0.9, 0.999}},
  };
  return entries;
}

const OptimizerEntry* find(std::string_view name) {
  for (const auto& e : registry())
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

std::vector<OptimizerKind> optimizer_kinds() {
  std::vector<OptimizerKind> out;
  for (const auto& e : registry()) out.push_back(OptimizerKind(e.name));
  return out;
}

std::string optimizer_choices() {
  std::string out;
  for (const auto& e : registry()) out += (out.empty() ? "" : "|") + e.name;
  return out;
}

std::string to_string(OptimizerKind k) { return std::string(k.name()); }

OptimizerKind parse_optimizer_kind(const std::string& s, const std::string& option) {
  if (const auto* e = find(s)) return OptimizerKind(e->name);
  throw std::invalid_argument(option + ": unknown value '" + s + "', expected " + optimizer_choices());
}

const OptimizerEntry& optimizer_entry(OptimizerKind kind) {
  if (const auto* e = find(kind.name())) return *e;
  throw std::logic_error("optimizer '" + to_string(kind) + "' is not registered");
}

OptimizerKind register_optimizer(OptimizerEntry entry) {
  if (entry.name.empty() || find(entry.name))
    throw std::invalid_argument("register_optimizer: the name '" + entry.name + "' is empty or taken (" +
                                optimizer_choices() + ")");
  registry().push_back(std::move(entry));
  return parse_optimizer_kind(registry().back().name);
}

std::array<double, 2> default_betas(OptimizerKind kind) { return optimizer_entry(kind).betas; }

bool replaces_schedule(OptimizerKind kind) { return optimizer_entry(kind).options & kOwnWarmupOption; }

std::unique_ptr<OptimizerAlgorithm> make_optimizer(const OptimizerConfig& config, size_t parameters) {
  return optimizer_entry(config.kind).make(config, parameters);
}

}  // namespace normlab::train
