// Layers added on top of a trained model (model/stacking.h): the trained parameters copied,
// the added ones initialised as Xavier, T-Fixup or DT-Fixup say, mu measured on the data.
// Independent references: the trained model's own encoder output for the encoder's mu; the
// closed form of a LayerNorm output's norm, sqrt(C var / (var + eps)) <= sqrt(C), for the
// decoder's; the factors' formulas (REFERENCE §1, §10); Xavier's weights of the same seed.
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/tokens.h"
#include "model/encoder_only.h"
#include "model/seq2seq.h"
#include "model/scheme_constants.h"
#include "model/stacking.h"
#include "tiny_model.h"

using namespace normlab;
using model::AddedLayerInit;
using model::AddedLayers;

namespace {

model::Seq2Seq trained_model(const std::string& scheme) {
  auto c = test::tiny_config(scheme);
  c.dropout = 0.0;
  model::Seq2Seq m(c);
  model::initialize(m, 3);
  {
    // As if trained: LayerNorm weights and biases away from 1 and 0.
    torch::NoGradGuard no_grad;
    for (auto& p : m->named_parameters())
      if (p.key().find("layer_norm") != std::string::npos) p.value().add_(torch::randn_like(p.value()) * 0.3);
  }
  return m;
}

// Two batches of 3 sentences with right padding.
std::vector<data::Batch> batches() {
  torch::manual_seed(11);
  std::vector<data::Batch> out;
  for (int i = 0; i < 2; ++i) {
    auto src = torch::randint(4, 30, {3, 7}, torch::kLong);
    auto prev = torch::randint(4, 30, {3, 5}, torch::kLong);
    src.index_put_({1, torch::indexing::Slice(4, torch::indexing::None)}, kPad);
    prev.index_put_({2, torch::indexing::Slice(3, torch::indexing::None)}, kPad);
    out.push_back({src, prev, torch::Tensor(), 0});  // no target: the stacks' inputs only
  }
  return out;
}

torch::Tensor param(const model::Model& m, const std::string& name) { return m->named_parameters()[name]; }

// The grown encoder-decoder (add_layers returns a model of any kind).
model::Seq2Seq ed(const model::Model& m) { return model::as_encoder_decoder(m, "the test"); }

}  // namespace

TEST(Stacking, TrainedParametersAreCopiedAndAddedOnesNamed) {
  auto trained = trained_model("post-ln");
  auto grown = model::add_layers(trained, {3, 1, AddedLayerInit::kXavier}, 7, batches());
  EXPECT_EQ(grown.model->config().encoder_layers, 5);
  EXPECT_EQ(grown.model->config().decoder_layers, 3);
  auto after = grown.model->named_parameters();
  for (const auto& p : trained->named_parameters()) {
    ASSERT_TRUE(after.contains(p.key())) << p.key();
    EXPECT_TRUE(torch::equal(after[p.key()], p.value())) << p.key();
    EXPECT_FALSE(model::is_added_parameter(p.key(), trained->config())) << p.key();
  }
  int64_t added = 0;
  for (const auto& p : after)
    if (model::is_added_parameter(p.key(), trained->config())) ++added;
  const auto total = static_cast<int64_t>(after.size()), before = static_cast<int64_t>(trained->named_parameters().size());
  EXPECT_EQ(added, total - before);
  EXPECT_TRUE(model::is_added_parameter("encoder.layers.4.fc1.weight", trained->config()));
  EXPECT_TRUE(model::is_added_parameter("decoder.layers.2.encoder_attn.v_proj.bias", trained->config()));
  EXPECT_FALSE(model::is_added_parameter("decoder.layers.1.fc2.weight", trained->config()));
  // Xavier: the added out_proj of fan 16 x 16 is uniform in +-sqrt(6 / 32); biases 0.
  const auto w = param(grown.model, "encoder.layers.3.self_attn.out_proj.weight");
  EXPECT_LE(w.abs().max().item<double>(), std::sqrt(6.0 / 32.0));
  EXPECT_GT(w.abs().max().item<double>(), 0.8 * std::sqrt(6.0 / 32.0));
  EXPECT_EQ(param(grown.model, "encoder.layers.3.fc1.bias").abs().max().item<double>(), 0.0);
}

