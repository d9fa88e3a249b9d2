// muP's coordinate check (analysis/coord_check.h) at tiny widths 16 to 128: after 3 Adam updates
// at one lr, no activation grows faster than width^0.25 under mup, while under sp some activation
// grows at least like width^0.5 (the log-log slope over the widths, as Yang et al. Fig. 5 plots it).
// Measured with `normlab coord-check --layers 2 --heads 2 --vocab-size 40 --widths 16,32,64,128
// --seeds 2` (2026-11-27): largest slope at the 4th pass sp 1.50 / 1.36 / 0.93, mup 0.17 / 0.04 /
// -0.03 (encoder-decoder / decoder-only / encoder-only). With widths 16-64 only, the encoder-only
// sp slope was 0.40: the smallest widths are too noisy for its masked-LM loss on ~14 tokens.
#include <gtest/gtest.h>

#include <algorithm>

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
