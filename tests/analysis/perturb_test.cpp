// normlab perturb: the output change of a -scale*sign(N(0,1)) perturbation is second order in
// the scale (a first-order Taylor expansion: ||J delta||^2 grows like scale^2); the adam delta
// is one Adam step written out by hand.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "analysis/perturb.h"
#include "core/tokens.h"
#include "data/batch.h"
#include "model/seq2seq.h"
#include "../model/tiny_model.h"
#include "one_thread.h"

namespace normlab::analysis {
namespace {

// Every change field of perturb.csv, row by row (encoder then decoder; NaN for an empty field),
// of two schemes at depths 1 and 3, two seeds, on a tiny model of `kind`.
std::vector<double> changes(double scale, const std::string& name, const std::string& kind = model::kEncoderDecoder) {
  PerturbConfig c;
  c.model = test::tiny_config("post-ln");
  c.model.kind = kind;
  if (kind == model::kDecoderOnly) c.model.encoder_layers = 0;
  if (kind == model::kEncoderOnly) c.model.decoder_layers = 0;
  c.model.dropout = 0.3;  // must not matter: outputs are compared with dropout off
  c.schemes = {"post-ln", kind == model::kEncoderDecoder ? "admin" : "pre-ln"};
  c.depths = {1, 3};
  c.inputs.vocab_size = 30;
  c.inputs.sentences = 4;
  c.inputs.length = kind == model::kEncoderOnly ? 12 : 6;  // an encoder's masks need tokens
  c.inputs.fit_model(c.model);
  c.seeds = 2;
  c.scale = scale;
  c.out = (std::filesystem::temp_directory_path() / ("normlab_perturb_test_" + name)).string();
  run_perturb(c);
  std::ifstream in(c.out + "/perturb.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "scheme,depth,seed,delta,encoder_change,decoder_change");
  auto number = [](const std::string& f) { return f.empty() ? std::nan("") : std::stod(f); };
  std::vector<double> out;
  while (std::getline(in, line)) {
    const auto enc = line.find(",sign,") + 6, comma = line.rfind(',');
    out.push_back(number(line.substr(enc, comma - enc)));
    out.push_back(number(line.substr(comma + 1)));
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

// A single-stack model's logits change in its stack's column (fairseq's: a causal LM's decoder,
// RoBERTa's encoder with its LM head), the other column empty; second order in the scale too.
TEST(Perturb, SingleStackModelsChangeInTheirStacksColumn) {
  const test::OneThread one_thread;
  for (const std::string kind : {model::kDecoderOnly, model::kEncoderOnly}) {
    const auto small = changes(1e-4, kind + "_small", kind), big = changes(2e-4, kind + "_big", kind);
    ASSERT_EQ(small.size(), 16u) << kind;
    const size_t own = kind == model::kDecoderOnly ? 1 : 0;
    for (size_t i = 0; i < small.size(); ++i) {
      if (i % 2 != own) {
        EXPECT_TRUE(std::isnan(small[i])) << kind << " row " << i / 2;
        continue;
      }
      EXPECT_GT(small[i], 0.0) << kind;
      EXPECT_NEAR(big[i] / small[i], 4.0, 0.05) << kind << " row " << i / 2;
    }
  }
}

// --delta adam, W* - W on every 2-D parameter, against Adam's first step by hand (Kingma & Ba
// 2015, Alg. 1: with bias correction m_hat = g and v_hat = g^2, so the step is
// -lr * g / (|g| + eps), whatever the betas) on the gradient of PyTorch's own label-smoothed
// cross entropy (its label_smoothing is the uniform formula). Biases, LayerNorm, Admin's omega
// and ReZero's alpha stay bit-identical; a tied table (share all) moves by one step, not two.
TEST(Perturb, AdamDeltaIsOneAdamStepOnTheMatrices) {
  const test::OneThread one_thread;
  PerturbConfig c;
  c.delta = DeltaKind::kAdam;
  c.lr = 3e-3;
  c.label_smoothing = 0.1;
  const double eps = 1e-8;  // REFERENCE §2
  const std::vector<data::Sentence> src = {{5, 9, 12, 7}, {20, 4}, {11, 11, 29}};
  const std::vector<data::Sentence> tgt = {{6, 8}, {13, 14, 15, 16, 17}, {25}};
  const auto batch = data::make_batch(src, tgt, 0, src.size());
  for (const char* scheme : {"post-ln", "admin", "rezero"}) {
    auto config = test::tiny_config(scheme);
    config.share = model::SharedEmbeddings::kAll;
    model::Seq2Seq net(config);
    model::initialize(net, 3);
    net->to(torch::kFloat64);  // W* - W exact to rounding of W, not of float32
    net->eval();

    net->zero_grad();
    const auto logits = net->forward(batch.src, batch.prev_output_tokens);  // (B,T,V)
    namespace F = torch::nn::functional;
    F::cross_entropy(logits.reshape({-1, logits.size(-1)}), batch.target.reshape({-1}),
                     F::CrossEntropyFuncOptions().ignore_index(kPad).label_smoothing(c.label_smoothing))
        .backward();  // mean over the non-padding target tokens
    std::map<std::string, torch::Tensor> before, grad;
    for (const auto& p : net->named_parameters()) {
      before[p.key()] = p.value().detach().clone();
      grad[p.key()] = p.value().grad().clone();
    }
    net->zero_grad();

    perturb_weights(net, c, batch, 1);
    int64_t matrices = 0, others = 0;
    for (const auto& p : net->named_parameters()) {
      const auto& w0 = before.at(p.key());
      const auto& g = grad.at(p.key());
      const auto delta = p.value().detach() - w0;
      if (p.value().dim() == 2) {
        ++matrices;
        const auto expected = -c.lr * g / (g.abs() + eps);
        EXPECT_TRUE(torch::allclose(delta, expected, 1e-9, 1e-12))
            << scheme << " " << p.key() << ": max |delta - expected| "
            << (delta - expected).abs().max().item<double>();
        EXPECT_GT(g.abs().max().item<double>(), 0.0) << scheme << " " << p.key();
      } else {
        ++others;
        EXPECT_TRUE(torch::equal(p.value().detach(), w0)) << scheme << " " << p.key() << " moved";
      }
    }
    EXPECT_GT(matrices, 10) << scheme;
    EXPECT_GT(others, 10) << scheme;
  }
}

}  // namespace
}  // namespace normlab::analysis