class DtFixupForms : public ::testing::TestWithParam<AddedLayerInit> {};
INSTANTIATE_TEST_SUITE_P(Stacking, DtFixupForms,
                         ::testing::Values(AddedLayerInit::kDtFixup, AddedLayerInit::kDtFixupPostLn),
                         [](const auto& info) { return info.param == AddedLayerInit::kDtFixup ? "Authors" : "PostLn"; });

TEST_P(DtFixupForms, TFixupAndDtFixupScaleXaviersWeightsOfTheSameSeed) {
  auto trained = trained_model("post-ln");
  const AddedLayers xavier{4, 2, AddedLayerInit::kXavier};
  auto plain = model::add_layers(trained, xavier, 7, batches());
  auto tfix = model::add_layers(trained, {4, 2, AddedLayerInit::kTFixup}, 7, batches());
  auto dtfix = model::add_layers(trained, {4, 2, GetParam()}, 7, batches());
  const double te = 0.67 * std::pow(4.0, -0.25), td = std::pow(9.0 * 2, -0.25);  // REFERENCE §1
  EXPECT_NEAR(tfix.report.t_fixup_encoder, te, 1e-12);
  EXPECT_NEAR(tfix.report.t_fixup_decoder, td, 1e-12);
  const auto& r = dtfix.report;
  const double mu = r.mu_encoder, mu_d = r.mu_decoder;
  EXPECT_NEAR(r.divisor_encoder, std::sqrt(4 * (4 * mu * mu + 2 * mu + 2)), 1e-9);
  EXPECT_NEAR(r.divisor_decoder, std::sqrt(1.5 * 2 * (4 * mu_d * mu_d + 2 * mu_d + 2)), 1e-9);
  struct Case {
    std::string name;
    double t_fixup, dt_fixup;
  };
  const double de = 1 / r.divisor_encoder, dd = 1 / r.divisor_decoder, s2 = std::sqrt(2.0);
  for (const Case& k : std::vector<Case>{{"encoder.layers.2.self_attn.v_proj.weight", te * s2, de * s2},
                                         {"encoder.layers.5.self_attn.out_proj.weight", te, de},
                                         {"encoder.layers.3.fc1.weight", te, de},
                                         {"encoder.layers.4.fc2.weight", te, de},
                                         {"decoder.layers.2.encoder_attn.v_proj.weight", td * s2, dd * s2},
                                         {"decoder.layers.3.self_attn.out_proj.weight", td, dd},
                                         {"decoder.layers.3.fc2.weight", td, dd}}) {
    const auto x = param(plain.model, k.name);
    EXPECT_TRUE(torch::allclose(param(tfix.model, k.name), x * k.t_fixup, 1e-12, 0)) << k.name;
    EXPECT_TRUE(torch::allclose(param(dtfix.model, k.name), x * k.dt_fixup, 1e-12, 0)) << k.name;
  }
  // Untouched: q and k, biases, every trained parameter (and the norms of the added layers
  // where they have them: dt-fixup-postln).
  for (const std::string name : {"encoder.layers.2.self_attn.q_proj.weight", "encoder.layers.2.fc1.bias",
                                 "decoder.layers.1.final_layer_norm.weight", "encoder.layers.1.fc1.weight"})
    EXPECT_TRUE(torch::equal(param(dtfix.model, name), param(plain.model, name))) << name;
  const bool norms = GetParam() == AddedLayerInit::kDtFixupPostLn;
  EXPECT_EQ(dtfix.model->named_parameters().contains("decoder.layers.2.final_layer_norm.weight"), norms);
  EXPECT_EQ(dtfix.model->named_parameters().contains("encoder.layers.5.self_attn_layer_norm.bias"), norms);
}

