// `normlab init`: a freshly initialised model as a checkpoint.
#include <iostream>

#include <torch/torch.h>

#include "commands.h"
#include "core/tokens.h"
#include "data/id_text.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "model_options.h"

namespace normlab::app {
namespace {

struct InitOptions {
  ModelOptions model;
  uint64_t seed = 1;
  std::string dtype = "float32";
  std::string out;
  std::string profile_src, profile_tgt;
};

// Admin's profiling batch: the given id files, or (documented in docs/schemes.md) 16 random
// sentences of 24 tokens when none are given.
data::Batch profile_batch(const InitOptions& o, const model::ModelConfig& c) {
  if (!o.profile_src.empty() || !o.profile_tgt.empty()) {
    if (o.profile_src.empty() || o.profile_tgt.empty())
      throw std::invalid_argument("--profile-src-ids and --profile-tgt-ids go together");
    auto pairs = data::read_id_pairs(o.profile_src, o.profile_tgt, c.src_vocab_size, c.tgt_vocab_size);
    return data::make_batch(pairs.src, pairs.tgt, 0, pairs.src.size());
  }
  std::cerr << "normlab init: profiling Admin on 16 random sentences of 24 tokens "
               "(give --profile-src-ids/--profile-tgt-ids for real data)\n";
  std::vector<data::Sentence> src(16), tgt(16);
  for (size_t i = 0; i < src.size(); ++i) {
    auto s = torch::randint(kNumSpecialTokens, c.src_vocab_size, {24}, torch::kInt64);
    auto t = torch::randint(kNumSpecialTokens, c.tgt_vocab_size, {24}, torch::kInt64);
    src[i].assign(s.data_ptr<int64_t>(), s.data_ptr<int64_t>() + 24);
    tgt[i].assign(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + 24);
  }
  return data::make_batch(src, tgt, 0, src.size());
}

}  // namespace

Runner add_init_command(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand("init", "write a freshly initialised model");
  auto o = std::make_shared<InitOptions>();
  o->model.add_to(*cmd);
  cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "float32|float64")->capture_default_str();
  cmd->add_option("--profile-src-ids", o->profile_src, "Admin profiling batch: source id file");
  cmd->add_option("--profile-tgt-ids", o->profile_tgt, "Admin profiling batch: target id file");
  cmd->add_option("--out", o->out, "checkpoint to write")->required();
  return [o] {
    const auto config = o->model.resolve();
    const auto dtype = parse_dtype(o->dtype);
    auto net = model::create_model(config);
    net->to(dtype);
    data::Batch batch;
    if (config.scheme.init == model::InitMethod::kAdminProfile) {
      torch::manual_seed(o->seed);
      batch = profile_batch(*o, config);
    }
    model::initialize(net, o->seed, batch.src.defined() ? &batch : nullptr);
    model::save_model(o->out, net, {{"seed", o->seed}});
    std::cerr << "normlab init: " << model::to_string(config.scheme.norm) << "/"
              << model::to_string(config.scheme.residual) << "/"
              << model::to_string(config.scheme.init) << ", "
              << model::named_parameters(net).size() << " tensors -> " << o->out << "\n";
  };
}

}  // namespace normlab::app
