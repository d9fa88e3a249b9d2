// Closed forms against published values (REFERENCE §1) and hand-computed cases.
#include <cmath>

#include <gtest/gtest.h>

#include "model/scheme_constants.h"

using namespace normlab::model;

TEST(TFixup, FactorsForSixLayersMatchTheAuthorsCode) {
  EXPECT_NEAR(t_fixup_encoder_factor(6), 0.4281, 5e-5);
  EXPECT_NEAR(t_fixup_decoder_factor(6), 0.3689, 5e-5);
  // Embedding factors are (9N)^(-1/4): N = 1 gives 9^(-1/4) = 1/sqrt(3).
  EXPECT_NEAR(t_fixup_encoder_embedding_factor(1), 1.0 / std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(t_fixup_decoder_embedding_factor(1), 1.0 / std::sqrt(3.0), 1e-12);
}

TEST(Admin, ClosedFormOmegaMatchesAdminTorch) {
  EXPECT_NEAR(admin_closed_form_omega(12), 2.017, 5e-4);
  EXPECT_NEAR(admin_closed_form_omega(36), 3.041, 5e-4);
}

TEST(DeepNorm, ConstantsForOneLayerAreThePapersCoefficients) {
  // N = M = 1: (N^4 M)^(+-1/16) = 1, so the encoder constants are the bare coefficients.
  EXPECT_NEAR(deepnorm_encoder_alpha(1, 1), 0.81, 1e-12);
  EXPECT_NEAR(deepnorm_encoder_beta(1, 1), 0.87, 1e-12);
  EXPECT_NEAR(deepnorm_decoder_alpha(1), 1.3160740129524924, 1e-12);  // 3^(1/4)
  EXPECT_NEAR(deepnorm_decoder_beta(1), 0.5372849659117709, 1e-12);   // 12^(-1/4)
  // N = 16, M = 1: (16^4)^(1/16) = 2.
  EXPECT_NEAR(deepnorm_encoder_alpha(16, 1), 1.62, 1e-12);
  EXPECT_NEAR(deepnorm_encoder_beta(16, 1), 0.435, 1e-12);
}