// The authors' form: the added layers are built without norms (BorealisAI/DT-Fixup
// rat_encoders.py:79-81, transformer.py:150-166), and the configuration says so, so that a
// checkpoint of the grown model reloads with the same structure.
TEST(Stacking, DtFixupsLayersHaveNoNormsAndTheConfigurationRecordsThem) {
  auto trained = trained_model("post-ln");
  auto grown = model::add_layers(trained, {3, 1, AddedLayerInit::kDtFixup}, 7, batches());
  const auto& c = grown.model->config();
  EXPECT_EQ(c.norm_free_encoder_layers, 3);
  EXPECT_EQ(c.norm_free_decoder_layers, 1);
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    const auto& layer = *ed(grown.model)->encoder->layers[i]->as<model::EncoderLayerImpl>();
    const auto expected = i < 2 ? model::NormPlacement::kPost : model::NormPlacement::kNone;
    EXPECT_EQ(layer.self_attn_block.placement(), expected) << i;
    EXPECT_EQ(layer.ffn_block.placement(), expected) << i;
  }
  EXPECT_EQ(ed(grown.model)->decoder->layers[2]->as<model::DecoderLayerImpl>()->encoder_attn_block.placement(),
            model::NormPlacement::kNone);
  EXPECT_EQ(ed(grown.model)->decoder->layers[1]->as<model::DecoderLayerImpl>()->encoder_attn_block.placement(),
            model::NormPlacement::kPost);
  // Through JSON (config.json, a checkpoint's metadata) and back; absent when 0.
  const nlohmann::json j = c;
  EXPECT_EQ(j.at("norm_free_encoder_layers"), 3);
  model::ModelConfig back;
  nlohmann::json(j).get_to(back);
  EXPECT_EQ(back.norm_free_encoder_layers, 3);
  EXPECT_EQ(back.norm_free_decoder_layers, 1);
  EXPECT_FALSE(nlohmann::json(trained->config()).contains("norm_free_encoder_layers"));
  // A layer without norms computes x + f(x) (dropout 0): the added encoder layer from its own parts.
  auto& layer = *ed(grown.model)->encoder->layers[4]->as<model::EncoderLayerImpl>();
  grown.model->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({2, 5, 16});
  const auto mask = torch::zeros({2, 5}, torch::kBool);
  const auto h = x + layer.self_attn(x, x, mask, false);
  const auto expected = h + layer.fc2(torch::relu(layer.fc1(h)));
  EXPECT_TRUE(torch::allclose(layer.forward(x, mask), expected, 1e-5, 1e-6));
}

TEST(Stacking, MuIsTheLargestTokenNormOfTheAddedStacksInput) {
  auto trained = trained_model("post-ln");
  const auto data = batches();
  auto grown = model::add_layers(trained, {2, 2, AddedLayerInit::kDtFixup}, 7, data);
  // The encoder's: the trained encoder's output, over the tokens that are not padding.
  double expected = 0;
  trained->eval();
  {
    torch::NoGradGuard no_grad;
    for (const auto& b : data) {
      auto norms = trained->encoder->forward(b.src).out.norm(2, -1).masked_fill(b.src.eq(kPad), 0);
      expected = std::max(expected, norms.max().item<double>());
    }
  }
  EXPECT_NEAR(grown.report.mu_encoder, expected, 1e-6 * expected);
  // The decoder's, on a fresh Post-LN model (every LayerNorm weight 1, bias 0) growing layers
  // with norms (dt-fixup-postln; the authors' form has none, so its added encoder layers' output
  // is no norm's): the inputs of both the decoder stack and the cross-attention are LayerNorm
  // outputs, of norm sqrt(C var / (var + 1e-5)), just below sqrt(C) = 4.
  auto c = test::tiny_config("post-ln");
  model::Seq2Seq fresh(c);
  model::initialize(fresh, 3);
  auto fresh_grown = model::add_layers(fresh, {1, 1, AddedLayerInit::kDtFixupPostLn}, 7, data);
  EXPECT_LE(fresh_grown.report.mu_decoder, 4.0);
  EXPECT_GT(fresh_grown.report.mu_decoder, 4.0 * (1 - 1e-3));
  EXPECT_LE(fresh_grown.report.mu_encoder, 4.0);
  EXPECT_GT(fresh_grown.report.mu_encoder, 4.0 * (1 - 1e-3));
}

