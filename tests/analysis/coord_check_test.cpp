// muP's coordinate check (analysis/coord_check.h) at tiny widths 16 to 128: after 3 Adam updates
// at one lr, no activation grows faster than width^0.25 under mup, while under sp some activation
// grows at least like width^0.5 (the log-log slope over the widths, as Yang et al. Fig. 5 plots it).
// Measured with `normlab coord-check --layers 2 --heads 2 --vocab-size 40 --widths 16,32,64,128
// --seeds 2` (2026-11-27): largest slope at the 4th pass sp 1.50 / 1.36 / 0.93, mup 0.17 / 0.04 /
// -0.03 (encoder-decoder / decoder-only / encoder-only). With widths 16-64 only, the encoder-only
// sp slope was 0.40: the smallest widths are too noisy for its masked-LM loss on ~14 tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "analysis/coord_check.h"

using namespace normlab;

namespace {

analysis::CoordCheckConfig tiny(const char* kind) {
  analysis::CoordCheckConfig c;
  c.model.kind = kind;
  c.model.d_model = 16;
  c.model.ffn_dim = 32;
  c.model.heads = 2;
  c.model.encoder_layers = kind == std::string(model::kDecoderOnly) ? 0 : 2;
  c.model.decoder_layers = kind == std::string(model::kEncoderOnly) ? 0 : 2;
  c.model.src_vocab_size = c.model.tgt_vocab_size = 40;
  c.model.scheme = model::scheme_by_name("pre-ln");
  c.widths = {16, 32, 64, 128};
  c.steps = 4;
  c.seeds = 2;
  return c;
}

double largest_slope(const std::vector<analysis::CoordSlope>& slopes, const std::string& p, int64_t step) {
  double out = -1e9;
  for (const auto& s : slopes)
    if (s.parametrisation == p && s.step == step) out = std::max(out, s.slope);
  return out;
}

}  // namespace

TEST(CoordCheck, FlatUnderMupGrowingUnderSp) {
  for (const char* kind : {model::kEncoderDecoder, model::kDecoderOnly, model::kEncoderOnly}) {
    const auto c = tiny(kind);
    ASSERT_TRUE(c.problems().empty()) << c.problems().front();
    const auto slopes = analysis::coord_slopes(analysis::coord_check(c));
    EXPECT_LT(largest_slope(slopes, "mup", c.steps), 0.25) << kind;
    EXPECT_GT(largest_slope(slopes, "sp", c.steps), 0.5) << kind;
  }
}

// u-muP (model/unit_scaling.h) on the model it is defined for (decoder-only, Pre-LN, GPT-2's form,
// untied readout): flat across widths as muP is (Blake et al. 2024 keep muP's abc-rules), and at
// initialisation unit-scaled by construction: a unit-variance Gaussian has mean |x| = sqrt(2/pi) =
// 0.798, and the stream starts as one ((E + P)/sqrt(2), E, P ~ N(0, 1)) and stays near one (each
// block mixes x and a branch the package scales to about unit size with weights whose squares sum
// to 1; its attention and GELU scales are empirical models, so only near). Measured with `normlab
// coord-check ... --form gpt2 --share none --dropout 0 --parametrisations sp,u-mup` as below (widths
// 16-128, 2 seeds, 2026-11-28): every block output's l1 at init 0.81-0.96 (sp's largest slope at
// init 1.18), u-mup's largest slope at the 4th pass 0.13 (sp's 2.18).
TEST(CoordCheck, FlatAndUnitScaledUnderUmup) {
  auto c = tiny(model::kDecoderOnly);
  model::apply_form("gpt2", c.model);
  c.model.share = model::SharedEmbeddings::kNone;
  c.parametrisations = {model::Parametrisation::kSp, model::Parametrisation::kUmup};
  ASSERT_TRUE(c.problems().empty()) << c.problems().front();
  const auto records = analysis::coord_check(c);
  const auto slopes = analysis::coord_slopes(records);
  EXPECT_LT(largest_slope(slopes, "u-mup", c.steps), 0.25);
  EXPECT_GT(largest_slope(slopes, "sp", c.steps), 0.5);
  const double unit_l1 = std::sqrt(2.0 / 3.14159265358979323846);
  int checked = 0;
  for (const auto& r : records) {
    if (r.parametrisation != "u-mup" || r.step != 1 || r.site.find(".output") == std::string::npos) continue;
    EXPECT_GT(r.l1, 0.8 * unit_l1) << r.site << " at width " << r.width;
    EXPECT_LT(r.l1, 1.25 * unit_l1) << r.site << " at width " << r.width;
    ++checked;
  }
  EXPECT_EQ(checked, 4 * 2 * 2);  // widths x layers x blocks
}

TEST(CoordCheck, UmupRefusesWhatItIsNotDefinedFor) {
  auto c = tiny(model::kDecoderOnly);  // fairseq's form: sinusoidal positions, ReLU, scaled, tied
  c.parametrisations = {model::Parametrisation::kUmup};
  const auto problems = c.problems();
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems.front().find("--parametrisation u-mup"), std::string::npos) << problems.front();
  c.optimizer = train::OptimizerKind::kSgd;
  model::apply_form("gpt2", c.model);
  c.model.share = model::SharedEmbeddings::kNone;
  const auto sgd = c.problems();
  ASSERT_EQ(sgd.size(), 1u);
  EXPECT_NE(sgd.front().find("--optimizer sgd has no u-muP rule"), std::string::npos) << sgd.front();
}
