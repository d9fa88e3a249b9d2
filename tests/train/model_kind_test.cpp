// A new model kind plugs in through its registry alone (model/model.h): a kind that only this
// file knows trains, validates, checkpoints, resumes and exports through the interface, and
// the instruments that read the interface (the curvature series) measure it. What the run
// reports is checked against an independent computation: the kind's loss recomputed with
// plain torch operations from its named tensors.
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "../data/test_data.h"
#include "analysis/curvature.h"
#include "core/process_group.h"
#include "core/tokens.h"
#include "data/corpus.h"
#include "model/checkpoint.h"
#include "model/export.h"
#include "model/model.h"
#include "model/seq2seq.h"
#include "train/callback.h"
#include "train/trainer.h"

namespace normlab::train {
namespace {

constexpr const char* kKind = "test-pooled-bigram";

// Each target position's logits from the previous target token's embedding plus the mean of
// the source's embeddings (padding excluded), through one linear map: no layer of layers.h.
class PooledBigramImpl final : public model::ModelImpl {
 public:
  explicit PooledBigramImpl(const model::ModelConfig& c) : ModelImpl(c) {
    src_embed = register_module("src_embed", torch::nn::Embedding(c.src_vocab_size, c.d_model));
    tgt_embed = register_module("tgt_embed", torch::nn::Embedding(c.tgt_vocab_size, c.d_model));
    out = register_module("out", torch::nn::Linear(c.d_model, c.tgt_vocab_size));
  }
  torch::Tensor forward(const data::Batch& b) override {
    const auto device = out->weight.device();
    const auto src = b.src.to(device), prev = b.prev_output_tokens.to(device);
    const auto real = src.ne(kPad).unsqueeze(-1).to(torch::kFloat);
    const auto pooled = (src_embed(src) * real).sum(1) / real.sum(1);  // (B,C)
    return out(tgt_embed(prev) + pooled.unsqueeze(1));               // (B,T,V)
  }
  void init_parameters(const data::Batch*) override {
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) p.normal_(0.0, 0.1);
  }
  std::vector<model::StackView> stacks() override { return {}; }
  std::map<std::string, std::string> tied_aliases() const override { return {}; }
  nlohmann::json manifest() const override { return {{"pooling", "mean"}}; }

  torch::nn::Embedding src_embed{nullptr}, tgt_embed{nullptr};
  torch::nn::Linear out{nullptr};
};

void register_once() {
  static const bool done = [] {
    model::register_model_kind(
        kKind, [](const model::ModelConfig& c) { return model::Model(std::make_shared<PooledBigramImpl>(c)); });
    return true;
  }();
  (void)done;
}

TrainConfig tiny_run(const std::string& prefix, const std::string& out) {
  TrainConfig c;
  c.train_prefix = c.valid_prefix = prefix;
  c.out = out;
  c.max_pairs = 64;
  c.vocab.vocab_size = 300;
  c.batching.max_tokens = 400;
  c.model.kind = kKind;
  c.model.d_model = 16;
  c.model.ffn_dim = 32;
  c.model.heads = 2;
  c.model.encoder_layers = c.model.decoder_layers = 1;
  c.max_steps = 4;
  c.log_interval = 1;
  c.loss.label_smoothing = 0.0;
  c.optimizer.weight_decay = 0.0;
  c.schedule.kind = ScheduleKind::kConstant;  // no warm-up: the loss moves within 8 updates
  c.schedule.warmup_steps = 0;
  c.schedule.lr = 1e-2;
  return c;
}

std::vector<nlohmann::json> records(const std::string& file) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(ModelKind, RegistryRefusesTakenNamesAndUnknownKinds) {
  register_once();
  EXPECT_THROW(model::register_model_kind(kKind, nullptr), std::invalid_argument);
  EXPECT_THROW(model::register_model_kind(model::kEncoderDecoder, nullptr), std::invalid_argument);
  model::ModelConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 20;
  c.kind = "no-such-kind";
  try {
    model::create_model(c);
    FAIL() << "an unknown kind was built";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'no-such-kind'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(kKind), std::string::npos) << e.what();  // among the choices
  }
  c.kind = kKind;
  const auto net = model::create_model(c);
  EXPECT_EQ(net->kind(), kKind);
  try {
    model::as_encoder_decoder(net, "normlab translate");
    FAIL() << "a pooled bigram model was taken for an encoder-decoder";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), std::string("normlab translate needs an encoder-decoder model, not ") + kKind);
  }
  // The first kind's configuration JSON stays as before the registry (no "kind" key).
  EXPECT_FALSE(nlohmann::json(model::ModelConfig{}).contains("kind"));
  EXPECT_EQ(nlohmann::json(c).at("kind"), kKind);
}