// A single-stack model grows its one stack (the DT-Fixup authors' own setting: layers on RoBERTa's
// encoder): T-Fixup's single-stack factor (6N)^(-1/4) (schemes.md), DT-Fixup's divisor with
// N layers of two residual blocks for either kind, mu the trained stack's largest output norm:
// the encoder's from the trained model's own encoder, the decoder's (fresh Post-LN norms) the
// closed form of a LayerNorm output, just below sqrt(C) = 4.
TEST(Stacking, SingleStackModelsGrowTheirOneStack) {
  for (const std::string kind : {model::kEncoderOnly, model::kDecoderOnly}) {
    const bool encoder = kind == model::kEncoderOnly;
    const std::string stack = encoder ? "encoder" : "decoder";
    auto c = test::tiny_config("post-ln");
    c.kind = kind;
    c.dropout = 0.0;
    (encoder ? c.decoder_layers : c.encoder_layers) = 0;
    auto trained = model::create_model(c);
    model::initialize(trained, 3);
    if (encoder) {  // as if trained: the norms away from 1 and 0
      torch::NoGradGuard no_grad;
      for (auto& p : trained->named_parameters())
        if (p.key().find("layer_norm") != std::string::npos) p.value().add_(torch::randn_like(p.value()) * 0.3);
    }
    auto grow = [&](AddedLayerInit init) {
      return model::add_layers(trained, {encoder ? 3 : 0, encoder ? 0 : 3, init}, 7, batches());
    };
    auto plain = grow(AddedLayerInit::kXavier), tfix = grow(AddedLayerInit::kTFixup),
         dtfix = grow(AddedLayerInit::kDtFixup);
    EXPECT_EQ(plain.model->config().stack_layers(), 5) << kind;
    EXPECT_EQ(dtfix.model->config().kind, kind);
    const auto& r = dtfix.report;
    const double t = std::pow(6.0 * 3, -0.25), mu = encoder ? r.mu_encoder : r.mu_decoder;
    EXPECT_NEAR(encoder ? tfix.report.t_fixup_encoder : tfix.report.t_fixup_decoder, t, 1e-12) << kind;
    const double divisor = encoder ? r.divisor_encoder : r.divisor_decoder;
    EXPECT_NEAR(divisor, std::sqrt(3 * (4 * mu * mu + 2 * mu + 2)), 1e-9) << kind;
    if (encoder) {
      double expected = 0;
      trained->eval();
      torch::NoGradGuard no_grad;
      for (const auto& b : batches()) {
        const auto out = model::as_encoder_only(trained, "the test")->encoder->forward(b.src).out;
        expected = std::max(expected, out.norm(2, -1).masked_fill(b.src.eq(kPad), 0).max().item<double>());
      }
      EXPECT_NEAR(mu, expected, 1e-6 * expected);
    } else {
      EXPECT_LE(mu, 4.0);
      EXPECT_GT(mu, 4.0 * (1 - 1e-3));
    }
    const double s2 = std::sqrt(2.0);
    for (const auto& [name, factor] : std::vector<std::pair<std::string, double>>{
             {".layers.2.self_attn.v_proj.weight", s2}, {".layers.3.self_attn.out_proj.weight", 1.0},
             {".layers.4.fc1.weight", 1.0}, {".layers.2.fc2.weight", 1.0}}) {
      const auto x = param(plain.model, stack + name);
      EXPECT_TRUE(torch::allclose(param(tfix.model, stack + name), x * (t * factor), 1e-12, 0)) << kind << name;
      EXPECT_TRUE(torch::allclose(param(dtfix.model, stack + name), x * (factor / divisor), 1e-12, 0)) << kind << name;
    }
    for (const auto& p : trained->named_parameters())  // every trained parameter copied
      EXPECT_TRUE(torch::equal(param(dtfix.model, p.key()), p.value())) << kind << " " << p.key();
    EXPECT_FALSE(dtfix.model->named_parameters().contains(stack + ".layers.3.final_layer_norm.weight"));
  }
  // The stack a kind has not, and a classifier, are refused.
  auto decoder_only = test::tiny_config("post-ln");
  decoder_only.kind = model::kDecoderOnly;
  decoder_only.encoder_layers = 0;
  EXPECT_EQ(model::added_layer_problems(decoder_only, {1, 0, AddedLayerInit::kXavier}).size(), 1u);
  auto classifier = test::tiny_config("post-ln");
  classifier.kind = model::kEncoderOnly;
  classifier.decoder_layers = 0;
  classifier.classes = 2;
  EXPECT_EQ(model::added_layer_problems(classifier, {1, 0, AddedLayerInit::kXavier}).size(), 1u);
}

