// Configuration validation: every problem reported, nonsensical scheme combinations rejected.
#include <gtest/gtest.h>

#include "model/config.h"

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
    EXPECT_STREQ(e.what(), "--norm: unknown value 'middle', expected post|pre|none");
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