TEST(ModelKind, ANewKindTrainsResumesAndExportsThroughTheRegistryAlone) {
  NORMLAB_REQUIRE_SHARED_DATA(de, "multi30k/val.de.gz");
  register_once();
  testing::ScratchDir dir("model_kind");
  const auto prefix = de.substr(0, de.size() - std::string(".de.gz").size());
  auto c = tiny_run(prefix, dir / "run");
  c.curvature.every = 2;  // an instrument that reads the interface only
  c.curvature.sentences = 8;
  c.curvature.steps = 5;
  core::ProcessGroup one;
  {
    TrainCallbacks callbacks;
    callbacks.push_back(analysis::curvature_callback(c.curvature, c.optimizer, c.loss));
    ASSERT_EQ(train(c, std::move(callbacks), torch::kCPU, one).updates, 4);
  }
  // Resumed to 8 updates.
  c.max_steps = 8;
  {
    TrainCallbacks callbacks;
    callbacks.push_back(analysis::curvature_callback(c.curvature, c.optimizer, c.loss));
    ASSERT_EQ(train(c, std::move(callbacks), torch::kCPU, one).updates, 8);
  }

  // The checkpoint is of the kind and holds exactly its parameters.
  const auto loaded = model::load_model(dir / "run/checkpoints/checkpoint_last.pt");
  EXPECT_EQ(loaded.model->kind(), kKind);
  EXPECT_EQ(loaded.meta.at("model").at("kind"), kKind);
  const auto params = model::named_parameters(loaded.model);
  EXPECT_EQ(params.size(), 4u);  // src_embed, tgt_embed, out.weight, out.bias
  ASSERT_TRUE(params.count("out.bias"));

  // Training lowered the loss: the updates' losses, one record each, steps 1..8 once.
  std::vector<double> losses;
  for (const auto& r : records(dir / "run/metrics.jsonl"))
    if (r.contains("grad_norm")) losses.push_back(r.at("loss"));
  ASSERT_EQ(losses.size(), 8u);
  EXPECT_LT(losses.back(), losses.front());

  // Validated (the loss itself is checked against plain torch in TheKindsLossIsItsForwardUnderTheCriterion).
  double recorded = NAN;
  for (const auto& r : records(dir / "run/metrics.jsonl"))
    if (r.contains("valid_loss")) recorded = r["valid_loss"];
  ASSERT_TRUE(std::isfinite(recorded));
  EXPECT_GT(recorded, 0.0);

  // The curvature series measured it at updates 0, 2, 4 and, resumed, 6, 8.
  std::vector<int64_t> measured;
  for (const auto& r : records(dir / "run/curvature.jsonl")) {
    measured.push_back(r.at("step"));
    EXPECT_GT(r.at("lambda_max").get<double>(), 0.0);
  }
  EXPECT_EQ(measured, (std::vector<int64_t>{0, 2, 4, 6, 8}));

  // Export writes the kind's tensors and its own manifest entries.
  const auto pt = dir / "export.pt";
  model::export_weights(loaded.model, pt, nlohmann::json::object());
  std::ifstream manifest_file(dir / "export.json");
  const auto manifest = nlohmann::json::parse(manifest_file);
  EXPECT_EQ(manifest.at("pooling"), "mean");
  EXPECT_EQ(manifest.at("model").at("kind"), kKind);
  EXPECT_EQ(model::load_tensors(pt).size(), 4u);
}

TEST(ModelKind, TheKindsLossIsItsForwardUnderTheCriterion) {
  register_once();
  model::ModelConfig c;
  c.kind = kKind;
  c.d_model = 8;
  c.src_vocab_size = c.tgt_vocab_size = 12;
  auto net = model::create_model(c);
  model::initialize(net, 7);
  const std::vector<data::Sentence> src{{5, 6, 7}, {8}}, tgt{{9, 10}, {11, 5, 6}};
  const auto batch = data::make_batch(src, tgt, 0, 2);
  const auto got = loss(net, batch, LossOptions{0.0}).sums;

  // Plain torch from the named tensors: mean of the source rows, plus the previous target's row.
  const auto p = model::named_parameters(net);
  const auto e_src = p.at("src_embed.weight").to(torch::kDouble), e_tgt = p.at("tgt_embed.weight").to(torch::kDouble);
  const auto w = p.at("out.weight").to(torch::kDouble), bias = p.at("out.bias").to(torch::kDouble);
  double expected = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < 2; ++i) {
    auto pooled = torch::zeros({c.d_model}, torch::kDouble);
    int64_t n = 0;
    for (int64_t s = 0; s < batch.src.size(1); ++s) {
      const auto id = batch.src[i][s].item<int64_t>();
      if (id == kPad) continue;
      pooled += e_src[id];
      ++n;
    }
    pooled /= static_cast<double>(n);
    for (int64_t t = 0; t < batch.target.size(1); ++t) {
      const auto target = batch.target[i][t].item<int64_t>();
      if (target == kPad) continue;
      const auto logits = torch::mv(w, e_tgt[batch.prev_output_tokens[i][t].item<int64_t>()] + pooled) + bias;
      expected -= torch::log_softmax(logits, 0)[target].item<double>();
      ++tokens;
    }
  }
  EXPECT_EQ(got.tokens, tokens);
  EXPECT_NEAR(got.loss.item<double>(), expected, 1e-5 * expected);
}

}  // namespace
}  // namespace normlab::train
