// Configuration validation: every problem reported, nonsensical scheme combinations rejected.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/model.h"

using namespace normlab::model;

namespace {

ModelConfig valid() {
  ModelConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 100;
  return c;
}

bool mentions(const std::vector<std::string>& problems, const std::string& text) {
  for (const auto& p : problems)
    if (p.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(ModelConfig, EveryNamedSchemeIsValid) {
  for (const auto& name : scheme_names()) {
    auto c = valid();
    c.scheme = scheme_by_name(name);
    EXPECT_TRUE(c.problems().empty()) << name;
  }
}

TEST(ModelConfig, ListsEveryProblemAtOnce) {
  auto c = valid();
  c.d_model = 100;
  c.heads = 3;
  c.ffn_dim = 0;
  c.dropout = 1.5;
  const auto p = c.problems();
  EXPECT_TRUE(mentions(p, "not divisible by --heads 3"));
  EXPECT_TRUE(mentions(p, "--ffn-dim must be positive"));
  EXPECT_TRUE(mentions(p, "--dropout must be in [0, 1)"));
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

TEST(ModelConfig, RejectsNonsensicalCombinations) {
  struct Case {
    NormPlacement norm;
    ResidualForm residual;
    InitMethod init;
    const char* why;
  };
  const Case cases[] = {
      {NormPlacement::kPre, ResidualForm::kAdmin, InitMethod::kAdminProfile, "needs --norm post"},
      {NormPlacement::kNone, ResidualForm::kDeepNorm, InitMethod::kDeepNorm, "needs --norm post"},
      {NormPlacement::kPost, ResidualForm::kReZero, InitMethod::kReZero, "needs --norm none"},
      {NormPlacement::kPre, ResidualForm::kPlain, InitMethod::kTFixup, "without LayerNorm"},
      {NormPlacement::kPost, ResidualForm::kPlain, InitMethod::kAdminClosedForm, "takes --init"},
      {NormPlacement::kNone, ResidualForm::kReZero, InitMethod::kXavier, "takes --init rezero"},
      {NormPlacement::kPost, ResidualForm::kPlain, InitMethod::kDeepNorm, "takes --init"},
  };
  for (const auto& k : cases) {
    auto c = valid();
    c.scheme = {k.norm, k.residual, k.init};
    EXPECT_TRUE(mentions(c.problems(), k.why))
        << to_string(k.norm) << "/" << to_string(k.residual) << "/" << to_string(k.init);
  }
}

TEST(ModelConfig, RejectsNormSettingsWithoutTheirPlacement) {
  auto c = valid();
  c.scheme = scheme_by_name("t-fixup");
  c.scheme.norm_kind = NormKind::kRMSNorm;  // no norm anywhere to be an RMSNorm
  EXPECT_TRUE(mentions(c.problems(), "there is no norm to make one"));
  c.scheme.qk_norm = true;  // now there is: the QK-norm
  EXPECT_TRUE(c.problems().empty());

  c = valid();
  c.scheme = scheme_by_name("post-ln");
  c.scheme.ln_scaling = true;
  EXPECT_TRUE(mentions(c.problems(), "--ln-scaling scales Pre-LN's norms"));
  c.scheme.ln_scaling = false;
  c.scheme.mix_alpha = 0.5;
  EXPECT_TRUE(mentions(c.problems(), "--mix-ln-alpha applies to --norm mix only"));
  c.scheme.norm = NormPlacement::kMix;
  EXPECT_TRUE(c.problems().empty());
  c.scheme.mix_alpha = 1.5;
  EXPECT_TRUE(mentions(c.problems(), "--mix-ln-alpha must be in [0, 1]"));
}

// Mix-LN (Li et al. 2024): Post-LN in layers l < floor(alpha L), Pre-LN in the rest; LayerNorm
// scaling (Sun et al. 2025): 1/sqrt(l) for l = 1..L.
TEST(ModelConfig, PerLayerSettings) {
  auto s = scheme_by_name("mix-ln");
  EXPECT_EQ(s.mix_alpha, 0.25);
  for (int64_t i = 0; i < 12; ++i)  // floor(0.25 * 12) = 3 post layers
    EXPECT_EQ(layer_placement(s, i, 12), i < 3 ? NormPlacement::kPost : NormPlacement::kPre) << i;
  EXPECT_EQ(layer_placement(s, 0, 3), NormPlacement::kPre);  // floor(0.75) = 0
  s.mix_alpha = 1.0;
  EXPECT_EQ(layer_placement(s, 5, 6), NormPlacement::kPost);
  EXPECT_EQ(layer_placement(scheme_by_name("peri-ln"), 0, 6), NormPlacement::kPeri);

  const auto lns = scheme_by_name("lns");
  EXPECT_DOUBLE_EQ(norm_output_scale(lns, 0), 1.0);
  EXPECT_DOUBLE_EQ(norm_output_scale(lns, 3), 0.5);
  EXPECT_DOUBLE_EQ(norm_output_scale(scheme_by_name("pre-ln"), 3), 1.0);
  for (const char* name : {"pre-ln", "peri-ln", "mix-ln", "dyt", "rmsnorm-pre", "lns"})
    EXPECT_TRUE(has_final_norm(scheme_by_name(name))) << name;
  for (const char* name : {"post-ln", "t-fixup", "admin", "rezero", "deepnorm"})
    EXPECT_FALSE(has_final_norm(scheme_by_name(name))) << name;
}

// The norm-free last layers of a stack (DT-Fixup's added layers, model/stacking.h): none there,
// the scheme's placement below; counts within the stack, with the plain residual only.
TEST(ModelConfig, NormFreeLastLayers) {
  auto c = valid();
  c.scheme = scheme_by_name("mix-ln");
  c.encoder_layers = 8;
  c.norm_free_encoder_layers = 3;
  for (int64_t i = 0; i < 8; ++i)  // floor(0.25 * 8) = 2 post layers, then pre, then 3 without norms
    EXPECT_EQ(stack_layer_placement(c, false, i),
              i < 2 ? NormPlacement::kPost : i < 5 ? NormPlacement::kPre : NormPlacement::kNone) << i;
  EXPECT_EQ(stack_layer_placement(c, true, c.decoder_layers - 1), layer_placement(c.scheme, c.decoder_layers - 1,
                                                                                  c.decoder_layers));
  EXPECT_TRUE(c.problems().empty());
  c.norm_free_decoder_layers = c.decoder_layers + 1;
  c.scheme.residual = ResidualForm::kAdmin;
  EXPECT_TRUE(mentions(c.problems(), "norm_free_decoder_layers must be in 0.."));
  EXPECT_TRUE(mentions(c.problems(), "layers without norms need the plain residual"));
}

TEST(ModelConfig, JsonRoundTripAndOlderFiles) {
  auto c = valid();
  c.scheme = scheme_by_name("peri-ln");
  c.scheme.norm_kind = NormKind::kDyT;
  c.scheme.qk_norm = true;
  nlohmann::json j = c;
  const auto back = j.get<ModelConfig>();
  EXPECT_EQ(back.scheme.norm, NormPlacement::kPeri);
  EXPECT_EQ(back.scheme.norm_kind, NormKind::kDyT);
  EXPECT_TRUE(back.scheme.qk_norm);
  // Written before the norm settings existed: LayerNorm, no scaling, no QK-norm.
  for (const char* key : {"norm_kind", "mix_ln_alpha", "ln_scaling", "qk_norm"}) j.erase(key);
  const auto old = j.get<ModelConfig>();
  EXPECT_EQ(old.scheme.norm_kind, NormKind::kLayerNorm);
  EXPECT_FALSE(old.scheme.qk_norm);
  EXPECT_FALSE(old.scheme.ln_scaling);
  EXPECT_EQ(old.scheme.mix_alpha, kDefaultMixLnAlpha);
}

TEST(ModelConfig, ShareAllNeedsOneVocabulary) {
  auto c = valid();
  c.share = SharedEmbeddings::kAll;
  c.tgt_vocab_size = 90;
  EXPECT_TRUE(mentions(c.problems(), "--share all needs one joint vocabulary"));
}

TEST(ModelConfig, ParsersNameTheOptionAndTheChoices) {
  try {
    parse_norm_placement("middle");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--norm: unknown value 'middle', expected post|pre|peri|mix|none");
  }
  EXPECT_THROW(scheme_by_name("post_ln"), std::invalid_argument);
  ModelConfig c;
  EXPECT_THROW(apply_preset("huge", c), std::invalid_argument);
}

TEST(ModelConfig, PresetsAreThePapersSizes) {
  ModelConfig c;
  apply_preset("big", c);
  EXPECT_EQ(c.d_model, 1024);
  EXPECT_EQ(c.ffn_dim, 4096);
  EXPECT_EQ(c.heads, 16);
  apply_preset("deep-narrow", c);
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.ffn_dim, 128);
  EXPECT_EQ(c.heads, 2);
}

// The memory check's estimate against the built model: with the decoder's table tied to its
// output (the default), every matrix and table is one stored 2-D parameter.
TEST(ModelConfig, ParameterEstimateIsEveryMatrixAndTable) {
  auto c = valid();
  c.d_model = 16;
  c.ffn_dim = 24;
  c.heads = 2;
  c.encoder_layers = 2;
  c.decoder_layers = 3;
  c.src_vocab_size = 30;
  c.tgt_vocab_size = 40;
  const auto net = create_model(c);
  int64_t entries = 0;
  for (const auto& p : net->parameters())
    if (p.dim() == 2) entries += p.numel();
  EXPECT_EQ(parameter_estimate(c), static_cast<double>(entries));
}

// Issue 34: a model that cannot fit is refused naming its sizes, before anything is allocated.
TEST(ModelConfig, AModelLargerThanMemoryIsRefused) {
  auto c = valid();
  c.ffn_dim = 100000000000;
  const auto p = c.problems();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_TRUE(mentions(p, "--ffn-dim 100000000000")) << p[0];
  EXPECT_TRUE(mentions(p, "GiB in fp32, more than this machine's")) << p[0];
  EXPECT_TRUE(valid().problems().empty());
}
