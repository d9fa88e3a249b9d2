// muP (model/width.h, train/width_lr.h; docs/width.md): config files, the base width as sp, the
// rescaled init, the multipliers and the per-parameter lr of mup's MuAdam and MuSGD.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "data/batch.h"
#include "model/model.h"
#include "model/width.h"
#include "train/criterion.h"
#include "train/width_lr.h"

using namespace normlab;
using model::ModelConfig;
using model::Parametrisation;

namespace {

ModelConfig tiny(const std::string& kind, int64_t d_model, Parametrisation p = Parametrisation::kSp, int64_t base = 0) {
  ModelConfig c;
  c.kind = kind;
  c.d_model = d_model;
  c.ffn_dim = 2 * d_model;
  c.heads = 2;
  c.encoder_layers = kind == model::kDecoderOnly ? 0 : 2;
  c.decoder_layers = kind == model::kEncoderOnly ? 0 : 2;
  c.src_vocab_size = c.tgt_vocab_size = 30;
  c.dropout = 0.0;
  c.parametrisation = p;
  c.mup_base_width = base;
  return c;
}

std::map<std::string, torch::Tensor> init_params(const ModelConfig& c, uint64_t seed) {
  auto net = model::create_model(c);
  model::initialize(net, seed);
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : net->named_parameters()) out[p.key()] = p.value().detach().clone();
  return out;
}

data::Batch batch() {
  std::vector<data::Sentence> src = {{5, 6, 7, 8}, {9, 10, 11}}, tgt = {{12, 13, 14}, {15, 16, 17, 18}};
  return data::make_batch(src, tgt, 0, src.size());
}

const char* kKinds[] = {model::kEncoderDecoder, model::kDecoderOnly, model::kEncoderOnly};

}  // namespace

TEST(Width, SpFilesHaveNoParametrisationKeysAndMupRoundTrips) {
  const nlohmann::json sp = tiny(model::kEncoderDecoder, 16);
  EXPECT_FALSE(sp.contains("parametrisation"));
  EXPECT_FALSE(sp.contains("mup_base_width"));
  const nlohmann::json mup = tiny(model::kEncoderDecoder, 64, Parametrisation::kMup, 16);
  EXPECT_EQ(mup.at("parametrisation"), "mup");
  ModelConfig back;
  model::from_json(mup, back);
  EXPECT_EQ(back.parametrisation, Parametrisation::kMup);
  EXPECT_EQ(back.mup_base_width, 16);
}

TEST(Width, RefusesBadBaseWidths) {
  EXPECT_FALSE(tiny(model::kEncoderDecoder, 64, Parametrisation::kSp, 16).problems().empty());
  EXPECT_FALSE(tiny(model::kEncoderDecoder, 64, Parametrisation::kMup, 0).problems().empty());
  EXPECT_FALSE(tiny(model::kEncoderDecoder, 64, Parametrisation::kMup, 15).problems().empty());  // heads 2
  EXPECT_TRUE(tiny(model::kEncoderDecoder, 64, Parametrisation::kMup, 16).problems().empty());
}

// At its base width a mup model is the sp model: the same parameters and logits, bit for bit.
TEST(Width, MupAtTheBaseWidthIsSp) {
  for (const char* kind : kKinds) {
    const auto sp = tiny(kind, 32), mup = tiny(kind, 32, Parametrisation::kMup, 32);
    const auto a = init_params(sp, 3), b = init_params(mup, 3);
    for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << kind << " " << name;
    auto net_a = model::create_model(sp), net_b = model::create_model(mup);
    model::initialize(net_a, 3);
    model::initialize(net_b, 3);
    net_a->eval();
    net_b->eval();
    EXPECT_TRUE(torch::equal(net_a->forward(batch()), net_b->forward(batch()))) << kind;
  }
}

// Yang et al. Table 3 as mup/init.py draws it: hidden matrices variance 1/fan_in (Xavier's own
// when both fans grow: the sp draw), tables and readouts at the base width's std (x sqrt(m) on
// N(0, C^-1/2)), vectors unchanged.
TEST(Width, MupInitRescalesTablesAndKeepsHiddenXavier) {
  const auto sp = init_params(tiny(model::kDecoderOnly, 64), 5);
  const auto mup = init_params(tiny(model::kDecoderOnly, 64, Parametrisation::kMup, 16), 5);
  for (const auto& [name, t] : sp) {
    const double factor = name == "decoder.embed_tokens.weight" ? 2.0 : 1.0;  // sqrt(64 / 16)
    EXPECT_TRUE(torch::allclose(mup.at(name), t * factor, 1e-6, 0.0)) << name;
  }
}