TEST(Stacking, RefusesSchemesWhoseLayersDependOnTheDepth) {
  auto problems = [](const std::string& scheme, AddedLayerInit init) {
    return model::added_layer_problems(test::tiny_config(scheme), {2, 0, init});
  };
  EXPECT_TRUE(problems("post-ln", AddedLayerInit::kDtFixup).empty());
  EXPECT_TRUE(problems("post-ln", AddedLayerInit::kDtFixupPostLn).empty());
  EXPECT_EQ(problems("pre-ln", AddedLayerInit::kDtFixupPostLn).size(), 1u);
  EXPECT_TRUE(problems("pre-ln", AddedLayerInit::kTFixup).empty());
  EXPECT_TRUE(problems("t-fixup", AddedLayerInit::kXavier).empty());
  EXPECT_EQ(problems("pre-ln", AddedLayerInit::kDtFixup).size(), 1u);
  EXPECT_EQ(problems("mix-ln", AddedLayerInit::kXavier).size(), 1u);
  EXPECT_EQ(problems("deepnorm", AddedLayerInit::kXavier).size(), 1u);
  EXPECT_EQ(problems("admin", AddedLayerInit::kXavier).size(), 1u);
  EXPECT_EQ(model::added_layer_problems(test::tiny_config("post-ln"), {-1, -2, AddedLayerInit::kXavier}).size(), 2u);
  EXPECT_THROW(model::add_layers(model::Seq2Seq(test::tiny_config("mix-ln")), {1, 0, AddedLayerInit::kXavier}, 1, {}),
               std::invalid_argument);
  // On a stack that ends in norm-free layers only more of them: layers with norms would sit above.
  auto grown = test::tiny_config("post-ln");
  grown.norm_free_encoder_layers = 1;
  EXPECT_EQ(model::added_layer_problems(grown, {1, 1, AddedLayerInit::kXavier}).size(), 1u);
  EXPECT_TRUE(model::added_layer_problems(grown, {0, 1, AddedLayerInit::kXavier}).empty());
  EXPECT_TRUE(model::added_layer_problems(grown, {1, 1, AddedLayerInit::kDtFixup}).empty());
  EXPECT_EQ(model::parse_added_layer_init("dt-fixup"), AddedLayerInit::kDtFixup);
  EXPECT_EQ(model::parse_added_layer_init("dt-fixup-postln"), AddedLayerInit::kDtFixupPostLn);
  EXPECT_TRUE(model::added_layers_only_init("dt-fixup-postln"));
  EXPECT_FALSE(model::added_layers_only_init("t-fixup"));
  EXPECT_THROW(model::parse_added_layer_init("fixup"), std::invalid_argument);
}
