// normlab perturb: the output change of a -scale*sign(N(0,1)) perturbation is second order in
// the scale (a first-order Taylor expansion: ||J delta||^2 grows like scale^2).
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "analysis/perturb.h"
#include "../model/tiny_model.h"
#include "one_thread.h"

namespace normlab::analysis {
namespace {

std::vector<double> changes(double scale, const std::string& name) {
  PerturbConfig c;
  c.model = test::tiny_config("post-ln");
  c.model.dropout = 0.3;  // must not matter: outputs are compared with dropout off
  c.schemes = {"post-ln", "admin"};
  c.depths = {1, 3};
  c.inputs.vocab_size = 30;
  c.inputs.sentences = 4;
  c.inputs.length = 6;
  c.seeds = 2;
  c.scale = scale;
  c.out = (std::filesystem::temp_directory_path() / ("normlab_perturb_test_" + name)).string();
  run_perturb(c);
  std::ifstream in(c.out + "/perturb.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "scheme,depth,seed,delta,encoder_change,decoder_change");
  std::vector<double> out;
  while (std::getline(in, line)) {
    const auto enc = line.find(",sign,") + 6;
    out.push_back(std::stod(line.substr(enc)));
    out.push_back(std::stod(line.substr(line.rfind(',') + 1)));
  }
  return out;
}

TEST(Perturb, ChangeIsQuadraticInTheScale) {
  const test::OneThread one_thread;
  const auto small = changes(1e-4, "small"), big = changes(2e-4, "big");
  ASSERT_EQ(small.size(), 16u);  // 2 schemes x 2 depths x 2 seeds, encoder and decoder
  for (size_t i = 0; i < small.size(); ++i) {
    EXPECT_GT(small[i], 0.0);
    EXPECT_NEAR(big[i] / small[i], 4.0, 0.05) << "row " << i / 2;
  }
}

}  // namespace
}  // namespace normlab::analysis