TEST(Width, Multipliers) {
  const auto c = tiny(model::kEncoderDecoder, 64, Parametrisation::kMup, 16);  // D = 32, D0 = 8
  EXPECT_DOUBLE_EQ(model::width_mult(c), 4.0);
  EXPECT_NEAR(model::attention_scale(c), std::sqrt(8.0) / 32.0, 1e-15);
  EXPECT_DOUBLE_EQ(model::readout_multiplier(c), 0.25);
  EXPECT_DOUBLE_EQ(model::embedding_scale(c), 4.0);  // sqrt(C0)
  const auto sp = tiny(model::kEncoderDecoder, 64);
  EXPECT_DOUBLE_EQ(model::attention_scale(sp), 1.0 / std::sqrt(32.0));
  EXPECT_DOUBLE_EQ(model::embedding_scale(sp), 8.0);
}

// normlab export's weights.json (the model's manifest) says a mup model's two forward multipliers,
// D = 32, D0 = 8 and m = 4 as above; an sp model's file has neither key (as before muP).
TEST(Width, TheManifestHasMupsMultipliers) {
  const auto mup = model::create_model(tiny(model::kEncoderDecoder, 64, Parametrisation::kMup, 16))->manifest();
  EXPECT_NEAR(mup.at("attention_scale").get<double>(), std::sqrt(8.0) / 32.0, 1e-15);
  EXPECT_DOUBLE_EQ(mup.at("readout_multiplier").get<double>(), 0.25);
  const auto sp = model::create_model(tiny(model::kDecoderOnly, 64))->manifest();
  EXPECT_FALSE(sp.contains("attention_scale"));
  EXPECT_FALSE(sp.contains("readout_multiplier"));
}

// mup/optim.py: MuAdam divides the lr of matrix-like parameters by width_mult; MuSGD multiplies
// the lr of vector-like ones by it.
TEST(Width, LrScalesAreMuAdamsAndMuSgds) {
  const auto c = tiny(model::kEncoderDecoder, 64, Parametrisation::kMup, 16);
  auto net = model::create_model(c);
  train::NamedTensors named;
  for (const auto& p : net->named_parameters()) named.emplace_back(p.key(), p.value());
  train::OptimizerConfig adam, sgd;
  sgd.kind = train::OptimizerKind::kSgd;
  const auto a = train::width_lr_scales(c, adam, named), s = train::width_lr_scales(c, sgd, named);
  std::map<std::string, std::pair<double, double>> expected = {
      {"encoder.layers.0.self_attn.q_proj.weight", {0.25, 1.0}},
      {"decoder.layers.1.fc2.weight", {0.25, 1.0}},
      {"decoder.layers.1.fc2.bias", {1.0, 4.0}},
      {"encoder.layers.0.final_layer_norm.weight", {1.0, 4.0}},
      {"encoder.embed_tokens.weight", {1.0, 4.0}},
      {"decoder.embed_tokens.weight", {1.0, 4.0}}};
  for (size_t i = 0; i < named.size(); ++i) {
    const auto it = expected.find(named[i].first);
    if (it == expected.end()) continue;
    EXPECT_DOUBLE_EQ(a[i], it->second.first) << named[i].first;
    EXPECT_DOUBLE_EQ(s[i], it->second.second) << named[i].first;
  }
  // Weight decay: each parameter's multiplier the inverse of its lr multiplier (mup/optim.py).
  const auto a_wd = train::width_weight_decay_scales(c, adam, named), s_wd = train::width_weight_decay_scales(c, sgd, named);
  for (size_t i = 0; i < named.size(); ++i) {
    const auto it = expected.find(named[i].first);
    if (it == expected.end()) continue;
    EXPECT_DOUBLE_EQ(a_wd[i], 1.0 / it->second.first) << named[i].first;
    EXPECT_DOUBLE_EQ(s_wd[i], 1.0 / it->second.second) << named[i].first;
  }
  train::OptimizerConfig wd;
  wd.weight_decay = 0.01;
  EXPECT_TRUE(train::width_optimizer_problems(c, wd).empty());
  train::OptimizerConfig lion;
  lion.kind = train::OptimizerKind::kLion;
  EXPECT_EQ(train::width_optimizer_problems(c, lion).size(), 1u);
}

// Asking for the base shapes draws no random number.
TEST(Width, BaseShapesLeaveTheGeneratorAlone) {
  torch::manual_seed(9);
  const auto expected = torch::rand({4});
  torch::manual_seed(9);
  model::base_shapes(tiny(model::kEncoderOnly, 64, Parametrisation::kMup, 16));
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
}
